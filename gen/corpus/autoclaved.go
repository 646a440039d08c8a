package corpus

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/pierrec/lz4/v4"

	"github.com/backfill-dev/backfill/internal/lz4frame"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
)

// Formats Generate writes.
const (
	FormatCanned     = "canned"
	FormatAutoclaved = "autoclaved"
	FormatBoth       = "both" // DIR/canned and DIR/autoclaved
)

// FrameFlush is the autoclaving writer's frame threshold: a frame is
// flushed as soon as a write leaves this many bytes or more buffered.
const FrameFlush = 262144

// The autoclaved form of a bucket is what OONI's autoclaving step made of
// the canned one (docs/formats.md §2): the same file names; tar members
// named by textname holding one normalised JSON line per datum; a chain of
// LZ4 frames per file, flushed by FrameFlush and never splitting a write;
// index.json.gz as the flat event stream the writer emitted at each
// flush. What autoclaving could not have made is left out of this form:
// reports the canned index lists but the tar lacks (not_in_container),
// reports whose YAML header does not parse (upstream they failed the
// bucket), and the container-level damage of the canned form.

// acReport is a report as the autoclaved form holds it.
type acReport struct {
	r      *report
	header []byte // YAML header document, for the datums' orig_sha1
	sha    [20]byte
	size   int64
	// Where each measurement's blob starts and ends (after its
	// terminator) in the raw report; for YAML, index -1 is the header.
	starts, ends map[int]int64
	normal       []byte // the JSON line of an ordinary measurement
	normalSHA    [20]byte
	special      *acItem // the report's one special blob (r.at), once made
	limit        int     // measurements the slicer reached
	cutoff       int64
	info         string
}

func newACReport(r *report) *acReport {
	a := &acReport{r: r, starts: map[int]int64{}, ends: map[int]int64{}, limit: r.n}
	h := sha1.New()
	cw := &countWriter{w: h}
	_ = r.write(cw, func(i int, start, end int64) { // a hash does not fail
		// Only the header, the special blob, the one before it and the
		// last are needed.
		if i < 0 || i == r.at || i == r.at-1 || i == r.n-1 {
			a.starts[i], a.ends[i] = start, end
		}
	})
	copy(a.sha[:], h.Sum(nil))
	a.size = cw.n
	if r.kind == "yaml" {
		a.header = r.tmpl.header
	}
	switch r.corrupt {
	case KindTruncatedReport:
		a.limit, a.cutoff, a.info = r.n-1, a.starts[r.n-1], "<class '__main__.TruncatedReportError'>"
	case KindBrokenFrame:
		a.limit, a.info = r.at, "<class '__main__.BrokenFrameError'>"
		if r.at > 0 {
			a.cutoff = a.ends[r.at-1]
		} else if r.kind == "yaml" {
			a.cutoff = a.ends[-1]
		}
	}
	a.normal, a.normalSHA = a.line(blobNormal, r.tmpl.blob)
	return a
}

// blobSHA is the datum's orig_sha1: of the header and entry documents for
// YAML, of the line for JSON.
func (a *acReport) blobSHA(i int) [20]byte {
	h := sha1.New()
	h.Write(a.header)
	a.r.writeBlob(&countWriter{w: h}, i) // a hash does not fail
	var s [20]byte
	copy(s[:], h.Sum(nil))
	return s
}

// line is the normalised JSON line (without "\n") of a blob of the kind,
// with the id the OONI pipeline derived from the blob's SHA-1.
func (a *acReport) line(kind int, blob []byte) ([]byte, [20]byte) {
	h := sha1.New()
	h.Write(a.header)
	h.Write(blob)
	var s [20]byte
	copy(s[:], h.Sum(nil))
	id := hex.EncodeToString(s[:16])
	id = id[:8] + "-" + id[8:12] + "-" + id[12:16] + "-" + id[16:20] + "-" + id[20:]
	var body []byte
	switch {
	case kind == blobBadUTF8:
		body = []byte(`"body": {"data": "UmV5a2phdu1r", "format": "base64"}`)
	default:
		body = a.r.tmpl.entryJSON
	}
	out := fmt.Appendf(nil, `{"id": "%s", "report_filename": %s`, id, QuoteJSON(a.r.textname))
	if len(body) > 0 {
		out = append(append(out, ", "...), body...)
	}
	return append(out, '}'), s
}

// hugeLine is the JSON line of a huge blob: its size, and a writer of it.
func (a *acReport) hugeLine() (int64, func(*bytes.Buffer)) {
	open := fmt.Appendf(nil, `{"report_filename": %s, "body": "`, QuoteJSON(a.r.textname))
	fill := a.r.hugeSize
	size := int64(len(open)) + fill + 2
	return size, func(w *bytes.Buffer) { // a buffer's writes do not fail
		w.Write(open)
		x := bytes.Repeat([]byte("x"), 64<<10)
		for left := fill; left > 0; {
			k := min(left, int64(len(x)))
			w.Write(x[:k])
			left -= k
		}
		w.Write([]byte(`"}`))
	}
}

