package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/api/legacyscheme"
	"k8s.io/kubernetes/pkg/controller/job"
	"sigs.k8s.io/yaml"

	"github.com/backfill-dev/backfill/internal/s3test"
	"github.com/backfill-dev/backfill/internal/store"
	"github.com/backfill-dev/backfill/internal/store/location"
)

// cluster is the Job controller of Kubernetes (the code a cluster's
// controller manager runs, at this module's version) over an in-memory
// API, and a kubelet that runs each pod it creates as a process: PID 1 in
// PID and UTS namespaces of its own, under the pod's host name, with the
// environment and arguments the kubelet would give it.
type cluster struct {
	t      *testing.T
	client *fake.Clientset
	bin    string // the image's entrypoint

	mu    sync.Mutex
	procs map[string]*proc // by pod name
	// started is called with each process started, for faults.
	started func(*proc)
	rv      atomic.Int64 // the last resourceVersion given
}

// proc is a pod's running container.
type proc struct {
	pod    *corev1.Pod
	cmd    *exec.Cmd
	log    bytes.Buffer
	exited chan int
	lost   bool // its status was set Failed while it runs on (a node presumed dead)
}

func newCluster(t *testing.T, bin string) *cluster {
	c := &cluster{t: t, client: fake.NewSimpleClientset(), bin: bin, procs: map[string]*proc{}}
	// Every write gives the object a new resourceVersion, as the API
	// server does. The in-memory API leaves it as it is, and the Job
	// controller takes an update whose resourceVersion did not change for
	// a resync and drops it: a pod's Failed or Succeeded would then be
	// seen only if something else made the controller sync the Job again.
	// (This reactor is the last of the ones prepended here: the others
	// hand it what they do not handle themselves, and bump on their own.)
	objects := clienttesting.ObjectReaction(c.client.Tracker())
	c.client.PrependReactor("*", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		switch a.GetVerb() {
		case "create", "update":
			c.bump(a.(interface{ GetObject() runtime.Object }).GetObject())
		case "patch":
			handled, o, err := objects(a)
			if !handled || err != nil {
				return handled, o, err
			}
			c.bump(o)
			return true, o, c.client.Tracker().Update(a.GetResource(), o, a.GetNamespace())
		}
		return false, nil, nil
	})
	// The API server names pods from generateName; the in-memory one does
	// not.
	c.client.PrependReactor("create", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		p := a.(clienttesting.CreateAction).GetObject().(*corev1.Pod)
		if p.Name == "" {
			p.Name = p.GenerateName + rand.String(5)
		}
		p.CreationTimestamp = metav1.Now()
		return false, nil, nil
	})
	// A pod with finalizers is not deleted but marked for deletion, and
	// goes when its last finalizer does (the in-memory API would delete it
	// at once, and the controller would lose the failed pod that its
	// per-index backoff and failure count are read from).
	c.client.PrependReactor("delete", "pods", func(a clienttesting.Action) (bool, runtime.Object, error) {
		d := a.(clienttesting.DeleteAction)
		o, err := c.client.Tracker().Get(d.GetResource(), d.GetNamespace(), d.GetName())
		if err != nil {
			return false, nil, nil
		}
		p := o.(*corev1.Pod).DeepCopy()
		if len(p.Finalizers) == 0 {
			return false, nil, nil
		}
		if p.DeletionTimestamp == nil {
			now := metav1.Now()
			p.DeletionTimestamp = &now
		}
		c.bump(p)
		return true, p, c.client.Tracker().Update(d.GetResource(), p, d.GetNamespace())
	})
	// A status update changes the status only, as the API server's status
	// subresource does (the in-memory one would store the whole object, and
	// put back a spec changed meanwhile).
	c.client.PrependReactor("update", "*", func(a clienttesting.Action) (bool, runtime.Object, error) {
		u := a.(clienttesting.UpdateAction)
		if u.GetSubresource() != "status" {
			return false, nil, nil
		}
		cur, err := c.client.Tracker().Get(u.GetResource(), u.GetNamespace(), u.GetObject().(metav1.Object).GetName())
		if err != nil {
			return true, nil, err
		}
		switch n := u.GetObject().(type) {
		case *batchv1.Job:
			j := cur.(*batchv1.Job).DeepCopy()
			j.Status = n.Status
			cur = j
		case *corev1.Pod:
			p := cur.(*corev1.Pod).DeepCopy()
			p.Status = n.Status
			cur = p
		default:
			return false, nil, nil
		}
		c.bump(cur)
		return true, cur, c.client.Tracker().Update(u.GetResource(), cur, u.GetNamespace())
	})
	// The in-memory API does not replay what was written between an
	// informer's list and its watch: nothing is written before both
	// watches (the pods', the Jobs') are there.
	watching := make(chan string, 8)
	c.client.PrependWatchReactor("*", func(a clienttesting.Action) (bool, watch.Interface, error) {
		gvr := a.GetResource()
		w, err := c.client.Tracker().Watch(gvr, a.GetNamespace())
		select {
		case watching <- gvr.Resource:
		default:
		}
		return true, w, err
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := informers.NewSharedInformerFactory(c.client, 0)
	jc, err := job.NewController(ctx, f.Core().V1().Pods(), f.Batch().V1().Jobs(), c.client)
	if err != nil {
		t.Fatal(err)
	}
	f.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) { c.run(o.(*corev1.Pod)) },
		UpdateFunc: func(_, o any) {
			p := o.(*corev1.Pod)
			if p.DeletionTimestamp != nil && len(p.Finalizers) == 0 {
				c.client.CoreV1().Pods(p.Namespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{})
			}
		},
		DeleteFunc: func(o any) {
			if p, ok := o.(*corev1.Pod); ok {
				c.kill(p.Name)
			}
		},
	})
	f.Start(ctx.Done())
	for seen := map[string]bool{}; !seen["pods"] || !seen["jobs"]; {
		seen[<-watching] = true
	}
	go jc.Run(ctx, 4)
	t.Cleanup(func() {
		c.mu.Lock()
		defer c.mu.Unlock()
		for _, p := range c.procs {
			p.cmd.Process.Kill()
		}
	})
	return c
}

