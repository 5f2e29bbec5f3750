package service_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/agent/internal/project"
	"github.com/thefold/thefold/services/agent/internal/store"
)

const (
	planned   = agentv1.ProjectStatus_PROJECT_STATUS_PLANNED
	cancelled = agentv1.ProjectStatus_PROJECT_STATUS_CANCELLED
	skipped   = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_SKIPPED
)

type projEnv struct {
	st       *store.Store
	q        *queue
	conn     *grpc.ClientConn
	projects agentv1.ProjectServiceClient
	ctx      func(user string) context.Context
}

// newProjEnv serves ProjectService (beside AgentService and ReviewService, as the agent
// does) over real gRPC on a fresh agent schema (newEnv, with 8 watches).
func newProjEnv(t *testing.T) *projEnv {
	t.Helper()
	e := newEnvWatches(t, 8)
	return &projEnv{st: e.st, q: e.q, conn: e.conn, projects: e.projects, ctx: e.ctx}
}

// seed stores a PLANNED project of owner in repo as PlanProject would (PlanProject needs
// the github, ai and tasks services): phase 1 has t1 (made from task taskA) and t2, phase 2
// has t3 (after t1) and t4 (after t2).
func (e *projEnv) seed(t *testing.T, owner, repo string) *agentv1.Project {
	t.Helper()
	t1 := &agentv1.ProjectTask{Id: uuid.NewString(), TaskId: taskA, Title: "schema", Status: agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_PENDING}
	t2 := &agentv1.ProjectTask{Id: uuid.NewString(), Title: "config", Status: agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_PENDING}
	t3 := &agentv1.ProjectTask{Id: uuid.NewString(), Title: "api", DependsOn: []string{t1.Id}, Status: agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_PENDING}
	t4 := &agentv1.ProjectTask{Id: uuid.NewString(), Title: "cli", DependsOn: []string{t2.Id}, Status: agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_PENDING}
	p, created, err := e.st.CreateProject(context.Background(), &agentv1.Project{OwnerId: owner, Repo: repo, Request: "build it", Description: "it",
		Status: planned, Mode: agentv1.ProjectMode_PROJECT_MODE_REVIEW, BaseBranch: "main",
		Phases: []*agentv1.ProjectPhase{
			{Number: 1, Name: "base", Tasks: []*agentv1.ProjectTask{t1, t2}},
			{Number: 2, Name: "top", Tasks: []*agentv1.ProjectTask{t3, t4}},
		}}, "", nil)
	if err != nil || !created || p.Etag != "1" {
		t.Fatalf("create project: %v (created %v, etag %q)", err, created, p.GetEtag())
	}
	return p
}

func (e *projEnv) get(t *testing.T, user, id string) *agentv1.Project {
	t.Helper()
	r, err := e.projects.GetProject(e.ctx(user), &agentv1.GetProjectRequest{Id: id})
	if err != nil {
		t.Fatalf("get project %s: %v", id, err)
	}
	return r.Project
}

// watch reads a WatchProject stream to its end: the messages, heartbeats included.
func watchAll(t *testing.T, s grpc.ServerStreamingClient[agentv1.WatchProjectResponse]) []*agentv1.WatchProjectResponse {
	t.Helper()
	var out []*agentv1.WatchProjectResponse
	for {
		ev, err := s.Recv()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("watch after %d messages: %v", len(out), err)
		}
		out = append(out, ev)
	}
}

// types are the event types of msgs, heartbeats left out.
func types(msgs []*agentv1.WatchProjectResponse) []agentv1.ProjectEventType {
	var out []agentv1.ProjectEventType
	for _, m := range msgs {
		if m.GetHeartbeat() == nil {
			out = append(out, m.Type)
		}
	}
	return out
}

