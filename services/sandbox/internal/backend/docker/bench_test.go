package docker

import (
	"context"
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
//
// docker-pooled is the same with a pool of two started containers (WithPool, the service's
// default): the pool refills in the background, between and during the iterations, as it
// would between sandboxes.
func BenchmarkLifecycle(b *testing.B) {
	for _, pooled := range []bool{false, true} {
		name := "docker"
		if pooled {
			name = "docker-pooled"
		}
		per, base := lifecycle(b, name, pooled)
		if per > 0 && base > 0 {
			fmt.Printf("sandbox lifecycle (create + run `true` + destroy), %s backend: %v; raw (mkdir, `docker run --rm --network none %s true`, rm) %v; %s/raw = %.2fx\n",
				name, per.Round(time.Millisecond), DefaultGoImage, base.Round(time.Millisecond), name, float64(per)/float64(base))
		}
	}
}

func lifecycle(b *testing.B, name string, pooled bool) (per, base time.Duration) {
	b.Run(name, func(b *testing.B) {
		if shared == nil {
			b.Skip(skipReason)
		}
		docker, err := exec.LookPath("docker")
		if err != nil {
			b.Fatalf("the raw baseline is `docker run --rm`, and the docker CLI is not installed: %v", err)
		}
		d, parent := shared, b.TempDir()
		ctx := b.Context()
		if pooled {
			var err error
			if d, err = New(ctx, WithClient(shared.Client()), WithPool(2, backend.Limits{})); err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			if _, err := d.Reconcile(ctx, parent, func(context.Context, []string) (map[string]bool, error) { return nil, nil }); err != nil {
				b.Fatal(err)
			}
			for d.PoolSize(DefaultImage) < 2 {
				time.Sleep(10 * time.Millisecond)
			}
		}
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
		var prepare, run, destroy time.Duration
		sandbox := func() error {
			ws, err := os.MkdirTemp(parent, "ws-")
			if err != nil {
				return err
			}
			t0 := time.Now()
			if err := d.Prepare(ctx, ws, Identity{}, "go", backend.Limits{}); err != nil {
				return err
			}
			t1 := time.Now()
			res, err := d.Run(ctx, ws, backend.Spec{Argv: []string{"true"}, Timeout: time.Minute}, backend.Limits{})
			t2 := time.Now()
			prepare, run = prepare+t1.Sub(t0), run+t2.Sub(t1)
			defer func() { destroy += time.Since(t2) }()
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
			n := time.Duration(b.N + 1) // the warm-up round is in the sums
			fmt.Printf("  %s: Prepare %v, Run `true` %v, Destroy %v per sandbox\n", name,
				(prepare / n).Round(time.Millisecond), (run / n).Round(time.Millisecond), (destroy / n).Round(time.Millisecond))
		}
	})
	return per, base
}
