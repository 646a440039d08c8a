package collisions

import (
	"math"
	"testing"

	"github.com/backfill-dev/backfill/gen/ooni2018"
)

// notebookGroups are the groups of ooni2018.NotebookGroups: they honour
// everything the notebook publishes of its input, and one number (the pair
// load, Σ K·M − K(K+1)/2) is set from its table; the formula must then give
// all thirteen rows.
func notebookGroups() []Group {
	var out []Group
	for _, g := range ooni2018.NotebookGroups() {
		out = append(out, Group{g.Reports, g.Measurements})
	}
	return out
}

// The notebook's table, cell 6: bits, −log2 P, P.
var notebookTable = []struct {
	bits    int
	negLog2 float64
	p       float64
}{
	{32, 0.0, 0.969}, {31, 0.1, 0.939}, {30, 0.2, 0.882}, {29, 0.4, 0.777}, {28, 0.7, 0.604},
	{27, 1.5, 0.365}, {26, 2.9, 0.133}, {25, 5.8, 0.0178}, {24, 11.6, 3.15e-4}, {23, 23.3, 9.9e-8},
	{22, 46.5, 9.8e-15}, {21, 93.1, 9.5e-29}, {20, 186.2, 8.6e-57},
}

func TestPredictReproducesNotebook(t *testing.T) {
	groups := notebookGroups()
	var k, m int64
	maxK := int64(0)
	for _, g := range groups {
		if g.M < 1 {
			t.Fatalf("a group with %d measurements", g.M)
		}
		k += g.K
		m += g.M
		maxK = max(maxK, g.K)
	}
	if len(groups) != 316084 || k != 753235 || m != 40440216 || maxK != 20 {
		t.Fatalf("fixture: %d groups, %d reports, %d measurements, max %d per group", len(groups), k, m, maxK)
	}
	for _, row := range notebookTable {
		got := Predict(groups, row.bits)
		// −log2 P is printed to 0.1; P to two or three digits.
		if math.Abs(-got-row.negLog2) > 0.06 {
			t.Errorf("%d bits: −log2 P = %.3f, the notebook prints %.1f", row.bits, -got, row.negLog2)
		}
		if math.Abs(got-math.Log2(row.p)) > 0.03 {
			t.Errorf("%d bits: P = %.3g, the notebook prints %.3g", row.bits, math.Exp2(got), row.p)
		}
	}
}

func TestPredictEdges(t *testing.T) {
	if got := Predict(nil, 28); got != 0 {
		t.Errorf("no groups: log2 P = %v, want 0", got)
	}
	// Two reports of one measurement each in a space of 4: 3 of the 4
	// placements of the second miss the first.
	if got := Predict([]Group{{2, 2}}, 2); math.Abs(got-math.Log2(3.0/4)) > 1e-12 {
		t.Errorf("2 reports in 4: log2 P = %v, want log2(3/4)", got)
	}
	// Two reports of 2 measurements in a space of 4: C(4-4+2,2)·2!/16 = 2/16.
	if got := Predict([]Group{{2, 4}}, 2); math.Abs(got-math.Log2(2.0/16)) > 1e-12 {
		t.Errorf("log2 P = %v, want log2(2/16)", got)
	}
	if got := Predict([]Group{{2, 5}}, 2); !math.IsInf(got, -1) {
		t.Errorf("more measurements than counters: %v, want -Inf", got)
	}
}

// PredictCircular is exact on the counter circle: every placement of the
// bases of a few ranges in a small space is tried, and the fraction with
// no overlap (Range.Overlaps, wrap-around included) is its probability,
// whatever the split of M among the K ranges.
func TestPredictCircular_Enumerated(t *testing.T) {
	for _, lens := range [][]uint32{{1, 1}, {2, 2}, {3, 1}, {1, 2, 3}, {4, 1, 1}, {2, 2, 2, 1}, {5, 3}, {1, 1, 1, 1, 1}} {
		const bits = 4
		n := 1 << bits
		k := len(lens)
		var m int64
		for _, l := range lens {
			m += int64(l)
		}
		total, clean := 0, 0
		bases := make([]int, k)
		for {
			total++
			ok := true
			for i := 0; i < k && ok; i++ {
				for j := i + 1; j < k && ok; j++ {
					a := Range{TS: 1, Base: uint32(bases[i]), N: lens[i]}
					ok = !a.Overlaps(Range{TS: 1, Base: uint32(bases[j]), N: lens[j]}, bits)
				}
			}
			if ok {
				clean++
			}
			i := 0
			for ; i < k; i++ {
				if bases[i]++; bases[i] < n {
					break
				}
				bases[i] = 0
			}
			if i == k {
				break
			}
		}
		want := math.Log2(float64(clean) / float64(total))
		if got := PredictCircular([]Group{{int64(k), m}}, bits); math.Abs(got-want) > 1e-9 {
			t.Errorf("lengths %v in 2^%d: log2 P = %.6f, enumeration %.6f", lens, bits, got, want)
		}
		if line := Predict([]Group{{int64(k), m}}, bits); line > want+1e-9 {
			t.Errorf("lengths %v: the notebook's line model %.4f is above the circle's %.4f", lens, line, want)
		}
	}
}
