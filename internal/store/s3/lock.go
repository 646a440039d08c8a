package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/backfill-dev/backfill/internal/store"
)

// lockBody is the content of an S3 lock object.
type lockBody struct {
	store.Holder
	Started time.Time `json:"started"`
	Renewed time.Time `json:"renewed"`
}

// Lock implements Store with a lock object: created by a conditional PUT
// (If-None-Match: *), so that of two runs exactly one creates it; renewed
// by its holder every third of the lock's time to live, and before each
// commit (Held), by a conditional PUT on its own ETag; deleted by Unlock.
// A lock object is stale, and is taken over (a conditional PUT on the
// stale ETag), when it was not renewed within its time to live, or when
// its holder was a process of this host that is not this one and is gone:
// its PID is not running, or it is this process's own PID (the holder ran
// in a PID namespace that is gone: a restarted container, or a replaced
// pod, which keeps its host name and is PID 1 again). A holder that was
// only frozen finds out at its next Held and commits nothing more.
func (s *Store) Lock(ctx context.Context, name string) (store.Lock, error) {
	k := s.key(name)
	me := store.Self()
	now := time.Now().UTC()
	body := lockBody{Holder: me, Started: now, Renewed: now}
	etag, err := s.putLock(ctx, k, body, &awss3.PutObjectInput{IfNoneMatch: aws.String("*")})
	if isPrecondition(err) {
		held, heldTag, rerr := s.readLock(ctx, k)
		switch {
		case errors.Is(rerr, errLockGone):
			etag, err = s.putLock(ctx, k, body, &awss3.PutObjectInput{IfNoneMatch: aws.String("*")})
		case rerr != nil:
			return nil, s.fail("lock", name, rerr)
		case held.same(body):
			// This very PUT, made again by the SDK after its answer was
			// lost on the way: the object is ours.
			etag, err = heldTag, nil
		case s.stale(k, held, me):
			etag, err = s.putLock(ctx, k, body, &awss3.PutObjectInput{IfMatch: aws.String(heldTag)})
		default:
			return nil, &store.LockedError{Where: s.Where(name), Holder: held.Holder}
		}
		if isPrecondition(err) {
			held, _, _ := s.readLock(ctx, k)
			return nil, &store.LockedError{Where: s.Where(name), Holder: held.Holder}
		}
	}
	if err != nil {
		return nil, s.fail("lock", name, err)
	}
	l := &s3Lock{s: s, ctx: context.WithoutCancel(ctx), key: k, body: body, etag: etag, stop: make(chan struct{}), stopped: make(chan struct{})}
	heldHere.Store(s.bucket+"/"+k, l)
	go l.renew()
	return l, nil
}

// heldHere are the locks this process holds now, by bucket/key: a lock
// object that names this process but is not among them was left by an
// earlier holder in it whose unlock failed (the network), and is stale.
var heldHere sync.Map

// same tells whether b is the body of the lock object put as o: the same
// process's same Lock call (its renewals change only Renewed).
func (b lockBody) same(o lockBody) bool {
	return b.ID == o.ID && b.PID == o.PID && b.Host == o.Host && b.Started.Equal(o.Started)
}

var errLockGone = errors.New("the lock object went while it was read")

func (s *Store) putLock(ctx context.Context, k string, b lockBody, in *awss3.PutObjectInput) (string, error) {
	data, _ := json.Marshal(b)
	in.Bucket, in.Key, in.Body, in.ContentLength = &s.bucket, &k, bytes.NewReader(data), aws.Int64(int64(len(data)))
	out, err := s.c.PutObject(ctx, in)
	if err != nil {
		return "", err
	}
	return aws.ToString(out.ETag), nil
}

func (s *Store) readLock(ctx context.Context, k string) (lockBody, string, error) {
	var b lockBody
	out, err := s.c.GetObject(ctx, &awss3.GetObjectInput{Bucket: &s.bucket, Key: &k})
	if isNotFound(err) {
		return b, "", errLockGone
	}
	if err != nil {
		return b, "", err
	}
	defer out.Body.Close()
	data, err := io.ReadAll(io.LimitReader(out.Body, 64<<10))
	if err != nil {
		return b, "", err
	}
	if err := json.Unmarshal(data, &b); err != nil {
		return b, "", fmt.Errorf("the lock object %s is not one of backfill's: %w", k, err)
	}
	return b, aws.ToString(out.ETag), nil
}

