// Package location turns a location a person gives (a local path, or an
// s3:// URL) into the store.Store it names. Only the commands and the
// tests open locations; everything below them is handed a Store, so that
// a package that does not touch S3 does not link the AWS SDK.
package location

import (
	"context"
	"io/fs"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/s3"
)

// Open returns the Store rooted at loc: a local folder (which need not
// exist yet), s3://bucket/prefix, or s3:// (every bucket, the first
// element of a name being the bucket's).
func Open(ctx context.Context, loc string) (store.Store, error) {
	if !store.IsRemote(loc) {
		return store.Local(loc), nil
	}
	return s3.Open(ctx, loc)
}

// OpenFile opens the file at loc, a local path or an s3:// URL.
func OpenFile(ctx context.Context, loc string) (fs.File, error) {
	parent, base := store.Split(loc)
	st, err := Open(ctx, parent)
	if err != nil {
		return nil, err
	}
	return st.Open(ctx, base)
}
