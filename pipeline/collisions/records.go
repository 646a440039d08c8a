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
