package reader

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pierrec/lz4/v4"
	"golang.org/x/text/unicode/norm"

	"github.com/backfill-dev/backfill/internal/lz4nocheck"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/reader/index"
	"github.com/backfill-dev/backfill/pipeline/reader/report"
)

// IndexName is the name of a bucket's index file.
const IndexName = "index.json.gz"

var bucketRe = regexp.MustCompile(`^20[0-9]{2}-[01][0-9]-[0-3][0-9]$`)

// IsBucketName reports whether name is a bucket folder's: a day that
// exists, as YYYY-MM-DD (2017-02-30 is not one).
func IsBucketName(name string) bool {
	if !bucketRe.MatchString(name) {
		return false
	}
	_, err := time.Parse(time.DateOnly, name)
	return err == nil
}

// Container is one .lz4 file of a bucket, with its index row when the
// index lists it.
type Container struct {
	Name    string // as the index names it: "YYYY-MM-DD/<name>.lz4"
	Path    string // its name in the bucket's Store (YYYY-MM-DD/<name>.lz4)
	Size    int64  // on disk; for a missing file, the index's size
	Tar     bool
	Indexed bool
	Missing bool // listed by the index, not on disk
	// Lost are the records of a Missing container, made when the bucket
	// is opened (its index row's texts are not kept): at most
	// deadletter.MaxListed of the bucket's, the rest counted in one
	// record of Bucket.Problems.
	Lost  []deadletter.Record
	Entry index.CannedFile // the index row, when Indexed (canned)
	AC    *ACFile          // the index's rows of the file (autoclaved)
}

// Bucket is a bucket folder: its containers in name order, the
// problems found in its index, and a fingerprint of its input.
type Bucket struct {
	Format     Format // FormatCanned or FormatAutoclaved
	Date       string
	Dir        string          // where the bucket folder is, as shown to a person
	FS         store.Store     // the folder of bucket folders: the bucket is its folder Date
	ctx        context.Context // what its files are read under
	Containers []Container
	Problems   []deadletter.Record
	// Fingerprint changes when the index or any file's name, size or
	// modification time (on S3: ETag) changes.
	Fingerprint string
	// Listing is the fingerprint of the folder's listing alone: List's.
	Listing string
	Bytes   int64 // compressed bytes of the containers on disk
}

// OpenBucket lists the local bucket folder dir and reads its index as a
// canned one. Problems with the index or with files are in
// Bucket.Problems; the error is only for a folder that cannot be listed.
func OpenBucket(dir string) (*Bucket, error) {
	return Open(dir, Options{Format: FormatCanned})
}

