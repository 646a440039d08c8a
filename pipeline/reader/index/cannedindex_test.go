package index

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/testutil"
)

// realTexts loads the real canned-index text entries quoted by the OONI
// pipeline.
func realTexts(t testing.TB) []map[string]any {
	t.Helper()
	f, err := os.Open("../../../testdata/ooni/canned_index_text_entries_quoted.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]any
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	if len(out) != 12 {
		t.Fatalf("%d real entries, want 12", len(out))
	}
	return out
}

// pyJSON writes v as Python's json.dump(sort_keys=True) does: ", " and ": "
// separators.
func pyJSON(t testing.TB, v any) string {
	b, err := json.Marshal(v) // encoding/json sorts map keys
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	inString, escaped := false, false
	for _, c := range string(b) {
		out.WriteRune(c)
		switch {
		case escaped:
			escaped = false
		case c == '\\' && inString:
			escaped = true
		case c == '"':
			inString = !inString
		case !inString && (c == ',' || c == ':'):
			out.WriteByte(' ')
		}
	}
	return out.String()
}

// sampleIndex builds an index from the real entries: one tar row with the
// first 10 and two as-is rows, as canning.py writes it.
func sampleIndex(t testing.TB) (string, []map[string]any) {
	texts := realTexts(t)
	var b strings.Builder
	tarTexts := make([]any, 0, 10)
	for _, m := range texts[:10] {
		tarTexts = append(tarTexts, m)
	}
	b.WriteString(pyJSON(t, map[string]any{"canned": tarTexts, "file_crc32": -156566611, "file_sha1": "OSVZy4G4MaKizTNl5m3+LGoSdW4=",
		"file_size": 18132131, "filename": "2017-08-28/web_connectivity.02.tar.lz4", "text_size": 362462}) + "\n")
	for _, m := range texts[10:] {
		row := map[string]any{"file_crc32": 927831702, "file_sha1": "q7cMrExBstnuBAWsSUHhh2dZcLQ=", "file_size": 1234,
			"filename": m["textname"].(string) + ".lz4"}
		for k, v := range m {
			row[k] = v
		}
		b.WriteString(pyJSON(t, row) + "\n")
	}
	return b.String(), texts
}

func gz(s string) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	w.Name = "index.json"
	w.Write([]byte(s))
	w.Close()
	return buf.Bytes()
}

func readAll(t testing.TB, data []byte) ([]CannedFile, []error) {
	return readAllMax(t, data, MaxIndexRow)
}

