package records

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/backfill-dev/backfill/cumulus/jsvalue"
	"github.com/backfill-dev/backfill/internal/cumulustest"
	"github.com/backfill-dev/backfill/internal/testutil"
)

// The generated differential test: scenarios nobody picked, drawn from a
// seed, each a sequence of messages (1–3 collections, the real providers
// and messages of Cumulus's fixtures, every status in any order, start
// and creation times going back and forth, file fields present and
// absent, schema errors, arrays and nulls where objects belong, bare
// messages and EventBridge events, bare or in SQS records), written by
// Cumulus's writeRecords and by backfill on databases made by Cumulus's
// migrations and compared verdict by verdict and row by row. A failing
// scenario is shrunk before it is reported.
//
//	BACKFILL_GRANULE_DIFF=N       messages (default 120; make granule-diff: 5,000)
//	BACKFILL_GRANULE_DIFF_SEED=S  the seed (default 1)
func TestWrite_Generated(t *testing.T) {
	t.Parallel()
	n, seed := envInt(t, "BACKFILL_GRANULE_DIFF", 120), envInt(t, "BACKFILL_GRANULE_DIFF_SEED", 1)
	root := t.TempDir()
	g := newGen(t, uint64(seed), root)
	var scenarios [][]genStep
	total := 0
	for total < n {
		sc := g.scenario(len(scenarios))
		scenarios = append(scenarios, sc)
		total += len(sc)
	}
	var all []step
	var owner []int // the scenario of each step
	for i, sc := range scenarios {
		for _, s := range sc {
			all, owner = append(all, s.step()), append(owner, i)
		}
	}
	diffs, wrote := differences(t, root, all, extraRows)
	t.Logf("seed %d: %d messages in %d scenarios (%s), %d differences", seed, len(all), len(scenarios), summary(all), len(diffs))
	t.Logf("Cumulus: %s", wrote)
	if len(diffs) == 0 {
		return
	}
	bad := implicated(diffs, owner)
	t.Errorf("seed %d: %d differences, in scenarios %v; the first: %s", seed, len(diffs), bad, diffs[0])
	for _, i := range bad[:min(len(bad), 2)] {
		small, d := shrink(t, root, scenarios[i])
		if len(d) == 0 {
			t.Errorf("scenario %d differs only after the scenarios before it", i)
			continue
		}
		var lines strings.Builder
		for _, s := range small {
			b, _ := json.Marshal(s.step())
			lines.Write(b)
			lines.WriteByte('\n')
		}
		t.Errorf("scenario %d shrunk from %d to %d messages (the oracle's input lines):\n%s\ndifferences:\n%s",
			i, len(scenarios[i]), len(small), lines.String(), strings.Join(d, "\n"))
	}
}

// summary counts the steps by how they arrive.
func summary(steps []step) string {
	var events, sqs int
	for _, s := range steps {
		switch {
		case strings.HasPrefix(string(s.Event), `{"attributes"`):
			sqs++
		case s.Event != nil:
			events++
		}
	}
	return fmt.Sprintf("%d bare, %d in events, %d in SQS records", len(steps)-events-sqs, events, sqs)
}

func envInt(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		t.Fatalf("%s=%q is not a count", name, v)
	}
	return n
}

// extraRows adds the providers and the collection of the real messages,
// and a provider on https's default port.
func extraRows(t testing.TB, url string) {
	pool := cumulustest.Pool(t, url)
	if _, err := pool.Exec(context.Background(), `INSERT INTO providers (name, protocol, host) VALUES
		('LPDAAC_HTTPS', 'http', 'https://e4ftl01.cr.usgs.gov:40521'), ('local_ngrok', 'http', 'https://07f1bfba.ngrok.io/'),
		('https_provider', 'https', 'data.example.org')`); err != nil {
		t.Fatal(err)
	}
	cumulustest.AddCollection(t, pool, "AST_L1A___003")
}

var scenarioName = regexp.MustCompile(`s(\d{4})-`)

// implicated lists the scenarios a difference names, in order.
func implicated(diffs []string, owner []int) []int {
	seen := map[int]bool{}
	var out []int
	add := func(i int) {
		if !seen[i] {
			seen[i] = true
			out = append(out, i)
		}
	}
	for _, d := range diffs {
		var step int
		if _, err := fmt.Sscanf(d, "step %d:", &step); err == nil && step < len(owner) {
			add(owner[step])
			continue
		}
		if m := scenarioName.FindStringSubmatch(d); m != nil {
			i, _ := strconv.Atoi(m[1])
			add(i)
		}
	}
	return out
}

