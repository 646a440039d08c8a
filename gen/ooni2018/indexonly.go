package ooni2018

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/backfill-dev/backfill/gen/corpus"
)

// ManifestName is the report manifest an index-only corpus is written with:
// TEXTNAME<TAB>N lines of the reports its indexes list, the input of
// backfill audit.
const ManifestName = "manifest.tsv"

// IndexStats is what WriteIndexes wrote.
type IndexStats struct {
	Buckets, Files, Reports int
	Measurements            int64 // blobs: datum and badblob rows
	Badblobs                int64
	IndexBytes              int64 // the index files, compressed
	TextBytes               int64 // the decompressed text the indexes describe
}

// Sizes of the measurements an index-only corpus describes. It holds no
// data, so they are drawn: between indexBlobMin and indexBlobMin +
// indexBlobSpan bytes. One blob in indexBadblobEvery is a badblob.
const (
	indexBlobMin      = 600
	indexBlobSpan     = 4000
	indexBadblobEvery = 50000
)

// WriteIndexes writes the autoclaved indexes of the full-scale
// corpus of GenerateManifest (the same seed, the same reports in the
// same buckets) into dir, one index.json.gz per bucket folder and no data
// files, and the reports it lists to dir/manifest.tsv. Of every every
// buckets in a row, the first run are written (every 1, run 1: all of
// them). A run of several keeps what a sparse pick loses: the reports
// uploaded again one to three days later, and each bucket's reports of the
// day before, whose IDs fall among those of the bucket before. The rows
// are those OONI's autoclaving wrote (file, frame, report, datum, badblob
// and their ends, sort_keys JSON), over tar files of the reports of one
// test each, cut at 64 MiB of text, flushed in frames of FrameFlush
// bytes. Sizes, offsets and hashes are made up (drawn from a generator
// seeded by each file's name, so the same seed writes the same bytes):
// nothing can check them against data, and backfill run --from-index
// reads none.
func WriteIndexes(dir string, seed uint64, every, run int, progress func(IndexStats)) (IndexStats, error) {
	var st IndexStats
	if every < 1 || run < 1 || run > every {
		return st, fmt.Errorf("corpus: every must be at least 1 and run from 1 to every, not %d and %d", every, run)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return st, err
	}
	mf, err := os.Create(filepath.Join(dir, ManifestName))
	if err != nil {
		return st, err
	}
	defer mf.Close()
	manifest := bufio.NewWriterSize(mf, 1<<20)
	pr, pw := io.Pipe()
	go func() {
		_, err := GenerateManifest(pw, seed)
		pw.CloseWithError(err)
	}()
	defer func() { _ = pr.Close() }() // on an early return, stops the generator (its error is the pipe's)
	sc := bufio.NewScanner(pr)
	var bucket []indexReport
	date, n := "", 0
	flush := func() error {
		defer func() { bucket = bucket[:0] }()
		if n%every >= run || len(bucket) == 0 {
			return nil
		}
		if err := writeIndexOnly(filepath.Join(dir, date), date, bucket, &st); err != nil {
			return err
		}
		for _, r := range bucket {
			fmt.Fprintf(manifest, "%s\t%d\n", r.textname, r.n)
		}
		if progress != nil {
			progress(st)
		}
		return nil
	}
	for sc.Scan() {
		textname, count, ok := strings.Cut(sc.Text(), "\t")
		n64, err := strconv.ParseUint(count, 10, 32)
		if !ok || err != nil || len(textname) < 11 {
			return st, fmt.Errorf("corpus: bad manifest line %q", sc.Text())
		}
		if textname[:10] != date {
			if date != "" {
				if err := flush(); err != nil {
					return st, err
				}
				n++
			}
			date = textname[:10]
		}
		bucket = append(bucket, indexReport{textname: textname, n: uint32(n64)})
	}
	if err := sc.Err(); err != nil {
		return st, err
	}
	if err := flush(); err != nil {
		return st, err
	}
	if err := manifest.Flush(); err != nil {
		return st, err
	}
	return st, mf.Close()
}

type indexReport struct {
	textname string
	n        uint32
}

// testOf is the test name of a textname: the fourth field of its basename.
func testOf(textname string) string {
	f := strings.SplitN(textname[11:], "-", 5)
	if len(f) < 5 {
		return "unknown"
	}
	return f[3]
}

// writeIndexOnly writes the index of one bucket.
func writeIndexOnly(dir, date string, reps []indexReport, st *IndexStats) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "index.json.gz"))
	if err != nil {
		return err
	}
	defer f.Close()
	zw, err := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if err != nil {
		return err
	}
	zw.Name, zw.ModTime = "index.json", time.Unix(0, 0)
	w := &indexWriter{w: bufio.NewWriterSize(zw, 1<<20), st: st}
	// The tests in the order their first report comes, each a run of tar
	// files of its reports.
	var tests []string
	byTest := map[string][]indexReport{}
	for _, r := range reps {
		t := testOf(r.textname)
		if _, ok := byTest[t]; !ok {
			tests = append(tests, t)
		}
		byTest[t] = append(byTest[t], r)
	}
	for _, t := range tests {
		file := 0
		w.startFile(fmt.Sprintf("%s/%s.%d.tar.lz4", date, t, file))
		for _, r := range byTest[t] {
			if w.text+w.buf >= 64<<20 {
				w.endFile()
				file++
				w.startFile(fmt.Sprintf("%s/%s.%d.tar.lz4", date, t, file))
			}
			w.report(r)
		}
		w.endFile()
	}
	if err := w.w.Flush(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	size, err := f.Seek(0, io.SeekCurrent)
	if err != nil {
		return err
	}
	st.Buckets++
	st.IndexBytes += size
	return f.Close()
}

