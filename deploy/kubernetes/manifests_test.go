package kubernetes

import (
	"bytes"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// render builds the kustomization dir (relative to this folder) with
// Kustomize's own code, as kubectl apply -k does, over an in-memory copy
// of this folder plus the extra files given.
func render(t *testing.T, dir string, extra map[string]string) []byte {
	t.Helper()
	mem := filesys.MakeFsInMemory()
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".yaml") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile("/k/"+p, b)
	})
	if err != nil {
		t.Fatal(err)
	}
	for p, s := range extra {
		if err := mem.WriteFile("/k/"+p, []byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	res, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(mem, "/k/"+dir)
	if err != nil {
		t.Fatalf("kustomize %s: %v", dir, err)
	}
	out, err := res.AsYaml()
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// objects is a rendered kustomization, decoded strictly.
type objects struct {
	jobs       map[string]*batchv1.Job // by backfill/step
	configMaps []corev1.ConfigMap
	namespaces []corev1.Namespace
	kinds      []string
}

// decode decodes every document of a rendered kustomization into the API
// types, refusing unknown fields (a misspelt field would be dropped by a
// lenient decoder, and by an older API server).
func decode(t *testing.T, rendered []byte) objects {
	t.Helper()
	o := objects{jobs: map[string]*batchv1.Job{}}
	for _, doc := range bytes.Split(rendered, []byte("\n---\n")) {
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatal(err)
		}
		var meta struct{ Kind, APIVersion string }
		json.Unmarshal(js, &meta)
		o.kinds = append(o.kinds, meta.Kind)
		strict := func(v any) {
			dec := json.NewDecoder(bytes.NewReader(js))
			dec.DisallowUnknownFields()
			if err := dec.Decode(v); err != nil {
				t.Fatalf("%s: %v\n%s", meta.Kind, err, doc)
			}
		}
		switch meta.Kind {
		case "Job":
			var j batchv1.Job
			strict(&j)
			if meta.APIVersion != "batch/v1" {
				t.Errorf("Job %s: apiVersion %s", j.Name, meta.APIVersion)
			}
			o.jobs[j.Labels["backfill/step"]] = &j
		case "ConfigMap":
			var c corev1.ConfigMap
			strict(&c)
			o.configMaps = append(o.configMaps, c)
		case "Namespace":
			var n corev1.Namespace
			strict(&n)
			o.namespaces = append(o.namespaces, n)
		default:
			t.Errorf("a %s in the kustomization", meta.Kind)
		}
	}
	return o
}

// The example overlay, as kubectl apply -k renders it: one ConfigMap that
// holds the shard count, which is every Job's; every Job suspended until
// run.sh starts it; a versioned image; exit 2 fails the Job; the pods meet
// the restricted Pod Security Standard; no Secret in what is applied.
func TestExample(t *testing.T) {
	o := decode(t, render(t, "example", nil))
	if slices.Contains(o.kinds, "Secret") {
		t.Error("a Secret is in the applied set: its placeholders would overwrite the real one")
	}
	if len(o.configMaps) != 1 {
		t.Fatalf("%d ConfigMaps", len(o.configMaps))
	}
	cfg := o.configMaps[0].Data
	shards, err := strconv.Atoi(cfg["BACKFILL_SHARDS"])
	if err != nil || !strings.HasPrefix(cfg["BACKFILL_OUT"], "s3://") || !strings.HasPrefix(cfg["BACKFILL_IN"], "s3://") {
		t.Fatalf("the run's settings: %v", cfg)
	}
	if len(o.namespaces) != 1 || o.namespaces[0].Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("the namespace does not enforce the restricted standard: %+v", o.namespaces)
	}
	for _, step := range []string{"plan", "map", "check", "load"} {
		j := o.jobs[step]
		if j == nil {
			t.Fatalf("no Job for step %s", step)
		}
		checkJob(t, step, j, o.configMaps[0].Name)
		if j.Namespace != o.namespaces[0].Name {
			t.Errorf("%s: namespace %q", step, j.Namespace)
		}
		if step == "map" || step == "load" {
			if j.Spec.Completions == nil || int(*j.Spec.Completions) != shards {
				t.Errorf("%s: completions %v, BACKFILL_SHARDS is %d", step, j.Spec.Completions, shards)
			}
			if p := cfg["BACKFILL_PARALLELISM"]; j.Spec.Parallelism == nil || strconv.Itoa(int(*j.Spec.Parallelism)) != p {
				t.Errorf("%s: parallelism %v, BACKFILL_PARALLELISM is %s", step, j.Spec.Parallelism, p)
			}
		}
	}
	// One place: the plan's --shards and the pods' JOB_COMPLETION_COUNT
	// are the ConfigMap's BACKFILL_SHARDS.
	plan := o.jobs["plan"].Spec.Template.Spec.Containers[0].Args
	if argAfter(plan, "--shards") != "$(BACKFILL_SHARDS)" || argAfter(plan, "--out") != "$(BACKFILL_OUT)/plan.json" {
		t.Errorf("plan args %v", plan)
	}
	for _, step := range []string{"map", "load"} {
		c := o.jobs[step].Spec.Template.Spec.Containers[0]
		var ref *corev1.ConfigMapKeySelector
		for _, e := range c.Env {
			if e.Name == "JOB_COMPLETION_COUNT" && e.ValueFrom != nil {
				ref = e.ValueFrom.ConfigMapKeyRef
			}
		}
		if ref == nil || ref.Name != o.configMaps[0].Name || ref.Key != "BACKFILL_SHARDS" {
			t.Errorf("%s: JOB_COMPLETION_COUNT is not BACKFILL_SHARDS of the ConfigMap", step)
		}
	}
	if m := o.jobs["map"].Spec.Template.Spec.Containers[0].Args; !slices.Contains(m, "--resume") {
		t.Errorf("map args %v: a retried shard skips what its predecessor committed (--resume)", m)
	}
	if c := o.jobs["check"].Spec.Template.Spec.Containers[0].Args; argAfter(c, "--rejects-exit") != "0" {
		t.Errorf("check args %v: a Job's check exits 0 with rejects (--rejects-exit 0), or it is retried", c)
	}
	// The shard count set in the overlay alone reaches every Job.
	example := string(must(os.ReadFile("example/kustomization.yaml")))
	five := strings.Replace(example, "BACKFILL_SHARDS="+cfg["BACKFILL_SHARDS"], "BACKFILL_SHARDS=5", 1)
	o5 := decode(t, render(t, "five", map[string]string{"five/kustomization.yaml": five, "five/namespace.yaml": string(must(os.ReadFile("example/namespace.yaml")))}))
	for _, step := range []string{"map", "load"} {
		if c := o5.jobs[step].Spec.Completions; c == nil || *c != 5 {
			t.Errorf("BACKFILL_SHARDS=5 in the overlay: %s completions %v", step, c)
		}
	}
	if o5.configMaps[0].Data["BACKFILL_SHARDS"] != "5" {
		t.Error("BACKFILL_SHARDS=5 in the overlay does not reach the ConfigMap")
	}
}

