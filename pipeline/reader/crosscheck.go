package reader

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooniuid"
	"github.com/backfill-dev/backfill/pipeline/reader/report"
)

// CannedCheck compares autoclaved files with the canned files of the same
// name that autoclaving made them from: each report's orig_sha1 and
// src_size against the canned report's SHA-1 and size, each datum's and
// badblob's orig_sha1, in order, against the blob the canned report holds
// at that place, and the slicer's cutoff. An orig_sha1 can be checked no
// other way: autoclaved data hold normalised JSON, not the raw blob that
// was hashed. For the same reason the canned form is where OONI's
// identity of an autoclaved measurement (ooniuid) comes from. Keep one
// per worker.
type CannedCheck struct {
	// Datums numbers the identities Check gives as --ndx datums does:
	// those of badblobs are left out.
	Datums bool
	cr     *ContainerReader
	uids   bool
}

// NewCannedCheck returns a CannedCheck. With uids, Check also gives the
// identity of each datum of a report whose canned form agrees with the
// index, its blobs up to maxBlob bytes kept whole to read their dates (0:
// report.DefaultMaxBlob), as a canned read with that MaxBlob gives them.
func NewCannedCheck(uids bool, maxBlob int64) *CannedCheck {
	cr := NewContainerReader()
	cr.ReportSHA1 = true
	cr.Reports.OrigSHA1 = true
	cr.Reports.MaxBlob = 1 << 62 // every blob is hashed, none is flagged
	if uids {
		// Oversized blobs are flagged then, and the flag ignored below.
		cr.Reports.UIDs, cr.Reports.MaxBlob = true, maxBlob
	}
	return &CannedCheck{cr: cr, uids: uids}
}

// cannedReport is what the canned file gave of one report.
type cannedReport struct {
	read  bool // read to its end, or to where its stream failed
	stats report.Stats
	blobs []report.Measurement
	cut   *deadletter.Record // where the slicer gave up
	fail  *deadletter.Record // why the report is lost or incomplete
}

// errNoDatums is returned for a bucket opened without Options.Datums.
var errNoDatums = errors.New("reader: CannedCheck needs the autoclaved bucket opened with Options.Datums")

// Check compares container c of autoclaved bucket b, opened with
// Options.Datums, with the file of the same name in canned bucket canned;
// a nil canned checks nothing (the caller has recorded why). Every
// difference is a canned_mismatch record, one per report at most, at the
// first differing blob's offset in the raw report; the IDs stay as the
// index gives them. With uids, ids holds, by textname, the identities of
// the datums of each report whose canned form agrees, in order; the
// records of the others say they have none. The error is ctx's, or
// errNoDatums.
func (k *CannedCheck) Check(ctx context.Context, b *Bucket, c Container, canned *Bucket, problem func(deadletter.Record)) (ids map[string][]ooniuid.ID, err error) {
	if c.AC == nil || canned == nil {
		return nil, nil
	}
	noIDs := ""
	if k.uids {
		noIDs = "; its measurements get no content_hash nor measurement_uid"
	}
	record := func(textname string, off int64, msg string) {
		problem(deadletter.Record{Bucket: b.Date, File: c.Name, Textname: textname, Offset: off, Reason: deadletter.CannedMismatch, Message: msg + noIDs})
	}
	var cc *Container
	for i := range canned.Containers {
		if canned.Containers[i].Name == c.Name && !canned.Containers[i].Missing {
			cc = &canned.Containers[i]
			break
		}
	}
	if cc == nil {
		record("", 0, fmt.Sprintf("the canned bucket %s has no file %s; its orig_sha1s are not checked", canned.Dir, c.Name))
		return nil, nil
	}

	got := map[string]*cannedReport{}
	var order []string
	get := func(textname string) *cannedReport {
		r := got[textname]
		if r == nil {
			r = &cannedReport{}
			got[textname] = r
			order = append(order, textname)
		}
		return r
	}
	_, err = k.cr.Read(ctx, canned, *cc, Handler{
		Report: func(r ContainerReport) {
			cr := get(r.Textname)
			cr.read, cr.stats = true, r.Stats
		},
		Blob: func(textname string, m report.Measurement) {
			cr := get(textname)
			cr.blobs = append(cr.blobs, m)
		},
		Problem: func(p deadletter.Record) {
			if p.Textname == "" {
				return // the reports it concerns get records of their own
			}
			cr := get(p.Textname)
			switch p.Reason {
			case deadletter.TruncatedReport, deadletter.BrokenFrame:
				if cr.cut == nil {
					cr.cut = &p
				}
			case deadletter.InvalidUTF8, deadletter.OversizedBlob, deadletter.EmptyReport,
				deadletter.NotInIndex, deadletter.SizeMismatch, deadletter.ChecksumMismatch, deadletter.BadTextname:
				// About the canned file against its own index, or kept
				// measurements: the data are compared below.
			default:
				if cr.fail == nil {
					cr.fail = &p
				}
			}
		},
	})
	if err != nil {
		return nil, err
	}

	if k.uids {
		ids = map[string][]ooniuid.ID{}
	}
	for _, r := range c.AC.Reports {
		if len(r.Items) != r.Datums {
			return nil, errNoDatums
		}
		cr := got[r.Textname]
		delete(got, r.Textname)
		if r.Damaged != "" || report.KindOf(r.Textname) == report.KindUnknown {
			continue // no IDs, and recorded as such by the read
		}
		switch {
		case cr == nil || !cr.read:
			msg := "the canned file does not hold this report"
			if cr != nil && cr.fail != nil {
				msg += fmt.Sprintf(" (%s: %s)", cr.fail.Reason, cr.fail.Message)
			}
			record(r.Textname, 0, msg+"; its orig_sha1s are not checked")
		case cr.fail != nil:
			record(r.Textname, cr.fail.Offset, fmt.Sprintf("the canned file fails inside this report (%s: %s); its orig_sha1s are not checked", cr.fail.Reason, cr.fail.Message))
		default:
			if off, msg := compareReport(r, cr); msg != "" {
				record(r.Textname, off, msg)
			} else if k.uids {
				ids[r.Textname] = blobIDs(r, cr.blobs, k.Datums)
			}
		}
	}
	for _, textname := range order {
		if cr := got[textname]; cr != nil && cr.read && report.KindOf(textname) != report.KindUnknown {
			// Not in the output: no identity to go without.
			problem(deadletter.Record{Bucket: b.Date, File: c.Name, Textname: textname, Reason: deadletter.CannedMismatch,
				Message: fmt.Sprintf("the canned file holds this report (%d measurements); the index does not list it", len(cr.blobs))})
		}
	}
	return ids, nil
}

