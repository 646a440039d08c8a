// Package scaleout is a corpus stamped in shards on several machines, in
// its phases around the shards' runs: the plan that splits an input's
// buckets into shards (plan.go), the check that a shard's buckets did not
// change since planning, a shard's report manifest, the merge of every
// shard's manifest that settles the verdicts across shards (check,
// merge.go), and the load of a shard's buckets into the job's output or
// into another sink (load). A shard's run itself is pipeline/job's.
package scaleout

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sync/errgroup"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/reader"
	"github.com/backfill-dev/backfill/pipeline/sink/parquetfile"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

const (
	// VerdictsName is the file check writes under the job's output.
	VerdictsName = "verdicts.jsonl"
	// ManifestName is a shard output's report manifest.
	ManifestName = "manifest.tsv"
	// CountsName is a shard output's counts: its buckets' ledger counts
	// summed, written just before the manifest.
	CountsName = "counts.json"
)

// ShardOut is where shard i of a plan writes, under the job's output.
func ShardOut(out store.Store, i int) store.Store { return out.Sub("shards/" + strconv.Itoa(i)) }

// SizeBuckets measures the named bucket folders of fsys, eight at a time (on
// S3 each is a request), with their sizes and fingerprints.
func SizeBuckets(ctx context.Context, fsys store.Store, names []string) ([]Bucket, error) {
	out := make([]Bucket, len(names))
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(8)
	for i, n := range names {
		g.Go(func() error {
			if err := ctx.Err(); err != nil {
				return err
			}
			l, err := reader.List(ctx, fsys, n)
			if err != nil {
				return fmt.Errorf("bucket %s: %w", n, err)
			}
			out[i] = Bucket{Name: n, Bytes: l.Bytes, Fingerprint: l.Fingerprint}
			return nil
		})
	}
	return out, g.Wait()
}

// ErrStale is wrapped by the error of Unchanged when a bucket changed
// since planning: a plan error, which running again does not mend.
var ErrStale = errors.New("changed since the plan was made: make a new plan")

// Unchanged checks that the buckets of shard of p, in the input in, are
// those that were planned.
func Unchanged(ctx context.Context, p Plan, in store.Store, shard int) error {
	now, err := SizeBuckets(ctx, in, p.Names(shard))
	if err != nil {
		return err
	}
	want := map[string]string{}
	for _, b := range p.Buckets {
		want[b.Name] = b.Fingerprint
	}
	for _, b := range now {
		if b.Fingerprint != want[b.Name] {
			return fmt.Errorf("bucket %s of %s %w", b.Name, p.Input, ErrStale)
		}
	}
	return nil
}

// WriteManifest writes the report manifest of a shard's output: every
// report of its committed buckets, sorted by time, for check; and before
// it the sum of their counts.
func WriteManifest(ctx context.Context, out store.Store) error {
	st, err := parquetfile.ReadState(ctx, out)
	if err != nil {
		return err
	}
	var h ManifestHeader
	var entries []ManifestEntry
	counts := stamped.NewCounts()
	for i, s := range st {
		if s.Status != stamped.StatusCommitted {
			continue
		}
		counts.Merge(s.Counts)
		if i == 0 {
			h.Scheme = s.Meta.Scheme
		}
		h.Buckets = append(h.Buckets, s.Meta.Bucket)
		rows, err := parquetfile.ReadReports(ctx, out, "reports/"+s.Meta.Bucket+".parquet")
		if err != nil {
			return err
		}
		for _, r := range rows {
			entries = append(entries, ManifestEntry{TS: uint32(r.TS), Base: uint32(r.CounterBase), N: uint32(r.N),
				Textname: r.Textname, Bucket: s.Meta.Bucket, RejectedBy: r.RejectedBy})
		}
	}
	cb, _ := json.MarshalIndent(counts, "", "  ")
	if err := store.WriteFile(ctx, out, CountsName, append(cb, '\n')); err != nil {
		return err
	}
	var b bytes.Buffer
	if err := EncodeManifest(&b, h, entries); err != nil {
		return err
	}
	return store.WriteFile(ctx, out, ManifestName, b.Bytes())
}

// CheckSummary is what Check did.
type CheckSummary struct {
	MergeStats
	Buckets []string `json:"buckets_changed"`
	// Totals are the corpus's, as one run over it would count them: every
	// shard's counts summed, the collisions those of the settled verdicts.
	Totals stamped.Tally `json:"totals"`
}