func TestProjectMalformedInput(t *testing.T) {
	e := newProjEnv(t)
	ctx := e.ctx(alice)
	long := strings.Repeat("x", 20001)
	plan := func(req *agentv1.PlanProjectRequest) func() error {
		return func() error { _, err := e.projects.PlanProject(ctx, req); return err }
	}
	update := func(req *agentv1.UpdateProjectRequest) func() error {
		return func() error { _, err := e.projects.UpdateProject(ctx, req); return err }
	}
	list := func(req *agentv1.ListProjectsRequest) func() error {
		return func() error { _, err := e.projects.ListProjects(ctx, req); return err }
	}
	watch := func(req *agentv1.WatchProjectRequest) func() error {
		return func() error {
			s, err := e.projects.WatchProject(ctx, req)
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}
	}
	start := func(req *agentv1.StartProjectRequest) func() error {
		return func() error { _, err := e.projects.StartProject(ctx, req); return err }
	}
	pause := func(req *agentv1.PauseProjectRequest) func() error {
		return func() error { _, err := e.projects.PauseProject(ctx, req); return err }
	}
	resume := func(req *agentv1.ResumeProjectRequest) func() error {
		return func() error { _, err := e.projects.ResumeProject(ctx, req); return err }
	}
	skip := func(req *agentv1.SkipProjectTaskRequest) func() error {
		return func() error { _, err := e.projects.SkipProjectTask(ctx, req); return err }
	}
	resolve := func(req *agentv1.ResolveProjectTaskRequest) func() error {
		return func() error { _, err := e.projects.ResolveProjectTask(ctx, req); return err }
	}
	retry := func(req *agentv1.RetryProjectTaskRequest) func() error {
		return func() error { _, err := e.projects.RetryProjectTask(ctx, req); return err }
	}
	message := func(req *agentv1.PostProjectMessageRequest) func() error {
		return func() error { _, err := e.projects.PostProjectMessage(ctx, req); return err }
	}
	interrupt := func(req *agentv1.InterruptWorkerRequest) func() error {
		return func() error { _, err := e.projects.InterruptWorker(ctx, req); return err }
	}
	resumeWorker := func(req *agentv1.ResumeWorkerRequest) func() error {
		return func() error { _, err := e.projects.ResumeWorker(ctx, req); return err }
	}
	crew := agentv1.ProjectMode_PROJECT_MODE_CREW
	longID := strings.Repeat("t", 65)
	mask := func(paths ...string) *fieldmaskpb.FieldMask { return &fieldmaskpb.FieldMask{Paths: paths} }
	cases := []struct {
		method string
		field  string
		call   func() error
	}{
		{"PlanProject", "repo", plan(&agentv1.PlanProjectRequest{Request: "build"})},
		{"PlanProject", "repo", plan(&agentv1.PlanProjectRequest{Repo: "no slash", Request: "build"})},
		{"PlanProject", "repo", plan(&agentv1.PlanProjectRequest{Repo: "../..", Request: "build"})},
		{"PlanProject", "request", plan(&agentv1.PlanProjectRequest{Repo: "local/r"})},
		{"PlanProject", "request", plan(&agentv1.PlanProjectRequest{Repo: "local/r", Request: " \n\t"})},
		{"PlanProject", "request", plan(&agentv1.PlanProjectRequest{Repo: "local/r", Request: long})},
		{"PlanProject", "conventions", plan(&agentv1.PlanProjectRequest{Repo: "local/r", Request: "build", Conventions: long})},
		{"PlanProject", "task_ids", plan(&agentv1.PlanProjectRequest{Repo: "local/r", TaskIds: []string{taskA}, ImportIssues: true})},
		{"PlanProject", "task_ids[1]", plan(&agentv1.PlanProjectRequest{Repo: "local/r", TaskIds: []string{taskA, "task-b"}})},
		{"PlanProject", "task_ids", plan(&agentv1.PlanProjectRequest{Repo: "local/r", TaskIds: slices.Repeat([]string{taskA}, 101)})},
		{"PlanProject", "mode", plan(&agentv1.PlanProjectRequest{Repo: "local/r", Request: "build", Mode: 99})},
		{"PlanProject", "base_branch", plan(&agentv1.PlanProjectRequest{Repo: "local/r", Request: "build", BaseBranch: "a..b"})},
		{"PlanProject", "base_branch", plan(&agentv1.PlanProjectRequest{Repo: "local/r", Request: "build", BaseBranch: "-x"})},
		{"PlanProject", "request_id", plan(&agentv1.PlanProjectRequest{Repo: "local/r", Request: "build", RequestId: "has space"})},
		{"PlanProject", "request_id", plan(&agentv1.PlanProjectRequest{Repo: "local/r", Request: "build", RequestId: strings.Repeat("r", 200)})},
		{"PlanProject", "max_workers", plan(&agentv1.PlanProjectRequest{Repo: "local/r", Mode: crew, MaxWorkers: 11})},
		{"PlanProject", "max_workers", plan(&agentv1.PlanProjectRequest{Repo: "local/r", Mode: crew, MaxWorkers: -1})},
		{"PlanProject", "max_workers", plan(&agentv1.PlanProjectRequest{Repo: "local/r", Request: "build", MaxWorkers: 2})},
		{"PlanProject", "merge_policy", plan(&agentv1.PlanProjectRequest{Repo: "local/r", Mode: crew, MergePolicy: 9})},
		{"PlanProject", "merge_policy", plan(&agentv1.PlanProjectRequest{Repo: "local/r", Request: "build", MergePolicy: agentv1.MergePolicy_MERGE_POLICY_AUTO})},
		{"PlanProject", "auto_merge_min_quality", plan(&agentv1.PlanProjectRequest{Repo: "local/r", Mode: crew, AutoMergeMinQuality: 11})},
		{"PlanProject", "check_command", plan(&agentv1.PlanProjectRequest{Repo: "local/r", Mode: crew, CheckCommand: strings.Repeat("c", 1001)})},
		{"PlanProject", "check_command", plan(&agentv1.PlanProjectRequest{Repo: "local/r", Request: "build", CheckCommand: "make test"})},
		{"PostProjectMessage", "project_id", message(&agentv1.PostProjectMessageRequest{Text: "hi"})},
		{"PostProjectMessage", "project_id", message(&agentv1.PostProjectMessageRequest{ProjectId: "x", Text: "hi"})},
		{"PostProjectMessage", "text", message(&agentv1.PostProjectMessageRequest{ProjectId: missing})},
		{"PostProjectMessage", "text", message(&agentv1.PostProjectMessageRequest{ProjectId: missing, Text: " \n"})},
		{"PostProjectMessage", "text", message(&agentv1.PostProjectMessageRequest{ProjectId: missing, Text: strings.Repeat("x", 8001)})},
		{"PostProjectMessage", "worker", message(&agentv1.PostProjectMessageRequest{ProjectId: missing, Text: "hi", Worker: -1})},
		{"PostProjectMessage", "project_task_id", message(&agentv1.PostProjectMessageRequest{ProjectId: missing, Text: "hi", ProjectTaskId: longID})},
		{"PostProjectMessage", "request_id", message(&agentv1.PostProjectMessageRequest{ProjectId: missing, Text: "hi", RequestId: "has space"})},
		{"PostProjectMessage", "prioritize[1]", message(&agentv1.PostProjectMessageRequest{ProjectId: missing, Prioritize: []string{"t1", " "}})},
		{"PostProjectMessage", "hold[0]", message(&agentv1.PostProjectMessageRequest{ProjectId: missing, Hold: []string{longID}})},
		{"PostProjectMessage", "release", message(&agentv1.PostProjectMessageRequest{ProjectId: missing, Release: slices.Repeat([]string{"t1"}, 101)})},
		{"PostProjectMessage", "prioritize", message(&agentv1.PostProjectMessageRequest{ProjectId: missing, Worker: 1, Prioritize: []string{"t1"}})},
		{"InterruptWorker", "project_id", interrupt(&agentv1.InterruptWorkerRequest{Worker: 1})},
		{"InterruptWorker", "worker", interrupt(&agentv1.InterruptWorkerRequest{ProjectId: missing, Worker: -2})},
		{"InterruptWorker", "project_task_id", interrupt(&agentv1.InterruptWorkerRequest{ProjectId: missing, ProjectTaskId: longID})},
		{"ResumeWorker", "project_id", resumeWorker(&agentv1.ResumeWorkerRequest{ProjectId: "x", Worker: 1})},
		{"ResumeWorker", "worker", resumeWorker(&agentv1.ResumeWorkerRequest{ProjectId: missing, Worker: -1})},
		{"GetProjectPool", "id", func() error {
			_, err := e.projects.GetProjectPool(ctx, &agentv1.GetProjectPoolRequest{Id: "x"})
			return err
		}},
		{"UpdateProject", "project.max_workers", update(&agentv1.UpdateProjectRequest{Id: missing, Project: &agentv1.Project{MaxWorkers: 11}, UpdateMask: mask("max_workers")})},
		{"UpdateProject", "id", update(&agentv1.UpdateProjectRequest{Project: &agentv1.Project{}, UpdateMask: mask("description")})},
		{"UpdateProject", "id", update(&agentv1.UpdateProjectRequest{Id: "x", Project: &agentv1.Project{}, UpdateMask: mask("description")})},
		{"UpdateProject", "project", update(&agentv1.UpdateProjectRequest{Id: missing, UpdateMask: mask("description")})},
		{"UpdateProject", "project.id", update(&agentv1.UpdateProjectRequest{Id: missing, Project: &agentv1.Project{Id: taskA}, UpdateMask: mask("description")})},
		{"UpdateProject", "update_mask", update(&agentv1.UpdateProjectRequest{Id: missing, Project: &agentv1.Project{Description: "d"}})},
		{"UpdateProject", "update_mask.paths[1]", update(&agentv1.UpdateProjectRequest{Id: missing, Project: &agentv1.Project{}, UpdateMask: mask("description", "status")})},
		{"UpdateProject", "project.description", update(&agentv1.UpdateProjectRequest{Id: missing, Project: &agentv1.Project{Description: long}, UpdateMask: mask("description")})},
		{"UpdateProject", "project.conventions", update(&agentv1.UpdateProjectRequest{Id: missing, Project: &agentv1.Project{Conventions: long}, UpdateMask: mask("conventions")})},
		{"UpdateProject", "project.mode", update(&agentv1.UpdateProjectRequest{Id: missing, Project: &agentv1.Project{Mode: 7}, UpdateMask: mask("mode")})},
		{"UpdateProject", "project.budget.max_tokens", update(&agentv1.UpdateProjectRequest{Id: missing,
			Project: &agentv1.Project{Budget: &typev1.Budget{MaxTokens: -1}}, UpdateMask: mask("budget")})},
		{"UpdateProject", "project.etag", update(&agentv1.UpdateProjectRequest{Id: missing, Project: &agentv1.Project{Etag: long}, UpdateMask: mask("description")})},
		{"GetProject", "id", func() error { _, err := e.projects.GetProject(ctx, &agentv1.GetProjectRequest{}); return err }},
		{"GetProject", "id", func() error { _, err := e.projects.GetProject(ctx, &agentv1.GetProjectRequest{Id: "x"}); return err }},
		{"ListProjects", "repo", list(&agentv1.ListProjectsRequest{Repo: "no slash"})},
		{"ListProjects", "statuses[0]", list(&agentv1.ListProjectsRequest{Statuses: []agentv1.ProjectStatus{99}})},
		{"ListProjects", "statuses[1]", list(&agentv1.ListProjectsRequest{Statuses: []agentv1.ProjectStatus{planned, 0}})},
		{"ListProjects", "page_size", list(&agentv1.ListProjectsRequest{PageSize: 201})},
		{"ListProjects", "page_size", list(&agentv1.ListProjectsRequest{PageSize: -1})},
		{"ListProjects", "page_token", list(&agentv1.ListProjectsRequest{PageToken: "garbage"})},
		{"CancelProject", "id", func() error { _, err := e.projects.CancelProject(ctx, &agentv1.CancelProjectRequest{}); return err }},
		{"CancelProject", "reason", func() error {
			_, err := e.projects.CancelProject(ctx, &agentv1.CancelProjectRequest{Id: missing, Reason: long})
			return err
		}},
		{"WatchProject", "id", watch(&agentv1.WatchProjectRequest{Id: "x"})},
		{"WatchProject", "after_id", watch(&agentv1.WatchProjectRequest{Id: missing, AfterId: -1})},
		{"StartProject", "id", start(&agentv1.StartProjectRequest{})},
		{"StartProject", "id", start(&agentv1.StartProjectRequest{Id: "x"})},
		{"StartProject", "request_id", start(&agentv1.StartProjectRequest{Id: missing, RequestId: "has space"})},
		{"StartProject", "request_id", start(&agentv1.StartProjectRequest{Id: missing, RequestId: strings.Repeat("r", 200)})},
		{"StartProject", "budget.max_tokens", start(&agentv1.StartProjectRequest{Id: missing, Budget: &typev1.Budget{MaxTokens: -1}})},
		{"StartProject", "budget.max_cost_micros", start(&agentv1.StartProjectRequest{Id: missing, Budget: &typev1.Budget{MaxCostMicros: -1}})},
		{"StartProject", "model", start(&agentv1.StartProjectRequest{Id: missing, Model: strings.Repeat("m", 201)})},
		{"PauseProject", "id", pause(&agentv1.PauseProjectRequest{})},
		{"PauseProject", "id", pause(&agentv1.PauseProjectRequest{Id: "x"})},
		{"PauseProject", "reason", pause(&agentv1.PauseProjectRequest{Id: missing, Reason: long})},
		{"ResumeProject", "id", resume(&agentv1.ResumeProjectRequest{})},
		{"ResumeProject", "id", resume(&agentv1.ResumeProjectRequest{Id: "x"})},
		{"ResumeProject", "budget.max_cost_micros", resume(&agentv1.ResumeProjectRequest{Id: missing, Budget: &typev1.Budget{MaxCostMicros: -1}})},
		{"ResumeProject", "budget.max_tokens", resume(&agentv1.ResumeProjectRequest{Id: missing, Budget: &typev1.Budget{MaxTokens: -5}})},
		{"SkipProjectTask", "project_id", skip(&agentv1.SkipProjectTaskRequest{ProjectTaskId: "t1"})},
		{"SkipProjectTask", "project_id", skip(&agentv1.SkipProjectTaskRequest{ProjectId: "x", ProjectTaskId: "t1"})},
		{"SkipProjectTask", "project_task_id", skip(&agentv1.SkipProjectTaskRequest{ProjectId: missing})},
		{"SkipProjectTask", "project_task_id", skip(&agentv1.SkipProjectTaskRequest{ProjectId: missing, ProjectTaskId: " \t"})},
		{"SkipProjectTask", "project_task_id", skip(&agentv1.SkipProjectTaskRequest{ProjectId: missing, ProjectTaskId: longID})},
		{"SkipProjectTask", "reason", skip(&agentv1.SkipProjectTaskRequest{ProjectId: missing, ProjectTaskId: "t1", Reason: long})},
		{"ResolveProjectTask", "project_id", resolve(&agentv1.ResolveProjectTaskRequest{ProjectTaskId: "t1", Note: "done"})},
		{"ResolveProjectTask", "project_task_id", resolve(&agentv1.ResolveProjectTaskRequest{ProjectId: missing, Note: "done"})},
		{"ResolveProjectTask", "project_task_id", resolve(&agentv1.ResolveProjectTaskRequest{ProjectId: missing, ProjectTaskId: longID, Note: "done"})},
		{"ResolveProjectTask", "note", resolve(&agentv1.ResolveProjectTaskRequest{ProjectId: missing, ProjectTaskId: "t1"})},
		{"ResolveProjectTask", "note", resolve(&agentv1.ResolveProjectTaskRequest{ProjectId: missing, ProjectTaskId: "t1", Note: " \n "})},
		{"ResolveProjectTask", "note", resolve(&agentv1.ResolveProjectTaskRequest{ProjectId: missing, ProjectTaskId: "t1", Note: long})},
		{"RetryProjectTask", "project_id", retry(&agentv1.RetryProjectTaskRequest{ProjectId: "x", ProjectTaskId: "t1"})},
		{"RetryProjectTask", "project_task_id", retry(&agentv1.RetryProjectTaskRequest{ProjectId: missing})},
		{"RetryProjectTask", "project_task_id", retry(&agentv1.RetryProjectTaskRequest{ProjectId: missing, ProjectTaskId: longID})},
		{"RetryProjectTask", "guidance", retry(&agentv1.RetryProjectTaskRequest{ProjectId: missing, ProjectTaskId: "t1", Guidance: long})},
		{"RetryProjectTask", "request_id", retry(&agentv1.RetryProjectTaskRequest{ProjectId: missing, ProjectTaskId: "t1", RequestId: "has space"})},
		{"RetryProjectTask", "request_id", retry(&agentv1.RetryProjectTaskRequest{ProjectId: missing, ProjectTaskId: "t1", RequestId: strings.Repeat("r", 200)})},
	}
	covered := map[string]bool{}
	for _, c := range cases {
		t.Run(c.method+"/"+c.field, func(t *testing.T) {
			grpctest.WantInvalid(t, c.call(), c.field)
		})
		covered[c.method] = true
	}
	sd := agentv1.ProjectService_ServiceDesc
	for _, m := range sd.Methods {
		if !covered[m.MethodName] {
			t.Errorf("%s.%s has no malformed-input case", sd.ServiceName, m.MethodName)
		}
	}
	for _, m := range sd.Streams {
		if !covered[m.StreamName] {
			t.Errorf("%s.%s has no malformed-input case", sd.ServiceName, m.StreamName)
		}
	}
	// A ListJobs token is not a ListProjects token.
	e.seed(t, alice, "local/r")
	e.seed(t, alice, "local/r")
	jobs := agentv1.NewAgentServiceClient(e.conn)
	if _, _, err := e.st.Create(context.Background(), &agentv1.Job{OwnerId: alice, TaskId: taskA, Repo: "local/r"}, "", nil, store.RateLimit{}, e.q.Enqueue); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.st.Create(context.Background(), &agentv1.Job{OwnerId: alice, TaskId: missing, Repo: "local/r"}, "", nil, store.RateLimit{}, e.q.Enqueue); err != nil {
		t.Fatal(err)
	}
	page, err := jobs.ListJobs(ctx, &agentv1.ListJobsRequest{PageSize: 1})
	if err != nil || page.NextPageToken == "" {
		t.Fatalf("list jobs: %v, %v", page, err)
	}
	_, err = e.projects.ListProjects(ctx, &agentv1.ListProjectsRequest{PageToken: page.NextPageToken})
	grpctest.WantInvalid(t, err, "page_token")
}

