package s3

import (
	"context"
	"errors"
	"io"
	"os"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/sync/errgroup"

	"github.com/backfill-dev/backfill/internal/store"
)

// Create implements Store: the file is spooled to a local temporary file
// (so that a failed upload can be sent again from its start) and uploaded
// by Commit, in one PUT or, from partSize up, as a multipart upload that is
// visible only when complete.
func (s *Store) Create(ctx context.Context, name string) (store.Writer, error) {
	f, err := os.CreateTemp("", "backfill-upload-*")
	if err != nil {
		return nil, err
	}
	return &s3Writer{File: f, s: s, ctx: ctx, name: name}, nil
}

type s3Writer struct {
	*os.File
	s    *Store
	ctx  context.Context
	name string
	done bool
}

func (w *s3Writer) Abort() error {
	if w.done {
		return nil
	}
	w.done = true
	w.Close()
	return os.Remove(w.Name())
}

func (w *s3Writer) Commit() error {
	if w.done {
		return errors.New("store: commit of a file already committed or aborted")
	}
	defer w.Abort()
	size, err := w.Seek(0, io.SeekEnd)
	if err != nil {
		return err
	}
	k := w.s.key(w.name)
	if size < partSize {
		_, err = w.s.c.PutObject(w.ctx, &awss3.PutObjectInput{Bucket: &w.s.bucket, Key: &k,
			Body: io.NewSectionReader(w.File, 0, size), ContentLength: aws.Int64(size)})
	} else {
		err = w.multipart(k, size)
	}
	w.s.seen.Delete(k)
	return w.s.fail("write", w.name, err)
}

// multipart uploads the spooled file in parts, four at a time, and
// aborts the upload when any part fails.
func (w *s3Writer) multipart(k string, size int64) error {
	s, ctx := w.s, w.ctx
	up, err := s.c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &k})
	if err != nil {
		return err
	}
	parts := int((size + partSize - 1) / partSize)
	done := make([]types.CompletedPart, parts)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for i := range parts {
		off := int64(i) * partSize
		n := min(partSize, size-off)
		g.Go(func() error {
			out, err := s.c.UploadPart(gctx, &awss3.UploadPartInput{Bucket: &s.bucket, Key: &k, UploadId: up.UploadId,
				PartNumber: aws.Int32(int32(i + 1)), Body: io.NewSectionReader(w.File, off, n), ContentLength: aws.Int64(n)})
			if err != nil {
				return err
			}
			done[i] = types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(int32(i + 1))}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		s.abortUpload(ctx, k, up.UploadId)
		return err
	}
	_, err = s.c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: &s.bucket, Key: &k, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	if err != nil {
		s.abortUpload(ctx, k, up.UploadId)
	}
	return err
}

// abortUpload abandons a multipart upload that failed. Its own failure is
// not reported, the upload's error is; the parts are then kept as an
// incomplete upload until the bucket's lifecycle rule for those removes
// them (docs/object-storage.md).
func (s *Store) abortUpload(ctx context.Context, key string, id *string) {
	_, _ = s.c.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: &key, UploadId: id})
}
