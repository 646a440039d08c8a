package replay

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/backfill-dev/backfill/cumulus/cumulusdb"
	"github.com/backfill-dev/backfill/cumulus/dla"
	"github.com/backfill-dev/backfill/cumulus/records"
	"github.com/backfill-dev/backfill/internal/cumulustest"
	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/testutil"
)

const t0 = 1700000000000.0

// msg is a Cumulus message of collection coll (name___version) with
// one granule per id, each with one 5-byte file.
func msg(exec, status, coll string, start float64, ids ...string) map[string]any {
	name, version, _ := strings.Cut(coll, "___")
	var gs []any
	for _, id := range ids {
		gs = append(gs, map[string]any{"granuleId": id, "cmrLink": "https://cmr/" + exec + "/" + status,
			"files": []any{map[string]any{"bucket": "protected", "key": exec + "/" + id + ".hdf", "fileName": id + ".hdf", "size": 5.0}}})
	}
	return map[string]any{
		"cumulus_meta": map[string]any{
			"state_machine": "arn:aws:states:us-east-1:123456789012:stateMachine:Ingest", "execution_name": exec,
			"workflow_start_time": start,
		},
		"meta": map[string]any{
			"status": status, "workflow_name": "Ingest",
			"collection": map[string]any{"name": name, "version": version},
			"provider":   map[string]any{"id": "s3_provider", "protocol": "s3", "host": "cumulus-test-data"},
		},
		"payload": map[string]any{"granules": gs},
	}
}