// WriteText writes the summary as check prints it.
func (s CheckSummary) WriteText(w io.Writer) error {
	fmt.Fprintf(w, "manifests      %d\nreports        %d (in the manifests, collision losers included)\nshared ts      %d (largest group %d)\ncollision losers %d (reports that lose their IDs to one that sorts first; among the rejects below)\nchanged        %d verdicts, in %d buckets\n",
		s.Manifests, s.Reports, s.Groups, s.Largest, s.CollisionLosers, s.Changed, len(s.Buckets))
	for _, b := range s.Buckets {
		fmt.Fprintf(w, "  %s\n", b)
	}
	fmt.Fprintf(w, "measurements   %d\n", s.Totals.Measurements)
	return s.Totals.WriteText(w)
}

// WriteJSON writes the summary as one JSON line.
func (s CheckSummary) WriteJSON(w io.Writer) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "%s\n", b)
	return err
}

// Check merges the report manifests of every shard of p under out, settles
// the verdicts of the whole corpus and writes those that differ from their
// shard's to out/verdicts.jsonl. Every shard must have committed every
// bucket p gives it.
func Check(ctx context.Context, p Plan, out store.Store) (CheckSummary, error) {
	var readers []*ManifestReader
	counts := stamped.NewCounts()
	made := VerdictsHeader{Plan: p.Checksum, Manifests: map[string]string{}}
	var hashed []func() error // each reads the rest of a manifest into its digest
	for i := range p.Shards {
		if len(p.Names(i)) == 0 {
			continue
		}
		so := ShardOut(out, i)
		if err := Mapped(ctx, so, i); err != nil {
			return CheckSummary{}, err
		}
		f, err := so.Open(ctx, ManifestName)
		if err != nil {
			return CheckSummary{}, err
		}
		c, err := readCounts(ctx, so)
		if err != nil {
			f.Close()
			return CheckSummary{}, err
		}
		counts.Merge(c)
		defer f.Close()
		h := sha256.New()
		r, err := NewManifestReader(so.Where(ManifestName), io.TeeReader(f, h))
		if err != nil {
			return CheckSummary{}, err
		}
		readers = append(readers, r)
		hashed = append(hashed, func() error {
			if _, err := io.Copy(h, f); err != nil {
				return err
			}
			made.Manifests[strconv.Itoa(i)] = hex.EncodeToString(h.Sum(nil))
			return nil
		})
	}
	var verdicts []Change
	st, err := Merge(readers, func(v Change) error {
		verdicts = append(verdicts, v)
		return nil
	})
	if err != nil {
		return CheckSummary{}, err
	}
	// Every shard covers its buckets (the headers are read whole by now).
	if err := shardsComplete(p, readers, out); err != nil {
		return CheckSummary{}, err
	}
	for _, h := range hashed {
		if err := h(); err != nil {
			return CheckSummary{}, err
		}
	}
	slices.SortFunc(verdicts, func(a, b Change) int {
		if c := strings.Compare(a.Bucket, b.Bucket); c != 0 {
			return c
		}
		return strings.Compare(a.Textname, b.Textname)
	})
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	// A collision is one reject per report that loses its IDs: the
	// shards counted their own verdicts, the corpus has the settled ones.
	counts.AddCollisions(st.Lost - st.Regained)
	counts.Reports += st.Regained - st.Lost
	counts.Measurements += st.RegainedMeasurements - st.LostMeasurements
	sum := CheckSummary{MergeStats: st, Buckets: []string{}, Totals: stamped.NewTally()}
	for _, r := range p.InputRecords {
		counts.Add(r)
	}
	sum.Totals.Add(counts)
	for _, v := range verdicts {
		if err := enc.Encode(v); err != nil {
			return sum, err
		}
		if len(sum.Buckets) == 0 || sum.Buckets[len(sum.Buckets)-1] != v.Bucket {
			sum.Buckets = append(sum.Buckets, v.Bucket)
		}
	}
	digest := sha256.Sum256(body.Bytes())
	made.Verdicts, made.Body = len(verdicts), hex.EncodeToString(digest[:])
	head, err := json.Marshal(made)
	if err != nil {
		return sum, err
	}
	return sum, store.WriteFile(ctx, out, VerdictsName, append(append(head, '\n'), body.Bytes()...))
}

// Mapped checks that the map of shard has completed (its manifest, written
// last, is in its output src); the error is an *OrderError when it has
// not.
func Mapped(ctx context.Context, src store.Store, shard int) error {
	_, err := src.Stat(ctx, ManifestName)
	if errors.Is(err, fs.ErrNotExist) {
		return &OrderError{fmt.Sprintf("shard %d has not completed its map (%s has no %s): run the map of shard %d first (backfill run --plan PLAN --shard %d)",
			shard, src.Where("."), ManifestName, shard, shard)}
	}
	return err
}

