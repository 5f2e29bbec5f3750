package service_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/testing/protocmp"

	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

// TestCreateTaskRequestID: a retry with the same request_id returns the first task and
// creates nothing; concurrent retries too; the same id for another request is refused;
// another caller's id space is separate.
func TestCreateTaskRequestID(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	req := &tasksv1.CreateTaskRequest{RequestId: "req-1", Title: "once", Repo: "local/demo"}
	first, err := c.CreateTask(e.alice, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.CreateTask(e.alice, req)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(first.Task, again.Task, protocmp.Transform()); d != "" {
		t.Errorf("retry returned another task (-first +retry):\n%s", d)
	}

	// Ten concurrent first calls with one new id create one task.
	var wg sync.WaitGroup
	ids := make([]string, 10)
	errs := make([]error, 10)
	for i := range 10 {
		wg.Go(func() {
			resp, err := c.CreateTask(e.alice, &tasksv1.CreateTaskRequest{RequestId: "req-race", Title: "raced", Repo: "local/demo"})
			errs[i] = err
			ids[i] = resp.GetTask().GetId()
		})
	}
	wg.Wait()
	for i := range 10 {
		if errs[i] != nil || ids[i] != ids[0] {
			t.Fatalf("concurrent call %d: id %q err %v; call 0 got %q", i, ids[i], errs[i], ids[0])
		}
	}
	list, err := c.ListTasks(e.alice, &tasksv1.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tasks) != 2 {
		t.Errorf("alice has %d tasks, want 2 (one per request id)", len(list.Tasks))
	}

	// The same id for a different request is refused and creates nothing.
	_, err = c.CreateTask(e.alice, &tasksv1.CreateTaskRequest{RequestId: "req-1", Title: "different", Repo: "local/demo"})
	grpctest.WantCode(t, err, codes.InvalidArgument, "request_id")
	// Bob's "req-1" is his own.
	bobs, err := c.CreateTask(e.bob, req)
	if err != nil {
		t.Fatal(err)
	}
	if bobs.Task.Id == first.Task.Id || bobs.Task.OwnerId != "bob" {
		t.Errorf("bob's request answered with alice's task: %v", bobs.Task)
	}
	// A request id whose task was deleted cannot be replayed.
	if _, err := c.DeleteTask(e.alice, &tasksv1.DeleteTaskRequest{Id: first.Task.Id}); err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateTask(e.alice, req)
	grpctest.WantCode(t, err, codes.FailedPrecondition, "deleted")

	// Malformed request ids.
	for _, id := range []string{strings.Repeat("x", 129), "has space", "tab\there", "ünï"} {
		_, err := c.CreateTask(e.alice, &tasksv1.CreateTaskRequest{RequestId: id, Title: "t", Repo: "local/demo"})
		grpctest.WantInvalid(t, err, "request_id")
	}
}

// TestBatchCreateTasks: tasks with blocked-by links among themselves and to existing tasks,
// created all or nothing, replayable by request_id.
func TestBatchCreateTasks(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	existing := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "existing"})
	nt := func(title string, blockedBy ...string) *tasksv1.CreateTaskRequest {
		return &tasksv1.CreateTaskRequest{Title: title, Repo: "local/demo", BlockedBy: blockedBy}
	}
	req := &tasksv1.BatchCreateTasksRequest{RequestId: "batch-1", Tasks: []*tasksv1.BatchTask{
		{Key: "api", Task: nt("api", existing.Id), BlockedByKeys: []string{"schema"}},
		{Key: "schema", Task: nt("schema")},
		{Key: "ui", Task: nt("ui"), BlockedByKeys: []string{"api", "schema"}},
	}}
	resp, err := c.BatchCreateTasks(e.alice, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Tasks) != 3 {
		t.Fatalf("%d tasks, want 3", len(resp.Tasks))
	}
	api, schema, ui := resp.Tasks[0], resp.Tasks[1], resp.Tasks[2]
	if api.Title != "api" || schema.Title != "schema" || ui.Title != "ui" {
		t.Fatalf("tasks out of request order: %q %q %q", api.Title, schema.Title, ui.Title)
	}
	sorted := func(ids ...string) []string { return ids }
	if d := cmp.Diff(sorted(existing.Id, schema.Id), api.BlockedBy, cmpSet); d != "" {
		t.Errorf("api blocked by (-want +got):\n%s", d)
	}
	if d := cmp.Diff(sorted(api.Id, schema.Id), ui.BlockedBy, cmpSet); d != "" {
		t.Errorf("ui blocked by (-want +got):\n%s", d)
	}
	graph, err := c.GetTaskGraph(e.alice, &tasksv1.GetTaskGraphRequest{Repo: "local/demo"})
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, id := range graph.Order {
		pos[id] = i
	}
	if !(pos[schema.Id] < pos[api.Id] && pos[api.Id] < pos[ui.Id]) {
		t.Errorf("graph order %v does not put schema before api before ui", graph.Order)
	}

	// A retry returns the same tasks.
	again, err := c.BatchCreateTasks(e.alice, req)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(resp.Tasks, again.Tasks, protocmp.Transform()); d != "" {
		t.Errorf("retry (-first +retry):\n%s", d)
	}

	// All or nothing: an unknown existing blocker fails the whole batch.
	before := countTasks(t, e)
	_, err = c.BatchCreateTasks(e.alice, &tasksv1.BatchCreateTasksRequest{Tasks: []*tasksv1.BatchTask{
		{Key: "a", Task: nt("a")},
		{Key: "b", Task: nt("b", missingID)},
	}})
	grpctest.WantCode(t, err, codes.NotFound)
	if n := countTasks(t, e); n != before {
		t.Errorf("a failed batch left %d tasks behind", n-before)
	}

	// Malformed batches name the field.
	many := make([]*tasksv1.BatchTask, 101)
	for i := range many {
		many[i] = &tasksv1.BatchTask{Key: fmt.Sprint(i), Task: nt("t")}
	}
	cases := []struct {
		name  string
		tasks []*tasksv1.BatchTask
		field string
	}{
		{"empty", nil, "tasks"},
		{"too many", many, "tasks"},
		{"missing key", []*tasksv1.BatchTask{{Task: nt("a")}}, "tasks[0].key"},
		{"duplicate key", []*tasksv1.BatchTask{{Key: "a", Task: nt("a")}, {Key: "a", Task: nt("b")}}, "tasks[1].key"},
		{"missing task", []*tasksv1.BatchTask{{Key: "a"}}, "tasks[0].task"},
		{"bad title", []*tasksv1.BatchTask{{Key: "a", Task: &tasksv1.CreateTaskRequest{Repo: "local/demo"}}}, "tasks[0].task.title"},
		{"bad project_id", []*tasksv1.BatchTask{
			{Key: "a", Task: nt("a")},
			{Key: "b", Task: &tasksv1.CreateTaskRequest{Title: "b", Repo: "local/demo", ProjectId: "not-a-uuid"}},
		}, "tasks[1].task.project_id"},
		{"unknown key", []*tasksv1.BatchTask{{Key: "a", Task: nt("a"), BlockedByKeys: []string{"zz"}}}, "tasks[0].blocked_by_keys"},
		{"self", []*tasksv1.BatchTask{{Key: "a", Task: nt("a"), BlockedByKeys: []string{"a"}}}, "tasks[0].blocked_by_keys"},
		{"cycle", []*tasksv1.BatchTask{
			{Key: "a", Task: nt("a"), BlockedByKeys: []string{"c"}},
			{Key: "b", Task: nt("b"), BlockedByKeys: []string{"a"}},
			{Key: "c", Task: nt("c"), BlockedByKeys: []string{"b"}},
		}, "tasks"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.BatchCreateTasks(e.alice, &tasksv1.BatchCreateTasksRequest{Tasks: tc.tasks})
			grpctest.WantInvalid(t, err, tc.field)
		})
	}
	if n := countTasks(t, e); n != before {
		t.Errorf("refused batches left %d tasks behind", n-before)
	}
	_, err = c.BatchCreateTasks(e.anon, req)
	grpctest.WantCode(t, err, codes.Unauthenticated)
}

var cmpSet = cmp.Transformer("sort", func(in []string) []string {
	out := append([]string(nil), in...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
})

func countTasks(t *testing.T, e *env) int {
	t.Helper()
	resp, err := e.client.ListTasks(e.alice, &tasksv1.ListTasksRequest{PageSize: 200})
	if err != nil {
		t.Fatal(err)
	}
	return len(resp.Tasks)
}
