package message

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"
	"time"
)

func cumulusMsg(status string) map[string]any {
	return map[string]any{
		"cumulus_meta": map[string]any{
			"state_machine": "arn:aws:states:us-east-1:123:stateMachine:Ingest", "execution_name": "exec-1",
			"workflow_start_time": 1700000000000.0, "workflow_stop_time": 1700000009000.0,
		},
		"meta": map[string]any{
			"status": status, "collection": map[string]any{"name": "MOD09GQ", "version": "006"},
			"provider": map[string]any{"id": "prov"},
		},
		"payload": map[string]any{"granules": []any{map[string]any{"granuleId": "g1"}, map[string]any{"files": []any{}}}},
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func event(t *testing.T, status string, input, output any) map[string]any {
	d := map[string]any{
		"executionArn":    "arn:aws:states:us-east-1:123:execution:Ingest:exec-9",
		"stateMachineArn": "arn:aws:states:us-east-1:123:stateMachine:Ingest",
		"status":          status, "startDate": 1700000001000.0, "stopDate": 1700000002000.0,
	}
	if input != nil {
		d["input"] = mustJSON(t, input)
	}
	if output != nil {
		d["output"] = mustJSON(t, output)
	}
	return map[string]any{
		"version": "0", "id": "e", "detail-type": "Step Functions Execution Status Change", "source": "aws.states",
		"time": "2024-02-29T23:59:59Z", "detail": d,
	}
}

// sqs nests body in depth SQS records, each level with its own metadata
// and a messageId every level has.
func sqs(t *testing.T, body any, depth int) []byte {
	b := []byte(mustJSON(t, body))
	for level := depth; level >= 1; level-- {
		b = []byte(mustJSON(t, map[string]any{
			"messageId": fmt.Sprintf("level-%d", level), fmt.Sprintf("only%d", level): level,
			"eventSource": "aws:sqs", "body": string(b),
		}))
	}
	return b
}

// The Cumulus message and the dates are found at every nesting depth, in
// bare messages, events and SQS records; the metadata of the outermost
// level wins.
func TestDecode_Shapes(t *testing.T) {
	bare := cumulusMsg("completed")
	for depth := 0; depth <= 3; depth++ {
		for _, kind := range []string{"bare", "event"} {
			t.Run(fmt.Sprintf("%s/depth%d", kind, depth), func(t *testing.T) {
				var body any = bare
				if kind == "event" {
					body = event(t, "SUCCEEDED", cumulusMsg("running"), bare)
				}
				raw := sqs(t, body, depth)
				env, err := Decode(raw, Options{})
				if err != nil {
					t.Fatal(err)
				}
				if got := mustJSON(t, env.Message["payload"]); got != mustJSON(t, bare["payload"]) {
					t.Errorf("payload %s", got)
				}
				if env.Message["meta"].(map[string]any)["status"] != "completed" {
					t.Errorf("status %v", env.Message["meta"])
				}
				if depth > 0 {
					if env.Meta["messageId"] != "level-1" {
						t.Errorf("messageId %v, want the outermost", env.Meta["messageId"])
					}
					for l := 1; l <= depth; l++ {
						if env.Meta[fmt.Sprintf("only%d", l)] != float64(l) {
							t.Errorf("metadata of level %d lost: %v", l, env.Meta)
						}
					}
				}
				if mustJSON(t, body) != string(env.Body) {
					t.Errorf("body %s", env.Body)
				}
				wantStart, wantStop := int64(1700000000000), int64(1700000009000)
				if kind == "event" {
					wantStart, wantStop = 1700000001000, 1700000002000
				}
				if env.StartDate == nil || *env.StartDate != wantStart || env.StopDate == nil || *env.StopDate != wantStop {
					t.Errorf("dates %v %v", env.StartDate, env.StopDate)
				}
			})
		}
	}
}

// The exception's text is the message's own, in its key order, in a bare
// message, in an SQS record and in an event: the last member of that name,
// as JSON.parse keeps; none for an exception that is not an object or an
// array, and none where the text is not the message's.
func TestDecode_ExceptionText(t *testing.T) {
	const exc = `{"Error":"e","Cause":{"z":1,"a":[{"y":2,"b":3}]}}`
	msg := `{"exception":"first","cumulus_meta":{"execution_name":"x"},"exception":` + exc + `,"meta":{}}`
	quoted, _ := json.Marshal(msg)
	evt := `{"detail-type":"Step Functions Execution Status Change","detail":{"status":"SUCCEEDED","output":` + string(quoted) + `}}`
	evtQuoted, _ := json.Marshal(evt)
	for name, raw := range map[string]string{
		"bare":        msg,
		"sqs":         `{"messageId":"1","body":` + string(quoted) + `}`,
		"event":       evt,
		"event (sqs)": `{"messageId":"1","body":` + string(evtQuoted) + `}`,
	} {
		env, err := Decode([]byte(raw), Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(env.Exception) != exc {
			t.Errorf("%s: exception %s, want %s", name, env.Exception, exc)
		}
	}
	for name, raw := range map[string]string{
		"a string":       `{"cumulus_meta":{},"exception":"None"}`,
		"none":           `{"cumulus_meta":{}}`,
		"body an object": `{"body":{"cumulus_meta":{},"exception":{"b":1,"a":2}}}`,
	} {
		env, err := Decode([]byte(raw), Options{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if name == "body an object" {
			if string(env.Exception) != `{"a":2,"b":1}` {
				t.Errorf("%s: exception %s, want the body's as it is written again", name, env.Exception)
			}
		} else if env.Exception != nil {
			t.Errorf("%s: exception %s", name, env.Exception)
		}
	}
}

// The status mapping of Cumulus's getCumulusMessageFromExecutionEvent.
func TestDecode_EventStatus(t *testing.T) {
	in, out := cumulusMsg("x"), cumulusMsg("y")
	in["payload"] = map[string]any{"from": "input"}
	out["payload"] = map[string]any{"from": "output"}
	for _, c := range []struct {
		sfn, status, from string
		output            bool
	}{
		{"RUNNING", "running", "input", true},
		{"SUCCEEDED", "completed", "output", true},
		{"FAILED", "failed", "input", false},
		{"FAILED", "failed", "output", true},
		{"ABORTED", "failed", "input", false},
		{"TIMED_OUT", "failed", "input", false},
	} {
		var o any
		if c.output {
			o = out
		}
		env, err := Decode([]byte(mustJSON(t, event(t, c.sfn, in, o))), Options{})
		if err != nil {
			t.Fatalf("%s: %v", c.sfn, err)
		}
		m := env.Message
		if got := m["meta"].(map[string]any)["status"]; got != c.status {
			t.Errorf("%s: status %v, want %s", c.sfn, got, c.status)
		}
		if got := m["payload"].(map[string]any)["from"]; got != c.from {
			t.Errorf("%s (output %v): message from %v, want %s", c.sfn, c.output, got, c.from)
		}
		if got := m["cumulus_meta"].(map[string]any)["workflow_stop_time"]; got != 1700000002000.0 {
			t.Errorf("%s: workflow_stop_time %v", c.sfn, got)
		}
	}
	if _, err := Decode([]byte(mustJSON(t, event(t, "PENDING_REDRIVE", in, nil))), Options{}); err == nil || !strings.Contains(err.Error(), "PENDING_REDRIVE") {
		t.Errorf("unknown status: %v", err)
	}
	if _, err := Decode([]byte(mustJSON(t, event(t, "SUCCEEDED", in, nil))), Options{}); err == nil || !strings.Contains(err.Error(), "detail.output") {
		t.Errorf("succeeded without output: %v", err)
	}
}

// Every input that holds no message gives an error and keeps its text.
func TestDecode_Bad(t *testing.T) {
	deep := []byte(`{"cumulus_meta":{}}`)
	for range MaxDepth + 1 {
		deep = []byte(mustJSON(t, map[string]any{"body": string(deep)}))
	}
	for name, c := range map[string]struct {
		raw, err string
	}{
		"malformed":      {`{"cumulus_meta": `, "malformed JSON"},
		"trailing":       {`{"cumulus_meta": {}} x`, "malformed JSON"},
		"invalid utf-8":  {"{\"a\":\"\xff\"}", "invalid UTF-8"},
		"array":          {`[1]`, "not a JSON object"},
		"no message":     {`{"a": 1}`, "neither a Cumulus message"},
		"body not JSON":  {`{"body": "nope"}`, "SQS body (level 1) is not JSON"},
		"body number":    {`{"body": 5}`, "is a number"},
		"meta not obj":   {`{"cumulus_meta": 5}`, "without a cumulus_meta object"},
		"too deep":       {string(deep), "nested deeper"},
		"remote no root": {`{"cumulus_meta": {}, "replace": {"Bucket": "b", "Key": "k"}}`, "no files root"},
	} {
		env, err := Decode([]byte(c.raw), Options{})
		var me *Error
		if err == nil || !strings.Contains(err.Error(), c.err) || !errors.As(err, &me) {
			t.Errorf("%s: error %v, want %q", name, err, c.err)
		}
		if env == nil || len(env.Body) == 0 {
			t.Errorf("%s: the body is lost", name)
		}
	}
}

// A remote message is read from the files root, whole or at TargetPath.
func TestDecode_Remote(t *testing.T) {
	stored := cumulusMsg("completed")
	open := func(bucket, key string) (io.ReadCloser, error) {
		if bucket != "sys" || key != "events/1.json" {
			return nil, fmt.Errorf("no object %s/%s", bucket, key)
		}
		return io.NopCloser(strings.NewReader(mustJSON(t, stored))), nil
	}
	whole := map[string]any{"cumulus_meta": map[string]any{}, "replace": map[string]any{"Bucket": "sys", "Key": "events/1.json", "TargetPath": "$"}}
	env, err := Decode([]byte(mustJSON(t, whole)), Options{Open: open})
	if err != nil || mustJSON(t, env.Message) != mustJSON(t, stored) {
		t.Fatalf("whole: %v %v", err, env.Message)
	}
	part := cumulusMsg("running")
	part["payload"] = map[string]any{}
	part["replace"] = map[string]any{"Bucket": "sys", "Key": "events/1.json", "TargetPath": "$.payload"}
	env, err = Decode([]byte(mustJSON(t, part)), Options{Open: open})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := env.Message["replace"]; ok || mustJSON(t, env.Message["payload"]) != mustJSON(t, stored) {
		t.Errorf("at $.payload: %v", env.Message)
	}
	part["replace"] = map[string]any{"Bucket": "sys", "Key": "missing"}
	if _, err := Decode([]byte(mustJSON(t, part)), Options{Open: open}); err == nil || !strings.Contains(err.Error(), "s3://sys/missing") {
		t.Errorf("missing object: %v", err)
	}
}

// The archive record has Cumulus's fields, with the metadata of every
// level and the innermost body as text; reading the record back gives the
// same message.
func TestDeadLetter(t *testing.T) {
	ev := event(t, "FAILED", cumulusMsg("running"), nil)
	raw := sqs(t, ev, 2)
	env, err := Decode(raw, Options{})
	if err != nil {
		t.Fatal(err)
	}
	rec := DeadLetter(env, "Error: boom")
	var got map[string]any
	if err := json.Unmarshal(rec, &got); err != nil {
		t.Fatalf("%v: %s", err, rec)
	}
	want := map[string]any{
		"messageId": "level-1", "only1": 1.0, "only2": 2.0, "eventSource": "aws:sqs",
		"body": mustJSON(t, ev), "collectionId": "MOD09GQ___006", "providerId": "prov", "granules": []any{"g1", nil},
		"executionArn": "arn:aws:states:us-east-1:123:execution:Ingest:exec-9", "stateMachineArn": "arn:aws:states:us-east-1:123:stateMachine:Ingest",
		"status": "FAILED", "time": "2024-02-29T23:59:59Z", "error": "Error: boom",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("record\n got %v\nwant %v", got, want)
	}
	if k := Key(rec, "U", time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)); k != "2024-02-29/exec-9-U" {
		t.Errorf("key %s", k)
	}
	back, err := Decode(rec, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if mustJSON(t, back.Message) != mustJSON(t, env.Message) {
		t.Errorf("read back: %v", back.Message)
	}
	// Archived again, the record's own fields are not repeated from its metadata.
	again := DeadLetter(back, "Error: again")
	if strings.Count(string(again), `"error":`) != 1 || !strings.Contains(string(again), `"error":"Error: again"`) {
		t.Errorf("archived twice: %s", again)
	}

	// A bare message: the execution from cumulus_meta; no time, so today.
	env, _ = Decode([]byte(mustJSON(t, cumulusMsg("completed"))), Options{})
	rec = DeadLetter(env, "x")
	if k := Key(rec, "U", time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)); k != "2030-01-02/exec-1-U" {
		t.Errorf("bare key %s", k)
	}
	// Not JSON at all: kept whole, named unknown.
	env, _ = Decode([]byte("{oops"), Options{})
	rec = DeadLetter(env, "x")
	if err := json.Unmarshal(rec, &got); err != nil || got["body"] != "{oops" {
		t.Errorf("bad input record %s", rec)
	}
	if k := Key(rec, "U", time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)); k != "2030-01-02/unknown-U" {
		t.Errorf("bad input key %s", k)
	}
	env, _ = Decode([]byte("\xff\xfe"), Options{})
	if err := json.Unmarshal(DeadLetter(env, "x"), &got); err != nil || got["bodyBase64"] != "//4=" {
		t.Errorf("invalid UTF-8 record %v", got)
	}
}

func TestKey_Names(t *testing.T) {
	day := time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC)
	for arn, want := range map[any]string{
		"arn:aws:states:us-east-1:1:execution:sm:name-1": "name-1",
		"a/b/c":                         "c",
		"ends-with:":                    "unknown",
		"x:../../etc":                   "etc",
		"x:we ird\x00n":                 "we_ird_n",
		nil:                             "unknown",
		5.0:                             "unknown",
		"x:" + strings.Repeat("a", 300): strings.Repeat("a", 128),
	} {
		rec := mustJSON(t, map[string]any{"executionArn": arn, "time": "2020-05-05T23:00:00-02:00"})
		if k := Key([]byte(rec), "U", day); k != "2020-05-06/"+want+"-U" {
			t.Errorf("%q: key %s", arn, k)
		}
	}
}

func scanAll(t *testing.T, in string) []string {
	t.Helper()
	var out []string
	err := Scan(context.Background(), strings.NewReader(in), func(it Item) error {
		if it.Err != nil {
			out = append(out, it.Where()+" ERR")
			return nil
		}
		out = append(out, it.Where()+" "+string(it.Raw))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestScan(t *testing.T) {
	for name, c := range map[string]struct {
		in   string
		want []string
	}{
		"lines":         {"{\"a\":1}\n\n{\"b\":2}\r\nnot json\n", []string{"1 {\"a\":1}", "3 {\"b\":2}", "4 not json"}},
		"document":      {"{\n  \"a\": [1,\n 2]\n}\n", []string{"1 {\n  \"a\": [1,\n 2]\n}"}},
		"records":       {`{"Records": [{"body": "x"}, {"body": "y"}]}`, []string{`1[0] {"body": "x"}`, `1[1] {"body": "y"}`}},
		"array":         {"[\n{\"a\":1},\n{\"b\":2}\n]", []string{"1[0] {\"a\":1}", "1[1] {\"b\":2}"}},
		"broken first":  {"{\"a\":\n{\"b\":2}\n{\"c\":3}\n", []string{"1 {\"a\":", "2 {\"b\":2}", "3 {\"c\":3}"}},
		"broken doc":    {"{\n \"a\": \n", []string{"1 {\n \"a\": "}},
		"empty":         {"\n\n", nil},
		"records other": {`{"Records": [1], "x": 2}`, []string{`1 {"Records": [1], "x": 2}`}},
	} {
		if got := scanAll(t, c.in); !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: got %q, want %q", name, got, c.want)
		}
	}
}

func FuzzDecode(f *testing.F) {
	f.Add([]byte(`{"cumulus_meta":{},"meta":{}}`))
	f.Add([]byte(`{"body":"{\"body\":\"{}\"}"}`))
	f.Add([]byte(`{"detail-type":"Step Functions Execution Status Change","detail":{"status":"RUNNING","input":"{\"cumulus_meta\":{}}"}}`))
	f.Add([]byte(`{"cumulus_meta":{},"replace":{"Bucket":"b","Key":"k","TargetPath":"$.a.b"}}`))
	open := func(bucket, key string) (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(`{"cumulus_meta":{"x":1}}`)), nil
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		env, err := Decode(raw, Options{Open: open})
		if err == nil && env.Message == nil {
			t.Fatal("no error and no message")
		}
		rec := DeadLetter(env, "e")
		if !json.Valid(rec) {
			t.Fatalf("record not JSON: %s", rec)
		}
		Key(rec, "u", time.Unix(0, 0))
	})
}
