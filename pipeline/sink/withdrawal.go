package sink

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/backfill-dev/backfill/pipeline/stamped"
)

// Withdrawal is a report that kept its IDs in a bucket the output held
// committed before the run (an earlier run's, or another session's) and
// loses them to a report the run committed: IDs a user may have copied,
// taken back. A run names each one, counts it as a reject, and exits 3.
type Withdrawal struct {
	Bucket   string `json:"bucket"`
	Textname string `json:"textname"`
	N        uint32 `json:"measurements"` // whose IDs are withdrawn
	// Cause is why: a collision, or a Cause* of a bucket written again.
	Cause string `json:"cause"`
	// Winner is the report that keeps the IDs now (a collision's).
	Winner string `json:"winner,omitempty"`
	// Detail says the cause in words, where a cause has more to say.
	Detail string `json:"detail,omitempty"`
}

// The causes of a withdrawal.
const (
	// CauseCollision: the report loses its IDs to a report that sorts
	// first, committed after it.
	CauseCollision = "collision"
	// CauseVanished: the bucket is written again from an input that no
	// longer holds the report (a container or the report gone).
	CauseVanished = "vanished"
	// CauseFewer: the report is written again with fewer measurements;
	// the IDs of the last ones are withdrawn.
	CauseFewer = "fewer_measurements"
	// CauseNdxPolicy: the bucket is written again under another ndx
	// policy, which counts the report's measurements otherwise: its IDs
	// may now name other measurements.
	CauseNdxPolicy = "ndx_policy"
	// CauseScheme: the bucket is written again under another scheme:
	// every ID changes.
	CauseScheme = "scheme"
)

// Says is the withdrawal in words, as a run names it.
func (w Withdrawal) Says() string {
	if w.Cause == CauseCollision || w.Cause == "" {
		s := fmt.Sprintf("%s of bucket %s (%d measurements) loses its IDs to %s", w.Textname, w.Bucket, w.N, w.Winner)
		if w.Detail != "" {
			s += " (" + w.Detail + ")"
		}
		return s
	}
	return fmt.Sprintf("%s of bucket %s loses the IDs of %d measurements (%s: %s)", w.Textname, w.Bucket, w.N, w.Cause, w.Detail)
}

// Withdrawer is a SelfSettling Sink that says which committed reports it
// withdrew the IDs of (see Withdrawal), since it was opened.
type Withdrawer interface {
	Withdrawn() []Withdrawal
}

// WithdrawError is the refusal of a run that forbids withdrawals
// (--no-withdraw): committing the bucket would have withdrawn the IDs of
// these committed reports. Nothing of the bucket was written, and no
// committed report changed.
type WithdrawError struct {
	Bucket      string
	Withdrawals []Withdrawal
}

func (e *WithdrawError) Error() string {
	w := e.Withdrawals[0]
	more := ""
	if len(e.Withdrawals) > 1 {
		more = fmt.Sprintf(" (and %d more)", len(e.Withdrawals)-1)
	}
	return fmt.Sprintf("bucket %s would withdraw the IDs of committed reports: %s%s; nothing of the bucket was written (--no-withdraw)",
		e.Bucket, w.Says(), more)
}

// Withdrawals returns the withdrawals of writing b, its verdicts settled,
// over its committed version (old, and its report manifest): those of
// rewrites, and a collision's for each report that kept its IDs and
// loses them to its verdict. Sorted by textname.
func Withdrawals(b *stamped.Bucket, old stamped.Meta, committed []stamped.ManifestEntry) []Withdrawal {
	was := map[string]uint32{}
	for _, r := range committed {
		if r.RejectedBy == "" && r.N > 0 {
			was[r.Textname] = r.N
		}
	}
	out := Rewrites(b, old, was)
	for i := range b.Reports {
		r := &b.Reports[i]
		if r.RejectedBy != "" && was[r.Textname] > 0 && !slices.ContainsFunc(out, func(w Withdrawal) bool { return w.Textname == r.Textname }) {
			out = append(out, Withdrawal{Bucket: b.Meta.Bucket, Textname: r.Textname, N: was[r.Textname], Winner: r.RejectedBy, Cause: CauseCollision})
		}
	}
	slices.SortFunc(out, func(a, b Withdrawal) int { return strings.Compare(a.Textname, b.Textname) })
	return out
}

// Rewrites returns the withdrawals of a bucket written again over its
// committed version (was: the reports that kept their IDs in it) that
// are not collisions: every ID of the bucket when the scheme changes; the
// IDs of a report no longer in the bucket; those of the measurements a
// report no longer has; and, when the ndx policy changes, every ID of a
// report whose count of measurements changes with it (a blob counted
// under one policy and not the other renumbers those after it; a report
// whose count is the same has none, and keeps its IDs). Sorted by
// textname.
func Rewrites(b *stamped.Bucket, old stamped.Meta, was map[string]uint32) []Withdrawal {
	if len(was) == 0 {
		return nil
	}
	now := make(map[string]uint32, len(b.Reports))
	for i := range b.Reports {
		now[b.Reports[i].Textname] = b.Reports[i].N
	}
	var out []Withdrawal
	for _, tn := range slices.Sorted(maps.Keys(was)) {
		w := Withdrawal{Bucket: b.Meta.Bucket, Textname: tn, N: was[tn]}
		n, ok := now[tn]
		switch {
		case !old.Scheme.Equal(b.Meta.Scheme):
			w.Cause = CauseScheme
			w.Detail = fmt.Sprintf("committed under %s, written under %s", old.Scheme, b.Meta.Scheme)
		case !ok:
			w.Cause = CauseVanished
			w.Detail = "the report is no longer in the bucket's input"
		case old.NdxPolicy != b.Meta.NdxPolicy && n != w.N:
			w.Cause = CauseNdxPolicy
			w.Detail = fmt.Sprintf("committed with --ndx %s as %d measurements, written with --ndx %s as %d: its IDs may name other measurements now", old.NdxPolicy, w.N, b.Meta.NdxPolicy, n)
		case n < w.N:
			w.Cause, w.N = CauseFewer, w.N-n
			w.Detail = fmt.Sprintf("measurements %d to %d are no longer in the report", n, was[tn]-1)
		default:
			continue
		}
		out = append(out, w)
	}
	return out
}
