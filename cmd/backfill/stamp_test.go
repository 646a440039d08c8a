package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/testutil"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// The filter adds an "ooid" to every JSON object line, in order, and
// rejects the others with their line numbers; --count prints N IDs; a
// second run starts after the first's IDs.
func TestStamp_FilterAndCount(t *testing.T) {
	t.Parallel()
	state := filepath.Join(t.TempDir(), "42.state")
	in := "{\"a\":1}\n{ }\nnot json\n[1]\n{\"ooid\":\"x\"}\n{\"b\":{\"ooid\":1}}\n"
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"stamp", "--collector-id", "42", "--state", state}, cli.Stdio{In: strings.NewReader(in), Out: &out, Err: &errb})
	if code := exitCode(err, &errb); code != cli.ExitRejects {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	for _, want := range []string{"line 3: not a JSON object", "line 4: not a JSON object", `line 5: it has an "ooid" already`} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errb.String())
		}
	}
	var last ooid.ID
	var got []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("output line %q: %v", line, err)
		}
		id, err := ooid.Parse(m["ooid"].(string))
		if err != nil || id.Decode().CollectorID != 42 || id <= last {
			t.Fatalf("output line %q: ID %s after %s (%v)", line, id, last, err)
		}
		last = id
		delete(m, "ooid")
		b, _ := json.Marshal(m)
		got = append(got, string(b))
	}
	if strings.Join(got, " ") != `{"a":1} {} {"b":{"ooid":1}}` {
		t.Errorf("the objects out, without their ooid: %v", got)
	}
	var countOut, countErr bytes.Buffer
	code := exitCode(run(context.Background(), []string{"stamp", "--collector-id", "42", "--state", state, "--count", "1000"},
		cli.Stdio{In: strings.NewReader(""), Out: &countOut, Err: &countErr}), &countErr)
	ids := strings.Fields(countOut.String())
	if code != cli.ExitOK || len(ids) != 1000 {
		t.Fatalf("--count 1000: exit %d, %d lines\n%s", code, len(ids), countErr.String())
	}
	if first, _ := ooid.Parse(ids[0]); first.TS() <= last.TS() {
		t.Errorf("the second run starts in second %d, the first ended in %d: not after its mark", first.TS(), last.TS())
	}
}

// --rejects keeps every rejected line as read, the too-long ones too, and
// appends on a second run; the good lines all get IDs.
func TestStamp_Rejects(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	state, dead := filepath.Join(dir, "7.state"), filepath.Join(dir, "rejects.jsonl")
	long := `{"x":"` + strings.Repeat("y", 200) + `"}`
	in := "{\"a\":1}\r\n" + long + "\nnot json\r\n{\"b\":2}\n{\"ooid\":\"1\"}\n" + long
	args := []string{"stamp", "--collector-id", "7", "--state", state, "--rejects", dead, "--max-line", "100"}
	for round := 1; round <= 2; round++ {
		var out, errb bytes.Buffer
		err := run(context.Background(), args, cli.Stdio{In: strings.NewReader(in), Out: &out, Err: &errb})
		if code := exitCode(err, &errb); code != cli.ExitRejects {
			t.Fatalf("exit %d\n%s", code, errb.String())
		}
		for _, want := range []string{"line 2: longer than 100 bytes", "line 3: not a JSON object", `line 5: it has an "ooid" already`, "line 6: longer than 100 bytes"} {
			if !strings.Contains(errb.String(), want) {
				t.Errorf("stderr lacks %q:\n%s", want, errb.String())
			}
		}
		if n := strings.Count(out.String(), `"ooid":"`); n != 2 {
			t.Errorf("%d lines with IDs, want 2:\n%s", n, out.String())
		}
		got, err := os.ReadFile(dead)
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Repeat(long+"\nnot json\n{\"ooid\":\"1\"}\n"+long+"\n", round)
		if string(got) != want {
			t.Errorf("round %d: rejects file\n%q\nwant\n%q", round, got, want)
		}
	}
	if code, _ := call("stamp", "--collector-id", "7", "--state", state, "--count", "1", "--rejects", dead); code != cli.ExitUsage {
		t.Errorf("--rejects with --count: exit %d, want a usage error", code)
	}
}

// stampBinary is the package's binary (buildBinary); -short skips the
// tests that need it.
func stampBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	return buildBinary(t)
}

