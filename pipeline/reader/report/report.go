// Package report reads one raw OONI report, JSON lines or YAML documents,
// into its measurements: the blob slicers of both formats, the ndx rules
// (which blobs count), and the size, SHA-1 and CRC-32 the indexes hold the
// report to. It reads bytes and knows no container, bucket or index.
package report

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"crypto/sha3"
	"encoding"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"

	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooniuid"
)

// Kind is the raw format of a report, from its textname's extension.
type Kind uint8

// Report kinds.
const (
	KindUnknown Kind = iota
	KindJSON
	KindYAML
)

func (k Kind) String() string {
	switch k {
	case KindJSON:
		return "json"
	case KindYAML:
		return "yaml"
	}
	return "unknown"
}

// KindOf tells the format of a report from its textname.
func KindOf(textname string) Kind {
	switch {
	case strings.HasSuffix(textname, ".json"):
		return KindJSON
	case strings.HasSuffix(textname, ".yaml"):
		return KindYAML
	}
	return KindUnknown
}

// Measurement is one measurement of a report: its ndx and the byte range
// of its blob in the raw report.
type Measurement struct {
	Ndx uint32
	Blob
	// OrigSHA1 is the autoclaved index's orig_sha1 of the blob, set with
	// Reader.OrigSHA1: the SHA-1 of the YAML header document and
	// the blob, markers included, or of the JSON line without its "\n".
	OrigSHA1 [20]byte
	// ID is OONI's identity of the measurement, set with Reader.UIDs.
	ID ooniuid.ID
}

// Stats is what reading one raw report found.
type Stats struct {
	N     uint32   // measurements counted: the next ndx
	Size  int64    // bytes of the raw report read
	SHA1  [20]byte // zero unless Reader.SHA1 is set
	CRC32 int32    // signed, as the canned index writes it
	// Rejected is set when the report as a whole gets no IDs (a bad YAML
	// header); N is then 0.
	Rejected bool
}

// Limits of what a report may hold.
const (
	DefaultMaxBlob = 64 << 20 // blobs over this are counted but flagged oversized_blob
	MaxHeader      = 1 << 20  // a YAML header over this is a bad header
	falsyProbe     = 512      // documents up to this size are checked for a falsy value
)

// Reader reads raw reports one after the other, reusing its buffers.
// Measurements are numbered as docs/design.md §2 says: the YAML header is not a
// measurement, YAML documents that load as a falsy value are skipped, and
// every other blob counts, whether it would parse or not. Blob contents
// are not parsed; they are checked for valid UTF-8 and size only, which is
// all the IDs need.
type Reader struct {
	// MaxBlob is the size over which a blob is flagged oversized_blob; 0
	// means DefaultMaxBlob.
	MaxBlob int64
	// SHA1 makes the stats carry the report's SHA-1. It is the costliest
	// step of reading a report (about half the CPU time); the CRC-32 and
	// size are always computed.
	SHA1 bool
	// Datums numbers datums only (--ndx datums): every blob is parsed (as
	// JSON, or as YAML), and one that does not parse is a badblob, which
	// gets no ndx and a dead-letter record. Blobs over MaxBlob are counted
	// without a parse.
	Datums bool
	// OrigSHA1 makes every Measurement carry its blob's orig_sha1, as the
	// autoclaving step computed it.
	OrigSHA1 bool
	// UIDs makes every Measurement carry OONI's identity of it
	// (ooniuid): the content hash of its raw bytes (a JSON line with its
	// "\n", a YAML document with its markers) and, for a JSON report,
	// its measurement_uid. A JSON line is kept whole in memory (up to
	// MaxBlob) to read its date.
	UIDs bool

	sha   hash.Hash
	orig  hash.Hash   // with OrigSHA1: the current blob's orig_sha1
	shake *sha3.SHAKE // with UIDs: the content hash of a blob too long to keep
	// With UIDs, a JSON line too long to keep is checked as it streams:
	// its date, when OONI gives it a uid, is sdate (sdated).
	jstream ooniuid.JSONStream
	sdate   string
	sdated  bool
	// With UIDs, the blobs kept whole are hashed several at a time
	// (ooniuid.Hasher): their measurements wait in batch, and go to
	// onBlob, in order, once it is full (maxBatch, batchBytes) or the
	// report ends.
	streamed bool // the current blob went past what is kept: shake has it
	hasher   ooniuid.Hasher
	batch    [maxBatch]pending
	nbatch   int
	nbytes   int // of the batch's kept blobs
	kind     Kind
	onBlob   func(Measurement)
	problem  func(deadletter.Record)
	yamlUIDs *ooniuid.YAMLReport // the YAML report's uids, from its header on
	hdr      []byte              // orig's state after the YAML header document
	sum      []byte              // orig's sum
	crc      hash.Hash32
	count    int64
	blob     blobCheck
	sink     blobSink
	json     *JSONSlicer
	yaml     *YAMLSlicer
}