func js(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// eventOf is the EventBridge event of a message's execution status.
func eventOf(t testing.TB, m map[string]any, sfn string) map[string]any {
	d := map[string]any{
		"executionArn": "arn:aws:states:us-east-1:123456789012:execution:Ingest:" + m["cumulus_meta"].(map[string]any)["execution_name"].(string),
		"status":       sfn, "startDate": t0, "stopDate": t0 + 5000, "input": js(t, m),
	}
	if sfn == "SUCCEEDED" {
		d["output"] = js(t, m)
	}
	return map[string]any{"detail-type": "Step Functions Execution Status Change", "source": "aws.states",
		"time": "2023-11-14T22:13:25Z", "detail": d}
}

func sqsOf(t testing.TB, body any, depth int) map[string]any {
	var out any = body
	for l := depth; l >= 1; l-- {
		out = map[string]any{"messageId": fmt.Sprintf("m%d", l), "body": js(t, out)}
	}
	return out.(map[string]any)
}

type env struct {
	url     string
	pool    *pgxpool.Pool
	w       *records.Writer
	arch    *dla.Archive
	dir     string
	logMu   sync.Mutex
	logs    []string
	options Options
}

// newEnv is a writer on a new database (Cumulus's migrations when
// migrated, else CreateTables) and an archive in a temporary folder.
func newEnv(t *testing.T, migrated bool, collections ...string) *env {
	t.Helper()
	var url string
	if migrated {
		url = cumulustest.MigratedDB(t, collections...)
	} else {
		url = pgtest.NewDatabase(t)
		if err := cumulusdb.CreateTables(context.Background(), cumulustest.Pool(t, url)); err != nil {
			t.Fatal(err)
		}
		cumulustest.Seed(t, url, collections...)
	}
	pool := cumulustest.Pool(t, url)
	dir := t.TempDir()
	arch := dla.New(store.Local(dir))
	e := &env{url: url, pool: pool, dir: dir, arch: arch}
	e.w = records.New(pool, records.Options{Now: func() int64 { return int64(t0) + 60000 }})
	e.options = Options{Log: func(s string) { e.logMu.Lock(); e.logs = append(e.logs, s); e.logMu.Unlock() }}
	return e
}

// write writes JSON lines with Write.
func (e *env) write(t *testing.T, opt Options, values ...any) Stats {
	t.Helper()
	var in strings.Builder
	for _, v := range values {
		if s, ok := v.(string); ok {
			in.WriteString(s + "\n")
		} else {
			in.WriteString(js(t, v) + "\n")
		}
	}
	st, err := Write(context.Background(), []string{"-"}, strings.NewReader(in.String()), e.w, e.arch, opt)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// archived returns the archive's records under sqs/ (or failed-sqs/).
func (e *env) archived(t *testing.T, failed bool) map[string]map[string]any {
	t.Helper()
	out := map[string]map[string]any{}
	sub := "sqs"
	if failed {
		sub = "failed-sqs"
	}
	err := e.arch.List(context.Background(), failed, func(key string) error {
		b, err := os.ReadFile(filepath.Join(e.dir, "dead-letter-archive", sub, filepath.FromSlash(key)))
		if err != nil {
			return err
		}
		var r map[string]any
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("%s: %v", key, err)
		}
		out[key] = r
		return nil
	}, func(name, what string) error { return fmt.Errorf("%s: a stray in the archive (%s)", name, what) })
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// granules lists granule rows as "id collection status created_at volume cmr_link files".
func (e *env) granules(t *testing.T) []string {
	t.Helper()
	return cumulustest.Lines(t, e.pool, `
		SELECT g.granule_id || ' ' || c.name || '___' || c.version || ' ' || g.status || ' ' || (extract(epoch FROM g.created_at) * 1000)::bigint
			|| ' ' || coalesce(g.product_volume::text, '-') || ' ' || coalesce(g.cmr_link, '-') || ' '
			|| coalesce((SELECT string_agg(f.key, ',' ORDER BY f.key) FROM files f WHERE f.granule_cumulus_id = g.cumulus_id), '-')
		FROM granules g JOIN collections c ON c.cumulus_id = g.collection_cumulus_id ORDER BY 1`)
}

// Each bad input of the issue is an error with its reason and an archive
// record naming what it could of the message; good messages around them
// are written. On Cumulus's own tables and on CreateTables'.
func TestWrite_BadInputs(t *testing.T) {
	for _, migrated := range []bool{true, false} {
		t.Run(fmt.Sprintf("migrated=%v", migrated), func(t *testing.T) {
			e := newEnv(t, migrated)
			noStart := msg("e2", "completed", "MOD09GQ___006", t0, "g2")
			delete(noStart["cumulus_meta"].(map[string]any), "workflow_start_time")
			nullFiles := msg("e3", "completed", "MOD09GQ___006", t0, "g3")
			nullFiles["payload"].(map[string]any)["granules"].([]any)[0].(map[string]any)["files"] = nil
			numChecksum := msg("e4", "completed", "MOD09GQ___006", t0, "g4")
			numChecksum["payload"].(map[string]any)["granules"].([]any)[0].(map[string]any)["files"].([]any)[0].(map[string]any)["checksum"] = 5.0
			unknownProvider := msg("e6", "completed", "MOD09GQ___006", t0, "g6")
			unknownProvider["meta"].(map[string]any)["provider"].(map[string]any)["id"] = "nowhere"
			st := e.write(t, Options{Log: e.options.Log},
				msg("e0", "completed", "MOD09GQ___006", t0, "g0"),
				`{"cumulus_meta": {"execution_name": "broken"`,
				noStart,
				nullFiles,
				msg("e4r", "running", "MOD09GQ___006", t0-1000, "g4"),
				numChecksum,
				msg("e5", "completed", "NOPE___1", t0, "g5"),
				unknownProvider,
				msg("e7", "completed", "MOD09GQ___006", t0, "g7"),
			)
			if st.Messages != 9 || st.OK != 3 || st.Archived != 6 || st.GranulesMarked != 1 {
				t.Errorf("stats %+v", st)
			}
			want := map[string]string{ // execution name → error
				"unknown": "malformed JSON",
				"e2":      "without a workflow_start_time",
				"e3":      "granule.files must not be null",
				"e4":      "The record has validation errors",
				// Cumulus's message, word for word, then what was missing.
				"e5": "UnmetRequirementsError: Could not satisfy requirements for writing records to PostgreSQL. No records written to the database." +
					" Missing: collection NOPE___1 (meta.collection name___version) is not in collections.",
				"e6": `RecordDoesNotExist: Record in providers with identifiers {"name":"nowhere"} does not exist.`,
			}
			recs := e.archived(t, false)
			if len(recs) != len(want) {
				t.Errorf("%d records, want %d", len(recs), len(want))
			}
			for key, r := range recs {
				exec := key[strings.Index(key, "/")+1 : strings.LastIndex(key[:len(key)-36], "-")]
				w, ok := want[exec]
				if !ok {
					t.Errorf("unexpected record %s: %v", key, r)
					continue
				}
				if !strings.Contains(r["error"].(string), w) {
					t.Errorf("%s: error %q, want %q", key, r["error"], w)
				}
				if exec != "unknown" && (r["granules"] == nil || r["executionArn"] == nil) {
					t.Errorf("%s: record without granules or execution: %v", key, r)
				}
				delete(want, exec)
			}
			for exec := range want {
				t.Errorf("no record for %s", exec)
			}
			got := e.granules(t)
			// g4 was running, then its completed message failed validation:
			// Cumulus marks the existing row failed (docs/granule-writes.md).
			if len(got) != 3 || !strings.HasPrefix(got[0], "g0 MOD09GQ___006 completed") ||
				!strings.HasPrefix(got[1], "g4 MOD09GQ___006 failed") || !strings.HasPrefix(got[2], "g7 MOD09GQ___006 completed") {
				t.Errorf("granules %q", got)
			}
		})
	}
}

// Inputs of every shape fail (their collection is missing), are archived,
// and once the collection exists, recovery writes them all and empties
// the archive: the rows equal those of the same messages written directly.
func TestRecover_RoundTrip(t *testing.T) {
	e := newEnv(t, true)
	var inputs []any
	for i := range 8 {
		m := msg(fmt.Sprintf("e%d", i), "completed", "LATER___1", t0+float64(i), fmt.Sprintf("g%d", i))
		switch i {
		case 0:
			inputs = append(inputs, m)
		case 1:
			inputs = append(inputs, eventOf(t, m, "SUCCEEDED"))
		case 2, 3, 4:
			inputs = append(inputs, sqsOf(t, m, i-1)) // depth 1 to 3
		case 5:
			inputs = append(inputs, sqsOf(t, eventOf(t, m, "SUCCEEDED"), 2))
		case 6:
			inputs = append(inputs, map[string]any{"Records": []any{sqsOf(t, m, 1)}})
		case 7:
			inputs = append(inputs, sqsOf(t, eventOf(t, m, "FAILED"), 3))
		}
	}
	st := e.write(t, e.options, inputs...)
	if st.Archived != 8 || len(e.archived(t, false)) != 8 {
		t.Fatalf("stats %+v, records %d", st, len(e.archived(t, false)))
	}
	// One record that keeps failing: its collection never comes.
	e.write(t, e.options, eventOf(t, msg("never", "completed", "NEVER___1", t0, "gx"), "SUCCEEDED"))

	cumulustest.AddCollection(t, e.pool, "LATER___1")
	rst, err := Recover(context.Background(), e.arch, e.w, Options{Batch: 3, Concurrency: 2, Log: e.options.Log})
	if err != nil {
		t.Fatal(err)
	}
	if rst.Messages != 9 || rst.Deleted != 8 || rst.Archived != 1 {
		t.Errorf("recover stats %+v", rst)
	}
	if left := e.archived(t, false); len(left) != 0 {
		t.Errorf("records left under sqs/: %v", left)
	}
	failed := e.archived(t, true)
	if len(failed) != 1 {
		t.Fatalf("failed-sqs: %v", failed)
	}
	for key, r := range failed {
		if !strings.HasPrefix(key, "2023-11-14/never-") || r["collectionId"] != "NEVER___1" {
			t.Errorf("failed record %s: %v", key, r)
		}
	}

	direct := newEnv(t, true, "LATER___1")
	var ms []any
	for i := range 8 {
		m := msg(fmt.Sprintf("e%d", i), "completed", "LATER___1", t0+float64(i), fmt.Sprintf("g%d", i))
		if i == 7 {
			m["meta"].(map[string]any)["status"] = "failed"
		}
		ms = append(ms, m)
	}
	direct.write(t, direct.options, ms...)
	if a, b := e.granules(t), direct.granules(t); strings.Join(a, "\n") != strings.Join(b, "\n") || len(a) != 8 {
		t.Errorf("recovered rows differ from direct ones:\n%s\n--\n%s", strings.Join(a, "\n"), strings.Join(b, "\n"))
	}
}

// Eight writers race one granule ID in eight collections, 200 rounds, on
// Cumulus's own tables: each round exactly one collection holds it, and
// the seven others are in the archive with Cumulus's message.
func TestWrite_RaceAcrossCollections(t *testing.T) {
	const writers, rounds = 8, 200
	var colls []string
	for i := range writers {
		colls = append(colls, fmt.Sprintf("RACE%d___1", i))
	}
	e := newEnv(t, true, colls...)
	var wg sync.WaitGroup
	for r := range rounds {
		start := make(chan struct{})
		for k := range writers {
			wg.Go(func() {
				<-start
				in := js(t, msg(fmt.Sprintf("r%d-w%d", r, k), "completed", colls[k], t0, fmt.Sprintf("race-%d", r)))
				if _, err := Write(context.Background(), []string{"-"}, strings.NewReader(in), e.w, e.arch, Options{Batch: 1, Concurrency: 1}); err != nil {
					t.Error(err)
				}
			})
		}
		close(start)
		wg.Wait()
	}
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM granules").Scan(&n); err != nil {
		t.Fatal(err)
	}
	rows, err := e.pool.Query(context.Background(), "SELECT granule_id, count(*) FROM granules GROUP BY granule_id HAVING count(*) > 1")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var id string
		var c int
		testutil.Check(t, rows.Scan(&id, &c))
		t.Errorf("%s is held by %d collections", id, c)
	}
	rows.Close()
	if n != rounds {
		t.Errorf("%d granules, want %d (one per round)", n, rounds)
	}
	perRound := map[string]int{}
	for key, rec := range e.archived(t, false) {
		id := rec["granules"].([]any)[0].(string)
		perRound[id]++
		want := "A granule already exists for granuleId: " + id + " with collectionId: " + rec["collectionId"].(string)
		if !strings.Contains(rec["error"].(string), want) {
			t.Errorf("%s: error %q, want %q", key, rec["error"], want)
		}
	}
	for r := range rounds {
		if c := perRound[fmt.Sprintf("race-%d", r)]; c != writers-1 {
			t.Errorf("round %d: %d archived, want %d", r, c, writers-1)
		}
	}
}