// bump gives o the next resourceVersion.
func (c *cluster) bump(o runtime.Object) {
	if m, err := meta.Accessor(o); err == nil {
		m.SetResourceVersion(strconv.FormatInt(c.rv.Add(1), 10))
	}
}

// createJob creates j as the API server does (create in
// apiserver_test.go: defaults, the selector and labels it generates, its
// UID, validation).
func (c *cluster) createJob(j *batchv1.Job) {
	c.t.Helper()
	in, err := create(c.t, *j.DeepCopy())
	if err != nil {
		c.t.Fatalf("Job %s: %v", j.Name, err)
	}
	var out batchv1.Job
	if err := legacyscheme.Scheme.Convert(in, &out, nil); err != nil {
		c.t.Fatal(err)
	}
	if _, err := c.client.BatchV1().Jobs(out.Namespace).Create(context.Background(), &out, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) createConfigMap(cm *corev1.ConfigMap) {
	c.t.Helper()
	if _, err := c.client.CoreV1().ConfigMaps(cm.Namespace).Create(context.Background(), cm, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// run starts the container of a pod the controller created.
func (c *cluster) run(pod *corev1.Pod) {
	t := c.t
	if pod.Status.Phase != "" && pod.Status.Phase != corev1.PodPending {
		return
	}
	ct := pod.Spec.Containers[0]
	env := c.env(pod, ct)
	args := make([]string, len(ct.Args))
	for i, a := range ct.Args {
		args[i] = expand(a, env)
	}
	host := pod.Spec.Hostname
	if host == "" {
		host = pod.Name
	}
	p := &proc{pod: pod, exited: make(chan int, 1)}
	p.cmd = exec.Command("sh", append([]string{"-c", `hostname "$0" && exec "$@"`, host, c.bin}, args...)...)
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWPID | syscall.CLONE_NEWUTS}
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = &syncWriter{w: &p.log, mu: &c.mu}, &syncWriter{w: &p.log, mu: &c.mu}
	started := metav1.Now()
	if err := p.cmd.Start(); err != nil {
		t.Errorf("pod %s: %v", pod.Name, err)
		return
	}
	c.mu.Lock()
	c.procs[pod.Name] = p
	hook := c.started
	c.mu.Unlock()
	c.setStatus(pod, corev1.PodRunning, nil, started)
	if hook != nil {
		hook(p)
	}
	go func() {
		err := p.cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
			if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				code = 128 + int(ws.Signal()) // as a container runtime reports it
			}
		}
		p.exited <- code
		c.mu.Lock()
		lost := p.lost
		c.mu.Unlock()
		if !lost {
			c.setStatus(pod, "", &code, started)
		}
	}()
}

