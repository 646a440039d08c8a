package granule

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// The Cumulus documentation's table for 10,000 same-ID ingests.
func TestCollisionRisk_DocFigures(t *testing.T) {
	want := map[int]string{6: "0.07273311278", 7: "0.001136861915", 8: "1.776356682e-05", 9: "2.775557562e-07"}
	for l, w := range want {
		r := CollisionRisk(l, 10000)
		if got := fmt.Sprintf("%.10g", r.Doc*100); got != w {
			t.Errorf("hash length %d: doc figure %s%%, want %s%%", l, got, w)
		}
		if !(r.Birthday63 > r.Birthday64) {
			t.Errorf("hash length %d: 63-symbol risk %g not above 64-symbol %g", l, r.Birthday63, r.Birthday64)
		}
		if rel := math.Abs(r.Birthday64-r.Doc) / r.Doc; rel > 2e-4 {
			t.Errorf("hash length %d: exact %g vs doc approximation %g", l, r.Birthday64, r.Doc)
		}
	}
}

// exactBirthday computes 1 - prod (1 - i/d) in exact rational arithmetic.
func exactBirthday(n, d int64) float64 {
	p := big.NewRat(1, 1)
	for i := int64(1); i < n; i++ {
		p.Mul(p, big.NewRat(d-i, d))
	}
	f, _ := new(big.Rat).Sub(big.NewRat(1, 1), p).Float64()
	return f
}

func TestBirthday(t *testing.T) {
	for _, c := range [][2]int64{{2, 2}, {23, 365}, {70, 365}, {50, 4096}, {300, 63 * 63 * 63}, {1000, 64 * 64 * 64 * 64}} {
		got, want := Birthday(float64(c[0]), float64(c[1])), exactBirthday(c[0], c[1])
		if math.Abs(got-want) > 1e-12*math.Max(want, 1e-300)+1e-15 {
			t.Errorf("Birthday(%d, %d) = %.15g, exact %.15g", c[0], c[1], got, want)
		}
	}
	if Birthday(1, 10) != 0 || Birthday(11, 10) != 1 {
		t.Error("edge cases")
	}
	// The series and lgamma branches agree with the direct sum where they
	// meet.
	d := math.Pow(63, 9)
	direct := Birthday(1e7, d)
	series := -math.Expm1(-(1e7*(1e7-1)/2/d + (1e7-1)*1e7*(2e7-1)/6/(2*d*d)))
	if math.Abs(direct-series)/direct > 1e-9 {
		t.Errorf("direct %.15g vs series %.15g", direct, series)
	}
	big1 := Birthday(2e7, d)
	if big1 <= direct || big1 > 4.01*direct {
		t.Errorf("series branch %g not about 4x %g", big1, direct)
	}
	if g := Birthday(5e7, 1e9); math.Abs(g-1) > 1e-9 {
		t.Errorf("lgamma branch: %g, want about 1", g)
	}
}

// The simulation with the real generator lands within its 95% interval of
// the 63-symbol prediction (for a seed fixed so the test is repeatable in
// its inputs; the timestamps differ per run, so allow 4.5 standard deviations).
func TestSimulateCollisions(t *testing.T) {
	sim, err := SimulateCollisions(2, 20, 4000, rand.New(rand.NewPCG(3, 4)))
	if err != nil {
		t.Fatal(err)
	}
	p := Birthday(20, 63*63)
	sd := math.Sqrt(p * (1 - p) / float64(sim.Trials))
	if d := math.Abs(sim.Rate() - p); d > 4.5*sd {
		t.Errorf("simulated rate %.4f, predicted %.4f (sd %.4f)", sim.Rate(), p, sd)
	}
	lo, hi := sim.CI95()
	if !(lo <= sim.Rate() && sim.Rate() <= hi) {
		t.Errorf("CI [%g, %g] excludes %g", lo, hi, sim.Rate())
	}
}
