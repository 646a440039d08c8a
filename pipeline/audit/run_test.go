package audit

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// testReport is a manifest line that gets IDs.
type testReport struct {
	textname string
	n        uint32
}

// crowdedManifest is a manifest whose reports crowd onto a few
// timestamps, so that narrow counters collide, with a line that is not a
// manifest line and a textname that gets no IDs before the first report:
// both rejected, and neither may shift which report a pair names.
func crowdedManifest(rng *rand.Rand) ([]byte, []testReport) {
	var b bytes.Buffer
	b.WriteString("2017-06-01/20170601T000000Z-IT-AS1-web_connectivity-x-0.2.0-probe.json\n") // no count
	b.WriteString("not-a-textname\t5\n")
	var reps []testReport
	for i := range 300 {
		r := testReport{
			textname: fmt.Sprintf("2017-06-01/20170601T0%d0000Z-IT-AS%d-web_connectivity-%016x-0.2.0-probe.json", i%6, i, rng.Uint64()),
			n:        1 + rng.Uint32N(3000),
		}
		reps = append(reps, r)
		fmt.Fprintf(&b, "%s\t%d\n", r.textname, r.n)
	}
	return b.Bytes(), reps
}

// bruteForcePairs is every pair of reports whose IDs overlap under s,
// each by its textnames in order: the reports of one timestamp whose
// counter ranges meet modulo 2^bits.
func bruteForcePairs(t *testing.T, reps []testReport, s ooid.Scheme) map[NamedPair]bool {
	t.Helper()
	type rng struct {
		ts, base uint32
	}
	at := make([]rng, len(reps))
	for i, r := range reps {
		ids, err := s.Report(r.textname)
		if err != nil {
			t.Fatal(err)
		}
		tn, err := ooid.ParseTextname(r.textname)
		if err != nil {
			t.Fatal(err)
		}
		at[i] = rng{tn.TS, ids.CounterBase()}
	}
	mask := s.Mask()
	out := map[NamedPair]bool{}
	for i := range reps {
		for j := i + 1; j < len(reps); j++ {
			if at[i].ts != at[j].ts {
				continue
			}
			if (at[j].base-at[i].base)&mask < reps[i].n || (at[i].base-at[j].base)&mask < reps[j].n {
				a, b := reps[i].textname, reps[j].textname
				if b < a {
					a, b = b, a
				}
				out[NamedPair{a, b}] = true
			}
		}
	}
	return out
}

// An audit of a manifest file names its pairs by reading the file again;
// of the same manifest on standard input, by the textnames it kept. Both
// give the same report, and its pairs are those a brute force over every
// pair of reports finds, named by the right textnames.
func TestRun_NamesPairsAsTheyCollide(t *testing.T) {
	data, reps := crowdedManifest(rand.New(rand.NewPCG(5, 5)))
	path := filepath.Join(t.TempDir(), "m.tsv")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	scheme := ooid.Scheme{CounterBits: 20, SHA1Offset: ooid.DefaultSHA1Offset}
	run := func(in Inputs) (Report, []string) {
		var rejected []string
		src := &Source{OnReject: func(what string, err error) { rejected = append(rejected, what) }}
		a, err := New(Job{Schemes: []ooid.Scheme{scheme}, Pairs: 1000, Workers: 2, Src: src, In: in})
		if err != nil {
			t.Fatal(err)
		}
		if a.keepNames == (in.Names[0] == path) {
			t.Fatalf("input %s: keepNames %v", in.Names[0], a.keepNames)
		}
		rep, err := a.Run(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return rep, rejected
	}
	reread, rejReread := run(Inputs{Names: []string{path}})
	kept, rejKept := run(Inputs{Names: []string{"-"}, Stdin: bytes.NewReader(data),
		Open: func(context.Context, string) (store.Store, error) { t.Fatal("nothing to open"); return nil, nil }})

	if !reflect.DeepEqual(reread, kept) {
		t.Fatalf("read again:\n%+v\nkept:\n%+v", reread, kept)
	}
	if len(rejReread) != 2 || len(rejKept) != 2 || reread.Rejects != 2 {
		t.Errorf("rejected %q and %q (counted %d), want the two bad lines", rejReread, rejKept, reread.Rejects)
	}
	if !strings.HasSuffix(rejReread[1], "m.tsv:2") {
		t.Errorf("the bad textname is rejected as %q, want its file and line", rejReread[1])
	}
	want := bruteForcePairs(t, reps, scheme)
	res := reread.Results[0]
	if len(want) < 5 {
		t.Fatalf("the manifest gives %d colliding pairs at %d bits: too few to test naming", len(want), scheme.CounterBits)
	}
	if res.Pairs != int64(len(want)) || len(res.First) != len(want) {
		t.Fatalf("%d pairs, %d listed; brute force finds %d", res.Pairs, len(res.First), len(want))
	}
	for _, p := range res.First {
		if !want[p] {
			t.Errorf("pair %s / %s: not a colliding pair", p.A, p.B)
		}
	}
	if reread.Reports != int64(len(reps)) {
		t.Errorf("%d reports counted, want %d", reread.Reports, len(reps))
	}
}
