package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
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
// by its holder every third of the lock's time to live (a conditional PUT
// on its own ETag); deleted by Unlock. A lock object is stale, and is taken
// over (a conditional PUT on the stale ETag), when its holder is a process
// of this host that is gone, or when it was not renewed within its time to
// live.
func (s *Store) Lock(ctx context.Context, name string) (store.Lock, error) {
	k := s.key(name)
	host, _ := os.Hostname()
	now := time.Now().UTC()
	body := lockBody{Holder: store.Holder{PID: os.Getpid(), Host: host}, Started: now, Renewed: now}
	etag, err := s.putLock(ctx, k, body, &awss3.PutObjectInput{IfNoneMatch: aws.String("*")})
	if isPrecondition(err) {
		held, heldTag, rerr := s.readLock(ctx, k)
		switch {
		case errors.Is(rerr, errLockGone):
			etag, err = s.putLock(ctx, k, body, &awss3.PutObjectInput{IfNoneMatch: aws.String("*")})
		case rerr != nil:
			return nil, s.fail("lock", name, rerr)
		case s.stale(held, host):
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
	go l.renew()
	return l, nil
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

func (s *Store) stale(b lockBody, host string) bool {
	if b.Host == host && b.PID > 0 && !alive(b.PID) {
		return true
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
	host, _ := os.Hostname()
	if s.stale(b, host) {
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

// Lost implements Lock.
func (l *s3Lock) Lost() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lost
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
			b := l.body
			b.Renewed = time.Now().UTC()
			etag, err := l.s.putLock(l.ctx, l.key, b, &awss3.PutObjectInput{IfMatch: aws.String(l.etag)})
			switch {
			case err == nil:
				l.etag = etag
			case isPrecondition(err) || isNotFound(err):
				// Another run took it over (or it was deleted): from now
				// on two runs may think they hold it, so this one stops.
				if l.lost == nil {
					l.lost = &store.Error{Where: "s3://" + l.s.bucket + "/" + l.key, Op: "lock", Err: errors.New("the lock object was taken over or removed while this run held it")}
				}
			}
			l.mu.Unlock()
		}
	}
}

// Unlock stops renewing the lock and deletes its object, if it is still
// this process's.
func (l *s3Lock) Unlock() error {
	var err error
	l.once.Do(func() {
		close(l.stop)
		<-l.stopped
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
			err = &store.Error{Where: "s3://" + l.s.bucket + "/" + l.key, Op: "unlock", Err: err}
		}
	})
	return err
}