// Every ProjectService RPC refuses a caller without a token, before anything else.
func TestProjectRPCsNeedAToken(t *testing.T) {
	e := newProjEnv(t)
	p := e.seed(t, alice, "local/r")
	anon := context.Background()
	calls := map[string]func() error{
		"PlanProject": func() error {
			_, err := e.projects.PlanProject(anon, &agentv1.PlanProjectRequest{Repo: "local/r", Request: "build"})
			return err
		},
		"UpdateProject": func() error {
			_, err := e.projects.UpdateProject(anon, &agentv1.UpdateProjectRequest{Id: p.Id, Project: &agentv1.Project{Description: "x"},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"description"}}})
			return err
		},
		"GetProject": func() error { _, err := e.projects.GetProject(anon, &agentv1.GetProjectRequest{Id: p.Id}); return err },
		"ListProjects": func() error {
			_, err := e.projects.ListProjects(anon, &agentv1.ListProjectsRequest{})
			return err
		},
		"CancelProject": func() error {
			_, err := e.projects.CancelProject(anon, &agentv1.CancelProjectRequest{Id: p.Id})
			return err
		},
		"WatchProject": func() error {
			s, err := e.projects.WatchProject(anon, &agentv1.WatchProjectRequest{Id: p.Id})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) { grpctest.WantCode(t, call(), codes.Unauthenticated) })
	}
	// The others too, whatever the request (an empty one here).
	grpctest.CallEveryMethod(t, anon, e.conn, agentv1.ProjectService_ServiceDesc, codes.Unauthenticated)
	if got := e.get(t, alice, p.Id); got.Etag != "1" || got.Status != planned {
		t.Errorf("an anonymous call changed the project: %v", got)
	}
}

func TestAnotherUsersProjectIsNotFound(t *testing.T) {
	e := newProjEnv(t)
	p := e.seed(t, alice, "local/r")
	bobs := e.ctx(bob)
	_, err := e.projects.GetProject(bobs, &agentv1.GetProjectRequest{Id: p.Id})
	grpctest.WantCode(t, err, codes.NotFound)
	_, err = e.projects.UpdateProject(bobs, &agentv1.UpdateProjectRequest{Id: p.Id, Project: &agentv1.Project{Description: "mine"},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"description"}}})
	grpctest.WantCode(t, err, codes.NotFound)
	_, err = e.projects.CancelProject(bobs, &agentv1.CancelProjectRequest{Id: p.Id})
	grpctest.WantCode(t, err, codes.NotFound)
	s, err := e.projects.WatchProject(bobs, &agentv1.WatchProjectRequest{Id: p.Id})
	if err == nil {
		_, err = s.Recv()
	}
	grpctest.WantCode(t, err, codes.NotFound)
	list, err := e.projects.ListProjects(bobs, &agentv1.ListProjectsRequest{})
	if err != nil || len(list.Projects) != 0 {
		t.Fatalf("bob lists %v, %v", list, err)
	}
	_, err = e.projects.GetProject(e.ctx(alice), &agentv1.GetProjectRequest{Id: missing})
	grpctest.WantCode(t, err, codes.NotFound)
	// Alice sees it as it was stored, untouched by bob.
	if got := e.get(t, alice, p.Id); !proto.Equal(got, p) {
		t.Errorf("alice gets %v, want %v", got, p)
	}
}

func TestListProjectsPagesThroughFilters(t *testing.T) {
	e := newProjEnv(t)
	ctx := e.ctx(alice)
	p1 := e.seed(t, alice, "local/r")
	p2 := e.seed(t, alice, "local/other")
	b1 := e.seed(t, bob, "local/r")
	p3 := e.seed(t, alice, "local/r")
	if _, err := e.projects.CancelProject(ctx, &agentv1.CancelProjectRequest{Id: p2.Id}); err != nil {
		t.Fatal(err)
	}
	page := func(user string, req *agentv1.ListProjectsRequest) []string {
		t.Helper()
		var got []string
		req.PageSize = 1
		for i := 0; ; i++ {
			resp, err := e.projects.ListProjects(e.ctx(user), req)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Projects) > 1 {
				t.Fatalf("page of %d projects, asked for 1", len(resp.Projects))
			}
			for _, p := range resp.Projects {
				if p.OwnerId != user || p.Etag == "" || len(p.Phases) != 2 {
					t.Errorf("listed %v", p)
				}
				got = append(got, p.Id)
			}
			if resp.NextPageToken == "" {
				return got
			}
			if i > 10 {
				t.Fatal("paging does not end")
			}
			req.PageToken = resp.NextPageToken
		}
	}
	cases := []struct {
		name string
		user string
		req  *agentv1.ListProjectsRequest
		want []string
	}{
		{"all of alice's", alice, &agentv1.ListProjectsRequest{}, []string{p3.Id, p2.Id, p1.Id}},
		{"planned", alice, &agentv1.ListProjectsRequest{Statuses: []agentv1.ProjectStatus{planned}}, []string{p3.Id, p1.Id}},
		{"cancelled", alice, &agentv1.ListProjectsRequest{Statuses: []agentv1.ProjectStatus{cancelled}}, []string{p2.Id}},
		{"planned or cancelled in local/other", alice, &agentv1.ListProjectsRequest{Repo: "local/other", Statuses: []agentv1.ProjectStatus{planned, cancelled}}, []string{p2.Id}},
		{"running", alice, &agentv1.ListProjectsRequest{Statuses: []agentv1.ProjectStatus{agentv1.ProjectStatus_PROJECT_STATUS_RUNNING}}, nil},
		{"bob's", bob, &agentv1.ListProjectsRequest{}, []string{b1.Id}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := page(c.user, c.req); !slices.Equal(got, c.want) {
				t.Errorf("got %v, want %v", got, c.want)
			}
		})
	}
	// One page of everything, at the default size.
	all, err := e.projects.ListProjects(ctx, &agentv1.ListProjectsRequest{})
	if err != nil || len(all.Projects) != 3 || all.NextPageToken != "" {
		t.Fatalf("default page: %v, %v", all, err)
	}
}