// canned makes the listed bucket a canned one, with the rows of its index.
func (l *listing) canned(ix *indexFile) *Bucket {
	b, onDisk, dir := l.b, l.onDisk, l.b.Date
	date := b.Date
	var capper deadletter.Capper
	// A file whose name differs from a row's only by case or Unicode
	// normalisation is read as that row, unless a later row names it
	// exactly: then the earlier row is missing after all.
	byFold := map[string][]string{}
	for base := range onDisk {
		byFold[foldName(base)] = append(byFold[foldName(base)], base)
	}
	type folded struct {
		i    int // in b.Containers
		info fs.FileInfo
	}
	foldedTo := map[string]folded{} // by the file's name
	lose := func(c *Container) {
		c.Missing, c.Path, c.Size = true, path.Join(dir, strings.TrimPrefix(c.Name, date+"/")), c.Entry.Size
		c.Lost = missingRecords(&capper, date, c.Entry)
		c.Entry.Texts = nil // however many the row claims, they are not kept
	}
	b.readIndex(ix, func(f index.CannedFile) {
		base := strings.TrimPrefix(f.Filename, date+"/")
		c := Container{Name: f.Filename, Path: path.Join(dir, base), Size: f.Size, Tar: f.Tar, Indexed: true, Entry: f}
		plain := f.Filename == date+"/"+base && !strings.Contains(base, "/")
		if fd, ok := foldedTo[base]; ok && plain {
			// The file this row names exactly was taken by a row that
			// only folds to it.
			lose(&b.Containers[fd.i])
			delete(foldedTo, base)
			onDisk[base] = fd.info
		}
		if info, ok := onDisk[base]; ok && plain {
			c.Size = info.Size()
			delete(onDisk, base)
		} else if other, ok := foldMatch(byFold, onDisk, base); ok && plain {
			info := onDisk[other]
			c.Path, c.Size = path.Join(dir, other), info.Size()
			delete(onDisk, other)
			foldedTo[other] = folded{len(b.Containers), info}
		} else {
			lose(&c)
		}
		b.Containers = append(b.Containers, c)
	})
	ix.close()
	for _, other := range slices.Sorted(maps.Keys(foldedTo)) {
		c := &b.Containers[foldedTo[other].i]
		b.Problems = append(b.Problems, deadletter.Record{Bucket: date, File: c.Name, Reason: deadletter.NameMismatch, Kind: deadletter.Notice,
			Message: fmt.Sprintf("the index names %s; the bucket holds %s, the same name but for case or Unicode normalisation: read as that row", c.Name, other)})
	}
	b.Problems = append(b.Problems, capper.Rest()...)
	b.Fingerprint = hex.EncodeToString(l.fp.Sum(nil))
	for _, base := range slices.Sorted(maps.Keys(onDisk)) {
		info := onDisk[base]
		b.Containers = append(b.Containers, Container{Name: date + "/" + base, Path: path.Join(dir, base),
			Size: info.Size(), Tar: strings.HasSuffix(base, ".tar.lz4")})
		b.Problems = append(b.Problems, deadletter.Record{Bucket: date, File: date + "/" + base,
			Reason: deadletter.NotInIndex, Kind: deadletter.Notice, Message: "the index does not list this container; it is read unchecked"})
	}
	sort.Slice(b.Containers, func(i, j int) bool { return b.Containers[i].Name < b.Containers[j].Name })
	for _, c := range b.Containers {
		if !c.Missing {
			b.Bytes += c.Size
		}
	}
	return b
}

// listing is a bucket folder as listed once: the bucket, its containers
// (.lz4 regular files) by name, the fingerprint so far, and the names
// ending in .lz4 in order (for telling the layout without an index).
type listing struct {
	b      *Bucket
	onDisk map[string]fs.FileInfo
	fp     hash.Hash
	lz4s   []string
}

// listBucket lists the bucket folder date of fsys: its containers by name,
// and a fingerprint hash fed with every entry's name, size and
// modification time (on S3, its ETag). Anything else is a problem of the
// bucket.
func listBucket(ctx context.Context, fsys store.Store, date string) (*listing, error) {
	b := &Bucket{Date: date, Dir: fsys.Where(date), FS: fsys, ctx: ctx, Format: FormatCanned}
	ents, err := fsys.ReadDir(ctx, date)
	if err != nil {
		return nil, err
	}
	l := &listing{b: b, onDisk: map[string]fs.FileInfo{}, fp: sha256.New()}
	fp, onDisk, lfp := l.fp, l.onDisk, sha256.New()
	defer func() { b.Listing = hex.EncodeToString(lfp.Sum(nil)) }()
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			return nil, err
		}
		entryFingerprint(io.MultiWriter(fp, lfp), e.Name(), info)
		if strings.HasSuffix(e.Name(), ".lz4") {
			l.lz4s = append(l.lz4s, e.Name())
		}
		if e.Name() == IndexName {
			continue
		}
		if !info.Mode().IsRegular() || !strings.HasSuffix(e.Name(), ".lz4") {
			b.Problems = append(b.Problems, deadletter.Record{Bucket: date, File: date + "/" + e.Name(),
				Reason: deadletter.NotInIndex, Kind: deadletter.Notice, Message: "not a container (.lz4 regular file); ignored"})
			continue
		}
		onDisk[e.Name()] = info
	}
	return l, nil
}