// shrink makes a failing scenario smaller while it still differs: whole
// messages first, then granules, files, exceptions and wrappings; it
// returns the smallest found and its differences (none when the scenario
// does not differ on its own).
func shrink(t *testing.T, root string, sc []genStep) ([]genStep, []string) {
	probes := 0
	differs := func(c []genStep) []string {
		probes++
		var d []string
		t.Run(fmt.Sprintf("shrink-%d", probes), func(t *testing.T) {
			steps := make([]step, len(c))
			for i, s := range c {
				steps[i] = s.step()
			}
			d, _ = differences(t, root, steps, extraRows)
		})
		return d
	}
	last := differs(sc)
	if len(last) == 0 {
		return sc, nil
	}
	try := func(c []genStep) bool {
		if probes >= 120 {
			return false
		}
		if d := differs(c); len(d) > 0 {
			sc, last = c, d
			return true
		}
		return false
	}
	for i := len(sc) - 1; i >= 0; i-- {
		c := append(append([]genStep{}, sc[:i]...), sc[i+1:]...)
		if len(c) > 0 {
			try(c)
		}
	}
	for i := range sc {
		for _, smaller := range sc[i].smaller() {
			c := append([]genStep{}, sc...)
			c[i] = smaller
			try(c)
		}
	}
	return sc, last
}

// genStep is one drawn message and how it arrives.
type genStep struct {
	msg   map[string]any // the message, its exception aside
	exc   string         // the exception's text, keys in their drawn order; "" for none
	wrap  int            // 0: the message; 1: in an EventBridge event; 2: that event in an SQS record
	start int64          // the execution's start (ms)
	now   int64
}

const (
	bare = iota
	inEvent
	inSQS
)

// smaller lists the step made smaller in one way each.
func (s genStep) smaller() []genStep {
	var out []genStep
	with := func(f func(c *genStep)) {
		c := s
		c.msg = clone(s.msg)
		f(&c)
		out = append(out, c)
	}
	if s.wrap != bare {
		with(func(c *genStep) { c.wrap = bare })
	}
	if s.exc != "" {
		with(func(c *genStep) { c.exc = "" })
	}
	gs, _ := jsvalue.Get(s.msg, "payload", "granules")
	list, _ := gs.([]any)
	for i := range list {
		with(func(c *genStep) {
			p := jsvalue.Obj(c.msg["payload"])
			l := p["granules"].([]any)
			p["granules"] = append(l[:i:i], l[i+1:]...)
		})
		files, _ := jsvalue.Obj(list[i])["files"].([]any)
		for k := range files {
			with(func(c *genStep) {
				gr := jsvalue.Obj(jsvalue.Obj(c.msg["payload"])["granules"].([]any)[i])
				f := gr["files"].([]any)
				gr["files"] = append(f[:k:k], f[k+1:]...)
			})
		}
	}
	return out
}

func clone(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var c map[string]any
	if err := json.Unmarshal(b, &c); err != nil {
		panic(err) // what json.Marshal wrote
	}
	return c
}

