package replay

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/cumulus/records"
)

// inFlight is a Writer that counts the messages in its calls at once.
type inFlight struct {
	mu       sync.Mutex
	now, max int
	seen     int
}

func (f *inFlight) WriteBatch(ctx context.Context, ins []records.Input) ([]records.BatchResult, error) {
	f.mu.Lock()
	f.now += len(ins)
	f.max = max(f.max, f.now)
	f.seen += len(ins)
	f.mu.Unlock()
	time.Sleep(2 * time.Millisecond) // a database's latency, so that batches overlap
	f.mu.Lock()
	f.now -= len(ins)
	f.mu.Unlock()
	return make([]records.BatchResult, len(ins)), nil
}

// Messages in flight are bounded by bytes, not by Batch × Concurrency
// messages: with room for two messages, no more than two are ever held by
// the writers at once, and every message is written.
func TestWrite_BytesInFlightBounded(t *testing.T) {
	pad := strings.Repeat("x", 4000)
	var in strings.Builder
	const n = 40
	for i := range n {
		fmt.Fprintf(&in, `{"cumulus_meta":{"execution_name":"e%d"},"pad":%q}`+"\n", i, pad)
	}
	w := &inFlight{}
	st, err := Write(context.Background(), []string{"-"}, strings.NewReader(in.String()), w, nil,
		Options{Batch: 10, Concurrency: 4, MaxInFlight: 9000})
	if err != nil {
		t.Fatal(err)
	}
	if st.Messages != n || w.seen != n {
		t.Errorf("%d messages read, %d written; want %d", st.Messages, w.seen, n)
	}
	if w.max > 2 {
		t.Errorf("%d messages in flight at once; the budget holds 2", w.max)
	}
}
