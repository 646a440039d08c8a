package granule

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
)

// Risk holds three collision probabilities for n ingests of the same
// producer granule ID into one collection with timestamped hashes of length
// L: the chance that two of them get the same unique ID.
type Risk struct {
	HashLength int
	Ingests    float64
	// Doc is the figure of the Cumulus documentation's table:
	// 1 - exp(-n^2 / 2d) with d = 64^L, computed as the table was (without
	// expm1, so that the digits match it).
	Doc float64
	// Birthday64 is the exact birthday probability for d = 64^L.
	Birthday64 float64
	// Birthday63 is the exact birthday probability for d = 63^L: the
	// alphabet the suffix really uses once '_' is removed.
	Birthday63 float64
}

// CollisionRisk computes the three probabilities for hash length L and n
// ingests.
func CollisionRisk(hashLength int, n float64) Risk {
	d64 := math.Pow(64, float64(hashLength))
	return Risk{
		HashLength: hashLength,
		Ingests:    n,
		Doc:        1 - math.Exp(-n*n/(2*d64)),
		Birthday64: Birthday(n, d64),
		Birthday63: Birthday(n, math.Pow(63, float64(hashLength))),
	}
}

// Birthday returns the probability that n uniform draws from d values are
// not all distinct: 1 - prod_{i<n} (1 - i/d).
func Birthday(n, d float64) float64 {
	n = math.Floor(n)
	if n < 2 {
		return 0
	}
	if n > d {
		return 1
	}
	var logNone float64 // log P(all distinct)
	switch {
	case n <= 1e7:
		for i := 1.0; i < n; i++ {
			logNone += math.Log1p(-i / d)
		}
	case n/d < 1e-3:
		// sum_i log1p(-i/d) = -sum_k S_k / (k d^k), S_k = sum_{i<n} i^k;
		// three terms leave a relative error below (n/d)^3.
		s1 := n * (n - 1) / 2
		s2 := (n - 1) * n * (2*n - 1) / 6
		s3 := s1 * s1
		logNone = -(s1/d + s2/(2*d*d) + s3/(3*d*d*d))
	default:
		lg := func(x float64) float64 { v, _ := math.Lgamma(x); return v }
		logNone = lg(d+1) - lg(d-n+1) - n*math.Log(d)
	}
	return -math.Expm1(logNone)
}

// Simulation is the outcome of SimulateCollisions.
type Simulation struct {
	HashLength int
	Ingests    int
	Trials     int
	// Colliding is the number of trials in which two ingests got the same
	// unique ID.
	Colliding int
}

// Rate returns the measured collision probability per trial.
func (s Simulation) Rate() float64 { return float64(s.Colliding) / float64(s.Trials) }

// CI95 returns the Wilson 95% confidence interval of Rate.
func (s Simulation) CI95() (lo, hi float64) {
	const z = 1.959963984540054
	n, p := float64(s.Trials), s.Rate()
	den := 1 + z*z/n
	mid := (p + z*z/(2*n)) / den
	half := z * math.Sqrt(p*(1-p)/n+z*z/(4*n*n)) / den
	return max(0, mid-half), min(1, mid+half)
}

// SimulateCollisions runs trials of n timestamped ingests of one granule ID
// into collection, with the real generator, and counts the trials in which
// any two IDs were equal. rng picks the collection ID of each trial, so that
// trials are independent of one another.
func SimulateCollisions(hashLength, n, trials int, rng *rand.Rand) (Simulation, error) {
	if err := CheckHashLength(hashLength); err != nil {
		return Simulation{}, err
	}
	sim := Simulation{HashLength: hashLength, Ingests: n, Trials: trials}
	seen := make(map[[MaxHashLength]byte]struct{}, n)
	for range trials {
		clear(seen)
		collection := []byte("SIM___" + randomToken(rng))
		for range n {
			var s [MaxHashLength]byte
			timestampedSuffix(&s, collection, hashLength)
			if _, dup := seen[s]; dup {
				sim.Colliding++
				break
			}
			seen[s] = struct{}{}
		}
	}
	return sim, nil
}

func randomToken(rng *rand.Rand) string {
	const alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 12)
	for i := range b {
		b[i] = alnum[rng.IntN(len(alnum))]
	}
	return string(b)
}

// WriteRiskTable writes the probability of a duplicate unique ID among n
// timestamped ingests of one granule ID, for each hash length: the
// documentation's formula and the exact birthday bounds.
func WriteRiskTable(w io.Writer, lengths []int, n float64) error {
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "Probability of a duplicate unique ID among %s timestamped ingests of one granule ID:\n", strconv.FormatFloat(n, 'f', -1, 64))
	fmt.Fprintf(bw, "%-11s  %-22s  %-22s  %s\n", "hash_length", "doc: 1-exp(-n^2/2d)", "exact, d = 64^L", "exact, d = 63^L")
	for _, l := range lengths {
		r := CollisionRisk(l, n)
		fmt.Fprintf(bw, "%-11d  %-22s  %-22s  %s\n", l, Percent(r.Doc), Percent(r.Birthday64), Percent(r.Birthday63))
	}
	return bw.Flush()
}

// WriteText writes the simulation's measured rate beside the exact
// probabilities and the documentation's.
func (s Simulation) WriteText(w io.Writer) error {
	bw := bufio.NewWriter(w)
	r := CollisionRisk(s.HashLength, float64(s.Ingests))
	lo, hi := s.CI95()
	fmt.Fprintf(bw, "hash length %d, %d %s of one ID per trial, %d %s with real timestamped IDs\n", s.HashLength,
		s.Ingests, plural(s.Ingests, "ingest", "ingests"), s.Trials, plural(s.Trials, "trial", "trials"))
	fmt.Fprintf(bw, "measured       %s  (%d colliding trials; 95%% CI %s .. %s)\n", Percent(s.Rate()), s.Colliding, Percent(lo), Percent(hi))
	fmt.Fprintf(bw, "exact, 63^L    %s\n", Percent(r.Birthday63))
	fmt.Fprintf(bw, "exact, 64^L    %s\n", Percent(r.Birthday64))
	fmt.Fprintf(bw, "doc formula    %s\n", Percent(r.Doc))
	return bw.Flush()
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// Percent formats a probability as a plain-decimal percentage with ten
// significant digits, as the Cumulus documentation prints its table.
func Percent(p float64) string {
	v := p * 100
	if v == 0 {
		return "0%"
	}
	e := strconv.FormatFloat(v, 'e', 9, 64) // d.ddddddddde±XX
	mant, exp, _ := strings.Cut(e, "e")
	x, _ := strconv.Atoi(exp)
	digits := strings.Replace(mant, ".", "", 1)
	var s string
	switch {
	case x < 0:
		s = "0." + strings.Repeat("0", -x-1) + digits
	case x+1 >= len(digits):
		s = digits + strings.Repeat("0", x+1-len(digits))
	default:
		s = digits[:x+1] + "." + digits[x+1:]
	}
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s + "%"
}