// setStatus sets the pod's phase (Running), or its container's exit and
// the phase that follows from it.
func (c *cluster) setStatus(pod *corev1.Pod, phase corev1.PodPhase, exit *int, started metav1.Time) {
	ctx := context.Background()
	for {
		cur, err := c.client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return
		}
		if err != nil {
			c.t.Error(err)
			return
		}
		st := corev1.ContainerStatus{Name: pod.Spec.Containers[0].Name, Image: pod.Spec.Containers[0].Image}
		if exit == nil {
			st.State.Running = &corev1.ContainerStateRunning{StartedAt: started}
		} else {
			phase = corev1.PodSucceeded
			if *exit != 0 {
				phase = corev1.PodFailed
			}
			st.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: int32(*exit), StartedAt: started, FinishedAt: metav1.Now()}
		}
		cur.Status.Phase = phase
		cur.Status.ContainerStatuses = []corev1.ContainerStatus{st}
		_, err = c.client.CoreV1().Pods(pod.Namespace).UpdateStatus(ctx, cur, metav1.UpdateOptions{})
		if !apierrors.IsConflict(err) {
			if err != nil && !apierrors.IsNotFound(err) {
				c.t.Error(err)
			}
			return
		}
	}
}

// lose marks the pod of p Failed, as the node controller does when the
// pod's node stops answering, while its process runs on.
func (c *cluster) lose(p *proc) {
	c.mu.Lock()
	p.lost = true
	c.mu.Unlock()
	code := 137
	c.setStatus(p.pod, "", &code, metav1.Now())
}

func (c *cluster) kill(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p := c.procs[name]; p != nil && !p.lost {
		p.cmd.Process.Kill()
	}
}

// env is the container's environment as the kubelet makes it: envFrom,
// then env, with the downward API's annotations and ConfigMap keys.
func (c *cluster) env(pod *corev1.Pod, ct corev1.Container) []string {
	ctx := context.Background()
	var env []string
	configMap := func(name string) map[string]string {
		cm, err := c.client.CoreV1().ConfigMaps(pod.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			c.t.Errorf("pod %s: ConfigMap %s: %v", pod.Name, name, err)
			return nil
		}
		return cm.Data
	}
	for _, ef := range ct.EnvFrom {
		switch {
		case ef.ConfigMapRef != nil:
			for k, v := range configMap(ef.ConfigMapRef.Name) {
				env = append(env, k+"="+v)
			}
		case ef.SecretRef != nil && (ef.SecretRef.Optional == nil || !*ef.SecretRef.Optional):
			c.t.Errorf("pod %s: the Secret %s is required, and there is none", pod.Name, ef.SecretRef.Name)
		}
	}
	for _, e := range ct.Env {
		v := e.Value
		switch {
		case e.ValueFrom == nil:
		case e.ValueFrom.FieldRef != nil:
			m := regexp.MustCompile(`^metadata\.(annotations|labels)\['(.+)'\]$`).FindStringSubmatch(e.ValueFrom.FieldRef.FieldPath)
			switch {
			case m == nil:
				c.t.Errorf("pod %s: field %s", pod.Name, e.ValueFrom.FieldRef.FieldPath)
				continue
			case m[1] == "labels":
				v = pod.Labels[m[2]]
			default:
				v = pod.Annotations[m[2]]
			}
		case e.ValueFrom.ConfigMapKeyRef != nil:
			v = configMap(e.ValueFrom.ConfigMapKeyRef.Name)[e.ValueFrom.ConfigMapKeyRef.Key]
		}
		env = append(env, e.Name+"="+v)
	}
	return env
}

// expand expands $(VAR) in a container's argument as the kubelet does.
func expand(s string, env []string) string {
	vars := map[string]string{}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		vars[k] = v
	}
	return regexp.MustCompile(`\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)`).ReplaceAllStringFunc(s, func(m string) string {
		if m == "$$" {
			return "$"
		}
		if v, ok := vars[m[2:len(m)-1]]; ok {
			return v
		}
		return m
	})
}

