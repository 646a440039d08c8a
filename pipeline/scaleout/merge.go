// The merge of check: each shard writes its reports as a manifest sorted
// by time, and Merge reads every shard's manifest at once, a streaming
// k-way merge by (ts, textname), settling each group of reports that
// share a timestamp (only they can collide) by the policy of a single run.
// It holds one group at a time, and the verdicts that differ from the
// shards' own.

package scaleout

import (
	"bufio"
	"container/heap"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// ManifestEntry is one report of a shard's manifest.
type ManifestEntry struct {
	TS, Base, N uint32
	Textname    string
	Bucket      string
	RejectedBy  string // the shard's own verdict: "" when it kept its IDs
}

// ManifestHeader is what a manifest says of itself: the scheme of its IDs and
// the buckets it covers.
type ManifestHeader struct {
	Scheme  ooid.Scheme
	Buckets []string
}

const magic = "#backfill-manifest v1"

// EncodeManifest writes a manifest: its header, then entries sorted by (ts,
// textname).
func EncodeManifest(w io.Writer, h ManifestHeader, entries []ManifestEntry) error {
	es := slices.Clone(entries)
	slices.SortFunc(es, compare)
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s\t%d\t%d\t%s\n", magic, h.Scheme.CounterBits, h.Scheme.SHA1Offset, h.Scheme.Table)
	for _, b := range h.Buckets {
		fmt.Fprintf(bw, "#bucket\t%s\n", b)
	}
	for _, e := range es {
		fmt.Fprintf(bw, "%d\t%d\t%d\t%s\t%s\t%s\n", e.TS, e.Base, e.N, e.Textname, e.Bucket, e.RejectedBy)
	}
	return bw.Flush()
}

func compare(a, b ManifestEntry) int {
	if a.TS != b.TS {
		if a.TS < b.TS {
			return -1
		}
		return 1
	}
	return strings.Compare(a.Textname, b.Textname)
}

// ManifestReader reads a manifest, one entry at a time.
type ManifestReader struct {
	name   string
	sc     *bufio.Scanner
	line   int
	Header ManifestHeader
	prev   *ManifestEntry
}

// NewManifestReader reads the header of the manifest r (name is for messages).
func NewManifestReader(name string, r io.Reader) (*ManifestReader, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	rd := &ManifestReader{name: name, sc: sc}
	if !sc.Scan() {
		return nil, fmt.Errorf("%s: empty, not a manifest (%v)", name, sc.Err())
	}
	rd.line = 1
	f := strings.Split(sc.Text(), "\t")
	if len(f) != 4 || f[0] != magic {
		return nil, fmt.Errorf("%s: not a backfill manifest", name)
	}
	bits, err1 := strconv.Atoi(f[1])
	off, err2 := strconv.Atoi(f[2])
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("%s: header: %w", name, err)
	}
	rd.Header.Scheme = ooid.Scheme{CounterBits: bits, SHA1Offset: off, Table: f[3]}
	return rd, nil
}

// Next returns the next entry, io.EOF at the end; the header's buckets
// are known once the first entry (or io.EOF) is returned.
func (r *ManifestReader) Next() (ManifestEntry, error) {
	for r.sc.Scan() {
		r.line++
		t := r.sc.Text()
		if b, ok := strings.CutPrefix(t, "#bucket\t"); ok {
			if r.prev != nil {
				return ManifestEntry{}, fmt.Errorf("%s:%d: a bucket line after the entries", r.name, r.line)
			}
			r.Header.Buckets = append(r.Header.Buckets, b)
			continue
		}
		f := strings.Split(t, "\t")
		if len(f) != 6 {
			return ManifestEntry{}, fmt.Errorf("%s:%d: %d fields, want 6", r.name, r.line, len(f))
		}
		var n [3]uint64
		for i := range n {
			v, err := strconv.ParseUint(f[i], 10, 32)
			if err != nil {
				return ManifestEntry{}, fmt.Errorf("%s:%d: %w", r.name, r.line, err)
			}
			n[i] = v
		}
		e := ManifestEntry{TS: uint32(n[0]), Base: uint32(n[1]), N: uint32(n[2]), Textname: f[3], Bucket: f[4], RejectedBy: f[5]}
		if r.prev != nil && compare(*r.prev, e) >= 0 {
			return ManifestEntry{}, fmt.Errorf("%s:%d: out of order (sorted by ts, then textname, each once)", r.name, r.line)
		}
		r.prev = &e
		return e, nil
	}
	if err := r.sc.Err(); err != nil {
		return ManifestEntry{}, fmt.Errorf("%s: %w", r.name, err)
	}
	return ManifestEntry{}, io.EOF
}

// Change is a report whose verdict differs from its shard's.
type Change struct {
	Bucket     string `json:"bucket"`
	Textname   string `json:"textname"`
	RejectedBy string `json:"rejected_by"` // "" when it keeps its IDs after all
	Message    string `json:"message,omitempty"`
}