func readAllMax(t testing.TB, data []byte, maxRow int) ([]CannedFile, []error) {
	ir, err := NewCannedReader(bytes.NewReader(data))
	if err != nil {
		return nil, []error{err}
	}
	ir.MaxRow = maxRow
	var files []CannedFile
	var errs []error
	for i := 0; ; i++ {
		if i > 1<<22 {
			t.Fatalf("Next did not end after %d calls", i)
		}
		f, err := ir.Next()
		if errors.Is(err, io.EOF) {
			return files, errs
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		files = append(files, f)
	}
}

func TestCannedIndex_RealEntries(t *testing.T) {
	index, texts := sampleIndex(t)
	for name, data := range map[string][]byte{
		"gzip":                  gz(index),
		"plain, named .gz":      []byte(index),
		"plain, empty-line EOF": []byte(index + "\n"),
	} {
		t.Run(name, func(t *testing.T) {
			files, errs := readAll(t, data)
			if len(errs) > 0 || len(files) != 3 {
				t.Fatalf("%d files, errors %v", len(files), errs)
			}
			if !files[0].Tar || len(files[0].Texts) != 10 || files[0].CRC32 != -156566611 || files[0].TextSize != 362462 {
				t.Errorf("tar row = %+v", files[0])
			}
			var got []Text
			for _, f := range files {
				got = append(got, f.Texts...)
			}
			for i, m := range texts {
				sum, _ := base64.StdEncoding.DecodeString(m["text_sha1"].(string))
				g := got[i]
				if g.Textname != m["textname"] || g.Size != int64(m["text_size"].(float64)) ||
					g.CRC32 != int32(m["text_crc32"].(float64)) || !bytes.Equal(g.SHA1[:], sum) {
					t.Errorf("entry %d = %+v, want %v", i, g, m)
				}
			}
			if files[1].Tar || files[1].Filename != texts[10]["textname"].(string)+".lz4" {
				t.Errorf("as-is row = %+v", files[1])
			}
		})
	}
}

func TestCannedIndex_BadRows(t *testing.T) {
	index, _ := sampleIndex(t)
	good := strings.Split(strings.TrimSuffix(index, "\n"), "\n")
	for _, tc := range []struct{ name, row, want string }{
		{"not JSON", `{"filename": `, "not a JSON object"},
		{"missing file_sha1", `{"file_crc32": 1, "file_size": 1, "filename": "2017-08-28/a.0.tar.lz4", "text_size": 1, "canned": []}`, "missing one of"},
		{"bad base64", strings.Replace(good[1], `"file_sha1": "q7cMrExBstnuBAWsSUHhh2dZcLQ="`, `"file_sha1": "nope!"`, 1), "not a base64 SHA-1"},
		{"short sha1", strings.Replace(good[1], `"file_sha1": "q7cMrExBstnuBAWsSUHhh2dZcLQ="`, `"file_sha1": "q7cM"`, 1), "not a base64 SHA-1"},
		{"unsigned crc", strings.Replace(good[1], `"file_crc32": 927831702`, `"file_crc32": 4138400685`, 1), "signed 32-bit"},
		{"negative size", strings.Replace(good[1], `"file_size": 1234`, `"file_size": -1`, 1), "not a size"},
		{"float size", strings.Replace(good[1], `"file_size": 1234`, `"file_size": 1.5`, 1), "not a size"},
		{"neither", `{"file_crc32": 1, "file_sha1": "OSVZy4G4MaKizTNl5m3+LGoSdW4=", "file_size": 1, "filename": "x.lz4", "text_size": 1}`, "neither"},
		{"tar row for as-is name", strings.Replace(good[0], "web_connectivity.02.tar.lz4", "x.json.lz4", 1), "not a .tar.lz4"},
		{"trailing data", good[1] + " {}", "data after"},
		{"empty line inside", "", "empty line before the end"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data := good[0] + "\n" + tc.row + "\n" + good[1] + "\n"
			files, errs := readAll(t, []byte(data))
			if len(files) != 2 || len(errs) != 1 {
				t.Fatalf("%d files, errors %v; want 2 files and 1 error", len(files), errs)
			}
			var ie *Error
			if !errors.As(errs[0], &ie) || ie.Line != 2 || !errors.Is(errs[0], ErrIndex) || !strings.Contains(ie.Error(), tc.want) {
				t.Errorf("error %v, want line 2 with %q", errs[0], tc.want)
			}
		})
	}
}

// Every truncation of a gzip index ends in rows and then an error or EOF,
// never a panic or a hang; truncations inside the deflate stream or its
// trailer are reported.
func TestCannedIndex_LongRow(t *testing.T) {
	// The long row is skipped, and the rows after it are read: a last
	// line too, with or without its "\n".
	index, _ := sampleIndex(t)
	rows := strings.SplitAfter(strings.TrimSuffix(index, "\n"), "\n")
	for _, tail := range []string{"\n", ""} {
		data := rows[0] + strings.Repeat(" ", 20000) + "\n" + strings.Join(rows[1:], "") + tail
		files, errs := readAllMax(t, gz(data), 4096)
		if len(errs) != 1 || !strings.Contains(errs[0].Error(), "index line 2: row longer than 4096 bytes; skipped") {
			t.Errorf("errors %v", errs)
		}
		if len(files) != len(rows) || len(rows) < 3 {
			t.Fatalf("%d rows read, want %d (every row but the long one)", len(files), len(rows))
		}
	}
}