// start unsuspends a Job, as run.sh does, and waits for it to complete.
func (c *cluster) start(j *batchv1.Job, timeout time.Duration) error {
	ctx := context.Background()
	jobs := c.client.BatchV1().Jobs(j.Namespace)
	if _, err := jobs.Patch(ctx, j.Name, "application/merge-patch+json", []byte(`{"spec":{"suspend":false}}`), metav1.PatchOptions{}); err != nil {
		return err
	}
	w, err := jobs.Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	defer w.Stop()
	deadline := time.After(timeout)
	for {
		cur, err := jobs.Get(ctx, j.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range cur.Status.Conditions {
			if cond.Status != corev1.ConditionTrue {
				continue
			}
			switch cond.Type {
			case batchv1.JobComplete:
				return nil
			case batchv1.JobFailed:
				return fmt.Errorf("Job %s failed: %s: %s\n%s", j.Name, cond.Reason, cond.Message, c.logs(j.Name))
			}
		}
		select {
		case <-w.ResultChan():
		case <-deadline:
			return fmt.Errorf("Job %s did not finish within %v\n%s", j.Name, timeout, c.logs(j.Name))
		}
	}
}

// logs returns the output of the Job's pods.
func (c *cluster) logs(job string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for name, p := range c.procs {
		if p.pod.Labels["batch.kubernetes.io/job-name"] == job || strings.HasPrefix(name, job+"-") {
			fmt.Fprintf(&b, "--- %s\n%s", name, p.log.String())
		}
	}
	return b.String()
}

// pods returns the processes of index i of a Job, in the order started.
func (c *cluster) pods(job string, i int) []*proc {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*proc
	for _, p := range c.procs {
		if p.pod.Spec.Hostname == fmt.Sprintf("%s-%d", job, i) {
			out = append(out, p)
		}
	}
	for a := range out {
		for b := a + 1; b < len(out); b++ {
			if out[b].pod.CreationTimestamp.Before(&out[a].pod.CreationTimestamp) {
				out[a], out[b] = out[b], out[a]
			}
		}
	}
	return out
}

type syncWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// backfill builds the binary of the image (CGO_ENABLED=0, as make image).
func backfill(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "backfill")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/backfill")
	cmd.Dir = filepath.Join("..", "..", "..", "..")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// renderedJobs returns the Jobs and the ConfigMap of the example.
func renderedObjects(t *testing.T) (map[string]*batchv1.Job, *corev1.ConfigMap) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "rendered", "example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	jobs := map[string]*batchv1.Job{}
	var cm *corev1.ConfigMap
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var meta struct{ Kind string }
		yaml.Unmarshal(doc, &meta)
		switch meta.Kind {
		case "Job":
			var j batchv1.Job
			if err := yaml.UnmarshalStrict(doc, &j); err != nil {
				t.Fatal(err)
			}
			jobs[j.Labels["backfill/step"]] = &j
		case "ConfigMap":
			cm = &corev1.ConfigMap{}
			if err := yaml.UnmarshalStrict(doc, cm); err != nil {
				t.Fatal(err)
			}
		}
	}
	return jobs, cm
}

