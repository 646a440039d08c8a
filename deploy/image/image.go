// Command image builds backfill's container image without a Docker engine:
// one layer over an empty base holding the static binary, the CA
// certificates and a non-root user, written as an OCI image layout and as
// an image tarball (docker load, podman load, crane push, skopeo copy).
// It is what `make image` runs; the Dockerfile beside the project builds
// the same image with a Docker engine.
//
// It is a module of its own so that the project's module does not depend
// on the image library.
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The image's layout and user, as the Dockerfile makes them.
const (
	BinaryPath = "/usr/local/bin/backfill"
	CertsPath  = "/etc/ssl/certs/ca-certificates.crt"
	UID        = 65532
	User       = "65532:65532"
	Home       = "/home/backfill"
)

// Spec is what goes into an image.
type Spec struct {
	Binary   []byte    // the static backfill binary
	Certs    []byte    // the PEM bundle of CA certificates
	Version  string    // backfill's version, the image's tag
	Revision string    // the source revision
	Created  time.Time // the time stamped on files and config: the source's, so that builds repeat
	Arch     string    // GOARCH of the binary
}

// Build returns the image of s.
func Build(s Spec) (v1.Image, error) {
	switch {
	case len(s.Binary) == 0:
		return nil, errors.New("no binary")
	case len(s.Certs) == 0 || !bytes.Contains(s.Certs, []byte("-----BEGIN CERTIFICATE-----")):
		return nil, errors.New("the CA bundle holds no PEM certificate")
	case s.Version == "":
		return nil, errors.New("no version")
	}
	data, err := rootfs(s)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(data)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: s.Created}, CreatedBy: "backfill deploy/image", Comment: "the static binary, CA certificates, a non-root user"}})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture, cf.Created = "linux", s.Arch, v1.Time{Time: s.Created}
	cf.Config = v1.Config{
		Entrypoint: []string{BinaryPath},
		User:       User,
		WorkingDir: Home,
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + Home, "SSL_CERT_FILE=" + CertsPath},
		Labels: map[string]string{
			"org.opencontainers.image.title":       "backfill",
			"org.opencontainers.image.description": "Stamp stable 64-bit IDs onto OONI measurements and NASA Cumulus granules, prove there are no collisions, and load the result",
			"org.opencontainers.image.version":     s.Version,
			"org.opencontainers.image.revision":    s.Revision,
			"org.opencontainers.image.created":     s.Created.UTC().Format(time.RFC3339),
		},
	}
	return mutate.ConfigFile(img, cf)
}

// rootfs is the image's one layer.
func rootfs(s Spec) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dir := func(name string, mode int64, uid int) error {
		return tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: name + "/", Mode: mode, Uid: uid, Gid: uid, ModTime: s.Created, Format: tar.FormatPAX})
	}
	file := func(name string, mode int64, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(data)), ModTime: s.Created, Format: tar.FormatPAX}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	passwd := fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nbackfill:x:%d:%d:backfill:%s:/sbin/nologin\n", UID, UID, Home)
	group := fmt.Sprintf("root:x:0:\nbackfill:x:%d:\n", UID)
	steps := []error{
		dir("etc", 0o755, 0), dir("etc/ssl", 0o755, 0), dir("etc/ssl/certs", 0o755, 0),
		file(CertsPath[1:], 0o644, s.Certs),
		file("etc/passwd", 0o644, []byte(passwd)),
		file("etc/group", 0o644, []byte(group)),
		dir("home", 0o755, 0), dir(Home[1:], 0o700, UID),
		dir("tmp", 0o1777, 0),
		dir("usr", 0o755, 0), dir("usr/local", 0o755, 0), dir("usr/local/bin", 0o755, 0),
		file(BinaryPath[1:], 0o755, s.Binary),
	}
	if err := errors.Join(steps...); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// WriteLayout writes img to the OCI image layout dir (made anew), its
// reference named ref.
func WriteLayout(dir string, img v1.Image, ref string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	return p.AppendImage(img, layout.WithAnnotations(map[string]string{"org.opencontainers.image.ref.name": ref}))
}

// WriteTarball writes img to the image tarball file, tagged ref.
func WriteTarball(file string, img v1.Image, ref string) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(file, tag, img)
}

// Static checks that bin is an ELF executable that needs no dynamic
// loader nor shared library: it runs on an empty base.
func Static(bin []byte) error {
	f, err := elf.NewFile(bytes.NewReader(bin))
	if err != nil {
		return fmt.Errorf("not an ELF executable: %w", err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("linked dynamically (it names a program interpreter): build it with CGO_ENABLED=0")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		return fmt.Errorf("needs shared libraries %v: build it with CGO_ENABLED=0", libs)
	}
	return nil
}

// Size is what pulling img transfers: its compressed layers, config and
// manifest.
func Size(img v1.Image) (int64, error) {
	layers, err := img.Layers()
	if err != nil {
		return 0, err
	}
	var n int64
	for _, l := range layers {
		s, err := l.Size()
		if err != nil {
			return 0, err
		}
		n += s
	}
	m, err := img.RawManifest()
	if err != nil {
		return 0, err
	}
	c, err := img.RawConfigFile()
	if err != nil {
		return 0, err
	}
	return n + int64(len(m)+len(c)), nil
}

// MozillaRoots is a PEM bundle of the roots of Mozilla's program, as
// golang.org/x/crypto/x509roots ships them (the module's version pins the
// set). Roots trusted only with a constraint PEM cannot carry (distrust
// after a date) are left out.
func MozillaRoots() []byte {
	var b bytes.Buffer
	for r := range bundle.Roots() {
		if r.Constraint != nil {
			continue
		}
		pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate})
	}
	return b.Bytes()
}