// NewReader returns a Reader.
func NewReader() *Reader {
	rr := &Reader{sha: sha1.New(), orig: sha1.New(), shake: sha3.NewSHAKE128(), crc: crc32.NewIEEE()}
	rr.sink.rr = rr
	rr.json = NewJSONSlicer(nil)
	rr.json.Content = &rr.sink
	rr.yaml = NewYAMLSlicer(nil)
	rr.yaml.Content = &rr.sink
	return rr
}

// blobSink receives the bytes of each blob from the slicer.
type blobSink struct{ rr *Reader }

func (s *blobSink) Write(p []byte) (int, error) {
	rr := s.rr
	if rr.OrigSHA1 {
		rr.orig.Write(p)
	}
	if rr.UIDs {
		if !rr.streamed && rr.blob.size+len(p) > rr.blob.keep {
			// Too long to keep: hashed (and a JSON line checked) as it
			// streams, from what was kept.
			rr.streamed = true
			rr.shake.Reset()
			rr.shake.Write(rr.blob.head)
			if rr.kind == KindJSON {
				rr.jstream = ooniuid.JSONStream{}
				rr.jstream.Add(rr.blob.head)
			}
		}
		if rr.streamed {
			rr.shake.Write(p)
			if rr.kind == KindJSON {
				rr.jstream.Add(p)
			}
		}
	}
	return rr.blob.Write(p)
}

// A batch is hashed when it holds maxBatch measurements or batchBytes of
// blobs, or its report ends: with more messages than lanes, the
// ooniuid.Hasher's lanes stay busy when lengths differ. A slot's buffer
// past keepBuf is let go once hashed, so what the batch keeps between
// reports stays near maxBatch*keepBuf.
const (
	maxBatch   = 32
	batchBytes = 4 << 20
	keepBuf    = 1 << 20
)

// pending is a measurement whose hash waits for its batch.
type pending struct {
	m        Measurement
	buf      []byte // the blob (a JSON line and its "\n"), unless streamed
	streamed bool
	joined   bool   // a JSON blob that spans lines
	date     string // a JSON line's uid date, when it has a uid (dated)
	dated    bool
}

// queue adds the measurement m of the current blob to the batch, which
// it hashes and hands on when full.
func (rr *Reader) queue(m Measurement) {
	p := &rr.batch[rr.nbatch]
	p.m, p.streamed = m, rr.streamed
	p.joined, p.dated = rr.kind == KindJSON && rr.json.Joined, false
	if rr.streamed {
		if rr.kind == KindJSON {
			rr.shake.Write([]byte{'\n'})
			p.date, p.dated = rr.sdate, rr.sdated
		}
		rr.shake.Read(p.m.ID.Hash[:])
	} else {
		// The kept blob becomes the batch's; its old buffer is kept next.
		// A JSON line is checked now, while its bytes are still in the
		// processor's cache.
		p.buf, rr.blob.head = rr.blob.head, p.buf[:0]
		if rr.kind == KindJSON {
			if !p.joined {
				p.date, p.dated = ooniuid.JSONDateOf(p.buf, rr.blob.valid())
			}
			p.buf = append(p.buf, '\n')
		}
	}
	rr.nbatch++
	rr.nbytes += len(p.buf)
	if rr.nbatch == maxBatch || rr.nbytes >= batchBytes {
		rr.flush()
	}
}

