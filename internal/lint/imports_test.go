package lint

import (
	"go/parser"
	"go/token"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/backfill-dev/backfill/"

// layering says which packages of the module a package may not import
// (prefixes, from the module root). Test files are not held to it.
var layering = []struct {
	pkg    string // a prefix of package paths
	forbid []string
	why    string
}{
	{"pipeline/ooid/", []string{"pipeline/reader/", "pipeline/collisions/", "pipeline/sink/", "pipeline/job/", "pipeline/ingest/", "pipeline/load/"}, "IDs are the base of everything"},
	{"pipeline/deadletter/", []string{"pipeline/"}, "the record is plain data"},
	{"pipeline/stamped/", []string{"pipeline/reader/", "pipeline/collisions/", "pipeline/sink/", "pipeline/job/", "pipeline/ingest/", "pipeline/load/"}, "what the stages hand on is plain data"},
	{"pipeline/collisions/", []string{"pipeline/reader/", "pipeline/sink/", "pipeline/job/", "pipeline/ingest/", "pipeline/load/"}, "the collision policy knows no input and no output"},
	{"pipeline/reader/", []string{"pipeline/sink/", "pipeline/job/", "pipeline/ingest/", "pipeline/load/", "pipeline/collisions/"}, "a stage knows no sink"},
	{"pipeline/reader/report/", []string{"pipeline/reader/", "internal/store"}, "one report's bytes: no index, container or folder"},
	{"pipeline/reader/index/", []string{"pipeline/reader/", "internal/store"}, "an index's rows: no report, container or folder"},
	{"pipeline/ingest/", []string{"pipeline/sink/", "pipeline/job/", "pipeline/load/"}, "ingesting knows no sink"},
	{"pipeline/sink/", []string{"pipeline/reader/", "pipeline/job/", "pipeline/ingest/", "pipeline/load/"}, "a sink knows no stage"},
	{"pipeline/", []string{"cumulus/", "gen/", "cmd/"}, "the OONI pipeline stands alone"},
	{"cumulus/", []string{"pipeline/", "gen/", "cmd/"}, "the Cumulus code stands alone"},
	{"cumulus/jsvalue/", []string{"cumulus/", "internal/"}, "JavaScript's values are plain data, the one model the Cumulus code shares"},
	{"cumulus/jsurl/", []string{"cumulus/records/", "cumulus/granule/", "cumulus/cmr/", "cumulus/granulefiles/", "internal/"}, "URLs as Cumulus builds them need JavaScript's values alone"},
	{"gen/", []string{"cmd/"}, "nothing imports the CLI"},
	{"internal/", []string{"cmd/", "pipeline/", "cumulus/", "collector/", "gen/"}, "internal/ is what every part shares: it imports none of them"},
	{"pipeline/", []string{"internal/store/location", "internal/store/s3", "github.com/aws/"}, "only the commands open locations and link S3; the pipeline is handed stores"},
	{"cumulus/", []string{"internal/store/location", "internal/store/s3", "github.com/aws/"}, "only the commands open locations and link S3; the Cumulus code is handed stores"},
	{"cmd/backfill/internal/cumuluscmd/", []string{"pipeline/", "collector/", "gen/"}, "the Cumulus commands wire the Cumulus code alone"},
	{"cmd/backfill/internal/idcmd/", []string{"cumulus/", "pipeline/reader/", "pipeline/sink/", "pipeline/job/", "pipeline/collisions/", "internal/store/location"}, "the ID commands read no archive and write no output"},
	{"collector/", []string{"internal/store/location", "internal/store/s3", "github.com/aws/", "cumulus/", "cmd/", "pipeline/reader/", "pipeline/sink/", "pipeline/job/", "pipeline/ingest/", "pipeline/load/", "pipeline/collisions/"}, "the collector stamps IDs; it reads no archive and writes no output"},
	{"internal/cli/", []string{"pipeline/", "cumulus/", "collector/", "internal/store"}, "the command-line toolkit knows nothing of what the commands do"},
	{"internal/units/", []string{"pipeline/", "cumulus/", "collector/", "internal/"}, "sizes are plain words"},
	{"internal/pgnet/", []string{"pipeline/", "cumulus/", "collector/"}, "every PostgreSQL client shares it"},
	{"pipeline/status/", []string{"pipeline/sink/", "pipeline/job/", "pipeline/load/"}, "status reads states a command hands it"},
}

// TestLayering fails when a package imports one its layer forbids, as
// pebble's forbidden-imports test does.
func TestLayering(t *testing.T) {
	root := repoRoot(t)
	checkedFiles := 0
	walk(t, root, func(rel string, data []byte) {
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") || strings.Contains(rel, "/testdata/") {
			return
		}
		f, err := parser.ParseFile(token.NewFileSet(), rel, data, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			t.Errorf("%s: %v", rel, err)
			return
		}
		if f.Name.Name == "main" && !strings.HasPrefix(rel, "cmd/") {
			return // a generator run with go run
		}
		checkedFiles++
		pkg := path.Dir(filepath.ToSlash(rel))
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			local, ok := strings.CutPrefix(p, module)
			if !ok {
				local = p // an import from outside: the rules name such by their full path
			}
			if why := violates(pkg+"/", local+"/"); why != "" {
				t.Errorf("%s imports %s: %s", rel, p, why)
			}
		}
	})
	if checkedFiles < 30 {
		t.Fatalf("checked only %d files", checkedFiles)
	}
}