// The example's Jobs run by Kubernetes' own Job controller, their pods as
// processes that are PID 1 under the pod's host name, on the tests' S3
// server, over a generated corpus with damage and collisions across
// shards. A map pod is SIGKILLed just after its first commit; another is
// SIGSTOPped there and its node presumed dead. The controller replaces
// each after its backoff; the replacement takes the lock over from its
// predecessor at once. Every Job completes, no bucket is committed twice,
// the frozen pod commits nothing once continued, and the output is the
// one-machine run's.
func TestJobController(t *testing.T) {
	if os.Geteuid() != 0 {
		// BACKFILL_TEST_STRICT (.ci/run sets it): CI must run every test.
		if os.Getenv("BACKFILL_TEST_STRICT") != "" {
			t.Fatal("pods in PID and UTS namespaces of their own need root, and BACKFILL_TEST_STRICT is set: CI must run this test as root")
		}
		t.Skip("pods in PID and UTS namespaces of their own need root (CI runs as root)")
	}
	bin := backfill(t)
	srv := s3test.Start(t, "test")
	dir := t.TempDir()
	sh := func(args ...string) string {
		t.Helper()
		out, err := exec.Command(bin, args...).CombinedOutput()
		if code := exitCode(err); code != 0 && code != 3 {
			t.Fatalf("backfill %v: exit %d\n%s", args, code, out)
		}
		return string(out)
	}
	sh("gen", "-q", "--out", dir+"/c", "--buckets", "9", "--reports", "60", "--can-size", "256KiB",
		"--min-measurements", "400", "--max-measurements", "4000", "--time-slots", "3", "--seed", "21", "--corrupt", "all=0.02", "--max-template", "1KiB")
	dst, err := location.Open(context.Background(), "s3://test/c")
	if err != nil {
		t.Fatal(err)
	}
	if err := store.Upload(context.Background(), dst, dir+"/c"); err != nil {
		t.Fatal(err)
	}
	// A narrow counter, so that reports collide across shards.
	scheme := []string{"--counter-bits", "20"}
	var single struct {
		Tally map[string]any
	}
	oneRun, err := exec.Command(bin, append([]string{"run", "-q", "--json", "--in", "s3://test/c", "--out", "s3://test/single"}, scheme...)...).Output()
	if code := exitCode(err); code != 3 || json.Unmarshal(oneRun, &single.Tally) != nil {
		t.Fatalf("the one-machine run: exit %d, want 3 (the corpus has rejects)\n%s", code, oneRun)
	}

	jobs, cm := renderedObjects(t)
	const shards = 3
	// The overlay's settings, for this run.
	cm.Data["BACKFILL_IN"], cm.Data["BACKFILL_OUT"] = "s3://test/c", "s3://test/job"
	cm.Data["BACKFILL_SHARDS"], cm.Data["BACKFILL_PARALLELISM"] = fmt.Sprint(shards), fmt.Sprint(shards)
	for _, step := range []string{"map", "load"} {
		n := int32(shards)
		jobs[step].Spec.Completions, jobs[step].Spec.Parallelism = &n, &n
	}
	m := &jobs["map"].Spec.Template.Spec.Containers[0]
	m.Args = append(m.Args, scheme...)
	c := newCluster(t, bin)
	c.createConfigMap(cm)
	for _, j := range jobs {
		c.createJob(j)
	}
	if err := c.start(jobs["plan"], 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	var p struct {
		Buckets []struct {
			Name  string
			Shard int
		}
	}
	if err := json.Unmarshal([]byte(readS3(t, "s3://test/job/plan.json")), &p); err != nil {
		t.Fatal(err)
	}
	per := map[int]int{}
	for _, b := range p.Buckets {
		per[b.Shard]++
	}
	killed, stopped := -1, -1
	for i := range shards {
		switch {
		case per[i] < 2:
		case killed < 0:
			killed = i
		case stopped < 0:
			stopped = i
		}
	}
	if stopped < 0 {
		t.Fatalf("fewer than two shards of two buckets or more: %v", per)
	}

	// Each victim's first pod is struck when its first bucket is
	// committed (its measurements object, stored after the ledger entry,
	// the last PUT of a commit), before the pod has the answer.
	var mu sync.Mutex
	victims := map[int]*proc{}
	var killedAt, stoppedAt time.Time
	var frozen *proc
	c.mu.Lock()
	c.started = func(pr *proc) {
		mu.Lock()
		defer mu.Unlock()
		for _, i := range []int{killed, stopped} {
			if _, seen := victims[i]; !seen && pr.pod.Spec.Hostname == fmt.Sprintf("backfill-map-%d", i) {
				victims[i] = pr // the first pod of the index only
			}
		}
	}
	c.mu.Unlock()
	ledger := func(i int) string { return fmt.Sprintf("/test/job/shards/%d/measurements/", i) }
	srv.OnPut(func(put s3test.Put) {
		mu.Lock()
		defer mu.Unlock()
		for i, v := range victims {
			if v == nil || !strings.HasPrefix(put.Path, ledger(i)) {
				continue
			}
			victims[i] = nil
			if i == killed {
				v.cmd.Process.Signal(syscall.SIGKILL)
				killedAt = time.Now()
			} else {
				v.cmd.Process.Signal(syscall.SIGSTOP)
				stoppedAt = time.Now()
				frozen = v
				go c.lose(v)
			}
		}
	})
	if err := c.start(jobs["map"], 5*time.Minute); err != nil {
		t.Fatal(err)
	}
	srv.OnPut(nil)
	firstAfter := func(i int, since time.Time) time.Duration { return srv.FirstPutAfter(ledger(i), since) }
	for i, at := range map[int]time.Time{killed: killedAt, stopped: stoppedAt} {
		took := firstAfter(i, at)
		t.Logf("index %d: %d pods; struck to the replacement's first commit: %.1f s", i, len(c.pods("backfill-map", i)), took.Seconds())
		// Not a speed: a replacement takes the struck pod's lock over at
		// once instead of waiting out its 2-minute time to live; the bound
		// is half of that, whatever the machine's speed.
		if at.IsZero() || took < 0 || took > time.Minute {
			t.Errorf("index %d: struck at %v, its replacement's first commit %v later; want sooner than the lock's time to live", i, at, took)
		}
		if n := len(c.pods("backfill-map", i)); n != 2 {
			t.Errorf("index %d ran %d pods, want 2: the victim and its replacement", i, n)
		}
	}
	resumed := time.Now()
	frozen.cmd.Process.Signal(syscall.SIGCONT)
	if code := <-frozen.exited; code != 1 {
		t.Errorf("the frozen pod, continued: exit %d, want 1 (lock taken over)\n%s", code, c.logs("backfill-map"))
	}
	if d := firstAfter(stopped, resumed); d >= 0 {
		t.Errorf("the frozen pod committed after it was continued")
	}
	commits := srv.PutCounts("/test/job/shards/", "/measurements/")
	for k, n := range commits {
		if n != 1 {
			t.Errorf("%s committed %d times", k, n)
		}
	}
	if len(commits) != len(p.Buckets) {
		t.Errorf("%d buckets committed, the plan has %d", len(commits), len(p.Buckets))
	}
	for _, step := range []string{"check", "load"} {
		if err := c.start(jobs[step], 5*time.Minute); err != nil {
			t.Fatal(err)
		}
	}
	if out := c.logs("backfill-check"); !regexp.MustCompile(`(?m)^rejects +[1-9]`).MatchString(out) {
		t.Errorf("the check Job's summary has no rejects:\n%s", out)
	}
	// Check as the operator runs it: exit 3, and the corpus's rejects and
	// notices as one run over it counts them.
	out, err := exec.Command(bin, "check", "--json", "--plan", "s3://test/job/plan.json", "--out", "s3://test/job").Output()
	var sum struct {
		Totals map[string]any `json:"totals"`
	}
	if code := exitCode(err); code != 3 || json.Unmarshal(out, &sum) != nil {
		t.Fatalf("check: exit %d\n%s", code, out)
	}
	for _, k := range []string{"reports", "measurements", "rejects", "notices", "rejects_by_reason", "notices_by_reason"} {
		if !reflect.DeepEqual(sum.Totals[k], single.Tally[k]) {
			t.Errorf("check's %s %v, one run's %v", k, sum.Totals[k], single.Tally[k])
		}
	}
	// The job's output is the one-machine run's.
	want, got := files(t, "s3://test/single"), files(t, "s3://test/job")
	for name, b := range want {
		if !strings.HasPrefix(name, "ledger/") && !bytes.Equal(got[name], b) {
			t.Errorf("%s differs from the one-machine run's", name)
		}
	}
	if len(want) == 0 {
		t.Fatal("the one-machine run wrote nothing")
	}
}

func exitCode(err error) int {
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// readS3 reads one object through a store of its own.
func readS3(t *testing.T, loc string) string {
	t.Helper()
	parent, base := store.Split(loc)
	st, err := location.Open(context.Background(), parent)
	if err != nil {
		t.Fatal(err)
	}
	b, err := store.ReadFile(context.Background(), st, base)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// files reads the measurements, reports, dead letters and ledger of an
// output, by name.
func files(t *testing.T, loc string) map[string][]byte {
	t.Helper()
	st, err := location.Open(context.Background(), loc)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, d := range []string{"measurements", "reports", "dead-letters", "ledger"} {
		ents, err := st.ReadDir(context.Background(), d)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			b, err := store.ReadFile(context.Background(), st, d+"/"+e.Name())
			if err != nil {
				t.Fatal(err)
			}
			out[d+"/"+e.Name()] = b
		}
	}
	return out
}
