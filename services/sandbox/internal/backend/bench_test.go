package backend

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"
)

// rawBwrap is the least a bwrap sandbox costs: namespaces and a read-only root, nothing else.
var rawBwrap = []string{"bwrap", "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/", "--tmpfs", "/tmp", "--dev", "/dev", "--proc", "/proc", "true"}

// perOp runs f n times and returns the mean duration: the raw baseline each backend's
// figure is divided by, measured in the same benchmark so both see the same machine load.
func perOp(b *testing.B, n int, f func() error) time.Duration {
	start := time.Now()
	for i := 0; i < n; i++ {
		if err := f(); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start) / time.Duration(n)
}

func rawExec(argv ...string) func() error {
	return func() error { return exec.Command(argv[0], argv[1:]...).Run() }
}

// BenchmarkRunTrue prints what one `true` costs through each backend, and the ratio to the
// same done raw (os/exec; a bare bwrap).
func BenchmarkRunTrue(b *testing.B) {
	b.Run("raw-exec", func(b *testing.B) {
		for b.Loop() {
			if err := exec.Command("true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("raw-bwrap", func(b *testing.B) {
		if _, err := exec.LookPath("bwrap"); err != nil {
			b.Skip("bubblewrap not installed")
		}
		for b.Loop() {
			if err := exec.Command(rawBwrap[0], rawBwrap[1:]...).Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
	bench := func(b *testing.B, be Backend, raw func() error) {
		ws := b.TempDir()
		base := perOp(b, 20, raw)
		run := func() error {
			res, err := be.Run(context.Background(), ws, Spec{Argv: []string{"true"}}, Limits{})
			if err == nil && res.ExitCode != 0 {
				b.Fatalf("true: exit %d %s", res.ExitCode, res.Stderr)
			}
			return err
		}
		b.ResetTimer()
		for b.Loop() {
			if err := run(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if b.N > 0 {
			b.ReportMetric(float64(b.Elapsed())/float64(b.N)/float64(base), "x-raw")
		}
	}
	b.Run("local", func(b *testing.B) { bench(b, newLocal(b), rawExec("true")) })
	b.Run("bwrap", func(b *testing.B) { bench(b, newBwrap(b), rawExec(rawBwrap...)) })
}

// sandboxBackend is a backend that keeps per-workspace state and can drop it.
type sandboxBackend interface {
	Backend
	Release(workspace string) error
}

// BenchmarkLifecycle prints what a whole sandbox costs through each backend — create (a
// fresh workspace directory), run `true`, destroy (the backend's per-workspace state and the
// directory) — and the ratio to the same done raw: mkdir, os/exec `true` (local) or a bare
// bwrap (bwrap), remove.
func BenchmarkLifecycle(b *testing.B) {
	type figure struct{ backend, raw time.Duration }
	figures := map[string]figure{}
	bench := func(b *testing.B, be sandboxBackend, raw func() error) {
		parent := b.TempDir()
		lifecycle := func(run func(ws string) error) func() error {
			return func() error {
				ws, err := os.MkdirTemp(parent, "ws-")
				if err != nil {
					return err
				}
				if err := run(ws); err != nil {
					return err
				}
				return os.RemoveAll(ws)
			}
		}
		rawLifecycle := lifecycle(func(string) error { return raw() })
		sandbox := lifecycle(func(ws string) error {
			res, err := be.Run(b.Context(), ws, Spec{Argv: []string{"true"}}, Limits{})
			if err != nil {
				return err
			}
			if res.ExitCode != 0 {
				return fmt.Errorf("true: exit %d %s", res.ExitCode, res.Stderr)
			}
			return be.Release(ws)
		})
		// The two take turns, so both see the machine as it is at that moment (its speed
		// drifts from second to second here); the benchmark's time is the sandbox's alone.
		// What the backend does in the background after a sandbox (removals, a launcher
		// made anew) is done before the raw turn, which would otherwise share the machine
		// with it.
		var rawTotal time.Duration
		for b.Loop() {
			b.StopTimer()
			settle(b, be)
			start := time.Now()
			if err := rawLifecycle(); err != nil {
				b.Fatal(err)
			}
			rawTotal += time.Since(start)
			b.StartTimer()
			if err := sandbox(); err != nil {
				b.Fatal(err)
			}
		}
		if b.N > 0 {
			base := rawTotal / time.Duration(b.N)
			per := b.Elapsed() / time.Duration(b.N)
			b.ReportMetric(float64(per)/float64(time.Microsecond), "µs/lifecycle")
			b.ReportMetric(float64(base)/float64(time.Microsecond), "raw-µs/lifecycle")
			b.ReportMetric(float64(per)/float64(base), "x-raw")
			figures[be.Name()] = figure{per, base}
		}
	}
	b.Run("local", func(b *testing.B) { bench(b, newLocal(b), rawExec("true")) })
	b.Run("bwrap", func(b *testing.B) { bench(b, newBwrap(b), rawExec(rawBwrap...)) })
	for _, be := range []struct{ name, raw string }{{"local", "os/exec `true`"}, {"bwrap", "a bare bwrap"}} {
		if f, ok := figures[be.name]; ok {
			fmt.Printf("sandbox lifecycle (create + run `true` + destroy), %s backend: %v; raw (mkdir, %s, rm) %v; %s/raw = %.2fx\n",
				be.name, f.backend.Round(time.Microsecond), be.raw, f.raw.Round(time.Microsecond), be.name, float64(f.backend)/float64(f.raw))
		}
	}
}

// settle waits until be's background work is done: removals of state and groups, and the
// bwrap backend's launchers made anew.
func settle(b *testing.B, be sandboxBackend) {
	switch be := be.(type) {
	case *Local:
		be.st.settle()
	case *Bwrap:
		be.st.settle()
		deadline := time.Now().Add(10 * time.Second)
		for be.launchers != nil && len(be.launchers.ready) < launcherPool {
			if time.Now().After(deadline) {
				b.Fatalf("the bwrap backend's launchers not ready after 10 s")
			}
			time.Sleep(50 * time.Microsecond)
		}
	}
}
