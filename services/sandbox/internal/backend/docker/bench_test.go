package docker

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/thefold/thefold/services/sandbox/internal/backend"
)

// BenchmarkLifecycle prints what a whole sandbox costs through the docker backend — create
// (a fresh workspace directory and Prepare's container), run `true`, Destroy — and the ratio
// to the same done raw: mkdir, `docker run --rm --network none <image> true`, remove. The
// two alternate, one of each per iteration, so both see the engine in the same state; only
// the backend's lifecycle is timed by the benchmark (ns/op).
func BenchmarkLifecycle(b *testing.B) {
	var per, base time.Duration
	b.Run("docker", func(b *testing.B) {
		if shared == nil {
			b.Skip(skipReason)
		}
		docker, err := exec.LookPath("docker")
		if err != nil {
			b.Fatalf("the raw baseline is `docker run --rm`, and the docker CLI is not installed: %v", err)
		}
		d, parent := shared, b.TempDir()
		ctx := b.Context()
		rawArgv := []string{docker, "run", "--rm", "--network", "none", DefaultGoImage, "true"}
		raw := func() error {
			ws, err := os.MkdirTemp(parent, "ws-")
			if err != nil {
				return err
			}
			if out, err := exec.CommandContext(ctx, rawArgv[0], rawArgv[1:]...).CombinedOutput(); err != nil {
				return fmt.Errorf("%q: %v: %s", rawArgv, err, out)
			}
			return os.RemoveAll(ws)
		}
		sandbox := func() error {
			ws, err := os.MkdirTemp(parent, "ws-")
			if err != nil {
				return err
			}
			if err := d.Prepare(ctx, ws, Identity{}, "go", backend.Limits{}); err != nil {
				return err
			}
			res, err := d.Run(ctx, ws, backend.Spec{Argv: []string{"true"}, Timeout: time.Minute}, backend.Limits{})
			if err != nil {
				return err
			}
			if res.ExitCode != 0 {
				return fmt.Errorf("true: exit %d %s", res.ExitCode, res.Stderr)
			}
			if err := d.Destroy(ctx, ws); err != nil {
				return err
			}
			return os.RemoveAll(ws)
		}
		// One of each first, so neither pays for a cold image or engine cache in the figures.
		if err := raw(); err != nil {
			b.Fatal(err)
		}
		if err := sandbox(); err != nil {
			b.Fatal(err)
		}
		var rawTotal time.Duration
		b.ResetTimer()
		for b.Loop() {
			b.StopTimer()
			start := time.Now()
			if err := raw(); err != nil {
				b.Fatal(err)
			}
			rawTotal += time.Since(start)
			b.StartTimer()
			if err := sandbox(); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		if b.N > 0 {
			per, base = b.Elapsed()/time.Duration(b.N), rawTotal/time.Duration(b.N)
			b.ReportMetric(float64(per)/float64(time.Microsecond), "µs/lifecycle")
			b.ReportMetric(float64(base)/float64(time.Microsecond), "raw-µs/lifecycle")
			b.ReportMetric(float64(per)/float64(base), "x-raw")
		}
	})
	if per > 0 && base > 0 {
		fmt.Printf("sandbox lifecycle (create + run `true` + destroy), docker backend: %v; raw (mkdir, `docker run --rm --network none %s true`, rm) %v; docker/raw = %.2fx\n",
			per.Round(time.Millisecond), DefaultGoImage, base.Round(time.Millisecond), float64(per)/float64(base))
	}
}