// The postgres component: a schema Job, and loads into the database whose
// connection comes from a Secret, never from the command line.
func TestPostgres(t *testing.T) {
	o := decode(t, render(t, "pg", postgresOverlay(t)))
	for _, step := range []string{"plan", "map", "check", "schema", "load"} {
		if o.jobs[step] == nil {
			t.Fatalf("no Job for step %s", step)
		}
		checkJob(t, step, o.jobs[step], o.configMaps[0].Name)
	}
	for _, step := range []string{"schema", "load"} {
		c := o.jobs[step].Spec.Template.Spec.Containers[0]
		if !slices.ContainsFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool {
			return e.SecretRef != nil && e.SecretRef.Name == "backfill-postgres" && (e.SecretRef.Optional == nil || !*e.SecretRef.Optional)
		}) {
			t.Errorf("%s: the connection does not come from the Secret backfill-postgres", step)
		}
		if slices.ContainsFunc(c.Args, func(a string) bool { return strings.Contains(a, "postgres://") || a == "--dsn" }) {
			t.Errorf("%s: a connection string on the command line: %v", step, c.Args)
		}
	}
	if a := o.jobs["load"].Spec.Template.Spec.Containers[0].Args; argAfter(a, "--sink") != "postgres" {
		t.Errorf("load args %v", a)
	}
}

// The example Secrets are complete and are not applied with the rest.
func TestSecrets(t *testing.T) {
	for f, keys := range map[string][]string{
		"secrets/s3.example.yaml":       {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_REGION"},
		"secrets/postgres.example.yaml": {"PGHOST", "PGDATABASE", "PGUSER", "PGPASSWORD"},
	} {
		js, err := yaml.YAMLToJSON(must(os.ReadFile(f)))
		if err != nil {
			t.Fatal(err)
		}
		var s corev1.Secret
		dec := json.NewDecoder(bytes.NewReader(js))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&s); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, k := range keys {
			if s.StringData[k] == "" {
				t.Errorf("%s: no %s", f, k)
			}
		}
	}
}

