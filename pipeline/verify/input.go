package verify

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/backfill-dev/backfill/pipeline/ingest"
	"github.com/backfill-dev/backfill/pipeline/ooniuid"
	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// Input is the input an output was made from, read as run reads it, in
// the background: each bucket's reports, their textnames and counts (from
// the index alone with --from-index). An output is complete against it
// when it has every bucket of the input, and in each the reports the input
// gives, with their counts, and no other: a report that run rejects is
// rejected here too, the same way.
type Input struct {
	Where   string // the input, in messages
	buckets chan inputBucket
	err     error // why the buckets ended early, once they are closed
	next    *inputBucket
	cancel  context.CancelFunc
}

type inputBucket struct {
	date    string
	reports []Report // in textname order
}

// ReadInput reads the buckets of cfg (its In and Buckets resolved, as
// ingest.ResolveInput gives them) until Close.
func ReadInput(ctx context.Context, cfg ingest.Config) (*Input, error) {
	plan, err := ingest.NewWork(ctx, cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	in := &Input{Where: cfg.In.Where("."), buckets: make(chan inputBucket, 2), cancel: cancel}
	go func() {
		defer close(in.buckets)
		in.err = ingest.Run(ctx, cfg, plan, func(b *stamped.Bucket) error {
			ib := inputBucket{date: b.Meta.Bucket, reports: make([]Report, len(b.Reports))}
			listed := map[string][]string{}
			for _, d := range b.Records {
				listed[d.Textname] = append(listed[d.Textname], d.MeasurementUIDs...)
			}
			for i, r := range b.Reports {
				ib.reports[i] = Report{Textname: r.Textname, N: r.N, IDs: r.IDs, Listed: sortedUIDs(listed[r.Textname])}
			}
			slices.SortFunc(ib.reports, func(x, y Report) int { return strings.Compare(x.Textname, y.Textname) })
			select {
			case in.buckets <- ib:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	return in, nil
}

// Close stops the reading.
func (in *Input) Close() {
	in.cancel()
	for range in.buckets {
	}
}

// peek returns the input's next bucket, nil after the last.
func (in *Input) peek() (*inputBucket, error) {
	if in.next == nil {
		b, ok := <-in.buckets
		if !ok {
			if in.err != nil {
				return nil, fmt.Errorf("reading the input %s: %w", in.Where, in.err)
			}
			return nil, nil
		}
		in.next = &b
	}
	return in.next, nil
}

// complete checks bucket b's reports against the input's: the input's
// buckets before it are missing from the output.
func (in *Input) complete(where, b string, reports []Report) error {
	ib, err := in.peek()
	if err != nil {
		return err
	}
	switch {
	case ib != nil && ib.date < b:
		return &Failure{At: where, What: fmt.Sprintf("bucket %s of the input %s is not among the output's committed buckets", ib.date, in.Where)}
	case ib == nil || ib.date > b:
		return &Failure{At: where, What: fmt.Sprintf("the input %s has no bucket %s", in.Where, b)}
	}
	in.next = nil
	sorted := slices.Clone(reports)
	slices.SortFunc(sorted, func(x, y Report) int { return strings.Compare(x.Textname, y.Textname) })
	want := ib.reports
	for len(want) > 0 || len(sorted) > 0 {
		switch {
		case len(sorted) == 0 || len(want) > 0 && want[0].Textname < sorted[0].Textname:
			return &Failure{At: where + ": report " + want[0].Textname, What: fmt.Sprintf("the input has it, with %d measurements; the output does not", want[0].N)}
		case len(want) == 0 || sorted[0].Textname < want[0].Textname:
			return &Failure{At: where + ": report " + sorted[0].Textname, What: "the input " + in.Where + " has no such report"}
		case sorted[0].N != want[0].N:
			return &Failure{At: where + ": report " + sorted[0].Textname, What: fmt.Sprintf("%d measurements; the input has %d", sorted[0].N, want[0].N)}
		}
		if err := sameIDs(where+": report "+sorted[0].Textname, sorted[0].IDs, want[0].IDs); err != nil {
			return err
		}
		if sorted[0].IDs != nil && !slices.Equal(sorted[0].Listed, want[0].Listed) {
			return &Failure{At: where + ": report " + sorted[0].Textname,
				What: fmt.Sprintf("its dead letters list the measurement_uids %v, where the input gives %v (OONI's uids that no row carries)", sorted[0].Listed, want[0].Listed)}
		}
		want, sorted = want[1:], sorted[1:]
	}
	return nil
}

// anyUIDs reports whether a bucket of states was made with
// --measurement-uid.
func anyUIDs(states []stamped.State) bool {
	for _, s := range states {
		if s.Meta.UIDs {
			return true
		}
	}
	return false
}

// sameIDs checks a report's identities in the output against those the
// input gives its measurements again (when the output has them).
func sameIDs(at string, got, want []ooniuid.ID) error {
	if got == nil {
		return nil
	}
	if len(got) != len(want) {
		return &Failure{At: at, What: fmt.Sprintf("%d identities (--measurement-uid); the input gives %d", len(got), len(want))}
	}
	for ndx := range got {
		switch {
		case got[ndx].Hash != want[ndx].Hash:
			return &Failure{At: fmt.Sprintf("%s, ndx %d", at, ndx), What: fmt.Sprintf("content_hash %s; the input's raw bytes hash to %s", got[ndx].Hash, want[ndx].Hash)}
		case got[ndx].UID != want[ndx].UID:
			return &Failure{At: fmt.Sprintf("%s, ndx %d", at, ndx), What: fmt.Sprintf("measurement_uid %q; the input gives %q", got[ndx].UID, want[ndx].UID)}
		}
	}
	return nil
}

// end checks that no bucket of the input is left.
func (in *Input) end(where string) error {
	ib, err := in.peek()
	if err != nil {
		return err
	}
	if ib != nil {
		return &Failure{At: where, What: fmt.Sprintf("bucket %s of the input %s is not among the output's committed buckets", ib.date, in.Where)}
	}
	return nil
}

// sortedUIDs returns uids sorted, nil for none.
func sortedUIDs(uids []string) []string {
	if len(uids) == 0 {
		return nil
	}
	return slices.Sorted(slices.Values(uids))
}