// flush hashes the batch's blobs at once, sets the uids of JSON lines,
// and hands the measurements on in order.
func (rr *Reader) flush() {
	var msgs [maxBatch][]byte
	var idx [maxBatch]int
	n := 0
	for i := range rr.nbatch {
		if !rr.batch[i].streamed {
			msgs[n], idx[n] = rr.batch[i].buf, i
			n++
		}
	}
	var sums [maxBatch]ooniuid.Hash
	rr.hasher.Sum(msgs[:n], sums[:n])
	for j := range n {
		rr.batch[idx[j]].m.ID.Hash = sums[j]
	}
	for i := range rr.nbatch {
		p := &rr.batch[i]
		switch {
		case rr.kind == KindJSON:
			if p.joined && !p.streamed {
				rr.joined(p.m, p.buf)
			} else if p.dated {
				p.m.ID.UID = ooniuid.UID(p.date, p.m.ID.Hash)
			}
		case rr.kind == KindYAML && !p.streamed && rr.yamlUIDs != nil:
			p.m.ID.UID = rr.yamlUIDs.UID(p.buf, p.m.ID.Hash)
		}
		if rr.onBlob != nil {
			rr.onBlob(p.m)
		}
		if cap(p.buf) > keepBuf {
			p.buf = nil
		}
	}
	rr.nbatch, rr.nbytes = 0, 0
}

// Write feeds the report's hashes: the raw bytes pass through here.
func (rr *Reader) Write(p []byte) (int, error) {
	if rr.SHA1 {
		rr.sha.Write(p)
	}
	rr.crc.Write(p)
	rr.count += int64(len(p))
	return len(p), nil
}

// Read slices the raw report r of the given kind. It calls onBlob (when
// not nil) for each measurement in order and problem for each thing wrong
// with the report; every problem is a dead-letter record with Textname,
// Offset (in the report), Reason and Message set. The error is that of r,
// e.g. a truncated container: the measurements before it were counted
// and the stats say so.
func (rr *Reader) Read(r io.Reader, kind Kind, onBlob func(Measurement), problem func(deadletter.Record)) (Stats, error) {
	rr.kind, rr.onBlob, rr.problem, rr.nbatch, rr.nbytes, rr.yamlUIDs = kind, onBlob, problem, 0, 0, nil
	st, err := rr.read(r, kind, onBlob, problem)
	if rr.nbatch > 0 {
		rr.flush()
	}
	rr.onBlob, rr.problem = nil, nil
	return st, err
}

