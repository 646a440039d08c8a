package verify

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// memory is an output held in memory: its rows are every kept report's
// measurements, made with the scheme. It reads every row in one pass, as
// the PostgreSQL source does, unless perBucket.
type memory struct {
	scheme    ooid.Scheme
	buckets   map[string][]Report
	rows      map[string][]Row
	perBucket bool
}

var days = []string{"2017-06-01", "2017-06-02"}

func (m *memory) Buckets(context.Context) ([]string, error)           { return days, nil }
func (m *memory) Scheme(context.Context, string) (ooid.Scheme, error) { return m.scheme, nil }
func (m *memory) Reports(_ context.Context, b string) ([]Report, error) {
	return append([]Report(nil), m.buckets[b]...), nil
}
func (m *memory) PerBucket() bool { return m.perBucket }
func (m *memory) Rows(_ context.Context, first, end int, fn func(Row) error) error {
	if !m.perBucket {
		first, end = 0, len(days)
	}
	for _, b := range days[first:end] {
		for _, r := range m.rows[b] {
			if err := fn(r); err != nil {
				return err
			}
		}
	}
	return nil
}
func (m *memory) Where(b string) string { return "mem/" + b }
func (m *memory) RowAt(r Row) string {
	return fmt.Sprintf("mem: row %d of bucket %d (%s, ndx %d)", r.Pos, r.Bucket, r.Textname, r.Ndx)
}

