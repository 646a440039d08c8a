package audit

import (
	"context"
	"errors"

	"github.com/backfill-dev/backfill/pipeline/keysearch"
	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// KeysearchCorpus reads the inputs twice, as keysearch searches them:
// the shape of the corpus (its timestamps and their reports), then the
// textnames of the reports that share a timestamp. What the first read
// cannot take goes to src.Reject; the second read, with again, takes the
// same reports and says nothing more.
func KeysearchCorpus(ctx context.Context, in Inputs, src, again *Source) (*keysearch.Shape, *keysearch.Corpus, error) {
	var census keysearch.Census
	err := in.Each(ctx, src, func(at Place, textname []byte, n uint32) {
		t, err := ooid.ParseTextnameBytes(textname)
		if err != nil {
			src.Reject(at.String(), err)
			return
		}
		census.Add(t.TS, n)
	})
	if err != nil {
		return nil, nil, err
	}
	shape := census.Shape()
	corpus := keysearch.NewCorpus(shape)
	var addErr error // a corpus too large to search; the search must not run on part of it
	err = in.Each(ctx, again, func(_ Place, textname []byte, n uint32) {
		if t, err := ooid.ParseTextnameBytes(textname); err == nil && addErr == nil {
			addErr = corpus.Add(t.TS, textname, n)
		}
	})
	return shape, corpus, errors.Join(err, addErr)
}
