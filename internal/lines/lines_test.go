package lines

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"
)

func TestReader(t *testing.T) {
	long := strings.Repeat("x", 3*MaxLine+17)
	in := "a\r\n" + long + "\nb\n\n" + long + "\nc"
	lr := NewReader(strings.NewReader(in))
	type got struct {
		line string
		n    int
		long bool
	}
	var all []got
	for {
		line, n, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !errors.Is(err, ErrTooLong) {
			t.Fatal(err)
		}
		all = append(all, got{string(line), n, errors.Is(err, ErrTooLong)})
	}
	want := []got{{"a", 1, false}, {"", 2, true}, {"b", 3, false}, {"", 4, false}, {"", 5, true}, {"c", 6, false}}
	if fmt.Sprint(all) != fmt.Sprint(want) {
		t.Errorf("lines = %v, want %v", all, want)
	}
}

// Random lines around the bound, against strings.Split: every line within
// the bound comes back, every longer one is reported with its number and
// copied whole to the overflow writer, in order.
func TestReaderLimit(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for round := range 200 {
		max := 16 + rng.IntN(100)
		var in strings.Builder
		nlines := rng.IntN(30)
		for i := range nlines {
			in.WriteString(strings.Repeat(string(rune('a'+i%26)), rng.IntN(3*max)))
			if rng.IntN(4) == 0 {
				in.WriteString("\r")
			}
			if i < nlines-1 || rng.IntN(2) == 0 {
				in.WriteString("\n")
			}
		}
		var wantLines []string
		ref := strings.TrimSuffix(in.String(), "\n")
		if in.Len() > 0 {
			for _, l := range strings.Split(ref, "\n") {
				l = strings.TrimSuffix(l, "\r")
				if len(l) > max {
					wantLines = append(wantLines, "!")
				} else {
					wantLines = append(wantLines, l)
				}
			}
		}
		var over strings.Builder
		lr := NewReaderLimit(strings.NewReader(in.String()), max, &over)
		var got []string
		for {
			line, n, err := lr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if n != len(got)+1 {
				t.Fatalf("round %d: line number %d after %d lines", round, n, len(got))
			}
			var tl *TooLongError
			switch {
			case errors.As(err, &tl) && errors.Is(err, ErrTooLong) && tl.Max == max && line == nil:
				got = append(got, "!")
			case err != nil:
				t.Fatalf("round %d: %v", round, err)
			default:
				got = append(got, string(line))
			}
		}
		if fmt.Sprint(got) != fmt.Sprint(wantLines) {
			t.Fatalf("round %d (max %d): lines\n%q\nwant\n%q", round, max, got, wantLines)
		}
		// The overflow keeps each long line as read, "\r" and all, ended by "\n".
		var wantOverRaw strings.Builder
		for _, l := range strings.Split(ref, "\n") {
			if len(strings.TrimSuffix(l, "\r")) > max {
				wantOverRaw.WriteString(l + "\n")
			}
		}
		if over.String() != wantOverRaw.String() {
			t.Fatalf("round %d (max %d): overflow\n%q\nwant\n%q", round, max, over.String(), wantOverRaw.String())
		}
	}
}
