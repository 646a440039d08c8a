// Package message reads the inputs of the Cumulus granule writer: bare
// Cumulus workflow messages, EventBridge "Step Functions Execution Status
// Change" events, and SQS records that carry either in their body, nested
// at any depth, as Cumulus's queues and Dead Letter Archive hold them. It
// finds the Cumulus message and the execution's dates in one (Decode),
// and builds the Dead Letter Archive record of one that failed
// (DeadLetter).
package message

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"
)

// MaxDepth bounds the nesting of SQS bodies.
const MaxDepth = 16

// Envelope is one decoded input.
type Envelope struct {
	// Meta holds the SQS metadata of every level (messageId,
	// receiptHandle, attributes, …): for a key found at several levels,
	// the outermost value.
	Meta map[string]any
	// Body is the innermost body as text: the event or message itself.
	Body []byte
	// Remote is the size of the remote message loaded in place of (a
	// part of) the message, 0 when there is none.
	Remote int64
	// Event is the EventBridge event, when the body is one.
	Event map[string]any
	// Message is the Cumulus message; nil when none was found.
	Message map[string]any
	// Exception is the message's exception as the text it was read from
	// held it, when it is an object or an array: JSON objects decode into
	// Go maps, which lose the key order that Cumulus keeps when it writes
	// the exception into a granule's errors. Nil otherwise, and where the
	// text is not the message's own (an SQS body given as an object, a
	// remote message replacing a part of it).
	Exception json.RawMessage
	// StartDate and StopDate are the execution's start and stop
	// (milliseconds since the epoch) from the event, or from the message's
	// workflow_start_time and workflow_stop_time; nil when unknown.
	StartDate, StopDate *int64
}

// Options configure Decode.
type Options struct {
	// Open reads the object bucket/key that a remote message ("replace")
	// points at; nil refuses remote messages.
	Open func(bucket, key string) (io.ReadCloser, error)
	// MaxRemote bounds a remote message's size (default 64 MiB).
	MaxRemote int64
}

// Error is an input that holds no Cumulus message the writer can take.
type Error struct{ Msg string }

func (e *Error) Error() string { return e.Msg }

func errorf(format string, args ...any) error { return &Error{fmt.Sprintf(format, args...)} }

// Decode reads one input. On error, the envelope holds what was found
// before it (at least Body), for the Dead Letter Archive record.
func Decode(raw []byte, opt Options) (*Envelope, error) {
	env := &Envelope{Meta: map[string]any{}, Body: bytes.TrimSpace(raw)}
	v, err := parse(env.Body)
	if err != nil {
		return env, errorf("malformed JSON: %v", err)
	}
	for depth := 0; ; depth++ {
		o, ok := v.(map[string]any)
		if !ok {
			return env, errorf("not a JSON object but %s", kind(v))
		}
		body, key := o["body"], "body"
		if _, ok := o["body"]; !ok {
			body, key = o["Body"], "Body"
		}
		if _, ok := o[key]; !ok {
			break
		}
		if depth == MaxDepth {
			return env, errorf("SQS bodies nested deeper than %d", MaxDepth)
		}
		for k, x := range o {
			if k == "body" || k == "Body" {
				continue
			}
			if _, seen := env.Meta[k]; !seen {
				env.Meta[k] = x
			}
		}
		switch b := body.(type) {
		case string:
			env.Body = []byte(b)
			if v, err = parse(env.Body); err != nil {
				return env, errorf("SQS body (level %d) is not JSON: %v", depth+1, err)
			}
		case map[string]any:
			env.Body, _ = json.Marshal(b)
			v = b
		default:
			return env, errorf("SQS body (level %d) is %s, not a string or object", depth+1, kind(body))
		}
	}
	o := v.(map[string]any)
	if isEvent(o) {
		env.Event = o
		return env, fromEvent(env, opt)
	}
	if _, ok := o["cumulus_meta"]; ok || o["replace"] != nil {
		m, text, err := loadRemote(env, o, env.Body, opt)
		if err != nil {
			return env, err
		}
		if err := checkMessage(m); err != nil {
			return env, err
		}
		env.Message = m
		env.Exception = exceptionOf(m, text)
		cm, _ := m["cumulus_meta"].(map[string]any)
		env.StartDate = millis(cm["workflow_start_time"])
		env.StopDate = millis(cm["workflow_stop_time"])
		return env, nil
	}
	return env, errorf("neither a Cumulus message (no cumulus_meta), an EventBridge Step Functions event nor an SQS record (no body)")
}

