package lines

import (
	"errors"
	"fmt"
	"io"
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
