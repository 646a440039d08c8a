package reader

import (
	"archive/tar"
	"context"
	"crypto/sha1"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"strings"

	"github.com/backfill-dev/backfill/internal/lz4frame"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/reader/report"
)

// MaxVerifiedDatum bounds the datums Verify JSON-parses; a longer one is
// checked for its framing only ("{" … "}" and its "\n").
const MaxVerifiedDatum = 64 << 20

// acReport hands one report of an autoclaved file to h, with the records
// its index rows call for. blobs is how many of its blobs are to be
// numbered: all of them from the index alone, fewer when the data path
// lost the rest of the file.
func acReport(b *Bucket, c Container, r *ACIndexReport, datums bool, blobs int, h Handler) {
	problem := func(off int64, reason, msg string) {
		h.Problem(deadletter.Record{Bucket: b.Date, File: c.Name, Textname: r.Textname, Offset: off, Reason: reason, Message: msg})
	}
	if r.Damaged != "" {
		problem(0, deadletter.BadIndexRow, r.Damaged)
		return
	}
	kind := report.KindOf(r.Textname)
	if kind == report.KindUnknown {
		problem(0, deadletter.BadTextname, "the textname ends in neither .json nor .yaml")
		return
	}
	// ndx under the policy of the first blob not numbered.
	n := blobs
	for _, bb := range r.Badblobs {
		if int(bb.Blob) >= blobs {
			break
		}
		if datums {
			n--
			problem(bb.SrcOff, deadletter.Badblob, fmt.Sprintf("blob %d (%d bytes) does not parse (%s); under --ndx datums it has no ID", bb.Blob, bb.SrcSize, bb.Info))
		}
	}
	switch {
	case !r.Closed:
		h.Problem(deadletter.Record{Bucket: b.Date, File: c.Name, Textname: r.Textname, Reason: deadletter.BadIndexRow, Kind: deadletter.Notice,
			Message: fmt.Sprintf("the index ends before this report's /report row; the %d measurements it lists keep their IDs", n)})
	case r.HasCutoff:
		reason := deadletter.TruncatedReport
		if strings.Contains(r.Info, "BrokenFrame") {
			reason = deadletter.BrokenFrame
		}
		problem(r.Cutoff, reason, fmt.Sprintf("the OONI slicer gave up at byte %d of the raw report (%s); the %d measurements before it keep their IDs", r.Cutoff, r.Info, n))
	case r.Blobs() == 0 || (datums && r.Datums == 0):
		problem(0, deadletter.EmptyReport, "the report holds no measurements")
	}
	h.Report(ContainerReport{Textname: r.Textname, Kind: kind, Offset: r.FirstOff,
		Stats: report.Stats{N: uint32(n), Size: r.SrcSize}, IndexSHA1: &r.SHA1})
}

// IndexReports gives the reports of autoclaved container c from its index
// rows alone, without reading the file: every (textname, ndx) the index
// lists, numbered under the policy (datums: datum rows only; otherwise
// datum and badblob rows). The file is only looked at: a missing file, or
// one of another size than the index says, is recorded, and the IDs are
// still given.
func IndexReports(b *Bucket, c Container, datums bool, h Handler) {
	f := c.AC
	problem := func(reason, msg string) {
		// Nothing is lost here: every ID comes from the index.
		h.Problem(deadletter.Record{Bucket: b.Date, File: c.Name, Reason: reason, Kind: deadletter.Notice, Message: msg})
	}
	switch {
	case c.Missing:
		problem(deadletter.MissingContainer, "the index lists "+c.Name+", which is not in the bucket; its IDs are given from the index")
	case f.Closed && c.Size != f.Size:
		problem(deadletter.SizeMismatch, fmt.Sprintf("the file is %d bytes, the index says %d", c.Size, f.Size))
	case len(f.Frames) > 0:
		if last := f.Frames[len(f.Frames)-1]; last.FileOff+last.FileSize > c.Size {
			problem(deadletter.FrameMismatch, fmt.Sprintf("the index's last frame ends at byte %d, beyond the file's %d bytes", last.FileOff+last.FileSize, c.Size))
		}
	}
	if !f.Closed {
		problem(deadletter.BadIndexRow, "the index ends before this file's /file row")
	}
	for _, r := range f.Reports {
		acReport(b, c, r, datums, r.Blobs(), h)
	}
}