// acItem is one datum or badblob of a report, in source order.
type acItem struct {
	bad     bool
	size    int64               // datum: the line's size
	line    []byte              // datum: the line, unless written by put
	put     func(*bytes.Buffer) // datum: writes a huge line
	sha     [20]byte
	srcOff  int64 // badblob
	srcSize int64
	info    string
}

// item is measurement i as the autoclaved form holds it. An ordinary one
// is the report's normal line; the one special blob of a report is made
// once.
func (a *acReport) item(i int) acItem {
	if a.r.blobKind(i) == blobNormal {
		return acItem{size: int64(len(a.normal)), line: a.normal, sha: a.normalSHA}
	}
	if a.special == nil {
		it := a.makeSpecial(i)
		a.special = &it
	}
	return *a.special
}

func (a *acReport) makeSpecial(i int) acItem {
	r := a.r
	switch k := r.blobKind(i); k {
	case blobBad:
		size := a.ends[i] - a.starts[i]
		info := "<class 'yaml.parser.ParserError'>"
		if r.kind == "json" {
			size-- // the "\n"
			info = "<class 'ValueError'>"
		}
		return acItem{bad: true, sha: a.blobSHA(i), srcOff: a.starts[i], srcSize: size, info: info}
	case blobHuge:
		size, put := a.hugeLine()
		return acItem{size: size, put: put, sha: a.blobSHA(i)}
	case blobBadUTF8:
		var b bytes.Buffer
		r.writeBlob(&countWriter{w: &b}, i) // a buffer does not fail
		line, sha := a.line(k, b.Bytes())
		return acItem{size: int64(len(line)), line: line, sha: sha}
	}
	return acItem{size: int64(len(a.normal)), line: a.normal, sha: a.normalSHA}
}

// memberSize is the size of the report's JSON lines.
func (a *acReport) memberSize() int64 {
	var n int64
	for i := range a.limit {
		if it := a.item(i); !it.bad {
			n += it.size + 1
		}
	}
	return n
}

// frameWriter writes an autoclaved file: buffered writes, a frame flushed
// when a write leaves FrameFlush bytes or more buffered, and each frame's
// index rows (queued with the writes) emitted at its flush.
type frameWriter struct {
	file    *countWriter
	buf     []byte
	textOff int64 // of buf[0] in the decompressed stream
	rows    []string
	index   *bufio.Writer
	frame   bytes.Buffer
}

func (w *frameWriter) queue(row string) { w.rows = append(w.rows, row) }

// write buffers p as one write, never split across frames.
func (w *frameWriter) write(p []byte) error {
	w.buf = append(w.buf, p...)
	if len(w.buf) >= FrameFlush {
		return w.flush()
	}
	return nil
}

func (w *frameWriter) flush() error {
	w.frame.Reset()
	zw := lz4.NewWriter(&w.frame)
	if err := zw.Apply(lz4.BlockSizeOption(lz4.Block4Mb), lz4.ChecksumOption(true), lz4.BlockChecksumOption(false),
		lz4.SizeOption(uint64(len(w.buf))), lz4.CompressionLevelOption(lz4.Level5), lz4.ConcurrencyOption(1)); err != nil {
		return err
	}
	if _, err := zw.Write(w.buf); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	data := linkBlocks(w.frame.Bytes())
	fmt.Fprintf(w.index, `{"file_off": %d, "file_size": %d, "text_off": %d, "text_size": %d, "type": "frame"}`+"\n",
		w.file.n, len(data), w.textOff, len(w.buf))
	for _, r := range w.rows {
		w.index.WriteString(r)
		w.index.WriteByte('\n')
	}
	w.index.WriteString(`{"type": "/frame"}` + "\n")
	if _, err := w.file.Write(data); err != nil {
		return err
	}
	w.textOff += int64(len(w.buf))
	w.buf, w.rows = w.buf[:0], w.rows[:0]
	return nil
}

// linkBlocks marks a frame's blocks as linked, as python-lz4's
// BLOCKMODE_LINKED frames are (a frame of independent blocks is a valid
// linked one), and fixes the header checksum.
func linkBlocks(frame []byte) []byte {
	lz4frame.SetLinked(frame, true)
	return frame
}