func TestUpdateProjectEditsAPlannedProject(t *testing.T) {
	e := newProjEnv(t)
	ctx := e.ctx(alice)
	p := e.seed(t, alice, "local/r")
	t1, t2, t3, t4 := p.Phases[0].Tasks[0], p.Phases[0].Tasks[1], p.Phases[1].Tasks[0], p.Phases[1].Tasks[1]
	mask := func(paths ...string) *fieldmaskpb.FieldMask { return &fieldmaskpb.FieldMask{Paths: paths} }

	// t4 removed, t3 now waits for t2 too; with the current etag, and the description.
	edited := []*agentv1.ProjectPhase{
		{Name: "base", Tasks: []*agentv1.ProjectTask{{Id: t1.Id, Title: t1.Title}, {Id: t2.Id, Title: t2.Title}}},
		{Name: "top", Tasks: []*agentv1.ProjectTask{{Id: t3.Id, Title: "api, both", DependsOn: []string{t1.Id, t2.Id}}}},
	}
	r, err := e.projects.UpdateProject(ctx, &agentv1.UpdateProjectRequest{Id: p.Id,
		Project:    &agentv1.Project{Id: p.Id, Etag: p.Etag, Description: "edited", Conventions: "ignored: not in the mask", Phases: edited},
		UpdateMask: mask("phases", "description")})
	if err != nil {
		t.Fatal(err)
	}
	got := e.get(t, alice, p.Id)
	if !proto.Equal(got, r.Project) {
		t.Errorf("read back %v, answered %v", got, r.Project)
	}
	if got.Etag == p.Etag || got.Description != "edited" || got.Conventions != "" || got.Status != planned {
		t.Errorf("after the edit: etag %q (was %q), description %q, conventions %q, status %v", got.Etag, p.Etag, got.Description, got.Conventions, got.Status)
	}
	if len(got.Phases) != 2 || len(got.Phases[0].Tasks) != 2 || len(got.Phases[1].Tasks) != 1 {
		t.Fatalf("phases %v", got.Phases)
	}
	if g := got.Phases[0].Tasks[0]; g.Id != t1.Id || g.TaskId != taskA {
		t.Errorf("t1 lost its task: %v", g)
	}
	if g := got.Phases[1].Tasks[0]; g.Id != t3.Id || g.Title != "api, both" || !slices.Equal(g.DependsOn, []string{t1.Id, t2.Id}) {
		t.Errorf("t3 %v", g)
	}
	for _, ph := range got.Phases {
		for _, tk := range ph.Tasks {
			if tk.Id == t4.Id {
				t.Errorf("t4 was removed but is still in phase %d", ph.Number)
			}
		}
	}

	// An edit made on the first version is refused and changes nothing.
	_, err = e.projects.UpdateProject(ctx, &agentv1.UpdateProjectRequest{Id: p.Id,
		Project: &agentv1.Project{Etag: p.Etag, Description: "lost"}, UpdateMask: mask("description")})
	grpctest.WantCode(t, err, codes.Aborted, p.Etag, got.Etag)
	if now := e.get(t, alice, p.Id); !proto.Equal(now, got) {
		t.Errorf("a stale edit changed the project: %v", now)
	}

	// A cycle is refused, named, with the field under project.
	_, err = e.projects.UpdateProject(ctx, &agentv1.UpdateProjectRequest{Id: p.Id, Project: &agentv1.Project{Phases: []*agentv1.ProjectPhase{
		{Tasks: []*agentv1.ProjectTask{{Id: t1.Id, Title: "a", DependsOn: []string{t2.Id}}, {Id: t2.Id, Title: "b", DependsOn: []string{t1.Id}}}},
	}}, UpdateMask: mask("phases")})
	grpctest.WantInvalid(t, err, "project.phases")
	grpctest.WantCode(t, err, codes.InvalidArgument, "cycle", t1.Id+" → "+t2.Id+" → "+t1.Id)
	// So is a dependency on a task not in the new plan.
	_, err = e.projects.UpdateProject(ctx, &agentv1.UpdateProjectRequest{Id: p.Id, Project: &agentv1.Project{Phases: []*agentv1.ProjectPhase{
		{Tasks: []*agentv1.ProjectTask{{Id: t1.Id, Title: "a"}}}, {Tasks: []*agentv1.ProjectTask{{Title: "new", DependsOn: []string{t1.Id, t4.Id}}}},
	}}, UpdateMask: mask("phases")})
	grpctest.WantInvalid(t, err, "project.phases[1].tasks[0].depends_on[1]")
	if now := e.get(t, alice, p.Id); !proto.Equal(now, got) {
		t.Errorf("a refused edit changed the project: %v", now)
	}

	// Mode and budget, without an etag.
	r, err = e.projects.UpdateProject(ctx, &agentv1.UpdateProjectRequest{Id: p.Id, Project: &agentv1.Project{
		Mode: agentv1.ProjectMode_PROJECT_MODE_SESSION, Budget: &typev1.Budget{MaxTokens: 5000}}, UpdateMask: mask("mode", "budget")})
	if err != nil || r.Project.Mode != agentv1.ProjectMode_PROJECT_MODE_SESSION || r.Project.Budget.GetMaxTokens() != 5000 || r.Project.Description != "edited" {
		t.Fatalf("mode and budget: %v, %v", r, err)
	}

	// Once it is no longer PLANNED, it cannot be edited.
	if _, err := e.projects.CancelProject(ctx, &agentv1.CancelProjectRequest{Id: p.Id}); err != nil {
		t.Fatal(err)
	}
	_, err = e.projects.UpdateProject(ctx, &agentv1.UpdateProjectRequest{Id: p.Id, Project: &agentv1.Project{Description: "late"}, UpdateMask: mask("description")})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "cancelled", "planned")
}

func TestCancelProjectSkipsItsTasks(t *testing.T) {
	e := newProjEnv(t)
	ctx := e.ctx(alice)
	p := e.seed(t, alice, "local/r")
	r, err := e.projects.CancelProject(ctx, &agentv1.CancelProjectRequest{Id: p.Id, Reason: "not now"})
	if err != nil {
		t.Fatal(err)
	}
	got := e.get(t, alice, p.Id)
	if !proto.Equal(got, r.Project) {
		t.Errorf("read back %v, answered %v", got, r.Project)
	}
	if got.Status != cancelled || got.StatusReason != "not now" || got.EndTime == nil || got.Etag == p.Etag {
		t.Errorf("cancelled project: status %v, reason %q, end %v, etag %q", got.Status, got.StatusReason, got.EndTime, got.Etag)
	}
	for _, ph := range got.Phases {
		for _, tk := range ph.Tasks {
			if tk.Status != skipped || !strings.Contains(tk.StatusReason, "not now") {
				t.Errorf("task %s: %v %q", tk.Id, tk.Status, tk.StatusReason)
			}
		}
	}
	_, err = e.projects.CancelProject(ctx, &agentv1.CancelProjectRequest{Id: p.Id})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "cancelled")
	if now := e.get(t, alice, p.Id); !proto.Equal(now, got) {
		t.Errorf("the second cancel changed the project: %v", now)
	}
	_, err = e.projects.CancelProject(ctx, &agentv1.CancelProjectRequest{Id: missing})
	grpctest.WantCode(t, err, codes.NotFound)
}

// The watch of one project: its own events and its task jobs' events (relayed), live and
// replayed, ending after the project ends.
func TestWatchProjectRelaysItsJobsAndEnds(t *testing.T) {
	e := newProjEnv(t)
	ctx, cancel := context.WithTimeout(e.ctx(alice), 30*time.Second)
	defer cancel()
	p := e.seed(t, alice, "local/r")
	other := e.seed(t, alice, "local/r")
	t1 := p.Phases[0].Tasks[0]

	s, err := e.projects.WatchProject(ctx, &agentv1.WatchProjectRequest{Id: p.Id})
	if err != nil {
		t.Fatal(err)
	}
	// The opening heartbeat: the watch is set up, what follows is live.
	if first, err := s.Recv(); err != nil || first.GetHeartbeat() == nil || first.GetHeartbeat().End {
		t.Fatalf("first message %v, %v", first, err)
	}
	if _, err := e.projects.UpdateProject(ctx, &agentv1.UpdateProjectRequest{Id: p.Id, Project: &agentv1.Project{Description: "edited"},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"description"}}}); err != nil {
		t.Fatal(err)
	}
	// A job of t1 (task taskA) of this project; jobs of another project and of none are
	// not this project's.
	create := func(task, projectID string) *agentv1.Job {
		t.Helper()
		rec, _, err := e.st.Create(context.Background(), &agentv1.Job{OwnerId: alice, TaskId: task, ProjectId: projectID, Repo: "local/r", BaseBranch: "main"},
			"", nil, store.RateLimit{}, e.q.Enqueue)
		if err != nil {
			t.Fatal(err)
		}
		return rec.Job
	}
	job := create(taskA, p.Id)
	create("22222222-2222-4222-8222-222222222222", other.Id)
	create("33333333-3333-4333-8333-333333333333", "")
	if _, err := e.projects.CancelProject(ctx, &agentv1.CancelProjectRequest{Id: p.Id, Reason: "done here"}); err != nil {
		t.Fatal(err)
	}
	live := watchAll(t, s)

	check := func(t *testing.T, msgs []*agentv1.WatchProjectResponse) {
		t.Helper()
		want := []agentv1.ProjectEventType{agentv1.ProjectEventType_PROJECT_EVENT_TYPE_CREATED, agentv1.ProjectEventType_PROJECT_EVENT_TYPE_UPDATED,
			agentv1.ProjectEventType_PROJECT_EVENT_TYPE_JOB_EVENT}
		for range 4 {
			want = append(want, agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_SKIPPED)
		}
		want = append(want, agentv1.ProjectEventType_PROJECT_EVENT_TYPE_STATUS_CHANGED)
		if got := types(msgs); !slices.Equal(got, want) {
			t.Fatalf("event types %v, want %v", got, want)
		}
		last := msgs[len(msgs)-1]
		if !last.GetHeartbeat().GetEnd() {
			t.Errorf("the stream ends with %v, want a heartbeat with end set", last)
		}
		var prev int64
		for _, m := range msgs {
			if m.GetHeartbeat() != nil {
				continue
			}
			if m.ProjectId != p.Id || m.Id <= prev || m.Time == nil {
				t.Errorf("event %v: project %q, id %d after %d", m.Type, m.ProjectId, m.Id, prev)
			}
			prev = m.Id
			switch m.Type {
			case agentv1.ProjectEventType_PROJECT_EVENT_TYPE_CREATED:
				if c := m.GetCreated(); c.GetId() != p.Id || c.TaskCount != 4 || c.PhaseCount != 2 || c.Status != planned {
					t.Errorf("created %v", c)
				}
			case agentv1.ProjectEventType_PROJECT_EVENT_TYPE_UPDATED:
				if u := m.GetUpdated(); !slices.Equal(u.GetUpdateMask().GetPaths(), []string{"description"}) || u.GetProject().GetDescription() != "edited" {
					t.Errorf("updated %v", u)
				}
			case agentv1.ProjectEventType_PROJECT_EVENT_TYPE_JOB_EVENT:
				je := m.GetJobEvent()
				if je.GetProjectTaskId() != t1.Id || je.GetEvent().GetJobId() != job.Id ||
					je.GetEvent().GetType() != agentv1.JobEventType_JOB_EVENT_TYPE_CREATED || je.GetEvent().GetCreated().GetProjectId() != p.Id {
					t.Errorf("relayed %v, want job %s's CREATED for project task %s", je, job.Id, t1.Id)
				}
			case agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_SKIPPED:
				if tc := m.GetTask(); tc.Status != skipped || !strings.Contains(tc.Reason, "done here") {
					t.Errorf("task skipped %v", tc)
				}
			case agentv1.ProjectEventType_PROJECT_EVENT_TYPE_STATUS_CHANGED:
				if sc := m.GetStatusChange(); sc.PreviousStatus != planned || sc.Status != cancelled || sc.Reason != "done here" {
					t.Errorf("status change %v", sc)
				}
			}
		}
	}
	t.Run("live", func(t *testing.T) { check(t, live) })

	// The same story replayed from the start of the finished project.
	s, err = e.projects.WatchProject(ctx, &agentv1.WatchProjectRequest{Id: p.Id, AfterId: 0})
	if err != nil {
		t.Fatal(err)
	}
	replay := watchAll(t, s)
	t.Run("replay", func(t *testing.T) { check(t, replay) })

	// From now on a finished project: a heartbeat and the end.
	s, err = e.projects.WatchProject(ctx, &agentv1.WatchProjectRequest{Id: p.Id, FromNow: true})
	if err != nil {
		t.Fatal(err)
	}
	if past := watchAll(t, s); len(past) != 2 || past[0].GetHeartbeat() == nil || !past[1].GetHeartbeat().GetEnd() {
		t.Errorf("watch past the end = %v", past)
	}
}