// step is the step both writers are given.
func (s genStep) step() step {
	b, _ := json.Marshal(s.msg)
	text := b
	if s.exc != "" {
		text = []byte(`{"exception":` + s.exc + `,` + string(b[1:]))
	}
	out := step{Now: s.now}
	if s.wrap == bare {
		out.Text = text
		cm := jsvalue.Obj(s.msg["cumulus_meta"])
		if _, ok := cm["workflow_start_time"].(float64); ok {
			out.StartDate = ms(s.start)
		}
		if stop, ok := cm["workflow_stop_time"].(float64); ok {
			out.StopDate = ms(int64(stop))
		}
		return out
	}
	sfn, field := "RUNNING", "input"
	var stop any
	if st, _ := jsvalue.Get(s.msg, "meta", "status"); st == "completed" {
		sfn, field, stop = "SUCCEEDED", "output", float64(s.now-1000)
		out.StopDate = ms(s.now - 1000)
	}
	out.StartDate = ms(s.start)
	arn := "arn:aws:states:us-east-1:123456789012:execution:IngestGranule:" + jsvalue.String(jsvalue.Obj(s.msg["cumulus_meta"])["execution_name"], true)
	detail := map[string]any{
		"executionArn": arn, "stateMachineArn": "arn:aws:states:us-east-1:123456789012:stateMachine:IngestGranule",
		"name": "x", "status": sfn, "startDate": float64(s.start), "stopDate": stop, "input": string(text),
	}
	detail[field] = string(text)
	ev, _ := json.Marshal(map[string]any{
		"version": "0", "id": "e", "detail-type": "Step Functions Execution Status Change", "source": "aws.states",
		"account": "123456789012", "time": time.UnixMilli(s.now).UTC().Format(time.RFC3339), "region": "us-east-1",
		"resources": []any{arn}, "detail": detail,
	})
	if s.wrap == inSQS {
		ev, _ = json.Marshal(map[string]any{"messageId": "m", "receiptHandle": "r", "body": string(ev),
			"attributes": map[string]any{}, "eventSource": "aws:sqs"})
	}
	out.Event = ev
	return out
}

// gen draws scenarios.
type gen struct {
	t    testing.TB
	r    *rand.Rand
	root string // the files root: each scenario's CMR and unsized files
	real []map[string]any
	p    string // the current scenario's prefix of names
	cmr  []byte
	// used holds the file names of the current message: Cumulus writes a
	// message's granules, and a granule's files, concurrently, so a name
	// twice in one message ends as whichever write finished last.
	used map[string]bool
	// collection is the scenario's: most of its messages name it.
	collection map[string]any
}

func newGen(t *testing.T, seed uint64, root string) *gen {
	g := &gen{t: t, r: rand.New(rand.NewPCG(seed, 0x6772616e756c65)), root: root}
	for _, f := range []string{"sync-granule.json", "post-to-cmr.json"} {
		b, err := os.ReadFile(filepath.Join("testdata", f))
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		delete(m, "exception")
		g.real = append(g.real, m)
	}
	var err error
	if g.cmr, err = os.ReadFile(filepath.Join("..", "cmr", "testdata", "MOD09GQ.A2016358.h13v04.006.2016360104606.cmr.xml")); err != nil {
		t.Fatal(err)
	}
	testutil.Check(t, os.MkdirAll(filepath.Join(root, "protected"), 0o755))
	return g
}

func (g *gen) chance(pct int) bool { return g.r.IntN(100) < pct }

// oneOf picks one of vs.
func oneOf[T any](g *gen, vs ...T) T { return vs[g.r.IntN(len(vs))] }

// scenario draws 6–12 messages whose names start with the scenario's
// prefix, so that scenarios do not meet.
func (g *gen) scenario(i int) []genStep {
	g.p = fmt.Sprintf("s%04d-", i)
	g.collection = oneOf(g, collections...)
	for _, own := range []string{"", "g1-", "g2-", "g3-"} {
		testutil.Check(g.t, os.WriteFile(filepath.Join(g.root, "protected", g.p+own+"g.cmr.xml"), g.cmr, 0o644))
		testutil.Check(g.t, os.WriteFile(filepath.Join(g.root, "protected", g.p+own+"unsized.hdf"), make([]byte, 1000+i), 0o644))
	}
	var out []genStep
	for k := range 6 + g.r.IntN(7) {
		out = append(out, g.message(t0+int64(k+1)*10000))
	}
	return out
}

var collections = []map[string]any{
	{"name": "MOD09GQ", "version": "006"}, {"name": "OTHER", "version": "1"}, {"name": "AST_L1A", "version": "003"},
}

var providers = []map[string]any{
	{"id": "s3_provider", "protocol": "s3", "host": "cumulus-test-data"},
	{"id": "http_provider", "protocol": "http", "host": "example.com"},
	{"id": "https_provider", "protocol": "https", "host": "data.example.org", "port": 443.0},
}

