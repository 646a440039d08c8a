// Package s3 is the store.Store of an s3:// prefix, and the only package
// that links the AWS SDK: listings, ranged reads that resume where a
// dropped or stalled body left off, writes made visible whole by a
// completed PUT, and the one lock a conditional PUT gives.
package s3

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/logging"

	"github.com/backfill-dev/backfill/internal/store"
)

// Tuning of the S3 store, from the environment (see docs/object-storage.md).
const (
	envChunk     = "BACKFILL_S3_CHUNK"       // bytes per ranged GET (default 8 MiB)
	envReadAhead = "BACKFILL_S3_READAHEAD"   // ranged GETs in flight ahead of the reader, per file (default 2)
	envStall     = "BACKFILL_S3_STALL"       // a body that sends nothing for this long is dropped and asked again (default 30s)
	envAnonymous = "BACKFILL_S3_ANONYMOUS"   // "1": never sign requests (public buckets)
	envLockTTL   = "BACKFILL_S3_LOCK_TTL"    // a lock object not renewed for this long is stale (default 2m)
	envBackoff   = "BACKFILL_S3_MAX_BACKOFF" // the longest wait between two tries (default 10s)
)

// partSize is the size of a multipart upload's parts; smaller files are
// one PUT.
const partSize = 16 << 20

// bodyAttempts bounds the tries of one ranged GET whose body fails after
// its response began (the client retries failed requests on its own).
const bodyAttempts = 6

type s3Settings struct {
	chunk, ahead        int
	stall, ttl, backoff time.Duration
}

func settings() s3Settings {
	s := s3Settings{chunk: 8 << 20, ahead: 2, stall: 30 * time.Second, ttl: 2 * time.Minute, backoff: 10 * time.Second}
	if n, err := strconv.Atoi(os.Getenv(envChunk)); err == nil && n >= 64<<10 {
		s.chunk = n
	}
	if n, err := strconv.Atoi(os.Getenv(envReadAhead)); err == nil && n >= 0 {
		s.ahead = n
	}
	if d, err := time.ParseDuration(os.Getenv(envStall)); err == nil && d > 0 {
		s.stall = d
	}
	if d, err := time.ParseDuration(os.Getenv(envLockTTL)); err == nil && d > 0 {
		s.ttl = d
	}
	if d, err := time.ParseDuration(os.Getenv(envBackoff)); err == nil && d > 0 {
		s.backoff = d
	}
	return s
}

type client struct {
	*awss3.Client
	set  s3Settings
	bufs sync.Pool
}

var (
	clientMu sync.Mutex
	clients  = map[string]*client{}
)

// sharedClient returns one client per configuration the environment names
// (tests point one process at several servers).
func sharedClient(ctx context.Context) (*client, error) {
	var k strings.Builder
	for _, e := range []string{"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "AWS_PROFILE", envChunk, envReadAhead, envStall, envAnonymous, envLockTTL, envBackoff} {
		k.WriteString(os.Getenv(e) + "\x00")
	}
	clientMu.Lock()
	defer clientMu.Unlock()
	if c, ok := clients[k.String()]; ok {
		return c, nil
	}
	c, err := newClient(ctx)
	if err != nil {
		return nil, err
	}
	clients[k.String()] = c
	return c, nil
}

// Open returns the Store of loc, s3://bucket/prefix, or s3:// for the root
// of every bucket. The client is configured the standard AWS way (see
// newClient); ctx bounds the reading of that configuration.
func Open(ctx context.Context, loc string) (*Store, error) {
	var bucket, prefix string
	if strings.TrimRight(loc, "/") != "s3:" {
		var err error
		if bucket, prefix, err = store.SplitS3(loc); err != nil {
			return nil, err
		}
	}
	c, err := sharedClient(ctx)
	if err != nil {
		return nil, err
	}
	return &Store{c: c, bucket: bucket, prefix: prefix, seen: new(sync.Map)}, nil
}

// Sub implements store.Store.
func (s *Store) Sub(name string) store.Store {
	if s.bucket == "" {
		bucket, rest, _ := strings.Cut(name, "/")
		return &Store{c: s.c, bucket: bucket, prefix: strings.Trim(path.Clean("/"+rest), "/"), seen: s.seen}
	}
	return &Store{c: s.c, bucket: s.bucket, prefix: s.key(name), seen: s.seen}
}

// Parent implements store.Store.
func (s *Store) Parent() (store.Store, string) {
	if s.prefix == "" {
		return &Store{c: s.c, seen: s.seen}, s.bucket
	}
	dir, base := path.Split(s.prefix)
	return &Store{c: s.c, bucket: s.bucket, prefix: strings.TrimSuffix(dir, "/"), seen: s.seen}, base
}

