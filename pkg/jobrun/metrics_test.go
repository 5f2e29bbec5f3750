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
	claim := e.claim(nil, func(ctx context.Context, id, token string) error { return e.write(ctx, id, token, "done") })
	for range 2 {
		if err := r.Run(t.Context(), e.job(t, "queued"), claim); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Run(t.Context(), e.job(t, "done"), claim); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := -1.0
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == "thefold_runs_claimed_total" && m.GetLabel()[0].GetValue() == kind {
				got = m.GetCounter().GetValue()
			}
		}
	}
	if got != 2 {
		t.Fatalf("thefold_runs_claimed_total{kind=%q} = %v, want 2 (-1: missing)", kind, got)
	}
}