func (g *gen) message(now int64) genStep {
	var m map[string]any
	if g.chance(25) {
		m = clone(oneOf(g, g.real...))
		if g.chance(70) {
			delete(m, "payload")
		}
		gs, _ := jsvalue.Get(m, "payload", "granules")
		list, _ := gs.([]any)
		for _, gr := range list {
			gr := jsvalue.Obj(gr)
			gr["granuleId"] = g.p + jsvalue.String(gr["granuleId"], true)
			files, _ := gr["files"].([]any)
			for _, f := range files {
				jsvalue.Obj(f)["name"] = g.p + jsvalue.String(jsvalue.Obj(f)["name"], true)
			}
		}
	} else {
		m = msg("", "", 0)
		delete(m, "payload")
	}
	cm, meta := jsvalue.Obj(m["cumulus_meta"]), jsvalue.Obj(m["meta"])
	cm["execution_name"] = g.p + "e" + strconv.Itoa(g.r.IntN(4))
	s := genStep{msg: m, now: now, start: t0 + int64(g.r.IntN(7)-3)*60000}
	switch {
	case g.chance(94):
		cm["workflow_start_time"] = float64(s.start)
	case g.chance(50):
		delete(cm, "workflow_start_time")
	default:
		cm["workflow_start_time"] = strconv.FormatInt(s.start, 10)
	}
	if g.chance(30) {
		cm["workflow_stop_time"] = float64(now - 1000)
	}
	switch k := g.r.IntN(100); {
	case k < 30:
		meta["status"] = "running"
	case k < 70:
		meta["status"] = "completed"
	case k < 92:
		meta["status"] = "failed"
	default:
		meta["status"] = "queued" // not an execution's status: the execution fails
	}
	if g.chance(2) {
		delete(meta, "status")
	}
	switch k := g.r.IntN(100); {
	case k < 85:
		meta["collection"] = clone(g.collection)
	case k < 95:
		meta["collection"] = clone(oneOf(g, collections...))
	case k < 98:
		meta["collection"] = nil
	default:
		meta["collection"] = map[string]any{"name": "MOD09GQ"}
	}
	if _, realProvider := meta["provider"]; !realProvider || g.chance(50) {
		meta["provider"] = clone(oneOf(g, providers...))
	}
	if g.chance(2) {
		meta["provider"] = nil
	}
	g.used = map[string]bool{}
	if _, kept := m["payload"]; !kept {
		m["payload"] = g.payload()
	}
	s.exc = g.exception()
	if g.chance(5) {
		wf := jsvalue.String(meta["workflow_name"], true)
		cm["sf_event_sqs_to_db_records_types"] = map[string]any{wf: map[string]any{
			jsvalue.String(meta["status"], true): oneOf[any](g, []any{"execution"}, []any{"execution", "granule"}, []any{"granule", "pdr"})}}
	}
	if g.chance(5) {
		cm["parentExecutionArn"] = "arn:aws:states:us-east-1:123456789012:execution:IngestGranule:" + g.p + "e0"
	}
	if g.chance(5) {
		meta["workflow_tasks"] = oneOf[any](g, []any{}, map[string]any{"SyncGranule": map[string]any{"name": "SyncGranule"}})
	}
	switch k := g.r.IntN(100); {
	case k < 70:
	case k < 85:
		s.wrap = inEvent
	default:
		s.wrap = inSQS
	}
	return s
}

func (g *gen) payload() any {
	switch k := g.r.IntN(100); {
	case k < 2:
		return []any{"s3://bucket/" + g.p + "x.hdf"}
	case k < 4:
		return []any{}
	case k < 7:
		return map[string]any{}
	}
	// Distinct granule IDs: Cumulus writes a message's granules
	// concurrently, so two of one ID end as whichever finished last.
	var gs []any
	ids := g.r.Perm(3)
	for i := range oneOf(g, 0, 1, 1, 1, 1, 2, 2, 3) {
		gs = append(gs, g.granule(ids[i]+1))
	}
	p := map[string]any{"granules": gs}
	if gs == nil {
		p["granules"] = []any{}
	}
	if g.chance(20) {
		p["pdr"] = map[string]any{"name": g.p + "p" + strconv.Itoa(g.r.IntN(2)) + ".PDR"}
		p["running"] = []any{"a"}
		p["completed"] = []any{"b", "c"}
		p["failed"] = []any{}
	}
	return p
}