// output makes an output of the reports whose verdicts are given.
func output(t *testing.T, scheme ooid.Scheme, reports map[string][]Report) *memory {
	t.Helper()
	m := &memory{scheme: scheme, buckets: reports, rows: map[string][]Row{}}
	for bi, b := range days {
		for ri, r := range reports[b] {
			if r.RejectedBy != "" {
				continue
			}
			id, err := scheme.Report(r.Textname)
			if err != nil {
				t.Fatal(err)
			}
			for ndx := range r.N {
				m.rows[b] = append(m.rows[b], Row{Bucket: bi, Report: ri, Ndx: int32(ndx), OOID: id.ID(ndx).Int64(), Pos: int64(len(m.rows[b]))})
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
	if _, err := Run(t.Context(), output(t, scheme, good()), Options{}); err != nil {
		t.Fatalf("the right verdicts: %v", err)
	}
	for name, damage := range map[string]func(map[string][]Report){
		"loser kept":   func(r map[string][]Report) { r["2017-06-01"][1].RejectedBy = "" },
		"wrong winner": func(r map[string][]Report) { r["2017-06-02"][0].RejectedBy = a.textname },
		"no collision": func(r map[string][]Report) { r["2017-06-01"][0].RejectedBy = b.textname },
	} {
		r := good()
		damage(r)
		_, err := Run(t.Context(), output(t, scheme, r), Options{})
		if f := (*Failure)(nil); !errors.As(err, &f) || !strings.Contains(f.At, ": report ") {
			t.Errorf("%s: %v, want a report's failure", name, err)
		}
	}
}

// An output with nothing committed proves nothing, and a scheme file for
// an output that is not keyed is refused: both fail.
func TestRun_NothingOrWrongScheme(t *testing.T) {
	empty := &memory{scheme: ooid.DefaultScheme}
	empty.buckets = map[string][]Report{}
	if _, err := Run(t.Context(), emptySource{empty}, Options{}); err == nil || !strings.Contains(err.Error(), "no committed bucket") {
		t.Errorf("empty output: %v", err)
	}
	table, err := ooid.NewKeyTable("test", 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	keyed := ooid.KeyedScheme(24, table)
	m := output(t, ooid.DefaultScheme, map[string][]Report{"2017-06-01": nil, "2017-06-02": nil})
	if _, err := Run(t.Context(), m, Options{Keyed: &keyed}); err == nil || !strings.Contains(err.Error(), "not keyed") {
		t.Errorf("a scheme file for an output that is not keyed: %v", err)
	}
}

// emptySource lists no bucket.
type emptySource struct{ *memory }

func (emptySource) Buckets(context.Context) ([]string, error) { return nil, nil }

// Each damage of the rows fails, naming the row or the report, whether the
// rows are read bucket by bucket or all in one pass: a row changed,
// dropped, doubled, moved onto another ndx, kept for a rejected report, or
// in a bucket that is not committed.
func TestRows_Damaged(t *testing.T) {
	name := func(b string, i int) string {
		return fmt.Sprintf("%s/20170601T00000%dZ-IT-AS1-web_connectivity-20170601T00000%dZ_AS1_%s-0.2.0-probe.json", b, i, i, strings.Repeat("x", 48))
	}
	good := func() map[string][]Report {
		return map[string][]Report{
			days[0]: {{Textname: name(days[0], 2), N: 3}, {Textname: name(days[0], 1), N: 4}},
			days[1]: {{Textname: name(days[1], 1), N: 5}},
		}
	}
	for _, perBucket := range []bool{true, false} {
		m := output(t, ooid.DefaultScheme, good())
		m.perBucket = perBucket
		res, err := Run(t.Context(), m, Options{})
		if err != nil || res.Measurements != 12 || len(res.Buckets) != 2 {
			t.Fatalf("perBucket %v: %+v, %v", perBucket, res, err)
		}
		// The digest is of the IDs the rows hold, recomputed here.
		var ids []int64
		for _, r := range m.rows[days[1]] {
			ids = append(ids, r.OOID)
		}
		slices.Sort(ids)
		var lines strings.Builder
		for _, id := range ids {
			fmt.Fprintf(&lines, "%016x\n", uint64(id))
		}
		if want := fmt.Sprintf("%x", sha256.Sum256([]byte(lines.String()))); res.Buckets[1].Digest != want {
			t.Errorf("perBucket %v: digest %s, want %s", perBucket, res.Buckets[1].Digest, want)
		}
		for _, tc := range []struct {
			name   string
			damage func(m *memory)
			want   string
		}{
			{"changed", func(m *memory) { m.rows[days[0]][4].OOID++ }, "row 4 of bucket 0 (" + name(days[0], 1) + ", ndx 1): the ID is "},
			{"dropped", func(m *memory) { m.rows[days[1]] = m.rows[days[1]][1:] }, "report " + name(days[1], 1) + ": 4 measurement rows, the report has 5"},
			{"doubled", func(m *memory) { m.rows[days[1]] = append(m.rows[days[1]], m.rows[days[1]][2]) }, "measurement 2 has two rows"},
			{"moved", func(m *memory) { m.rows[days[0]][0].Ndx, m.rows[days[0]][0].OOID = 1, m.rows[days[0]][1].OOID }, "measurement 1 has two rows"},
			{"rejected", func(m *memory) {
				m.buckets[days[0]][0].RejectedBy = name(days[0], 1)
			}, "rejected by"},
			{"no bucket", func(m *memory) { m.rows[days[1]][0].Bucket = -1 }, "its bucket is not one of the output's committed buckets"},
			{"no report", func(m *memory) { m.rows[days[1]][0].Report = 3 }, "no report of the bucket has this textname"},
		} {
			m := output(t, ooid.DefaultScheme, good())
			m.perBucket = perBucket
			tc.damage(m)
			_, err := Run(t.Context(), m, Options{})
			if f := (*Failure)(nil); !errors.As(err, &f) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("perBucket %v, %s: %v, want a failure with %q", perBucket, tc.name, err, tc.want)
			}
		}
	}
}

// An output is complete against its input when each bucket has the
// input's reports with their counts, and no other; every difference
// fails, naming the report or the bucket.
func TestInput_Complete(t *testing.T) {
	input := func(buckets ...inputBucket) *Input {
		in := &Input{Where: "in", buckets: make(chan inputBucket, len(buckets)), cancel: func() {}}
		for _, b := range buckets {
			in.buckets <- b
		}
		close(in.buckets)
		return in
	}
	a, b := Report{Textname: "2017-06-01/a", N: 3}, Report{Textname: "2017-06-01/b", N: 4}
	for _, tc := range []struct {
		name   string
		in     []inputBucket
		output []Report
		want   string
	}{
		{"same", []inputBucket{{"2017-06-01", []Report{a, b}}}, []Report{b, a}, ""},
		{"missing", []inputBucket{{"2017-06-01", []Report{a, b}}}, []Report{a}, "report 2017-06-01/b: the input has it, with 4 measurements; the output does not"},
		{"extra", []inputBucket{{"2017-06-01", []Report{b}}}, []Report{a, b}, "report 2017-06-01/a: the input in has no such report"},
		{"count", []inputBucket{{"2017-06-01", []Report{a, {Textname: b.Textname, N: 5}}}}, []Report{a, b}, "report 2017-06-01/b: 4 measurements; the input has 5"},
		{"bucket before", []inputBucket{{"2017-05-31", nil}, {"2017-06-01", []Report{a}}}, []Report{a}, "bucket 2017-05-31 of the input in is not among"},
		{"no bucket", nil, []Report{a}, "the input in has no bucket 2017-06-01"},
	} {
		err := input(tc.in...).complete("out", "2017-06-01", tc.output)
		if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
	in := input(inputBucket{"2017-06-02", nil})
	if err := in.end("out"); err == nil || !strings.Contains(err.Error(), "bucket 2017-06-02 of the input in is not among") {
		t.Errorf("a bucket left at the end: %v", err)
	}
}
