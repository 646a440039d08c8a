package main

import (
	"archive/tar"
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// staticBinary builds backfill as make image does: CGO_ENABLED=0.
func staticBinary(t *testing.T, version string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "backfill")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-X main.version="+version, "-o", bin, "./cmd/backfill")
	cmd.Dir = "../.."
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// The image as a cluster gets it: read back from the OCI layout (and the
// tarball) it is the one built; its config names the entrypoint, a
// non-root user and the labels; its layer holds a static binary that runs
// as that user, CA certificates that parse, and the user's passwd entry.
func TestImage(t *testing.T) {
	const version = "v0.0.0-test"
	bin := staticBinary(t, version)
	dir := t.TempDir()
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	if err := build(bin, "", version, "abc123", "backfill", dir+"/layout", dir+"/image.tar", "amd64"); err != nil {
		t.Fatal(err)
	}
	idx, err := layout.ImageIndexFromPath(dir + "/layout")
	if err != nil {
		t.Fatal(err)
	}
	im, err := idx.IndexManifest()
	if err != nil || len(im.Manifests) != 1 || im.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "backfill:"+version {
		t.Fatalf("the layout's index: %+v, %v", im, err)
	}
	img, err := idx.Image(im.Manifests[0].Digest)
	if err != nil {
		t.Fatal(err)
	}
	fromTar, err := tarball.ImageFromPath(dir+"/image.tar", nil)
	if err != nil {
		t.Fatal(err)
	}
	// The tarball's manifest is Docker's, so the two are compared by
	// their config and layers.
	c1, _ := img.ConfigName()
	c2, _ := fromTar.ConfigName()
	l1, _ := img.Layers()
	l2, _ := fromTar.Layers()
	if c1 != c2 || len(l1) != 1 || len(l2) != 1 || must(l1[0].DiffID()) != must(l2[0].DiffID()) {
		t.Errorf("the layout's image (config %s) and the tarball's (config %s) differ", c1, c2)
	}

	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if strings.Join(c.Entrypoint, " ") != BinaryPath || len(c.Cmd) != 0 {
		t.Errorf("entrypoint %q, cmd %q: want the binary alone, a Job's args its command line", c.Entrypoint, c.Cmd)
	}
	uid, _, _ := strings.Cut(c.User, ":")
	if uid == "" || uid == "0" || uid == "root" || uid != "65532" {
		t.Errorf("user %q: want the numeric non-root 65532 (runAsNonRoot checks a number)", c.User)
	}
	if cf.OS != "linux" || cf.Architecture != "amd64" || c.Labels["org.opencontainers.image.version"] != version ||
		c.Labels["org.opencontainers.image.revision"] != "abc123" || c.Labels["org.opencontainers.image.title"] != "backfill" {
		t.Errorf("platform %s/%s, labels %v", cf.OS, cf.Architecture, c.Labels)
	}
	if got := cf.Created.UTC().Unix(); got != 1700000000 {
		t.Errorf("created %v, want SOURCE_DATE_EPOCH's", cf.Created)
	}

	files := extract(t, img)
	if err := Static(files[BinaryPath[1:]].data); err != nil {
		t.Error(err)
	}
	if h := files[BinaryPath[1:]].hdr; h == nil || h.Mode&0o111 == 0 {
		t.Fatalf("no executable %s in the layer", BinaryPath)
	}
	if !bytes.Equal(files[BinaryPath[1:]].data, must(os.ReadFile(bin))) {
		t.Error("the layer's binary is not the one built")
	}
	certs := files[CertsPath[1:]].data
	n := 0
	for block, rest := pem.Decode(certs); block != nil; block, rest = pem.Decode(rest) {
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			t.Fatalf("a CA certificate does not parse: %v", err)
		}
		n++
	}
	if n < 100 {
		t.Errorf("%d CA certificates in %s; want Mozilla's roots (over 100)", n, CertsPath)
	}
	if !strings.Contains(string(files["etc/passwd"].data), "backfill:x:65532:65532:") {
		t.Errorf("etc/passwd has no entry for the user:\n%s", files["etc/passwd"].data)
	}
	if h := files["tmp"].hdr; h == nil || h.Mode&0o1777 != 0o1777 {
		t.Error("no world-writable sticky /tmp")
	}

	// The binary from the layer runs as the image's user: it prints its
	// version, and generates and stamps a corpus in a folder of its own.
	run := filepath.Join(t.TempDir(), "from-layer")
	if err := os.WriteFile(run, files[BinaryPath[1:]].data, 0o755); err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	// The test's temporary folders, for the image's user to reach.
	for _, d := range []string{work, filepath.Dir(run), filepath.Dir(work)} {
		os.Chmod(d, 0o755)
	}
	os.Chmod(work, 0o777)
	asUser := func(args ...string) (string, int) {
		cmd := exec.Command(run, args...)
		cmd.Dir = work
		cmd.Env = []string{"HOME=" + work}
		if os.Getuid() == 0 {
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65532, Gid: 65532}}
		}
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	if out, code := asUser("version"); code != 0 || !strings.Contains(out, version) {
		t.Errorf("backfill version from the layer: exit %d\n%s", code, out)
	}
	if out, code := asUser("gen", "-q", "--out", "corpus", "--buckets", "1", "--reports", "5", "--max-measurements", "50"); code != 0 {
		t.Fatalf("gen from the layer: exit %d\n%s", code, out)
	}
	if out, code := asUser("run", "-q", "--in", "corpus", "--out", "out"); code != 0 {
		t.Errorf("run from the layer: exit %d\n%s", code, out)
	}
}

// Two builds of one source are the same image.
func TestImage_Repeatable(t *testing.T) {
	bin := []byte("\x7fELF not really")
	spec := Spec{Binary: bin, Certs: MozillaRoots(), Version: "v1", Arch: "amd64"}
	a, err := Build(spec)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Build(spec)
	da, _ := a.Digest()
	db, _ := b.Digest()
	if da != db {
		t.Errorf("two builds: %s and %s", da, db)
	}
	for _, bad := range []Spec{{Certs: spec.Certs, Version: "v1"}, {Binary: bin, Version: "v1"}, {Binary: bin, Certs: spec.Certs}} {
		if _, err := Build(bad); err == nil {
			t.Errorf("Build(%+v) succeeded", bad)
		}
	}
	if err := Static(bin); err == nil {
		t.Error("a file that is not ELF passes as a static binary")
	}
}

type entry struct {
	hdr  *tar.Header
	data []byte
}

// extract reads the image's flattened file system.
func extract(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	rc := mutate.Extract(img)
	defer rc.Close()
	files := map[string]entry{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[strings.TrimSuffix(h.Name, "/")] = entry{h, data}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// The Dockerfile builds the image make image builds: same entrypoint,
// user, working folder and certificate bundle.
func TestImage_DockerfileAgrees(t *testing.T) {
	df := string(must(os.ReadFile("../../Dockerfile")))
	for _, line := range []string{
		`ENTRYPOINT ["` + BinaryPath + `"]`,
		"USER " + User,
		"WORKDIR " + Home,
		"SSL_CERT_FILE=" + CertsPath,
		"-o /rootfs" + BinaryPath,
		"FROM scratch",
		"CGO_ENABLED=0",
	} {
		if !strings.Contains(df, line) {
			t.Errorf("the Dockerfile lacks %q", line)
		}
	}
}
