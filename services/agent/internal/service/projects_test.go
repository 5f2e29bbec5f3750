package service_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/events"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/agent/internal/service"
	"github.com/thefold/thefold/services/agent/internal/store"
	"github.com/thefold/thefold/services/agent/migrations"
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
// does) over real gRPC on a fresh agent schema. The downstream clients are nil: what these
// tests call never reaches them.
func newProjEnv(t *testing.T) *projEnv {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "agent", migrations.FS)
	hub := events.NewHub(pool, events.WithPollInterval(50*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = hub.Run(ctx) }()
	st := store.New(pool, hub)
	q := &queue{}
	srv := service.New(st, service.Options{Queue: q, Heartbeat: time.Second, MaxWatches: 8})
	e := grpctest.Start(t, func(s *grpc.Server) {
		agentv1.RegisterAgentServiceServer(s, srv)
		agentv1.RegisterReviewServiceServer(s, srv.Reviews())
		agentv1.RegisterProjectServiceServer(s, srv.Projects())
	})
	return &projEnv{st: st, q: q, conn: e.Conn, projects: agentv1.NewProjectServiceClient(e.Conn),
		ctx: func(user string) context.Context { return e.Context(t, user) }}
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
	}
	covered := map[string]bool{}
	for _, c := range cases {
		t.Run(c.method+"/"+c.field, func(t *testing.T) {
			grpctest.WantInvalid(t, c.call(), c.field)
		})
		covered[c.method] = true
	}
	// The RPCs still being written join this table when they land.
	notYet := []string{"StartProject", "PauseProject", "ResumeProject", "SkipProjectTask", "ResolveProjectTask", "RetryProjectTask"}
	sd := agentv1.ProjectService_ServiceDesc
	for _, m := range sd.Methods {
		if !covered[m.MethodName] && !slices.Contains(notYet, m.MethodName) {
			t.Errorf("%s.%s has no malformed-input case", sd.ServiceName, m.MethodName)
		}
	}
	for _, m := range sd.Streams {
		if !covered[m.StreamName] && !slices.Contains(notYet, m.StreamName) {
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