// uniqueIDs reads the complete ID lines of texts (16 hex digits; a
// SIGKILL may cut the last one) and fails on any ID seen twice; it returns
// how many there are.
func uniqueIDs(t *testing.T, texts ...string) int {
	t.Helper()
	seen := map[uint64]struct{}{}
	for _, text := range texts {
		for line := range strings.Lines(text) {
			line = strings.TrimSuffix(line, "\n")
			if len(line) != 16 || strings.ToLower(line) != line {
				continue
			}
			id, err := strconv.ParseUint(line, 16, 64)
			if err != nil {
				continue
			}
			if _, ok := seen[id]; ok {
				t.Fatalf("ID %s issued twice", line)
			}
			seen[id] = struct{}{}
		}
	}
	return len(seen)
}

// firstWrite keeps what a child writes and closes first at its first
// write. (Not an embedded bytes.Buffer: io.Copy would use its ReadFrom
// and never call Write.)
type firstWrite struct {
	buf   bytes.Buffer
	first chan struct{}
	once  sync.Once
}

func (w *firstWrite) Write(p []byte) (int, error) {
	w.once.Do(func() { close(w.first) })
	return w.buf.Write(p)
}

func (w *firstWrite) String() string { return w.buf.String() }

var idLine = regexp.MustCompile(`(?m)^[0-9a-f]{16}$`)

// A binary issuing IDs to a file is SIGKILLed at 100 random moments, the
// clock set back by 90 s, an hour or six hours, or forward by 3 s, between
// some restarts: every ID ever written is unique, and no run is refused
// its state file. Each kill skips the rest of a lease, so the mark runs
// ahead of the clock: a short lease and a long lead bound keep most runs
// issuing. (A run whose clock is more than --max-lead behind the mark
// waits, and is killed before it issues anything.)
func TestStamp_KillRestart(t *testing.T) {
	t.Parallel()
	bin := stampBinary(t)
	dir := t.TempDir()
	state := filepath.Join(dir, "42.state")
	rng := rand.New(rand.NewPCG(1, 2))
	var outs []string
	issued := 0
	for i := range 100 {
		offset := []string{"0s", "-1h", "0s", "-6h", "0s", "-90s", "0s", "3s"}[i%8]
		cmd := exec.Command(bin, "stamp", "--collector-id", "42", "--state", state, "--count", "1000000000",
			"--lease", "2", "--max-lead", "3600", "--max-wait", "24h", "--clock-offset", offset)
		var errb bytes.Buffer
		out := &firstWrite{first: make(chan struct{})}
		cmd.Stdout, cmd.Stderr = out, &errb
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The kill comes a random while after the first ID (or after 0.5 s
		// of none, for a run that waits for its clock): how long a start
		// takes on a loaded machine does not decide which runs issue.
		select {
		case <-out.first:
		case <-time.After(500 * time.Millisecond):
		}
		time.Sleep(time.Duration(rng.IntN(20)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		err := cmd.Wait()
		if testutil.ExitCode(err) != -int(syscall.SIGKILL) {
			t.Fatalf("run %d: %v, want killed\n%s", i, err, errb.String())
		}
		outs = append(outs, out.String())
		if idLine.MatchString(out.String()) {
			issued++
		}
	}
	n := uniqueIDs(t, outs...)
	if issued < 10 {
		t.Errorf("only %d of 100 runs issued IDs: the runs did not get going", issued)
	}
	t.Logf("%d unique IDs from %d of 100 killed runs", n, issued)
}

// The HTTP mode: four concurrent clients fetch blocks while the server is
// SIGKILLed at 100 random moments and restarted, the clock moved between
// some restarts; every ID handed out is unique. A second server
// on the same state file is refused. The Python client of docs/collector.md
// works against it. SIGTERM stops it gracefully.
func TestStamp_HTTP(t *testing.T) {
	t.Parallel()
	bin := stampBinary(t)
	state := filepath.Join(t.TempDir(), "42.state")
	// start starts a server; rest waits for its stderr to end (the server
	// exited) and returns what it said after its first line. Wait closes
	// the pipe: it comes after rest.
	start := func(offset string) (cmd *exec.Cmd, url string, rest func() string) {
		t.Helper()
		cmd = exec.Command(bin, "stamp", "--collector-id", "42", "--state", state, "--listen", "127.0.0.1:0",
			"--lease", "2", "--max-lead", "3600", "--max-wait", "24h", "--clock-offset", offset)
		stderr, err := cmd.StderrPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stderr)
		if !sc.Scan() {
			cmd.Process.Kill()
			t.Fatalf("the server said nothing")
		}
		url, ok := strings.CutPrefix(sc.Text(), "backfill: stamp: serving IDs on ")
		if !ok {
			t.Fatalf("the server said %q", sc.Text())
		}
		var said bytes.Buffer
		done := make(chan struct{})
		go func() {
			defer close(done)
			for sc.Scan() {
				said.WriteString(sc.Text() + "\n")
			}
		}()
		return cmd, strings.TrimSuffix(url, "/ids"), func() string { <-done; return said.String() }
	}
	var mu sync.Mutex
	var got []string
	rng := rand.New(rand.NewPCG(5, 6))
	for round := range 100 {
		cmd, url, rest := start([]string{"0s", "-1h", "0s", "-90s", "0s", "3s"}[round%6])
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				for range 20 {
					resp, err := http.Get(url + "/ids?n=1000")
					if err != nil {
						return // killed meanwhile
					}
					var body struct{ IDs []string }
					err = json.NewDecoder(resp.Body).Decode(&body)
					resp.Body.Close()
					if err != nil {
						return
					}
					mu.Lock()
					got = append(got, strings.Join(body.IDs, "\n"))
					mu.Unlock()
				}
			})
		}
		if round == 0 {
			// A second server on the same state file is refused.
			out, err := exec.Command(bin, "stamp", "--collector-id", "42", "--state", state, "--listen", "127.0.0.1:0").CombinedOutput()
			if err == nil || !strings.Contains(string(out), "one process per state file") {
				t.Errorf("a second server: %v\n%s", err, out)
			}
		}
		time.Sleep(time.Duration(10+rng.IntN(60)) * time.Millisecond)
		cmd.Process.Signal(syscall.SIGKILL)
		rest()
		cmd.Wait()
		wg.Wait()
	}
	n := uniqueIDs(t, got...)
	if n < 10000 {
		t.Errorf("only %d IDs handed out over 100 rounds", n)
	}
	t.Logf("%d unique IDs handed out over 100 killed servers", n)
	// The documented Python client, then a graceful stop.
	cmd, url, rest := start("0s")
	doc, err := os.ReadFile("../../docs/collector.md")
	if err != nil {
		t.Fatal(err)
	}
	src := regexp.MustCompile("(?s)```python\n(.*?)```").FindSubmatch(doc)
	if src == nil {
		t.Fatal("no Python client in docs/collector.md")
	}
	py := string(src[1]) + fmt.Sprintf("\nids = OOIDs(%q, block=7)\nfor _ in range(20):\n    print(ids.next())\n", url)
	out, err := exec.Command("python3", "-c", py).CombinedOutput()
	if err != nil {
		t.Fatalf("the Python client: %v\n%s", err, out)
	}
	if k := uniqueIDs(t, append(got, string(out))...); k != n+20 {
		t.Errorf("the Python client's 20 IDs are not 20 new ones (%d → %d)", n, k)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	said := rest()
	if err := cmd.Wait(); err != nil {
		t.Errorf("SIGTERM: %v\n%s", err, said)
	}
	if !strings.Contains(said, "stopped") {
		t.Errorf("no graceful stop:\n%s", said)
	}
}