// The watch of all the caller's projects carries their own events only: no other user's,
// no job's.
func TestWatchAllProjects(t *testing.T) {
	e := newProjEnv(t)
	ctx, cancel := context.WithTimeout(e.ctx(alice), 30*time.Second)
	defer cancel()
	a1 := e.seed(t, alice, "local/r")
	e.seed(t, bob, "local/r")
	if _, _, err := e.st.Create(context.Background(), &agentv1.Job{OwnerId: alice, TaskId: taskA, ProjectId: a1.Id, Repo: "local/r"},
		"", nil, store.RateLimit{}, e.q.Enqueue); err != nil {
		t.Fatal(err)
	}
	a2 := e.seed(t, alice, "local/r")
	s, err := e.projects.WatchProject(ctx, &agentv1.WatchProjectRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for {
		m, err := s.Recv()
		if err != nil {
			t.Fatalf("after %v: %v", got, err)
		}
		if m.GetHeartbeat() != nil {
			continue
		}
		got = append(got, m.Type.String()+" "+m.ProjectId)
		if m.ProjectId == a2.Id {
			break
		}
	}
	want := []string{"PROJECT_EVENT_TYPE_CREATED " + a1.Id, "PROJECT_EVENT_TYPE_CREATED " + a2.Id}
	if !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	cancel()
	if _, err := s.Recv(); err == nil || errors.Is(err, io.EOF) {
		t.Errorf("the watch of all projects ended by itself: %v", err)
	}
}

// A UUID is the same id in either case: GetProject takes the upper-case spelling, and so
// must UpdateProject when id and project.id both carry it (today id is made lower-case
// before the comparison and project.id is not, so the same id is "not equal").
func TestUpdateProjectIDInUpperCase(t *testing.T) {
	e := newProjEnv(t)
	ctx := e.ctx(alice)
	p := e.seed(t, alice, "local/r")
	upper := strings.ToUpper(p.Id)
	if got := e.get(t, alice, upper); got.Id != p.Id {
		t.Fatalf("get by %s: %v", upper, got)
	}
	r, err := e.projects.UpdateProject(ctx, &agentv1.UpdateProjectRequest{Id: upper, Project: &agentv1.Project{Id: upper, Description: "same id"},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"description"}}})
	if err != nil || r.Project.Description != "same id" {
		t.Fatalf("update with id and project.id both %s: %v, %v", upper, r, err)
	}
}

// --- The controls of a project that runs ------------------------------------------------------

const (
	running   = agentv1.ProjectStatus_PROJECT_STATUS_RUNNING
	paused    = agentv1.ProjectStatus_PROJECT_STATUS_PAUSED
	pending   = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_PENDING
	failed    = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_FAILED
	completed = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_COMPLETED
)

// seedLocal stores a PLANNED project of owner whose tasks have no task_id, so that no
// control on them reaches the tasks service (the env has none): phase 1 has schema and
// config, phase 2 api (after schema) and docs (after config), phase 3 cli (after api) and
// extra. Its budget is 1000 tokens and 500 micro-dollars.
func (e *projEnv) seedLocal(t *testing.T, owner string) *agentv1.Project {
	t.Helper()
	task := func(title string, deps ...*agentv1.ProjectTask) *agentv1.ProjectTask {
		pt := &agentv1.ProjectTask{Id: uuid.NewString(), Title: title, Status: pending}
		for _, d := range deps {
			pt.DependsOn = append(pt.DependsOn, d.Id)
		}
		return pt
	}
	schema, config := task("schema"), task("config")
	api, docs := task("api", schema), task("docs", config)
	cli, extra := task("cli", api), task("extra")
	p, created, err := e.st.CreateProject(context.Background(), &agentv1.Project{OwnerId: owner, Repo: "local/r", Request: "build it", Description: "it",
		Status: planned, Mode: agentv1.ProjectMode_PROJECT_MODE_REVIEW, BaseBranch: "main", Budget: &typev1.Budget{MaxTokens: 1000, MaxCostMicros: 500},
		Phases: []*agentv1.ProjectPhase{
			{Number: 1, Name: "base", Tasks: []*agentv1.ProjectTask{schema, config}},
			{Number: 2, Name: "middle", Tasks: []*agentv1.ProjectTask{api, docs}},
			{Number: 3, Name: "top", Tasks: []*agentv1.ProjectTask{cli, extra}},
		}}, "", nil)
	if err != nil || !created {
		t.Fatalf("create project: %v (created %v)", err, created)
	}
	return p
}

// change applies f to project id as its runner would (any owner, no events), with after
// (may be nil) in the same transaction. The env has no project queue: nothing runs the
// project, whatever its status.
func (e *projEnv) change(t *testing.T, id string, f func(rec *store.ProjectRecord),
	after func(ctx context.Context, tx pgx.Tx, rec *store.ProjectRecord) error) *agentv1.Project {
	t.Helper()
	rec, err := e.st.ChangeProject(context.Background(), "", id, func(rec *store.ProjectRecord) ([]*agentv1.WatchProjectResponse, error) {
		f(rec)
		return nil, nil
	}, after)
	if err != nil {
		t.Fatalf("change project %s: %v", id, err)
	}
	return rec.Project
}

// ptask is p's task titled title.
func ptask(t *testing.T, p *agentv1.Project, title string) *agentv1.ProjectTask {
	t.Helper()
	for _, ph := range p.Phases {
		for _, pt := range ph.Tasks {
			if pt.Title == title {
				return pt
			}
		}
	}
	t.Fatalf("project %s has no task %q", p.Id, title)
	return nil
}

// failedBecause is the reason the runner skips a task whose dependency dep failed (or was
// skipped for that).
func failedBecause(dep *agentv1.ProjectTask) string {
	return fmt.Sprintf("depends on %q (%s), which failed", dep.Title, dep.Id)
}

// seedFailed is a RUNNING project of owner as the runner leaves it after schema failed:
// config done, api skipped because schema failed, cli because api was, extra skipped by a
// person; docs still to run.
func (e *projEnv) seedFailed(t *testing.T, owner string) *agentv1.Project {
	t.Helper()
	p := e.seedLocal(t, owner)
	return e.change(t, p.Id, func(rec *store.ProjectRecord) {
		pr := rec.Project
		pr.Status, pr.StatusReason, pr.StartTime = running, "started", timestamppb.Now()
		schema, api := ptask(t, pr, "schema"), ptask(t, pr, "api")
		schema.Status, schema.Error = failed, "tests fail"
		ptask(t, pr, "config").Status = completed
		api.Status, api.StatusReason = skipped, failedBecause(schema)
		cli := ptask(t, pr, "cli")
		cli.Status, cli.StatusReason = skipped, failedBecause(api)
		extra := ptask(t, pr, "extra")
		extra.Status, extra.StatusReason = skipped, "not needed"
	}, nil)
}

// taskStates are p's tasks' "status: reason" by title.
func taskStates(p *agentv1.Project) map[string]string {
	out := map[string]string{}
	for _, ph := range p.Phases {
		for _, pt := range ph.Tasks {
			out[pt.Title] = strings.ToLower(strings.TrimPrefix(pt.Status.String(), "PROJECT_TASK_STATUS_")) + ": " + pt.StatusReason
		}
	}
	return out
}

func wantStates(t *testing.T, p *agentv1.Project, want map[string]string) {
	t.Helper()
	if got := taskStates(p); !maps.Equal(got, want) {
		t.Errorf("task states:\n got %v\nwant %v", got, want)
	}
}

