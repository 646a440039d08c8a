package collector

import (
	"context"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hangBound bounds what must not wait forever in these tests; not a speed.
const hangBound = time.Minute

func serve(t *testing.T, opt ServeOptions) string {
	t.Helper()
	c := &fakeClock{t: time.Now()}
	s := open(t, filepath.Join(t.TempDir(), "state"), c, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- s.Serve(ctx, "127.0.0.1:0", opt, func(a net.Addr) { addr <- a.String() })
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
		s.Close()
	})
	select {
	case a := <-addr:
		return a
	case err := <-done:
		t.Fatalf("Serve: %v", err)
	}
	return ""
}

func get(t *testing.T, url, token string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		if !strings.Contains(token, " ") {
			token = "Bearer " + token
		}
		req.Header.Set("Authorization", token)
	}
	resp, err := (&http.Client{Timeout: hangBound}).Do(req)
	if err != nil {
		return -1
	}
	resp.Body.Close()
	return resp.StatusCode
}

// With a token, a request without it, or with another, gets 401 and no ID;
// the scheme's name is case-insensitive.
func TestServe_Token(t *testing.T) {
	url := "http://" + serve(t, ServeOptions{Timeout: 10 * time.Second, Token: "s3cret"}) + "/ids?n=3"
	for _, tc := range []struct {
		token string
		want  int
	}{{"", 401}, {"wrong", 401}, {"s3cret", 200}, {"bearer s3cret", 200}, {"BEARER s3cret", 200}, {"Basic s3cret", 401}, {"Bearer s3cretX", 401}} {
		if got := get(t, url, tc.token); got != tc.want {
			t.Errorf("token %q: status %d, want %d", tc.token, got, tc.want)
		}
	}
}

// Past MaxClients connections, one more is closed at once; a slot freed
// serves again.
func TestServe_MaxClients(t *testing.T) {
	addr := serve(t, ServeOptions{Timeout: 10 * time.Second, MaxClients: 2})
	var held []net.Conn
	for range 2 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	extra, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer extra.Close()
	extra.SetReadDeadline(time.Now().Add(hangBound))
	if _, err := extra.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("a third connection past a cap of 2: read %v, want it closed (EOF)", err)
	}
	held[0].Close()
	deadline := time.Now().Add(hangBound)
	for get(t, "http://"+addr+"/ids", "") != 200 {
		if time.Now().After(deadline) {
			t.Fatal("a freed slot never served")
		}
		time.Sleep(10 * time.Millisecond)
	}
	held[1].Close()
}
