package jsurl

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os/exec"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/cumulustest"
)

// ProviderURL against @cumulus/common's own buildURL, on the real
// providers' forms and on providers drawn at random: schemes special and
// not, hosts in any case, with ports (their scheme's default or not, as a
// number or a string), paths, and hosts that are URLs themselves.
func TestBuildProviderURL_SameAsCumulus(t *testing.T) {
	t.Parallel()
	cumulustest.NeedReference(t)
	providers := []map[string]any{
		{"protocol": "http", "host": "https://e4ftl01.cr.usgs.gov:40521"}, // LPDAAC_HTTPS
		{"protocol": "https", "host": "example.com", "port": 443.0},
		{"protocol": "https", "host": "example.com", "port": 8443.0},
		{"protocol": "s3", "host": "Cumulus-Bucket", "port": 9000.0},
		{"protocol": "sftp", "host": "SFTP.example.com", "port": 22.0},
		{"protocol": "ftp", "host": "ftp.example.com:21"},
	}
	rng := rand.New(rand.NewPCG(42, 42))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	for range 500 {
		p := map[string]any{
			"protocol": pick("http", "https", "ftp", "s3", "sftp", "HTTP"),
			"host": pick("example.com", "Example.COM", "e4ftl01.cr.usgs.gov", "10.0.0.1") +
				pick("", "", ":80", ":443", ":21", ":8080", ":") + pick("", "", "/data", "/a/b/", "?x=1"),
		}
		if rng.IntN(4) == 0 {
			p["host"] = pick("https://", "http://", "ftp://") + p["host"].(string)
		}
		switch rng.IntN(4) {
		case 0:
			p["port"] = float64(pick2(rng, 80, 443, 21, 22, 8080))
		case 1:
			p["port"] = pick("80", "443", "8443", "0")
		}
		providers = append(providers, p)
	}
	lines := nodeLines(t, `
const {buildURL} = require("@cumulus/common/URLUtils");
const lines = require("fs").readFileSync(0, "utf8").split("\n").filter(Boolean);
for (const l of lines) {
  let out;
  try { out = {url: buildURL(JSON.parse(l))}; } catch (e) { out = {error: e.message}; }
  console.log(JSON.stringify(out));
}`, providers)
	for i, p := range providers {
		var want struct{ URL, Error string }
		if err := json.Unmarshal([]byte(lines[i]), &want); err != nil {
			t.Fatal(err)
		}
		got, err := ProviderURL(p)
		switch {
		case want.Error != "" && err == nil:
			t.Errorf("%v: Cumulus throws %q, backfill gives %q", p, want.Error, got)
		case want.Error == "" && (err != nil || got != want.URL):
			t.Errorf("%v: Cumulus gives %q, backfill %q (%v)", p, want.URL, got, err)
		}
	}
}

func pick2(rng *rand.Rand, xs ...int) int { return xs[rng.IntN(len(xs))] }

// Join against the url-join package Cumulus joins a file's source with,
// on the source's real forms and on parts drawn at random from slashes,
// protocols, hosts that are URLs, queries and fragments.
func TestURLJoin_SameAsURLJoin(t *testing.T) {
	t.Parallel()
	cumulustest.NeedReference(t)
	cases := [][]string{
		{"http://https//e4ftl01.cr.usgs.gov:40521", "granules/x", "a.hdf"},
		{"https://example.com", "/p/", "a.hdf"},
		{"s3://bucket", "", "a.hdf"},
	}
	rng := rand.New(rand.NewPCG(43, 43))
	pieces := []string{"", "/", "//", "a", "a/", "/a", "a//b", "http:", "http://", "https://h", "file:", "file:///x", "?q=1", "x?y=2", "#f", "#!f", "&z", "http://https//h:1"}
	for range 2000 {
		n := 1 + rng.IntN(4)
		c := make([]string, n)
		for i := range c {
			c[i] = pieces[rng.IntN(len(pieces))] + pieces[rng.IntN(len(pieces))]
		}
		cases = append(cases, c)
	}
	lines := nodeLines(t, `
const urljoin = require("url-join");
const lines = require("fs").readFileSync(0, "utf8").split("\n").filter(Boolean);
for (const l of lines) console.log(JSON.stringify(urljoin(...JSON.parse(l))));`, cases)
	bad := 0
	for i, c := range cases {
		var want string
		if err := json.Unmarshal([]byte(lines[i]), &want); err != nil {
			t.Fatal(err)
		}
		if got := Join(c...); got != want && bad < 10 {
			bad++
			t.Errorf("Join(%q) = %q, url-join gives %q", c, got, want)
		}
	}
}

// nodeLines runs script with Cumulus's packages, the inputs as JSON lines
// on its standard input, and returns its answer to each, one line each.
func nodeLines[T any](t *testing.T, script string, inputs []T) []string {
	t.Helper()
	var in bytes.Buffer
	for _, x := range inputs {
		b, _ := json.Marshal(x)
		in.Write(append(b, '\n'))
	}
	cmd := exec.Command("node", "-e", script)
	cmd.Dir = cumulustest.RefDir()
	cmd.Stdin = &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != len(inputs) {
		t.Fatalf("%d answers for %d inputs", len(lines), len(inputs))
	}
	return lines
}
