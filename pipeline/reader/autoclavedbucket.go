package reader

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"

	"github.com/klauspost/compress/gzip"

	"github.com/backfill-dev/backfill/internal/lz4frame"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/reader/index"
)

// Bucket layouts (docs/formats.md §1 and §2).
const (
	FormatAuto       Format = "auto" // told per bucket (DetectFormat)
	FormatCanned     Format = "canned"
	FormatAutoclaved Format = "autoclaved"
)

// ACFile is an autoclaved file as its index describes it.
type ACFile struct {
	Frames  []lz4frame.Frame
	Reports []*ACIndexReport
	Closed  bool // its /file row was read
	Size    int64
	SHA1    [20]byte
	CRC32   int32
}

// ACIndexReport is a report of an autoclaved file as its index describes it.
type ACIndexReport struct {
	Textname string
	SrcSize  int64
	SHA1     [20]byte
	Datums   int
	FirstOff int64 // text_off of its first datum, 0 without one
	Badblobs []ACBadblob
	// Items are the datum rows, in order; kept only when the bucket is
	// opened for the data path.
	Items []ACDatum
	// Cutoff is the /report row's src_cutoff: the slicer gave up there.
	Cutoff    int64
	HasCutoff bool
	Info      string
	Closed    bool
	// Damaged is set when a row inside the report is bad: its numbering
	// cannot be trusted, so it gets no IDs.
	Damaged string
}

// ACDatum is one datum row.
type ACDatum struct {
	TextOff, TextSize int64
	SHA1              [20]byte
}

// ACBadblob is one badblob row, with its place among the report's blobs.
type ACBadblob struct {
	Blob            uint32 // datums and badblobs before it
	SrcOff, SrcSize int64
	Info            string
	SHA1            [20]byte // orig_sha1
}

// Blobs is the report's datums and badblobs.
func (r *ACIndexReport) Blobs() int { return r.Datums + len(r.Badblobs) }

// Options say how to open a bucket.
type Options struct {
	// Format is FormatAuto (the default when empty), FormatCanned or
	// FormatAutoclaved.
	Format Format
	// Datums keeps every datum row of an autoclaved index, which the
	// data path checks the files against.
	Datums bool
}

// Open lists the local bucket folder dir, tells its layout and reads its
// index, as OpenIn does.
func Open(dir string, opt Options) (*Bucket, error) {
	parent, date := store.Local(dir).Parent()
	return OpenIn(context.Background(), parent, date, opt)
}

// OpenIn lists the bucket folder date of fsys, tells its layout and reads
// its index. Its files are read under ctx.
// Problems with the index or with files are in Bucket.Problems; the error
// is only for a folder that cannot be listed or a bad Format.
//
// The folder is listed once and the index opened once: its first row
// tells the layout before it is read as that layout's index.
func OpenIn(ctx context.Context, fsys store.Store, date string, opt Options) (*Bucket, error) {
	format := opt.Format
	switch format {
	case "", FormatAuto, FormatCanned, FormatAutoclaved:
	default:
		return nil, fmt.Errorf("unknown format %q (want auto, canned or autoclaved)", opt.Format)
	}
	l, err := listBucket(ctx, fsys, date)
	if err != nil {
		return nil, err
	}
	ix := openIndex(ctx, fsys, date, l.fp)
	defer ix.close()
	if format == "" || format == FormatAuto {
		format = l.detect(ix)
	}
	if format == FormatCanned {
		return l.canned(ix), nil
	}
	return l.autoclaved(ix, opt.Datums), nil
}

// detect tells a bucket's layout: from the first row of its index (an
// autoclaved index is an event stream whose rows have a "type"), or,
// without a readable index, from its first file's LZ4 frame header (the
// autoclaving writer set the content-size flag, the lz4 CLI that canned
// from a pipe could not).
func (l *listing) detect(ix *indexFile) Format {
	if line, ok := ix.firstRow(); ok {
		if line == nil {
			return FormatCanned // a gzip header that does not parse
		}
		if bytes.Contains(line, []byte(`"type": "file"`)) || bytes.Contains(line, []byte(`"type":"file"`)) {
			return FormatAutoclaved
		}
		return FormatCanned
	}
	for _, name := range l.lz4s {
		f, err := l.b.FS.Open(l.b.ctx, path.Join(l.b.Date, name))
		if err != nil {
			continue
		}
		var h [5]byte
		_, err = io.ReadFull(f, h[:])
		f.Close()
		if err == nil && binary.LittleEndian.Uint32(h[:]) == 0x184D2204 && h[4]&0x08 != 0 {
			return FormatAutoclaved
		}
		return FormatCanned
	}
	return FormatCanned
}

