package collisions

import (
	"slices"
	"strings"

	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// Record is the dead letter of report r of bucket, rejected for a
// collision; msg is Message's. Every path to a verdict writes it so.
func Record(bucket string, r *stamped.Report, msg string) deadletter.Record {
	return deadletter.Record{Bucket: bucket, File: r.Container, Textname: r.Textname, Offset: r.Offset,
		Reason: deadletter.Collision, Kind: deadletter.Reject, Message: msg}
}

// SortRecords puts a bucket's collision records in the order a bucket
// lists them, after its other records: by textname, stable.
func SortRecords(ds []deadletter.Record) {
	slices.SortStableFunc(ds, func(a, b deadletter.Record) int { return strings.Compare(a.Textname, b.Textname) })
}

// Apply gives report r of bucket the verdict v (a change of a committed
// report's winner), takes a report that loses its IDs out of c, the
// bucket's committed counts, or puts one that gets them back in, and
// returns the report's collision record when it is rejected.
func Apply(bucket string, r *stamped.Report, c *stamped.Counts, v stamped.Verdict) (deadletter.Record, bool) {
	switch {
	case r.RejectedBy == "" && v.RejectedBy != "":
		c.Reports--
		c.Measurements -= int64(r.N)
		c.AddCollisions(1)
	case r.RejectedBy != "" && v.RejectedBy == "":
		c.Reports++
		c.Measurements += int64(r.N)
		c.AddCollisions(-1)
	}
	r.RejectedBy = v.RejectedBy
	return Record(bucket, r, v.Message), v.RejectedBy != ""
}
