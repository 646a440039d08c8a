package records

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/backfill-dev/backfill/cumulus/cumulusdb"
	"github.com/backfill-dev/backfill/cumulus/granulefiles"
	"github.com/backfill-dev/backfill/cumulus/message"
	"github.com/backfill-dev/backfill/internal/cumulustest"
	"github.com/backfill-dev/backfill/internal/pgtest"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
)

// refDir is Cumulus v21's own code, installed by reference/cumulus-v21/setup
// (make test runs it).
var refDir = cumulustest.RefDir()

func needReference(t *testing.T) { t.Helper(); cumulustest.NeedReference(t) }

// cumulusDB is a new database with the schema of Cumulus's own migrations
// and the collections and providers the scenarios name.
func cumulusDB(t *testing.T) string { t.Helper(); return cumulustest.MigratedDB(t) }

// ownDB is a new database with the tables of CreateTables and the same
// rows as cumulusDB.
func ownDB(t *testing.T) string {
	t.Helper()
	url := pgtest.NewDatabase(t)
	if err := cumulusdb.CreateTables(context.Background(), cumulustest.Pool(t, url)); err != nil {
		t.Fatal(err)
	}
	cumulustest.Seed(t, url)
	return url
}

// step is one message written at a time.
type step struct {
	Message   map[string]any `json:"-"`
	StartDate *int64         `json:"startDate,omitempty"`
	StopDate  *int64         `json:"stopDate,omitempty"`
	Now       int64          `json:"now"`
	// Text is the message as its input's text, when its key order
	// matters; nil: Message.
	Text json.RawMessage `json:"-"`
	// Event, when set, is the input as it arrives instead of the message:
	// an EventBridge event, bare or as the body of an SQS record. Both
	// writers unwrap it (backfill with message.Decode, dates included).
	Event json.RawMessage `json:"event,omitempty"`
}

// text is the message as both writers read it.
func (s step) text() json.RawMessage {
	if s.Text != nil {
		return s.Text
	}
	b, _ := json.Marshal(s.Message)
	return b
}

// MarshalJSON is the line the oracle reads.
func (s step) MarshalJSON() ([]byte, error) {
	type line step
	var m json.RawMessage
	if s.Event == nil {
		m = s.text()
	}
	return json.Marshal(struct {
		Message json.RawMessage `json:"message,omitempty"`
		line
	}{m, line(s)})
}

// runOracle writes the steps with Cumulus's writeRecords, on the database
// of url with the files under filesRoot, and returns each step's error (""
// for none). One Node process serves every call of the test binary.
func runOracle(t *testing.T, url, filesRoot string, steps []step) []string {
	t.Helper()
	head, err := json.Marshal(struct {
		Database  string `json:"database"`
		FilesRoot string `json:"filesRoot"`
	}{url, filesRoot})
	if err != nil {
		t.Fatal(err)
	}
	var in bytes.Buffer
	for _, s := range steps {
		b, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		in.Write(head[:len(head)-1]) // every line names the database: the process may have served another
		in.WriteByte(',')
		in.Write(b[1:])
		in.WriteByte('\n')
	}
	lines, err := theOracle.write(in.Bytes(), len(steps))
	if err != nil {
		t.Fatalf("oracle: %v", err)
	}
	var errs []string
	for _, l := range lines {
		var r struct {
			OK    bool   `json:"ok"`
			Error string `json:"error"`
		}
		if err := json.Unmarshal(l, &r); err != nil {
			t.Fatalf("oracle output %q: %v", l, err)
		}
		errs = append(errs, r.Error)
	}
	return errs
}

// oracle is Cumulus's write path in one Node process (write-records.js),
// started on first use and stopped by TestMain.
type oracle struct {
	mu     sync.Mutex
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	out    *bufio.Reader
	stderr bytes.Buffer
	err    error // once the process failed, every call fails
}

var theOracle oracle

