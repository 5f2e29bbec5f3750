package backend

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/thefold/thefold/services/sandbox/internal/egress"
)

// helperBin is testdata/helper, built once (static, no race detector: the race runtime's
// shadow memory would trip the memory limits being tested).
var helperBin string

const secretEnv = "THEFOLD_SECRET"

func TestMain(m *testing.M) {
	// A Network run in a bwrap sandbox re-executes this binary as its egress forwarder.
	egress.MaybeRunForwarder()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "backend-helper-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	helperBin = filepath.Join(dir, "helper")
	cmd := exec.Command("go", "build", "-o", helperBin, "./testdata/helper")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the test helper: %v\n%s", err, out)
		return 1
	}
	// A host secret the sandboxes must not see.
	os.Setenv(secretEnv, "hunter2")
	return m.Run()
}

// workspace makes a workspace holding the helper binary as ./helper.
func workspace(t testing.TB) string {
	t.Helper()
	ws := t.TempDir()
	b, err := os.ReadFile(helperBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "helper"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	return ws
}

func quiet() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func newLocal(t testing.TB) *Local {
	t.Helper()
	b := NewLocal(WithLogger(quiet()), WithStateDir(t.TempDir()))
	t.Cleanup(func() { b.Close() })
	return b
}

// newBwrap returns the bwrap backend, or skips when this machine cannot make a sandbox. Its
// launchers are ready: its first runs (as many as launcherPool) start through them.
func newBwrap(t testing.TB) *Bwrap {
	t.Helper()
	b, err := NewBwrap(WithLogger(quiet()), WithStateDir(t.TempDir()))
	if err != nil {
		t.Skipf("bwrap cannot run on this machine: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	launchersReady(t, b)
	return b
}

// launchersReady waits until b has all its launchers ready.
func launchersReady(t testing.TB, b *Bwrap) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(b.launchers.ready) < launcherPool {
		if time.Now().After(deadline) {
			t.Fatalf("the bwrap backend's %d launchers not ready after 10 s", launcherPool)
		}
		time.Sleep(time.Millisecond)
	}
}

// newBwrapDirect returns a bwrap backend without launchers: every run starts bwrap itself
// (as when none is ready, or the run has stdin).
func newBwrapDirect(t testing.TB) *Bwrap {
	t.Helper()
	b, err := NewBwrap(WithLogger(quiet()), WithStateDir(t.TempDir()))
	if err != nil {
		t.Skipf("bwrap cannot run on this machine: %v", err)
	}
	b.launchers.close()
	b.launchers = nil
	t.Cleanup(func() { b.Close() })
	return b
}

// each runs f once per backend, and the bwrap one both ways: through a launcher and
// starting bwrap itself.
func each(t *testing.T, f func(t *testing.T, b Backend)) {
	t.Helper()
	for _, name := range []string{"local", "bwrap", "bwrap-direct"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var b Backend
			switch name {
			case "local":
				b = newLocal(t)
			case "bwrap":
				b = newBwrap(t)
			default:
				b = newBwrapDirect(t)
			}
			f(t, b)
		})
	}
}

func TestNewLocalWarnsLoudly(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	b := NewLocal(WithLogger(slog.New(slog.NewTextHandler(&buf, nil))), WithStateDir(t.TempDir()))
	defer b.Close()
	if !bytes.Contains(buf.Bytes(), []byte("level=WARN")) || !bytes.Contains(buf.Bytes(), []byte("local backend does not isolate")) {
		t.Fatalf("no warning logged: %q", buf.String())
	}
}
