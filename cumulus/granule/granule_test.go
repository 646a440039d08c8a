package granule

import (
	"crypto/md5"
	"encoding/base64"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"sync"
	"testing"
)

const unicodeID = "Az09- éñøæß œüç ΔΩЖЯ あア漢 数据셋 àé"

// naive is the plain computation the package optimises: crypto/md5,
// encoding/base64 and strings.ReplaceAll, as the specification reads.
func naive(id, collectionID string, hashLength int) string {
	sum := md5.Sum([]byte(collectionID))
	h := strings.ReplaceAll(base64.RawURLEncoding.EncodeToString(sum[:]), "_", "")
	return id + "_" + h[:min(hashLength, len(h))]
}

// TestUniqueGranuleID_Vectors: the golden vectors of docs/granules.md.
func TestUniqueGranuleID_Vectors(t *testing.T) {
	for _, tc := range []struct {
		id, collection string
		hashLength     int
		want           string
	}{
		{unicodeID, "testCollection", 8, unicodeID + "_PFA7fPRD"},
		{unicodeID, "testCollection", 4, unicodeID + "_PFA7"},
		{"granule1", "collection1", 6, "granule1_kKuTyw"},
		{"granule2", "collection2", 6, "granule2_iUgALX"},
		{"granule1", "someType___001", 8, "granule1_cS2vIz8C"},
		{"granule2", "otherType___002", 8, "granule2_i1MTStOf"},
		{"granule2", "otherType___002", 22, "granule2_i1MTStOfdS7e4owlAZbA"},
		{"MOD09GQ.A2017224.h09v02.006.2017227165020", "MOD09GQ___006", 8, "MOD09GQ.A2017224.h09v02.006.2017227165020_wJJ69jjW"},
		{"MOD87GQ.A2017224.h09v02.006.2017227165020", "MOD87GQ___006", 8, "MOD87GQ.A2017224.h09v02.006.2017227165020_qPXYVCoL"},
		{"FakeGranule1", "FAKECOLLECTION___001", 8, "FakeGranule1_KQLEwEAp"},
		{"x", "", 8, "x_1B2M2Y8A"},
		{"x", "testCollection", 22, "x_PFA7fPRD0WmizQFzOrp9g"},
	} {
		got, err := UniqueGranuleID(tc.id, tc.collection, tc.hashLength, false)
		if err != nil || got != tc.want {
			t.Errorf("UniqueGranuleID(%q, %q, %d) = %q, %v, want %q", tc.id, tc.collection, tc.hashLength, got, err, tc.want)
		}
		g, _ := NewGenerator(tc.hashLength, false)
		for range 2 { // the second call takes the cached suffix
			b, err := g.Append(nil, []byte(tc.id), []byte(tc.collection))
			if err != nil || string(b) != tc.want {
				t.Errorf("Generator.Append(%q, %q) = %q, %v, want %q", tc.id, tc.collection, b, err, tc.want)
			}
		}
		if n := naive(tc.id, tc.collection, tc.hashLength); n != tc.want {
			t.Errorf("naive = %q", n)
		}
	}
}

// Lengths where the references disagree (0 gives "x_" in Node, -1 slices
// from the end) are rejected.
func TestUniqueGranuleID_RejectsLengths(t *testing.T) {
	for _, n := range []int{0, -1, 23, 1 << 40} {
		if _, err := UniqueGranuleID("x", "testCollection", n, false); !errors.Is(err, ErrHashLength) {
			t.Errorf("hash length %d: %v, want ErrHashLength", n, err)
		}
		if _, err := NewGenerator(n, true); !errors.Is(err, ErrHashLength) {
			t.Errorf("NewGenerator(%d): %v, want ErrHashLength", n, err)
		}
	}
	if _, err := UniqueGranuleID("x", "bad\xff", 8, false); !errors.Is(err, ErrInvalidUTF8) {
		t.Errorf("invalid UTF-8: %v", err)
	}
}

