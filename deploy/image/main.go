package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

const usage = `Usage: go run ./deploy/image --binary FILE --version V [flags]

Build backfill's container image from a static binary (CGO_ENABLED=0):
an OCI image layout in --layout and an image tarball in --tarball.

Flags:
`

func main() {
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(fs.Output(), usage); fs.PrintDefaults() }
	binary := fs.String("binary", "", "the static backfill binary")
	certs := fs.String("certs", "", "the PEM bundle of CA certificates to put in the image (default: Mozilla's roots, as golang.org/x/crypto/x509roots ships them)")
	version := fs.String("version", "", "backfill's version: the image's tag")
	revision := fs.String("revision", "", "the source revision, for the image's labels")
	repo := fs.String("repository", "backfill", "the image's repository name")
	layoutDir := fs.String("layout", "", "write an OCI image layout to this folder")
	tarFile := fs.String("tarball", "", "write an image tarball to this file")
	arch := fs.String("arch", runtime.GOARCH, "the binary's GOARCH")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if *binary == "" || *version == "" || (*layoutDir == "" && *tarFile == "") {
		fmt.Fprintln(os.Stderr, "image: --binary, --version and --layout or --tarball are required")
		os.Exit(2)
	}
	if err := build(*binary, *certs, *version, *revision, *repo, *layoutDir, *tarFile, *arch); err != nil {
		fmt.Fprintf(os.Stderr, "image: %v\n", err)
		os.Exit(1)
	}
}

func build(binary, certs, version, revision, repo, layoutDir, tarFile, arch string) error {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return err
	}
	if err := Static(bin); err != nil {
		return fmt.Errorf("%s: %w", binary, err)
	}
	pem := MozillaRoots()
	if certs != "" {
		if pem, err = os.ReadFile(certs); err != nil {
			return fmt.Errorf("the CA certificates: %w", err)
		}
	}
	img, err := Build(Spec{Binary: bin, Certs: pem, Version: version, Revision: revision, Created: sourceDate(), Arch: arch})
	if err != nil {
		return err
	}
	ref := repo + ":" + version
	if layoutDir != "" {
		if err := WriteLayout(layoutDir, img, ref); err != nil {
			return err
		}
	}
	if tarFile != "" {
		if err := WriteTarball(tarFile, img, ref); err != nil {
			return err
		}
	}
	return report(img, ref, layoutDir, tarFile)
}

func report(img v1.Image, ref, layoutDir, tarFile string) error {
	d, err := img.Digest()
	if err != nil {
		return err
	}
	size, err := Size(img)
	if err != nil {
		return err
	}
	fmt.Printf("image %s@%s, %.1f MiB compressed\n", ref, d, float64(size)/(1<<20))
	if layoutDir != "" {
		fmt.Printf("  OCI layout: %s\n", layoutDir)
	}
	if tarFile != "" {
		fmt.Printf("  tarball:    %s (docker load -i, podman load -i)\n", tarFile)
	}
	return nil
}

// sourceDate is SOURCE_DATE_EPOCH, the Unix time of the source, when set;
// the Unix epoch otherwise. Either way two builds of one source are the
// same image.
func sourceDate() time.Time {
	if s, err := strconv.ParseInt(os.Getenv("SOURCE_DATE_EPOCH"), 10, 64); err == nil {
		return time.Unix(s, 0).UTC()
	}
	return time.Unix(0, 0).UTC()
}