func (rr *Reader) read(r io.Reader, kind Kind, onBlob func(Measurement), problem func(deadletter.Record)) (Stats, error) {
	rr.sha.Reset()
	rr.crc.Reset()
	rr.count = 0
	maxBlob := rr.MaxBlob
	if maxBlob <= 0 {
		maxBlob = DefaultMaxBlob
	}
	tee := io.TeeReader(r, rr)
	var next func() (Blob, error)
	switch kind {
	case KindJSON:
		rr.json.Reset(tee)
		next = rr.json.Next
	case KindYAML:
		rr.yaml.Reset(tee)
		next = rr.yaml.Next
	default:
		return rr.finish(tee, Stats{Rejected: true})
	}
	var st Stats
	header := kind == KindYAML
	flag := func(reason string, off int64, msg string) {
		problem(deadletter.Record{Offset: off, Reason: reason, Message: msg})
	}
	for {
		// What the checks below read of a blob: a YAML header whole, a
		// YAML document that may be falsy, any blob that --ndx datums
		// parses; nothing of a JSON line otherwise.
		switch {
		case header:
			rr.blob.reset(MaxHeader)
		case rr.Datums, rr.UIDs:
			keep := min(maxBlob, 1<<40)
			if kind == KindYAML {
				keep = max(keep, falsyProbe) // the falsy check reads it
			}
			rr.blob.reset(int(keep))
		case kind == KindYAML:
			rr.blob.reset(falsyProbe)
		default:
			rr.blob.reset(0)
		}
		rr.streamed = false
		if rr.OrigSHA1 {
			rr.orig.Reset()
			if kind == KindYAML && !header {
				// Start from the state after the header: it is hashed once.
				if err := rr.orig.(encoding.BinaryUnmarshaler).UnmarshalBinary(rr.hdr); err != nil {
					panic(err) // a state AppendBinary made
				}
			}
		}
		b, err := next()
		if err != nil {
			return rr.end(err, tee, st, flag)
		}
		if header {
			header = false
			if msg := checkHeader(&rr.blob, b.Size); msg != "" {
				flag(deadletter.BadYAMLHeader, b.Offset, msg)
				st.Rejected = true
				return rr.finish(tee, st)
			}
			if rr.UIDs {
				rr.yamlUIDs = ooniuid.NewYAMLReport(rr.blob.head)
			}
			if rr.OrigSHA1 {
				state, err := rr.orig.(encoding.BinaryAppender).AppendBinary(rr.hdr[:0])
				if err != nil {
					panic(err) // SHA-1 states always marshal
				}
				rr.hdr = state
			}
			continue
		}
		if kind == KindYAML && b.Size <= falsyProbe && falsy(rr.blob.head) {
			continue
		}
		if rr.Datums && b.Size <= maxBlob {
			if msg := badblob(kind, rr.blob.head); msg != "" {
				flag(deadletter.Badblob, b.Offset, fmt.Sprintf("blob at byte %d (%d bytes) does not parse (%s); under --ndx datums it has no ID", b.Offset, b.Size, msg))
				continue
			}
		}
		m := Measurement{Ndx: st.N, Blob: b}
		if rr.OrigSHA1 {
			rr.sum = rr.orig.Sum(rr.sum[:0]) // into m, m would live on the heap
			copy(m.OrigSHA1[:], rr.sum)
		}
		st.N++
		if st.N == 0 {
			// 2^32 blobs: the ndx would wrap; nothing real comes close.
			flag(deadletter.OversizedBlob, b.Offset, "more than 2^32 measurements in one report")
			st.Rejected = true
			return rr.finish(tee, st)
		}
		if b.Size > maxBlob {
			flag(deadletter.OversizedBlob, b.Offset, fmt.Sprintf("measurement %d is %d bytes, over the %d-byte limit; it keeps its ID%s", m.Ndx, b.Size, maxBlob, rr.streamedUID()))
		} else if !rr.blob.valid() {
			flag(deadletter.InvalidUTF8, b.Offset, fmt.Sprintf("measurement %d is not valid UTF-8; it keeps its ID", m.Ndx))
		}
		switch {
		case rr.UIDs:
			rr.queue(m)
		case onBlob != nil:
			onBlob(m)
		}
	}
}

// end ends the report at the slicer's error: its end, a cut (a
// dead-letter record, the measurements before it kept) or a failure of the
// reader.
func (rr *Reader) end(err error, tee io.Reader, st Stats, flag func(reason string, off int64, msg string)) (Stats, error) {
	var cut *SliceError
	switch {
	case errors.Is(err, io.EOF):
		if st.N == 0 {
			flag(deadletter.EmptyReport, 0, "the report holds no measurements")
		}
		return rr.finish(tee, st)
	case errors.As(err, &cut):
		d := deadletter.Record{Offset: cut.Offset, Reason: cut.Reason, Message: fmt.Sprintf("%s; the %d measurements before it are kept", cut.Detail, st.N)}
		if rr.UIDs && rr.kind == KindJSON {
			if err := rr.cutUIDs(&d); err != nil {
				st, _ = rr.finish(nil, st)
				return st, err
			}
		}
		rr.problem(d)
		return rr.finish(tee, st)
	}
	st, _ = rr.finish(nil, st)
	return st, err
}

// streamedUID reads the date of the JSON line just streamed (with UIDs),
// for queue, and says what became of its uid.
func (rr *Reader) streamedUID() string {
	rr.sdate, rr.sdated = "", false
	if !rr.UIDs || rr.kind != KindJSON || !rr.streamed {
		return ""
	}
	date, ok, unread := rr.jstream.Date()
	switch {
	case rr.json.Joined:
		return "; it spans lines, which OONI's fastpath reads each as a measurement: their uids were not read"
	case !ok:
		return "; ujson refuses it, so OONI gives it no uid"
	case unread:
		return fmt.Sprintf("; its measurement_start_time is over %d bytes: its uid was not read", ooniuid.MaxDateValue)
	}
	rr.sdate, rr.sdated = date, true
	return "; its uid was read as it streamed"
}

