package kubernetes

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// fakeKubectl is a kubectl that keeps its cluster in a folder: the Jobs
// created, and the state of each (suspended, complete or failed). A Job
// unsuspended completes at once, but for the one named in FAIL, which
// fails; check's log says REJECTS rejects.
const fakeKubectl = `set -u
s=$STATE
echo "$*" >> $s/calls
args=("$@")
[ "${args[0]}" = -n ] && args=("${args[@]:2}")
case "${args[0]} ${args[1]:-}" in
"kustomize "*) cat "$RENDERED" ;;
"create -f")
	for j in $(grep -E '^  name: backfill-(plan|map|check|load|schema)$' | awk '{print $2}'); do
		if [ -e $s/$j ]; then echo "Error from server (AlreadyExists): jobs.batch \"$j\" already exists" >&2
		else echo suspended > $s/$j; fi
	done ;;
"get job")
	[ -e $s/${args[2]} ] || exit 1
	case $(cat $s/${args[2]}) in complete) echo Complete ;; failed) echo Failed ;; esac ;;
"patch job")
	j=${args[2]}
	if [ "$j" = "${FAIL:-}" ]; then echo failed > $s/$j; else echo complete > $s/$j; fi ;;
"wait --for=condition=Complete")
	[ "$(cat $s/${args[2]#job/})" = complete ] && exit 0; sleep 30 ;;
"wait --for=condition=Failed")
	[ "$(cat $s/${args[2]#job/})" = failed ] && exit 0; sleep 30 ;;
"logs job/backfill-check") printf 'collision losers 0\nrejects        %s (inputs lost)\n' "$REJECTS" ;;
"logs "*) echo "the pod's last lines" ;;
*) echo "fake kubectl: $*" >&2; exit 1 ;;
esac
`

// runSh runs run.sh against the fake kubectl and returns its exit status,
// its output and the kubectl calls it made.
func runSh(t *testing.T, state string, env ...string) (int, string, []string) {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "kubectl")
	if err := os.WriteFile(bin, []byte(fakeKubectl), 0o644); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(state, "calls"))
	cmd := exec.Command("bash", "run.sh", "example")
	rendered, _ := filepath.Abs(filepath.Join("testdata", "rendered", "example.yaml"))
	cmd.Env = append(os.Environ(), append([]string{"KUBECTL=bash " + bin, "STATE=" + state, "RENDERED=" + rendered}, env...)...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	calls, _ := os.ReadFile(filepath.Join(state, "calls"))
	return code, string(out), strings.Split(strings.TrimSpace(string(calls)), "\n")
}

// started returns the Jobs run.sh unsuspended, in order.
func started(calls []string) []string {
	var out []string
	for _, c := range calls {
		if f := strings.Fields(c); len(f) >= 5 && f[2] == "patch" {
			out = append(out, f[4])
		}
	}
	return out
}

// run.sh starts the phases one after the other, each once the one before
// has completed; exits 3 when check found rejects; stops at a failed phase
// with 1; run again, it goes on from there and leaves completed Jobs be.
func TestRunSh(t *testing.T) {
	state := t.TempDir()
	code, out, calls := runSh(t, state, "REJECTS=0", "FAIL=backfill-check")
	if code != 1 || !strings.Contains(out, "backfill-check did not complete (Failed)") {
		t.Fatalf("a failing check: exit %d\n%s", code, out)
	}
	if got := strings.Join(started(calls), " "); got != "backfill-plan backfill-map backfill-check" {
		t.Errorf("started %q before the failure", got)
	}
	// Mended and deleted, the check Job is made anew by the next run.
	os.Remove(filepath.Join(state, "backfill-check"))
	code, out, calls = runSh(t, state, "REJECTS=5")
	if code != 3 || !strings.Contains(out, "the corpus has 5 rejects") {
		t.Fatalf("a run with rejects: exit %d\n%s", code, out)
	}
	if got := strings.Join(started(calls), " "); got != "backfill-check backfill-load" {
		t.Errorf("run again, it started %q; want check and load only", got)
	}
	if !strings.Contains(out, "backfill-plan completed before") {
		t.Errorf("completed Jobs not named as such:\n%s", out)
	}
	code, out, _ = runSh(t, state, "REJECTS=0")
	if code != 0 || !strings.Contains(out, "every phase completed") {
		t.Errorf("a run with nothing left to do: exit %d\n%s", code, out)
	}
}