// indexWriter writes the rows of one index as the autoclaving writer
// emitted them: a file's rows, then per frame its row, the rows of what it
// holds and its end.
type indexWriter struct {
	w        *bufio.Writer
	st       *IndexStats
	name     string
	rng      *rand.Rand
	text     int64 // text flushed in frames so far
	fileOff  int64
	buf      int64 // text written since the last frame
	rows     bytes.Buffer
	hashBuff [20]byte
}

func (w *indexWriter) startFile(name string) {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name)) // a hash does not fail
	w.name, w.rng = name, rand.New(rand.NewPCG(h.Sum64(), 0x1d3))
	w.text, w.fileOff, w.buf = 0, 0, 0
	fmt.Fprintf(w.w, `{"filename": %s, "type": "file"}`+"\n", corpus.QuoteJSON(name))
}

// write accounts for one write of n bytes of text, never split across
// frames.
func (w *indexWriter) write(n int64) {
	w.buf += n
	if w.buf >= corpus.FrameFlush {
		w.flush()
	}
}

func (w *indexWriter) flush() {
	size := 11 + w.buf/4 + w.rng.Int64N(w.buf/8+1) // LZ4 of JSON text: about a quarter
	fmt.Fprintf(w.w, `{"file_off": %d, "file_size": %d, "text_off": %d, "text_size": %d, "type": "frame"}`+"\n",
		w.fileOff, size, w.text, w.buf)
	w.w.Write(w.rows.Bytes())
	w.w.WriteString(`{"type": "/frame"}` + "\n")
	w.rows.Reset()
	w.fileOff += size
	w.text += w.buf
	w.buf = 0
}

func (w *indexWriter) sha1() string {
	for i := 0; i < 20; i += 8 {
		v := w.rng.Uint64()
		for j := i; j < min(i+8, 20); j++ {
			w.hashBuff[j] = byte(v)
			v >>= 8
		}
	}
	return base64.StdEncoding.EncodeToString(w.hashBuff[:])
}

// report writes a tar member of r's blobs: its GNU headers, one JSON line
// per datum (a badblob writes nothing), the padding.
func (w *indexWriter) report(r indexReport) {
	header := int64(512)
	if len(r.textname) > 100 {
		header += 512 + (int64(len(r.textname))+1+511)/512*512 // the LongLink entry and its name
	}
	size := int64(0)
	sizes := make([]int64, r.n)
	for i := range sizes {
		sizes[i] = indexBlobMin + w.rng.Int64N(indexBlobSpan)
		size += sizes[i] + 1
	}
	fmt.Fprintf(&w.rows, `{"orig_sha1": %s, "src_size": %d, "textname": %s, "type": "report"}`+"\n",
		corpus.QuoteJSON(w.sha1()), size+int64(r.n)*32, corpus.QuoteJSON(r.textname))
	w.write(header)
	var member int64
	for i, n := range sizes {
		if w.rng.IntN(indexBadblobEvery) == 0 {
			fmt.Fprintf(&w.rows, `{"info": "<class 'ValueError'>", "orig_sha1": %s, "src_off": %d, "src_size": %d, "type": "badblob"}`+"\n",
				corpus.QuoteJSON(w.sha1()), int64(i)*(n+32), n)
			w.st.Badblobs++
			continue
		}
		fmt.Fprintf(&w.rows, `{"orig_sha1": %s, "text_off": %d, "text_size": %d, "type": "datum"}`+"\n",
			corpus.QuoteJSON(w.sha1()), w.text+w.buf, n)
		w.write(n)
		w.write(1)
		member += n + 1
	}
	if pad := (512 - member%512) % 512; pad > 0 {
		w.write(pad)
	}
	w.rows.WriteString(`{"type": "/report"}` + "\n")
	w.st.Reports++
	w.st.Measurements += int64(r.n)
}

// endFile writes the tar's end and the file's last frame and end row.
func (w *indexWriter) endFile() {
	w.write(1024)
	if pad := (10240 - (w.text+w.buf)%10240) % 10240; pad > 0 {
		w.write(pad)
	}
	if w.buf > 0 || w.rows.Len() > 0 {
		w.flush()
	}
	fmt.Fprintf(w.w, `{"file_crc32": %d, "file_sha1": %s, "file_size": %d, "type": "/file"}`+"\n",
		int32(w.rng.Uint32()), corpus.QuoteJSON(w.sha1()), w.fileOff)
	w.st.Files++
	w.st.TextBytes += w.text
}