// entryFingerprint feeds w with what identifies a version of a folder
// entry: its name and store.Stamp (on disk its size, modification time,
// inode and change time, so that other bytes copied in with the times
// kept are another version; on S3 its size and ETag).
func entryFingerprint(w io.Writer, name string, info fs.FileInfo) {
	fmt.Fprintf(w, "%s\x00%s\x00", name, store.Stamp(info))
}

// Listing is what a bucket folder's listing alone tells: the bytes of its
// files and a fingerprint of their names, sizes and versions (without
// reading the index, which Bucket.Fingerprint covers too).
type Listing struct {
	Bytes       int64
	Fingerprint string
}

// List lists the bucket folder date of fsys.
func List(ctx context.Context, fsys store.Store, date string) (Listing, error) {
	ents, err := fsys.ReadDir(ctx, date)
	if err != nil {
		return Listing{}, err
	}
	h := sha256.New()
	var l Listing
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			return Listing{}, err
		}
		entryFingerprint(h, e.Name(), info)
		if !info.IsDir() {
			l.Bytes += info.Size()
		}
	}
	l.Fingerprint = hex.EncodeToString(h.Sum(nil))
	return l, nil
}

// source is an input file being read. It remembers the first failure of
// the store under it (a request that failed after its retries, an object
// that changed): such a read ends with that error, not with records of
// damaged data.
type source struct {
	fs.File
	n      int64 // bytes read
	failed error
}

func (s *source) Read(p []byte) (int, error) {
	n, err := s.File.Read(p)
	s.n += int64(n)
	if err != nil && s.failed == nil && store.Failed(err) {
		s.failed = err
	}
	return n, err
}

// open opens the file name of the bucket's Store.
func (b *Bucket) open(name string) (*source, error) {
	f, err := b.FS.Open(b.ctx, name)
	if err != nil {
		return nil, err
	}
	return &source{File: f}, nil
}

// readIndex returns the good rows of the bucket's index, each container
// once.
// foldName is a container's name for matching names that differ only by
// case or Unicode normalisation.
func foldName(name string) string { return strings.ToLower(norm.NFC.String(name)) }

// foldMatch returns the one file still on disk whose name folds to base's,
// when there is exactly one.
func foldMatch(byFold map[string][]string, onDisk map[string]fs.FileInfo, base string) (string, bool) {
	var found []string
	for _, n := range byFold[foldName(base)] {
		if _, ok := onDisk[n]; ok && n != base {
			found = append(found, n)
		}
	}
	if len(found) != 1 {
		return "", false
	}
	return found[0], true
}

// missingRecords are the records of the index row f whose container is not
// in the bucket: one per report it lists (or one for the file, when it
// lists none), those past deadletter.MaxListed counted by capper.
func missingRecords(capper *deadletter.Capper, date string, f index.CannedFile) []deadletter.Record {
	var out []deadletter.Record
	add := func(r deadletter.Record) {
		if capper.Keep(r) {
			out = append(out, r)
		}
	}
	for _, t := range f.Texts {
		add(deadletter.Record{Bucket: date, File: f.Filename, Textname: t.Textname, Reason: deadletter.MissingContainer,
			Message: "the index lists this report in " + f.Filename + ", which is not in the bucket"})
	}
	if len(f.Texts) == 0 {
		add(deadletter.Record{Bucket: date, File: f.Filename, Reason: deadletter.MissingContainer, Message: "the index lists " + f.Filename + ", which is not in the bucket"})
	}
	return out
}

