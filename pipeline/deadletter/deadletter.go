// Package deadletter defines the records of the dead-letter archive: every
// report, measurement or container a run could not take as it is, with
// where it was found and why.
//
// A record names its bucket, its container file (as the index names it,
// "YYYY-MM-DD/<name>.lz4"), the textname of the report when one is
// concerned, a byte offset, a reason code and a human message. The offset
// is counted in the space the reason lives in:
//
//   - lz4_*: in the compressed container file;
//   - tar_*, not_in_index, not_in_container: in the decompressed container
//     stream (the tar), at the member's header;
//   - report reasons (truncated_report, broken_frame, invalid_utf8, ...):
//     in the raw report, as the OONI pipeline's src_off and src_cutoff;
//   - bucket and index reasons: 0.
//
// Every record is of one of two kinds. A [Reject] records a loss: an
// input not read, or a report or measurement left without IDs. A [Notice]
// records something worth knowing that lost nothing: every ID was given
// (an empty report, a kept badblob, a checksum that differs, a container
// read without its index row). A run that completed with rejects exits 3;
// notices alone do not change the exit status unless asked (--strict).
// Most reasons are of one kind; the few that are not (a container the
// index does not list is read unchecked in a canned bucket, but cannot be
// numbered in an autoclaved one) are told apart where they are recorded.
package deadletter

import "fmt"

// Record is one entry of the dead-letter archive.
type Record struct {
	Bucket   string `json:"bucket"`
	File     string `json:"file"`
	Textname string `json:"textname"`
	Offset   int64  `json:"offset"`
	Reason   string `json:"reason"`
	// Kind is Reject or Notice; empty means KindOf(Reason), which
	// [Record.Classified] fills in.
	Kind    string `json:"kind"`
	Message string `json:"message"`
	// More, on the one record that closes a reason past MaxListed in a
	// bucket, is how many more records of that reason and kind the bucket
	// had, not listed one by one: the record counts for 1+More.
	More int64 `json:"more,omitempty"`
	// MeasurementUIDs are the measurement_uids OONI's code gives to the
	// measurements of the bytes the record covers that no row carries
	// (docs/ooni-ids.md): with --measurement-uid, every uid OONI gives is
	// on a row or in a record.
	MeasurementUIDs []string `json:"measurement_uids,omitempty"`
}

// MaxListed is how many records of one reason and kind a bucket lists one
// by one; the rest are counted in one closing record (Record.More). A
// bucket whose index names a million reports that are not there costs
// MaxListed records of memory and disk, not a million.
const MaxListed = 10_000

// Capper lists the first MaxListed records of each reason and kind of a
// bucket and counts the others.
type Capper struct {
	listed map[[2]string]int64
	more   map[[2]string]int64
	uids   map[[2]string][]string // of the records not listed
	order  [][2]string
	bucket string
}

// Keep reports whether r is listed one by one; when it is not, it is
// counted for Rest.
func (c *Capper) Keep(r Record) bool {
	if c.listed == nil {
		c.listed, c.more = map[[2]string]int64{}, map[[2]string]int64{}
	}
	r = r.Classified()
	if r.More > 0 {
		return true // a closing record already: it counts for those it stands for
	}
	k := [2]string{r.Reason, r.Kind}
	if c.listed[k] < MaxListed {
		c.listed[k]++
		return true
	}
	if c.more[k] == 0 {
		c.order = append(c.order, k)
	}
	c.more[k]++
	if len(r.MeasurementUIDs) > 0 {
		if c.uids == nil {
			c.uids = map[[2]string][]string{}
		}
		c.uids[k] = append(c.uids[k], r.MeasurementUIDs...)
	}
	c.bucket = r.Bucket
	return false
}

// Rest returns one record for each reason and kind past MaxListed,
// counting the records that were not listed, in the order they began.
func (c *Capper) Rest() []Record {
	var out []Record
	for _, k := range c.order {
		n := c.more[k]
		out = append(out, Record{Bucket: c.bucket, Reason: k[0], Kind: k[1], More: n - 1, MeasurementUIDs: c.uids[k],
			Message: fmt.Sprintf("and %d more records of reason %s in this bucket, not listed one by one (the first %d are); this record counts for them all, and lists their measurement_uids", n, k[0], MaxListed)})
	}
	return out
}

// The kinds of record.
const (
	Reject = "reject" // an input lost, or a report or measurement left without IDs
	Notice = "notice" // recorded; nothing lost, every ID given
)

// notices are the reasons that never lose anything.
var notices = map[string]bool{
	NotABucket: true, IndexMissing: true, LZ4ContentSize: true, SizeMismatch: true, ChecksumMismatch: true,
	FrameMismatch: true, DatumMismatch: true, CannedMismatch: true, NameMismatch: true,
	EmptyReport: true, InvalidUTF8: true, OversizedBlob: true, LinesJoined: true,
}

