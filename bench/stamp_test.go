package bench

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// BenchmarkStampHTTP: "backfill stamp --listen" handing out blocks of
// 1,000 IDs to 1, 4 and 16 concurrent clients, beside a baseline server in
// this process that answers every request with a fixed body of the same
// size (the HTTP floor: no IDs made, no second process).
func BenchmarkStampHTTP(b *testing.B) {
	const block = 1000
	body := `{"ids":["` + strings.Repeat(`0123456789abcdef","`, block-1) + `0123456789abcdef"]}` + "\n"
	floor := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}))
	defer floor.Close()
	bin := binary(b)
	for _, clients := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("impl=floor/clients=%d", clients), func(b *testing.B) {
			fetch(b, floor.URL, clients, block)
		})
		b.Run(fmt.Sprintf("impl=backfill/clients=%d", clients), func(b *testing.B) {
			url, stop := stampServer(b, bin)
			defer stop()
			fetch(b, url, clients, block)
		})
	}
}

// fetch runs b.N requests of n IDs from clients concurrent clients and
// reports the IDs per second.
func fetch(b *testing.B, url string, clients, n int) {
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr}
	var left atomic.Int64
	left.Store(int64(b.N))
	var wg sync.WaitGroup
	var failed atomic.Value
	b.ResetTimer()
	start := time.Now()
	for range clients {
		wg.Go(func() {
			for left.Add(-1) >= 0 {
				resp, err := client.Get(fmt.Sprintf("%s/ids?n=%d", url, n))
				if err != nil {
					failed.Store(err)
					return
				}
				got, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				if err != nil || resp.StatusCode != http.StatusOK || strings.Count(string(got), `"`) != 2*n+2 {
					failed.Store(fmt.Errorf("status %s, %d bytes, %v", resp.Status, len(got), err))
					return
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)*float64(n)/elapsed.Seconds(), "IDs/s")
}

// stampServer starts "backfill stamp --listen" on a fresh state file and
// returns its URL and a function that stops it with SIGTERM.
func stampServer(b *testing.B, bin string) (string, func()) {
	b.Helper()
	cmd := exec.Command(bin, "stamp", "--collector-id", "42", "--state", filepath.Join(b.TempDir(), "42.state"), "--listen", "127.0.0.1:0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(stderr)
	if !sc.Scan() {
		cmd.Process.Kill()
		b.Fatal("the server said nothing")
	}
	url, ok := strings.CutPrefix(sc.Text(), "backfill: stamp: serving IDs on ")
	if !ok {
		cmd.Process.Kill()
		b.Fatalf("the server said %q", sc.Text())
	}
	go io.Copy(io.Discard, stderr)
	return strings.TrimSuffix(url, "/ids"), func() {
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			b.Errorf("the server, stopped: %v", err)
		}
	}
}
