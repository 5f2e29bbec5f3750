package backend

import (
	"bytes"
	"context"
	"crypto/sha256"
	_ "embed" // the GOCACHEPROG helper's source
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/thefold/thefold/pkg/errs"
)

// goCacheProgSource is the sandbox's GOCACHEPROG program (package gocacheprog): a build
// cache of two layers, a shared read-only one made once per toolchain (WarmGoCache) and the
// sandbox's own. It uses only the standard library, so the sandbox's own toolchain builds it.
//
//go:embed gocacheprog/main.go
var goCacheProgSource []byte

// GoCacheProgVersion identifies the helper's source: an image or a shared cache made with
// another one is remade.
func GoCacheProgVersion() string {
	sum := sha256.Sum256(goCacheProgSource)
	return hex.EncodeToString(sum[:8])
}

// GoCacheProgEnv is the GOCACHEPROG value that runs the helper at prog over the shared
// layer (read-only) and the private one.
func GoCacheProgEnv(prog, shared, private string) string {
	return prog + " -shared=" + shared + " -private=" + private
}

// BuildGoCacheProg builds the helper with the Go toolchain at goRoot into the static binary
// out.
func BuildGoCacheProg(ctx context.Context, goRoot, out string) error {
	dir, err := os.MkdirTemp("", "thefold-gocacheprog-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	files := map[string][]byte{
		"go.mod":  []byte("module thefold.local/gocacheprog\n\ngo 1.24\n"),
		"main.go": goCacheProgSource,
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return err
		}
	}
	cmd := exec.CommandContext(ctx, filepath.Join(goRoot, "bin", "go"), "build", "-trimpath", "-o", out, ".")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GOWORK=off", "GOTOOLCHAIN=local", "GOPROXY=off")
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build the sandbox's Go cache program: %w: %s: %w", err, bytes.TrimSpace(b), errs.ErrFailedPrecondition)
	}
	return nil
}

// GoCacheSeed is what warms a shared build cache: a module whose program imports every
// public package of the standard library, and the commands, run in its directory, that
// build, vet and test it the way validation does (so the cache holds what validation asks
// for: compiled packages, vet facts, the test main's packages). The package list comes from
// the toolchain at goRoot, the one the sandbox runs.
func GoCacheSeed(ctx context.Context, goRoot string) (files map[string]string, cmds [][]string, err error) {
	cmd := exec.CommandContext(ctx, filepath.Join(goRoot, "bin", "go"), "list", "-f", "{{if .GoFiles}}{{.ImportPath}}{{end}}", "std")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=", "GOWORK=off", "GOTOOLCHAIN=local")
	out, err := cmd.Output()
	if err != nil {
		return nil, nil, fmt.Errorf("list the standard library of %s: %w: %w", goRoot, err, errs.ErrFailedPrecondition)
	}
	var pkgs []string
	for p := range strings.FieldsSeq(string(out)) {
		if seedable(p) {
			pkgs = append(pkgs, p)
		}
	}
	slices.Sort(pkgs)
	var main strings.Builder
	main.WriteString("// Package main imports the standard library so that building it warms a build cache.\npackage main\n\nimport (\n")
	for _, p := range pkgs {
		fmt.Fprintf(&main, "\t_ %q\n", p)
	}
	main.WriteString(")\n\nfunc main() {}\n")
	files = map[string]string{
		"go.mod":  "module thefold.local/seed\n\ngo 1.21\n",
		"main.go": main.String(),
		// A test that uses the packages tests usually do, so the test main's packages and
		// an httptest server's are compiled too.
		"main_test.go": "package main\n\nimport (\n\t\"net/http\"\n\t\"net/http/httptest\"\n\t\"testing\"\n)\n\n" +
			"func TestSeed(t *testing.T) {\n\tsrv := httptest.NewServer(http.NotFoundHandler())\n\tsrv.Close()\n}\n",
	}
	// vet's flags are part of its cache keys: validation's `go vet -json`, a person's
	// `go vet`, and the smaller analyzer set `go test` vets with are three sets of facts.
	cmds = [][]string{
		{"go", "build", "-o", os.DevNull, "./..."},
		{"go", "vet", "-json", "./..."},
		{"go", "vet", "./..."},
		{"go", "test", "./..."},
		{"go", "test", "-vet=off", "./..."},
	}
	return files, cmds, nil
}

// seedable reports whether the seed imports the standard-library package p: not internal,
// vendored or cmd packages (they cannot be imported), nor those that need cgo to build.
func seedable(p string) bool {
	for _, seg := range strings.Split(p, "/") {
		if seg == "internal" || seg == "vendor" {
			return false
		}
	}
	return !strings.HasPrefix(p, "cmd/") && p != "runtime/cgo" && p != "plugin" && p != "unsafe"
}