// write sends lines and reads n answers.
func (o *oracle) write(lines []byte, n int) ([][]byte, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.err != nil {
		return nil, o.err
	}
	if o.cmd == nil {
		o.cmd = exec.Command("node", "write-records.js")
		o.cmd.Dir = refDir
		o.cmd.Env = append(os.Environ(), "TZ=UTC", "AWS_DEFAULT_REGION=us-east-1")
		o.cmd.Stderr = &o.stderr
		w, err := o.cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		r, err := o.cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		if err := o.cmd.Start(); err != nil {
			o.err = err
			return nil, err
		}
		o.stdin, o.out = w, bufio.NewReaderSize(r, 1<<20)
	}
	fail := func(err error) ([][]byte, error) {
		o.err = fmt.Errorf("%w\n%s", err, o.stderr.String())
		return nil, o.err
	}
	// Written while the answers are read: a long batch must not fill both
	// pipes.
	wrote := make(chan error, 1)
	go func() { _, err := o.stdin.Write(lines); wrote <- err }()
	var out [][]byte
	for range n {
		l, err := o.out.ReadBytes('\n')
		if err != nil {
			<-wrote
			return fail(fmt.Errorf("answered %d of %d steps: %w", len(out), n, err))
		}
		out = append(out, l)
	}
	if err := <-wrote; err != nil {
		return fail(err)
	}
	return out, nil
}

// stop ends the process, if one was started.
func (o *oracle) stop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cmd != nil {
		_ = o.stdin.Close() // the process ends at the end of its input
		_ = o.cmd.Wait()
		o.cmd = nil
	}
}

// runOurs writes the steps with Writer.
func runOurs(t *testing.T, url, filesRoot string, steps []step) []string {
	t.Helper()
	var now int64
	var files granulefiles.Source = granulefiles.Dir(filesRoot)
	if store.IsRemote(filesRoot) {
		root, err := location.Open(context.Background(), filesRoot)
		if err != nil {
			t.Fatal(err)
		}
		files = granulefiles.Objects{Ctx: context.Background(), Root: root}
	}
	w := New(cumulustest.Pool(t, url), Options{Files: files, Now: func() int64 { return now }})
	var errs []string
	for _, s := range steps {
		now = s.Now
		in, err := s.input(t)
		if err == nil {
			_, err = w.Write(context.Background(), in)
		}
		errs = append(errs, errText(err))
	}
	return errs
}

// input is the step's message decoded afresh, as each is a new event,
// with its exception's text as message.Decode finds it; an event is
// decoded as it arrives, an error when it holds no message.
func (s step) input(t *testing.T) (Input, error) {
	t.Helper()
	if s.Event != nil {
		env, err := message.Decode(s.Event, message.Options{})
		if err != nil {
			return Input{}, err
		}
		return Input{Message: env.Message, Exception: env.Exception, StartDate: env.StartDate, StopDate: env.StopDate}, nil
	}
	var m map[string]any
	if err := json.Unmarshal(s.text(), &m); err != nil {
		t.Fatal(err)
	}
	in := Input{Message: m, StartDate: s.StartDate, StopDate: s.StopDate}
	if env, err := message.Decode(s.text(), message.Options{}); err == nil {
		in.Exception = env.Exception
	}
	return in, nil
}

func errText(err error) string {
	if err != nil {
		return err.Error()
	}
	return ""
}

// runOursBatched writes the steps with one WriteBatch.
func runOursBatched(t *testing.T, url, filesRoot string, steps []step) []string {
	t.Helper()
	var now int64
	w := New(cumulustest.Pool(t, url), Options{Files: granulefiles.Dir(filesRoot), Now: func() int64 { return now }})
	var ins []Input
	var at []int // the step of each input
	errs := make([]string, len(steps))
	for i, s := range steps {
		in, err := s.input(t)
		if err != nil {
			errs[i] = err.Error()
			continue
		}
		ins, at = append(ins, in), append(at, i)
	}
	w.beforeMessage = func(i int) { now = steps[at[i]].Now }
	out, err := w.WriteBatch(context.Background(), ins)
	if err != nil {
		t.Fatal(err)
	}
	if w.Fallbacks() != 0 {
		t.Errorf("the batch did not commit as one transaction")
	}
	for i, r := range out {
		errs[at[i]] = errText(r.Err)
	}
	return errs
}

// fileCause matches the Cause of a failed file write, the text of a
// database error: Cumulus's carries the SQL knex built and a Node stack.
var fileCause = regexp.MustCompile(`Failed writing files to PostgreSQL.\\",\\"Cause\\":\\"AggregateError: .*?[^\\]\\"(\}|,)`)

