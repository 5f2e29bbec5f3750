package docker

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/thefold/thefold/services/sandbox/internal/backend"
)

// The tests share one backend and the image it needs, built once per test binary; each test
// gets its own workspace and so its own container, removed when the test ends.
var (
	shared     *Docker
	skipReason string
)

func TestMain(m *testing.M) {
	// A fresh machine builds the image here (a minute or two); an up-to-date one is kept.
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	// Two CPUs instead of the half a sandbox gets by default: these tests check behaviour,
	// not the CPU share, and their cold Go builds take minutes in half a CPU.
	// Warnings go to the test's output: a sandbox without its toolchain volumes says why.
	d, err := New(ctx, WithNanoCPUs(2e9), WithLogger(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))))
	switch {
	case err != nil:
		skipReason = "no docker engine answers: " + err.Error()
	default:
		if err := BuildImage(ctx, d.Client(), DefaultImage, ImageSource{}); err != nil {
			fmt.Fprintln(os.Stderr, "build the sandbox image:", err)
			cancel()
			os.Exit(1)
		}
		shared = d
	}
	cancel()
	code := m.Run()
	if shared != nil {
		if err := shared.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "close:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// sandbox returns the shared backend and a fresh workspace holding files.
func sandbox(t testing.TB, files map[string]string) (*Docker, string) {
	t.Helper()
	if shared == nil {
		t.Skip(skipReason)
	}
	ws := t.TempDir()
	for name, body := range files {
		p := filepath.Join(ws, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if err := shared.Destroy(context.Background(), ws); err != nil {
			t.Errorf("destroy: %v", err)
		}
	})
	return shared, ws
}

func run(t testing.TB, d *Docker, ws string, s backend.Spec, l backend.Limits) *backend.Result {
	t.Helper()
	// A cold toolchain (the build cache starts empty in every container) in half a CPU,
	// beside the other tests' containers, can take minutes.
	if s.Timeout == 0 {
		s.Timeout = 5 * time.Minute
	}
	res, err := d.Run(context.Background(), ws, s, l)
	if err != nil {
		t.Fatalf("Run(%q): %v", s.Argv, err)
	}
	return res
}

func sh(script string) []string { return []string{"/bin/sh", "-c", script} }
