package engine

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/thefold/thefold/pkg/db/dbtest"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/services/builder/internal/store"
	"github.com/thefold/thefold/services/builder/migrations"
)

// A step's end is written with the run's next write, not on its own (see finish). When the
// run stops between a step's end and that write (its context done: the worker stopping),
// flush still writes the end, so a resumed build does not run the step again; and a step
// start whose write failed gives back the end it carried, for the next write.
func TestAStepsEndIsWrittenWhenTheRunStopsAfterIt(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDatabase(t, "builder", migrations.FS)
	st := store.New(pool, nil)
	ctx := t.Context()
	created, _, err := st.Create(ctx, &store.Build{BuildJob: &builderv1.BuildJob{OwnerId: "alice", RequestId: "r1", SandboxId: "sb", Repo: "acme/shop",
		Plan: &typev1.Plan{Summary: "two files", Steps: []*typev1.PlanStep{{Id: "s1", Path: "a.txt"}, {Id: "s2", Path: "b.txt"}}}}},
		[]byte("hash"), func(context.Context, pgx.Tx, string) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	lease := uuid.NewString()
	b, _, ok, err := st.Claim(ctx, created.Id, lease, time.Minute)
	if err != nil || !ok {
		t.Fatalf("Claim: ok=%v err=%v", ok, err)
	}
	e := &Engine{store: st, storeSeconds: prometheus.NewCounter(prometheus.CounterOpts{Name: "test"})}
	r := &run{e: e, b: b, lease: lease}
	step := func(n int32, path string) *store.Step {
		return &store.Step{BuildStep: &builderv1.BuildStep{BuildId: b.Id, StepNumber: n, Phase: phaseImplement,
			Kind: builderv1.StepKind_STEP_KIND_FILE, Path: path, Status: stepPending}}
	}
	s1, s2 := step(1, "a.txt"), step(2, "b.txt")
	if err := r.addSteps(ctx, phaseImplement, s1, s2); err != nil {
		t.Fatal(err)
	}
	stored := func() map[string]string {
		t.Helper()
		steps, err := st.Steps(ctx, b.Id)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, s := range steps {
			out[s.Path] = s.Status.String()
		}
		return out
	}

	// Step 1 runs and ends; the run stops before its next write.
	stopped, stop := context.WithCancel(ctx)
	if err := r.runStepStart(stopped, s1); err != nil {
		t.Fatal(err)
	}
	if err := r.finish(stopped, s1, true, ""); err != nil {
		t.Fatal(err)
	}
	if err := r.settle(); err != nil { // the start, in flight
		t.Fatal(err)
	}
	if got := stored()["a.txt"]; got != "BUILD_STEP_STATUS_RUNNING" {
		t.Fatalf("step 1 stored as %s before the run's next write, want RUNNING (its end waits for that write)", got)
	}
	stop()
	if err := r.flush(stopped); err != nil {
		t.Fatalf("flush with the run's context done: %v", err)
	}
	if got := stored(); got["a.txt"] != "BUILD_STEP_STATUS_SUCCEEDED" || got["b.txt"] != "BUILD_STEP_STATUS_PENDING" {
		t.Fatalf("after flush: %v, want step 1 SUCCEEDED, step 2 PENDING", got)
	}

	// Step 2 ends; step 3's start carries that end but cannot be written (the run's
	// context is done): the end is given back, and the next write has it.
	if err := r.runStepStart(ctx, s2); err != nil {
		t.Fatal(err)
	}
	if err := r.finish(ctx, s2, true, ""); err != nil {
		t.Fatal(err)
	}
	s3 := step(3, "c.txt")
	r.steps = append(r.steps, s3)
	dead, kill := context.WithCancel(ctx)
	kill()
	if err := r.runStepStart(dead, s3); err == nil {
		if err := r.settle(); err == nil {
			t.Fatal("a step start written with a done context")
		}
	}
	if got := stored()["b.txt"]; got != "BUILD_STEP_STATUS_RUNNING" {
		t.Fatalf("step 2 stored as %s after the failed write, want RUNNING", got)
	}
	if err := r.flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := stored()["b.txt"]; got != "BUILD_STEP_STATUS_SUCCEEDED" {
		t.Errorf("step 2 stored as %s after flush, want SUCCEEDED (the end the failed write carried)", got)
	}
}