// joined records the lines of a JSON measurement that spans several
// (buf, its blob and "\n"): OONI's fastpath reads each line as a
// measurement, and the uids it gives them are on no row.
func (rr *Reader) joined(m Measurement, buf []byte) {
	var uids []string
	n := 0
	for line := range bytes.Lines(buf) {
		n++
		if uid, ok := lineUID(line); ok {
			uids = append(uids, uid)
		}
	}
	if len(uids) == 0 {
		return
	}
	rr.problem(deadletter.Record{Offset: m.Blob.Offset, Reason: deadletter.LinesJoined, MeasurementUIDs: uids,
		Message: fmt.Sprintf("measurement %d spans %d lines; OONI's fastpath reads each line as a measurement, and gives %d of them uids (measurement_uids); the measurement keeps its ID, without a uid", m.Ndx, n, len(uids))})
}

// lineUID is the uid OONI's fastpath gives a line of a JSON report (with
// its "\n", but the last line of a report without one).
func lineUID(line []byte) (string, bool) {
	date, ok := ooniuid.JSONDate(line)
	if !ok {
		return "", false
	}
	return ooniuid.UID(date, ooniuid.Sum(line)), true
}

// cutUIDs adds to d, the record of a JSON report cut off, the uids
// OONI's fastpath gives the lines from the cut on, none of which is a
// row, reading the rest of the report: each line up to MaxBlob bytes.
func (rr *Reader) cutUIDs(d *deadletter.Record) error {
	maxLine := rr.MaxBlob
	if maxLine <= 0 {
		maxLine = DefaultMaxBlob
	}
	var lines, long int
	add := func(line []byte) {
		lines++
		if uid, ok := lineUID(line); ok {
			d.MeasurementUIDs = append(d.MeasurementUIDs, uid)
		}
	}
	if r, ok := rr.json.Rest(); ok {
		var err error
		if long, err = eachLine(r, maxLine, add); err != nil {
			return err
		}
	} else if rr.streamed {
		long = 1 // the last document, longer than what is kept
	} else {
		for line := range bytes.Lines(rr.blob.head) {
			add(line)
		}
	}
	if len(d.MeasurementUIDs) > 0 {
		d.Message += fmt.Sprintf("; OONI's fastpath reads %d lines from there, and gives %d of them uids (measurement_uids)", lines, len(d.MeasurementUIDs))
	}
	if long > 0 {
		d.Message += fmt.Sprintf("; %d lines from there are over the %d-byte limit: their uids were not read", long, maxLine)
	}
	return nil
}

// eachLine calls fn with each line of r (with its "\n", the last without
// one), and returns how many lines longer than max it skipped.
func eachLine(r *bufio.Reader, max int64, fn func([]byte)) (long int, err error) {
	var buf []byte
	over := false
	for {
		chunk, err := r.ReadSlice('\n')
		if !over {
			if buf = append(buf, chunk...); int64(len(buf)) > max {
				over, buf = true, buf[:0]
			}
		}
		switch {
		case err == nil || (errors.Is(err, io.EOF) && (over || len(buf) > 0)):
			if over {
				long++
			} else {
				fn(buf)
			}
			buf, over = buf[:0], false
			if err != nil {
				return long, nil
			}
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			return long, nil
		default:
			return long, err
		}
	}
}

// finish drains what the slicer left of the report into the hashes.
func (rr *Reader) finish(rest io.Reader, st Stats) (Stats, error) {
	var err error
	if rest != nil {
		_, err = io.Copy(io.Discard, rest)
	}
	if st.Rejected {
		st.N = 0
	}
	st.Size = rr.count
	if rr.SHA1 {
		rr.sha.Sum(st.SHA1[:0])
	}
	st.CRC32 = int32(rr.crc.Sum32())
	return st, err
}

// badblob tells why a blob is one the OONI pipeline could not load, or
// "" when it loads. Invalid UTF-8 is not a reason: the pipeline kept such
// measurements (their bytes base64-encoded).
func badblob(kind Kind, blob []byte) string {
	if kind == KindJSON {
		if !json.Valid(bytes.ToValidUTF8(blob, []byte("\uFFFD"))) {
			return "not JSON"
		}
		return ""
	}
	var v any
	if err := yaml.Unmarshal(bytes.ToValidUTF8(blob, []byte("\uFFFD")), &v); err != nil {
		return err.Error()
	}
	return ""
}