// readIndex calls each with every row of the bucket's index, in order,
// once per file name.
func (b *Bucket) readIndex(ix *indexFile, each func(index.CannedFile)) {
	problem := func(reason, msg string) {
		// The index is only a check of a canned bucket: without a row,
		// a container is still read, unchecked.
		b.Problems = append(b.Problems, deadletter.Record{Bucket: b.Date, File: b.Date + "/" + IndexName, Reason: reason, Kind: deadletter.Notice, Message: msg})
	}
	if errors.Is(ix.err, os.ErrNotExist) {
		problem(deadletter.IndexMissing, "no "+IndexName+"; every container is read without checks")
		return
	}
	if ix.err != nil {
		problem(deadletter.Unreadable, ix.err.Error()+"; every container is read without checks")
		return
	}
	ir, err := index.NewCannedReader(ix.raw)
	if err != nil {
		problem(deadletter.BadIndexRow, err.Error()+"; every container is read without checks")
		return
	}
	seen := map[string]bool{}
	for {
		row, err := ir.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			problem(deadletter.BadIndexRow, err.Error()+"; the row is skipped")
			continue
		}
		if seen[row.Filename] {
			problem(deadletter.BadIndexRow, fmt.Sprintf("%s is listed twice; the second row is skipped", row.Filename))
			continue
		}
		seen[row.Filename] = true
		each(row)
	}
}

// ContainerReport is one report read from a container.
type ContainerReport struct {
	Textname string
	Kind     report.Kind
	// Offset is the member's header in the decompressed container (0 for
	// an as-is file).
	Offset int64
	Stats  report.Stats
	// IndexSHA1 is the index's text_sha1, when the index lists the report.
	IndexSHA1 *[20]byte
}

// ContainerStats counts what reading a container consumed.
type ContainerStats struct {
	BytesIn  int64 // compressed bytes read from the file
	BytesOut int64 // decompressed bytes
}

// Handler receives what a ContainerReader finds. Report is called once
// per report that yields measurements or was read whole (not for rejected
// or lost reports), in container order; Blob, when not nil, once per
// measurement; Problem once per dead-letter record.
type Handler struct {
	Report  func(ContainerReport)
	Blob    func(textname string, m report.Measurement)
	Problem func(deadletter.Record)
}

// ContainerReader reads canned containers one after the other, reusing
// its decompressor, buffers and hashes: keep one per worker. Sizes and
// CRC-32s are always checked against the index; SHA-1s only with
// VerifySHA1.
//
// A container the index lists is first read without the LZ4 block and
// content checksums (XXH32), which take half the time of decompressing:
// the index's CRC-32 of the file proves every compressed byte and its
// CRC-32s of the reports every report. If that read finds anything at all
// to record, the container is read again with every check, and only that
// read counts, so the records are exactly those of a checked read. The
// reports and measurements of the first read are held until it ends
// clean (the first read of a container of more than maxHeldEvents
// measurements stops at the report that passes the bound, and the
// container is read again with every check). The
// first read walks a tar with fasttar, which leaves any header form but
// the usual ones to that second read and archive/tar.
// VerifySHA1 reads every container with every check.
type ContainerReader struct {
	Reports    *report.Reader
	VerifySHA1 bool
	// ReportSHA1 makes each report's stats carry its SHA-1, without
	// VerifySHA1's checks (nor its hash of the whole file).
	ReportSHA1 bool
	lz         *lz4.Reader
	fast       *lz4nocheck.Decoder
	tar        fastTar
	in         countingReader
	out        countingReader
	fileSHA    hash.Hash
	fileCRC    hash.Hash32
	bufIn      *bufio.Reader
	events     []readEvent // the first read's, kept for the next container
	checked    bool        // every container read with every check (a test's)
}

// NewContainerReader returns a ContainerReader.
func NewContainerReader() *ContainerReader {
	return &ContainerReader{
		Reports: report.NewReader(),
		lz:      lz4.NewReader(nil),
		fast:    lz4nocheck.NewDecoder(),
		fileSHA: sha1.New(),
		fileCRC: crc32.NewIEEE(),
		bufIn:   bufio.NewReaderSize(nil, 256<<10),
	}
}

// readEvent is a report or a measurement the first read of a container
// holds until the read proves clean.
type readEvent struct {
	isReport bool
	report   ContainerReport
	textname string
	m        report.Measurement
}

// maxHeldEvents bounds what the first read holds: a container of more
// measurements is read again with every check, which hands them on as it
// goes.
var maxHeldEvents = 1 << 16

