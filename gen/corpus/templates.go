package corpus

import (
	"bytes"
	"embed"
	stdjson "encoding/json"
	"fmt"
	"path"
	"regexp"
	"sort"

	yamlv3 "gopkg.in/yaml.v3"
)

// The templates are real OONI samples (see testdata/ooni and the realdata
// MANIFEST): compact JSON measurements, and YAML reports of a header and
// one measurement. Generated reports repeat their measurements.
//
//go:embed templates
var templateFS embed.FS

type template struct {
	name     string
	testName string
	kind     string // "json" or "yaml"
	header   []byte // YAML header document, markers included
	blob     []byte // one measurement: a JSON line without "\n", or a YAML document with markers
	// entryJSON is the measurement as the autoclaved form holds it: its
	// JSON object without braces, keys sorted, without the id and
	// report_filename the normalisation sets (for YAML, the header's
	// keys merged in, as the OONI pipeline did).
	entryJSON []byte
	// vary: the offsets of blob a varied corpus may redraw, value by
	// value (variable).
	vary [][]int32
}

var testNameRe = regexp.MustCompile(`(?m)"?test_name"?\s*:\s*"?([a-z_]+)`)

func loadTemplates() (json, yaml []template, err error) {
	ents, err := templateFS.ReadDir("templates")
	if err != nil {
		return nil, nil, err
	}
	for _, e := range ents {
		data, err := templateFS.ReadFile(path.Join("templates", e.Name()))
		if err != nil {
			return nil, nil, err
		}
		m := testNameRe.FindSubmatch(data)
		if m == nil {
			return nil, nil, fmt.Errorf("template %s: no test_name", e.Name())
		}
		t := template{name: e.Name(), testName: string(m[1])}
		switch path.Ext(e.Name()) {
		case ".json":
			t.kind, t.blob = "json", bytes.TrimSpace(data)
			json = append(json, t)
		case ".yaml":
			end := bytes.Index(data, []byte("\n...\n"))
			if end < 0 || !bytes.HasSuffix(data, []byte("\n...\n")) {
				return nil, nil, fmt.Errorf("template %s: not a header and a measurement", e.Name())
			}
			t.kind, t.header, t.blob = "yaml", data[:end+5], data[end+5:]
			yaml = append(yaml, t)
		}
	}
	for i := range json {
		json[i].entryJSON = normalise(nil, json[i].blob)
		json[i].vary = variable("json", json[i].blob)
	}
	for i := range yaml {
		yaml[i].entryJSON = normalise(yaml[i].header, yaml[i].blob)
		yaml[i].vary = variable("yaml", yaml[i].blob)
	}
	sort.Slice(json, func(i, j int) bool { return json[i].name < json[j].name })
	sort.Slice(yaml, func(i, j int) bool { return yaml[i].name < yaml[j].name })
	return json, yaml, nil
}

// normalise turns a measurement (and the YAML header it inherits) into the
// body of a sorted JSON object.
func normalise(header, blob []byte) []byte {
	m := map[string]any{}
	var err error
	if header == nil {
		err = stdjson.Unmarshal(blob, &m)
	} else {
		var h map[string]any
		if err = yamlv3.Unmarshal(blob, &m); err == nil {
			err = yamlv3.Unmarshal(header, &h)
		}
		for k, v := range h {
			m[k] = v
		}
	}
	delete(m, "id")
	delete(m, "report_filename")
	out, merr := stdjson.Marshal(m)
	if err != nil || merr != nil {
		out, _ = stdjson.Marshal(map[string]string{"entry": string(blob)})
	}
	return bytes.TrimSuffix(bytes.TrimPrefix(out, []byte("{")), []byte("}"))
}
