package jsvalue

import (
	"encoding/json"
	"reflect"
	"testing"
)

// JSON.stringify(JSON.parse(text)) as Node prints it.
func TestStringifyText(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"b":1,"a":2}`: `{"b":1,"a":2}`,
		`{"b":1,"2":"x","10":"y","1":"z","01":0}`: `{"1":"z","2":"x","10":"y","b":1,"01":0}`,
		`{"a":1,"b":2,"a":3}`:                     `{"a":3,"b":2}`,
		` [ 1.50 , 1e2, -0, 1E-7, 1e21 ] `:        `[1.5,100,0,1e-7,1e+21]`,
		`"a\u2028\u0001\/<>&\"\\"`:                `"a` + "\u2028" + `\u0001/<>&\"\\"`,
		`{"4294967295":1,"4294967294":2}`:         `{"4294967294":2,"4294967295":1}`,
		`[{"y":[{"d":null,"c":true}],"x":{}}]`:    `[{"y":[{"d":null,"c":true}],"x":{}}]`,
	} {
		got, err := StringifyText([]byte(in))
		if err != nil || got != want {
			t.Errorf("%s: %s %v, want %s", in, got, err, want)
		}
	}
	for _, bad := range []string{``, `{`, `{"a":}`, `[1,]`, `1 2`, `{"a":1}}`} {
		if got, err := StringifyText([]byte(bad)); err == nil {
			t.Errorf("%q: %s, want an error", bad, got)
		}
	}
}

// Whatever the text, an error or the same value written again.
func FuzzStringifyText(f *testing.F) {
	for _, s := range []string{`{"b":1,"a":[2,{"1":0}]}`, `"x"`, `[[[[]]]]`, `{"a":1,"a":2}`, `1e400`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, text []byte) {
		out, err := StringifyText(text)
		if err != nil {
			return
		}
		var a, b any
		if err := json.Unmarshal(text, &a); err != nil {
			return // Go refuses what the decoder's tokens let through (1e400)
		}
		if err := json.Unmarshal([]byte(out), &b); err != nil {
			t.Fatalf("%s gives %s, not JSON: %v", text, out, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%s gives %s, another value", text, out)
		}
	})
}