func TestUniqueGranuleID_Timestamped(t *testing.T) {
	const perG, goroutines = 20000, 4
	ids := make([][]string, goroutines)
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			gen, _ := NewGenerator(22, true)
			for range perG {
				b, err := gen.Append(nil, []byte("granule1"), []byte("collection1"))
				if err != nil {
					t.Error(err)
					return
				}
				ids[g] = append(ids[g], string(b))
			}
		})
	}
	wg.Wait()
	seen := map[string]bool{}
	for _, list := range ids {
		for _, id := range list {
			if seen[id] {
				t.Fatalf("timestamped ID %s issued twice", id)
			}
			seen[id] = true
			if !strings.HasPrefix(id, "granule1_") || len(id) > len("granule1_")+22 {
				t.Fatalf("bad ID %q", id)
			}
		}
	}
	a, _ := UniqueGranuleID("granule1", "collection1", 8, true)
	b, _ := UniqueGranuleID("granule1", "collection1", 8, true)
	if a == b {
		t.Errorf("two timestamped calls gave %s", a)
	}
}

func TestNanotime_StrictlyIncreasing(t *testing.T) {
	var wg sync.WaitGroup
	results := make([][]int64, 4)
	for g := range results {
		wg.Go(func() {
			for range 50000 {
				results[g] = append(results[g], Nanotime())
			}
		})
	}
	wg.Wait()
	seen := map[int64]bool{}
	for _, r := range results {
		for i, v := range r {
			if i > 0 && v <= r[i-1] {
				t.Fatalf("Nanotime went from %d to %d", r[i-1], v)
			}
			if seen[v] {
				t.Fatalf("Nanotime returned %d twice", v)
			}
			seen[v] = true
		}
	}
}