// KindOf returns the usual kind of a reason: Notice for the reasons that
// never lose anything, Reject for every other one, unknown ones included.
func KindOf(reason string) string {
	if notices[reason] {
		return Notice
	}
	return Reject
}

// Classified returns r with its Kind set: KindOf(r.Reason) unless the
// place that recorded it said otherwise.
func (r Record) Classified() Record {
	if r.Kind == "" {
		r.Kind = KindOf(r.Reason)
	}
	return r
}

// IsReject reports whether r records a loss.
func (r Record) IsReject() bool { return r.Classified().Kind == Reject }

// Reason codes.
const (
	// Input folder.
	NotABucket = "not_a_bucket" // a folder beside the buckets whose name is not a bucket date and that holds no bucket file; skipped (notice)
	// MisnamedBucket is a folder beside the buckets that holds bucket
	// files (*.lz4, index.json.gz) under a name that is not a bucket date
	// (2017-6-3, 2017-06-03.bak): its files are not read (reject).
	MisnamedBucket = "misnamed_bucket"

	// Bucket and index.
	IndexMissing = "index_missing" // no index.json.gz: a canned bucket's containers are read unchecked (notice)
	// BadIndexRow is an index row that does not parse, or is out of
	// place; the row is skipped (notice). An autoclaved report whose rows
	// are in doubt gets a reject record of its own: it is left without
	// IDs.
	BadIndexRow      = "bad_index_row"
	MissingContainer = "missing_container" // the index lists a file that is not in the bucket; one record per report it lists (notice with --from-index, which gives the IDs anyway)
	Unreadable       = "unreadable"        // a file that cannot be opened or read

	// Container stream.
	LZ4Truncated   = "lz4_truncated"    // the LZ4 stream ends early; the reports not read are lost
	LZ4Corrupt     = "lz4_corrupt"      // invalid LZ4 data or checksum; the reports not read are lost
	LZ4ContentSize = "lz4_content_size" // a frame's content-size field disagrees with its data (flag only)
	TarTruncated   = "tar_truncated"    // the tar ends inside a member or without its end blocks
	TarCorrupt     = "tar_corrupt"      // a tar header that does not parse; a member that is not a regular file is skipped (notice)

	// Container against its index (flags: the data is read as it is).
	NotInIndex     = "not_in_index"     // a member or file the index does not list: read unchecked (canned, notice) or not at all (autoclaved, reject)
	NotInContainer = "not_in_container" // the index lists a report the container does not hold (rejects it: no data)
	// NameMismatch is a container whose name differs from its index row's
	// only by case or Unicode normalisation (a copy through a file system
	// that folds or normalises names): it is read as that row (notice).
	NameMismatch     = "name_mismatch"
	SizeMismatch     = "size_mismatch"     // a size differs from the index
	ChecksumMismatch = "checksum_mismatch" // a SHA-1 or CRC-32 differs from the index
	FrameMismatch    = "frame_mismatch"    // an autoclaved file's LZ4 frames differ from its index's frame rows (flag)
	DatumMismatch    = "datum_mismatch"    // an autoclaved datum is not where, or not what, its index row says (flag: it keeps its ID)
	CannedMismatch   = "canned_mismatch"   // an autoclaved report differs from its canned form (--canned): orig_sha1, size, measurements or cutoff (flag)

	// Report.
	BadTextname     = "bad_textname"     // the textname gives no timestamp; the report is rejected
	TruncatedReport = "truncated_report" // unterminated last document; earlier measurements keep their IDs
	BrokenFrame     = "broken_frame"     // garbage between documents; earlier measurements keep their IDs
	BadYAMLHeader   = "bad_yaml_header"  // the YAML header document does not parse; the report is rejected
	EmptyReport     = "empty_report"     // no measurements at all (the report is kept with n = 0)

	// Measurement (flags: the blob keeps its ndx and ID, as a badblob does).
	InvalidUTF8   = "invalid_utf8"   // the blob is not valid UTF-8
	OversizedBlob = "oversized_blob" // the blob is over the size limit; it is counted, not parsed
	// Badblob is a blob that does not parse. It keeps its ID under the
	// default ndx policy and is not recorded; under --ndx datums it has
	// no ID and this record says so.
	Badblob = "badblob"
	// LinesJoined is a JSON measurement whose document spans several
	// lines of its report: OONI's fastpath reads each line as a
	// measurement of its own, and the record lists the uids it gives them
	// (MeasurementUIDs); the measurement keeps its ID, with no uid.
	LinesJoined = "lines_joined"

	// Run.
	Collision = "collision" // the report's IDs overlap those of a report whose textname sorts first
	// Withdrawn counts, in a run's summary, a report of a bucket the run
	// wrote again whose committed version published IDs the new one does
	// not hold: the report is no longer in its input, has fewer
	// measurements, or the bucket's scheme or ndx policy changed. The run
	// names each (sink.Withdrawal); the bucket keeps no record of it.
	Withdrawn = "withdrawn"
)
