package service_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

// Agent projects' ids.
const (
	projectA = "7b0e6a52-3c1d-4f5e-9a8b-2d4c6e8f0a1b"
	projectB = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
)

const sourceProject = tasksv1.TaskSource_TASK_SOURCE_PROJECT

func taskIDs(ts []*tasksv1.Task) []string {
	out := make([]string, len(ts))
	for i, t := range ts {
		out[i] = t.Id
	}
	return out
}

// TestTaskProject: a task belongs to an agent project from its creation (alone or in a
// batch), is listed by it, moves between projects or leaves them by UpdateTask, and watchers
// see its project; the project's tasks are sourced TASK_SOURCE_PROJECT.
func TestTaskProject(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client

	// Created with a project id in any case, stored and returned canonical.
	planned := e.create(t, e.alice, &tasksv1.CreateTaskRequest{
		Title: "planned", Source: sourceProject, ProjectId: strings.ToUpper(projectA),
	})
	if planned.ProjectId != projectA || planned.Source != sourceProject {
		t.Fatalf("created project_id %q source %v, want %s %v", planned.ProjectId, planned.Source, projectA, sourceProject)
	}
	got, err := c.GetTask(e.alice, &tasksv1.GetTaskRequest{Id: planned.Id})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(planned, got.Task, protocmp.Transform()); d != "" {
		t.Errorf("GetTask (-created +got):\n%s", d)
	}
	none := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "no project"})
	if none.ProjectId != "" {
		t.Errorf("project_id %q on a task created without one", none.ProjectId)
	}

	// A batch: every task its own project (or none).
	batch, err := c.BatchCreateTasks(e.alice, &tasksv1.BatchCreateTasksRequest{Tasks: []*tasksv1.BatchTask{
		{Key: "schema", Task: &tasksv1.CreateTaskRequest{Title: "schema", Repo: "local/demo", Source: sourceProject, ProjectId: projectA}},
		{Key: "api", Task: &tasksv1.CreateTaskRequest{Title: "api", Repo: "local/demo", Source: sourceProject, ProjectId: projectA},
			BlockedByKeys: []string{"schema"}},
		{Key: "other", Task: &tasksv1.CreateTaskRequest{Title: "other", Repo: "local/demo", ProjectId: projectB}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	schema, api, other := batch.Tasks[0], batch.Tasks[1], batch.Tasks[2]
	if schema.ProjectId != projectA || api.ProjectId != projectA || other.ProjectId != projectB ||
		schema.Source != sourceProject || other.Source != tasksv1.TaskSource_TASK_SOURCE_API {
		t.Errorf("batch tasks' (project, source): (%q %v) (%q %v) (%q %v)",
			schema.ProjectId, schema.Source, api.ProjectId, api.Source, other.ProjectId, other.Source)
	}
	// Bob's task in alice's project id is bob's: never listed for alice.
	e.create(t, e.bob, &tasksv1.CreateTaskRequest{Title: "bob's", ProjectId: projectA})

	list := func(req *tasksv1.ListTasksRequest) []string {
		t.Helper()
		resp, err := c.ListTasks(e.alice, req)
		if err != nil {
			t.Fatal(err)
		}
		return taskIDs(resp.Tasks)
	}
	// Newest first; the batch's tasks share a creation time, so their ids order them.
	batchOrder := []string{api.Id, schema.Id}
	slices.SortFunc(batchOrder, func(a, b string) int { return strings.Compare(b, a) })
	newest := append(slices.Clone(batchOrder), planned.Id)
	cases := []struct {
		name string
		req  *tasksv1.ListTasksRequest
		want []string // newest first
	}{
		{"project", &tasksv1.ListTasksRequest{ProjectId: projectA}, newest},
		{"project in upper case", &tasksv1.ListTasksRequest{ProjectId: strings.ToUpper(projectB)}, []string{other.Id}},
		{"project and source", &tasksv1.ListTasksRequest{ProjectId: projectB, Source: sourceProject}, nil},
		{"source project", &tasksv1.ListTasksRequest{Source: sourceProject}, newest},
		{"unknown project", &tasksv1.ListTasksRequest{ProjectId: missingID}, nil},
		{"paged", &tasksv1.ListTasksRequest{ProjectId: projectA, PageSize: 2}, newest[:2]},
	}
	for _, tc := range cases {
		if d := cmp.Diff(tc.want, list(tc.req), cmpopts.EquateEmpty()); d != "" {
			t.Errorf("ListTasks %s (-want +got):\n%s", tc.name, d)
		}
	}

	// Watchers see the project of a task as it is created and changed.
	s := watch(t, e.alice, c, &tasksv1.WatchTasksRequest{AfterId: 0})
	hist := recvN(t, s, 5) // planned, none, schema, api, other
	if p := taskOf(hist[0]).GetProjectId(); p != projectA {
		t.Errorf("CREATED event's project_id = %q, want %s", p, projectA)
	}

	// Moved to another project (also by an implied mask), then out of any.
	update := func(pid string, mask *fieldmaskpb.FieldMask) *tasksv1.Task {
		t.Helper()
		resp, err := c.UpdateTask(e.alice, &tasksv1.UpdateTaskRequest{Id: none.Id, Task: &tasksv1.Task{ProjectId: pid}, UpdateMask: mask})
		if err != nil {
			t.Fatal(err)
		}
		return resp.Task
	}
	moved := update(strings.ToUpper(projectB), &fieldmaskpb.FieldMask{Paths: []string{"project_id"}})
	want := proto.Clone(none).(*tasksv1.Task)
	want.ProjectId = projectB
	if d := cmp.Diff(want, moved, protocmp.Transform(), protocmp.IgnoreFields(&tasksv1.Task{}, "update_time")); d != "" {
		t.Errorf("UpdateTask set project_id (-want +got):\n%s", d)
	}
	if moved = update(projectA, nil); moved.ProjectId != projectA {
		t.Errorf("UpdateTask without a mask: project_id %q, want %s", moved.ProjectId, projectA)
	}
	cleared := update("", &fieldmaskpb.FieldMask{Paths: []string{"project_id"}})
	if cleared.ProjectId != "" {
		t.Errorf("UpdateTask clearing project_id left %q", cleared.ProjectId)
	}
	if d := cmp.Diff([]string{other.Id}, list(&tasksv1.ListTasksRequest{ProjectId: projectB})); d != "" {
		t.Errorf("project B after its task left (-want +got):\n%s", d)
	}
	evs := recvN(t, s, 3)
	if d := cmp.Diff([]*tasksv1.WatchTasksResponse{updated(moved, "project_id"), updated(cleared, "project_id")}, evs[1:],
		protocmp.Transform(), protocmp.IgnoreFields(&tasksv1.WatchTasksResponse{}, "id", "time")); d != "" {
		t.Errorf("UPDATED events (-want +got):\n%s", d)
	}
	if p := evs[0].GetUpdated().GetTask().GetProjectId(); p != projectB {
		t.Errorf("first UPDATED event's project_id = %q, want %s", p, projectB)
	}
}

// TestCreateTaskRequestIDCoversProject: a request id reused with another project is another
// request, refused; the same project is a retry.
func TestCreateTaskRequestIDCoversProject(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	req := &tasksv1.CreateTaskRequest{RequestId: "plan-1", Title: "step", Repo: "local/demo", Source: sourceProject, ProjectId: projectA}
	first, err := c.CreateTask(e.alice, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.CreateTask(e.alice, req)
	if err != nil {
		t.Fatal(err)
	}
	if again.Task.Id != first.Task.Id {
		t.Errorf("retry created task %s, first was %s", again.Task.Id, first.Task.Id)
	}
	other := proto.Clone(req).(*tasksv1.CreateTaskRequest)
	other.ProjectId = projectB
	_, err = c.CreateTask(e.alice, other)
	grpctest.WantCode(t, err, codes.InvalidArgument, "request_id")

	batch := &tasksv1.BatchCreateTasksRequest{RequestId: "plan-2", Tasks: []*tasksv1.BatchTask{
		{Key: "a", Task: &tasksv1.CreateTaskRequest{Title: "a", Repo: "local/demo", ProjectId: projectA}},
	}}
	if _, err := c.BatchCreateTasks(e.alice, batch); err != nil {
		t.Fatal(err)
	}
	batch.Tasks[0].Task.ProjectId = projectB
	_, err = c.BatchCreateTasks(e.alice, batch)
	grpctest.WantCode(t, err, codes.InvalidArgument, "request_id")
}
