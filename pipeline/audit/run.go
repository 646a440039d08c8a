package audit

import (
	"context"
	"io"
	"os"

	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/pipeline/collisions"
	"github.com/backfill-dev/backfill/pipeline/ooid"
	"github.com/backfill-dev/backfill/pipeline/sink/pgcopy"
)

// Job is one audit: the schemes to count, where the reports are, and how
// much of each result to list.
type Job struct {
	Schemes []ooid.Scheme
	Pairs   int  // pairs listed per result; the counts are never cut
	Predict bool // list beside each result the chance of no collision the corpus's shape predicts
	Workers int  // goroutines hashing a manifest file

	Src *Source
	In  Inputs
}

// Inputs are where audit and keysearch read reports: a PostgreSQL schema
// first, when there is one, then each input named on the command line.
type Inputs struct {
	Names []string  // as named on the command line; "-" is a manifest on Stdin
	Stdin io.Reader // read for the input "-"
	Open  OpenFunc  // opens every other input
	PG    *pgcopy.Sink
}

// Each calls fn for every report of the inputs, in order. An input it
// cannot read at all ends it with its error (a *ingest.InputError for a
// folder that holds no bucket); a report, a line or a file it cannot take
// is handed to src.Reject.
func (in Inputs) Each(ctx context.Context, src *Source, fn Func) error {
	if in.PG != nil {
		if err := src.Postgres(ctx, in.PG, fn); err != nil {
			return err
		}
	}
	for _, name := range in.Names {
		if err := src.Input(ctx, in.Open, name, in.Stdin, fn); err != nil {
			return err
		}
	}
	return nil
}

// keepPairs is how many pairs per scheme the sweep keeps, so the pairs
// listed are the first by textname whenever there are no more than that.
const keepPairs = 1000

// Audit is a job whose schemes have been checked.
type Audit struct {
	job   Job
	sweep *collisions.Sweep
	// keepNames keeps every textname as it comes; without it, reread
	// reads the inputs' textnames again, in the same order, to name the
	// reports of the pairs found.
	keepNames bool
	reread    func(ctx context.Context, fn func(textname []byte)) error
	textnames []string
}

// New checks the job's schemes: an error is the user's to fix.
func New(job Job) (*Audit, error) {
	sw, err := collisions.NewSchemeSweep(job.Schemes, max(job.Pairs, keepPairs))
	if err != nil {
		return nil, err
	}
	a := &Audit{job: job, sweep: sw, keepNames: !allFiles(job.In.Names), reread: rereadFiles(job.In.Names)}
	if pg := job.In.PG; pg != nil {
		files := a.reread
		a.reread = func(ctx context.Context, fn func([]byte)) error {
			if err := pg.EachReport(ctx, func(textname []byte, _ uint32) error { fn(textname); return nil }); err != nil {
				return err
			}
			return files(ctx, fn)
		}
	}
	return a, nil
}

// Run reads every report of the inputs, counts the collisions of each
// scheme, and names the reports of the pairs it lists. An input it cannot
// read at all ends the run with its error (a *ingest.InputError for a
// folder that holds no bucket); a report, a line or a file it cannot take
// is handed to Src.Reject and counted in the report.
func (a *Audit) Run(ctx context.Context) (Report, error) {
	j := a.job
	if err := a.read(ctx); err != nil {
		return Report{}, err
	}
	results := a.sweep.Finish()
	names, err := a.names(ctx, results)
	if err != nil {
		return Report{}, err
	}
	rep := Report{Reports: a.sweep.Reports, Measurements: a.sweep.Measurements, Rejects: j.Src.Rejected}
	for _, r := range results {
		rep.Results = append(rep.Results, newResult(r, names, j.Pairs, j.Predict))
	}
	return rep, nil
}

// read adds every report of the inputs: as they come, or, when every
// input is a manifest file, each file parsed and hashed on every worker.
func (a *Audit) read(ctx context.Context) error {
	j := a.job
	if a.keepNames {
		return j.In.Each(ctx, j.Src, a.add)
	}
	if j.In.PG != nil {
		if err := j.Src.Postgres(ctx, j.In.PG, a.add); err != nil {
			return err
		}
	}
	for _, name := range j.In.Names {
		if err := a.readManifestFile(name); err != nil {
			return err
		}
	}
	return nil
}

// readManifestFile adds the reports of the local manifest file path,
// parsed and hashed on every worker.
func (a *Audit) readManifestFile(path string) error {
	f, err := store.OpenRegular(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
		a.sweep.Grow(int(st.Size() / minManifestLine))
	}
	return a.sweep.AddManifest(f, a.job.Workers, func(line int64, err error) {
		if _, ok := err.(*collisions.ManifestError); ok {
			a.job.Src.Reject(path, err)
			return
		}
		a.job.Src.Reject(Place{path, line}.String(), err)
	})
}

// minManifestLine is about the shortest line of a real manifest: a
// textname of the canned layout (a bucket, a time, a country, an ASN, a
// test name), a tab and a count. Room for a file's size over it holds
// every report; what goes unused is never touched, so it costs no memory.
const minManifestLine = 80

// add adds a report; a textname that gets no IDs is rejected.
func (a *Audit) add(at Place, textname []byte, n uint32) {
	if err := a.sweep.Add(textname, n); err != nil {
		a.job.Src.Reject(at.String(), err)
		return
	}
	if a.keepNames {
		a.textnames = append(a.textnames, string(textname))
	}
}

// names returns the textnames of the reports in the results' pairs.
func (a *Audit) names(ctx context.Context, results []collisions.Result) (map[uint32]string, error) {
	want := map[uint32]string{}
	for _, r := range results {
		for _, p := range r.First {
			want[p.A], want[p.B] = "", ""
		}
	}
	if a.keepNames {
		for ref := range want {
			want[ref] = a.textnames[ref]
		}
		return want, nil
	}
	if len(want) == 0 {
		return want, nil
	}
	// Read the inputs again, counting the textnames that were taken.
	ref := uint32(0)
	err := a.reread(ctx, func(textname []byte) {
		if _, err := ooid.ParseTextnameBytes(textname); err != nil {
			return
		}
		if _, ok := want[ref]; ok {
			want[ref] = string(textname)
		}
		ref++
	})
	return want, err
}

// allFiles reports whether every input is a local regular file (a
// manifest), which can be read again cheaply.
func allFiles(inputs []string) bool {
	for _, in := range inputs {
		if st, err := os.Stat(in); in == "-" || err != nil || !st.Mode().IsRegular() {
			return false
		}
	}
	return true
}

// rereadFiles reads the textnames of local manifest files again.
func rereadFiles(inputs []string) func(context.Context, func([]byte)) error {
	return func(_ context.Context, fn func([]byte)) error {
		for _, in := range inputs {
			f, err := store.OpenRegular(in)
			if err != nil {
				return err
			}
			err = collisions.ReadManifest(f, func(_ int64, textname []byte, _ uint32) error {
				fn(textname)
				return nil
			}, func(error) {})
			f.Close()
			if err != nil {
				return err
			}
		}
		return nil
	}
}
