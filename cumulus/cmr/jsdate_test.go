package cmr

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/testutil"
)

// dateCases are strings of the grammar parseJSDate reads, with fields in
// and out of range, and the forms it leaves to V8's legacy parser.
func dateCases(n int) (grammar, legacy []string) {
	rng := rand.New(rand.NewPCG(7, 8))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	num := func(width, max int) string { return fmt.Sprintf("%0*d", width, rng.IntN(max+1)) }
	grammar = []string{"2019-01-01T24:00:00Z", "2019-02-31T00:00:00Z", "2016-02-29", "2019-02-29", "1900-02-29T00:00:00Z",
		"2000-02-29T00:00:00Z", "+275760-09-13T00:00:00Z", "+275760-09-13T00:00:00.001Z", "-271821-04-20T00:00:00Z",
		"-271821-04-19T23:59:59Z", "-000000-01-01T00:00:00Z", "+000000-01-01T00:00:00Z", "0000-01-01", "-000001-12-31T23:59:59.999Z",
		"1969-12-31T23:59:59.999Z", "2019-01-01T00:00:00.", "2019-01-01T00:00:00.Z", "2019-01-01T00Z", "2019-01-01T00:00:00+01"}
	for range n {
		var b strings.Builder
		switch rng.IntN(6) {
		case 0:
			b.WriteString(pick("+", "-") + num(6, 300000))
		default:
			b.WriteString(num(4, 9999))
		}
		if rng.IntN(8) > 0 {
			b.WriteString("-" + pick(num(2, 13), "01", "02", "12"))
			if rng.IntN(8) > 0 {
				b.WriteString("-" + pick(num(2, 32), "28", "29", "30", "31"))
			}
		}
		if rng.IntN(8) > 0 {
			b.WriteString(pick("T", "T", "t", " ") + pick(num(2, 25), "24", "00") + ":" + pick(num(2, 60), "00"))
			if rng.IntN(4) > 0 {
				b.WriteString(":" + pick(num(2, 60), "00"))
				if rng.IntN(2) == 0 {
					b.WriteString("." + num(9, 999999999)[:1+rng.IntN(9)])
				}
			}
		}
		switch rng.IntN(5) {
		case 0:
			b.WriteString(pick("Z", "z"))
		case 1:
			b.WriteString(pick("+", "-") + num(2, 25) + pick(":", "") + num(2, 60))
		}
		grammar = append(grammar, b.String())
	}
	legacy = []string{"2019/01/01", "Tue, 01 Jan 2019 00:00:00 GMT", "2019-1-1", "99999-01-01", " 2019-01-01T00:00:00Z",
		"2019-01-01T00:00:00Z ", "2019-01-01T00:00:00 Z", "20190101T000000Z", "12345-01-01T00:00:00Z", "January 1, 2019",
		"2019-01-01T00:00:00,5Z", "1/2/2019", "", "garbage", "2019-01-01T00:00:00+01:00:00"}
	return grammar, legacy
}

// nodeDates runs new Date(s).toISOString() in Node, in UTC as Cumulus
// runs, for each string ("" for an Invalid Date).
func nodeDates(t *testing.T, in []string) []string {
	t.Helper()
	node := needTool(t, "node")
	js := `let d='';process.stdin.on('data',c=>d+=c).on('end',()=>{console.log(JSON.stringify(JSON.parse(d).map(s=>{try{return new Date(s).toISOString()}catch(e){return ''}})))})`
	cmd := exec.Command(node, "-e", js)
	cmd.Env = append(os.Environ(), "TZ=UTC")
	b, _ := json.Marshal(in)
	cmd.Stdin = strings.NewReader(string(b))
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var got []string
	if err := json.Unmarshal(out, &got); err != nil || len(got) != len(in) {
		t.Fatalf("node said %q (%v)", out, err)
	}
	return got
}

func needTool(t *testing.T, name string) string {
	t.Helper()
	return testutil.NeedTool(t, name, "the comparison with JavaScript")
}

func goDate(s string) string {
	ms, err := parseJSDate(s)
	if err != nil {
		return ""
	}
	return formatISO(ms)
}