// Each control names the project or task it could not find, for another user's project
// and for a task not in the caller's.
func TestProjectControlsOnAnotherUsersProjectAreNotFound(t *testing.T) {
	e := newProjEnv(t)
	p := e.seedFailed(t, alice)
	schema := ptask(t, p, "schema").Id
	calls := func(ctx context.Context, pid, tid string) map[string]func() error {
		return map[string]func() error{
			"StartProject": func() error {
				_, err := e.projects.StartProject(ctx, &agentv1.StartProjectRequest{Id: pid})
				return err
			},
			"PauseProject": func() error {
				_, err := e.projects.PauseProject(ctx, &agentv1.PauseProjectRequest{Id: pid})
				return err
			},
			"ResumeProject": func() error {
				_, err := e.projects.ResumeProject(ctx, &agentv1.ResumeProjectRequest{Id: pid})
				return err
			},
			"SkipProjectTask": func() error {
				_, err := e.projects.SkipProjectTask(ctx, &agentv1.SkipProjectTaskRequest{ProjectId: pid, ProjectTaskId: tid})
				return err
			},
			"ResolveProjectTask": func() error {
				_, err := e.projects.ResolveProjectTask(ctx, &agentv1.ResolveProjectTaskRequest{ProjectId: pid, ProjectTaskId: tid, Note: "done"})
				return err
			},
			"RetryProjectTask": func() error {
				_, err := e.projects.RetryProjectTask(ctx, &agentv1.RetryProjectTaskRequest{ProjectId: pid, ProjectTaskId: tid, RequestId: "r1"})
				return err
			},
		}
	}
	for name, call := range calls(e.ctx(bob), p.Id, schema) {
		t.Run("bob/"+name, func(t *testing.T) { grpctest.WantCode(t, call(), codes.NotFound, p.Id) })
	}
	for name, call := range calls(e.ctx(alice), missing, schema) {
		t.Run("no such project/"+name, func(t *testing.T) { grpctest.WantCode(t, call(), codes.NotFound, missing) })
	}
	// A task id that is not one of the project's.
	for name, call := range calls(e.ctx(alice), p.Id, "no-such-task") {
		if strings.HasSuffix(name, "Task") {
			t.Run("no such task/"+name, func(t *testing.T) { grpctest.WantCode(t, call(), codes.NotFound, "no-such-task") })
		}
	}
	if got := e.get(t, alice, p.Id); !proto.Equal(got, p) {
		t.Errorf("refused controls changed the project: %v", got)
	}
}

// A control asked of a project (or task) in the wrong state is FAILED_PRECONDITION naming
// the state it is in and the ones it needs, and changes nothing.
func TestProjectControlsCheckTheStatus(t *testing.T) {
	e := newProjEnv(t)
	ctx := e.ctx(alice)
	plannedP := e.seedLocal(t, alice)
	cancelledP := e.seedLocal(t, alice)
	if _, err := e.projects.CancelProject(ctx, &agentv1.CancelProjectRequest{Id: cancelledP.Id}); err != nil {
		t.Fatal(err)
	}
	cancelledP = e.get(t, alice, cancelledP.Id)
	schema := ptask(t, plannedP, "schema").Id
	cases := []struct {
		name string
		call func() error
		want []string
	}{
		{"StartProject cancelled", func() error {
			_, err := e.projects.StartProject(ctx, &agentv1.StartProjectRequest{Id: cancelledP.Id})
			return err
		}, []string{"is cancelled", "StartProject", "planned"}},
		{"PauseProject cancelled", func() error {
			_, err := e.projects.PauseProject(ctx, &agentv1.PauseProjectRequest{Id: cancelledP.Id})
			return err
		}, []string{"is cancelled", "PauseProject", "running"}},
		{"ResumeProject cancelled", func() error {
			_, err := e.projects.ResumeProject(ctx, &agentv1.ResumeProjectRequest{Id: cancelledP.Id})
			return err
		}, []string{"is cancelled", "ResumeProject", "paused or human_needed"}},
		{"PauseProject planned", func() error {
			_, err := e.projects.PauseProject(ctx, &agentv1.PauseProjectRequest{Id: plannedP.Id})
			return err
		}, []string{"is planned", "PauseProject", "running"}},
		{"ResumeProject planned", func() error {
			_, err := e.projects.ResumeProject(ctx, &agentv1.ResumeProjectRequest{Id: plannedP.Id})
			return err
		}, []string{"is planned", "ResumeProject", "paused or human_needed"}},
		{"SkipProjectTask planned", func() error {
			_, err := e.projects.SkipProjectTask(ctx, &agentv1.SkipProjectTaskRequest{ProjectId: plannedP.Id, ProjectTaskId: schema})
			return err
		}, []string{"is planned", "SkipProjectTask", "running or paused or human_needed"}},
		{"ResolveProjectTask planned", func() error {
			_, err := e.projects.ResolveProjectTask(ctx, &agentv1.ResolveProjectTaskRequest{ProjectId: plannedP.Id, ProjectTaskId: schema, Note: "done"})
			return err
		}, []string{"is planned", "ResolveProjectTask", "running or paused or human_needed"}},
		{"RetryProjectTask planned", func() error {
			_, err := e.projects.RetryProjectTask(ctx, &agentv1.RetryProjectTaskRequest{ProjectId: plannedP.Id, ProjectTaskId: schema})
			return err
		}, []string{"is planned", "RetryProjectTask", "running or paused or human_needed"}},
		{"SkipProjectTask cancelled", func() error {
			_, err := e.projects.SkipProjectTask(ctx, &agentv1.SkipProjectTaskRequest{ProjectId: cancelledP.Id, ProjectTaskId: ptask(t, cancelledP, "schema").Id})
			return err
		}, []string{"is cancelled", "SkipProjectTask", "running or paused or human_needed"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { grpctest.WantCode(t, c.call(), codes.FailedPrecondition, c.want...) })
	}
	if got := e.get(t, alice, plannedP.Id); !proto.Equal(got, plannedP) {
		t.Errorf("refused controls changed the planned project: %v", got)
	}
	if got := e.get(t, alice, cancelledP.Id); !proto.Equal(got, cancelledP) {
		t.Errorf("refused controls changed the cancelled project: %v", got)
	}
}

// RetryProjectTask puts a failed task back to PENDING with the tasks skipped because it
// failed (directly or not), once per request_id.
func TestRetryProjectTaskRunsItAndItsDependentsAgain(t *testing.T) {
	e := newProjEnv(t)
	ctx := e.ctx(alice)
	p := e.seedFailed(t, alice)
	schema, api, cli := ptask(t, p, "schema"), ptask(t, p, "api"), ptask(t, p, "cli")

	// A pending task has nothing to retry.
	_, err := e.projects.RetryProjectTask(ctx, &agentv1.RetryProjectTaskRequest{ProjectId: p.Id, ProjectTaskId: ptask(t, p, "docs").Id})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "is pending", "failed or skipped")
	// Nor has a completed one.
	_, err = e.projects.RetryProjectTask(ctx, &agentv1.RetryProjectTaskRequest{ProjectId: p.Id, ProjectTaskId: ptask(t, p, "config").Id})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "is completed", "failed or skipped")
	if got := e.get(t, alice, p.Id); !proto.Equal(got, p) {
		t.Fatalf("refused retries changed the project: %v", got)
	}

	req := &agentv1.RetryProjectTaskRequest{ProjectId: p.Id, ProjectTaskId: schema.Id, Guidance: "use the fixture", RequestId: "retry-1"}
	r, err := e.projects.RetryProjectTask(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	got := e.get(t, alice, p.Id)
	if !proto.Equal(got, r.Project) {
		t.Errorf("read back %v, answered %v", got, r.Project)
	}
	if got.Etag == p.Etag || got.Status != running {
		t.Errorf("after the retry: etag %q (was %q), status %v", got.Etag, p.Etag, got.Status)
	}
	wantStates(t, got, map[string]string{"schema": "pending: use the fixture", "config": "completed: ", "api": "pending: ", "docs": "pending: ",
		"cli": "pending: ", "extra": "skipped: not needed"})
	if g := ptask(t, got, "schema"); g.Error != "" {
		t.Errorf("retried task keeps its error %q", g.Error)
	}

	// The same call again changes nothing; the same request_id for another request is refused.
	again, err := e.projects.RetryProjectTask(ctx, req)
	if err != nil || !proto.Equal(again.Project, got) {
		t.Fatalf("the retry's retry: %v, %v; want the project as it was (etag %s)", again, err, got.Etag)
	}
	_, err = e.projects.RetryProjectTask(ctx, &agentv1.RetryProjectTaskRequest{ProjectId: p.Id, ProjectTaskId: schema.Id, Guidance: "other", RequestId: "retry-1"})
	grpctest.WantInvalid(t, err, "request_id")
	_, err = e.projects.RetryProjectTask(ctx, &agentv1.RetryProjectTaskRequest{ProjectId: p.Id, ProjectTaskId: api.Id, Guidance: "use the fixture", RequestId: "retry-1"})
	grpctest.WantInvalid(t, err, "request_id")
	// Without a request_id, the task now pending is not retried again.
	_, err = e.projects.RetryProjectTask(ctx, &agentv1.RetryProjectTaskRequest{ProjectId: p.Id, ProjectTaskId: schema.Id})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "is pending", "failed or skipped")
	if now := e.get(t, alice, p.Id); !proto.Equal(now, got) {
		t.Errorf("refused retries changed the project: %v", now)
	}

	// The events: one TASK_RETRIED per task back to PENDING, and nothing for the calls
	// that changed nothing (the pause after them is the next event).
	if _, err := e.projects.PauseProject(ctx, &agentv1.PauseProjectRequest{Id: p.Id}); err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	s, err := e.projects.WatchProject(wctx, &agentv1.WatchProjectRequest{Id: p.Id})
	if err != nil {
		t.Fatal(err)
	}
	var evs []*agentv1.WatchProjectResponse
	for {
		m, err := s.Recv()
		if err != nil {
			t.Fatalf("watch after %v: %v", types(evs), err)
		}
		if m.GetHeartbeat() != nil {
			continue
		}
		evs = append(evs, m)
		if m.Type == agentv1.ProjectEventType_PROJECT_EVENT_TYPE_STATUS_CHANGED {
			break
		}
	}
	retried := agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_RETRIED
	want := []agentv1.ProjectEventType{agentv1.ProjectEventType_PROJECT_EVENT_TYPE_CREATED, retried, retried, retried,
		agentv1.ProjectEventType_PROJECT_EVENT_TYPE_STATUS_CHANGED}
	if got := types(evs); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	var ids []string
	for _, ev := range evs[1:4] {
		tc := ev.GetTask()
		if tc.GetStatus() != pending {
			t.Errorf("retried event %v", tc)
		}
		ids = append(ids, tc.GetProjectTaskId())
	}
	if wantIDs := []string{api.Id, cli.Id, schema.Id}; !slices.Equal(ids, wantIDs) {
		t.Errorf("retried tasks %v, want api, cli, schema %v", ids, wantIDs)
	}
	if sc := evs[4].GetStatusChange(); sc.PreviousStatus != running || sc.Status != paused {
		t.Errorf("status change %v", sc)
	}
}