// blobIDs are the identities of the blobs of r's canned form (which
// agrees with it), with datums those of its datums alone.
func blobIDs(r *ACIndexReport, blobs []report.Measurement, datums bool) []ooniuid.ID {
	out := make([]ooniuid.ID, 0, len(blobs))
	bad := r.Badblobs
	for i, m := range blobs {
		if len(bad) > 0 && int(bad[0].Blob) == i {
			bad = bad[1:]
			if datums {
				continue
			}
		}
		out = append(out, m.ID)
	}
	return out
}

// compareReport compares an index report with its canned form; it gives
// the offset of the first difference in the raw report and what differs,
// or "" when they agree.
func compareReport(r *ACIndexReport, cr *cannedReport) (int64, string) {
	var diffs []string
	off := int64(-1)
	at := func(o int64) {
		if off < 0 {
			off = o
		}
	}
	if cr.stats.SHA1 != r.SHA1 || cr.stats.Size != r.SrcSize {
		diffs = append(diffs, fmt.Sprintf("the report row has orig_sha1 %s and src_size %d, the canned report hashes to %s in %d bytes",
			b64(r.SHA1[:]), r.SrcSize, b64(cr.stats.SHA1[:]), cr.stats.Size))
	}
	// The index's blobs in order: datums, with badblobs at their places.
	want := make([][20]byte, 0, r.Blobs())
	d := 0
	for _, bb := range r.Badblobs {
		for len(want) < int(bb.Blob) && d < len(r.Items) {
			want = append(want, r.Items[d].SHA1)
			d++
		}
		want = append(want, bb.SHA1)
	}
	for _, it := range r.Items[d:] {
		want = append(want, it.SHA1)
	}
	differ, first := 0, -1
	for i := range min(len(want), len(cr.blobs)) {
		if want[i] != cr.blobs[i].OrigSHA1 {
			if differ++; first < 0 {
				first = i
			}
		}
	}
	if differ > 0 {
		m := cr.blobs[first]
		at(m.Offset)
		diffs = append(diffs, fmt.Sprintf("%d of its measurements differ; the first is measurement %d, orig_sha1 %s in the index, the canned blob at byte %d (%d bytes) hashes to %s",
			differ, first, b64(want[first][:]), m.Offset, m.Size, b64(m.OrigSHA1[:])))
	}
	// An index cut before the /report row lists only the first blobs.
	if len(want) != len(cr.blobs) && (r.Closed || len(want) > len(cr.blobs)) {
		n := min(len(want), len(cr.blobs))
		if n < len(cr.blobs) {
			at(cr.blobs[n].Offset)
		}
		diffs = append(diffs, fmt.Sprintf("the index lists %d measurements, the canned report holds %d", len(want), len(cr.blobs)))
	}
	if r.Closed {
		switch {
		case r.HasCutoff && cr.cut == nil:
			diffs = append(diffs, fmt.Sprintf("the index has the slicer give up at byte %d, the canned report is read whole", r.Cutoff))
		case !r.HasCutoff && cr.cut != nil:
			at(cr.cut.Offset)
			diffs = append(diffs, fmt.Sprintf("the canned report is cut at byte %d (%s), the index has no cutoff", cr.cut.Offset, cr.cut.Reason))
		case r.HasCutoff && cr.cut.Offset != r.Cutoff:
			at(min(cr.cut.Offset, r.Cutoff))
			diffs = append(diffs, fmt.Sprintf("the index has the slicer give up at byte %d, the canned report is cut at byte %d", r.Cutoff, cr.cut.Offset))
		}
	}
	if len(diffs) == 0 {
		return 0, ""
	}
	return max(off, 0), "the canned form differs: " + strings.Join(diffs, "; ")
}