// streamError is an error of the container stream with the reason it
// gives to the dead-letter archive.
type streamError struct {
	reason string
	offset int64
	err    error
}

func (e *streamError) Error() string { return e.err.Error() }

// Read reads container c of bucket b and reports to h. Every problem with
// the data is a dead-letter record; the error is only ctx's or the store's
// (see store.Failed).
func (cr *ContainerReader) Read(ctx context.Context, b *Bucket, c Container, h Handler) (ContainerStats, error) {
	if c.Indexed && !c.Missing && !cr.VerifySHA1 && !cr.checked {
		// The reports and measurements are handed on, in their order,
		// once the read proves clean.
		events := cr.events[:0]
		clean := true
		fctx, stop := context.WithCancel(ctx)
		defer stop()
		fh := Handler{
			Report:  func(r ContainerReport) { events = append(events, readEvent{report: r, isReport: true}) },
			Problem: func(deadletter.Record) { clean = false },
		}
		if h.Blob != nil {
			fh.Blob = func(textname string, m report.Measurement) {
				if len(events) == maxHeldEvents {
					// Too many to hold: the read stops at the next
					// report, and the checked read hands them on.
					clean = false
					stop()
					return
				}
				events = append(events, readEvent{textname: textname, m: m})
			}
		}
		st, err := cr.read(fctx, b, c, fh, true)
		if cap(events) <= maxHeldEvents/16 {
			cr.events = events[:0]
		}
		if err != nil && (clean || ctx.Err() != nil) {
			return st, err
		}
		if clean {
			for _, e := range events {
				if e.isReport {
					h.Report(e.report)
				} else {
					h.Blob(e.textname, e.m)
				}
			}
			return st, nil
		}
	}
	return cr.read(ctx, b, c, h, false)
}

