package job

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

// The summary says binary units, and which bytes it counts.
func TestSummary_Units(t *testing.T) {
	var s bytes.Buffer
	if err := (Summary{BytesIn: 3 << 20, BytesOut: 30 << 20, Elapsed: time.Second}).WriteText(&s); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"read           3.0 MiB compressed, 30.0 MiB decompressed", "MiB/s decompressed"} {
		if !strings.Contains(s.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, s.String())
		}
	}
	if strings.Contains(s.String(), " MB") {
		t.Errorf("decimal megabytes in %q", s.String())
	}
}
