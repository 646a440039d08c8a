package records

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/cumulus/jsvalue"
	"github.com/backfill-dev/backfill/internal/cumulustest"
	"github.com/backfill-dev/backfill/internal/s3test"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
	"github.com/backfill-dev/backfill/internal/testutil"
)

const t0 = int64(1700000000000) // workflow start of the first execution

// msg builds a Cumulus message of the MOD09GQ collection from the s3
// provider: execution name exec, status, start time and granules.
func msg(exec, status string, start int64, granules ...map[string]any) map[string]any {
	gs := make([]any, len(granules))
	for i, g := range granules {
		gs[i] = g
	}
	return map[string]any{
		"cumulus_meta": map[string]any{
			"state_machine":       "arn:aws:states:us-east-1:123456789012:stateMachine:IngestGranule",
			"execution_name":      exec,
			"workflow_start_time": float64(start),
			"cumulus_version":     "21.0.0",
		},
		"meta": map[string]any{
			"status":        status,
			"workflow_name": "IngestGranule",
			"collection":    map[string]any{"name": "MOD09GQ", "version": "006"},
			"provider":      map[string]any{"id": "s3_provider", "protocol": "s3", "host": "cumulus-test-data"},
		},
		"payload": map[string]any{"granules": gs},
	}
}

func files(specs ...[2]any) []any {
	var out []any
	for _, s := range specs {
		out = append(out, map[string]any{"bucket": "protected", "key": s[0], "fileName": s[0], "size": s[1], "type": "data"})
	}
	return out
}

func ms(v int64) *int64 { return &v }

func at(m map[string]any, now int64) step {
	start, ok := jsvalue.Obj(m["cumulus_meta"])["workflow_start_time"].(float64)
	if !ok {
		return step{Message: m, Now: now}
	}
	return step{Message: m, StartDate: ms(int64(start)), StopDate: ms(now - 1000), Now: now}
}

func with(m map[string]any, f func(m map[string]any)) map[string]any {
	c := clone(m)
	f(c)
	return c
}