func checkHeader(b *blobCheck, size int64) string {
	if size > MaxHeader {
		return fmt.Sprintf("the header document is %d bytes, over the %d-byte limit", size, MaxHeader)
	}
	if simpleMapping(b.head) {
		return ""
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b.head, &doc); err != nil {
		return "the header document does not parse: " + err.Error()
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return "the header document is not a mapping"
	}
	return ""
}

// falsy reports whether a YAML document (no longer than falsyProbe)
// loads as a value Python holds false, as the autoclaving step loaded it
// (PyYAML's full loader, ooniuid.Falsy): such a document is not a
// measurement. A mapping with a plain first key is not, and the usual
// spellings of null, false, zero and empty are found without a parse.
func falsy(doc []byte) bool {
	if simpleMapping(doc) || blockCollection(doc) {
		return false
	}
	if body, ok := bytes.CutPrefix(doc, docStart); ok {
		if body, ok := bytes.CutSuffix(body, docEnd); ok {
			for _, f := range plainFalsy {
				if bytes.Equal(body, f) {
					return true
				}
			}
		}
	}
	return ooniuid.Falsy(doc)
}

// blockCollection reports whether a YAML document's first content line (a
// line that is not blank or a comment) starts a block sequence ("- ") or
// a block mapping with a plain key ("key:" then a space or the line's
// end): such a document is not empty, so it loads as true, or does not
// load and is counted. Measurements are mappings: this spares them the
// full parse.
func blockCollection(doc []byte) bool {
	body, _ := bytes.CutPrefix(doc, docStart)
	for line := range bytes.Lines(body) {
		line = bytes.TrimRight(line, "\n")
		t := bytes.TrimLeft(line, " ")
		if len(t) == 0 || t[0] == '#' {
			continue
		}
		if len(t) != len(line) {
			return false // an indented first line: a scalar's, say
		}
		if bytes.Equal(t, []byte("-")) || bytes.HasPrefix(t, []byte("- ")) {
			return true
		}
		n := keyLen(t)
		return n > 0 && n < len(t) && t[n] == ':' && (n+1 == len(t) || t[n+1] == ' ')
	}
	return false
}

// plainFalsy are the bodies of documents that load as false, written the
// usual way; TestFalsy_Plain holds each to the full parse.
var plainFalsy = [][]byte{[]byte(""), []byte("null\n"), []byte("~\n"), []byte("{}\n"), []byte("[]\n"),
	[]byte("false\n"), []byte("0\n"), []byte("''\n"), []byte("\"\"\n")}

// blobCheck receives the bytes of one blob: it keeps the blob when it is
// no longer than keep (the head is empty for a longer one, which no check
// reads) and checks it is UTF-8 across write boundaries.
type blobCheck struct {
	head    []byte
	keep    int
	size    int
	pending [utf8.UTFMax]byte
	npend   int
	bad     bool
}

// reset readies c for the next blob, kept when it is no longer than keep.
func (c *blobCheck) reset(keep int) {
	c.head = c.head[:0]
	c.keep, c.size = keep, 0
	c.npend, c.bad = 0, false
}

func (c *blobCheck) Write(p []byte) (int, error) {
	n := len(p)
	if c.size += n; c.size <= c.keep {
		c.head = append(c.head, p...)
	} else {
		c.head = c.head[:0]
	}
	if c.bad {
		return n, nil
	}
	// Complete a rune split by the previous write.
	for c.npend > 0 && len(p) > 0 {
		c.pending[c.npend] = p[0]
		c.npend++
		p = p[1:]
		if utf8.FullRune(c.pending[:c.npend]) {
			if r, size := utf8.DecodeRune(c.pending[:c.npend]); r == utf8.RuneError && size <= 1 {
				c.bad = true
				return n, nil
			}
			c.npend = 0
		}
	}
	if c.npend > 0 {
		return n, nil // p was all spent on the split rune
	}
	// Hold back a rune cut by the end of p.
	tail := 0
	for i := len(p) - 1; i >= 0 && i >= len(p)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(p[i]) {
			if !utf8.FullRune(p[i:]) {
				tail = len(p) - i
			}
			break
		}
	}
	if !utf8.Valid(p[:len(p)-tail]) {
		c.bad = true
		return n, nil
	}
	c.npend = copy(c.pending[:], p[len(p)-tail:])
	return n, nil
}

func (c *blobCheck) valid() bool { return !c.bad && c.npend == 0 }