// ref is the row the write constraints imply (docs/granule-writes.md), written
// independently of the writer: what each message does to the execution
// and granule rows it meets.
type ref struct {
	exists           bool
	status           string
	createdAt        float64
	cmrLink, files   string
	executionsStatus map[string]string
}

func (r *ref) apply(exec, status string, start float64) {
	// The execution first: a running write keeps an existing status.
	if old, ok := r.executionsStatus[exec]; !ok || status != "running" {
		r.executionsStatus[exec] = status
	} else {
		r.executionsStatus[exec] = old
	}
	link := "https://cmr/" + exec + "/" + status
	if !r.exists {
		r.exists, r.status, r.createdAt, r.cmrLink = true, status, start, link
		if status != "running" {
			r.files = exec + "/g.hdf"
		}
		return
	}
	if r.createdAt > start {
		return // older than the row
	}
	if status == "running" {
		if s := r.executionsStatus[exec]; s == "completed" || s == "failed" {
			return // its execution has already ended
		}
		r.status, r.createdAt = status, start
		return
	}
	r.status, r.createdAt, r.cmrLink, r.files = status, start, link, exec+"/g.hdf"
}

// Random orders of running, completed and failed messages of one granule
// (three executions, two messages each): the final row is the one the
// constraints imply.
func TestWrite_OutOfOrder(t *testing.T) {
	e := newEnv(t, false)
	rng := rand.New(rand.NewPCG(7, 11))
	type m struct {
		exec, status string
		start        float64
	}
	const trials = 60
	want := map[string]string{}
	var values []any
	for trial := range trials {
		id := fmt.Sprintf("g%02d", trial)
		p := func(n string) string { return fmt.Sprintf("t%02d-%s", trial, n) }
		// Starts in random order, sometimes equal.
		starts := []float64{t0, t0 + float64(rng.IntN(3))*1000, t0 + float64(rng.IntN(3))*1000}
		ms := []m{
			{p("e1"), "running", starts[0]}, {p("e1"), "completed", starts[0]},
			{p("e2"), "running", starts[1]}, {p("e2"), "failed", starts[1]},
			{p("e3"), "running", starts[2]}, {p("e3"), "completed", starts[2]},
		}
		rng.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
		r := &ref{executionsStatus: map[string]string{}}
		for _, x := range ms {
			r.apply(x.exec, x.status, x.start)
			mm := msg(x.exec, x.status, "MOD09GQ___006", x.start, id)
			g := mm["payload"].(map[string]any)["granules"].([]any)[0].(map[string]any)
			g["files"].([]any)[0].(map[string]any)["key"] = x.exec + "/g.hdf"
			values = append(values, mm)
		}
		files := r.files
		if files == "" {
			files = "-"
		}
		vol := "5"
		want[id] = fmt.Sprintf("%s MOD09GQ___006 %s %d %s %s %s", id, r.status, int64(r.createdAt), vol, r.cmrLink, files)
	}
	// Each trial's messages in its order, one at a time.
	st := e.write(t, Options{Batch: 1, Concurrency: 1, Log: e.options.Log}, values...)
	if st.Archived != 0 {
		t.Fatalf("stats %+v: %v", st, e.logs)
	}
	for _, row := range e.granules(t) {
		id := strings.Fields(row)[0]
		if row != want[id] {
			t.Errorf("row  %s\nwant %s", row, want[id])
		}
		delete(want, id)
	}
	if len(want) != 0 {
		ids := make([]string, 0, len(want))
		for id := range want {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		t.Errorf("granules missing: %v", ids)
	}
}