// The message-path and model scenarios of Cumulus's own tests, each a
// sequence of messages, written by backfill and by Cumulus v21 on
// databases its migrations made: the same outcome per message and the same
// rows at the end.
func TestWrite_SameAsCumulus(t *testing.T) {
	root := t.TempDir()
	cmrSrc := filepath.Join("..", "cmr", "testdata", "MOD09GQ.A2016358.h13v04.006.2016360104606.cmr.xml")
	b, err := os.ReadFile(cmrSrc)
	if err != nil {
		t.Fatal(err)
	}
	testutil.Check(t, os.MkdirAll(filepath.Join(root, "protected"), 0o755))
	testutil.Check(t, os.WriteFile(filepath.Join(root, "protected", "g1.cmr.xml"), b, 0o644))
	testutil.Check(t, os.WriteFile(filepath.Join(root, "protected", "unsized.hdf"), make([]byte, 1234), 0o644))

	g := func(id string, kv ...any) map[string]any {
		m := map[string]any{"granuleId": id}
		for i := 0; i+1 < len(kv); i += 2 {
			m[kv[i].(string)] = kv[i+1]
		}
		return m
	}
	// exc gives a step's message an exception as this text, in its key
	// order.
	exc := func(s step, exception string) step {
		b, _ := json.Marshal(s.Message)
		s.Text = json.RawMessage(`{"exception":` + exception + `,` + string(b[1:]))
		return s
	}
	base := g("g1", "files", files([2]any{"g1.hdf", 5.0}, [2]any{"g1.jpg", 10.0}), "cmrLink", "https://cmr/g1", "published", true,
		"sync_granule_duration", 1500.0, "post_to_cmr_duration", 2500.0)
	scenarios := map[string][]step{
		"completed, then stale running, then newer running": {
			at(msg("e1", "completed", t0, base), t0+10000),
			at(msg("e1", "running", t0, base), t0+20000),
			at(msg("e2", "running", t0-86400000, base), t0+30000),
			at(msg("e3", "running", t0+60000, g("g1", "files", files([2]any{"other.hdf", 1.0}))), t0+70000),
		},
		"queued updates are dropped": {
			at(msg("e1", "completed", t0, base), t0+10000),
			at(msg("e1", "queued", t0, base), t0+20000),
			at(msg("e4", "queued", t0+1000, base), t0+30000),
		},
		"final over final, older is dropped": {
			at(msg("e1", "completed", t0, base), t0+10000),
			at(msg("e2", "failed", t0-100000, base), t0+20000),
			at(msg("e3", "completed", t0+5000, g("g1", "files", files([2]any{"a", 5.0}, [2]any{"b", 10.0}, [2]any{"c", 15.0}, [2]any{"d", 20.0}))), t0+30000),
		},
		"defaults, nulls and partial rewrites": {
			at(msg("e1", "completed", t0, base), t0+10000),
			at(msg("e2", "completed", t0+1000, g("g1", "beginningDateTime", nil, "cmrLink", nil, "createdAt", nil, "published", nil,
				"productVolume", nil, "timeToArchive", nil, "queryFields", nil)), t0+20000),
			at(msg("e3", "completed", t0+2000, g("g1", "files", []any{})), t0+30000),
			at(msg("e4", "completed", t0+3000, g("g2", "createdAt", float64(t0+2500), "producerGranuleId", "P2", "files", files([2]any{"g2.hdf", 7.0}))), t0+40000),
		},
		"CMR file and unsized file": {
			at(msg("e1", "completed", t0, g("g1", "files", []any{
				map[string]any{"bucket": "protected", "key": "g1.cmr.xml", "size": 100.0},
				map[string]any{"bucket": "protected", "key": "unsized.hdf"},
			})), t0+10000),
			at(msg("e2", "completed", t0+1000, g("g3", "beginningDateTime", "2020-01-01T00:00:00Z", "files", []any{
				map[string]any{"bucket": "protected", "key": "missing.cmr.json", "size": 1.0},
			})), t0+20000),
		},
		"failures": {
			at(msg("e1", "completed", t0, g("g1", "files", nil)), t0+10000),
			at(msg("e2", "completed", t0, base, map[string]any{}), t0+20000),
			at(with(msg("e3", "completed", t0, base), func(m map[string]any) { delete(jsvalue.Obj(m["cumulus_meta"]), "workflow_start_time") }), t0+30000),
			at(msg("e4", "queued", t0+1000, g("g5")), t0+40000),
			at(msg("e5", "completed", t0+2000, g("g5", "files", []any{map[string]any{"bucket": "protected", "key": "n", "checksum": 5.0}})), t0+50000),
			at(with(msg("e6", "completed", t0, base), func(m map[string]any) {
				jsvalue.Obj(m["meta"])["collection"] = map[string]any{"name": "NOPE", "version": "1"}
			}), t0+60000),
			at(with(msg("e7", "completed", t0, base), func(m map[string]any) { jsvalue.Obj(m["meta"])["provider"].(map[string]any)["id"] = "nope" }), t0+70000),
			at(msg("e8", "failed", t0+3000, g("g6", "files", []any{map[string]any{"key": "nobucket"}, map[string]any{"bucket": "protected", "key": "ok6", "size": 3.0}})), t0+80000),
		},
		"fields absent on a rewrite": {
			at(msg("e1", "completed", t0, g("g7", "files", []any{map[string]any{"bucket": "protected", "key": "g7.hdf", "fileName": "g7.hdf",
				"size": 70.0, "checksum": "abc", "checksumType": "md5", "type": "data", "path": "granules"}})), t0+10000),
			at(msg("e2", "completed", t0+1000, g("g7", "files", []any{map[string]any{"bucket": "protected", "key": "g7.hdf"}})), t0+20000),
		},
		"granules without a string granuleId, granule writes off": {
			at(msg("e1", "completed", t0, base), t0+10000),
			at(with(msg("e2", "completed", t0+1000, base, map[string]any{"granuleId": 5.0}), func(m map[string]any) {
				jsvalue.Obj(m["cumulus_meta"])["sf_event_sqs_to_db_records_types"] = map[string]any{"IngestGranule": map[string]any{"completed": []any{"execution"}}}
			}), t0+20000),
			at(with(msg("e3", "completed", t0+2000, base), func(m map[string]any) {
				jsvalue.Obj(m["cumulus_meta"])["sf_event_sqs_to_db_records_types"] = map[string]any{"IngestGranule": map[string]any{"completed": []any{"execution"}}}
			}), t0+30000),
		},
		"a schema error and a date that does not convert": {
			at(msg("e1", "completed", t0, base), t0+10000),
			at(msg("e2", "completed", t0+1000, g("g1", "published", "true", "beginningDateTime", "")), t0+20000),
		},
		"top-level arrays into jsonb": {
			at(with(msg("e1", "completed", t0), func(m map[string]any) {
				m["payload"] = []any{map[string]any{"cmr": "x"}, "b\\\"c"}
			}), t0+10000),
			at(with(msg("e2", "completed", t0+1000, base), func(m map[string]any) {
				m["exception"] = []any{}
				jsvalue.Obj(m["meta"])["workflow_tasks"] = []any{}
			}), t0+20000),
			at(with(msg("e3", "running", t0+2000), func(m map[string]any) { m["payload"] = []any{} }), t0+30000),
		},
		"exception key order": {
			at(msg("e1", "completed", t0, base, g("g8")), t0+10000),
			exc(at(msg("e2", "completed", t0+1000, g("g1", "published", "true")), t0+20000),
				`{"Error":"States.TaskFailed","Cause":{"z":1,"a":{"2":"x","10":"w","1":"y","b":true,"01":0}},"Error":"again"}`),
			exc(at(msg("e3", "failed", t0+2000, g("g8", "files", []any{map[string]any{"key": "nobucket"}})), t0+30000), `"None"`),
			exc(at(msg("e4", "failed", t0+3000, g("g9", "files", []any{map[string]any{"key": "nobucket"}})), t0+40000),
				`[{"Cause":"c\u2028\u0001","Error":"e"},3.50,1e2]`),
		},
		"cross-collection": {
			at(msg("e1", "completed", t0, base), t0+10000),
			at(with(msg("e2", "completed", t0+1000, base), func(m map[string]any) {
				jsvalue.Obj(m["meta"])["collection"] = map[string]any{"name": "OTHER", "version": "1"}
			}), t0+20000),
		},
		"exception and PDR": {
			at(with(msg("e1", "failed", t0, base), func(m map[string]any) {
				m["exception"] = map[string]any{"Error": "Unknown error", "Cause": map[string]any{"Error": "Workflow failed"}}
				jsvalue.Obj(m["payload"])["pdr"] = map[string]any{"name": "p1.PDR"}
				jsvalue.Obj(m["payload"])["running"] = []any{"a"}
				jsvalue.Obj(m["payload"])["completed"] = []any{"b", "c"}
			}), t0+10000),
			at(with(msg("e2", "completed", t0+1000, g("g7")), func(m map[string]any) { m["exception"] = "None" }), t0+20000),
		},
	}
	for name, steps := range scenarios {
		t.Run(name, func(t *testing.T) {
			t.Parallel() // databases of its own; the oracle's process takes one case at a time
			compare(t, root, steps)
		})
	}
}