// ResolveProjectTask marks a task done by hand (its note the reason); SkipProjectTask gives
// one up. Neither reaches the tasks service for a task it has not.
func TestResolveAndSkipProjectTasks(t *testing.T) {
	e := newProjEnv(t)
	ctx := e.ctx(alice)
	p := e.seedFailed(t, alice)
	schema, docs := ptask(t, p, "schema"), ptask(t, p, "docs")

	r, err := e.projects.ResolveProjectTask(ctx, &agentv1.ResolveProjectTaskRequest{ProjectId: p.Id, ProjectTaskId: schema.Id, Note: "  fixed the migration by hand \n"})
	if err != nil {
		t.Fatal(err)
	}
	got := e.get(t, alice, p.Id)
	if !proto.Equal(got, r.Project) {
		t.Errorf("read back %v, answered %v", got, r.Project)
	}
	if got.Status != running || got.Etag == p.Etag {
		t.Errorf("after resolve: status %v, etag %q (was %q)", got.Status, got.Etag, p.Etag)
	}
	// Its dependents, skipped because it failed, can run now.
	wantStates(t, got, map[string]string{"schema": "completed: fixed the migration by hand", "config": "completed: ", "api": "pending: ", "docs": "pending: ",
		"cli": "pending: ", "extra": "skipped: not needed"})
	if g := ptask(t, got, "schema"); g.Error != "" {
		t.Errorf("resolved task keeps its error %q", g.Error)
	}
	// A completed task is not resolved (nor skipped) again.
	_, err = e.projects.ResolveProjectTask(ctx, &agentv1.ResolveProjectTaskRequest{ProjectId: p.Id, ProjectTaskId: schema.Id, Note: "again"})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "is completed", "ResolveProjectTask", "pending or failed")
	_, err = e.projects.SkipProjectTask(ctx, &agentv1.SkipProjectTaskRequest{ProjectId: p.Id, ProjectTaskId: schema.Id})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "is completed", "SkipProjectTask", "pending or failed")

	// A pending task skipped, with a reason and without.
	s, err := e.projects.SkipProjectTask(ctx, &agentv1.SkipProjectTaskRequest{ProjectId: p.Id, ProjectTaskId: docs.Id, Reason: "written elsewhere"})
	if err != nil {
		t.Fatal(err)
	}
	if g := ptask(t, s.Project, "docs"); g.Status != skipped || g.StatusReason != "written elsewhere" {
		t.Errorf("skipped docs: %v", g)
	}
	s, err = e.projects.SkipProjectTask(ctx, &agentv1.SkipProjectTaskRequest{ProjectId: p.Id, ProjectTaskId: ptask(t, p, "cli").Id})
	if err != nil {
		t.Fatal(err)
	}
	if g := ptask(t, s.Project, "cli"); g.Status != skipped || g.StatusReason != "skipped" {
		t.Errorf("skipped cli: %v", g)
	}
	if s.Project.Status != running {
		t.Errorf("project %v after the skips", s.Project.Status)
	}
	// A skipped task is not skipped again.
	_, err = e.projects.SkipProjectTask(ctx, &agentv1.SkipProjectTaskRequest{ProjectId: p.Id, ProjectTaskId: docs.Id})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "is skipped", "pending or failed")

	// Skipping a failed task lets what was skipped because of it run without its work.
	q := e.seedFailed(t, alice)
	s, err = e.projects.SkipProjectTask(ctx, &agentv1.SkipProjectTaskRequest{ProjectId: q.Id, ProjectTaskId: ptask(t, q, "schema").Id, Reason: "not worth it"})
	if err != nil {
		t.Fatal(err)
	}
	wantStates(t, s.Project, map[string]string{"schema": "skipped: not worth it", "config": "completed: ", "api": "pending: ", "docs": "pending: ",
		"cli": "pending: ", "extra": "skipped: not needed"})
}

// PauseProject stops a RUNNING project; ResumeProject continues a PAUSED one, or one its
// spent budget stopped, with a new budget when given.
func TestPauseAndResumeProject(t *testing.T) {
	e := newProjEnv(t)
	ctx := e.ctx(alice)
	p := e.seedFailed(t, alice)

	r, err := e.projects.PauseProject(ctx, &agentv1.PauseProjectRequest{Id: p.Id, Reason: "lunch"})
	if err != nil {
		t.Fatal(err)
	}
	got := e.get(t, alice, p.Id)
	if !proto.Equal(got, r.Project) || got.Status != paused || got.StatusReason != "lunch" || got.Etag == p.Etag || got.EndTime != nil {
		t.Fatalf("paused: %v (answered %v)", got, r.Project)
	}
	_, err = e.projects.PauseProject(ctx, &agentv1.PauseProjectRequest{Id: p.Id})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "is paused", "running")

	// The task controls work on a paused project.
	if _, err := e.projects.SkipProjectTask(ctx, &agentv1.SkipProjectTaskRequest{ProjectId: p.Id, ProjectTaskId: ptask(t, p, "docs").Id}); err != nil {
		t.Fatalf("skip in a paused project: %v", err)
	}

	res, err := e.projects.ResumeProject(ctx, &agentv1.ResumeProjectRequest{Id: p.Id, Budget: &typev1.Budget{MaxCostMicros: 9000}})
	if err != nil {
		t.Fatal(err)
	}
	got = e.get(t, alice, p.Id)
	if !proto.Equal(got, res.Project) || got.Status != running || got.StatusReason != "resumed" {
		t.Fatalf("resumed: %v (answered %v)", got, res.Project)
	}
	// The new cap replaces the old; the cap not given is kept.
	if b := got.Budget; b.GetMaxTokens() != 1000 || b.GetMaxCostMicros() != 9000 {
		t.Errorf("budget after resume %v, want 1000 tokens and 9000 micro-dollars", b)
	}
	_, err = e.projects.ResumeProject(ctx, &agentv1.ResumeProjectRequest{Id: p.Id})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "is running", "paused or human_needed")

	// A project its budget stopped resumes too; without a budget it keeps its own.
	e.change(t, p.Id, func(rec *store.ProjectRecord) {
		rec.Project.Status, rec.Project.StatusReason = agentv1.ProjectStatus_PROJECT_STATUS_HUMAN_NEEDED, "budget spent"
	}, nil)
	res, err = e.projects.ResumeProject(ctx, &agentv1.ResumeProjectRequest{Id: p.Id})
	if err != nil {
		t.Fatal(err)
	}
	if g := res.Project; g.Status != running || g.StatusReason != "resumed" || g.Budget.GetMaxTokens() != 1000 || g.Budget.GetMaxCostMicros() != 9000 {
		t.Errorf("resumed from human_needed: %v", g)
	}
}

// A StartProject retried with its request_id answers the project it started; the same
// request_id with another request is refused.
func TestStartProjectRetry(t *testing.T) {
	e := newProjEnv(t)
	ctx := e.ctx(alice)
	p := e.seedLocal(t, alice)
	req := &agentv1.StartProjectRequest{Id: p.Id, RequestId: "start-1", Model: "small", Budget: &typev1.Budget{MaxTokens: 700}}
	// As StartProject leaves it (its tasks' creation needs the tasks service).
	started := e.change(t, p.Id, func(rec *store.ProjectRecord) {
		rec.Project.Status, rec.Project.StatusReason, rec.Project.StartTime = running, "started", timestamppb.Now()
		rec.State.Model = "small"
		rec.State.StartRequest = &store.ControlRequest{RPC: "StartProject", ID: "start-1", Hash: store.RequestHash(req)}
	}, nil)

	r, err := e.projects.StartProject(ctx, req)
	if err != nil {
		t.Fatalf("the start's retry: %v", err)
	}
	if !proto.Equal(r.Project, started) {
		t.Errorf("the start's retry answered %v, want %v", r.Project, started)
	}
	for name, other := range map[string]*agentv1.StartProjectRequest{
		"model":  {Id: p.Id, RequestId: "start-1", Model: "large", Budget: &typev1.Budget{MaxTokens: 700}},
		"budget": {Id: p.Id, RequestId: "start-1", Model: "small"},
	} {
		t.Run("other "+name, func(t *testing.T) {
			_, err := e.projects.StartProject(ctx, other)
			grpctest.WantInvalid(t, err, "request_id")
		})
	}
	// Another request_id, or none, is a second start of a project that runs.
	_, err = e.projects.StartProject(ctx, &agentv1.StartProjectRequest{Id: p.Id, RequestId: "start-2"})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "is running", "planned")
	_, err = e.projects.StartProject(ctx, &agentv1.StartProjectRequest{Id: p.Id})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "is running", "planned")
	// Bob cannot learn of it with alice's request.
	_, err = e.projects.StartProject(e.ctx(bob), req)
	grpctest.WantCode(t, err, codes.NotFound)
	if got := e.get(t, alice, p.Id); !proto.Equal(got, started) {
		t.Errorf("the calls changed the project: %v", got)
	}
}