// AutoclavedReader reads autoclaved files and checks them against their
// index: every frame's compressed and decompressed range, each tar member
// against the report the index lists next, every datum's offset, size and
// framing (a JSON object and its "\n", back to back), and the file's size
// and CRC-32 (and SHA-1 with Verify). Keep one per worker.
type AutoclavedReader struct {
	// Datums numbers datum rows only (--ndx datums).
	Datums bool
	// Verify JSON-parses every datum and checks the file's SHA-1.
	Verify bool

	fc  *lz4frame.Chain
	sha hash.Hash
	crc hash.Hash32
	buf []byte
	chk datumCheck
}

// NewAutoclavedReader returns an AutoclavedReader.
func NewAutoclavedReader() *AutoclavedReader {
	return &AutoclavedReader{fc: lz4frame.NewChain(), sha: sha1.New(), crc: crc32.NewIEEE(), buf: make([]byte, 64<<10)}
}

// Read reads autoclaved container c of bucket b (opened with
// Options.Datums) and reports to h. Every problem is a dead-letter record;
// the error is only ctx's.
func (ar *AutoclavedReader) Read(ctx context.Context, b *Bucket, c Container, h Handler) (ContainerStats, error) {
	problem := func(textname string, off int64, reason, msg string) {
		h.Problem(deadletter.Record{Bucket: b.Date, File: c.Name, Textname: textname, Offset: off, Reason: reason, Message: msg})
	}
	notice := func(textname string, off int64, reason, msg string) {
		h.Problem(deadletter.Record{Bucket: b.Date, File: c.Name, Textname: textname, Offset: off, Reason: reason, Kind: deadletter.Notice, Message: msg})
	}
	f := c.AC
	lost := func(from int, reason, why string) {
		for _, r := range f.Reports[from:] {
			problem(r.Textname, 0, reason, why)
		}
	}
	if c.Missing {
		problem("", 0, deadletter.MissingContainer, "the index lists "+c.Name+", which is not in the bucket")
		lost(0, deadletter.MissingContainer, "the index lists this report in "+c.Name+", which is not in the bucket")
		return ContainerStats{}, nil
	}
	file, err := b.open(c.Path)
	if store.Failed(err) {
		return ContainerStats{}, err
	}
	if err != nil {
		problem("", 0, deadletter.Unreadable, err.Error())
		lost(0, deadletter.Unreadable, "its file cannot be opened")
		return ContainerStats{}, nil
	}
	defer file.Close()
	ar.sha.Reset()
	ar.crc.Reset()
	var sums io.Writer = ar.crc
	if ar.Verify {
		sums = io.MultiWriter(ar.sha, ar.crc)
	}
	// Frames against the index's frame rows.
	var frameBad []string
	frames := 0
	ar.fc.OnFrame = func(got lz4frame.Frame) {
		if frames < len(f.Frames) && f.Frames[frames] != got {
			want := f.Frames[frames]
			frameBad = append(frameBad, fmt.Sprintf("frame %d is bytes %d+%d of the file holding %d+%d of the stream; the index says %d+%d holding %d+%d",
				frames, got.FileOff, got.FileSize, got.TextOff, got.TextSize, want.FileOff, want.FileSize, want.TextOff, want.TextSize))
		}
		frames++
	}
	ar.fc.Reset(io.TeeReader(file, sums))

	next := 0 // the next report of the index
	where := make(map[string]int, len(f.Reports))
	for i, r := range f.Reports {
		where[r.Textname] = i
	}
	var failed error // the stream's error, which ends the file
	read := func(r *ACIndexReport, content io.Reader, start, size int64) {
		got, mism, err := ar.checkDatums(r, content, start, size)
		if len(mism) > 0 {
			problem(r.Textname, start, deadletter.DatumMismatch, fmt.Sprintf("%d of the %d datums do not match the index; the first: %s", len(mism), len(r.Items), mism[0]))
		}
		blobs := r.Blobs()
		if err != nil {
			failed = err
			// Number the blobs before the first datum not read.
			blobs = got
			for _, bb := range r.Badblobs {
				if int(bb.Blob) <= blobs {
					blobs++
				}
			}
			problem(r.Textname, start, streamReason(err), fmt.Sprintf("the file's stream fails inside this report (%v); the %d measurements read are kept", err, got))
		}
		acReport(b, c, r, ar.Datums, blobs, h)
	}
	if c.Tar {
		tr := tar.NewReader(ar.fc)
		for failed == nil {
			if err := ctx.Err(); err != nil {
				return ContainerStats{}, err
			}
			off := ar.fc.TextOffset()
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				failed = err
				if errors.Is(err, io.ErrUnexpectedEOF) && ar.fc.TextOffset() == off && ar.fc.AtEnd() {
					failed = errors.New("tar: the stream ends without the tar's end-of-archive blocks")
				}
				break
			}
			i, listed := where[hdr.Name]
			switch {
			case hdr.Typeflag != tar.TypeReg:
				notice(hdr.Name, off, deadletter.TarCorrupt, fmt.Sprintf("member of type %q is not a regular file; skipped", hdr.Typeflag))
			case !listed || i < next:
				problem(hdr.Name, off, deadletter.NotInIndex, "the index does not list this member here; without its rows it cannot be numbered, so it gets no IDs")
			default:
				for _, r := range f.Reports[next:i] {
					problem(r.Textname, 0, deadletter.NotInContainer, "the index lists this report before "+hdr.Name+", the file does not hold it")
				}
				next = i + 1
				read(f.Reports[i], tr, ar.fc.TextOffset(), hdr.Size)
			}
		}
	} else if len(f.Reports) != 1 {
		problem("", 0, deadletter.BadIndexRow, fmt.Sprintf("an as-is file holds one report, the index lists %d; it is not read", len(f.Reports)))
		lost(0, deadletter.BadIndexRow, "listed in an as-is file with other reports")
		next = len(f.Reports)
	} else {
		next = 1
		read(f.Reports[0], ar.fc, 0, -1)
	}
	if failed == nil {
		if _, err := io.Copy(io.Discard, ar.fc); err != nil {
			failed = err
		}
	}
	_, _ = io.Copy(sums, file) // the rest of the file, for its checksums; a read error is file.failed, below
	st := ContainerStats{BytesIn: ar.fc.FileOffset(), BytesOut: ar.fc.TextOffset()}
	if failed != nil {
		var fe *lz4frame.FrameError
		off := ar.fc.TextOffset()
		if errors.As(failed, &fe) {
			off = fe.Offset
		}
		problem("", off, streamReason(failed), failed.Error())
		lost(next, streamReason(failed), fmt.Sprintf("lost: %s fails before this report (%v)", c.Name, failed))
	} else {
		for _, r := range f.Reports[next:] {
			problem(r.Textname, 0, deadletter.NotInContainer, "the index lists this report, the file does not hold it")
		}
		if frames != len(f.Frames) {
			frameBad = append(frameBad, fmt.Sprintf("the file has %d frames, the index lists %d", frames, len(f.Frames)))
		}
	}
	if len(frameBad) > 0 {
		problem("", 0, deadletter.FrameMismatch, fmt.Sprintf("%d differences with the index's frame rows; the first: %s", len(frameBad), frameBad[0]))
	}
	if size := file.n; f.Closed {
		var sum [20]byte
		ar.sha.Sum(sum[:0])
		switch {
		case size != f.Size:
			problem("", 0, deadletter.SizeMismatch, fmt.Sprintf("the file is %d bytes, the index says %d", size, f.Size))
		case ar.Verify && sum != f.SHA1:
			problem("", 0, deadletter.ChecksumMismatch, fmt.Sprintf("the file's SHA-1 is %s, the index says %s", b64(sum[:]), b64(f.SHA1[:])))
		case int32(ar.crc.Sum32()) != f.CRC32:
			problem("", 0, deadletter.ChecksumMismatch, fmt.Sprintf("the file's CRC-32 is %d, the index says %d", int32(ar.crc.Sum32()), f.CRC32))
		}
	} else {
		notice("", 0, deadletter.BadIndexRow, "the index ends before this file's /file row")
	}
	if file.failed != nil {
		return ContainerStats{}, file.failed
	}
	return st, nil
}

