package reader

import (
	"context"
	"fmt"

	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/reader/report"
)

// Format is a bucket layout. It is a flag.Value: --format auto, canned or
// autoclaved.
type Format string

// Formats are the values a Format may take.
var Formats = []Format{FormatAuto, FormatCanned, FormatAutoclaved}

// String implements flag.Value.
func (f *Format) String() string { return string(*f) }

// Set implements flag.Value.
func (f *Format) Set(s string) error {
	for _, v := range Formats {
		if s == string(v) {
			*f = v
			return nil
		}
	}
	return fmt.Errorf("must be auto, canned or autoclaved, not %q", s)
}

// Ndx is the policy that numbers a report's measurements (docs/design.md
// §2). It is a flag.Value: --ndx blobs or datums. Its value is recorded
// with every output.
type Ndx string

// The ndx policies.
const (
	// NdxBlobs, the default: every blob after the YAML header counts,
	// badblobs included.
	NdxBlobs Ndx = "blobs"
	// NdxDatums counts the blobs that parse only (the old MetaDB
	// numbering); badblobs get no ID.
	NdxDatums Ndx = "datums"
)

// String implements flag.Value.
func (n *Ndx) String() string { return string(*n) }

// Set implements flag.Value.
func (n *Ndx) Set(s string) error {
	switch Ndx(s) {
	case NdxBlobs, NdxDatums:
		*n = Ndx(s)
		return nil
	}
	return fmt.Errorf("must be blobs or datums, not %q", s)
}

// Datums reports whether n numbers datums only.
func (n Ndx) Datums() bool { return n == NdxDatums }

// Source reads one container of a bucket and reports what it finds to h.
// The three layouts are three sources: canned containers
// (*ContainerReader), autoclaved files (*AutoclavedReader, the data path)
// and autoclaved indexes alone (IndexSource, --from-index).
type Source interface {
	Read(ctx context.Context, b *Bucket, c Container, h Handler) (ContainerStats, error)
}

var (
	_ Source = (*ContainerReader)(nil)
	_ Source = (*AutoclavedReader)(nil)
	_ Source = IndexSource{}
)

// IndexSource gives an autoclaved container's reports from its index rows
// alone (IndexReports); it reads no data.
type IndexSource struct{ Datums bool }

// Read implements Source.
func (s IndexSource) Read(ctx context.Context, b *Bucket, c Container, h Handler) (ContainerStats, error) {
	IndexReports(b, c, s.Datums, h)
	return ContainerStats{}, ctx.Err()
}

// ReadOptions say how containers are read.
type ReadOptions struct {
	Ndx     Ndx   // NdxBlobs when empty
	MaxBlob int64 // over it a measurement is flagged; 0 for DefaultMaxBlob
	// Verify checks every SHA-1 against the index too (sizes and CRC-32s
	// always are), and parses every autoclaved datum.
	Verify bool
	// FromIndex reads autoclaved buckets from their index alone.
	FromIndex bool
	// Canned compares each autoclaved file with its canned form, when
	// Readers.Read is given one.
	Canned bool
	// UIDs gives every measurement of a canned report OONI's identity of
	// it (report.Reader.UIDs), through Handler.Blob.
	UIDs bool
}

// OpenOptions are the Options to open a bucket for reading with o.
func (o ReadOptions) OpenOptions(f Format) Options {
	return Options{Format: f, Datums: !o.FromIndex || o.Canned}
}

// Readers are one worker's sources, one per layout, and the canned check.
// Each keeps its buffers and decompressors from one container to the
// next. Not safe for concurrent use: keep one per worker.
type Readers struct {
	canned     *ContainerReader
	autoclaved Source
	check      *CannedCheck // with ReadOptions.Canned
}

// NewReaders returns the sources for o.
func NewReaders(o ReadOptions) *Readers {
	rs := &Readers{canned: NewContainerReader()}
	rs.canned.Reports.MaxBlob = o.MaxBlob
	rs.canned.VerifySHA1 = o.Verify
	rs.canned.Reports.Datums = o.Ndx.Datums()
	rs.canned.Reports.UIDs = o.UIDs
	if o.FromIndex {
		rs.autoclaved = IndexSource{Datums: o.Ndx.Datums()}
	} else {
		ar := NewAutoclavedReader()
		ar.Datums, ar.Verify = o.Ndx.Datums(), o.Verify
		rs.autoclaved = ar
	}
	if o.Canned {
		rs.check = NewCannedCheck(o.UIDs, o.MaxBlob)
		rs.check.Datums = o.Ndx.Datums()
	}
	return rs
}

// Read reads container c of b with the source of its layout and, for an
// autoclaved file with a canned form (canned, nil when there is none),
// compares the two. With UIDs, an autoclaved report's measurements get
// their identities from its canned form, when it agrees (h.Blob, before
// h.Report); the others get none.
func (rs *Readers) Read(ctx context.Context, b, canned *Bucket, c Container, h Handler) (ContainerStats, error) {
	if b.Format != FormatAutoclaved {
		return rs.canned.Read(ctx, b, c, h)
	}
	if rs.check == nil {
		return rs.autoclaved.Read(ctx, b, c, h)
	}
	// The canned form first, for the identities; its records after the
	// file's own, as the file is the input.
	var found []deadletter.Record
	ids, err := rs.check.Check(ctx, b, c, canned, func(p deadletter.Record) { found = append(found, p) })
	if err != nil {
		return ContainerStats{}, err
	}
	if ids != nil && h.Blob != nil {
		onReport := h.Report
		h.Report = func(r ContainerReport) {
			if got := ids[r.Textname]; len(got) >= int(r.Stats.N) {
				for k, id := range got[:r.Stats.N] {
					h.Blob(r.Textname, report.Measurement{Ndx: uint32(k), ID: id})
				}
			}
			onReport(r)
		}
	}
	st, err := rs.autoclaved.Read(ctx, b, c, h)
	if err == nil {
		for _, p := range found {
			h.Problem(p)
		}
	}
	return st, err
}