// isEvent tells an EventBridge Step Functions status-change event.
func isEvent(o map[string]any) bool {
	_, ok := o["detail"].(map[string]any)
	return ok && (o["detail-type"] == "Step Functions Execution Status Change" || o["source"] == "aws.states")
}

// statuses maps the Step Functions status to the message's meta.status.
var statuses = map[string]string{
	"RUNNING": "running", "SUCCEEDED": "completed",
	"FAILED": "failed", "ABORTED": "failed", "TIMED_OUT": "failed",
}

// fromEvent finds the Cumulus message of an event as Cumulus does
// (getCumulusMessageFromExecutionEvent): the input of a running
// execution, the output of a succeeded one; for a failed one, Cumulus
// rebuilds the failed step's message from the execution history, which
// only Step Functions has: the output when the event carries one, else
// the input. Then meta.status is set from the event's status and
// cumulus_meta.workflow_stop_time from its stopDate.
func fromEvent(env *Envelope, opt Options) error {
	d := env.Event["detail"].(map[string]any)
	sfn, _ := d["status"].(string)
	status, ok := statuses[sfn]
	if !ok {
		return errorf("EventBridge event: Step Functions status %s is none of RUNNING, SUCCEEDED, FAILED, ABORTED, TIMED_OUT", quote(d["status"]))
	}
	field := "input"
	switch {
	case sfn == "SUCCEEDED":
		field = "output"
	case status == "failed" && d["output"] != nil:
		field = "output"
	}
	var m map[string]any
	var text []byte
	switch x := d[field].(type) {
	case string:
		text = []byte(x)
		v, err := parse(text)
		if err != nil {
			return errorf("EventBridge event: detail.%s is not JSON: %v", field, err)
		}
		if m, ok = v.(map[string]any); !ok {
			return errorf("EventBridge event: detail.%s is %s, not a Cumulus message", field, kind(v))
		}
	case map[string]any:
		m = x
	default:
		return errorf("EventBridge event (%s): detail.%s is %s, not a Cumulus message", sfn, field, kind(d[field]))
	}
	m, text, err := loadRemote(env, m, text, opt)
	if err != nil {
		return err
	}
	if err := checkMessage(m); err != nil {
		return err
	}
	env.Exception = exceptionOf(m, text)
	meta, ok := m["meta"].(map[string]any)
	if !ok {
		meta = map[string]any{}
		m["meta"] = meta
	}
	meta["status"] = status
	cm := m["cumulus_meta"].(map[string]any)
	if stop, ok := d["stopDate"]; ok {
		cm["workflow_stop_time"] = stop
	}
	env.Message = m
	env.StartDate = millis(d["startDate"])
	env.StopDate = millis(d["stopDate"])
	return nil
}

// checkMessage refuses what cannot be a Cumulus message.
func checkMessage(m map[string]any) error {
	if _, ok := m["cumulus_meta"].(map[string]any); !ok {
		return errorf("Cumulus message without a cumulus_meta object")
	}
	return nil
}

