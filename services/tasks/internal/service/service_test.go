package service_test

import (
	"fmt"
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
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

func TestTaskCRUD(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client

	blocker := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "design"})
	parent := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "epic"})
	created := e.create(t, e.alice, &tasksv1.CreateTaskRequest{
		Title:       "  Add rate limiting  ",
		Repo:        "local/demo",
		Description: "to the API",
		Source:      tasksv1.TaskSource_TASK_SOURCE_CHAT,
		Priority:    typev1.Priority_PRIORITY_HIGH,
		Labels:      []string{" api ", "security", "api", ""},
		Status:      planned,
		BlockedBy:   []string{strings.ToUpper(blocker.Id), blocker.Id},
		ParentId:    parent.Id,
		ExternalId:  "chat:42",
		ExternalUrl: "https://example.com/chat/42",
	})
	want := &tasksv1.Task{
		Id: created.Id, OwnerId: "alice", Repo: "local/demo", Title: "Add rate limiting", Description: "to the API",
		Status: planned, Source: tasksv1.TaskSource_TASK_SOURCE_CHAT, Priority: typev1.Priority_PRIORITY_HIGH,
		Labels: []string{"api", "security"}, BlockedBy: []string{blocker.Id}, ParentId: parent.Id,
		ExternalId: "chat:42", ExternalUrl: "https://example.com/chat/42",
		CreateTime: created.CreateTime, UpdateTime: created.UpdateTime,
	}
	if d := cmp.Diff(want, created, protocmp.Transform()); d != "" {
		t.Errorf("CreateTask (-want +got):\n%s", d)
	}
	if created.CreateTime == nil || created.UpdateTime == nil {
		t.Error("times not set")
	}

	defaults := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "defaults"})
	if defaults.Status != backlog || defaults.Source != tasksv1.TaskSource_TASK_SOURCE_API ||
		defaults.Priority != typev1.Priority_PRIORITY_MEDIUM {
		t.Errorf("defaults = %v %v %v, want backlog api medium", defaults.Status, defaults.Source, defaults.Priority)
	}

	got, err := c.GetTask(e.alice, &tasksv1.GetTaskRequest{Id: strings.ToUpper(created.Id)})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(created, got.Task, protocmp.Transform()); d != "" {
		t.Errorf("GetTask (-created +got):\n%s", d)
	}

	list, err := c.ListTasks(e.alice, &tasksv1.ListTasksRequest{Repo: "local/demo", Label: " api "})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]*tasksv1.Task{created}, list.Tasks, protocmp.Transform()); d != "" || list.NextPageToken != "" {
		t.Errorf("ListTasks by label (-want +got):\n%s, next %q", d, list.NextPageToken)
	}

	pr := &typev1.PullRequestRef{Repo: "local/demo", Number: 7, Url: "https://example.com/pr/7"}
	upd, err := c.UpdateTask(e.alice, &tasksv1.UpdateTaskRequest{
		Id: created.Id,
		Task: &tasksv1.Task{Title: "Rate limiting", Labels: []string{"b", " b"}, Complexity: 6,
			JobId: "job-7", PullRequest: pr, Description: "not in the mask"},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"title", "labels", "complexity", "job_id", "pull_request"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	wantUpd := proto.Clone(created).(*tasksv1.Task)
	wantUpd.Title, wantUpd.Labels, wantUpd.Complexity = "Rate limiting", []string{"b"}, 6
	wantUpd.JobId, wantUpd.PullRequest = "job-7", pr
	if d := cmp.Diff(wantUpd, upd.Task, protocmp.Transform(), protocmp.IgnoreFields(&tasksv1.Task{}, "update_time")); d != "" {
		t.Errorf("UpdateTask (-want +got):\n%s", d)
	}

	if _, err := c.DeleteTask(e.alice, &tasksv1.DeleteTaskRequest{Id: created.Id}); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetTask(e.alice, &tasksv1.GetTaskRequest{Id: created.Id})
	grpctest.WantCode(t, err, codes.NotFound)
	_, err = c.DeleteTask(e.alice, &tasksv1.DeleteTaskRequest{Id: created.Id})
	grpctest.WantCode(t, err, codes.NotFound)
}

func TestCreateTaskDuplicateExternalID(t *testing.T) {
	t.Parallel()
	e := start(t)
	req := &tasksv1.CreateTaskRequest{Title: "issue", Repo: "local/demo", Source: tasksv1.TaskSource_TASK_SOURCE_GITHUB, ExternalId: "github:local/demo#1"}
	e.create(t, e.alice, proto.Clone(req).(*tasksv1.CreateTaskRequest))
	_, err := e.client.CreateTask(e.alice, proto.Clone(req).(*tasksv1.CreateTaskRequest))
	grpctest.WantCode(t, err, codes.AlreadyExists, "external_id")
	e.create(t, e.bob, proto.Clone(req).(*tasksv1.CreateTaskRequest)) // another owner may
}

func TestListTasksPages(t *testing.T) {
	t.Parallel()
	e := start(t)
	var want []string
	for i := range 12 {
		want = append(want, e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: fmt.Sprint("t", i)}).Id)
		e.create(t, e.bob, &tasksv1.CreateTaskRequest{Title: "bob's"})
	}
	slices.Reverse(want) // newest first
	var (
		got   []string
		token string
		pages int
	)
	for {
		resp, err := e.client.ListTasks(e.alice, &tasksv1.ListTasksRequest{PageSize: 5, PageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, tk := range resp.Tasks {
			got = append(got, tk.Id)
		}
		if token = resp.NextPageToken; token == "" || pages > 10 {
			break
		}
	}
	if d := cmp.Diff(want, got); d != "" || pages != 3 {
		t.Errorf("ListTasks over %d pages (-want +got):\n%s", pages, d)
	}
	// Default page size is 50: one page.
	resp, err := e.client.ListTasks(e.alice, &tasksv1.ListTasksRequest{Statuses: []tasksv1.TaskStatus{backlog, backlog}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Tasks) != 12 || resp.NextPageToken != "" {
		t.Errorf("default page: %d tasks, next %q", len(resp.Tasks), resp.NextPageToken)
	}
}

func TestSetTaskStatus(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	tk := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "work"})

	got := e.setStatus(t, tk.Id, inProgress)
	if got.Status != inProgress {
		t.Fatalf("status = %v", got.Status)
	}
	resp, err := c.SetTaskStatus(e.alice, &tasksv1.SetTaskStatusRequest{Id: tk.Id, Status: done, ExpectedStatus: inProgress})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Task.Status != done || resp.Task.CompleteTime == nil {
		t.Errorf("done task = %v, complete_time %v", resp.Task.Status, resp.Task.CompleteTime)
	}
	// Same status again: success, unchanged.
	same, err := c.SetTaskStatus(e.alice, &tasksv1.SetTaskStatusRequest{Id: tk.Id, Status: done})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(resp.Task, same.Task, protocmp.Transform()); d != "" {
		t.Errorf("same-status call changed the task (-before +after):\n%s", d)
	}
	resp, err = c.SetTaskStatus(e.alice, &tasksv1.SetTaskStatusRequest{Id: tk.Id, Status: backlog}) // reopen
	if err != nil {
		t.Fatal(err)
	}
	if resp.Task.Status != backlog || resp.Task.CompleteTime != nil {
		t.Errorf("reopened task = %v, complete_time %v", resp.Task.Status, resp.Task.CompleteTime)
	}
	resp, err = c.SetTaskStatus(e.alice, &tasksv1.SetTaskStatusRequest{Id: tk.Id, Status: blocked, Reason: "needs a decision"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Task.StatusReason != "needs a decision" {
		t.Errorf("reason = %q", resp.Task.StatusReason)
	}
}

func TestFailedPrecondition(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	finished := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "finished"})
	e.setStatus(t, finished.Id, inProgress)
	e.setStatus(t, finished.Id, done)
	dropped := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "dropped"})
	e.setStatus(t, dropped.Id, cancelled)
	fresh := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "fresh"})
	blocker := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "blocker"})
	waiting := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "waiting", BlockedBy: []string{blocker.Id}})
	chained := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "chained", BlockedBy: []string{waiting.Id}})

	cases := []struct {
		name string
		call func() error
		want []string
	}{
		{"done to in_progress", func() error {
			_, err := c.SetTaskStatus(e.alice, &tasksv1.SetTaskStatusRequest{Id: finished.Id, Status: inProgress})
			return err
		}, []string{"from done to in_progress"}},
		{"cancelled to done", func() error {
			_, err := c.SetTaskStatus(e.alice, &tasksv1.SetTaskStatusRequest{Id: dropped.Id, Status: done})
			return err
		}, []string{"from cancelled to done"}},
		{"backlog to in_review", func() error {
			_, err := c.SetTaskStatus(e.alice, &tasksv1.SetTaskStatusRequest{Id: fresh.Id, Status: inReview})
			return err
		}, []string{"from backlog to in_review"}},
		{"expected status differs", func() error {
			_, err := c.SetTaskStatus(e.alice, &tasksv1.SetTaskStatusRequest{Id: fresh.Id, Status: planned, ExpectedStatus: inProgress})
			return err
		}, []string{"backlog", "in_progress"}},
		{"start with an open blocker", func() error {
			_, err := c.SetTaskStatus(e.alice, &tasksv1.SetTaskStatusRequest{Id: waiting.Id, Status: inProgress})
			return err
		}, []string{blocker.Id, "backlog"}},
		{"self dependency", func() error {
			_, err := c.AddDependency(e.alice, &tasksv1.AddDependencyRequest{TaskId: fresh.Id, BlockedById: fresh.Id})
			return err
		}, []string{"itself"}},
		{"three-cycle", func() error {
			_, err := c.AddDependency(e.alice, &tasksv1.AddDependencyRequest{TaskId: blocker.Id, BlockedById: chained.Id})
			return err
		}, []string{"cycle"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			grpctest.WantCode(t, tc.call(), codes.FailedPrecondition, tc.want...)
		})
	}
}

