// Package stamped holds what the pipeline's stages hand each other and
// the sinks: a bucket's stamped reports and records, how its output was
// made (Meta), what it counts (Counts, Tally) and what a committed output
// holds (State). It is plain data: every stage and every sink may import
// it, and it imports no stage and no sink.
package stamped

import (
	"maps"
	"slices"
	"time"

	"github.com/backfill-dev/backfill/pipeline/deadletter"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/ooniuid"
)

// Meta describes how a bucket's output was made. Two runs of a bucket
// with equal Meta and Fingerprint produce the same output.
type Meta struct {
	Bucket      string // YYYY-MM-DD
	Fingerprint string // of the bucket's input files
	// Listing is the fingerprint of the bucket folder's listing alone
	// (reader.List: its files' names, sizes and versions, not the
	// index's bytes): --resume skips a bucket whose listing is the one
	// committed without reading its index, as git's index trusts a
	// file's size and times. "" where the output does not keep it.
	Listing string
	// Source is the folder of bucket folders it was read from: an
	// absolute path or an s3:// URL ("" in ledgers older than it).
	Source    string
	Scheme    ooid.Scheme
	NdxPolicy string // "blobs": every blob after the YAML header counts
	Version   string // of the tool
	// UIDs is set when the output holds OONI's identity of each
	// measurement (--measurement-uid).
	UIDs bool
}

// Report is one report of a bucket and the IDs of its measurements:
// measurement ndx (0 <= ndx < N) has the OOID ID.ID(ndx).
type Report struct {
	Textname  string
	Container string    // the container file, as the index names it
	Offset    int64     // of the report in the decompressed container
	Size      int64     // of the raw report
	SHA1      *[20]byte // of the raw report, from the index; nil when the index does not list it
	ID        ooid.ReportIDs
	N         uint32
	// RejectedBy, when set, names the report that keeps the IDs this one
	// would share with it (docs/design.md §3): the report is listed in the
	// bucket's report manifest, and its measurements get no rows.
	RejectedBy string
	// IDs, with --measurement-uid, are OONI's identity of each
	// measurement (by ndx): its content hash and measurement_uid.
	IDs []ooniuid.ID
}

// ManifestEntry is a committed report as its bucket's report manifest
// lists it.
type ManifestEntry struct {
	Textname   string
	N          uint32
	RejectedBy string
}

// Verdict changes the collision verdict of a committed report: RejectedBy
// names the report that keeps the IDs ("" when the report keeps its own),
// and Message is the dead-letter message of a rejection.
type Verdict struct {
	Textname, RejectedBy, Message string
}

// Counts sums up a committed bucket.
type Counts struct {
	Reports      int64 `json:"reports"`
	Measurements int64 `json:"measurements"`
	// DeadLetters counts every record by reason, Rejects the rejects
	// among them (deadletter.Reject); the rest are notices.
	DeadLetters map[string]int64 `json:"dead_letters"`
	Rejects     map[string]int64 `json:"rejects"`
	BytesIn     int64            `json:"bytes_in"`  // compressed
	BytesOut    int64            `json:"bytes_out"` // decompressed
}

// NewCounts returns empty counts, ready to Add to.
func NewCounts() Counts {
	return Counts{DeadLetters: map[string]int64{}, Rejects: map[string]int64{}}
}

// Add counts a dead-letter record (for 1+d.More: see deadletter.MaxListed).
func (c *Counts) Add(d deadletter.Record) {
	c.addReason(d.Reason, 1+max(d.More, 0), d.IsReject())
}

// AddCollisions counts n more collision records (fewer when n < 0): every
// one a reject, by a report that lost its IDs (or got them back).
func (c *Counts) AddCollisions(n int64) {
	c.addReason(deadletter.Collision, n, true)
}

func (c *Counts) addReason(reason string, n int64, reject bool) {
	if c.DeadLetters == nil {
		c.DeadLetters = map[string]int64{}
	}
	if c.Rejects == nil {
		c.Rejects = map[string]int64{}
	}
	bump := func(m map[string]int64) {
		if m[reason] += n; m[reason] == 0 {
			delete(m, reason)
		}
	}
	bump(c.DeadLetters)
	if reject {
		bump(c.Rejects)
	}
}

// Merge adds the counts o to c.
func (c *Counts) Merge(o Counts) {
	c.Reports += o.Reports
	c.Measurements += o.Measurements
	c.BytesIn += o.BytesIn
	c.BytesOut += o.BytesOut
	for r, n := range o.DeadLetters {
		c.addReason(r, n-o.Rejects[r], false)
	}
	for r, n := range o.Rejects {
		c.addReason(r, n, true)
	}
}

