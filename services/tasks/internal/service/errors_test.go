package service_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

// watchErr opens a watch and returns the error its stream ends with; only for requests
// that must fail.
func watchErr(ctx context.Context, c tasksv1.TaskServiceClient, req *tasksv1.WatchTasksRequest) error {
	s, err := c.WatchTasks(ctx, req)
	if err != nil {
		return err
	}
	_, err = s.Recv()
	return err
}

func TestInvalidArgument(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	ctx := e.alice
	tk := e.create(t, ctx, &tasksv1.CreateTaskRequest{Title: "existing"})
	mask := func(paths ...string) *fieldmaskpb.FieldMask { return &fieldmaskpb.FieldMask{Paths: paths} }
	update := func(task *tasksv1.Task, m *fieldmaskpb.FieldMask) error {
		_, err := c.UpdateTask(ctx, &tasksv1.UpdateTaskRequest{Id: task.GetId(), Task: task, UpdateMask: m})
		return err
	}
	create := func(mod func(*tasksv1.CreateTaskRequest)) func() error {
		return func() error {
			req := &tasksv1.CreateTaskRequest{Title: "t", Repo: "local/demo"}
			mod(req)
			_, err := c.CreateTask(ctx, req)
			return err
		}
	}
	list := func(req *tasksv1.ListTasksRequest) func() error {
		return func() error { _, err := c.ListTasks(ctx, req); return err }
	}
	setStatus := func(req *tasksv1.SetTaskStatusRequest) func() error {
		return func() error { _, err := c.SetTaskStatus(ctx, req); return err }
	}
	long := strings.Repeat("x", 501)

	cases := []struct {
		name  string
		call  func() error
		field string
	}{
		// CreateTask
		{"create: missing title", create(func(r *tasksv1.CreateTaskRequest) { r.Title = "" }), "title"},
		{"create: blank title", create(func(r *tasksv1.CreateTaskRequest) { r.Title = " \t " }), "title"},
		{"create: title too long", create(func(r *tasksv1.CreateTaskRequest) { r.Title = long }), "title"},
		{"create: missing repo", create(func(r *tasksv1.CreateTaskRequest) { r.Repo = "" }), "repo"},
		{"create: repo without owner", create(func(r *tasksv1.CreateTaskRequest) { r.Repo = "demo" }), "repo"},
		{"create: repo with spaces", create(func(r *tasksv1.CreateTaskRequest) { r.Repo = "local/de mo" }), "repo"},
		{"create: repo of dots", create(func(r *tasksv1.CreateTaskRequest) { r.Repo = "../.." }), "repo"},
		{"create: undefined source", create(func(r *tasksv1.CreateTaskRequest) { r.Source = 99 }), "source"},
		{"create: undefined priority", create(func(r *tasksv1.CreateTaskRequest) { r.Priority = -1 }), "priority"},
		{"create: undefined status", create(func(r *tasksv1.CreateTaskRequest) { r.Status = 42 }), "status"},
		{"create: starts in progress", create(func(r *tasksv1.CreateTaskRequest) { r.Status = inProgress }), "status"},
		{"create: garbage blocked_by", create(func(r *tasksv1.CreateTaskRequest) { r.BlockedBy = []string{"nope"} }), "blocked_by"},
		{"create: empty blocked_by", create(func(r *tasksv1.CreateTaskRequest) { r.BlockedBy = []string{""} }), "blocked_by"},
		{"create: garbage parent_id", create(func(r *tasksv1.CreateTaskRequest) { r.ParentId = "12" }), "parent_id"},
		{"create: label too long", create(func(r *tasksv1.CreateTaskRequest) { r.Labels = []string{strings.Repeat("l", 65)} }), "labels"},
		{"create: bad external_url", create(func(r *tasksv1.CreateTaskRequest) { r.ExternalUrl = "javascript:alert(1)" }), "external_url"},
		{"create: external_id too long", create(func(r *tasksv1.CreateTaskRequest) { r.ExternalId = strings.Repeat("e", 201) }), "external_id"},
		{"create: garbage project_id", create(func(r *tasksv1.CreateTaskRequest) { r.ProjectId = "project-1" }), "project_id"},
		{"create: braced project_id", create(func(r *tasksv1.CreateTaskRequest) { r.ProjectId = "{" + tk.Id + "}" }), "project_id"},
		// GetTask
		{"get: missing id", func() error { _, err := c.GetTask(ctx, &tasksv1.GetTaskRequest{}); return err }, "id"},
		{"get: garbage id", func() error { _, err := c.GetTask(ctx, &tasksv1.GetTaskRequest{Id: "not-a-uuid"}); return err }, "id"},
		{"get: braced uuid", func() error { _, err := c.GetTask(ctx, &tasksv1.GetTaskRequest{Id: "{" + tk.Id + "}"}); return err }, "id"},
		// ListTasks
		{"list: negative page_size", list(&tasksv1.ListTasksRequest{PageSize: -1}), "page_size"},
		{"list: page_size too big", list(&tasksv1.ListTasksRequest{PageSize: 201}), "page_size"},
		{"list: garbage page_token", list(&tasksv1.ListTasksRequest{PageToken: "!!!"}), "page_token"},
		{"list: forged page_token", list(&tasksv1.ListTasksRequest{PageToken: "djE6eDp5"}), "page_token"},
		{"list: bad repo", list(&tasksv1.ListTasksRequest{Repo: "no-slash"}), "repo"},
		{"list: unspecified status", list(&tasksv1.ListTasksRequest{Statuses: []tasksv1.TaskStatus{0}}), "statuses"},
		{"list: undefined status", list(&tasksv1.ListTasksRequest{Statuses: []tasksv1.TaskStatus{backlog, 8}}), "statuses"},
		{"list: undefined source", list(&tasksv1.ListTasksRequest{Source: 8}), "source"},
		{"list: garbage parent_id", list(&tasksv1.ListTasksRequest{ParentId: "x"}), "parent_id"},
		{"list: garbage project_id", list(&tasksv1.ListTasksRequest{ProjectId: "x"}), "project_id"},
		{"list: label too long", list(&tasksv1.ListTasksRequest{Label: strings.Repeat("l", 65)}), "label"},
		// UpdateTask
		{"update: missing task", func() error { return update(nil, mask("title")) }, "task"},
		{"update: no mask, no updatable field", func() error { return update(&tasksv1.Task{Id: tk.Id, Status: done}, nil) }, "update_mask"},
		{"update: empty mask, no updatable field", func() error { return update(&tasksv1.Task{Id: tk.Id}, mask()) }, "update_mask"},
		{"update: status in mask", func() error { return update(&tasksv1.Task{Id: tk.Id, Status: done}, mask("status")) }, "update_mask"},
		{"update: unknown path", func() error { return update(&tasksv1.Task{Id: tk.Id}, mask("title", "owner_id")) }, "update_mask"},
		{"update: missing id", func() error { return update(&tasksv1.Task{Title: "x"}, mask("title")) }, "id"},
		{"update: garbage id", func() error { return update(&tasksv1.Task{Id: "zzz", Title: "x"}, mask("title")) }, "id"},
		{"update: task.id names another task", func() error {
			_, err := c.UpdateTask(ctx, &tasksv1.UpdateTaskRequest{Id: tk.Id, Task: &tasksv1.Task{Id: "00000000-0000-0000-0000-000000000001", Title: "x"}, UpdateMask: mask("title")})
			return err
		}, "task.id"},
		{"update: empty title", func() error { return update(&tasksv1.Task{Id: tk.Id}, mask("title")) }, "task.title"},
		{"update: unspecified priority", func() error { return update(&tasksv1.Task{Id: tk.Id}, mask("priority")) }, "task.priority"},
		{"update: bad repo", func() error { return update(&tasksv1.Task{Id: tk.Id, Repo: "a/b/c"}, mask("repo")) }, "task.repo"},
		{"update: complexity 11", func() error { return update(&tasksv1.Task{Id: tk.Id, Complexity: 11}, mask("complexity")) }, "task.complexity"},
		{"update: negative tokens", func() error {
			return update(&tasksv1.Task{Id: tk.Id, EstimatedTokens: -1}, mask("estimated_tokens"))
		}, "task.estimated_tokens"},
		{"update: negative planned_order", func() error {
			return update(&tasksv1.Task{Id: tk.Id, PlannedOrder: -3}, mask("planned_order"))
		}, "task.planned_order"},
		{"update: bad pull_request url", func() error {
			return update(&tasksv1.Task{Id: tk.Id, PullRequest: &typev1.PullRequestRef{Repo: "local/demo", Number: 1, Url: "not a url"}}, mask("pull_request"))
		}, "task.pull_request.url"},
		{"update: pull_request without number", func() error {
			return update(&tasksv1.Task{Id: tk.Id, PullRequest: &typev1.PullRequestRef{Repo: "local/demo"}}, mask("pull_request"))
		}, "task.pull_request.number"},
		{"update: garbage project_id", func() error { return update(&tasksv1.Task{Id: tk.Id, ProjectId: "p1"}, mask("project_id")) }, "task.project_id"},
		{"update: garbage project_id without a mask", func() error { return update(&tasksv1.Task{Id: tk.Id, ProjectId: "p1"}, nil) }, "task.project_id"},
		{"update: pull_request bad repo", func() error {
			return update(&tasksv1.Task{Id: tk.Id, PullRequest: &typev1.PullRequestRef{Repo: "nope", Number: 2}}, mask("pull_request"))
		}, "task.pull_request.repo"},
		{"create: bad request_id", create(func(r *tasksv1.CreateTaskRequest) { r.RequestId = "a b" }), "request_id"},
		// DeleteTask
		{"delete: missing id", func() error { _, err := c.DeleteTask(ctx, &tasksv1.DeleteTaskRequest{}); return err }, "id"},
		{"delete: garbage id", func() error { _, err := c.DeleteTask(ctx, &tasksv1.DeleteTaskRequest{Id: "1"}); return err }, "id"},
		// SetTaskStatus
		{"status: garbage id", setStatus(&tasksv1.SetTaskStatusRequest{Id: "x", Status: done}), "id"},
		{"status: unspecified status", setStatus(&tasksv1.SetTaskStatusRequest{Id: tk.Id}), "status"},
		{"status: undefined status", setStatus(&tasksv1.SetTaskStatusRequest{Id: tk.Id, Status: 9}), "status"},
		{"status: undefined expected_status", setStatus(&tasksv1.SetTaskStatusRequest{Id: tk.Id, Status: planned, ExpectedStatus: 9}), "expected_status"},
		{"status: reason too long", setStatus(&tasksv1.SetTaskStatusRequest{Id: tk.Id, Status: blocked, Reason: strings.Repeat("r", 2001)}), "reason"},
		// AddDependency
		{"add dependency: missing task_id", func() error {
			_, err := c.AddDependency(ctx, &tasksv1.AddDependencyRequest{BlockedById: tk.Id})
			return err
		}, "task_id"},
		{"add dependency: garbage blocked_by_id", func() error {
			_, err := c.AddDependency(ctx, &tasksv1.AddDependencyRequest{TaskId: tk.Id, BlockedById: "x"})
			return err
		}, "blocked_by_id"},
		// RemoveDependency
		{"remove dependency: garbage task_id", func() error {
			_, err := c.RemoveDependency(ctx, &tasksv1.RemoveDependencyRequest{TaskId: "x", BlockedById: tk.Id})
			return err
		}, "task_id"},
		{"remove dependency: missing blocked_by_id", func() error {
			_, err := c.RemoveDependency(ctx, &tasksv1.RemoveDependencyRequest{TaskId: tk.Id})
			return err
		}, "blocked_by_id"},
		// GetTaskGraph
		{"graph: missing repo", func() error { _, err := c.GetTaskGraph(ctx, &tasksv1.GetTaskGraphRequest{}); return err }, "repo"},
		{"graph: bad repo", func() error {
			_, err := c.GetTaskGraph(ctx, &tasksv1.GetTaskGraphRequest{Repo: "/demo"})
			return err
		}, "repo"},
		// GetTaskStats
		{"stats: bad repo", func() error {
			_, err := c.GetTaskStats(ctx, &tasksv1.GetTaskStatsRequest{Repo: "x/"})
			return err
		}, "repo"},
		// PlanTaskOrder
		{"plan: missing repo", func() error { _, err := c.PlanTaskOrder(ctx, &tasksv1.PlanTaskOrderRequest{}); return err }, "repo"},
		{"plan: bad repo", func() error {
			_, err := c.PlanTaskOrder(ctx, &tasksv1.PlanTaskOrderRequest{Repo: "local/../x"})
			return err
		}, "repo"},
		{"plan: request_id with a space", func() error {
			_, err := c.PlanTaskOrder(ctx, &tasksv1.PlanTaskOrderRequest{Repo: "local/demo", RequestId: "a b"})
			return err
		}, "request_id"},
		{"plan: request_id too long", func() error {
			_, err := c.PlanTaskOrder(ctx, &tasksv1.PlanTaskOrderRequest{Repo: "local/demo", RequestId: strings.Repeat("r", 129)})
			return err
		}, "request_id"},
		// ImportIssues
		{"import: bad repo", func() error {
			_, err := c.ImportIssues(ctx, &tasksv1.ImportIssuesRequest{Repo: "nope"})
			return err
		}, "repo"},
		{"import: label too long", func() error {
			_, err := c.ImportIssues(ctx, &tasksv1.ImportIssuesRequest{Repo: "local/demo", Labels: []string{strings.Repeat("l", 65)}})
			return err
		}, "labels"},
		{"import: issue number 0", func() error {
			_, err := c.ImportIssues(ctx, &tasksv1.ImportIssuesRequest{Repo: "local/demo", Numbers: []int32{3, 0}})
			return err
		}, "numbers[1]"},
		{"import: too many issue numbers", func() error {
			_, err := c.ImportIssues(ctx, &tasksv1.ImportIssuesRequest{Repo: "local/demo", Numbers: make([]int32, 101)})
			return err
		}, "numbers"},
		// WatchTasks
		{"watch: negative after_id", func() error {
			return watchErr(ctx, c, &tasksv1.WatchTasksRequest{AfterId: -1})
		}, "after_id"},
		{"watch: garbage id", func() error {
			return watchErr(ctx, c, &tasksv1.WatchTasksRequest{Id: "x"})
		}, "id"},
		{"watch: bad repo", func() error {
			return watchErr(ctx, c, &tasksv1.WatchTasksRequest{Repo: "x"})
		}, "repo"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			grpctest.WantInvalid(t, tc.call(), tc.field)
		})
	}
}

