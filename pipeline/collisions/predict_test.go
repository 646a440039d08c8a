package collisions

import (
	"math"
	"testing"
)

// notebookGroups is a set of shared-timestamp groups honouring everything
// docs/ooid-hash-prob.ipynb publishes of its input (its per-group file is
// not published): 316,084 groups, 753,235 reports, 40,440,216 measurements,
// at most 20 reports per group, and its first five rows. Group sizes fall
// off geometrically; one group in 21 holds about 500 measurements per
// report, the others about 31, with the same mean per report as the
// corpus. Then measurements move, one at a time, from 2-report groups to
// 20-report groups (totals unchanged) until Σ(K·M − K(K+1)/2) is 135.25 M,
// the pair load that the notebook's 28-bit row implies. Nothing else is
// fitted: the formula must then give the other twelve rows.
func notebookGroups() []Group {
	counts := map[int64]int64{2: 285555 - 3, 3: 7533, 4: 5682 - 2, 5: 4290, 6: 3239, 7: 2445, 8: 1846, 9: 1394, 10: 1052,
		11: 795, 12: 600, 13: 453, 14: 342, 15: 258, 16: 195, 17: 147, 18: 111, 19: 84, 20: 63}
	const msm, pairLoad = 40440216, 135.25e6
	groups := []Group{{2, 1021}, {2, 1023}, {2, 999}, {4, 1002}, {4, 1002}}
	var ks []int64
	for k := int64(2); k <= 20; k++ {
		for range counts[k] {
			ks = append(ks, k)
		}
	}
	rest, smallK := int64(msm), int64(0)
	for _, g := range groups {
		rest -= g.M
	}
	for i, k := range ks {
		if i%21 == 0 {
			rest -= int64(math.Round(float64(k) * 500))
		} else {
			smallK += k
		}
	}
	u1 := float64(rest) / float64(smallK)
	acc, tot := 0.0, int64(0)
	for i, k := range ks {
		if i%21 == 0 {
			groups = append(groups, Group{k, int64(math.Round(float64(k) * 500))})
			continue
		}
		acc += float64(k) * u1
		m := int64(acc) - tot
		tot += m
		groups = append(groups, Group{k, m})
	}
	var sumM, sumKM, half int64
	for _, g := range groups {
		sumM += g.M
	}
	groups[len(groups)-1].M += msm - sumM
	for _, g := range groups {
		sumKM += g.K * g.M
		half += g.K * (g.K + 1) / 2
	}
	delta := (int64(pairLoad) + half - sumKM) / 18
	var i2, i20 []int
	for i, g := range groups {
		switch g.K {
		case 2:
			i2 = append(i2, i)
		case 20:
			i20 = append(i20, i)
		}
	}
	step := int64(1)
	if delta < 0 {
		step, delta = -1, -delta
	}
	for j := range delta {
		groups[i2[j%int64(len(i2))]].M -= step
		groups[i20[j%int64(len(i20))]].M += step
	}
	return groups
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