// autoclaved makes the listed bucket an autoclaved one, with the rows of
// its index.
func (l *listing) autoclaved(ix *indexFile, datums bool) *Bucket {
	b, onDisk, dir := l.b, l.onDisk, l.b.Date
	b.Format = FormatAutoclaved
	files, names := b.readAutoclavedIndex(ix, datums)
	ix.close()
	b.Fingerprint = fmt.Sprintf("%x", l.fp.Sum(nil))
	for _, name := range names {
		f := files[name]
		base := strings.TrimPrefix(name, b.Date+"/")
		c := Container{Name: name, Path: path.Join(dir, base), Size: f.Size, Tar: strings.HasSuffix(name, ".tar.lz4"), Indexed: true, AC: f}
		if info, ok := onDisk[base]; ok && !strings.Contains(base, "/") {
			c.Size = info.Size()
			delete(onDisk, base)
		} else {
			c.Missing = true
		}
		b.Containers = append(b.Containers, c)
	}
	var extra []string
	for base := range onDisk {
		extra = append(extra, base)
	}
	sort.Strings(extra)
	for _, base := range extra {
		b.Problems = append(b.Problems, deadletter.Record{Bucket: b.Date, File: b.Date + "/" + base, Reason: deadletter.NotInIndex,
			Message: "the autoclaved index does not list this file; without its rows its measurements cannot be numbered, so it is not read"})
	}
	sort.Slice(b.Containers, func(i, j int) bool { return b.Containers[i].Name < b.Containers[j].Name })
	for _, c := range b.Containers {
		if !c.Missing {
			b.Bytes += c.Size
		}
	}
	return b
}