// postgresOverlay is the example with its postgres line uncommented, as
// its comment says to do, in the folder pg.
func postgresOverlay(t *testing.T) map[string]string {
	t.Helper()
	example := string(must(os.ReadFile("example/kustomization.yaml")))
	overlay := strings.Replace(example, "  # - ../postgres\n", "  - ../postgres\n", 1)
	if overlay == example {
		t.Fatal("the example has no postgres line to uncomment")
	}
	return map[string]string{"pg/kustomization.yaml": overlay, "pg/namespace.yaml": string(must(os.ReadFile("example/namespace.yaml")))}
}

var update = flag.Bool("update", false, "rewrite testdata/rendered/ from the kustomization")

// The kustomization as rendered, kept in testdata/rendered/ for the checks
// by Kubernetes' own code (the modules under upstream/, each at a
// Kubernetes version), which must not take Kustomize's dependencies. Run
// go test -run TestRendered -update after changing a manifest.
func TestRendered(t *testing.T) {
	for name, got := range map[string][]byte{
		"example.yaml":  render(t, "example", nil),
		"postgres.yaml": render(t, "pg", postgresOverlay(t)),
	} {
		file := filepath.Join("testdata", "rendered", name)
		if *update {
			if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(file, got, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if want, err := os.ReadFile(file); err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s is not the kustomization rendered (%v): run go test -run TestRendered -update", file, err)
		}
	}
}

// checkJob checks what every Job of backfill has.
func checkJob(t *testing.T, step string, j *batchv1.Job, configMap string) {
	t.Helper()
	spec := j.Spec.Template.Spec
	if j.Spec.Suspend == nil || !*j.Spec.Suspend {
		t.Errorf("%s: not suspended: kubectl apply -k would start every phase at once", step)
	}
	if spec.RestartPolicy != corev1.RestartPolicyNever || len(spec.Containers) != 1 {
		t.Fatalf("%s: restartPolicy %s, %d containers", step, spec.RestartPolicy, len(spec.Containers))
	}
	c := spec.Containers[0]
	want := map[string]string{"plan": "plan", "map": "run", "check": "check", "schema": "schema", "load": "load"}[step]
	if len(c.Args) == 0 || c.Args[0] != want || len(c.Command) != 0 {
		t.Errorf("%s: command %v, args %v; want the image's entrypoint and the %s command", step, c.Command, c.Args, want)
	}
	if !strings.HasPrefix(c.Image, "registry.example.com/backfill:v") || c.ImagePullPolicy != corev1.PullIfNotPresent {
		t.Errorf("%s: image %q, pull policy %q; want a released version, pulled if not present", step, c.Image, c.ImagePullPolicy)
	}
	if !slices.ContainsFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool { return e.ConfigMapRef != nil && e.ConfigMapRef.Name == configMap }) {
		t.Errorf("%s: the settings do not come from the ConfigMap %s", step, configMap)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("%s: no cpu and memory requests or memory limit", step)
	}
	if j.Labels["backfill/step"] != j.Spec.Template.Labels["backfill/step"] || j.Spec.Template.Labels["app.kubernetes.io/name"] != "backfill" {
		t.Errorf("%s: pod labels %v", step, j.Spec.Template.Labels)
	}
	indexed := j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion
	if indexed != (step == "map" || step == "load") {
		t.Errorf("%s: Indexed %v", step, indexed)
	}
	if indexed && (j.Spec.BackoffLimitPerIndex == nil || j.Spec.MaxFailedIndexes == nil) {
		t.Errorf("%s: no backoffLimitPerIndex or maxFailedIndexes", step)
	}
	// Exit 2 (usage, plan, phases out of order) fails the Job at once.
	p := j.Spec.PodFailurePolicy
	if p == nil || !slices.ContainsFunc(p.Rules, func(r batchv1.PodFailurePolicyRule) bool {
		return r.Action == batchv1.PodFailurePolicyActionFailJob && r.OnExitCodes != nil &&
			r.OnExitCodes.Operator == batchv1.PodFailurePolicyOnExitCodesOpIn && slices.Equal(r.OnExitCodes.Values, []int32{2})
	}) {
		t.Errorf("%s: no podFailurePolicy rule failing the Job on exit 2", step)
	}
	// The restricted Pod Security Standard, by the admission's own checks.
	eval, err := policy.NewEvaluator(policy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range eval.EvaluatePod(psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}, &j.Spec.Template.ObjectMeta, &spec) {
		if !r.Allowed {
			t.Errorf("%s: refused under the restricted standard: %s (%s)", step, r.ForbiddenReason, r.ForbiddenDetail)
		}
	}
}

// argAfter returns the value after name in args.
func argAfter(args []string, name string) string {
	if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
