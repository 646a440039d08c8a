package collisions

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"
)

type manifestLine struct {
	line     int64
	textname string
	n        uint32
}

func readAll(t testing.TB, in string) (good []manifestLine, bad []int64) {
	err := ReadManifest(strings.NewReader(in), func(line int64, name []byte, n uint32) error {
		good = append(good, manifestLine{line, string(name), n})
		return nil
	}, func(err error) {
		var me *ManifestError
		if !errors.As(err, &me) {
			t.Fatalf("bad line error %T %v", err, err)
		}
		bad = append(bad, me.Line)
	})
	if err != nil {
		t.Fatal(err)
	}
	return good, bad
}

func TestReadManifest(t *testing.T) {
	long := strings.Repeat("x", 100_000)
	in := "2018-06-20/a\t3\n" + // 1
		"2018-06-20/b\t0\r\n" + // 2: CRLF, zero measurements
		"\n" + // 3: empty
		"no tab here\n" + // 4
		"2018-06-20/c\t-1\n" + // 5
		"2018-06-20/d\t4294967296\n" + // 6: over 32 bits
		"\t5\n" + // 7: no textname
		long + "\t1\n" + // 8: overlong
		"2018-06-20/e\t4294967295" // 9: no final newline
	good, bad := readAll(t, in)
	want := []manifestLine{{1, "2018-06-20/a", 3}, {2, "2018-06-20/b", 0}, {9, "2018-06-20/e", 4294967295}}
	if len(good) != len(want) {
		t.Fatalf("good lines %v, want %v", good, want)
	}
	for i := range want {
		if good[i] != want[i] {
			t.Errorf("line %d: %v, want %v", i, good[i], want[i])
		}
	}
	if wantBad := []int64{4, 5, 6, 7, 8}; !slices.Equal(bad, wantBad) {
		t.Errorf("bad lines %v, want %v", bad, wantBad)
	}
	stop := errors.New("stop")
	err := ReadManifest(strings.NewReader(in), func(int64, []byte, uint32) error { return stop }, func(error) {})
	if !errors.Is(err, stop) {
		t.Errorf("fn's error: got %v", err)
	}
}

// Every line is accounted for: good or bad, never lost, never a panic.
func FuzzReadManifest(f *testing.F) {
	f.Add([]byte("2018-06-20/a\t3\nbad\n\t\t\n"))
	f.Add([]byte("x\t99999999999999999999\r\n\n\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		good, bad := readAll(t, string(in))
		lines := int64(bytes.Count(in, []byte{'\n'}))
		if len(in) > 0 && in[len(in)-1] != '\n' {
			lines++
		}
		empty := int64(0)
		for _, l := range bytes.Split(in, []byte{'\n'}) {
			if len(bytes.TrimSuffix(l, []byte{'\r'})) == 0 {
				empty++
			}
		}
		if len(in) > 0 && in[len(in)-1] == '\n' {
			empty-- // the split's empty tail is not a line
		}
		if got := int64(len(good)+len(bad)) + empty; len(in) > 0 && got != lines {
			t.Fatalf("%d lines, %d good, %d bad, %d empty", lines, len(good), len(bad), empty)
		}
		for _, g := range good {
			if strings.ContainsAny(g.textname, "\t\n") {
				t.Fatalf("textname %q", g.textname)
			}
		}
	})
}
