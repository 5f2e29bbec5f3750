package store_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/db/dbtest"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"

	"github.com/thefold/thefold/services/agent/internal/store"
	"github.com/thefold/thefold/services/agent/migrations"
)

// TestProjectChangesBesideAJobStartDoNotDeadlock: a person's change of a running project
// (CancelProject's ChangeProject: the project's row, then its events) beside its runner
// starting a task's job (the job, the project's checkpoint fenced by the lease, and the
// events of both in one transaction) never deadlocks. Until 2026-12-01 the job's event was
// appended (taking the schema's events lock) before the checkpoint waited for the project's
// row, and `make bench`'s plan–start–cancel loop failed with "deadlock detected".
func TestProjectChangesBesideAJobStartDoNotDeadlock(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDatabase(t, "agent", migrations.FS)
	st := store.New(pool, nil)
	ctx := context.Background()
	owner := uuid.NewString()
	p, _, err := st.CreateProject(ctx, &agentv1.Project{OwnerId: owner, Repo: "local/deadlock", BaseBranch: "main", Request: "r",
		Status: agentv1.ProjectStatus_PROJECT_STATUS_RUNNING}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	lease := uuid.NewString()
	rec, ok, err := st.ClaimProject(ctx, p.Id, lease, time.Hour)
	if err != nil || !ok {
		t.Fatalf("claim: %v %v", ok, err)
	}
	note := func(what string) []*agentv1.WatchProjectResponse {
		return []*agentv1.WatchProjectResponse{{Type: agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_STARTED,
			ProjectTaskId: what, Payload: &agentv1.WatchProjectResponse_Task{Task: &agentv1.ProjectTaskChange{ProjectTaskId: what}}}}
	}
	for i := range 60 {
		var wg sync.WaitGroup
		var startErr, changeErr error
		wg.Go(func() {
			_, _, startErr = st.Create(ctx, &agentv1.Job{OwnerId: owner, TaskId: uuid.NewString(), ProjectId: p.Id, Repo: "local/deadlock", BaseBranch: "main"},
				"", nil, store.RateLimit{}, func(ctx context.Context, tx pgx.Tx, _ string) error {
					return st.SaveProject(ctx, tx, rec, lease, note(fmt.Sprint("start ", i)))
				})
		})
		wg.Go(func() {
			_, changeErr = st.ChangeProject(ctx, owner, p.Id, func(*store.ProjectRecord) ([]*agentv1.WatchProjectResponse, error) {
				return note(fmt.Sprint("change ", i)), nil
			}, nil)
		})
		wg.Wait()
		if startErr != nil || changeErr != nil {
			t.Fatalf("round %d: job start %v; project change %v", i, startErr, changeErr)
		}
	}
}
