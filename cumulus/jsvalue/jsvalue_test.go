package jsvalue

import (
	"bytes"
	"encoding/json"
	"os/exec"
	"testing"

	"github.com/backfill-dev/backfill/internal/testutil"
)

// Node's own Boolean, Number and String, over values a message or a
// granule may hold, are the oracle: JSON.parse of each text, or undefined.
func TestConversions_SameAsNode(t *testing.T) {
	node := testutil.NeedTool(t, "node", "JavaScript's own conversions, the oracle of this package")
	texts := []string{
		"", // undefined
		`null`, `true`, `false`, `0`, `-0`, `1`, `-1.5`, `0.1`, `1e21`, `1e-7`, `123456789012345680000`,
		`1e999`, `-1e999`, `5e-324`, `1.7976931348623157e308`, `2e-7`, `100`, `1e20`,
		`""`, `" "`, `"0"`, `" 12 "`, `"0x1f"`, `"0X1F"`, `"0b101"`, `"0o17"`, `"0x"`, `"0x1g"`, `"1e3"`, `".5"`, `"5."`, `"+5"`,
		`"-5"`, `"-0x10"`, `"Infinity"`, `"-Infinity"`, `"+Infinity"`, `"infinity"`, `"abc"`, `"\u00a012\u00a0"`, `"\ufeff3"`,
		`"1,2"`, `"true"`, `"null"`, `"1_000"`, `"12px"`, `"\t\n7\r"`,
		`[]`, `[null]`, `[1]`, `["7"]`, `[[8]]`, `[1,2]`, `[true]`, `[{}]`, `[""]`, `[" "]`, `["0x10"]`, `[null,null]`, `[[],[]]`,
		`{}`, `{"a":1}`, `[1e21]`, `[-0]`,
	}
	// Node answers one JSON line per text: [Boolean, String(Number), String].
	script := `
const lines = require("fs").readFileSync(0, "utf8").split("\n").filter(l => l !== "");
for (const l of lines) {
	const text = JSON.parse(l);
	const v = text === "" ? undefined : JSON.parse(text);
	console.log(JSON.stringify([Boolean(v), String(Number(v)), String(v)]));
}`
	var in bytes.Buffer
	for _, s := range texts {
		b, _ := json.Marshal(s)
		in.Write(append(b, '\n'))
	}
	cmd := exec.Command(node, "-e", script)
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	lines := bytes.Split(bytes.TrimSpace(out), []byte("\n"))
	if len(lines) != len(texts) {
		t.Fatalf("node answered %d lines for %d values", len(lines), len(texts))
	}
	for i, s := range texts {
		var want [3]any
		if err := json.Unmarshal(lines[i], &want); err != nil {
			t.Fatalf("%q: node said %s: %v", s, lines[i], err)
		}
		v, present, err := Decode([]byte(s))
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		got := [3]any{Truthy(v), FormatNumber(Number(v, present)), String(v, present)}
		if got != want {
			t.Errorf("%s: Boolean, Number, String = %v, Node says %v", orUndefined(s), got, want)
		}
	}
}

func orUndefined(s string) string {
	if s == "" {
		return "undefined"
	}
	return s
}

// Decode takes one JSON value, and nothing that is not.
func TestDecode_OneValue(t *testing.T) {
	for _, bad := range []string{`1 2`, `{"a":`, `tru`, `"x`, `[1,]`} {
		if _, _, err := Decode([]byte(bad)); err == nil {
			t.Errorf("%q: decoded", bad)
		}
	}
	v, present, err := Decode([]byte(` {"a": [1e999, "x", null]} `))
	if err != nil || !present {
		t.Fatalf("decode: %v %v", present, err)
	}
	a, _ := Get(v, "a")
	if s := String(a, true); s != "Infinity,x," {
		t.Errorf("String of the array: %q", s)
	}
}

// The values Decode takes without a decoder come out as encoding/json
// decodes them.
func TestDecode_PlainAsDecoder(t *testing.T) {
	for _, text := range []string{`null`, `true`, `false`, ` true `, `""`, `"abc"`, `"é ü"`, `"a\"b"`, `"a\\b"`, `"\u00e9"`,
		"\"\xff\"", "\"a\tb\"", `"`, `"a`, `nul`, `truex`} {
		got, gotOK, gotErr := Decode([]byte(text))
		var want any
		wantErr := json.Unmarshal([]byte(text), &want)
		if (gotErr != nil) != (wantErr != nil) || (gotErr == nil && (!gotOK || got != want)) {
			t.Errorf("%q: Decode gives %#v %v %v, encoding/json %#v %v", text, got, gotOK, gotErr, want, wantErr)
		}
	}
}