// A slow or silent client cannot hold the HTTP server: one that sends half
// a request and stops, or opens a connection and says nothing, is cut off
// within --http-timeout, while another client is served meanwhile.
func TestStamp_HTTPSlowClients(t *testing.T) {
	url := serveStamp(t, "42", "500ms")
	addr := strings.TrimSuffix(strings.TrimPrefix(url, "http://"), "/ids")
	for _, sent := range []string{"", "GET /ids?n=1 HTTP/1.1\r\nHost: x\r\n"} {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte(sent)); err != nil {
			t.Fatal(err)
		}
		// Served meanwhile.
		resp, err := http.Get(url + "?n=3")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("a client beside the slow one: %v %v", resp, err)
		}
		resp.Body.Close()
		start := time.Now()
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err = io.ReadAll(c) // returns when the server closes the connection
		c.Close()
		t.Logf("sent %q: cut off after %v", sent, time.Since(start).Round(time.Millisecond))
		// A hang bound, ten times the cut-off: the claim is that the
		// server cuts the client off at all, not how fast.
		if err != nil || time.Since(start) > 5*time.Second {
			t.Errorf("a client that sent %q was held %v (%v); want it cut off after 500ms", sent, time.Since(start), err)
		}
	}
}

// serveStamp starts stamp --listen with the collector id and --http-timeout
// given, stopped (SIGTERM) when the test ends, and returns its /ids URL.
func serveStamp(t *testing.T, id, timeout string) string {
	t.Helper()
	cmd := exec.Command(stampBinary(t), "stamp", "--collector-id", id, "--state", filepath.Join(t.TempDir(), id+".state"),
		"--listen", "127.0.0.1:0", "--http-timeout", timeout)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		cmd.Wait()
	})
	sc := bufio.NewScanner(stderr)
	if !sc.Scan() {
		t.Fatal("the server said nothing")
	}
	url, ok := strings.CutPrefix(sc.Text(), "backfill: stamp: serving IDs on ")
	if !ok {
		t.Fatalf("the server said %q", sc.Text())
	}
	return url
}
