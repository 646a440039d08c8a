package audit

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/backfill-dev/backfill/pipeline/collisions"
)

// SchemeResult is one scheme's result as audit prints it.
type SchemeResult struct {
	CounterBits  int         `json:"counter_bits"`
	SHA1Offset   int         `json:"sha1_offset"`
	KeyTable     string      `json:"key_table,omitempty"`
	Pairs        int64       `json:"colliding_pairs"`
	Measurements int64       `json:"measurements_involved"`
	First        []NamedPair `json:"pairs"`
	Predicted    *Predicted  `json:"predicted,omitempty"`
}

// NamedPair is two colliding reports, by textname.
type NamedPair struct {
	A string `json:"a"`
	B string `json:"b"`
}

// Predicted is the chance of no collision the shape of the corpus gives.
type Predicted struct {
	P       float64 `json:"p_no_collision"`
	NegLog2 float64 `json:"neg_log2_p"`
}

// Report is what audit prints: the corpus counted, each scheme's result.
type Report struct {
	Reports      int64          `json:"reports"`
	Measurements int64          `json:"measurements"`
	Rejects      int64          `json:"rejects"` // inputs lost, not audited
	Results      []SchemeResult `json:"results"`
}

// newResult is the result r as audit prints it: its first pairs by name
// (names maps a report to its textname), in order, at most pairs of them,
// and with predict the predicted chance of no collision.
func newResult(r collisions.Result, names map[uint32]string, pairs int, predict bool) SchemeResult {
	ar := SchemeResult{CounterBits: r.Scheme.CounterBits, SHA1Offset: r.Scheme.SHA1Offset, KeyTable: r.Scheme.Table,
		Pairs: r.Pairs, Measurements: r.Measurements, First: []NamedPair{}}
	for _, p := range r.First {
		x, y := names[p.A], names[p.B]
		if y < x {
			x, y = y, x
		}
		ar.First = append(ar.First, NamedPair{x, y})
	}
	sort.Slice(ar.First, func(i, j int) bool {
		if ar.First[i].A != ar.First[j].A {
			return ar.First[i].A < ar.First[j].A
		}
		return ar.First[i].B < ar.First[j].B
	})
	ar.First = ar.First[:min(len(ar.First), pairs)]
	if predict {
		l := collisions.Predict(r.Groups, r.Scheme.CounterBits)
		ar.Predicted = &Predicted{P: math.Exp2(l), NegLog2: -l}
	}
	return ar
}

// IntList parses N, N..M or N,M,... (or "all": lo..hi).
func IntList(s string, lo, hi int) ([]int, error) {
	if s == "all" {
		s = fmt.Sprintf("%d..%d", lo, hi)
	}
	var out []int
	for _, part := range strings.Split(s, ",") {
		a, b, isRange := strings.Cut(part, "..")
		x, err := strconv.Atoi(a)
		if err != nil {
			return nil, fmt.Errorf("%q is not a number", a)
		}
		y := x
		if isRange {
			if y, err = strconv.Atoi(b); err != nil {
				return nil, fmt.Errorf("%q is not a number", b)
			}
		}
		if x < lo || y > hi || x > y {
			return nil, fmt.Errorf("%q: want values in %d..%d", part, lo, hi)
		}
		for v := x; v <= y; v++ {
			out = append(out, v)
		}
	}
	return out, nil
}

// offset is the offset column: the SHA-1 window's offset, or "keyed".
func (r SchemeResult) offset() string {
	if r.KeyTable != "" {
		return "keyed"
	}
	return strconv.Itoa(r.SHA1Offset)
}

func (r SchemeResult) name() string {
	if r.KeyTable != "" {
		return "key table " + r.KeyTable
	}
	return fmt.Sprintf("offset %d", r.SHA1Offset)
}

// WriteText writes the report as a table, then each scheme's first pairs.
func (rep Report) WriteText(w io.Writer, predict bool) {
	fmt.Fprintf(w, "reports        %d\nmeasurements   %d\n", rep.Reports, rep.Measurements)
	if rep.Rejects > 0 {
		fmt.Fprintf(w, "rejects        %d (inputs lost, listed on stderr: they are not audited)\n", rep.Rejects)
	}
	fmt.Fprintln(w)
	header := "bits  offset  colliding pairs  measurements involved"
	if predict {
		header += "  predicted P(no collision)  -log2 P"
	}
	fmt.Fprintln(w, header)
	for _, r := range rep.Results {
		fmt.Fprintf(w, "%4d  %6s  %15d  %21d", r.CounterBits, r.offset(), r.Pairs, r.Measurements)
		if r.Predicted != nil {
			fmt.Fprintf(w, "  %25.3g  %7.2f", r.Predicted.P, r.Predicted.NegLog2)
		}
		fmt.Fprintln(w)
	}
	for _, r := range rep.Results {
		if len(r.First) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n%d bits, %s: %s", r.CounterBits, r.name(), pairs(r.Pairs))
		if int64(len(r.First)) < r.Pairs {
			fmt.Fprintf(w, " (the first %d)", len(r.First))
		}
		fmt.Fprintln(w)
		for i, p := range r.First {
			if i > 0 {
				fmt.Fprintln(w)
			}
			fmt.Fprintf(w, "  %s\n  %s\n", p.A, p.B)
		}
	}
}

func pairs(n int64) string {
	if n == 1 {
		return "1 colliding pair"
	}
	return strconv.FormatInt(n, 10) + " colliding pairs"
}