// writeAutoclaved writes the autoclaved form of the bucket's containers
// into dir and returns its ground truth.
func (g *bucketGen) writeAutoclaved(dir string, cans []*container, st *Stats) ([]Truth, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	f, err := os.Create(filepath.Join(dir, "index.json.gz"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zw, err := gzip.NewWriterLevel(f, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	zw.Name = "index.json"
	zw.ModTime = time.Unix(0, 0)
	index := bufio.NewWriterSize(zw, 1<<20)
	var truth []Truth
	for _, c := range cans {
		var reps []*report
		for _, r := range c.reports {
			if r.corrupt != KindNotInContainer && r.corrupt != KindBadYAMLHeader {
				reps = append(reps, r)
			}
		}
		if len(reps) == 0 && !c.tar {
			continue
		}
		t, err := g.writeAutoclavedFile(dir, c, reps, index, st)
		if err != nil {
			return nil, err
		}
		truth = append(truth, t...)
	}
	if err := index.Flush(); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	sort.Slice(truth, func(i, j int) bool {
		if truth[i].File != truth[j].File {
			return truth[i].File < truth[j].File
		}
		return truth[i].Textname < truth[j].Textname
	})
	return truth, f.Close()
}

func (g *bucketGen) writeAutoclavedFile(dir string, c *container, reps []*report, index *bufio.Writer, st *Stats) ([]Truth, error) {
	fileName := g.date + "/" + c.name
	f, err := os.Create(filepath.Join(dir, c.name))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	bw := bufio.NewWriterSize(f, 1<<20)
	sha, crc := sha1.New(), crc32.NewIEEE()
	w := &frameWriter{file: &countWriter{w: io.MultiWriter(bw, sha, crc)}, index: index}
	fmt.Fprintf(index, `{"filename": %s, "type": "file"}`+"\n", QuoteJSON(fileName))
	var truth []Truth
	for _, r := range reps {
		a := newACReport(r)
		t := Truth{Bucket: g.date, File: fileName, Textname: r.textname, N: a.limit, Badblobs: r.badblobs()}
		switch r.corrupt {
		case KindBadTextname:
			t.N, t.Badblobs, t.Reasons = 0, 0, []string{deadletter.BadTextname}
		case KindTruncatedReport, KindBrokenFrame, KindEmptyReport:
			t.Reasons = []string{r.corrupt}
		}
		truth = append(truth, t)
		w.queue(fmt.Sprintf(`{"orig_sha1": %s, "src_size": %d, "textname": %s, "type": "report"}`, QuoteJSON(b64(a.sha[:])), a.size, QuoteJSON(r.textname)))
		size := a.memberSize()
		if c.tar {
			var hb bytes.Buffer
			hdr := &tar.Header{Typeflag: tar.TypeReg, Name: r.textname, Size: size, Mode: 0o644,
				Uname: "ooni", Gname: "torproject", ModTime: time.Unix(0, 0), Format: tar.FormatGNU}
			if err := tar.NewWriter(&hb).WriteHeader(hdr); err != nil {
				return nil, err
			}
			if err := w.write(hb.Bytes()); err != nil {
				return nil, err
			}
		}
		for i := range a.limit {
			it := a.item(i)
			if it.bad {
				w.queue(fmt.Sprintf(`{"info": %s, "orig_sha1": %s, "src_off": %d, "src_size": %d, "type": "badblob"}`,
					QuoteJSON(it.info), QuoteJSON(b64(it.sha[:])), it.srcOff, it.srcSize))
				continue
			}
			w.queue(fmt.Sprintf(`{"orig_sha1": %s, "text_off": %d, "text_size": %d, "type": "datum"}`,
				QuoteJSON(b64(it.sha[:])), w.textOff+int64(len(w.buf)), it.size))
			line := it.line
			if it.put != nil {
				var b bytes.Buffer
				it.put(&b)
				line = b.Bytes()
			}
			if err := w.write(line); err != nil {
				return nil, err
			}
			if err := w.write([]byte("\n")); err != nil {
				return nil, err
			}
			st.Measurements++
		}
		if c.tar && size%512 != 0 {
			if err := w.write(make([]byte, 512-size%512)); err != nil {
				return nil, err
			}
		}
		if a.info != "" {
			w.queue(fmt.Sprintf(`{"info": %s, "src_cutoff": %d, "type": "/report"}`, QuoteJSON(a.info), a.cutoff))
		} else {
			w.queue(`{"type": "/report"}`)
		}
		st.Reports++
	}
	if c.tar {
		// tarfile.close: two zero blocks, then padding to a 10240-byte
		// record, as two writes.
		if err := w.write(make([]byte, 1024)); err != nil {
			return nil, err
		}
		if pad := (10240 - (w.textOff+int64(len(w.buf)))%10240) % 10240; pad > 0 {
			if err := w.write(make([]byte, pad)); err != nil {
				return nil, err
			}
		}
	}
	if len(w.buf) > 0 || len(w.rows) > 0 {
		if err := w.flush(); err != nil {
			return nil, err
		}
	}
	if err := bw.Flush(); err != nil {
		return nil, err
	}
	fmt.Fprintf(index, `{"file_crc32": %d, "file_sha1": %s, "file_size": %d, "type": "/file"}`+"\n",
		int32(crc.Sum32()), QuoteJSON(b64(sha.Sum(nil))), w.file.n)
	st.Containers++
	st.Bytes += w.file.n
	st.TextBytes += w.textOff
	return truth, f.Close()
}

// QuoteJSON is a JSON string as Python's json.dumps writes an ASCII one.
func QuoteJSON(s string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes, into a builder that does not fail
	return strings.TrimSuffix(b.String(), "\n")
}