func TestDependencies(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	a := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "a"})
	b := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "b"})

	add, err := c.AddDependency(e.alice, &tasksv1.AddDependencyRequest{TaskId: b.Id, BlockedById: a.Id})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{a.Id}, add.Task.BlockedBy); d != "" {
		t.Errorf("blocked_by after add (-want +got):\n%s", d)
	}
	_, err = c.AddDependency(e.alice, &tasksv1.AddDependencyRequest{TaskId: a.Id, BlockedById: b.Id})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "cycle")

	rm, err := c.RemoveDependency(e.alice, &tasksv1.RemoveDependencyRequest{TaskId: b.Id, BlockedById: a.Id})
	if err != nil {
		t.Fatal(err)
	}
	if len(rm.Task.BlockedBy) != 0 {
		t.Errorf("blocked_by after remove = %v", rm.Task.BlockedBy)
	}
	_, err = c.RemoveDependency(e.alice, &tasksv1.RemoveDependencyRequest{TaskId: b.Id, BlockedById: a.Id})
	grpctest.WantCode(t, err, codes.NotFound)
}

func TestGetTaskGraphAndStats(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	a := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "a"})
	b := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "b", BlockedBy: []string{a.Id}, Priority: typev1.Priority_PRIORITY_URGENT})
	d := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "done"})
	e.setStatus(t, d.Id, inProgress)
	e.setStatus(t, d.Id, done)
	e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "elsewhere", Repo: "local/other"})
	e.create(t, e.bob, &tasksv1.CreateTaskRequest{Title: "bob's"})

	g, err := c.GetTaskGraph(e.alice, &tasksv1.GetTaskGraphRequest{Repo: "local/demo"})
	if err != nil {
		t.Fatal(err)
	}
	wantGraph := &tasksv1.GetTaskGraphResponse{
		Edges: []*tasksv1.TaskEdge{{TaskId: b.Id, BlockedById: a.Id}},
		Order: []string{a.Id, b.Id},
		Ready: []string{a.Id},
	}
	if diff := cmp.Diff(wantGraph, g, protocmp.Transform(), protocmp.IgnoreFields(g, "tasks")); diff != "" {
		t.Errorf("GetTaskGraph (-want +got):\n%s", diff)
	}
	if len(g.Tasks) != 2 || g.Tasks[0].Id != a.Id {
		t.Errorf("graph tasks = %v", g.Tasks)
	}
	g, err = c.GetTaskGraph(e.alice, &tasksv1.GetTaskGraphRequest{Repo: "local/demo", IncludeClosed: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(g.Tasks) != 3 {
		t.Errorf("graph with closed tasks has %d tasks, want 3", len(g.Tasks))
	}

	st, err := c.GetTaskStats(e.alice, &tasksv1.GetTaskStatsRequest{Repo: "local/demo"})
	if err != nil {
		t.Fatal(err)
	}
	wantStats := &tasksv1.GetTaskStatsResponse{
		Total:         3,
		ByStatus:      map[string]int64{"backlog": 2, "done": 1},
		BySource:      map[string]int64{"api": 3},
		ByPriority:    map[string]int64{"medium": 2, "urgent": 1},
		BlockedByOpen: 1,
	}
	dropZeros := cmpopts.IgnoreMapEntries(func(_ string, v int64) bool { return v == 0 })
	if diff := cmp.Diff(wantStats, st, protocmp.Transform(), dropZeros); diff != "" {
		t.Errorf("GetTaskStats (-want +got):\n%s", diff)
	}
	if _, ok := st.ByStatus["in_progress"]; !ok {
		t.Errorf("by_status lacks the zero in_progress key: %v", st.ByStatus)
	}
	all, err := c.GetTaskStats(e.alice, &tasksv1.GetTaskStatsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if all.Total != 4 {
		t.Errorf("total over all repos = %d, want 4", all.Total)
	}
}

func TestImportIssuesNeedsTheGitHubService(t *testing.T) {
	t.Parallel()
	e := start(t)
	_, err := e.client.ImportIssues(e.alice, &tasksv1.ImportIssuesRequest{Repo: "local/demo", Labels: []string{"bug"}})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "THEFOLD_GITHUB_ADDR")
}