// MkdirAll implements store.Store: there is nothing to make.
func (s *Store) MkdirAll(context.Context, string) error { return nil }

// Client returns the S3 client the stores use, configured as newClient
// says (for measuring against plain requests).
func Client(ctx context.Context) (*awss3.Client, error) {
	c, err := sharedClient(ctx)
	if err != nil {
		return nil, err
	}
	return c.Client, nil
}

// newClient configures an S3 client the standard AWS way: credentials,
// region and profile from the environment and the shared config files
// (AWS_PROFILE, ~/.aws/config, ~/.aws/credentials, SSO, instance roles),
// AWS_ENDPOINT_URL or AWS_ENDPOINT_URL_S3 for an S3-compatible store (then
// with path-style addressing), AWS_MAX_ATTEMPTS for retries. Without
// credentials anywhere, or with BACKFILL_S3_ANONYMOUS=1, requests are not
// signed: public buckets such as OONI's can be read so.
func newClient(ctx context.Context) (*client, error) {
	cfg, err := config.LoadDefaultConfig(ctx, config.WithLogger(logging.Nop{}))
	if err != nil {
		return nil, fmt.Errorf("s3: AWS configuration: %w", err)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	anonymous := os.Getenv(envAnonymous) == "1"
	if !anonymous {
		if _, err := cfg.Credentials.Retrieve(ctx); err != nil {
			anonymous = true
		}
	}
	if anonymous {
		cfg.Credentials = aws.AnonymousCredentials{}
	}
	maxAttempts := cfg.RetryMaxAttempts
	if maxAttempts == 0 {
		maxAttempts = 10
	}
	set := settings()
	cfg.HTTPClient = awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) { withStall(tr, set.stall) })
	cfg.Retryer = func() aws.Retryer {
		return retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = maxAttempts
			o.MaxBackoff = set.backoff
		})
	}
	c := awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		// The SDK's own log lines (a WARN for every response without a
		// checksum it knows) are not for the user: every failure is an
		// error the command says once.
		o.Logger = logging.Nop{}
		o.DisableLogOutputChecksumValidationSkipped = true
		if o.BaseEndpoint != nil {
			// S3-compatible stores: path-style addressing, and only the
			// checksums S3 has always had (many do not know the newer ones).
			o.UsePathStyle = true
			o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
			o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		}
	})
	return &client{Client: c, set: set}, nil
}

// Store is the store.Store of an S3 prefix; at the root "s3://" (no
// bucket), Sub's first element names the bucket.
type Store struct {
	c      *client
	bucket string
	prefix string
	seen   *sync.Map // key → *store.Object, as last listed or stat'ed; shared with its Subs
}

func (s *Store) key(name string) string {
	if name == "." || name == "" {
		return s.prefix
	}
	if s.prefix == "" {
		return name
	}
	return s.prefix + "/" + name
}

// Where implements Store.
func (s *Store) Where(name string) string {
	k := s.key(name)
	if k == "" {
		return "s3://" + s.bucket
	}
	return "s3://" + s.bucket + "/" + k
}

func (s *Store) fail(op, name string, err error) error {
	if err == nil {
		return nil
	}
	if isNotFound(err) {
		return &fs.PathError{Op: op, Path: s.Where(name), Err: fs.ErrNotExist}
	}
	var se *store.Error
	if errors.As(err, &se) {
		return err
	}
	return &store.Error{Where: s.Where(name), Op: op, Err: shorten(err)}
}

func status(err error) int {
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

func isNotFound(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NotFound", "NoSuchKey":
			return true
		}
	}
	var nk *types.NoSuchKey
	return errors.As(err, &nk) || status(err) == http.StatusNotFound
}

func isPrecondition(err error) bool {
	s := status(err)
	return s == http.StatusPreconditionFailed || s == http.StatusConflict
}

