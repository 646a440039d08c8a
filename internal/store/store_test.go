package store_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/internal/s3test"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
)

// stores returns a local Store and an S3 Store, both empty, for the same
// tests.
func stores(t *testing.T) map[string]store.Store {
	t.Helper()
	s3test.Start(t, "test")
	remote, err := location.Open(context.Background(), "s3://test/some/prefix")
	if err != nil {
		t.Fatal(err)
	}
	return map[string]store.Store{"local": store.Local(t.TempDir()), "s3": remote}
}

func random(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestStore_WriteListRead(t *testing.T) {
	t.Setenv("BACKFILL_S3_CHUNK", strconv.Itoa(64<<10))
	for kind, s := range stores(t) {
		t.Run(kind, func(t *testing.T) {
			files := map[string][]byte{
				"a/2017-01-01/x.lz4": random(200<<10+17, 1), // several chunks
				"a/2017-01-01/y.lz4": nil,                   // empty
				"a/2017-01-02/z.lz4": random(5, 2),
				"a/top.json":         []byte("{}"),
				"b/big.parquet":      random(17<<20+3, 3), // a multipart upload on S3
			}
			for name, data := range files {
				if err := store.WriteFile(t.Context(), s, name, data); err != nil {
					t.Fatal(err)
				}
			}
			// Nothing is visible before Commit, and Abort leaves nothing.
			w, err := s.Create(t.Context(), "a/aborted.lz4")
			if err != nil {
				t.Fatal(err)
			}
			w.Write([]byte("half"))
			if _, err := s.Stat(t.Context(), "a/aborted.lz4"); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("an uncommitted file is visible: %v", err)
			}
			w.Abort()

			ents, err := s.ReadDir(t.Context(), "a")
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, e := range ents {
				names = append(names, e.Name()+map[bool]string{true: "/", false: ""}[e.IsDir()])
			}
			if got, want := names, []string{"2017-01-01/", "2017-01-02/", "top.json"}; !slices.Equal(got, want) {
				t.Fatalf("ReadDir(a) = %v, want %v", got, want)
			}
			if !store.IsDir(t.Context(), s, "a/2017-01-01") || store.IsDir(t.Context(), s, "a/top.json") || store.IsDir(t.Context(), s, "nothing") {
				t.Fatal("IsDir is wrong")
			}
			if _, err := s.ReadDir(t.Context(), "nothing"); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("ReadDir of no folder: %v, want ErrNotExist", err)
			}
			for name, want := range files {
				got, err := store.ReadFile(t.Context(), s, name)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, want) {
					t.Fatalf("%s: read %d bytes differing from the %d written", name, len(got), len(want))
				}
				st, err := s.Stat(t.Context(), name)
				if err != nil || st.Size() != int64(len(want)) {
					t.Fatalf("Stat(%s) = %v, %v", name, st, err)
				}
				if (kind == "s3") != (store.ETag(st) != "") {
					t.Fatalf("Stat(%s): ETag %q", name, store.ETag(st))
				}
			}
			// ReadAt, for Parquet footers.
			f, err := s.Open(t.Context(), "a/2017-01-01/x.lz4")
			if err != nil {
				t.Fatal(err)
			}
			p := make([]byte, 100)
			if n, err := f.(io.ReaderAt).ReadAt(p, 200<<10-50); n != 67 || err != io.EOF || !bytes.Equal(p[:n], files["a/2017-01-01/x.lz4"][200<<10-50:]) {
				t.Fatalf("ReadAt at the end = %d, %v", n, err)
			}
			f.Close()
			if err := s.RemoveAll(t.Context(), "a"); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Stat(t.Context(), "a/top.json"); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("after RemoveAll: %v", err)
			}
			if err := s.Remove(t.Context(), "b/big.parquet"); err != nil {
				t.Fatal(err)
			}
			if err := s.Remove(t.Context(), "b/big.parquet"); err != nil {
				t.Fatalf("removing a file that is not there: %v", err)
			}
		})
	}
}

