package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/services/sandbox/internal/backend"
)

// Where the warm image keeps its shared Go build cache and the program that serves it.
const (
	// SharedGoCache is the image's Go build cache of the standard library, made when the
	// image is built and read-only in every sandbox (the root file system is).
	SharedGoCache = "/opt/thefold/gocache"
	// GoCacheProg is the GOCACHEPROG helper (package backend/gocacheprog).
	GoCacheProg = "/usr/local/bin/thefold-gocache"
	// privateGoCache is each sandbox's own layer, on its /tmp tmpfs: every entry its builds
	// make goes there, never into the shared layer.
	privateGoCache = "/tmp/gocache/layer"
	seedDir        = "/opt/thefold/seed"
	// warmFormat versions what warmImage does beyond the seed: change it with the layout.
	warmFormat = "1"
)

// warmSpec is the spec label of the warm image made over a base of spec base: the helper
// and the seed are part of what the image is made of.
func warmSpec(base string, seed map[string]string, cmds [][]string) string {
	h := sha256.New()
	fmt.Fprintf(h, "warm %s\nbase %s\ngocacheprog %s\n", warmFormat, base, backend.GoCacheProgVersion())
	for _, name := range slices.Sorted(maps.Keys(seed)) {
		fmt.Fprintf(h, "seed %s %x\n", name, sha256.Sum256([]byte(seed[name])))
	}
	for _, c := range cmds {
		fmt.Fprintf(h, "cmd %q\n", c)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// warmImage makes the image name from base: it runs the seed (backend.GoCacheSeed) in a
// container of base with GOCACHE at SharedGoCache, as the sandbox's own validation would,
// then commits the container with the helper in place and GOCACHEPROG pointing every
// sandbox's go command at the shared layer (read-only) and its private one. The seed is the
// service's own program built by the image's own toolchain; no sandbox code runs here.
func warmImage(ctx context.Context, cli *client.Client, base, name, goRoot, spec string, seed map[string]string, cmds [][]string) error {
	helper, err := os.MkdirTemp("", "thefold-gocacheprog-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(helper)
	bin := filepath.Join(helper, "thefold-gocache")
	if err := backend.BuildGoCacheProg(ctx, goRoot, bin); err != nil {
		return err
	}
	content, err := seedArchive(bin, seed)
	if err != nil {
		return err
	}

	var script strings.Builder
	script.WriteString("set -e\ncd " + seedDir + "\n")
	for _, c := range cmds {
		script.WriteString(shellJoin(c) + " >/dev/null\n")
	}
	// The seed's module goes; the cache stays, readable by the sandbox user.
	script.WriteString("cd /\nrm -rf " + seedDir + "\nchmod -R a+rX " + SharedGoCache + "\n")

	created, err := cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image:           base,
			User:            "0:0",
			Cmd:             []string{"/bin/sh", "-c", script.String()},
			Env:             []string{"GOCACHE=" + SharedGoCache},
			NetworkDisabled: true,
			Labels:          map[string]string{labelSandbox + ".warm": "true"},
		},
		HostConfig: &container.HostConfig{
			NetworkMode: "none",
			CapDrop:     []string{"ALL"},
			SecurityOpt: []string{"no-new-privileges"},
			// /tmp (HOME, GOPATH, the test binaries) is not part of the image.
			Tmpfs: map[string]string{"/tmp": "rw,exec,nosuid,nodev,size=2147483648"},
		},
	})
	if err != nil {
		return fmt.Errorf("create the container that warms the sandbox image: %w: %w", err, errs.ErrUnavailable)
	}
	defer func() {
		_, _ = cli.ContainerRemove(context.WithoutCancel(ctx), created.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
	}()
	if _, err := cli.CopyToContainer(ctx, created.ID, client.CopyToContainerOptions{DestinationPath: "/", Content: bytes.NewReader(content)}); err != nil {
		return fmt.Errorf("copy the seed into the warming container: %w: %w", err, errs.ErrUnavailable)
	}
	exit, out, err := runToEnd(ctx, cli, created.ID, "the warming container")
	if err != nil {
		return err
	}
	if exit != 0 {
		return fmt.Errorf("warm the sandbox image: the seed build exited %d: %s: %w", exit, strings.TrimSpace(out), errs.ErrFailedPrecondition)
	}
	changes := []string{
		"LABEL " + ImageSpecLabel + "=" + spec,
		`ENV GOCACHEPROG="` + backend.GoCacheProgEnv(GoCacheProg, SharedGoCache, privateGoCache) + `"`,
		"ENV GOCACHE=/tmp/gocache",
		"USER root",
		"WORKDIR /workspace",
		`CMD ["/bin/sleep","2147483647"]`,
	}
	if _, err := cli.ContainerCommit(ctx, created.ID, client.ContainerCommitOptions{Reference: name, Changes: changes,
		Comment: "thefold sandbox: a Go build cache of the standard library, served read-only by " + GoCacheProg}); err != nil {
		return fmt.Errorf("commit the warm sandbox image: %w: %w", err, errs.ErrUnavailable)
	}
	return nil
}

// seedArchive is the tar copied into the warming container: the helper and the seed module.
func seedArchive(helper string, seed map[string]string) ([]byte, error) {
	bin, err := os.ReadFile(helper)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	add := func(name string, mode int64, body []byte) error {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: mode, Size: int64(len(body))}); err != nil {
			return err
		}
		_, err := tw.Write(body)
		return err
	}
	for _, d := range []string{"opt/", "opt/thefold/", "opt/thefold/seed/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755}); err != nil {
			return nil, err
		}
	}
	if err := add(strings.TrimPrefix(GoCacheProg, "/"), 0o755, bin); err != nil {
		return nil, err
	}
	for _, name := range slices.Sorted(maps.Keys(seed)) {
		if err := add(strings.TrimPrefix(seedDir, "/")+"/"+name, 0o644, []byte(seed[name])); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// shellJoin quotes argv for sh.
func shellJoin(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(q, " ")
}

// tempReference is an unused image reference for the base image while it is warmed.
func tempReference() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "thefold-sandbox-base:" + hex.EncodeToString(b)
}
