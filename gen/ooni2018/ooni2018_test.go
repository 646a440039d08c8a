package ooni2018

import (
	"bufio"
	"bytes"
	"cmp"
	"crypto/sha1"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// The full-scale manifest, read back and counted independently of the
// generator's own statistics, has the published figures.
func TestOONI2018Manifest(t *testing.T) {
	if testutil.RaceEnabled {
		t.Skip("single-goroutine and CPU-bound: 20 s plain, many minutes under the race detector; the plain test run covers it")
	}
	path := filepath.Join(t.TempDir(), "ooni2018.tsv")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	st, err := GenerateManifest(f, 1)
	if err != nil {
		t.Fatal(err)
	}
	f.Close()

	f, err = os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Sorted slices, not maps, for the 3.6 M names: the same counts at a
	// fraction of the cost.
	type tsN struct{ ts, n uint32 }
	byTS := make([]tsN, 0, Reports)
	names := make([]uint64, 0, Reports)     // a hash of each name, for duplicates
	basenames := make([]uint64, 0, Reports) // a hash of each basename: how many buckets hold each, for the re-uploads
	var reports, kinds [3]int64
	var msm int64
	var ns []uint32
	sc := bufio.NewScanner(f)
	line := 0
	for sc.Scan() {
		line++
		name, num, ok := bytes.Cut(sc.Bytes(), []byte{'\t'})
		n, err := strconv.ParseUint(string(num), 10, 32)
		if !ok || err != nil || n == 0 {
			t.Fatalf("line %d: %q", line, sc.Bytes())
		}
		tn, err := ooid.ParseTextnameBytes(name)
		if err != nil {
			t.Fatalf("line %d: %v", line, err)
		}
		if tn.Source != ooid.SourceFilename && tn.Source != ooid.SourceReportID {
			t.Fatalf("line %d: %s takes the fallback", line, name)
		}
		sum := sha1.Sum(name)
		names = append(names, binary.BigEndian.Uint64(sum[:]))
		byTS = append(byTS, tsN{tn.TS, uint32(n)})
		reports[0]++
		msm += int64(n)
		ns = append(ns, uint32(n))
		base := string(name[11:])
		rid := strings.Split(base, "-")[4]
		switch {
		case rid == "no_report_id":
			kinds[0]++
		case len(rid) == 64:
			kinds[1]++
		default:
			kinds[2]++
		}
		if stamp, _, _ := strings.Cut(rid, "_"); tn.Source == ooid.SourceReportID && base[:16] != stamp {
			reports[1]++ // the report_id time differs from the filename's
		}
		bsum := sha1.Sum([]byte(base))
		basenames = append(basenames, binary.BigEndian.Uint64(bsum[:]))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(names)
	for i := 1; i < len(names); i++ {
		if names[i] == names[i-1] {
			t.Fatalf("a name listed twice")
		}
	}
	var shared, sharedRep, sharedMsm, maxK int64
	slices.SortFunc(byTS, func(a, b tsN) int { return cmp.Compare(a.ts, b.ts) })
	minTS, maxTS := byTS[0].ts, byTS[len(byTS)-1].ts
	for i := 0; i < len(byTS); {
		j, m := i, int64(0)
		for ; j < len(byTS) && byTS[j].ts == byTS[i].ts; j++ {
			m += int64(byTS[j].n)
		}
		if k := int64(j - i); k > 1 {
			shared++
			sharedRep += k
			sharedMsm += m
			maxK = max(maxK, k)
		}
		i = j
	}
	retried := int64(0)
	slices.Sort(basenames)
	for i := 0; i < len(basenames); {
		j := i
		for j < len(basenames) && basenames[j] == basenames[i] {
			j++
		}
		if c := j - i; c == 2 {
			retried++
		} else if c > 2 {
			t.Errorf("a basename in %d buckets", c)
		}
		i = j
	}
	slices.Sort(ns)
	slices.Reverse(ns)
	check := func(what string, got, want int64) {
		t.Helper()
		if got != want {
			t.Errorf("%s: %d, want %d", what, got, want)
		}
	}
	check("reports", reports[0], Reports)
	check("measurements", msm, Measurements)
	check("shared timestamps", shared, SharedTS)
	check("reports on shared timestamps", sharedRep, SharedRep)
	check("measurements on shared timestamps", sharedMsm, SharedMsm)
	check("most reports on one timestamp", maxK, 20)
	check("first timestamp", int64(minTS), MinTS)
	check("last timestamp", int64(maxTS), MaxTS)
	if !slices.Equal(ns[:5], Largest) {
		t.Errorf("largest reports %v, want %v", ns[:5], Largest)
	}
	for i, k := range kinds {
		if k < Reports/10 {
			t.Errorf("report_id form %d: only %d reports", i, k)
		}
	}
	if reports[1] < 1000 {
		t.Errorf("only %d timestamped report_ids with a time other than the filename's", reports[1])
	}
	if retried < 1000 {
		t.Errorf("only %d re-uploaded reports", retried)
	}
	// The generator's own statistics agree.
	if st.Reports != reports[0] || st.SharedTS != shared || st.SharedMeasurements != sharedMsm || st.Retried != retried ||
		st.NoReportID != kinds[0] || st.ID64 != kinds[1] || st.IDTS != kinds[2] || st.TSDiffers != reports[1] {
		t.Errorf("the generator says\n%s\nthe manifest has %d reports, %d shared, %d re-uploaded, forms %v, %d differing", st, reports[0], shared, retried, kinds, reports[1])
	}
}