// dump lists the rows the write path touches, by their natural keys, with
// the serial ids and the database's own default times left out.
func dump(t *testing.T, url string) string {
	t.Helper()
	pool := cumulustest.Pool(t, url)
	var out strings.Builder
	for _, q := range []string{
		`SELECT to_jsonb(g) - 'cumulus_id' - 'collection_cumulus_id' - 'pdr_cumulus_id' - 'provider_cumulus_id'
			|| jsonb_build_object('collection', c.name, 'pdr', p.name, 'provider', v.name)
			FROM granules g JOIN collections c ON c.cumulus_id = g.collection_cumulus_id
			LEFT JOIN pdrs p ON p.cumulus_id = g.pdr_cumulus_id LEFT JOIN providers v ON v.cumulus_id = g.provider_cumulus_id
			ORDER BY g.granule_id, c.name`,
		`SELECT to_jsonb(f) - 'cumulus_id' - 'granule_cumulus_id' - 'created_at' - 'updated_at' || jsonb_build_object('granule', g.granule_id)
			FROM files f JOIN granules g ON g.cumulus_id = f.granule_cumulus_id ORDER BY f.bucket, f.key`,
		`SELECT to_jsonb(e) - 'cumulus_id' - 'parent_cumulus_id' - 'collection_cumulus_id' FROM executions e ORDER BY arn`,
		`SELECT jsonb_build_object('granule', g.granule_id, 'execution', e.arn) FROM granules_executions j
			JOIN granules g ON g.cumulus_id = j.granule_cumulus_id JOIN executions e ON e.cumulus_id = j.execution_cumulus_id
			ORDER BY g.granule_id, e.arn`,
		`SELECT to_jsonb(p) - 'cumulus_id' - 'execution_cumulus_id' - 'collection_cumulus_id' - 'provider_cumulus_id' FROM pdrs p ORDER BY name`,
	} {
		for _, s := range cumulustest.Lines(t, pool, q) {
			out.WriteString(fileCause.ReplaceAllString(s, `Failed writing files to PostgreSQL.\",\"Cause\":\"AggregateError: ...\"${1}`))
			out.WriteByte('\n')
		}
		out.WriteString("--\n")
	}
	return out.String()
}

// compare runs the steps through both and asserts the same outcome per
// step (error or not) and the same final tables.
func compare(t *testing.T, filesRoot string, steps []step) {
	t.Helper()
	d, _ := differences(t, filesRoot, steps, nil)
	for _, d := range d {
		t.Error(d)
	}
}

// differences runs the steps through Cumulus's writeRecords and through
// backfill (message by message and as one batch on Cumulus's tables, and
// on CreateTables' tables), on new databases that extra, when not nil,
// adds rows to, and lists every difference: a step's verdict (an error or
// not) and a line of the final tables; and what Cumulus wrote: how many
// messages failed, and the rows of each table.
func differences(t *testing.T, filesRoot string, steps []step, extra func(testing.TB, string)) ([]string, string) {
	t.Helper()
	needReference(t)
	ours, batched, own, theirs := cumulusDB(t), cumulusDB(t), ownDB(t), cumulusDB(t)
	if extra != nil {
		for _, url := range []string{ours, batched, own, theirs} {
			extra(t, url)
		}
	}
	oe := runOurs(t, ours, filesRoot, steps)
	be := runOursBatched(t, batched, filesRoot, steps)
	owe := runOurs(t, own, filesRoot, steps)
	te := runOracle(t, theirs, filesRoot, steps)
	var out []string
	for i := range steps {
		if (oe[i] == "") != (te[i] == "") {
			out = append(out, fmt.Sprintf("step %d: backfill error %q, Cumulus error %q", i, oe[i], te[i]))
		}
		if oe[i] != be[i] {
			out = append(out, fmt.Sprintf("step %d: error %q alone, %q in a batch", i, oe[i], be[i]))
		}
		if oe[i] != owe[i] {
			out = append(out, fmt.Sprintf("step %d: error %q on Cumulus's tables, %q on CreateTables'", i, oe[i], owe[i]))
		}
	}
	b := dump(t, theirs)
	out = append(out, cumulustest.Differences("backfill", dump(t, ours), b)...)
	out = append(out, cumulustest.Differences("backfill (one batch)", dump(t, batched), b)...)
	out = append(out, cumulustest.Differences("backfill (CreateTables)", dump(t, own), b)...)
	failed := 0
	for _, e := range te {
		if e != "" {
			failed++
		}
	}
	tables := strings.Split(strings.TrimSuffix(b, "--\n"), "--\n")
	rows := make([]any, len(tables))
	for i, tb := range tables {
		rows[i] = strings.Count(tb, "\n")
	}
	return out, fmt.Sprintf("%d of %d messages failed; rows: %d granules, %d files, %d executions, %d granule-execution links, %d PDRs",
		append([]any{failed, len(steps)}, rows...)...)
}