func TestUnauthenticated(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	tk := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "t"})
	forged := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer not-a-token")
	calls := map[string]func(ctx context.Context) error{
		"CreateTask": func(ctx context.Context) error {
			_, err := c.CreateTask(ctx, &tasksv1.CreateTaskRequest{Title: "t", Repo: "local/demo"})
			return err
		},
		"BatchCreateTasks": func(ctx context.Context) error {
			_, err := c.BatchCreateTasks(ctx, &tasksv1.BatchCreateTasksRequest{Tasks: []*tasksv1.BatchTask{
				{Key: "a", Task: &tasksv1.CreateTaskRequest{Title: "t", Repo: "local/demo"}}}})
			return err
		},
		"GetTask": func(ctx context.Context) error {
			_, err := c.GetTask(ctx, &tasksv1.GetTaskRequest{Id: tk.Id})
			return err
		},
		"ListTasks": func(ctx context.Context) error { _, err := c.ListTasks(ctx, &tasksv1.ListTasksRequest{}); return err },
		"UpdateTask": func(ctx context.Context) error {
			_, err := c.UpdateTask(ctx, &tasksv1.UpdateTaskRequest{Id: tk.Id, Task: &tasksv1.Task{Title: "x"}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"title"}}})
			return err
		},
		"DeleteTask": func(ctx context.Context) error {
			_, err := c.DeleteTask(ctx, &tasksv1.DeleteTaskRequest{Id: tk.Id})
			return err
		},
		"SetTaskStatus": func(ctx context.Context) error {
			_, err := c.SetTaskStatus(ctx, &tasksv1.SetTaskStatusRequest{Id: tk.Id, Status: planned})
			return err
		},
		"AddDependency": func(ctx context.Context) error {
			_, err := c.AddDependency(ctx, &tasksv1.AddDependencyRequest{TaskId: tk.Id, BlockedById: missingID})
			return err
		},
		"RemoveDependency": func(ctx context.Context) error {
			_, err := c.RemoveDependency(ctx, &tasksv1.RemoveDependencyRequest{TaskId: tk.Id, BlockedById: missingID})
			return err
		},
		"GetTaskGraph": func(ctx context.Context) error {
			_, err := c.GetTaskGraph(ctx, &tasksv1.GetTaskGraphRequest{Repo: "local/demo"})
			return err
		},
		"GetTaskStats": func(ctx context.Context) error {
			_, err := c.GetTaskStats(ctx, &tasksv1.GetTaskStatsRequest{})
			return err
		},
		"PlanTaskOrder": func(ctx context.Context) error {
			_, err := c.PlanTaskOrder(ctx, &tasksv1.PlanTaskOrderRequest{Repo: "local/demo"})
			return err
		},
		"ImportIssues": func(ctx context.Context) error {
			_, err := c.ImportIssues(ctx, &tasksv1.ImportIssuesRequest{Repo: "local/demo"})
			return err
		},
		"WatchTasks": func(ctx context.Context) error { return watchErr(ctx, c, &tasksv1.WatchTasksRequest{}) },
	}
	if n := len(tasksv1.TaskService_ServiceDesc.Methods) + len(tasksv1.TaskService_ServiceDesc.Streams); len(calls) != n {
		t.Fatalf("%d calls for %d RPCs", len(calls), n)
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			grpctest.WantCode(t, call(e.anon), codes.Unauthenticated)
			grpctest.WantCode(t, call(forged), codes.Unauthenticated)
		})
	}
	// Nothing changed.
	got, err := c.GetTask(e.alice, &tasksv1.GetTaskRequest{Id: tk.Id})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(tk, got.Task, protocmp.Transform()); d != "" {
		t.Errorf("task changed by unauthenticated calls (-before +after):\n%s", d)
	}
}