func TestCannedIndex_Truncated(t *testing.T) {
	index, _ := sampleIndex(t)
	data := gz(index)
	for cut := 0; cut < len(data); cut++ {
		files, errs := readAll(t, data[:cut])
		if cut > 10 && len(errs) == 0 {
			t.Errorf("cut at %d of %d: %d files and no error", cut, len(data), len(files))
		}
	}
	// A flipped byte in the compressed data or the CRC is an error.
	bad := bytes.Clone(data)
	bad[len(bad)-6] ^= 0xff
	if _, errs := readAll(t, bad); len(errs) == 0 {
		t.Error("corrupt CRC not reported")
	}
}

func FuzzCannedIndex(f *testing.F) {
	index, _ := sampleIndex(f)
	f.Add([]byte(index))
	f.Add(gz(index))
	f.Add([]byte("{}\n\n{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		files, _ := readAllMax(t, data, 1<<20)
		for _, file := range files {
			if file.Size < 0 || file.TextSize < 0 {
				t.Fatalf("negative size in %+v", file)
			}
			if file.Tar != strings.HasSuffix(file.Filename, ".tar.lz4") || !file.Tar && len(file.Texts) != 1 {
				t.Fatalf("row kind and filename disagree: %+v", file)
			}
		}
	})
}

// A hostile row (a gzip bomb of spaces, 4× MaxIndexRow) is skipped with at
// most MaxIndexRow allocated for it, and the rows after it are read.
func TestCannedIndex_HostileRowMemory(t *testing.T) {
	index, _ := sampleIndex(t)
	rows := strings.SplitAfter(strings.TrimSuffix(index, "\n"), "\n")
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write([]byte(rows[0]))
	spaces := bytes.Repeat([]byte(" "), 1<<20)
	for range 4 * MaxIndexRow >> 20 {
		zw.Write(spaces)
	}
	zw.Write([]byte("\n" + strings.Join(rows[1:], "")))
	testutil.Check(t, zw.Close())
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	files, errs := readAllMax(t, buf.Bytes(), MaxIndexRow)
	runtime.ReadMemStats(&after)
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "skipped") || len(files) != len(rows) {
		t.Fatalf("%d rows, errors %v; want %d rows and the long one skipped", len(files), errs, len(rows))
	}
	// The race detector empties sync.Pools at random, so the decompressor
	// allocates anew: the bound is only checked without it.
	if got := after.TotalAlloc - before.TotalAlloc; !testutil.RaceEnabled && got > MaxIndexRow+8<<20 {
		t.Errorf("reading the index allocated %d MiB, want at most MaxIndexRow (%d MiB) and a little", got>>20, MaxIndexRow>>20)
	}
}

// Rows the fast reader takes are read by the JSON one to the same file;
// the sample index's rows are all taken.
func FuzzCannedRowFast(f *testing.F) {
	index, _ := sampleIndex(f)
	for _, row := range strings.Split(strings.TrimSpace(index), "\n") {
		if _, ok := parseCannedRowFast([]byte(row)); !ok {
			f.Fatalf("the fast reader does not take a row as the canning step writes it: %s", row)
		}
		f.Add([]byte(row))
	}
	f.Add([]byte(`{"canned": [], "file_crc32": 1, "file_sha1": "q7tUjCvlf3DlMhRTHGmePYIq5zc=", "file_size": 2, "filename": "a.tar.lz4", "text_size": 3}`))
	f.Fuzz(func(t *testing.T, row []byte) {
		fast, ok := parseCannedRowFast(row)
		if !ok {
			return
		}
		full, err := parseCannedRowJSON(row)
		if err != nil {
			t.Fatalf("fast reader takes a row the JSON one refuses (%v): %q", err, row)
		}
		if !reflect.DeepEqual(fast, full) {
			t.Fatalf("fast %+v, JSON %+v: %q", fast, full, row)
		}
	})
}