// MergeStats counts what Merge read.
type MergeStats struct {
	Reports         int64 `json:"reports"`
	Groups          int64 `json:"shared_timestamps"` // timestamps shared by more than one report
	Largest         int   `json:"largest_group"`
	CollisionLosers int64 `json:"collision_losers"` // reports that lose their IDs, over the corpus
	Changed         int64 `json:"changed"`          // verdicts that differ from the shards'
	Manifests       int   `json:"manifests"`
	// Lost are the reports their shard let keep their IDs that lose them
	// (Regained the other way round), with their measurements: what the
	// shards' counts are short of the corpus's.
	Lost                 int64 `json:"lost"`
	LostMeasurements     int64 `json:"lost_measurements"`
	Regained             int64 `json:"regained"`
	RegainedMeasurements int64 `json:"regained_measurements"`
}

// Merge merges the manifests and calls changed with every report whose
// verdict over all of them differs from its shard's, in (ts, textname)
// order. Every manifest must be of the same scheme.
func Merge(rs []*ManifestReader, changed func(Change) error) (MergeStats, error) {
	st := MergeStats{Manifests: len(rs)}
	h := &mergeHeap{}
	for _, r := range rs {
		if !r.Header.Scheme.Equal(rs[0].Header.Scheme) {
			return st, fmt.Errorf("%s is of scheme %s, %s of %s: IDs of two schemes cannot be checked against each other", r.name, r.Header.Scheme, rs[0].name, rs[0].Header.Scheme)
		}
		if err := h.pull(r); err != nil {
			return st, err
		}
	}
	bits := 0
	if len(rs) > 0 {
		bits = rs[0].Header.Scheme.CounterBits
	}
	var group []ManifestEntry
	flush := func() error {
		if len(group) > 1 {
			st.Groups++
		}
		st.Largest = max(st.Largest, len(group))
		for _, v := range settle(group, bits) {
			if v.RejectedBy != "" {
				st.CollisionLosers++
			}
			if v.RejectedBy == v.was {
				continue
			}
			switch {
			case v.was == "":
				st.Lost++
				st.LostMeasurements += int64(v.n)
			case v.RejectedBy == "":
				st.Regained++
				st.RegainedMeasurements += int64(v.n)
			}
			st.Changed++
			if err := changed(v.Change); err != nil {
				return err
			}
		}
		group = group[:0]
		return nil
	}
	var last *ManifestEntry
	for h.Len() > 0 {
		it := heap.Pop(h).(item)
		e := it.e
		if last != nil && e.TS == last.TS && e.Textname == last.Textname {
			return st, fmt.Errorf("report %s is in two manifests (%s and an earlier one)", e.Textname, it.r.name)
		}
		if len(group) > 0 && group[0].TS != e.TS {
			if err := flush(); err != nil {
				return st, err
			}
		}
		group = append(group, e)
		st.Reports++
		last = &group[len(group)-1]
		if err := h.pull(it.r); err != nil {
			return st, err
		}
	}
	return st, flush()
}

type settled struct {
	Change
	was string
	n   uint32
}

// settle applies the policy (collisions.Settle) to reports sharing one
// timestamp, given in textname order. A report with more measurements
// than counter values was rejected by its shard before any comparison, as
// a run rejects it: it keeps that verdict and takes no part.
func settle(group []ManifestEntry, bits int) []settled {
	out := make([]settled, len(group))
	ranges := make([]collisions.Range, len(group))
	apart := make([]bool, len(group))
	for i, e := range group {
		ranges[i] = collisions.Range{TS: e.TS, Base: e.Base, N: e.N}
		apart[i] = len(group) == 1 || ranges[i].SelfOverlaps(bits)
		out[i] = settled{Change{Bucket: e.Bucket, Textname: e.Textname, RejectedBy: e.RejectedBy}, e.RejectedBy, e.N}
	}
	if len(group) == 1 {
		return out // alone at its time
	}
	for i, w := range collisions.Settle(ranges, bits, apart) {
		if apart[i] {
			continue // rejected on its own
		}
		out[i].RejectedBy, out[i].Message = "", ""
		if w >= 0 {
			out[i].RejectedBy = group[w].Textname
			out[i].Message = collisions.Message(group[w].Textname, ranges[w], ranges[i], bits)
		}
	}
	return out
}

type item struct {
	e ManifestEntry
	r *ManifestReader
}

type mergeHeap []item

func (h mergeHeap) Len() int           { return len(h) }
func (h mergeHeap) Less(i, j int) bool { return compare(h[i].e, h[j].e) < 0 }
func (h mergeHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *mergeHeap) Push(x any)        { *h = append(*h, x.(item)) }
func (h *mergeHeap) Pop() any {
	old := *h
	it := old[len(old)-1]
	*h = old[:len(old)-1]
	return it
}

// pull pushes r's next entry, if any.
func (h *mergeHeap) pull(r *ManifestReader) error {
	e, err := r.Next()
	if errors.Is(err, io.EOF) {
		return nil
	}
	if err != nil {
		return err
	}
	heap.Push(h, item{e, r})
	return nil
}