func TestOtherUsersTasksAreNotFound(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	a := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "alice's"})
	a2 := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "alice's too", BlockedBy: []string{a.Id}})
	b := e.create(t, e.bob, &tasksv1.CreateTaskRequest{Title: "bob's"})
	bob := e.bob

	cases := []struct {
		name string
		call func() error
	}{
		{"GetTask", func() error { _, err := c.GetTask(bob, &tasksv1.GetTaskRequest{Id: a.Id}); return err }},
		{"GetTask missing", func() error { _, err := c.GetTask(bob, &tasksv1.GetTaskRequest{Id: missingID}); return err }},
		{"UpdateTask", func() error {
			_, err := c.UpdateTask(bob, &tasksv1.UpdateTaskRequest{Id: a.Id, Task: &tasksv1.Task{Title: "mine"}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"title"}}})
			return err
		}},
		{"DeleteTask", func() error { _, err := c.DeleteTask(bob, &tasksv1.DeleteTaskRequest{Id: a.Id}); return err }},
		{"SetTaskStatus", func() error {
			_, err := c.SetTaskStatus(bob, &tasksv1.SetTaskStatusRequest{Id: a.Id, Status: cancelled})
			return err
		}},
		{"AddDependency on alice's task", func() error {
			_, err := c.AddDependency(bob, &tasksv1.AddDependencyRequest{TaskId: a.Id, BlockedById: b.Id})
			return err
		}},
		{"AddDependency on alice's blocker", func() error {
			_, err := c.AddDependency(bob, &tasksv1.AddDependencyRequest{TaskId: b.Id, BlockedById: a.Id})
			return err
		}},
		{"RemoveDependency", func() error {
			_, err := c.RemoveDependency(bob, &tasksv1.RemoveDependencyRequest{TaskId: a2.Id, BlockedById: a.Id})
			return err
		}},
		{"CreateTask blocked by alice's task", func() error {
			_, err := c.CreateTask(bob, &tasksv1.CreateTaskRequest{Title: "t", Repo: "local/demo", BlockedBy: []string{a.Id}})
			return err
		}},
		{"CreateTask under alice's task", func() error {
			_, err := c.CreateTask(bob, &tasksv1.CreateTaskRequest{Title: "t", Repo: "local/demo", ParentId: a.Id})
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			grpctest.WantCode(t, tc.call(), codes.NotFound)
		})
	}

	// Reads return only bob's own.
	list, err := c.ListTasks(bob, &tasksv1.ListTasksRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list.Tasks) != 1 || list.Tasks[0].Id != b.Id {
		t.Errorf("bob lists %v", list.Tasks)
	}
	g, err := c.GetTaskGraph(bob, &tasksv1.GetTaskGraphRequest{Repo: "local/demo", IncludeClosed: true})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{b.Id}, g.Order); d != "" || len(g.Edges) != 0 {
		t.Errorf("bob's graph: order (-want +got):\n%s edges %v", d, g.Edges)
	}
	st, err := c.GetTaskStats(bob, &tasksv1.GetTaskStatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Total != 1 {
		t.Errorf("bob's total = %d, want 1", st.Total)
	}
	// Alice's tasks are untouched.
	got, err := c.GetTask(e.alice, &tasksv1.GetTaskRequest{Id: a2.Id})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(a2, got.Task, protocmp.Transform()); d != "" {
		t.Errorf("alice's task changed (-before +after):\n%s", d)
	}
}
