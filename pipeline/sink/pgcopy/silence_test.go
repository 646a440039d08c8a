package pgcopy

import (
	"context"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/backfill-dev/backfill/internal/faultproxy"
	"github.com/backfill-dev/backfill/internal/pgtest"
)

// A probe sent when a wait passes the bound travels the same slow network
// as the answer it is about. When the answer comes while the probe is
// under way, the probe finds the session idle (between the statement
// answered and the next one, still on its way), or gets no answer in
// time itself: either verdict is of a wait that is over, and must not cut
// the try. Here every byte takes latency each way, and one statement keeps
// the server busy until after the probe is sent; its answer arrives while
// the probe is under way.
func TestSilence_AnswerDuringProbe(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name           string
		latency, bound time.Duration
		sleep          string // the statement's time at the server
	}{
		// A probe crosses the network six times (start-up, the query
		// prepared, then run, each there and back): 1.8 s, and it gets
		// 1 s. Sent at 1 s, it times out at 2 s; the answer arrives at
		// 0.6 + 1.0 = 1.6 s.
		{"probe times out", 300 * time.Millisecond, time.Second, "1.0"},
		// Sent at 4 to 4.5 s (the watch looks every bound/8), the probe
		// meets the session at its fifth crossing, 6.5 to 7 s: idle
		// from 0.5 + 5.75 = 6.25 s, when it answered, until the next
		// statement comes at 7.25 s; the answer arrives at 6.75 s.
		{"probe finds it idle", 500 * time.Millisecond, 4 * time.Second, "5.75"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			answerDuringProbe(t, c.latency, c.bound, c.sleep)
		})
	}
}

func answerDuringProbe(t *testing.T, latency, bound time.Duration, sleep string) {
	admin := pgtest.AdminURL(t)
	dsn := pgtest.CreateDatabase(t, admin)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := faultproxy.Start(t, u.Host)
	u.Host = proxy.Addr()
	ctx := context.Background()
	s, err := Open(ctx, Options{DSN: u.String(), CreateSchema: true, Silence: bound, Retries: 0, Connections: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var (
		mu       sync.Mutex
		setAside []string
		cut      []string
	)
	s.verdict = func(st session, aside bool, probe error) {
		v := st.describe()
		if probe != nil {
			v = "no answer: " + probe.Error()
		}
		mu.Lock()
		defer mu.Unlock()
		if aside {
			setAside = append(setAside, v)
		} else {
			cut = append(cut, v)
		}
	}
	for _, stream := range []string{"upstream", "downstream"} {
		proxy.Add(t, faultproxy.Toxic{Name: "far " + stream, Type: "latency", Stream: stream, Attributes: map[string]any{"latency": latency.Milliseconds()}})
	}
	for try := 1; ; try++ {
		err := s.retry(ctx, "a slow statement", func(ctx context.Context, c *pgx.Conn) error {
			tx, err := c.Begin(ctx)
			if err != nil {
				return err
			}
			defer rollback(ctx, tx)
			if _, err := tx.Exec(ctx, `SELECT pg_sleep(`+sleep+`)`); err != nil {
				return err
			}
			for range 3 {
				if _, err := tx.Exec(ctx, `SELECT 1`); err != nil {
					return err
				}
			}
			return tx.Commit(ctx)
		})
		mu.Lock()
		aside, verdicts := setAside, cut
		mu.Unlock()
		if err != nil {
			t.Fatalf("the try was cut (%v); verdicts that cut: %q", err, verdicts)
		}
		if len(aside) > 0 {
			t.Logf("try %d: probe verdicts set aside: %q", try, aside)
			return
		}
		// The probe met the session while it was still at work, or the
		// answer came after it: the race this test is about did not
		// happen. Try again, a few times.
		if try == 3 {
			t.Fatalf("in %d tries, no probe was under way when the answer came: the test proves nothing", try)
		}
	}
}