// Through the writer, on its own: a completed granule with a CMR file gets
// the file's four values (Cumulus's, for this fixture); one whose CMR file
// is missing keeps the payload's own values.
func TestWrite_CMRColumns(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "cmr", "testdata", "MOD09GQ.A2016358.h13v04.006.2016360104606.cmr.xml"))
	if err != nil {
		t.Fatal(err)
	}
	// The buckets as a local folder, as an s3:// prefix, and as S3 itself.
	local := t.TempDir()
	testutil.Check(t, os.MkdirAll(filepath.Join(local, "protected"), 0o755))
	testutil.Check(t, os.WriteFile(filepath.Join(local, "protected", "g1.cmr.xml"), b, 0o644))
	s3test.Start(t, "protected", "files")
	for _, loc := range []string{"s3://protected/g1.cmr.xml", "s3://files/root/protected/g1.cmr.xml"} {
		parent, base := store.Split(loc)
		st, err := location.Open(context.Background(), parent)
		if err != nil {
			t.Fatal(err)
		}
		if err := store.WriteFile(t.Context(), st, base, b); err != nil {
			t.Fatal(err)
		}
	}
	for _, root := range []string{local, "s3://", "s3://files/root"} {
		t.Run(map[bool]string{true: "local", false: root}[root == local], func(t *testing.T) { cmrColumns(t, root) })
	}
}

func cmrColumns(t *testing.T, root string) {
	url := ownDB(t)
	errs := runOurs(t, url, root, []step{
		at(msg("e1", "completed", t0, map[string]any{"granuleId": "g1", "beginningDateTime": "2001-01-01T00:00:00Z", "files": []any{
			map[string]any{"bucket": "protected", "key": "g1.cmr.xml", "size": 100.0}}}), t0+10000),
		at(msg("e2", "completed", t0, map[string]any{"granuleId": "g2", "beginningDateTime": "2020-01-01T00:00:00Z",
			"endingDateTime": "2020-01-02T00:00:00.5+01:00", "files": []any{
				map[string]any{"bucket": "protected", "key": "missing.cmr.json", "size": 1.0}}}), t0+20000),
	})
	if errs[0] != "" || errs[1] != "" {
		t.Fatalf("errors %q", errs)
	}
	want := map[string]string{
		"g1": "2016-12-23T13:45:00.000Z 2016-12-23T17:05:00.000Z 2016-12-25T10:46:06.000Z 2018-04-26T21:33:43.913Z",
		"g2": "2020-01-01T00:00:00.000Z 2020-01-01T23:00:00.500Z - -",
	}
	rows := cumulustest.Lines(t, cumulustest.Pool(t, url), `SELECT granule_id || ' ' || concat_ws(' ',
		coalesce(to_char(beginning_date_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), '-'),
		coalesce(to_char(ending_date_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), '-'),
		coalesce(to_char(production_date_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), '-'),
		coalesce(to_char(last_update_date_time AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'), '-'))
		FROM granules ORDER BY 1`)
	for _, row := range rows {
		id, got, _ := strings.Cut(row, " ")
		if got != want[id] {
			t.Errorf("%s: %s, want %s", id, got, want[id])
		}
	}
	if len(rows) != 2 {
		t.Errorf("%d granules", len(rows))
	}
}