// read reads the container once, with the LZ4 checksums unless fast.
func (cr *ContainerReader) read(ctx context.Context, b *Bucket, c Container, h Handler, fast bool) (ContainerStats, error) {
	problem := func(textname string, off int64, reason, msg string) {
		h.Problem(deadletter.Record{Bucket: b.Date, File: c.Name, Textname: textname, Offset: off, Reason: reason, Message: msg})
	}
	notice := func(textname string, off int64, reason, msg string) {
		h.Problem(deadletter.Record{Bucket: b.Date, File: c.Name, Textname: textname, Offset: off, Reason: reason, Kind: deadletter.Notice, Message: msg})
	}
	// What the index expects, in order, and what has been read of it.
	var want []index.Text
	if c.Indexed {
		want = c.Entry.Texts
	}
	pending := make(map[string]int, len(want))
	for i, t := range want {
		pending[t.Textname] = i
	}
	lost := func(reason, why string) {
		for _, t := range want {
			if _, ok := pending[t.Textname]; ok {
				problem(t.Textname, 0, reason, why)
			}
		}
	}
	if c.Missing {
		for _, r := range c.Lost {
			h.Problem(r)
		}
		return ContainerStats{}, nil
	}
	f, err := b.open(c.Path)
	if store.Failed(err) {
		return ContainerStats{}, err
	}
	if err != nil {
		problem("", 0, deadletter.Unreadable, err.Error())
		lost(deadletter.Unreadable, "its container cannot be opened")
		return ContainerStats{}, nil
	}
	defer f.Close()
	cr.fileSHA.Reset()
	cr.fileCRC.Reset()
	cr.Reports.SHA1 = cr.VerifySHA1 || cr.ReportSHA1
	var sums io.Writer = cr.fileCRC
	if cr.VerifySHA1 {
		sums = io.MultiWriter(cr.fileSHA, cr.fileCRC)
	}
	cr.bufIn.Reset(io.TeeReader(f, sums))
	cr.in = countingReader{r: cr.bufIn}
	if fast {
		cr.fast.Reset(&cr.in)
		cr.out = countingReader{r: cr.fast}
	} else {
		cr.lz.Reset(&cr.in)
		cr.out = countingReader{r: cr.lz}
	}
	stream := &errTagger{r: &cr.out, in: &cr.in}
	stream.claimed, stream.hasClaim = claimedSize(cr.bufIn)

	var serr *streamError
	readReport := func(r io.Reader, textname string, offset int64) {
		kind := report.KindOf(textname)
		st, err := cr.Reports.Read(r, kind, func(m report.Measurement) {
			if h.Blob != nil {
				h.Blob(textname, m)
			}
		}, func(p deadletter.Record) {
			p.Bucket, p.File, p.Textname = b.Date, c.Name, textname
			h.Problem(p)
		})
		rep := ContainerReport{Textname: textname, Kind: kind, Offset: offset, Stats: st}
		i, listed := pending[textname]
		if listed {
			delete(pending, textname)
			rep.IndexSHA1 = &want[i].SHA1
		}
		if err != nil {
			serr = stream.classify(err)
			problem("", serr.offset, serr.reason, serr.Error())
			problem(textname, serr.offset, serr.reason, fmt.Sprintf("the container stream fails inside this report (%v); the %d measurements read are kept", err, st.N))
		} else if listed {
			t := want[i]
			switch {
			case st.Size != t.Size:
				problem(textname, offset, deadletter.SizeMismatch, fmt.Sprintf("the report is %d bytes, the index says %d", st.Size, t.Size))
			case cr.VerifySHA1 && st.SHA1 != t.SHA1:
				problem(textname, offset, deadletter.ChecksumMismatch, fmt.Sprintf("the report's SHA-1 is %s, the index says %s", b64(st.SHA1[:]), b64(t.SHA1[:])))
			case st.CRC32 != t.CRC32:
				problem(textname, offset, deadletter.ChecksumMismatch, fmt.Sprintf("the report's CRC-32 is %d, the index says %d", st.CRC32, t.CRC32))
			}
		} else if c.Indexed {
			notice(textname, offset, deadletter.NotInIndex, "the index row of this container does not list this report; it is read unchecked")
		}
		if kind == report.KindUnknown {
			problem(textname, offset, deadletter.BadTextname, "the textname ends in neither .json nor .yaml")
		}
		if !st.Rejected && kind != report.KindUnknown {
			h.Report(rep)
		}
	}

	if c.Tar {
		var tr tarMembers = stdTar{tar.NewReader(stream)}
		if fast {
			cr.tar.Reset(stream)
			tr = &cr.tar
		}
		for serr == nil {
			if err := ctx.Err(); err != nil {
				return ContainerStats{}, err
			}
			off := cr.out.n
			name, typ, err := tr.member()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				serr = stream.classify(err)
				if serr.reason == deadletter.TarTruncated && errors.Is(err, io.ErrUnexpectedEOF) && cr.out.n == off {
					serr.err = errors.New("the tar ends without its end-of-archive blocks")
				}
				problem("", serr.offset, serr.reason, serr.Error())
				break
			}
			if typ != tar.TypeReg {
				notice(name, off, deadletter.TarCorrupt, fmt.Sprintf("member of type %q is not a regular file; skipped", typ))
				continue
			}
			readReport(tr, name, off)
		}
	} else {
		textname := b.Date + "/" + strings.TrimSuffix(filepath.Base(c.Name), ".lz4")
		if len(want) == 1 {
			textname = want[0].Textname
		}
		readReport(stream, textname, 0)
	}
	// Read what is left of the stream (tar end blocks and padding), so the
	// frame ends (its content checksum checked, on a checked read) and the
	// sizes are whole.
	if serr == nil {
		if _, err := io.Copy(io.Discard, stream); err != nil {
			serr = stream.classify(err)
			problem("", serr.offset, serr.reason, serr.Error())
		}
	}
	if serr == nil && cr.in.n == 0 {
		serr = &streamError{reason: deadletter.LZ4Truncated, err: errors.New("lz4: the file is empty")}
		problem("", 0, serr.reason, serr.Error())
	}
	_, _ = io.Copy(io.Discard, cr.bufIn) // the rest of the file, for its hashes; a read error is f.failed, below
	st := ContainerStats{BytesIn: cr.in.n, BytesOut: cr.out.n}
	if serr != nil {
		lost(serr.reason, fmt.Sprintf("lost: %s fails before this report (%v)", c.Name, serr.err))
	} else {
		for _, t := range want {
			if _, ok := pending[t.Textname]; ok {
				problem(t.Textname, 0, deadletter.NotInContainer, "the index lists this report, the container does not hold it")
			}
		}
		if c.Indexed && st.BytesOut != c.Entry.TextSize {
			problem("", 0, deadletter.SizeMismatch, fmt.Sprintf("the container decompresses to %d bytes, the index says %d", st.BytesOut, c.Entry.TextSize))
		}
	}
	if c.Indexed {
		var sum [20]byte
		cr.fileSHA.Sum(sum[:0])
		switch {
		case c.Size != c.Entry.Size:
			problem("", 0, deadletter.SizeMismatch, fmt.Sprintf("the file is %d bytes, the index says %d", c.Size, c.Entry.Size))
		case cr.VerifySHA1 && sum != c.Entry.SHA1:
			problem("", 0, deadletter.ChecksumMismatch, fmt.Sprintf("the file's SHA-1 is %s, the index says %s", b64(sum[:]), b64(c.Entry.SHA1[:])))
		case int32(cr.fileCRC.Sum32()) != c.Entry.CRC32:
			problem("", 0, deadletter.ChecksumMismatch, fmt.Sprintf("the file's CRC-32 is %d, the index says %d", int32(cr.fileCRC.Sum32()), c.Entry.CRC32))
		}
	}
	if f.failed != nil {
		return ContainerStats{}, f.failed
	}
	return st, nil
}

