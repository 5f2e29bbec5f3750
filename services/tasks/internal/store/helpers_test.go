package store

import (
	"context"
	"errors"
	"github.com/thefold/thefold/pkg/events"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/thefold/thefold/pkg/db/dbtest"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/tasks/migrations"
)

const (
	alice = "alice"
	bob   = "bob"
	// Agent projects' ids, as the service passes them on (canonical form).
	project      = "7b0e6a52-3c1d-4f5e-9a8b-2d4c6e8f0a1b"
	otherProject = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
)

func newStore(t *testing.T) (*Store, *pgxpool.Pool) {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "tasks", migrations.FS)
	return New(pool, events.NewHub(pool)), pool
}

// task is a valid task to create, changed by opts.
func task(owner, repo, title string, opts ...func(*tasksv1.Task)) *tasksv1.Task {
	t := &tasksv1.Task{
		OwnerId:  owner,
		Repo:     repo,
		Title:    title,
		Status:   backlog,
		Source:   tasksv1.TaskSource_TASK_SOURCE_API,
		Priority: typev1.Priority_PRIORITY_MEDIUM,
	}
	for _, o := range opts {
		o(t)
	}
	return t
}

func mustCreate(t *testing.T, s *Store, tk *tasksv1.Task) *tasksv1.Task {
	t.Helper()
	created, err := s.Create(t.Context(), tk, nil)
	if err != nil {
		t.Fatalf("Create(%q): %v", tk.Title, err)
	}
	return created
}

func mustStatus(t *testing.T, s *Store, owner, id string, to tasksv1.TaskStatus) *tasksv1.Task {
	t.Helper()
	got, err := s.SetStatus(t.Context(), owner, id, to, "", 0)
	if err != nil {
		t.Fatalf("SetStatus(%s): %v", StatusName(to), err)
	}
	return got
}

func mustDep(t *testing.T, s *Store, owner, taskID, blockerID string) {
	t.Helper()
	if _, err := s.AddDependency(t.Context(), owner, taskID, blockerID); err != nil {
		t.Fatalf("AddDependency: %v", err)
	}
}

// event is a decoded row of the outbox.
type event struct {
	ID      int64
	Type    string
	Owner   string
	Scope   string
	Agg     string
	Payload *tasksv1.WatchTasksResponse
	// Task is the task the payload carries (for DELETED: none).
	Task *tasksv1.Task
}

func taskOfEvent(ev *tasksv1.WatchTasksResponse) *tasksv1.Task {
	switch p := ev.Payload.(type) {
	case *tasksv1.WatchTasksResponse_Task:
		return p.Task
	case *tasksv1.WatchTasksResponse_Updated:
		return p.Updated.GetTask()
	case *tasksv1.WatchTasksResponse_StatusChange:
		return p.StatusChange.GetTask()
	}
	return nil
}

func allEvents(t *testing.T, pool *pgxpool.Pool) []event {
	t.Helper()
	rows, err := pool.Query(t.Context(), "SELECT id, type, owner_id, scope, aggregate_id, payload, create_time FROM events WHERE stream = 'task' ORDER BY id")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []event
	for rows.Next() {
		var (
			e   event
			row events.Event
		)
		if err := rows.Scan(&e.ID, &e.Type, &e.Owner, &e.Scope, &e.Agg, &row.Payload, &row.CreateTime); err != nil {
			t.Fatal(err)
		}
		row.ID, row.Type, row.AggregateID = e.ID, e.Type, e.Agg
		// Stored payloads are the internal versioned form; decodeEvent is how watchers read them.
		var err error
		if e.Payload, err = decodeEvent(row); err != nil {
			t.Fatal(err)
		}
		e.Task = taskOfEvent(e.Payload)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func eventTypes(es []event) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.Type
	}
	return out
}

func wantErr(t *testing.T, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("err = %v, want %v", err, sentinel)
	}
}

func diffTask(want, got *tasksv1.Task) string {
	return cmp.Diff(want, got, protocmp.Transform())
}

func ids(ts []*tasksv1.Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Id
	}
	return out
}

func titles(ts []*tasksv1.Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Title
	}
	return out
}

var errInjected = errors.New("injected failure")

func failCommits(s *Store) { s.beforeCommit = func(context.Context) error { return errInjected } }