// loadRemote replaces a remote message (one with "replace": {Bucket, Key,
// TargetPath}) with the object it points at, as Cumulus's
// pullStepFunctionEvent does: at TargetPath within the message, or as the
// whole message when TargetPath is absent or "$". It returns the text of
// the message's top level: text, the remote object's, or nil when the
// replaced part is the exception.
func loadRemote(env *Envelope, m map[string]any, text []byte, opt Options) (map[string]any, []byte, error) {
	r, ok := m["replace"]
	if !ok || r == nil {
		return m, text, nil
	}
	rep, ok := r.(map[string]any)
	bucket, _ := rep["Bucket"].(string)
	key, _ := rep["Key"].(string)
	if !ok || bucket == "" || key == "" {
		return nil, nil, errorf("remote message: replace needs Bucket and Key strings")
	}
	if opt.Open == nil {
		return nil, nil, errorf("remote message s3://%s/%s: no files root to read it from", bucket, key)
	}
	f, err := opt.Open(bucket, key)
	if err != nil {
		return nil, nil, errorf("remote message s3://%s/%s: %v", bucket, key, err)
	}
	defer f.Close()
	max := opt.MaxRemote
	if max <= 0 {
		max = 64 << 20
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, nil, errorf("remote message s3://%s/%s: %v", bucket, key, err)
	}
	if int64(len(b)) > max {
		return nil, nil, errorf("remote message s3://%s/%s: larger than %d bytes", bucket, key, max)
	}
	env.Remote = int64(len(b))
	v, err := parse(b)
	if err != nil {
		return nil, nil, errorf("remote message s3://%s/%s: malformed JSON: %v", bucket, key, err)
	}
	path, _ := rep["TargetPath"].(string)
	if path == "" || path == "$" {
		o, ok := v.(map[string]any)
		if !ok {
			return nil, nil, errorf("remote message s3://%s/%s is %s, not a Cumulus message", bucket, key, kind(v))
		}
		return o, b, nil
	}
	if !strings.HasPrefix(path, "$.") {
		return nil, nil, errorf("remote message: TargetPath %q is not $ or $.a.b", path)
	}
	keys := strings.Split(path[2:], ".")
	parent := m
	for _, k := range keys[:len(keys)-1] {
		next, ok := parent[k].(map[string]any)
		if !ok {
			return nil, nil, errorf("Replacement TargetPath %s invalid", path)
		}
		parent = next
	}
	if _, ok := parent[keys[len(keys)-1]]; !ok {
		return nil, nil, errorf("Replacement TargetPath %s invalid", path)
	}
	parent[keys[len(keys)-1]] = v
	delete(m, "replace")
	if keys[0] == "exception" {
		text = nil
	}
	return m, text, nil
}

// exceptionOf is the text of m's exception in text, the message's own,
// when the exception is an object or an array: the last member of that
// name, as JSON.parse keeps the last.
func exceptionOf(m map[string]any, text []byte) json.RawMessage {
	switch m["exception"].(type) {
	case map[string]any, []any:
	default:
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(text))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var found json.RawMessage
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return nil
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil
		}
		if k == "exception" {
			found = v
		}
	}
	return found
}

// parse decodes one JSON value, as JavaScript's JSON.parse would (numbers
// as float64), refusing trailing data and invalid UTF-8.
func parse(b []byte) (any, error) {
	if !utf8.Valid(b) {
		return nil, errors.New("invalid UTF-8")
	}
	d := json.NewDecoder(bytes.NewReader(b))
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

func millis(v any) *int64 {
	f, ok := v.(float64)
	if !ok || f != f || f > 8.64e15 || f < -8.64e15 {
		return nil
	}
	ms := int64(f)
	return &ms
}

func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case float64:
		return "a number"
	case bool:
		return "a boolean"
	case []any:
		return "an array"
	}
	return "an object"
}

func quote(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// ExecutionARN is the execution ARN of a Cumulus message, from
// cumulus_meta.state_machine and execution_name; false when either is
// missing or empty.
func ExecutionARN(m map[string]any) (string, bool) {
	cm, _ := m["cumulus_meta"].(map[string]any)
	sm, ok1 := cm["state_machine"].(string)
	name, ok2 := cm["execution_name"].(string)
	if !ok1 || !ok2 || sm == "" || name == "" {
		return "", false
	}
	return strings.Replace(sm, "stateMachine", "execution", 1) + ":" + name, true
}
