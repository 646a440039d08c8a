package granule

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/backfill-dev/backfill/internal/testutil"
)

// randomText returns a random valid UTF-8 string mixing ASCII (with '_'
// and '-'), Latin, Greek, CJK, Hangul, combining marks, emoji outside the
// BMP and the odd control character.
func randomText(rng *rand.Rand) string {
	ranges := [][2]rune{{0x20, 0x7e}, {0x5f, 0x5f}, {0xa0, 0x24f}, {0x300, 0x36f}, {0x370, 0x3ff},
		{0x400, 0x4ff}, {0x3040, 0x30ff}, {0x4e00, 0x9fff}, {0xac00, 0xd7a3}, {0x1f300, 0x1faff}, {0x1, 0x1f}, {0xe000, 0xf8ff}}
	n := rng.IntN(40)
	var b strings.Builder
	for range n {
		r := ranges[rng.IntN(len(ranges))]
		c := r[0] + rune(rng.IntN(int(r[1]-r[0]+1)))
		if c == '\t' || c == '\n' || c == '\r' {
			c = ' '
		}
		b.WriteRune(c)
	}
	return b.String()
}

type refCase struct {
	id, collection string
	hashLength     int
}

func referenceCases(n int) []refCase {
	rng := rand.New(rand.NewPCG(7, 11))
	cases := []refCase{{unicodeID, "testCollection", 8}, {"x", "", 8}, {"granule2", "otherType___002", 22}, {"", "", 1}}
	for len(cases) < n {
		cases = append(cases, refCase{randomText(rng), randomText(rng), MinHashLength + rng.IntN(MaxHashLength)})
	}
	return cases
}

// runReference feeds the cases to a reference implementation and returns
// its output lines, decoded.
func runReference(t *testing.T, cases []refCase, name string, args ...string) []string {
	t.Helper()
	var in bytes.Buffer
	for _, c := range cases {
		fmt.Fprintf(&in, "%x\t%x\t%d\n", c.id, c.collection, c.hashLength)
	}
	cmd := exec.Command(name, args...)
	cmd.Stdin = &in
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(cases) {
		t.Fatalf("%s: %d lines for %d cases", name, len(lines), len(cases))
	}
	for i, l := range lines {
		b, err := hex.DecodeString(l)
		if err != nil || !utf8.Valid(b) {
			t.Fatalf("%s line %d: %q", name, i+1, l)
		}
		lines[i] = string(b)
	}
	return lines
}

// needTool fails, not skips, when a reference runtime is missing: CI must
// install it.
func needTool(t *testing.T, name string) string {
	t.Helper()
	return testutil.NeedTool(t, name, "the reference comparison")
}

// TestReferenceImplementations compares the unique IDs byte for byte with
// independent implementations in Node.js, Python 3 and Java, on thousands
// of random Unicode IDs and collection IDs.
func TestReferenceImplementations(t *testing.T) {
	cases := referenceCases(3000)
	want := make([]string, len(cases))
	for i, c := range cases {
		got, err := UniqueGranuleID(c.id, c.collection, c.hashLength, false)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = got
	}
	ref, err := filepath.Abs("testdata/ref")
	if err != nil {
		t.Fatal(err)
	}
	classes := t.TempDir()
	javac := needTool(t, "javac")
	if out, err := exec.Command(javac, "-d", classes, filepath.Join(ref, "Unique.java")).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	impls := map[string][]string{
		"node":    {needTool(t, "node"), filepath.Join(ref, "unique.js")},
		"python3": {needTool(t, "python3"), filepath.Join(ref, "unique.py")},
		"java":    {needTool(t, "java"), "-cp", classes, "Unique"},
	}
	for name, argv := range impls {
		t.Run(name, func(t *testing.T) {
			got := runReference(t, cases, argv[0], argv[1:]...)
			bad := 0
			for i := range cases {
				if got[i] != want[i] {
					bad++
					if bad <= 5 {
						t.Errorf("case %d (%q, %q, %d): %s gives %q, backfill %q", i, cases[i].id, cases[i].collection, cases[i].hashLength, name, got[i], want[i])
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d cases differ", bad, len(cases))
			}
		})
	}
	_ = os.Remove(classes)
}

// FuzzUniqueGranuleID compares the function and the generator with the
// naive computation for arbitrary input.
func FuzzUniqueGranuleID(f *testing.F) {
	f.Add(unicodeID, "testCollection", 8)
	f.Add("x", "", 22)
	f.Add("a\xff", "b", 3)
	f.Fuzz(func(t *testing.T, id, collection string, hashLength int) {
		got, err := UniqueGranuleID(id, collection, hashLength, false)
		if hashLength < MinHashLength || hashLength > MaxHashLength || !utf8.ValidString(id) || !utf8.ValidString(collection) {
			if err == nil {
				t.Fatalf("UniqueGranuleID(%q, %q, %d) accepted", id, collection, hashLength)
			}
			return
		}
		if want := naive(id, collection, hashLength); err != nil || got != want {
			t.Fatalf("UniqueGranuleID(%q, %q, %d) = %q, %v; naive %q", id, collection, hashLength, got, err, want)
		}
		g, _ := NewGenerator(hashLength, false)
		if b, err := g.Append(nil, []byte(id), []byte(collection)); err != nil || string(b) != got {
			t.Fatalf("Generator = %q, %v", b, err)
		}
	})
}

// FuzzAddUniqueGranuleIDs: any payload gives an error or valid JSON, never
// a panic.
func FuzzAddUniqueGranuleIDs(f *testing.F) {
	f.Add([]byte(`{"pdrs":["x"],"granules":[{"granuleId":"g","collectionId":"c"},{"granuleId":"h","dataType":"d","version":1}]}`), []byte(`6`))
	f.Add([]byte(`{"granules":[{"granuleId":"g","producerGranuleId":"p"}]}`), []byte(`"abc"`))
	f.Fuzz(func(t *testing.T, payload, hashLength []byte) {
		out, err := AddUniqueGranuleIDs(payload, TaskConfig{HashLength: hashLength})
		if err == nil && !jsonValid(out) {
			t.Fatalf("invalid JSON output %q for %q", out, payload)
		}
	})
}
