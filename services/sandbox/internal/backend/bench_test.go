package backend

import (
	"context"
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