func (g *gen) granule(id int) any {
	gr := map[string]any{}
	switch k := g.r.IntN(100); {
	case k < 95:
		gr["granuleId"] = g.p + "g" + strconv.Itoa(id)
	case k < 98:
		gr["granuleId"] = 5.0
	}
	switch k := g.r.IntN(100); {
	case k < 35:
		gr["createdAt"] = float64(t0 + int64(g.r.IntN(9)-4)*1000)
	case k < 40:
		gr["createdAt"] = nil
	case k < 43:
		gr["createdAt"] = "2023-11-14T22:13:20.000Z"
	}
	switch k := g.r.IntN(100); {
	case k < 25:
		gr["published"] = true
	case k < 50:
		gr["published"] = false
	case k < 53:
		gr["published"] = "true"
	case k < 58:
		gr["published"] = nil
	}
	switch k := g.r.IntN(100); {
	case k < 20:
	case k < 30:
		gr["files"] = []any{}
	case k < 31:
		gr["files"] = nil
	default:
		fs := []any{}
		for range 1 + g.r.IntN(3) {
			if f := g.file(id); f != nil {
				fs = append(fs, f)
			}
		}
		gr["files"] = fs
	}
	if g.chance(30) {
		gr["cmrLink"] = "https://cmr.example/" + g.p
	}
	if g.chance(10) {
		gr["producerGranuleId"] = g.p + "P"
	}
	if g.chance(20) {
		gr["sync_granule_duration"] = float64(g.r.IntN(5000))
	}
	if g.chance(20) {
		gr["post_to_cmr_duration"] = float64(g.r.IntN(5000))
	}
	switch k := g.r.IntN(100); {
	case k < 8:
		gr["beginningDateTime"] = "2020-01-01T00:00:00Z"
	case k < 12:
		gr["beginningDateTime"] = ""
	case k < 15:
		gr["beginningDateTime"] = "not a date"
	}
	if g.chance(15) {
		gr["status"] = oneOf(g, "running", "queued", "completed", "failed")
	}
	if g.chance(5) {
		gr["queryFields"] = map[string]any{"a": 1.0}
	}
	return gr
}

// file draws a file of granule id: a name of the scenario's, met again
// in later messages, or else one of the granule's own; nil when both are
// taken in this message.
func (g *gen) file(id int) any {
	base := oneOf(g, "a.hdf", "b.jpg", "c.met", "g.cmr.xml", "unsized.hdf", "missing.cmr.json")
	name := g.p + base
	if g.used[name] || g.chance(30) {
		name = g.p + "g" + strconv.Itoa(id) + "-" + base
	}
	if g.used[name] {
		return nil
	}
	g.used[name] = true
	f := map[string]any{}
	if g.chance(93) {
		f["bucket"] = oneOf(g, "protected", "protected", "public")
	}
	if g.chance(85) {
		f["key"] = name
	}
	if g.chance(70) {
		f["fileName"] = name
	}
	if g.chance(20) {
		f["name"] = name
	}
	if g.chance(25) {
		f["path"] = oneOf(g, "granules", "/TEST_B/Cumulus/DATA/ID1802151325")
	}
	switch k := g.r.IntN(100); {
	case k < 67:
		f["size"] = float64(g.r.IntN(100000))
	case k < 70:
		f["size"] = "12"
	}
	if g.chance(35) {
		f["checksum"] = oneOf[any](g, "abc", "abc", "abc", "abc", "abc", 2852751863.0)
		f["checksumType"] = oneOf(g, "md5", "CKSUM")
	}
	if g.chance(30) {
		f["type"] = oneOf(g, "data", "metadata", "browse")
	}
	if g.chance(10) {
		f["source"] = "s3://elsewhere/" + name
	}
	return f
}

// exception is the text of a drawn exception, keys in a drawn order; ""
// for none.
func (g *gen) exception() string {
	switch k := g.r.IntN(100); {
	case k < 30:
		return ""
	case k < 60:
		return `"None"`
	case k < 90:
		members := []string{`"Error":"States.TaskFailed"`,
			oneOf(g, `"Cause":"task failed"`, `"Cause":{"errorMessage":"boom","errorType":"Error","stackTrace":["a","b"]}`)}
		if g.chance(30) {
			members = append(members, `"2":"x"`)
		}
		g.r.Shuffle(len(members), func(i, j int) { members[i], members[j] = members[j], members[i] })
		return "{" + strings.Join(members, ",") + "}"
	case k < 94:
		return `[]`
	case k < 97:
		return `null`
	}
	return `[{"Error":"e","Cause":"c"}]`
}
