// Package apiserver checks backfill's Jobs with the API server's own code
// for creating a Job: the scheme's defaulting and conversion, then the Job
// registry's create strategy (which drops the fields of features that are
// off at its version, and validates). The modules min and newest run this
// same file (newest's is a link to min's) at the minimum Kubernetes
// version the documentation states and at the newest release.
package apiserver

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	batchv1 "k8s.io/api/batch/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/apis/batch"
	_ "k8s.io/kubernetes/pkg/apis/batch/install"
	_ "k8s.io/kubernetes/pkg/apis/core/install"
	jobstrategy "k8s.io/kubernetes/pkg/registry/batch/job"
	"sigs.k8s.io/yaml"
)

// jobs reads the Jobs of a rendered kustomization (../../testdata/rendered,
// which the kustomization's own test keeps up to date).
func jobs(t *testing.T, name string) []batchv1.Job {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "rendered", name))
	if err != nil {
		t.Fatal(err)
	}
	var out []batchv1.Job
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var meta struct{ Kind string }
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		if meta.Kind != "Job" {
			continue
		}
		var j batchv1.Job
		if err := yaml.UnmarshalStrict(doc, &j); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, j)
	}
	return out
}

// create does to j what the API server does to a Job it is asked to
// create, up to storing it: default, convert, prepare (dropping what this
// version does not serve), fill in the system fields, validate.
func create(t *testing.T, j batchv1.Job) (*batch.Job, error) {
	t.Helper()
	legacyscheme.Scheme.Default(&j)
	var in batch.Job
	if err := legacyscheme.Scheme.Convert(&j, &in, nil); err != nil {
		t.Fatal(err)
	}
	ctx := genericapirequest.WithNamespace(context.Background(), j.Namespace)
	ctx = genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{IsResourceRequest: true, Verb: "create",
		APIGroup: "batch", APIVersion: "v1", Resource: "jobs", Namespace: j.Namespace, Name: j.Name})
	rest.FillObjectMetaSystemFields(&in) // the UID and time the store gives
	return &in, rest.BeforeCreate(jobstrategy.Strategy, ctx, &in)
}

func TestCreate(t *testing.T) {
	mod, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(mod), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "k8s.io/kubernetes" {
			t.Logf("the API server's code of k8s.io/kubernetes %s", f[1])
		}
	}
	n := 0
	for _, name := range []string{"example.yaml", "postgres.yaml"} {
		for _, j := range jobs(t, name) {
			n++
			got, err := create(t, *j.DeepCopy())
			if err != nil {
				t.Errorf("%s: Job %s refused: %v", name, j.Name, err)
				continue
			}
			if w := jobstrategy.Strategy.WarningsOnCreate(context.Background(), got); len(w) > 0 {
				t.Errorf("%s: Job %s: warnings %v", name, j.Name, w)
			}
			// Nothing the manifests ask for is dropped, as the fields of a
			// feature that is off are dropped without a word.
			s := got.Spec
			kept := map[string][2]any{
				"suspend":              {j.Spec.Suspend, s.Suspend},
				"completions":          {j.Spec.Completions, s.Completions},
				"parallelism":          {j.Spec.Parallelism, s.Parallelism},
				"backoffLimitPerIndex": {j.Spec.BackoffLimitPerIndex, s.BackoffLimitPerIndex},
				"maxFailedIndexes":     {j.Spec.MaxFailedIndexes, s.MaxFailedIndexes},
			}
			for field, v := range kept {
				if !reflect.ValueOf(v[0]).IsNil() && reflect.ValueOf(v[1]).IsNil() {
					t.Errorf("%s: Job %s: %s dropped at this version", name, j.Name, field)
				}
			}
			if j.Spec.PodFailurePolicy != nil && (s.PodFailurePolicy == nil || len(s.PodFailurePolicy.Rules) != len(j.Spec.PodFailurePolicy.Rules)) {
				t.Errorf("%s: Job %s: podFailurePolicy dropped at this version", name, j.Name)
			}
		}
	}
	if n != 9 {
		t.Errorf("%d Jobs checked, want 4 of the example and 5 with PostgreSQL", n)
	}

	// The check bites: an Indexed Job's per-index limit on a Job that is
	// not Indexed is refused.
	for _, j := range jobs(t, "example.yaml") {
		if j.Spec.BackoffLimitPerIndex == nil {
			continue
		}
		bad := j.DeepCopy()
		bad.Spec.CompletionMode = nil
		if _, err := create(t, *bad); err == nil {
			t.Errorf("Job %s with backoffLimitPerIndex and not Indexed is accepted", j.Name)
		}
		break
	}
}
