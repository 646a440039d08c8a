// Package ooni2018 writes a synthetic corpus of the shape of the real OONI
// archive up to bucket 2018-06-20, at full scale (3.6 M reports, 147 M
// measurements, the notebook's shared timestamps): its report manifest,
// and the autoclaved indexes of its buckets without their data, the input
// of run --from-index. The small corpora with their ground truth are
// gen/corpus's.
package ooni2018

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/backfill-dev/backfill/gen/corpus"
)

// The published statistics of the OONI corpus up to bucket 2018-06-20
// (ooni-uuid, the ooid-hash-prob notebook) that the ooni2018
// manifest reproduces.
const (
	Reports      = 3_600_000
	Measurements = 147_000_000
	SharedTS     = 316_084    // timestamps shared by two reports or more
	SharedRep    = 753_235    // reports on those timestamps
	SharedMsm    = 40_440_216 // their measurements
	MinTS        = 0x50bef44d // 2012-12-05 07:14:21
	MaxTS        = 0x5b29a005 // 2018-06-20 00:29:57
)

// Largest are the largest reports of ooni-uuid.
var Largest = []uint32{1_000_003, 65_007, 41_889, 40_875, 30_949}

// Group is the reports sharing one timestamp.
type Group struct{ Reports, Measurements int64 }