// violates returns why package pkg may not import imp ("" when it may);
// both end in "/".
func violates(pkg, imp string) string {
	for _, l := range layering {
		if !strings.HasPrefix(pkg, l.pkg) {
			continue
		}
		for _, f := range l.forbid {
			if strings.HasPrefix(imp, f) && !strings.HasPrefix(imp, pkg) {
				return l.why
			}
		}
	}
	return ""
}

// TestViolates holds the rules to a few imports that must and must not
// pass.
func TestViolates(t *testing.T) {
	for _, tc := range []struct {
		pkg, imp string
		bad      bool
	}{
		{"pipeline/reader/", "pipeline/sink/", true},
		{"pipeline/sink/pgcopy/", "pipeline/reader/", true},
		{"pipeline/sink/pgcopy/", "pipeline/collisions/", false},
		{"pipeline/sink/pgcopy/", "pipeline/sink/", false},
		{"pipeline/job/", "pipeline/sink/parquetfile/", false},
		{"pipeline/job/", "cumulus/granule/", true},
		{"gen/corpus/", "cmd/backfill/", true},
		{"gen/corpus/", "pipeline/deadletter/", false},
		{"internal/store/", "pipeline/deadletter/", true},
		{"internal/testutil/", "gen/corpus/", true},
		{"pipeline/job/", "gen/corpus/", true},
		{"cumulus/granule/", "pipeline/ooid/", true},
		{"cumulus/granule/", "cumulus/jsvalue/", false},
		{"cumulus/jsvalue/", "cumulus/records/", true},
		{"cumulus/jsurl/", "cumulus/records/", true},
		{"cumulus/jsurl/", "cumulus/jsvalue/", false},
		{"pipeline/deadletter/", "pipeline/ooid/", true},
		{"pipeline/ingest/", "pipeline/stamped/", false},
		{"pipeline/ingest/", "pipeline/sink/", true},
		{"pipeline/stamped/", "pipeline/sink/", true},
		{"pipeline/reader/", "pipeline/stamped/", false},
		{"pipeline/reader/", "pipeline/reader/index/", false},
		{"pipeline/reader/index/", "pipeline/reader/report/", true},
		{"pipeline/reader/report/", "pipeline/reader/", true},
		{"pipeline/reader/report/", "pipeline/deadletter/", false},
		{"pipeline/job/", "internal/store/location/", true},
		{"pipeline/sink/parquetfile/", "github.com/aws/aws-sdk-go-v2/service/s3/", true},
		{"cumulus/dla/", "internal/store/s3/", true},
		{"internal/store/s3/", "github.com/aws/aws-sdk-go-v2/service/s3/", false},
		{"collector/", "pipeline/ooid/", false},
		{"collector/", "pipeline/reader/", true},
		{"internal/cli/", "pipeline/job/", true},
		{"cmd/backfill/internal/cumuluscmd/", "pipeline/ooid/", true},
		{"cmd/backfill/internal/idcmd/", "collector/", false},
		{"internal/cli/", "internal/units/", false},
		{"internal/pgnet/", "pipeline/sink/pgcopy/", true},
	} {
		if got := violates(tc.pkg, tc.imp) != ""; got != tc.bad {
			t.Errorf("violates(%s, %s) = %v, want %v", tc.pkg, tc.imp, got, tc.bad)
		}
	}
}
