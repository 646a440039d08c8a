package verify

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// memory is an output held in memory: its rows are every kept report's
// measurements, made with the scheme.
type memory struct {
	scheme  ooid.Scheme
	buckets map[string][]Report
	rows    map[string][]Row
}

func (m *memory) Buckets(context.Context) ([]string, error) {
	return []string{"2017-06-01", "2017-06-02"}, nil
}
func (m *memory) Scheme(context.Context, string) (ooid.Scheme, error) { return m.scheme, nil }
func (m *memory) Reports(_ context.Context, b string) ([]Report, error) {
	return append([]Report(nil), m.buckets[b]...), nil
}
func (m *memory) Rows(_ context.Context, b string, fn func(int64, Row) error) error {
	for i, r := range m.rows[b] {
		if err := fn(int64(i), r); err != nil {
			return err
		}
	}
	return nil
}
func (m *memory) Where(b string) string { return "mem/" + b }

// output makes an output of reports "BUCKET/name<TAB>n" whose verdicts are
// given (loser -> winner).
func output(t *testing.T, scheme ooid.Scheme, reports map[string][]Report) *memory {
	t.Helper()
	m := &memory{scheme: scheme, buckets: reports, rows: map[string][]Row{}}
	for b, rs := range reports {
		for _, r := range rs {
			if r.RejectedBy != "" {
				continue
			}
			id, err := scheme.Report(r.Textname)
			if err != nil {
				t.Fatal(err)
			}
			for ndx := range r.N {
				m.rows[b] = append(m.rows[b], Row{OOID: id.ID(ndx).Int64(), Textname: r.Textname, Ndx: int32(ndx)})
			}
		}
	}
	return m
}

// Three reports of one second at 20 bits whose ranges overlap in a chain
// (a-b, b-c, not a-c), c in the next bucket: b loses to a, c to b (a
// report loses to the first-sorting one it collides with, rejected or
// not). Any other verdict fails, naming the report.
func TestVerdicts(t *testing.T) {
	scheme := ooid.Scheme{CounterBits: 20, SHA1Offset: ooid.DefaultSHA1Offset}
	// Textnames of one timestamp in two buckets, and their counter bases.
	ts := "20170601T000000Z"
	type name struct {
		textname string
		base     uint32
	}
	names := func(bucket string) []name {
		var out []name
		for i := range 200 {
			tn := bucket + "/" + ts + "-IT-AS1-web_connectivity-" + ts + "_AS1_" + strings.Repeat("x", 47) + string(rune('A'+i%26)) + string(rune('A'+i/26%26)) + "a-0.2.0-probe.json"
			id, err := scheme.Report(tn)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, name{tn, id.CounterBase()})
		}
		return out
	}
	first, next := names("2017-06-01"), names("2017-06-02")
	// a < b in the first bucket, c in the next: a-b and b-c overlap, a-c
	// do not, at n measurements each.
	const n = 1 << 15
	overlap := func(x, y name) bool {
		return collisions.Range{TS: 1, Base: x.base, N: n}.Overlaps(collisions.Range{TS: 1, Base: y.base, N: n}, 20)
	}
	var a, b, c name
search:
	for _, x := range first {
		for _, y := range first {
			if x.textname >= y.textname || !overlap(x, y) {
				continue
			}
			for _, z := range next {
				if overlap(y, z) && !overlap(x, z) {
					a, b, c = x, y, z
					break search
				}
			}
		}
	}
	if a.textname == "" {
		t.Fatal("no chain among the names")
	}
	good := func() map[string][]Report {
		return map[string][]Report{
			"2017-06-01": {{Textname: a.textname, N: n}, {Textname: b.textname, N: n, RejectedBy: a.textname}},
			"2017-06-02": {{Textname: c.textname, N: n, RejectedBy: b.textname}},
		}
	}
	if _, err := Run(t.Context(), output(t, scheme, good()), nil, nil); err != nil {
		t.Fatalf("the right verdicts: %v", err)
	}
	for name, damage := range map[string]func(map[string][]Report){
		"loser kept":   func(r map[string][]Report) { r["2017-06-01"][1].RejectedBy = "" },
		"wrong winner": func(r map[string][]Report) { r["2017-06-02"][0].RejectedBy = a.textname },
		"no collision": func(r map[string][]Report) { r["2017-06-01"][0].RejectedBy = b.textname },
	} {
		r := good()
		damage(r)
		_, err := Run(t.Context(), output(t, scheme, r), nil, nil)
		if f := (*Failure)(nil); !errors.As(err, &f) || f.Row != -1 {
			t.Errorf("%s: %v, want a report's failure", name, err)
		}
	}
}

// An output with nothing committed proves nothing, and a scheme file for
// an output that is not keyed is refused: both fail.
func TestRun_NothingOrWrongScheme(t *testing.T) {
	empty := &memory{scheme: ooid.DefaultScheme}
	empty.buckets = map[string][]Report{}
	if _, err := Run(t.Context(), emptySource{empty}, nil, nil); err == nil || !strings.Contains(err.Error(), "no committed bucket") {
		t.Errorf("empty output: %v", err)
	}
	table, err := ooid.NewKeyTable("test", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	keyed := ooid.KeyedScheme(24, table)
	m := output(t, ooid.DefaultScheme, map[string][]Report{"2017-06-01": nil, "2017-06-02": nil})
	if _, err := Run(t.Context(), m, &keyed, nil); err == nil || !strings.Contains(err.Error(), "not keyed") {
		t.Errorf("a scheme file for an output that is not keyed: %v", err)
	}
}

// emptySource lists no bucket.
type emptySource struct{ *memory }

func (emptySource) Buckets(context.Context) ([]string, error) { return nil, nil }
