package message

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"sort"
	"strings"
	"time"
	"unicode/utf8"
)

// DeadLetter is the Dead Letter Archive record of an input that failed
// with errText, in the shape of Cumulus v21's records
// (hoistCumulusMessageDetails): the SQS metadata of every level, the
// innermost body as a JSON string, and collectionId, providerId, granules,
// executionArn, stateMachineArn, status, time and error at the top, so
// that the archive can be searched without parsing bodies.
//
// Where Cumulus leaves a field null because the body is not an EventBridge
// event, the record takes it from a bare Cumulus message when it can:
// executionArn and stateMachineArn from cumulus_meta, status from
// meta.status. A body that is not valid UTF-8 is kept whole, base64, in
// bodyBase64 (body is then null).
func DeadLetter(env *Envelope, errText string) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	keys := make([]string, 0, len(env.Meta))
	for k := range env.Meta {
		if !fixed[k] {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		field(&b, k, env.Meta[k])
	}
	if utf8.Valid(env.Body) {
		field(&b, "body", string(env.Body))
	} else {
		field(&b, "body", nil)
		field(&b, "bodyBase64", base64.StdEncoding.EncodeToString(env.Body))
	}
	s := summarize(env)
	field(&b, "collectionId", s.collectionID)
	field(&b, "providerId", s.providerID)
	field(&b, "granules", s.granules)
	field(&b, "executionArn", s.executionArn)
	field(&b, "stateMachineArn", s.stateMachineArn)
	field(&b, "status", s.status)
	field(&b, "time", s.time)
	field(&b, "error", errText)
	b.Bytes()[b.Len()-1] = '}'
	return b.Bytes()
}

// fixed are the record's own fields, which the metadata of an archived
// record read back as input must not repeat.
var fixed = map[string]bool{
	"body": true, "Body": true, "bodyBase64": true, "collectionId": true, "providerId": true, "granules": true,
	"executionArn": true, "stateMachineArn": true, "status": true, "time": true, "error": true,
}

func field(b *bytes.Buffer, k string, v any) {
	kb, _ := json.Marshal(k)
	b.Write(kb)
	b.WriteByte(':')
	var vb bytes.Buffer
	enc := json.NewEncoder(&vb)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v) // cannot fail: v was decoded from JSON
	b.Write(bytes.TrimSuffix(vb.Bytes(), []byte("\n")))
	b.WriteByte(',')
}

type summary struct {
	collectionID, providerID, executionArn, stateMachineArn, status, time any
	granules                                                              any
}

func summarize(env *Envelope) summary {
	s := summary{}
	if env.Event != nil {
		d := env.Event["detail"].(map[string]any)
		s.executionArn = d["executionArn"]
		s.stateMachineArn = d["stateMachineArn"]
		s.status = d["status"]
		s.time = env.Event["time"]
	}
	m := env.Message
	if m == nil {
		return s
	}
	meta, _ := m["meta"].(map[string]any)
	if c, ok := meta["collection"].(map[string]any); ok {
		name, ok1 := c["name"].(string)
		version, ok2 := c["version"].(string)
		if ok1 && ok2 {
			s.collectionID = name + "___" + version
		}
	}
	if p, ok := meta["provider"].(map[string]any); ok {
		s.providerID = p["id"]
	}
	if payload, ok := m["payload"].(map[string]any); ok {
		if list, ok := payload["granules"].([]any); ok {
			ids := make([]any, len(list))
			for i, g := range list {
				if o, ok := g.(map[string]any); ok {
					ids[i] = o["granuleId"]
				}
			}
			s.granules = ids
		}
	}
	if env.Event == nil {
		if arn, ok := ExecutionARN(m); ok {
			s.executionArn = arn
		}
		cm, _ := m["cumulus_meta"].(map[string]any)
		if sm, ok := cm["state_machine"].(string); ok {
			s.stateMachineArn = sm
		}
		s.status = meta["status"]
	}
	return s
}

// Key is where a record goes under the archive's sqs/ folder, as Cumulus
// v21 names it: "<YYYY-MM-DD>/<executionName>-<id>", the date from the
// record's time (UTC) when it is a valid date, else today's; the
// execution's name after the last '/' or ':' of its ARN, else "unknown".
func Key(record []byte, id string, today time.Time) string {
	var r struct {
		Time         any `json:"time"`
		ExecutionArn any `json:"executionArn"`
	}
	_ = json.Unmarshal(record, &r) // a record that does not parse is named by today and its ID
	return Date(r.Time, today) + "/" + executionName(r.ExecutionArn) + "-" + id
}

// Date is the archive's date folder for a record's time: the UTC date of
// an RFC 3339 time, else today's.
func Date(t any, today time.Time) string {
	if s, ok := t.(string); ok {
		for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999Z0700"} {
			if tt, err := time.Parse(layout, s); err == nil {
				return tt.UTC().Format("2006-01-02")
			}
		}
	}
	return today.UTC().Format("2006-01-02")
}

func executionName(arn any) string {
	s, ok := arn.(string)
	if !ok || s == "" {
		return "unknown"
	}
	name := []byte(s[strings.LastIndexAny(s, "/:")+1:])
	if len(name) == 0 || string(name) == "." || string(name) == ".." {
		return "unknown"
	}
	if len(name) > 128 {
		name = name[:128]
	}
	// A file name on every system: Step Functions names are letters,
	// digits, '-' and '_' already.
	for i, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			name[i] = '_'
		}
	}
	return string(name)
}
