package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/backfill-dev/backfill/internal/cli"
	"github.com/backfill-dev/backfill/internal/testutil"
)

// cmr-temporal prints each file's stored and raw values; a file it
// cannot read is reported and the others still printed, exit 3.
func TestCMRTemporal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.cmr.xml")
	testutil.Check(t, os.WriteFile(bad, []byte("<Granule><LastUpdate>yesterday</LastUpdate></Granule>"), 0o644))
	echo := "../../cumulus/cmr/testdata/MOD09GQ.A2016358.h13v04.006.2016360104606.cmr.xml"
	var out, errb bytes.Buffer
	err := run(context.Background(), []string{"cmr-temporal", echo, bad}, cli.Stdio{In: strings.NewReader(""), Out: &out, Err: &errb})
	if code := exitCode(err, &errb); code != cli.ExitRejects {
		t.Fatalf("exit %d\n%s", code, errb.String())
	}
	if !strings.Contains(errb.String(), `bad.cmr.xml: lastUpdateDateTime "yesterday"`) {
		t.Errorf("stderr: %s", errb.String())
	}
	var got struct {
		Format             string
		LastUpdateDateTime string
		Raw                map[string]string
	}
	if err := json.Unmarshal(out.Bytes(), &got); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if got.Format != "echo10" || got.LastUpdateDateTime != "2018-04-26T21:33:43.913Z" || got.Raw["lastUpdateDateTime"] != "2018-04-26T21:33:43.913617" {
		t.Errorf("output %s", out.String())
	}
	if code, _ := call("cmr-temporal", "--format", "xml", echo); code != cli.ExitUsage {
		t.Errorf("--format xml: exit %d, want a usage error", code)
	}
}