// Clone returns a copy of c that shares no map with it.
func (c Counts) Clone() Counts {
	out := c
	out.DeadLetters, out.Rejects = maps.Clone(c.DeadLetters), maps.Clone(c.Rejects)
	if out.DeadLetters == nil {
		out.DeadLetters = map[string]int64{}
	}
	if out.Rejects == nil {
		out.Rejects = map[string]int64{}
	}
	return out
}

// Totals returns the number of rejects and of notices.
func (c Counts) Totals() (rejects, notices int64) {
	var all int64
	for _, n := range c.DeadLetters {
		all += n
	}
	for _, n := range c.Rejects {
		rejects += n
	}
	return rejects, all - rejects
}

// Notices returns the notices by reason.
func (c Counts) Notices() map[string]int64 {
	out := map[string]int64{}
	for r, n := range c.DeadLetters {
		if k := n - c.Rejects[r]; k != 0 {
			out[r] = k
		}
	}
	return out
}

// State is what an output holds of a bucket, from its ledger: the
// status command's row.
type State struct {
	Meta     Meta
	Status   string // StatusCommitted, StatusFailed, or (for status alone) StatusIncomplete
	Error    string // why a failed bucket failed
	Counts   Counts
	Finished time.Time
}

// The states of a bucket in a ledger.
const (
	StatusCommitted = "committed"
	// StatusFailed is a bucket whose last load failed and that holds no
	// committed output: --resume loads it again.
	StatusFailed = "failed"
	// StatusIncomplete is a bucket committed in its ledger one of whose
	// files is not there (status says so; run --resume writes it again).
	StatusIncomplete = "incomplete"
)

// Tally sums the counts of committed buckets: what a summary or a status
// shows.
type Tally struct {
	Reports         int64            `json:"reports"`
	Measurements    int64            `json:"measurements"`
	Rejects         int64            `json:"rejects"`
	Notices         int64            `json:"notices"`
	RejectsByReason map[string]int64 `json:"rejects_by_reason"`
	NoticesByReason map[string]int64 `json:"notices_by_reason"`
}

// NewTally returns an empty tally.
func NewTally() Tally {
	return Tally{RejectsByReason: map[string]int64{}, NoticesByReason: map[string]int64{}}
}

// Add adds a bucket's counts.
func (t *Tally) Add(c Counts) {
	t.Reports += c.Reports
	t.Measurements += c.Measurements
	for r, n := range c.Rejects {
		t.RejectsByReason[r] += n
		t.Rejects += n
	}
	for r, n := range c.Notices() {
		t.NoticesByReason[r] += n
		t.Notices += n
	}
}

// Bucket is a bucket as the ingest stage hands it on: its reports with
// their IDs, in container order and file order, and its records, in the
// order they were found (the bucket's own, then each container's).
type Bucket struct {
	Meta Meta
	// Skipped is set for a bucket the run leaves as it is committed
	// (--resume): nothing of it was read.
	Skipped bool
	Reports []Report
	Records []deadletter.Record
	// Size is the compressed bytes of its files; BytesIn and BytesOut
	// what was read of them, compressed and decompressed.
	Size, BytesIn, BytesOut int64
}

// Committed returns the committed buckets of states, by bucket.
func Committed(states []State) map[string]State {
	out := map[string]State{}
	for _, st := range states {
		if st.Status == StatusCommitted {
			out[st.Meta.Bucket] = st
		}
	}
	return out
}

// Day is the day (UTC, counted from the Unix epoch) a report time ts
// falls on. Two reports can share an ID only when they share a ts
// (docs/design.md §3), hence a day: the days of a bucket's reports say
// which other buckets its IDs can reach.
func Day(ts uint32) int32 { return int32(ts / 86400) }

// Zone is the days a bucket's reports fall on, collision losers' too
// (sorted, each once): a zone map, as a Parquet footer keeps a column's
// bounds, kept in the ledger so that a run finds the committed buckets
// its own reports can reach without reading any of them.
type Zone struct {
	Days []int32 `json:"days"`
}

// ZoneOf returns the zone of reports.
func ZoneOf(reports []Report) Zone {
	days := make([]int32, len(reports))
	for i := range reports {
		days[i] = Day(reports[i].ID.TS)
	}
	return NewZone(days)
}

// NewZone returns the zone of the days given, in any order, repeated or
// not; days is not changed.
func NewZone(days []int32) Zone {
	days = slices.Clone(days)
	slices.Sort(days)
	return Zone{Days: append(make([]int32, 0, len(days)), slices.Compact(days)...)}
}

// Meets reports whether z and o share a day.
func (z Zone) Meets(o Zone) bool {
	i, j := 0, 0
	for i < len(z.Days) && j < len(o.Days) {
		switch {
		case z.Days[i] == o.Days[j]:
			return true
		case z.Days[i] < o.Days[j]:
			i++
		default:
			j++
		}
	}
	return false
}