// coreDates are the forms CMR files use: a full date, a time after "T",
// "t" or a space, a zone of Z or ±HH:mm, fields in and out of range.
func coreDates(n int) []string {
	rng := rand.New(rand.NewPCG(9, 10))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	num := func(width, max int) string { return fmt.Sprintf("%0*d", width, rng.IntN(max+1)) }
	var out []string
	for range n {
		s := fmt.Sprintf("%04d", 1000+rng.IntN(9000)) + "-" + pick(num(2, 13), "02", "12") + "-" + pick(num(2, 32), "29", "30", "31")
		if rng.IntN(6) > 0 {
			s += pick("T", "T", "t", " ") + pick(num(2, 25), "24", "00") + ":" + num(2, 60)
			if rng.IntN(4) > 0 {
				s += ":" + num(2, 60)
				if rng.IntN(2) == 0 {
					s += "." + num(9, 999999999)[:1+rng.IntN(9)]
				}
			}
			switch rng.IntN(3) {
			case 0:
				s += pick("Z", "z")
			case 1:
				s += pick("+", "-") + num(2, 23) + ":" + num(2, 59)
			}
		}
		out = append(out, s)
	}
	return out
}

// The forms CMR files use are read exactly as Node reads them, valid or
// not. Every other string of the wider grammar that is read here is read
// as Node reads it (some that Node reads with its legacy parser are
// errors here); the legacy-only forms are errors.
func TestParseJSDate_Node(t *testing.T) {
	core := coreDates(20000)
	want := nodeDates(t, core)
	valid := 0
	for i, s := range core {
		if got := goDate(s); got != want[i] {
			t.Errorf("%q: %q, Node %q", s, got, want[i])
		}
		if want[i] != "" {
			valid++
		}
	}
	if valid < len(core)/4 {
		t.Errorf("only %d of %d cases are valid dates: the cases miss the point", valid, len(core))
	}
	grammar, legacy := dateCases(20000)
	want = nodeDates(t, grammar)
	narrower := 0
	for i, s := range grammar {
		got := goDate(s)
		switch {
		case got == "" && want[i] != "":
			narrower++
		case got != want[i]:
			t.Errorf("%q: %q, Node %q", s, got, want[i])
		}
	}
	t.Logf("%d of %d strings of the wider grammar that Node reads are errors here", narrower, len(grammar))
	nodeLegacy := nodeDates(t, legacy)
	for i, s := range legacy {
		if _, err := parseJSDate(s); err == nil {
			t.Errorf("%q: read (Node: %q); the legacy forms are errors here", s, nodeLegacy[i])
		}
	}
}

// Numbers, booleans, null and "" as new Date and Cumulus's normalisation
// treat them.
func TestValue_Normalize(t *testing.T) {
	for _, tc := range []struct {
		v    Value
		want string // ISO, "null", "absent" or "error"
	}{
		{Value{}, "absent"},
		{Value{Kind: Null}, "null"},
		{str(""), "null"},
		{str(" "), "error"},
		{Value{Kind: Number, Num: 0}, "1970-01-01T00:00:00.000Z"},
		{Value{Kind: Number, Num: -1.9}, "1969-12-31T23:59:59.999Z"},
		{Value{Kind: Number, Num: 8.64e15 + 1}, "error"},
		{Value{Kind: Bool, Str: "true"}, "1970-01-01T00:00:00.001Z"},
		{Value{Kind: Object}, "error"},
		{Value{Kind: Array}, "error"},
		{Value{Kind: Array, Str: "2019-01-01", Joinable: true}, "2019-01-01T00:00:00.000Z"},
		{Value{Kind: Array, Str: "2019-01-01,2019-01-02", Joinable: true}, "error"},
	} {
		d, err := tc.v.Normalize()
		got := d.ISO
		switch {
		case err != nil:
			got = "error"
		case !d.Set:
			got = "absent"
		case d.Null:
			got = "null"
		}
		if got != tc.want {
			t.Errorf("%v: %s, want %s", tc.v, got, tc.want)
		}
	}
}
