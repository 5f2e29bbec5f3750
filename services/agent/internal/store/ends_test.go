package store_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/db/dbtest"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"

	"github.com/thefold/thefold/services/agent/internal/store"
	"github.com/thefold/thefold/services/agent/migrations"
)

// TestAwaitJobEndWokenByThisProcess: with no events hub at all, a wait on a job returns as
// soon as this process writes the job's end (a person's cancel here), not when its wait
// runs out; a write that does not end the job does not wake it.
func TestAwaitJobEndWokenByThisProcess(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDatabase(t, "agent", migrations.FS)
	st := store.New(pool, nil)
	ctx := context.Background()
	owner := uuid.NewString()
	rec, _, err := st.Create(ctx, &agentv1.Job{OwnerId: owner, TaskId: uuid.NewString(), Repo: "local/ends", BaseBranch: "main"},
		"", nil, store.RateLimit{}, func(context.Context, pgx.Tx, string) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	id := rec.Job.Id
	set := func(s agentv1.JobStatus) {
		if _, err := st.Mutate(ctx, owner, id, func(_ context.Context, _ pgx.Tx, r *store.Record) (store.Step, error) {
			r.Job.Status = s
			return store.Step{}, nil
		}, nil); err != nil {
			t.Errorf("set %v: %v", s, err)
		}
	}
	wait := func(change agentv1.JobStatus) (woken bool) {
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		done := make(chan error, 1)
		go func() { done <- st.AwaitJobEnd(wctx, id, 0, time.Hour) }()
		// The change is written again until the wait returns: one written before the wait
		// began is the hub's to see (there is none here).
		for {
			set(change)
			select {
			case err := <-done:
				return err == nil // an error: ctx ran out, nothing woke the wait
			case <-time.After(20 * time.Millisecond):
			}
		}
	}
	if wait(agentv1.JobStatus_JOB_STATUS_PAUSED) {
		t.Error("a write that does not end the job woke the wait")
	}
	if !wait(agentv1.JobStatus_JOB_STATUS_CANCELLED) {
		t.Error("the job's end written by this process did not wake the wait")
	}
}