// NotebookGroups returns shared-timestamp groups that honour everything
// the ooid-hash-prob notebook publishes of its input (its per-group file is
// not published): 316,084 groups, 753,235 reports, 40,440,216
// measurements, at most 20 reports per group, and its first five rows.
// Group sizes fall off geometrically; one group in 21 holds about 500
// measurements per report, the others about 31, with the corpus's mean per
// report. Then measurements move, one at a time, from 2-report groups to
// 20-report groups (totals unchanged) until Σ(K·M − K(K+1)/2) is 135.25 M:
// the pair load that the notebook's table implies (its −log2 P is about
// that over 2^bits·ln 2).
func NotebookGroups() []Group {
	counts := map[int64]int64{2: 285555 - 3, 3: 7533, 4: 5682 - 2, 5: 4290, 6: 3239, 7: 2445, 8: 1846, 9: 1394, 10: 1052,
		11: 795, 12: 600, 13: 453, 14: 342, 15: 258, 16: 195, 17: 147, 18: 111, 19: 84, 20: 63}
	const pairLoad = 135.25e6
	groups := []Group{{2, 1021}, {2, 1023}, {2, 999}, {4, 1002}, {4, 1002}}
	var ks []int64
	for k := int64(2); k <= 20; k++ {
		for range counts[k] {
			ks = append(ks, k)
		}
	}
	rest, smallK := int64(SharedMsm), int64(0)
	for _, g := range groups {
		rest -= g.Measurements
	}
	for i, k := range ks {
		if i%21 == 0 {
			rest -= k * 500
		} else {
			smallK += k
		}
	}
	perReport := float64(rest) / float64(smallK)
	acc, tot := 0.0, int64(0)
	for i, k := range ks {
		if i%21 == 0 {
			groups = append(groups, Group{k, k * 500})
			continue
		}
		acc += float64(k) * perReport
		m := int64(acc) - tot
		tot += m
		groups = append(groups, Group{k, m})
	}
	var sumM, sumKM, half int64
	for _, g := range groups {
		sumM += g.Measurements
	}
	groups[len(groups)-1].Measurements += SharedMsm - sumM
	for _, g := range groups {
		sumKM += g.Reports * g.Measurements
		half += g.Reports * (g.Reports + 1) / 2
	}
	delta := (int64(pairLoad) + half - sumKM) / 18
	var i2, i20 []int
	for i, g := range groups {
		switch g.Reports {
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
		groups[i2[j%int64(len(i2))]].Measurements -= step
		groups[i20[j%int64(len(i20))]].Measurements += step
	}
	return groups
}

// ManifestStats describes a generated manifest.
type ManifestStats struct {
	Reports, Measurements   int64
	Timestamps              int64 // distinct
	SharedTS, SharedReports int64
	SharedMeasurements      int64
	MaxPerTS                int64
	MinTS, MaxTS            uint32
	Largest                 []uint32 // the five largest reports, largest first
	NoReportID, ID64, IDTS  int64    // report_id kinds
	TSDiffers               int64    // report_id time differs from the filename's
	Retried                 int64    // reports uploaded again into a later bucket
}

type manifestReport struct {
	ts, n   uint32
	fileTS  uint32 // the filename's timestamp
	day     int32  // bucket: days since the epoch
	kind    uint8  // 0 no_report_id, 1 64 characters, 2 ts_AS_50
	seed    uint64 // of the textname's random parts
	retryOf int32  // index of the report this one re-uploads, or -1
	fixed   string // a real textname, when set
	last    bool   // the latest report: kept in the last bucket
}

// basenameSeeds is how many basenames (country, ASN, test) a seed picks
// from.
const basenameSeeds = 18 * 60000 * 18

var ooni2018Tests = []string{"web_connectivity", "http_requests", "dns_consistency", "http_invalid_request_line",
	"http_header_field_manipulation", "tcp_connect", "ndt", "dash", "vanilla_tor", "meek_fronted_requests_test",
	"captive_portal", "facebook_messenger", "whatsapp", "telegram", "bridge_reachability", "dns_n_http",
	"multi_protocol_traceroute", "openvpn_client_test"}

var ooni2018CCs = []string{"US", "IT", "DE", "RU", "IR", "BR", "IN", "GB", "FR", "CN", "MY", "MM", "IQ", "ZZ", "UA", "TR", "EG", "CA"}

// GenerateManifest writes a full-scale synthetic manifest
// (TEXTNAME<TAB>N lines, bucket by bucket) with the published statistics of
// the OONI corpus up to 2018-06-20: 3.6 M reports, 147 M measurements; the
// shared timestamps of [NotebookGroups]; timestamps between MinTS
// and MaxTS, both taken by the real reports that have them; the
// five largest reports; the real mix of report_id forms (no_report_id, 64
// characters, and a timestamped id whose time may differ from the
// filename's); and reports uploaded twice, into two buckets (the same
// basename, so the same timestamp). The same seed writes the same bytes.
func GenerateManifest(w io.Writer, seed uint64) (ManifestStats, error) {
	rng := rand.New(rand.NewPCG(seed, 0x00112018))
	if len(ooni2018CCs)*60000*len(ooni2018Tests) != basenameSeeds {
		panic("corpus: basenameSeeds is stale")
	}
	groups := NotebookGroups()
	singles := int64(Reports - SharedRep)
	distinct := singles + int64(len(groups))
	// Distinct timestamps: one per slot of the range, jittered inside it.
	// The two ends and the largest report's time are real reports'; the
	// other slots go, shuffled, to the groups and then to the singles.
	span := float64(MaxTS-MinTS) / float64(distinct)
	tss := make([]uint32, distinct)
	for i := range tss {
		tss[i] = MinTS + uint32(float64(i)*span) + uint32(rng.Float64()*(span-1))
	}
	largestTS := uint32(time.Date(2014, 11, 22, 4, 9, 40, 0, time.UTC).Unix())
	bigSlot := int(float64(largestTS-MinTS) / span)
	tss[0], tss[len(tss)-1], tss[bigSlot] = MinTS, MaxTS, largestTS
	var slots []int
	for i := 1; i < len(tss)-1; i++ {
		if i != bigSlot {
			slots = append(slots, i)
		}
	}
	rng.Shuffle(len(slots), func(i, j int) { slots[i], slots[j] = slots[j], slots[i] })
	nextTS := func() uint32 { ts := tss[slots[0]]; slots = slots[1:]; return ts }

	reps := make([]manifestReport, 0, Reports)
	add := func(ts, n uint32, seed uint64) *manifestReport {
		reps = append(reps, manifestReport{ts: ts, n: n, retryOf: -1, seed: seed})
		return &reps[len(reps)-1]
	}
	// Shared timestamps: split each group's measurements over its
	// reports; one 2-report group in 12 with an even total is a report
	// and its re-upload. The members' seeds differ in the parts that
	// pick the country, ASN and test, so no two share a basename.
	var weights []float64
	var used []uint64
	for gi, g := range groups {
		ts := nextTS()
		if g.Reports == 2 && g.Measurements%2 == 0 && gi%12 == 0 {
			add(ts, uint32(g.Measurements/2), rng.Uint64())
			add(ts, uint32(g.Measurements/2), 0).retryOf = int32(len(reps) - 2)
			continue
		}
		weights, used = weights[:0], used[:0]
		for range g.Reports {
			weights = append(weights, rng.ExpFloat64())
		}
		for _, n := range apportion(g.Measurements-g.Reports, weights) {
			seed := rng.Uint64()
			for slices.Contains(used, seed%basenameSeeds) {
				seed = rng.Uint64()
			}
			used = append(used, seed%basenameSeeds)
			add(ts, uint32(n+1), seed)
		}
	}
	// Single reports: the real first and largest ones, the last one, the
	// other four largest, then the rest with a heavy-tailed size (Pareto,
	// shape 1.1, capped at 3000 times its minimum: at most about 10,000
	// measurements, below the fifth largest).
	add(MinTS, 1, 0).fixed = "2012-12-05/20121205T071421Z-MM-AS18399-http_invalid_request_line-no_report_id-0.1.0-probe.yaml"
	add(largestTS, Largest[0], 0).fixed = "2014-11-22/20141122T040940Z-US-AS1968-tcp_connect-no_report_id-0.1.0-probe.yaml"
	add(MaxTS, 1, rng.Uint64()).last = true
	left := int64(Measurements - SharedMsm - 2)
	for _, n := range Largest {
		left -= int64(n)
	}
	for _, n := range Largest[1:] {
		add(nextTS(), n, rng.Uint64())
	}
	rest := len(slots)
	weights = weights[:0]
	for range rest {
		weights = append(weights, min(math.Pow(1-rng.Float64(), -1/1.1), 3000))
	}
	for _, n := range apportion(left-int64(rest), weights) {
		add(nextTS(), uint32(n+1), rng.Uint64())
	}
	st, err := writeManifest(w, reps, rng)
	return st, err
}

// apportion splits total into integer shares proportional to weights,
// exactly.
func apportion(total int64, weights []float64) []int64 {
	sum := 0.0
	for _, w := range weights {
		sum += w
	}
	out := make([]int64, len(weights))
	acc, given := 0.0, int64(0)
	for i, w := range weights {
		acc += w / sum * float64(total)
		n := int64(math.Round(acc)) - given
		if i == len(weights)-1 {
			n = total - given
		}
		out[i] = n
		given += n
	}
	return out
}

func writeManifest(w io.Writer, reps []manifestReport, rng *rand.Rand) (ManifestStats, error) {
	var st ManifestStats
	july2016 := uint32(time.Date(2016, 7, 1, 0, 0, 0, 0, time.UTC).Unix())
	for i := range reps {
		r := &reps[i]
		if r.fixed != "" {
			continue
		}
		switch u := rng.Float64(); {
		case r.ts < july2016 && u < 0.5, r.ts >= july2016 && u < 0.05:
			r.kind = 0
		case r.ts < july2016 || u < 0.15:
			r.kind = 1
		default:
			r.kind = 2
		}
		r.fileTS = r.ts
		if r.kind == 2 { // the collector stamps the id a few seconds after the probe's name; sometimes much earlier
			r.fileTS = r.ts - uint32(rng.IntN(6))
			if rng.IntN(200) == 0 {
				r.fileTS = r.ts - uint32(rng.IntN(3*86400))
			}
		}
		r.day = int32(r.fileTS / 86400)
		if rng.IntN(10) == 0 && !r.last {
			r.day++ // uploaded the next day
		}
	}
	for i := range reps {
		r := &reps[i]
		if r.retryOf >= 0 {
			o := reps[r.retryOf]
			r.kind, r.fileTS, r.seed, r.day = o.kind, o.fileTS, o.seed, o.day+1+int32(rng.IntN(3))
		}
		if r.fixed != "" {
			r.fileTS = r.ts
			r.day = int32(r.ts / 86400)
		}
	}
	slices.SortFunc(reps, func(a, b manifestReport) int {
		if a.day != b.day {
			return int(a.day - b.day)
		}
		if a.fileTS != b.fileTS {
			return int(int64(a.fileTS) - int64(b.fileTS))
		}
		return cmp.Compare(a.seed, b.seed)
	})
	bw := bufio.NewWriterSize(w, 1<<20)
	var line []byte
	perTS := map[uint32]int32{}
	for i := range reps {
		r := &reps[i]
		line = appendTextname(line[:0], r)
		line = append(line, '\t')
		line = strconv.AppendUint(line, uint64(r.n), 10)
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return st, err
		}
		st.Reports++
		st.Measurements += int64(r.n)
		perTS[r.ts]++
		switch {
		case r.kind == 0: // the real, fixed textnames too
			st.NoReportID++
		case r.kind == 1:
			st.ID64++
		default:
			st.IDTS++
		}
		if r.fileTS != r.ts {
			st.TSDiffers++
		}
		if r.retryOf >= 0 {
			st.Retried++
		}
		st.Largest = append(st.Largest, r.n)
		if len(st.Largest) > 5 {
			slices.SortFunc(st.Largest, func(a, b uint32) int { return int(int64(b) - int64(a)) })
			st.Largest = st.Largest[:5]
		}
	}
	st.MinTS, st.MaxTS = math.MaxUint32, 0
	for ts, k := range perTS {
		st.Timestamps++
		st.MinTS, st.MaxTS = min(st.MinTS, ts), max(st.MaxTS, ts)
		if k > 1 {
			st.SharedTS++
			st.SharedReports += int64(k)
			st.MaxPerTS = max(st.MaxPerTS, int64(k))
		}
	}
	for i := range reps {
		if perTS[reps[i].ts] > 1 {
			st.SharedMeasurements += int64(reps[i].n)
		}
	}
	slices.SortFunc(st.Largest, func(a, b uint32) int { return int(int64(b) - int64(a)) })
	return st, bw.Flush()
}