// readAutoclavedIndex reads the bucket's autoclaved index into its files,
// each once, in index order, and feeds the index bytes to fp. Every bad
// row is a problem with its line; a bad row inside a report damages that
// report (its numbering is in doubt), and a file whose rows end early is
// kept with the reports its rows closed.
func (b *Bucket) readAutoclavedIndex(ix *indexFile, datums bool) (map[string]*ACFile, []string) {
	indexFile := b.Date + "/" + IndexName
	// Index-level records are notices: a report whose rows are in doubt
	// gets a reject record of its own when it is read.
	problem := func(reason, msg string) {
		b.Problems = append(b.Problems, deadletter.Record{Bucket: b.Date, File: indexFile, Reason: reason, Kind: deadletter.Notice, Message: msg})
	}
	if errors.Is(ix.err, os.ErrNotExist) {
		problem(deadletter.IndexMissing, "no "+IndexName+": an autoclaved bucket cannot be numbered without its index; nothing is read")
		return nil, nil
	}
	if ix.err != nil {
		problem(deadletter.Unreadable, ix.err.Error())
		return nil, nil
	}
	br := ix.raw
	var r io.Reader = br
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		gz, err := gzip.NewReader(br)
		if err != nil {
			problem(deadletter.BadIndexRow, "gzip header: "+err.Error()+"; nothing is read")
			return nil, nil
		}
		defer gz.Close()
		r = gz
	}
	files := map[string]*ACFile{}
	var names []string
	var file *ACFile
	var fileName string
	var report *ACIndexReport
	var frame *lz4frame.Frame
	skipFile := false // rows of a file listed twice
	pending := ""     // a bad row since the last report: the next one is damaged
	x := index.NewAutoclaved(r)
	for {
		ev, err := x.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var ie *index.Error
			if !errors.As(err, &ie) {
				ie = &index.Error{Err: err}
			}
			msg := err.Error()
			inside := fmt.Sprintf("line %d of the index, inside this report, is bad (%v): its measurements cannot be numbered", ie.Line, ie.Err)
			switch {
			case skipFile:
			case report != nil:
				damage(report, inside)
			case file != nil:
				// A row between reports may be one of either: neither
				// can be numbered.
				near := fmt.Sprintf("line %d of the index, next to this report, is bad (%v): its measurements cannot be numbered", ie.Line, ie.Err)
				if n := len(file.Reports); n > 0 {
					damage(file.Reports[n-1], near)
				}
				pending = near
			}
			if file != nil {
				msg = fmt.Sprintf("%s (in %s)", msg, fileName)
			}
			problem(deadletter.BadIndexRow, msg)
			if x.Ended() {
				break
			}
			continue
		}
		// A row at odds with the rows around it, which does not change
		// how the reports are numbered.
		odd := func(reason, format string, args ...any) {
			msg := fmt.Sprintf("line %d: ", ev.Line) + fmt.Sprintf(format, args...)
			b.Problems = append(b.Problems, deadletter.Record{Bucket: b.Date, File: fileName, Reason: reason, Message: msg + " (the index row)"})
		}
		switch ev.Kind {
		case index.RowFile:
			fileName, report, frame, skipFile, pending = ev.Filename, nil, nil, false, ""
			if files[ev.Filename] != nil {
				problem(deadletter.BadIndexRow, fmt.Sprintf("line %d: %s is listed twice; the second listing is skipped", ev.Line, ev.Filename))
				skipFile, file = true, &ACFile{}
				continue
			}
			if !strings.HasPrefix(ev.Filename, b.Date+"/") || !strings.HasSuffix(ev.Filename, ".lz4") {
				problem(deadletter.BadIndexRow, fmt.Sprintf("line %d: file %q is not a .lz4 file of bucket %s; it is skipped", ev.Line, ev.Filename, b.Date))
				skipFile, file = true, &ACFile{}
				continue
			}
			file = &ACFile{}
			files[ev.Filename] = file
			names = append(names, ev.Filename)
		case index.RowFrame:
			fr := lz4frame.Frame{FileOff: ev.FileOff, FileSize: ev.FileSize, TextOff: ev.TextOff, TextSize: ev.TextSize}
			var want lz4frame.Frame
			if n := len(file.Frames); n > 0 {
				last := file.Frames[n-1]
				want = lz4frame.Frame{FileOff: last.FileOff + last.FileSize, TextOff: last.TextOff + last.TextSize}
			}
			if fr.FileOff != want.FileOff || fr.TextOff != want.TextOff {
				odd(deadletter.FrameMismatch, "frame at file_off %d, text_off %d: the frame before it ends at %d, %d", fr.FileOff, fr.TextOff, want.FileOff, want.TextOff)
			}
			file.Frames = append(file.Frames, fr)
			frame = &file.Frames[len(file.Frames)-1]
		case index.RowEndFrame:
			frame = nil
		case index.RowReport:
			report = &ACIndexReport{Textname: ev.Textname, SrcSize: ev.SrcSize, SHA1: ev.SHA1, Damaged: pending}
			pending = ""
			if !skipFile {
				file.Reports = append(file.Reports, report)
			}
		case index.RowDatum:
			if ev.TextOff < frame.TextOff || ev.TextOff+ev.TextSize > frame.TextOff+frame.TextSize {
				odd(deadletter.DatumMismatch, "datum at text_off %d, %d bytes, lies outside its frame (text_off %d, %d bytes)", ev.TextOff, ev.TextSize, frame.TextOff, frame.TextSize)
			}
			if report.Datums == 0 {
				report.FirstOff = ev.TextOff
			}
			if datums {
				report.Items = append(report.Items, ACDatum{TextOff: ev.TextOff, TextSize: ev.TextSize, SHA1: ev.SHA1})
			}
			report.Datums++
		case index.RowBadblob:
			report.Badblobs = append(report.Badblobs, ACBadblob{Blob: uint32(report.Blobs()), SrcOff: ev.SrcOff, SrcSize: ev.SrcSize, Info: ev.Info, SHA1: ev.SHA1})
		case index.RowEndReport:
			report.Closed, report.Cutoff, report.HasCutoff, report.Info = true, ev.Cutoff, ev.HasCutoff, ev.Info
			report = nil
		case index.RowEndFile:
			file.Closed, file.Size, file.SHA1, file.CRC32 = true, ev.FileSize, ev.SHA1, ev.CRC32
			file, report, frame = nil, nil, nil
		}
	}
	return files, names
}

// damage marks r as one whose numbering is in doubt, keeping the first
// reason.
func damage(r *ACIndexReport, why string) {
	if r.Damaged == "" {
		r.Damaged = why
	}
}