func b64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// errTagger sits on the decompressed stream and remembers the first error
// it passed on, so a tar or report error can be traced to the LZ4 layer.
type errTagger struct {
	r    *countingReader
	in   *countingReader
	err  error
	inAt int64
	// claimed is the first frame's content-size field, when hasClaim:
	// any of its 2^64 values, 0 and 2^64-1 included.
	claimed  uint64
	hasClaim bool
}

// claimedSize peeks at the frame header for its content-size field; ok
// is false when the frame has none.
func claimedSize(r *bufio.Reader) (size uint64, ok bool) {
	h, _ := r.Peek(14)
	if len(h) < 14 || binary.LittleEndian.Uint32(h) != 0x184D2204 || h[4]&0x08 == 0 {
		return 0, false
	}
	return binary.LittleEndian.Uint64(h[6:]), true
}

func (t *errTagger) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	if err != nil && !errors.Is(err, io.EOF) && t.err == nil {
		t.err, t.inAt = err, t.in.n
	}
	return n, err
}

// classify names the reason of an error met while reading the stream.
func (t *errTagger) classify(err error) *streamError {
	if t.err != nil {
		// The LZ4 layer failed: a short read is a truncated frame, a
		// frame longer or shorter than its content-size field says is
		// that, anything else corrupt data.
		if t.hasClaim && strings.Contains(t.err.Error(), "content size") {
			return &streamError{reason: deadletter.LZ4ContentSize, offset: 4, err: fmt.Errorf("lz4: the frame claims %d bytes of content, it holds %d (%w)", t.claimed, t.r.n, t.err)}
		}
		if errors.Is(t.err, io.ErrUnexpectedEOF) {
			return &streamError{reason: deadletter.LZ4Truncated, offset: t.inAt, err: fmt.Errorf("lz4: %w", t.err)}
		}
		return &streamError{reason: deadletter.LZ4Corrupt, offset: t.inAt, err: fmt.Errorf("lz4: %w", t.err)}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return &streamError{reason: deadletter.TarTruncated, offset: t.r.n, err: fmt.Errorf("tar: %w", err)}
	}
	return &streamError{reason: deadletter.TarCorrupt, offset: t.r.n, err: fmt.Errorf("tar: %w", err)}
}