func TestGenerator_NoAllocs(t *testing.T) {
	g, _ := NewGenerator(8, false)
	id, coll := []byte("MOD09GQ.A2017224.h09v02.006.2017227165020"), []byte("MOD09GQ___006")
	buf := make([]byte, 0, 128)
	allocs := testing.AllocsPerRun(1000, func() {
		var err error
		if buf, err = g.Append(buf[:0], id, coll); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Generator.Append: %v allocations per call, want 0", allocs)
	}
}

func task(t *testing.T, payload string, cfg TaskConfig) map[string]any {
	t.Helper()
	out, err := AddUniqueGranuleIDs([]byte(payload), cfg)
	if err != nil {
		t.Fatalf("AddUniqueGranuleIDs(%s): %v", payload, err)
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatalf("output %s: %v", out, err)
	}
	return m
}

func granules(m map[string]any) []map[string]any {
	var gs []map[string]any
	for _, g := range m["granules"].([]any) {
		gs = append(gs, g.(map[string]any))
	}
	return gs
}

// The AddUniqueGranuleId scenarios of docs/granules.md.
func TestAddUniqueGranuleIDs(t *testing.T) {
	t.Run("preserves producerGranuleId", func(t *testing.T) {
		m := task(t, `{"granules":[{"granuleId":"granule1","collectionId":"collection1"},{"granuleId":"granule2","collectionId":"collection2"}]}`,
			TaskConfig{HashLength: json.RawMessage(`6`)})
		gs := granules(m)
		want := []string{"granule1_kKuTyw", "granule2_iUgALX"}
		for i, g := range gs {
			if g["granuleId"] != want[i] || g["producerGranuleId"] != []string{"granule1", "granule2"}[i] {
				t.Errorf("granule %d = %v", i, g)
			}
		}
	})
	t.Run("retains payload", func(t *testing.T) {
		out, err := AddUniqueGranuleIDs([]byte(`{"pdrs":["somePdrValue"],"granules":[{"granuleId":"g","collectionId":"c","files":[{"name":"a"}]}],"otherKey":{"other":"value"}}`), TaskConfig{})
		if err != nil {
			t.Fatal(err)
		}
		want := `{"pdrs":["somePdrValue"],"granules":[{"granuleId":"g_` + naive("", "c", 8)[1:] + `","collectionId":"c","files":[{"name":"a"}],"producerGranuleId":"g"}],"otherKey":{"other":"value"}}`
		if string(out) != want {
			t.Errorf("output\n%s\nwant\n%s", out, want)
		}
	})
	t.Run("skips existing producerGranuleId", func(t *testing.T) {
		in := `{"granules":[{"granuleId":"granule1","collectionId":"collection1","producerGranuleId":"existingGranuleId1"},{"granuleId":"granule2","collectionId":"collection2","producerGranuleId":"existingGranuleId2"}]}`
		out, err := AddUniqueGranuleIDs([]byte(in), TaskConfig{})
		if err != nil || string(out) != in {
			t.Errorf("output %s, %v; want the input unchanged", out, err)
		}
	})
	t.Run("empty list", func(t *testing.T) {
		out, err := AddUniqueGranuleIDs([]byte(`{"granules":[]}`), TaskConfig{})
		if err != nil || string(out) != `{"granules":[]}` {
			t.Errorf("output %s, %v", out, err)
		}
	})
	t.Run("dataType and version", func(t *testing.T) {
		gs := granules(task(t, `{"granules":[{"granuleId":"granule1","dataType":"someType","version":"001"},{"granuleId":"granule2","dataType":"otherType","version":"002"}]}`, TaskConfig{}))
		if gs[0]["granuleId"] != "granule1_cS2vIz8C" || gs[1]["granuleId"] != "granule2_i1MTStOf" || gs[0]["producerGranuleId"] != "granule1" {
			t.Errorf("granules = %v", gs)
		}
	})
	t.Run("deterministic without timestamp, duplicates kept", func(t *testing.T) {
		in := `{"granules":[{"granuleId":"FakeGranule1","dataType":"FAKECOLLECTION","version":"001"},{"granuleId":"FakeGranule1","dataType":"FAKECOLLECTION","version":"001"}]}`
		a, b := task(t, in, TaskConfig{}), task(t, in, TaskConfig{})
		if !reflect.DeepEqual(a, b) {
			t.Errorf("two runs differ: %v %v", a, b)
		}
		gs := granules(a)
		if len(gs) != 2 || gs[0]["granuleId"] != "FakeGranule1_KQLEwEAp" || gs[1]["granuleId"] != "FakeGranule1_KQLEwEAp" {
			t.Errorf("granules = %v", gs)
		}
	})
	t.Run("distinct with timestamp", func(t *testing.T) {
		in := `{"granules":[{"granuleId":"granule1","dataType":"someType","version":"001"},{"granuleId":"granule1","dataType":"someType","version":"001"}],"pdr":{"name":"x"}}`
		cfg := TaskConfig{HashLength: json.RawMessage(`6`), IncludeTimestampHashKey: json.RawMessage(`true`)}
		a, b := task(t, in, cfg), task(t, in, cfg)
		ga, gb := granules(a), granules(b)
		ids := map[any]bool{ga[0]["granuleId"]: true, ga[1]["granuleId"]: true, gb[0]["granuleId"]: true, gb[1]["granuleId"]: true}
		if len(ids) != 4 {
			t.Errorf("timestamped IDs repeat: %v %v", ga, gb)
		}
		for _, g := range append(ga, gb...) {
			id := g["granuleId"].(string)
			if !strings.HasPrefix(id, "granule1_") || len(id) != len("granule1_")+6 || g["producerGranuleId"] != "granule1" {
				t.Errorf("granule %v", g)
			}
		}
		if a["pdr"] == nil {
			t.Error("pdr dropped")
		}
	})
}

func TestAddUniqueGranuleIDs_Rejects(t *testing.T) {
	for _, tc := range []struct{ name, payload, want string }{
		{"not an object", `[1]`, "not a JSON object"},
		{"no granules", `{"x":1}`, `no "granules" array`},
		{"granules not array", `{"granules":{}}`, `no "granules" array`},
		{"trailing data", `{"granules":[]} {}`, "data after"},
		{"truncated", `{"granules":[{"granuleId":"a"`, "bad payload"},
		{"no granuleId", `{"granules":[{"collectionId":"c"}]}`, "granules[0]: granuleId is missing"},
		{"numeric granuleId", `{"granules":[{"granuleId":5,"collectionId":"c"}]}`, "granules[0]: granuleId is missing or not a string"},
		{"no collection", `{"granules":[{"granuleId":"a","collectionId":"c"},{"granuleId":"b"}]}`, "granules[1]: no collectionId"},
		{"granule not object", `{"granules":["a"]}`, "granules[0]: not a JSON object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := AddUniqueGranuleIDs([]byte(tc.payload), TaskConfig{})
			if !errors.Is(err, ErrPayload) || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("AddUniqueGranuleIDs(%s) = %s, %v; want error with %q", tc.payload, out, err, tc.want)
			}
		})
	}
}