// TestS3_FaultsAreRetried: 503s, dropped connections, stalled and slow
// bodies in the middle of a read give the same bytes.
func TestS3_FaultsAreRetried(t *testing.T) {
	t.Setenv("BACKFILL_S3_CHUNK", strconv.Itoa(64<<10))
	t.Setenv("BACKFILL_S3_STALL", "300ms")
	t.Setenv("BACKFILL_S3_MAX_BACKOFF", "50ms")
	srv := s3test.Start(t, "test")
	s, err := location.Open(context.Background(), "s3://test/p")
	if err != nil {
		t.Fatal(err)
	}
	data := random(1<<20+99, 4)
	if err := store.WriteFile(t.Context(), s, "f", data); err != nil {
		t.Fatal(err)
	}
	for _, f := range []s3test.Fault{
		{Kind: s3test.Status503, Times: 3},
		{Kind: s3test.Drop, Ranged: true, After: 1000, Times: 2},
		{Kind: s3test.Stall, Ranged: true, After: 30000},
		{Kind: s3test.Drip, Ranged: true, Times: 2},
		{Kind: s3test.Status503, Method: "GET", Ranged: true, Times: 2},
	} {
		srv.Inject(f)
		got, err := store.ReadFile(t.Context(), s, "f")
		if err != nil {
			t.Fatalf("fault %+v: %v", f, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatalf("fault %+v: the bytes differ", f)
		}
		if n := srv.Pending(); n != 0 {
			t.Fatalf("fault %+v: %d faults did not happen", f, n)
		}
	}
}

// TestS3_RetriesRunOut: a body that keeps breaking is an *Error, not bad
// data and not a hang.
func TestS3_RetriesRunOut(t *testing.T) {
	t.Setenv("BACKFILL_S3_MAX_BACKOFF", "50ms")
	srv := s3test.Start(t, "test")
	s, _ := location.Open(context.Background(), "s3://test")
	if err := store.WriteFile(t.Context(), s, "f", random(10000, 5)); err != nil {
		t.Fatal(err)
	}
	srv.Inject(s3test.Fault{Kind: s3test.Drop, Ranged: true, After: 10, Times: 1000})
	_, err := store.ReadFile(t.Context(), s, "f")
	if !store.Failed(err) {
		t.Fatalf("err = %v, want a store *Error", err)
	}
}

// TestS3_ChangedObject: an object replaced after it was listed is an error
// wrapping ErrChanged, never a mix of the two versions.
func TestS3_ChangedObject(t *testing.T) {
	t.Setenv("BACKFILL_S3_CHUNK", strconv.Itoa(64<<10))
	t.Setenv("BACKFILL_S3_READAHEAD", "0")
	s3test.Start(t, "test")
	s, _ := location.Open(context.Background(), "s3://test")
	if err := store.WriteFile(t.Context(), s, "d/f", random(300<<10, 6)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadDir(t.Context(), "d"); err != nil {
		t.Fatal(err)
	}
	f, err := s.Open(t.Context(), "d/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	if _, err := io.ReadFull(f, buf); err != nil {
		t.Fatal(err)
	}
	if err := store.WriteFile(t.Context(), s, "d/f", random(300<<10, 7)); err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(f)
	if !errors.Is(err, store.ErrChanged) || !store.Failed(err) {
		t.Fatalf("reading on after the object changed: %v, want ErrChanged", err)
	}
}

func TestLock(t *testing.T) {
	for kind, s := range stores(t) {
		t.Run(kind, func(t *testing.T) {
			l, err := s.Lock(t.Context(), ".lock")
			if err != nil {
				t.Fatal(err)
			}
			h, held := s.Holder(t.Context(), ".lock")
			if !held || h.PID != os.Getpid() {
				t.Fatalf("Holder = %+v, %v", h, held)
			}
			// On S3 the lock is an object; on disk an flock, which one
			// process holds once per open file.
			if kind == "s3" {
				_, err := s.Lock(t.Context(), ".lock")
				var le *store.LockedError
				if !errors.As(err, &le) || le.Holder.PID != os.Getpid() {
					t.Fatalf("second Lock: %v, want a LockedError naming this process", err)
				}
			}
			if err := l.Unlock(); err != nil {
				t.Fatal(err)
			}
			if _, held := s.Holder(t.Context(), ".lock"); held {
				t.Fatal("held after Unlock")
			}
			l2, err := s.Lock(t.Context(), ".lock")
			if err != nil {
				t.Fatalf("Lock after Unlock: %v", err)
			}
			l2.Unlock()
		})
	}
}

// TestLock_ForkedCopy: a local lock is free once Unlock returns, even while
// a copy of its open file lives on, as in a child forked by another
// goroutine that has not reached its exec yet.
func TestLock_ForkedCopy(t *testing.T) {
	s := store.Local(t.TempDir())
	l, err := s.Lock(t.Context(), "x.lock")
	if err != nil {
		t.Fatal(err)
	}
	fd, err := store.DupLockFile(l)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	if err := l.Unlock(); err != nil {
		t.Fatal(err)
	}
	l2, err := s.Lock(t.Context(), "x.lock")
	if err != nil {
		t.Fatalf("Lock after Unlock, a copy of the old lock's file still open: %v", err)
	}
	l2.Unlock()
}

// TestS3Lock_Stale: a lock object whose holder is a dead process of this
// host, or that was not renewed in time, is taken over; a live one is not.
func TestS3Lock_Stale(t *testing.T) {
	t.Setenv("BACKFILL_S3_LOCK_TTL", "2s")
	s3test.Start(t, "test")
	s, _ := location.Open(context.Background(), "s3://test/out")
	me := store.Self()
	host, pid := me.Host, strconv.Itoa(me.PID)
	for _, tc := range []struct {
		body  string
		taken bool
	}{
		{`{"pid": 2147483000, "host": "` + host + `", "renewed": "2099-01-01T00:00:00Z"}`, true}, // a dead PID here
		{`{"pid": 1, "host": "elsewhere", "renewed": "2001-01-01T00:00:00Z"}`, true},             // not renewed
		{`{"pid": 1, "host": "elsewhere", "renewed": "2099-01-01T00:00:00Z"}`, false},            // live elsewhere
		{`{"pid": 1, "host": "` + host + `", "renewed": "2099-01-01T00:00:00Z"}`, false},         // live here
		// This process's PID and host, another process: one that ran in
		// a PID namespace that is gone (a replaced pod).
		{`{"pid": ` + pid + `, "host": "` + host + `", "id": "0123456789abcdef", "renewed": "2099-01-01T00:00:00Z"}`, true},
		// This very process, but no Lock of it holds the name now: an
		// earlier holder here whose unlock did not reach the store.
		{`{"pid": ` + pid + `, "host": "` + host + `", "id": "` + me.ID + `", "renewed": "2099-01-01T00:00:00Z"}`, true},
	} {
		if err := store.WriteFile(t.Context(), s, ".lock", []byte(tc.body)); err != nil {
			t.Fatal(err)
		}
		l, err := s.Lock(t.Context(), ".lock")
		var le *store.LockedError
		switch {
		case tc.taken && err != nil:
			t.Fatalf("%s: not taken over: %v", tc.body, err)
		case !tc.taken && !errors.As(err, &le):
			t.Fatalf("%s: Lock = %v, want a LockedError", tc.body, err)
		case tc.taken:
			l.Unlock()
		}
	}
	// A second Lock of the same name while this process holds it.
	l, err := s.Lock(t.Context(), ".lock")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	var le *store.LockedError
	if _, err := s.Lock(t.Context(), ".lock"); !errors.As(err, &le) {
		t.Fatalf("second Lock in this process = %v, want a LockedError", err)
	}
}

// TestS3Lock_Lost: the lock object is renewed while held; overwritten by
// another run, Held says so at once.
func TestS3Lock_Lost(t *testing.T) {
	t.Setenv("BACKFILL_S3_LOCK_TTL", "300ms")
	s3test.Start(t, "test")
	s, _ := location.Open(context.Background(), "s3://test/out")
	l, err := s.Lock(t.Context(), ".lock")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock()
	// Wait for two renewals (the lock object's "renewed" time moves on
	// twice), then the lock must still be this run's.
	renewed := func() string {
		fresh, _ := location.Open(t.Context(), "s3://test/out") // a store of its own: no version of the object seen before
		b, err := store.ReadFile(t.Context(), fresh, ".lock")
		for errors.Is(err, store.ErrChanged) { // renewed between its stat and its read: read the new one
			fresh, _ = location.Open(t.Context(), "s3://test/out")
			b, err = store.ReadFile(t.Context(), fresh, ".lock")
		}
		if err != nil {
			t.Fatal(err)
		}
		var body struct {
			Renewed string `json:"renewed"`
		}
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatal(err)
		}
		return body.Renewed
	}
	seen := []string{renewed()}
	for deadline := time.Now().Add(5 * time.Second); len(seen) < 3; time.Sleep(10 * time.Millisecond) {
		if r := renewed(); r != seen[len(seen)-1] {
			seen = append(seen, r)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lock object was renewed %d times in 5 s, want 2 (ttl 300ms)", len(seen)-1)
		}
	}
	if err := l.Held(t.Context()); err != nil {
		t.Fatalf("Held while held: %v", err)
	}
	if err := store.WriteFile(t.Context(), s, ".lock", []byte(`{"pid": 1, "host": "elsewhere"}`)); err != nil {
		t.Fatal(err)
	}
	// Held finds out at once, without waiting for a renewal, and for good.
	for range 2 {
		if err := l.Held(t.Context()); !errors.Is(err, store.ErrLockLost) || !store.Failed(err) || !strings.Contains(err.Error(), "taken over by pid 1 on elsewhere") {
			t.Fatalf("Held after the lock was taken over = %v, want a store *Error wrapping ErrLockLost naming the new holder", err)
		}
	}
}

// TestS3_ListingPages: folders and files beyond one page of a listing
// (1,000 keys) are all listed.
func TestS3_ListingPages(t *testing.T) {
	srv := s3test.Start(t, "test")
	s, _ := location.Open(context.Background(), "s3://test/p")
	const n = 1003
	for i := range n {
		if err := store.WriteFile(t.Context(), s, fmt.Sprintf("flat/%04d", i), nil); err != nil {
			t.Fatal(err)
		}
		if err := store.WriteFile(t.Context(), s, fmt.Sprintf("nested/%04d/f", i), nil); err != nil {
			t.Fatal(err)
		}
	}
	for _, dir := range []string{"flat", "nested"} {
		gets := srv.Requests("GET")
		ents, err := s.ReadDir(t.Context(), dir)
		if err != nil {
			t.Fatal(err)
		}
		if pages := srv.Requests("GET") - gets; pages != 2 {
			t.Fatalf("ReadDir(%s) took %d listing requests, want 2 pages", dir, pages)
		}
		if len(ents) != n || ents[0].Name() != "0000" || ents[n-1].Name() != fmt.Sprintf("%04d", n-1) || ents[0].IsDir() != (dir == "nested") {
			t.Fatalf("ReadDir(%s): %d entries, want %d", dir, len(ents), n)
		}
	}
	if err := s.RemoveAll(t.Context(), "nested"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReadDir(t.Context(), "nested"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("after RemoveAll of %d keys: %v", n, err)
	}
}

// TestS3Lock_AnswerLost: a lock PUT that reached the store but whose
// answer was lost is made again by the SDK, and fails its condition on the
// object it just wrote; the lock is still this process's, at the first
// Lock and at a renewal, not lost or held by "another run".
func TestS3Lock_AnswerLost(t *testing.T) {
	srv := s3test.Start(t, "test")
	s, _ := location.Open(context.Background(), "s3://test/out")
	srv.Inject(s3test.Fault{Method: http.MethodPut, Kind: s3test.LoseAnswer})
	l, err := s.Lock(t.Context(), ".lock")
	if err != nil {
		t.Fatalf("Lock whose first answer was lost: %v", err)
	}
	defer l.Unlock()
	if srv.Pending() != 0 {
		t.Fatal("the fault was not met: nothing tested")
	}
	srv.Inject(s3test.Fault{Method: http.MethodPut, Kind: s3test.LoseAnswer})
	if err := l.Held(t.Context()); err != nil {
		t.Fatalf("Held whose renewal's answer was lost: %v", err)
	}
	if srv.Pending() != 0 {
		t.Fatal("the fault was not met: nothing tested")
	}
	if err := l.Held(t.Context()); err != nil {
		t.Fatalf("Held after: %v", err)
	}
}
