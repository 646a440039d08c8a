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
// Some records reject what they name (the report gets no IDs); others
// only flag it (the measurements keep their IDs); the comment of each
// reason says which.
package deadletter

// Record is one entry of the dead-letter archive.
type Record struct {
	Bucket   string `json:"bucket"`
	File     string `json:"file"`
	Textname string `json:"textname"`
	Offset   int64  `json:"offset"`
	Reason   string `json:"reason"`
	Message  string `json:"message"`
}

// Reason codes.
const (
	// Bucket and index.
	IndexMissing     = "index_missing"     // no index.json.gz: every container is read unchecked
	BadIndexRow      = "bad_index_row"     // an index row that does not parse; the row is skipped
	MissingContainer = "missing_container" // the index lists a file that is not in the bucket; one record per report it lists
	Unreadable       = "unreadable"        // a file that cannot be opened or read

	// Container stream.
	LZ4Truncated   = "lz4_truncated"    // the LZ4 stream ends early; the reports not read are lost
	LZ4Corrupt     = "lz4_corrupt"      // invalid LZ4 data or checksum; the reports not read are lost
	LZ4ContentSize = "lz4_content_size" // a frame's content-size field disagrees with its data (flag only)
	TarTruncated   = "tar_truncated"    // the tar ends inside a member or without its end blocks
	TarCorrupt     = "tar_corrupt"      // a tar header that does not parse, or a member that is not a regular file

	// Container against its index (flags: the data is read as it is).
	NotInIndex       = "not_in_index"      // a member or file the index does not list
	NotInContainer   = "not_in_container"  // the index lists a report the container does not hold (rejects it: no data)
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

	// Run.
	Collision = "collision" // the report's IDs overlap those of a report whose textname sorts first
)