// --- Project reviews ------------------------------------------------------------------------

// seedReview is a project of owner whose tasks are done and whose review (returned) waits
// for a decision, as the runner leaves them: the review inserted in the transaction that
// puts the project in PENDING_REVIEW. Neither has a sandbox; the tasks have no task_id.
func (e *projEnv) seedReview(t *testing.T, owner string) (*agentv1.Project, *agentv1.Review) {
	t.Helper()
	p := e.seedLocal(t, owner)
	rev := &agentv1.Review{Id: uuid.NewString(), QualityScore: 8, Documentation: "all of it"}
	p = e.change(t, p.Id, func(rec *store.ProjectRecord) {
		pr := rec.Project
		for _, pt := range project.Tasks(pr.Phases) {
			pt.Status = completed
		}
		pr.Status, pr.StatusReason, pr.StartTime, pr.ReviewId = agentv1.ProjectStatus_PROJECT_STATUS_PENDING_REVIEW, "waits for its review", timestamppb.Now(), rev.Id
		rec.State.Stage = "review"
	}, func(ctx context.Context, tx pgx.Tx, rec *store.ProjectRecord) error {
		return store.InsertProjectReview(ctx, tx, rec.Project, rev, "test-review:"+rec.Project.Id)
	})
	if p.ReviewId != rev.Id {
		t.Fatalf("project waits on review %q, inserted %q", p.ReviewId, rev.Id)
	}
	return p, rev
}

func TestRejectProjectReview(t *testing.T) {
	e := newProjEnv(t)
	ctx := e.ctx(alice)
	reviews := agentv1.NewReviewServiceClient(e.conn)
	p, rev := e.seedReview(t, alice)

	// Not bob's to decide.
	_, err := reviews.RejectReview(e.ctx(bob), &agentv1.RejectReviewRequest{Id: rev.Id})
	grpctest.WantCode(t, err, codes.NotFound)

	r, err := reviews.RejectReview(ctx, &agentv1.RejectReviewRequest{Id: rev.Id, Reason: "wrong approach"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Review.Status != agentv1.ReviewStatus_REVIEW_STATUS_REJECTED || r.Review.Feedback != "wrong approach" || r.Review.DecideTime == nil || r.Review.ProjectId != p.Id {
		t.Errorf("rejected review %v", r.Review)
	}
	stored, err := reviews.GetReview(ctx, &agentv1.GetReviewRequest{Id: rev.Id})
	if err != nil || stored.Review.Status != agentv1.ReviewStatus_REVIEW_STATUS_REJECTED {
		t.Errorf("stored review %v, %v", stored, err)
	}
	got := e.get(t, alice, p.Id)
	if got.Status != agentv1.ProjectStatus_PROJECT_STATUS_REJECTED || got.StatusReason != "review rejected: wrong approach" || got.EndTime == nil {
		t.Errorf("project after the rejection: %v %q, end %v", got.Status, got.StatusReason, got.EndTime)
	}
	// Decided: no second decision.
	_, err = reviews.RejectReview(ctx, &agentv1.RejectReviewRequest{Id: rev.Id})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "rejected", "pending")
	_, err = reviews.ApproveReview(ctx, &agentv1.ApproveReviewRequest{Id: rev.Id})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "rejected", "pending")
	if now := e.get(t, alice, p.Id); !proto.Equal(now, got) {
		t.Errorf("refused decisions changed the project: %v", now)
	}
}

func TestRequestChangesOnAProjectReview(t *testing.T) {
	e := newProjEnv(t)
	ctx := e.ctx(alice)
	reviews := agentv1.NewReviewServiceClient(e.conn)
	p, rev := e.seedReview(t, alice)
	api := ptask(t, p, "api")

	// A task id not of the project, and feedback that names none of its tasks, are refused.
	_, err := reviews.RequestChanges(ctx, &agentv1.RequestChangesRequest{Id: rev.Id, Feedback: "redo", ProjectTaskIds: []string{"no-such-task"}})
	grpctest.WantInvalid(t, err, "project_task_ids[0]")
	_, err = reviews.RequestChanges(ctx, &agentv1.RequestChangesRequest{Id: rev.Id, Feedback: "make it nicer"})
	grpctest.WantInvalid(t, err, "project_task_ids")
	if got := e.get(t, alice, p.Id); !proto.Equal(got, p) {
		t.Fatalf("refused requests changed the project: %v", got)
	}

	r, err := reviews.RequestChanges(ctx, &agentv1.RequestChangesRequest{Id: rev.Id, Feedback: "page the list", ProjectTaskIds: []string{api.Id}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Review.Status != agentv1.ReviewStatus_REVIEW_STATUS_CHANGES_REQUESTED || r.Review.Feedback != "page the list" || r.Review.DecideTime == nil {
		t.Errorf("review %v", r.Review)
	}
	got := e.get(t, alice, p.Id)
	if got.Status != running || got.StatusReason != "changes requested" {
		t.Errorf("project after the request: %v %q", got.Status, got.StatusReason)
	}
	wantStates(t, got, map[string]string{"schema": "completed: ", "config": "completed: ", "api": "pending: changes requested: page the list",
		"docs": "completed: ", "cli": "completed: ", "extra": "completed: "})
	rec, err := e.st.GetProject(context.Background(), alice, p.Id)
	if err != nil {
		t.Fatal(err)
	}
	if st := rec.State; st.Generation != 1 || st.Feedback != "page the list" || st.PreviousReview != rev.Id || st.Stage != "" {
		t.Errorf("runner state after the request: %+v", st)
	}
	// Decided: no second decision.
	_, err = reviews.RequestChanges(ctx, &agentv1.RequestChangesRequest{Id: rev.Id, Feedback: "page the list", ProjectTaskIds: []string{api.Id}})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "changes_requested", "pending")

	// Feedback naming a task by its title (any case) runs that task again.
	q, qrev := e.seedReview(t, alice)
	if _, err := reviews.RequestChanges(ctx, &agentv1.RequestChangesRequest{Id: qrev.Id, Feedback: "The Schema lacks an index"}); err != nil {
		t.Fatal(err)
	}
	if g := ptask(t, e.get(t, alice, q.Id), "schema"); g.Status != pending {
		t.Errorf("schema after feedback naming it: %v", g)
	}
}

func TestApproveProjectReview(t *testing.T) {
	e := newProjEnv(t)
	ctx := e.ctx(alice)
	reviews := agentv1.NewReviewServiceClient(e.conn)
	p, rev := e.seedReview(t, alice)
	other, otherRev := e.seedReview(t, alice)

	_, err := reviews.ApproveReview(e.ctx(bob), &agentv1.ApproveReviewRequest{Id: rev.Id})
	grpctest.WantCode(t, err, codes.NotFound)

	r, err := reviews.ApproveReview(ctx, &agentv1.ApproveReviewRequest{Id: rev.Id, Comment: "ship it"})
	if err != nil {
		t.Fatal(err)
	}
	if r.Review.Status != agentv1.ReviewStatus_REVIEW_STATUS_APPROVED || r.Review.Feedback != "ship it" || r.Review.DecideTime == nil {
		t.Errorf("approved review %v", r.Review)
	}
	got := e.get(t, alice, p.Id)
	if got.Status != running || got.StatusReason != "review approved" || got.Etag == p.Etag {
		t.Errorf("project after the approval: %v %q, etag %q (was %q)", got.Status, got.StatusReason, got.Etag, p.Etag)
	}
	rec, err := e.st.GetProject(context.Background(), alice, p.Id)
	if err != nil {
		t.Fatal(err)
	}
	if rec.State.Stage != "complete" {
		t.Errorf("runner stage after the approval %q, want complete", rec.State.Stage)
	}

	// The approval's retry answers the approved review and writes nothing.
	again, err := reviews.ApproveReview(ctx, &agentv1.ApproveReviewRequest{Id: rev.Id, Comment: "ship it"})
	if err != nil || again.Review.Status != agentv1.ReviewStatus_REVIEW_STATUS_APPROVED {
		t.Fatalf("the approval's retry: %v, %v", again, err)
	}
	if now := e.get(t, alice, p.Id); !proto.Equal(now, got) {
		t.Errorf("the approval's retry changed the project: etag %q, was %q", now.Etag, got.Etag)
	}
	// Approved: no other decision.
	_, err = reviews.RejectReview(ctx, &agentv1.RejectReviewRequest{Id: rev.Id})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "approved", "pending")

	// ListReviews by project.
	for _, c := range []struct {
		project string
		want    string
		status  agentv1.ReviewStatus
	}{{p.Id, rev.Id, agentv1.ReviewStatus_REVIEW_STATUS_APPROVED}, {other.Id, otherRev.Id, agentv1.ReviewStatus_REVIEW_STATUS_PENDING}} {
		list, err := reviews.ListReviews(ctx, &agentv1.ListReviewsRequest{ProjectId: c.project})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Reviews) != 1 || list.Reviews[0].Id != c.want || list.Reviews[0].ProjectId != c.project || list.Reviews[0].Status != c.status ||
			list.Reviews[0].JobId != "" || list.Reviews[0].Repo != "local/r" {
			t.Errorf("reviews of project %s: %v, want review %s (%v)", c.project, list.Reviews, c.want, c.status)
		}
	}
	if list, err := reviews.ListReviews(e.ctx(bob), &agentv1.ListReviewsRequest{ProjectId: p.Id}); err != nil || len(list.Reviews) != 0 {
		t.Errorf("bob lists %v, %v", list, err)
	}
}
