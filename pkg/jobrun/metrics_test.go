package jobrun_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/thefold/thefold/pkg/jobrun"
)

// Each run a runner claims is counted under its kind; a job that is not runnable (held by
// another worker, finished) is not.
func TestClaimedRunsAreCounted(t *testing.T) {
	e := newEnv(t)
	reg := prometheus.NewRegistry()
	if err := jobrun.Register(reg); err != nil {
		t.Fatal(err)
	}
	kind := "metrics-test" // a kind of its own: the counter is the process's
	r := jobrun.NewRunner(e.leases, jobrun.RunnerConfig{Expiry: time.Minute, Noun: kind}, nil)
	var during float64
	claim := e.claim(nil, func(ctx context.Context, id, token string) error {
		during = gauge(t, reg, "thefold_runs_running", kind)
		return e.write(ctx, id, token, "done")
	})
	for range 2 {
		if err := r.Run(t.Context(), e.job(t, "queued"), claim); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Run(t.Context(), e.job(t, "done"), claim); err != nil {
		t.Fatal(err)
	}
	if got := gauge(t, reg, "thefold_runs_claimed_total", kind); got != 2 {
		t.Fatalf("thefold_runs_claimed_total{kind=%q} = %v, want 2 (-1: missing)", kind, got)
	}
	if after := gauge(t, reg, "thefold_runs_running", kind); during != 1 || after != 0 {
		t.Fatalf("thefold_runs_running{kind=%q}: %v during a run, %v after; want 1, 0", kind, during, after)
	}
}

// gauge is the value of metric{kind} in reg (a counter's or a gauge's), -1 when missing.
func gauge(t *testing.T, reg *prometheus.Registry, metric, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == metric && m.GetLabel()[0].GetValue() == kind {
				if c := m.GetCounter(); c != nil {
					return c.GetValue()
				}
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}