func (s *Store) stale(k string, b lockBody, me store.Holder) bool {
	if b.Host == me.Host && b.ID != me.ID && b.PID > 0 && (b.PID == me.PID || !alive(b.PID)) {
		return true
	}
	if b.ID == me.ID {
		if _, ok := heldHere.Load(s.bucket + "/" + k); !ok {
			return true
		}
	}
	return time.Since(b.Renewed) > s.c.set.ttl
}

func alive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Holder implements Store.
func (s *Store) Holder(ctx context.Context, name string) (store.Holder, bool) {
	b, _, err := s.readLock(ctx, s.key(name))
	if err != nil {
		return store.Holder{}, false
	}
	if s.stale(s.key(name), b, store.Self()) {
		return store.Holder{}, false
	}
	return b.Holder, true
}

type s3Lock struct {
	s             *Store
	ctx           context.Context // of Lock, without its cancellation: renewals go on until Unlock
	key           string
	body          lockBody
	mu            sync.Mutex
	etag          string
	stop, stopped chan struct{}
	once          sync.Once
	lost          error // set when a renewal finds the object is not this process's any more
}

// Held implements Lock: it renews the lock object now.
func (l *s3Lock) Held(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.renewLocked(ctx)
}

func (l *s3Lock) renew() {
	defer close(l.stopped)
	t := time.NewTicker(l.s.c.set.ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			l.mu.Lock()
			_ = l.renewLocked(l.ctx) // a failed renewal marks the lock lost; the holder finds out at its next write
			l.mu.Unlock()
		}
	}
}

// renewLocked puts the lock object again on its own ETag. Once that fails
// because the object changed or went, the lock is lost for good: from then
// on two runs may think they hold it, so this one stops committing. Any
// other failure (the network) is returned, and the next renewal tries
// again.
func (l *s3Lock) renewLocked(ctx context.Context) error {
	if l.lost != nil {
		return l.lost
	}
	b := l.body
	b.Renewed = time.Now().UTC()
	etag, err := l.s.putLock(ctx, l.key, b, &awss3.PutObjectInput{IfMatch: aws.String(l.etag)})
	switch {
	case err == nil:
		l.etag = etag
		return nil
	case isPrecondition(err) || isNotFound(err):
		held, heldTag, rerr := l.s.readLock(ctx, l.key)
		if rerr == nil && held.same(l.body) {
			// Our own renewal landed, and the SDK made it again after its
			// answer was lost: the object is still ours.
			l.etag = heldTag
			return nil
		}
		by := "removed"
		if held.PID > 0 {
			by = fmt.Sprintf("taken over by pid %d on %s", held.PID, held.Host)
		}
		l.lost = &store.Error{Where: "s3://" + l.s.bucket + "/" + l.key, Op: "lock", Err: fmt.Errorf("%w: the lock object was %s while this run held it; this run commits nothing more", store.ErrLockLost, by)}
		return l.lost
	default:
		return &store.Error{Where: "s3://" + l.s.bucket + "/" + l.key, Op: "renew lock", Err: shorten(err)}
	}
}

// Unlock stops renewing the lock and deletes its object, if it is still
// this process's.
func (l *s3Lock) Unlock() error {
	var err error
	l.once.Do(func() {
		close(l.stop)
		<-l.stopped
		defer heldHere.Delete(l.s.bucket + "/" + l.key)
		l.mu.Lock()
		defer l.mu.Unlock()
		// Unlock runs when the run stops, interrupted too.
		ctx, cancel := context.WithTimeout(l.ctx, time.Minute)
		defer cancel()
		_, err = l.s.c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &l.s.bucket, Key: &l.key, IfMatch: aws.String(l.etag)})
		if isPrecondition(err) || isNotFound(err) {
			err = nil
		}
		if err != nil {
			err = &store.Error{Where: "s3://" + l.s.bucket + "/" + l.key, Op: "unlock", Err: shorten(err)}
		}
	})
	return err
}
