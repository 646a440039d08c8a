// Package kubernetes holds the manifests that run backfill as Kubernetes
// Jobs (see docs/scale-out.md); its test decodes them strictly into the
// Kubernetes API types, since no cluster is reachable from the tests.
package kubernetes

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"
)

// strict decodes one YAML document into v, refusing unknown fields.
func strict(t *testing.T, name string, doc []byte, v any) {
	t.Helper()
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// flag returns the value after name in args.
func flag(args []string, name string) string {
	if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
		return args[i+1]
	}
	return ""
}

func TestManifests(t *testing.T) {
	files, _ := filepath.Glob("*.yaml")
	if len(files) != 5 {
		t.Fatalf("%d manifests", len(files))
	}
	jobs := map[string]*batchv1.Job{}
	var secret corev1.Secret
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var meta struct{ Kind, APIVersion string }
		strict(t, f, data, &struct {
			Kind       string `json:"kind"`
			APIVersion string `json:"apiVersion"`
			Metadata   any    `json:"metadata"`
			Spec       any    `json:"spec"`
			Type       any    `json:"type"`
			StringData any    `json:"stringData"`
		}{})
		js, _ := yaml.YAMLToJSON(data)
		json.Unmarshal(js, &meta)
		switch meta.Kind {
		case "Secret":
			strict(t, f, data, &secret)
		case "Job":
			var j batchv1.Job
			strict(t, f, data, &j)
			if meta.APIVersion != "batch/v1" {
				t.Errorf("%s: apiVersion %s", f, meta.APIVersion)
			}
			jobs[j.Labels["backfill/step"]] = &j
		default:
			t.Errorf("%s: kind %q", f, meta.Kind)
		}
	}
	if secret.Name == "" || secret.StringData["AWS_ACCESS_KEY_ID"] == "" {
		t.Errorf("the Secret has no name or no AWS_ACCESS_KEY_ID")
	}
	for _, step := range []string{"plan", "map", "check", "load"} {
		j := jobs[step]
		if j == nil {
			t.Fatalf("no Job for step %s", step)
		}
		spec := j.Spec.Template.Spec
		if spec.RestartPolicy != corev1.RestartPolicyNever || len(spec.Containers) != 1 {
			t.Errorf("%s: restartPolicy %s, %d containers", step, spec.RestartPolicy, len(spec.Containers))
			continue
		}
		c := spec.Containers[0]
		want := map[string]string{"plan": "plan", "map": "run", "check": "check", "load": "load"}[step]
		if len(c.Args) == 0 || c.Args[0] != want || c.Image == "" {
			t.Errorf("%s: args %v, image %q; want the %s command", step, c.Args, c.Image, want)
		}
		if len(c.EnvFrom) != 1 || c.EnvFrom[0].SecretRef == nil || c.EnvFrom[0].SecretRef.Name != secret.Name {
			t.Errorf("%s: the S3 credentials do not come from the Secret %s", step, secret.Name)
		}
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
			t.Errorf("%s: no cpu and memory requests or memory limit", step)
		}
		if j.Labels["backfill/step"] != j.Spec.Template.Labels["backfill/step"] {
			t.Errorf("%s: the pod template's labels are not the Job's", step)
		}
	}
	// One plan, one output, the same shard count everywhere.
	planArgs := jobs["plan"].Spec.Template.Spec.Containers[0].Args
	shards, err := strconv.Atoi(flag(planArgs, "--shards"))
	if err != nil {
		t.Fatalf("plan --shards: %v", err)
	}
	planFile, out := flag(planArgs, "--out"), ""
	for _, step := range []string{"map", "check", "load"} {
		j := jobs[step]
		c := j.Spec.Template.Spec.Containers[0]
		if flag(c.Args, "--plan") != planFile {
			t.Errorf("%s: --plan %q, the plan Job writes %q", step, flag(c.Args, "--plan"), planFile)
		}
		if out == "" {
			out = flag(c.Args, "--out")
		}
		if flag(c.Args, "--out") != out || !strings.HasPrefix(planFile, out+"/") {
			t.Errorf("%s: --out %q; every step has one output, the plan in it", step, flag(c.Args, "--out"))
		}
		if step == "check" {
			if j.Spec.CompletionMode != nil && *j.Spec.CompletionMode == batchv1.IndexedCompletion {
				t.Error("check is one pod, not Indexed")
			}
			continue
		}
		if j.Spec.CompletionMode == nil || *j.Spec.CompletionMode != batchv1.IndexedCompletion {
			t.Errorf("%s: not an Indexed Job", step)
		}
		if j.Spec.Completions == nil || int(*j.Spec.Completions) != shards {
			t.Errorf("%s: completions %v, the plan has %d shards", step, j.Spec.Completions, shards)
		}
		if j.Spec.BackoffLimitPerIndex == nil || j.Spec.MaxFailedIndexes == nil {
			t.Errorf("%s: no backoffLimitPerIndex or maxFailedIndexes", step)
		}
		count := ""
		for _, e := range c.Env {
			if e.Name == "JOB_COMPLETION_COUNT" {
				count = e.Value
			}
		}
		if count != strconv.Itoa(shards) {
			t.Errorf("%s: JOB_COMPLETION_COUNT %q, the plan has %d shards", step, count, shards)
		}
	}
}