// The task's config conversions: Number(x) || 8, then 1..22; and the
// truthiness of includeTimestampHashKey.
func TestTaskConfig_Settings(t *testing.T) {
	for _, tc := range []struct {
		raw  string
		want int
		bad  bool
	}{
		{"", 8, false}, {"null", 8, false}, {`""`, 8, false}, {"0", 8, false}, {`"abc"`, 8, false},
		{"{}", 8, false}, {"[]", 8, false}, {"false", 8, false},
		{"6", 6, false}, {`"6"`, 6, false}, {`" 7 "`, 7, false}, {`"0x10"`, 16, false}, {`"1e1"`, 10, false},
		{"6.9", 6, false}, {"[5]", 5, false}, {`["9"]`, 9, false}, {"true", 1, false}, {"22", 22, false},
		{"23", 0, true}, {"-1", 0, true}, {`"Infinity"`, 0, true}, {"0.5", 0, true}, {"1e300", 0, true},
	} {
		var raw json.RawMessage
		if tc.raw != "" {
			raw = json.RawMessage(tc.raw)
		}
		got, _, err := TaskConfig{HashLength: raw}.Settings()
		if tc.bad != (err != nil) || got != tc.want {
			t.Errorf("hashLength %s: %d, %v; want %d (error: %v)", tc.raw, got, err, tc.want, tc.bad)
		}
	}
	for raw, want := range map[string]bool{"": false, "null": false, "false": false, "true": true, `"false"`: true,
		`""`: false, "0": false, "1": true, "[]": true, "{}": true, "0.0": false, "-0": false} {
		var r json.RawMessage
		if raw != "" {
			r = json.RawMessage(raw)
		}
		if _, got, _ := (TaskConfig{IncludeTimestampHashKey: r}).Settings(); got != want {
			t.Errorf("includeTimestampHashKey %s: %v, want %v", raw, got, want)
		}
	}
}

func TestJSString(t *testing.T) {
	for raw, want := range map[string]string{`"001"`: "001", "1": "1", "1.50": "1.5", "1e21": "1e+21", "1e-7": "1e-7",
		"0.000001": "0.000001", "true": "true", "null": "null", "-0": "0", "123456789012": "123456789012"} {
		if got, ok := jsString(json.RawMessage(raw)); !ok || got != want {
			t.Errorf("jsString(%s) = %q, want %q", raw, got, want)
		}
	}
	gs := granules(task(t, `{"granules":[{"granuleId":"g","dataType":"MOD","version":6}]}`, TaskConfig{}))
	if want, _ := UniqueGranuleID("g", "MOD___6", 8, false); gs[0]["granuleId"] != want {
		t.Errorf("numeric version: %v, want %s", gs[0]["granuleId"], want)
	}
}

func jsonValid(b []byte) bool { return json.Valid(b) }