func stamp(dst []byte, ts uint32) []byte {
	return time.Unix(int64(ts), 0).UTC().AppendFormat(dst, "20060102T150405Z")
}

func appendTextname(dst []byte, r *manifestReport) []byte {
	if r.fixed != "" {
		return append(dst, r.fixed...)
	}
	s := r.seed
	pick := func(n int) int { v := int(s % uint64(n)); s /= uint64(n); return v }
	dst = time.Unix(int64(r.day)*86400, 0).UTC().AppendFormat(dst, "2006-01-02")
	dst = append(dst, '/')
	dst = stamp(dst, r.fileTS)
	asn := 1 + pick(60000)
	dst = append(dst, '-')
	dst = append(dst, ooni2018CCs[pick(len(ooni2018CCs))]...)
	dst = append(dst, "-AS"...)
	dst = strconv.AppendInt(dst, int64(asn), 10)
	dst = append(dst, '-')
	dst = append(dst, ooni2018Tests[pick(len(ooni2018Tests))]...)
	dst = append(dst, '-')
	rid := rand.New(rand.NewPCG(r.seed, 7))
	switch r.kind {
	case 0:
		dst = append(dst, "no_report_id"...)
	case 1:
		for range 64 {
			dst = append(dst, corpus.Alnum[rid.IntN(len(corpus.Alnum))])
		}
	default:
		dst = stamp(dst, r.ts)
		dst = append(dst, "_AS"...)
		dst = strconv.AppendInt(dst, int64(asn), 10)
		dst = append(dst, '_')
		for range 50 {
			dst = append(dst, corpus.Alnum[rid.IntN(len(corpus.Alnum))])
		}
	}
	if r.kind == 2 || pick(2) == 0 {
		return append(dst, "-0.2.0-probe.json"...)
	}
	return append(dst, "-0.1.0-probe.yaml"...)
}

// String formats the statistics as `gen` prints them.
func (s ManifestStats) String() string {
	return fmt.Sprintf(`reports                 %d
measurements            %d
distinct timestamps     %d
shared timestamps       %d (by %d reports holding %d measurements; at most %d per timestamp)
timestamps              %#08x .. %#08x
largest reports         %v
report_id forms         no_report_id %d, 64 characters %d, timestamped %d (%d with a time other than the filename's)
re-uploaded reports     %d (the same basename in a later bucket)
`, s.Reports, s.Measurements, s.Timestamps, s.SharedTS, s.SharedReports, s.SharedMeasurements, s.MaxPerTS,
		s.MinTS, s.MaxTS, s.Largest, s.NoReportID, s.ID64, s.IDTS, s.TSDiffers, s.Retried)
}