// ReadDir implements store.Store: one level, listed page by page.
func (s *Store) ReadDir(ctx context.Context, name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	dir := s.key(name)
	if dir != "" {
		dir += "/"
	}
	var out []fs.DirEntry
	p := awss3.NewListObjectsV2Paginator(s.c, &awss3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &dir, Delimiter: aws.String("/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, s.fail("list", name, err)
		}
		for _, cp := range page.CommonPrefixes {
			n := strings.TrimSuffix(strings.TrimPrefix(aws.ToString(cp.Prefix), dir), "/")
			if n != "" {
				out = append(out, fs.FileInfoToDirEntry(dirInfo(n)))
			}
		}
		for _, o := range page.Contents {
			k := aws.ToString(o.Key)
			n := strings.TrimPrefix(k, dir)
			if n == "" {
				continue // a folder marker
			}
			obj := &store.Object{Key: k, Size: aws.ToInt64(o.Size), ETag: aws.ToString(o.ETag)}
			s.seen.Store(k, obj)
			out = append(out, fs.FileInfoToDirEntry(&objInfo{name: n, o: obj, mod: aws.ToTime(o.LastModified)}))
		}
	}
	if len(out) == 0 && dir != "" {
		return nil, &fs.PathError{Op: "readdir", Path: s.Where(name), Err: fs.ErrNotExist}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

// Stat implements store.Store. A name is a folder when keys lie under it.
func (s *Store) Stat(ctx context.Context, name string) (fs.FileInfo, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "stat", Path: name, Err: fs.ErrInvalid}
	}
	if s.key(name) == "" {
		return dirInfo(s.bucket), nil // the bucket itself
	}
	base := path.Base(s.key(name))
	o, err := s.head(ctx, name)
	if err == nil {
		return &objInfo{name: base, o: o}, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	pre := s.key(name) + "/"
	out, lerr := s.c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &pre, MaxKeys: aws.Int32(1)})
	if lerr != nil {
		return nil, s.fail("list", name, lerr)
	}
	if len(out.Contents) > 0 {
		return dirInfo(base), nil
	}
	return nil, err
}

func (s *Store) head(ctx context.Context, name string) (*store.Object, error) {
	k := s.key(name)
	out, err := s.c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &s.bucket, Key: &k})
	if err != nil {
		return nil, s.fail("stat", name, err)
	}
	o := &store.Object{Key: k, Size: aws.ToInt64(out.ContentLength), ETag: aws.ToString(out.ETag)}
	return o, nil
}

// Open implements store.Store; the file reads under ctx. The file reads the version of the object that was
// listed (or, if it was not, the one there now): ranged GETs on the ETag,
// so a change mid-run is an error wrapping ErrChanged.
func (s *Store) Open(ctx context.Context, name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	var o *store.Object
	if v, ok := s.seen.Load(s.key(name)); ok {
		o = v.(*store.Object)
	} else {
		var err error
		if o, err = s.head(ctx, name); err != nil {
			return nil, err
		}
		s.seen.Store(o.Key, o)
	}
	return &s3File{s: s, ctx: ctx, name: name, o: o}, nil
}

// Remove implements Store.
func (s *Store) Remove(ctx context.Context, name string) error {
	k := s.key(name)
	_, err := s.c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &s.bucket, Key: &k})
	if err != nil && !isNotFound(err) {
		return s.fail("delete", name, err)
	}
	s.seen.Delete(k)
	return nil
}

// RemoveAll implements Store: every key under name, a thousand a request.
func (s *Store) RemoveAll(ctx context.Context, name string) error {
	pre := s.key(name) + "/"
	p := awss3.NewListObjectsV2Paginator(s.c, &awss3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &pre})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return s.fail("list", name, err)
		}
		if len(page.Contents) == 0 {
			continue
		}
		var ids []types.ObjectIdentifier
		for _, o := range page.Contents {
			ids = append(ids, types.ObjectIdentifier{Key: o.Key})
			s.seen.Delete(aws.ToString(o.Key))
		}
		out, err := s.c.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: &s.bucket, Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)}})
		if err != nil {
			return s.fail("delete", name, err)
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return &store.Error{Where: "s3://" + s.bucket + "/" + aws.ToString(e.Key), Op: "delete", Err: errors.New(aws.ToString(e.Message))}
		}
	}
	return s.Remove(ctx, name)
}

// dirInfo is the FileInfo of a folder (a common prefix).
type dirInfo string

func (d dirInfo) Name() string       { return string(d) }
func (d dirInfo) Size() int64        { return 0 }
func (d dirInfo) Mode() fs.FileMode  { return fs.ModeDir | 0o755 }
func (d dirInfo) ModTime() time.Time { return time.Time{} }
func (d dirInfo) IsDir() bool        { return true }
func (d dirInfo) Sys() any           { return nil }

type objInfo struct {
	name string
	o    *store.Object
	mod  time.Time
}

func (i *objInfo) Name() string       { return i.name }
func (i *objInfo) Size() int64        { return i.o.Size }
func (i *objInfo) Mode() fs.FileMode  { return 0o644 }
func (i *objInfo) ModTime() time.Time { return i.mod }
func (i *objInfo) IsDir() bool        { return false }
func (i *objInfo) Sys() any           { return i.o }

var _ io.ReaderAt = (*s3File)(nil)