// readCounts reads a shard's counts.
func readCounts(ctx context.Context, so store.Store) (stamped.Counts, error) {
	var c stamped.Counts
	b, err := store.ReadFile(ctx, so, CountsName)
	if err != nil {
		return c, err
	}
	if err := json.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%s: %w", so.Where(CountsName), err)
	}
	return c.Clone(), nil
}

// shardsComplete checks that every manifest covers exactly its shard's
// buckets of the plan.
func shardsComplete(p Plan, readers []*ManifestReader, out store.Store) error {
	k := 0
	for i := range p.Shards {
		want := p.Names(i)
		if len(want) == 0 {
			continue
		}
		got := readers[k].Header.Buckets
		k++
		if !slices.Equal(got, want) {
			return fmt.Errorf("shard %d (%s) committed %d of its %d buckets: run it again", i, ShardOut(out, i).Where("."), len(got), len(want))
		}
	}
	return nil
}

// OrderError is the error of a phase run before the one it needs:
// running it again does not mend that, running that phase first does.
type OrderError struct{ Msg string }

func (e *OrderError) Error() string { return e.Msg }

// VerdictsHeader is the first line of verdicts.jsonl: what Check made
// the verdicts from, the plan's checksum and the SHA-256 of each shard's
// manifest (by shard index), and the lines that follow it, their count
// and SHA-256. Load takes the verdicts only when they are those of its
// plan and of the manifests the shards hold now, whole.
type VerdictsHeader struct {
	Plan      string            `json:"plan"`
	Manifests map[string]string `json:"manifests"`
	Verdicts  int               `json:"verdicts"`
	Body      string            `json:"body_sha256"`
}

// ReadVerdicts reads what Check wrote under out, by bucket, once it has
// checked that Check made them from the plan p and from the manifests
// its shards hold now: an *OrderError, naming the step to run again,
// when it did not.
func ReadVerdicts(ctx context.Context, p Plan, out store.Store) (map[string][]stamped.Verdict, error) {
	v, _, err := readVerdicts(ctx, p, out)
	return v, err
}

// readVerdicts is ReadVerdicts, which returns the header too.
func readVerdicts(ctx context.Context, p Plan, out store.Store) (map[string][]stamped.Verdict, VerdictsHeader, error) {
	var h VerdictsHeader
	data, err := store.ReadFile(ctx, out, VerdictsName)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, h, &OrderError{out.Where(".") + " has no verdicts: run backfill check first, once every shard's map has completed"}
	}
	if err != nil {
		return nil, h, err
	}
	head, body, _ := bytes.Cut(data, []byte("\n"))
	if err := json.Unmarshal(head, &h); err != nil || h.Plan == "" {
		return nil, h, &OrderError{fmt.Sprintf("%s was not written by backfill check (it names no plan): run backfill check --plan PLAN --out %s again", out.Where(VerdictsName), out.Where("."))}
	}
	if sum := sha256.Sum256(body); h.Body != hex.EncodeToString(sum[:]) || bytes.Count(body, []byte("\n")) != h.Verdicts {
		return nil, h, &OrderError{fmt.Sprintf("%s is not the file check wrote (%d verdict lines where its header counts %d, or their digest differs): run backfill check --plan PLAN --out %s again",
			out.Where(VerdictsName), bytes.Count(body, []byte("\n")), h.Verdicts, out.Where("."))}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if h.Plan != p.Checksum {
		return nil, h, &OrderError{fmt.Sprintf("%s was made by check for another plan (checksum %s, this plan's is %s): run backfill check with this plan, once every shard's map has completed",
			out.Where(VerdictsName), short(h.Plan), short(p.Checksum))}
	}
	for i := range p.Shards {
		if len(p.Names(i)) == 0 {
			continue
		}
		so := ShardOut(out, i)
		d, err := parquetfile.DigestFile(ctx, so, ManifestName)
		got := d.SHA256
		if err != nil {
			return nil, h, err
		}
		if want := h.Manifests[strconv.Itoa(i)]; got != want {
			return nil, h, &OrderError{fmt.Sprintf("%s changed since check made %s (shard %d was mapped again): run backfill check again before load",
				so.Where(ManifestName), out.Where(VerdictsName), i)}
		}
	}
	byBucket := map[string][]stamped.Verdict{}
	for {
		var v Change
		if err := dec.Decode(&v); errors.Is(err, io.EOF) {
			return byBucket, h, nil
		} else if err != nil {
			return nil, h, fmt.Errorf("%s: %w", VerdictsName, err)
		}
		byBucket[v.Bucket] = append(byBucket[v.Bucket], stamped.Verdict{Textname: v.Textname, RejectedBy: v.RejectedBy, Message: v.Message})
	}
}

func short(sum string) string { return sum[:min(len(sum), 12)] }
