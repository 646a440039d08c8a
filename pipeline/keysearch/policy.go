package keysearch

import (
	"context"
	"errors"

	"github.com/backfill-dev/backfill/pipeline/ooid"
)

// Table policies: when Find builds a key table instead of looking for a
// single key.
const (
	TableAuto   = "auto"   // a single key when one is expected within MaxTrials, else (or when none is found there) a table
	TableNever  = "never"  // a single key over the whole range
	TableAlways = "always" // a table
)

// Policy says how Find searches.
type Policy struct {
	Options // the range, the width, the seed; Progress is the single-key search's
	// Table is TableAuto, TableNever or TableAlways.
	Table string
	// MaxTrials bounds the single keys tried under TableAuto, and the
	// keys tried per timestamp of a table.
	MaxTrials uint64
	// TableProgress, when set, is the key table search's progress.
	TableProgress func(Progress)
	// Fallback, when set, is told that no single key was found within
	// MaxTrials and a table is built instead.
	Fallback func(trials uint64)
}

// Result is what Find found.
type Result struct {
	Scheme ooid.Scheme
	Key    uint64 // the single key, or the table's default key
	// Overrides is the number of timestamps given a key of their own (a
	// table), zero for a single key.
	Overrides int
	Trials    uint64 // keys tried, over both searches
	Table     bool   // the scheme is a key table
}

// Find finds a keyed scheme under which no two reports of the corpus
// collide, by the policy p: a single key when one is expected soon enough,
// else a key table.
func (c *Corpus) Find(ctx context.Context, p Policy) (Result, error) {
	var res Result
	expected := c.shape.ExpectedTrials(p.Bits)
	useTable := p.Table == TableAlways || (p.Table == TableAuto && expected > float64(p.MaxTrials))
	if !useTable {
		o := p.Options
		if p.Table == TableAuto {
			o.To = min(o.To, o.From+p.MaxTrials)
		}
		f, err := c.SearchKey(ctx, o)
		res.Trials = f.Trials
		switch {
		case err == nil:
			kt, err := ooid.NewKeyTable(p.Seed, f.Index, nil)
			if err != nil {
				return res, err
			}
			res.Scheme, res.Key = ooid.KeyedScheme(p.Bits, kt), f.Index
			return res, nil
		case errors.Is(err, ErrNotFound) && p.Table == TableAuto:
			if p.Fallback != nil {
				p.Fallback(f.Trials)
			}
		default:
			return res, err
		}
	}
	o := p.Options
	o.To = min(o.To, o.From+1+p.MaxTrials) // per timestamp
	o.Progress = p.TableProgress
	t, err := c.SearchTable(ctx, o)
	if err != nil {
		return res, err
	}
	res.Scheme, res.Key, res.Overrides, res.Table = ooid.KeyedScheme(p.Bits, t.Keys), p.From, t.Colliding, true
	res.Trials += t.Trials
	return res, nil
}