// streamReason names the dead-letter reason of a stream error.
func streamReason(err error) string {
	var fe *lz4frame.FrameError
	switch {
	case errors.As(err, &fe) && fe.Truncated:
		return deadletter.LZ4Truncated
	case errors.As(err, &fe):
		if strings.Contains(fe.Err.Error(), "content size") {
			return deadletter.LZ4ContentSize
		}
		return deadletter.LZ4Corrupt
	case errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "end-of-archive"):
		return deadletter.TarTruncated
	}
	return deadletter.TarCorrupt
}

// checkDatums reads a report's content (which starts at stream offset
// start and is size bytes long, or runs to the end when size < 0) and
// checks each datum row against it. It returns how many datums it read
// whole, a description of each mismatch, and the stream's error.
func (ar *AutoclavedReader) checkDatums(r *ACIndexReport, content io.Reader, start, size int64) (int, []string, error) {
	in := &countingReader{r: content}
	var mism []string
	end := start + size
	for i, d := range r.Items {
		pos := start + in.n
		switch {
		case d.TextOff < pos:
			mism = append(mism, fmt.Sprintf("datum %d at %d starts before the end of the one before it (%d)", i, d.TextOff, pos))
			continue
		case size >= 0 && d.TextOff+d.TextSize+1 > end:
			mism = append(mism, fmt.Sprintf("datum %d at %d+%d runs past the end of the member (%d)", i, d.TextOff, d.TextSize, end))
			continue
		case d.TextOff > pos:
			mism = append(mism, fmt.Sprintf("%d bytes at %d are no datum's", d.TextOff-pos, pos))
			if _, err := io.CopyN(io.Discard, in, d.TextOff-pos); err != nil {
				return i, mism, noEOF(err)
			}
		}
		ar.chk.reset(ar.Verify && d.TextSize <= MaxVerifiedDatum)
		if _, err := io.CopyBuffer(&ar.chk, io.LimitReader(in, d.TextSize+1), ar.buf); err != nil {
			return i, mism, noEOF(err)
		}
		if ar.chk.n != d.TextSize+1 {
			return i, mism, io.ErrUnexpectedEOF
		}
		if msg := ar.chk.verdict(); msg != "" {
			mism = append(mism, fmt.Sprintf("datum %d at %d+%d %s", i, d.TextOff, d.TextSize, msg))
		}
	}
	rest, err := io.CopyBuffer(io.Discard, in, ar.buf)
	if err != nil {
		return len(r.Items), mism, noEOF(err)
	}
	if rest > 0 {
		mism = append(mism, fmt.Sprintf("%d bytes after the last datum are no datum's", rest))
	}
	return len(r.Items), mism, nil
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// datumCheck takes one datum and its "\n": it checks the framing, and
// keeps the datum for a JSON parse when asked.
type datumCheck struct {
	n           int64
	first, last byte
	prev        byte
	keep        bool
	data        []byte
}

func (d *datumCheck) reset(keep bool) {
	d.n, d.first, d.last, d.prev, d.keep, d.data = 0, 0, 0, 0, keep, d.data[:0]
}

func (d *datumCheck) Write(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if d.n == 0 {
		d.first = p[0]
	}
	if len(p) >= 2 {
		d.prev = p[len(p)-2]
	} else {
		d.prev = d.last
	}
	d.last = p[len(p)-1]
	if d.keep {
		d.data = append(d.data, p...)
	}
	d.n += int64(len(p))
	return len(p), nil
}

func (d *datumCheck) verdict() string {
	switch {
	case d.last != '\n':
		return "is not followed by a newline"
	case d.first != '{' || d.prev != '}':
		return "is not a JSON object"
	case d.keep && !json.Valid(d.data[:len(d.data)-1]):
		return "does not parse as JSON"
	}
	return ""
}
