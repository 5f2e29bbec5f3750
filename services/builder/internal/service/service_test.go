package service_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/events"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/builder/internal/service"
	"github.com/thefold/thefold/services/builder/internal/store"
	"github.com/thefold/thefold/services/builder/migrations"
)

const (
	readySandbox    = "11111111-1111-4111-8111-111111111111"
	creatingSandbox = "22222222-2222-4222-8222-222222222222"
	missingSandbox  = "33333333-3333-4333-8333-333333333333"
	missingID       = "00000000-0000-4000-8000-000000000000"
	jobID           = "44444444-4444-4444-8444-444444444444"
)

// fakeSandbox answers GetSandbox for two known sandboxes and serves readySandbox's files.
type fakeSandbox struct {
	sandboxv1.UnimplementedSandboxServiceServer
	files map[string]string
}

func (f *fakeSandbox) GetSandbox(_ context.Context, req *sandboxv1.GetSandboxRequest) (*sandboxv1.GetSandboxResponse, error) {
	switch req.GetId() {
	case readySandbox:
		return &sandboxv1.GetSandboxResponse{Sandbox: &sandboxv1.Sandbox{Id: readySandbox, Status: sandboxv1.SandboxStatus_SANDBOX_STATUS_READY}}, nil
	case creatingSandbox:
		return &sandboxv1.GetSandboxResponse{Sandbox: &sandboxv1.Sandbox{Id: creatingSandbox, Status: sandboxv1.SandboxStatus_SANDBOX_STATUS_CREATING}}, nil
	}
	return nil, status.Errorf(codes.NotFound, "sandbox %q not found", req.GetId())
}

func (f *fakeSandbox) ListFiles(_ context.Context, req *sandboxv1.ListFilesRequest) (*sandboxv1.ListFilesResponse, error) {
	if req.GetSandboxId() != readySandbox {
		return nil, status.Error(codes.NotFound, "no such sandbox")
	}
	resp := &sandboxv1.ListFilesResponse{}
	for p, c := range f.files {
		resp.Files = append(resp.Files, &sandboxv1.FileInfo{Path: p, Size: int64(len(c))})
	}
	sort.Slice(resp.Files, func(i, j int) bool { return resp.Files[i].Path < resp.Files[j].Path })
	return resp, nil
}

func (f *fakeSandbox) ReadFile(_ context.Context, req *sandboxv1.ReadFileRequest) (*sandboxv1.ReadFileResponse, error) {
	c, ok := f.files[req.GetPath()]
	if req.GetSandboxId() != readySandbox || !ok {
		return nil, status.Error(codes.NotFound, "no such file")
	}
	return &sandboxv1.ReadFileResponse{Content: []byte(c), Size: int64(len(c))}, nil
}

// queue records the builds enqueued, in the caller's transaction.
type queue struct {
	mu  sync.Mutex
	ids []string
}

func (q *queue) Enqueue(_ context.Context, tx pgx.Tx, id string) error {
	if tx == nil {
		return errors.New("no transaction")
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	q.ids = append(q.ids, id)
	return nil
}

func (q *queue) got() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.ids)
}

type canceller struct {
	mu  sync.Mutex
	ids []string
}

func (c *canceller) Cancel(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.ids = append(c.ids, id)
}

func (c *canceller) got() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ids)
}

type env struct {
	client builderv1.BuilderServiceClient
	alice  context.Context
	bob    context.Context
	anon   context.Context
	queue  *queue
	cancel *canceller
	store  *store.Store
}

func startSandbox(t *testing.T, files map[string]string) sandboxv1.SandboxServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	sandboxv1.RegisterSandboxServiceServer(srv, &fakeSandbox{files: files})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return sandboxv1.NewSandboxServiceClient(conn)
}

var workspace = map[string]string{
	"go.mod":       "module example.com/app\n\ngo 1.22\n",
	"util/util.go": "package util\n\nfunc Hello() string { return \"hi\" }\n",
	"README.md":    "# app\n",
}

func start(t *testing.T) *env {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "builder", migrations.FS)
	hub := events.NewHub(pool, events.WithPollInterval(50*time.Millisecond))
	hubCtx, stopHub := context.WithCancel(context.Background())
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); _ = hub.Run(hubCtx) }()
	t.Cleanup(func() { stopHub(); <-hubDone })
	st := store.New(pool, hub)
	q, c := &queue{}, &canceller{}
	srv := service.New(st, q, c, startSandbox(t, workspace), time.Hour, 8, 4, nil)
	e := grpctest.Start(t, func(s *grpc.Server) { builderv1.RegisterBuilderServiceServer(s, srv) })
	return &env{
		client: builderv1.NewBuilderServiceClient(e.Conn),
		alice:  e.Context(t, "alice"),
		bob:    e.Context(t, "bob"),
		anon:   t.Context(),
		queue:  q,
		cancel: c,
		store:  st,
	}
}

func validStart() *builderv1.StartBuildRequest {
	return &builderv1.StartBuildRequest{
		RequestId: "req-1",
		JobId:     jobID,
		SandboxId: readySandbox,
		Repo:      "acme/app",
		Plan: &typev1.Plan{Summary: "add main", Steps: []*typev1.PlanStep{
			{Id: "main", Path: "main.go", Action: typev1.FileAction_FILE_ACTION_CREATE, Description: "entry point"},
			{Id: "test", Command: []string{"go", "test", "./..."}, DependsOn: []string{"main"}},
		}, Packages: []string{"github.com/google/uuid@v1.6.0"}},
		Budget: &typev1.Budget{MaxTokens: 100, MaxCostMicros: 5, MaxWallTime: durationpb.New(time.Minute)},
	}
}

func (e *env) startBuild(t *testing.T, ctx context.Context, reqID string) *builderv1.BuildJob {
	t.Helper()
	req := validStart()
	req.RequestId = reqID
	resp, err := e.client.StartBuild(ctx, req)
	if err != nil {
		t.Fatalf("StartBuild(%s): %v", reqID, err)
	}
	return resp.Build
}

// manyPaths is n distinct valid paths.
func manyPaths(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("pkg/p%03d/file.go", i)
	}
	return out
}

// watchErr opens a watch and returns the error its stream ends with, skipping heartbeats;
// only for requests that must fail.
func watchErr(ctx context.Context, c builderv1.BuilderServiceClient, req *builderv1.WatchBuildRequest) error {
	s, err := c.WatchBuild(ctx, req)
	if err != nil {
		return err
	}
	for {
		m, err := s.Recv()
		if err != nil {
			return err
		}
		if m.GetHeartbeat() == nil {
			return errors.New("watch delivered an event")
		}
	}
}

func TestInvalidArgument(t *testing.T) {
	t.Parallel()
	e := start(t)
	c, ctx := e.client, e.alice
	b := e.startBuild(t, ctx, "existing")
	startReq := func(mod func(*builderv1.StartBuildRequest)) func() error {
		return func() error {
			req := validStart()
			req.RequestId = "invalid-case"
			mod(req)
			_, err := c.StartBuild(ctx, req)
			return err
		}
	}
	step := func(mod func(*typev1.PlanStep)) func(*builderv1.StartBuildRequest) {
		return func(r *builderv1.StartBuildRequest) { mod(r.Plan.Steps[1]) }
	}
	list := func(req *builderv1.ListBuildsRequest) func() error {
		return func() error { _, err := c.ListBuilds(ctx, req); return err }
	}
	get := func(id string) func() error {
		return func() error { _, err := c.GetBuild(ctx, &builderv1.GetBuildRequest{Id: id}); return err }
	}
	cancel := func(req *builderv1.CancelBuildRequest) func() error {
		return func() error { _, err := c.CancelBuild(ctx, req); return err }
	}
	retry := func(req *builderv1.RetryStepRequest) func() error {
		return func() error { _, err := c.RetryStep(ctx, req); return err }
	}
	pause := func(req *builderv1.PauseBuildRequest) func() error {
		return func() error { _, err := c.PauseBuild(ctx, req); return err }
	}
	resume := func(req *builderv1.ResumeBuildRequest) func() error {
		return func() error { _, err := c.ResumeBuild(ctx, req); return err }
	}
	watch := func(req *builderv1.WatchBuildRequest) func() error {
		return func() error { return watchErr(ctx, c, req) }
	}
	guide := func(req *builderv1.AddGuidanceRequest) func() error {
		return func() error { _, err := c.AddGuidance(ctx, req); return err }
	}
	analyze := func(req *builderv1.AnalyzeDependenciesRequest) func() error {
		return func() error { _, err := c.AnalyzeDependencies(ctx, req); return err }
	}
	pf := func(path string, action typev1.FileAction) *builderv1.PlannedFile {
		return &builderv1.PlannedFile{Path: path, Action: action}
	}
	create := typev1.FileAction_FILE_ACTION_CREATE

	cases := []struct {
		name  string
		call  func() error
		field string
	}{
		// StartBuild
		{"start: missing request_id", startReq(func(r *builderv1.StartBuildRequest) { r.RequestId = "" }), "request_id"},
		{"start: request_id with a space", startReq(func(r *builderv1.StartBuildRequest) { r.RequestId = "a b" }), "request_id"},
		{"start: request_id too long", startReq(func(r *builderv1.StartBuildRequest) { r.RequestId = strings.Repeat("r", 129) }), "request_id"},
		{"start: too many memory hints", startReq(func(r *builderv1.StartBuildRequest) { r.MemoryHints = make([]string, 51) }), "memory_hints"},
		{"start: empty memory hint", startReq(func(r *builderv1.StartBuildRequest) { r.MemoryHints = []string{"use pgx", " \n"} }), "memory_hints[1]"},
		{"start: memory hint too long", startReq(func(r *builderv1.StartBuildRequest) { r.MemoryHints = []string{strings.Repeat("m", 4001)} }), "memory_hints[0]"},
		{"start: task_title too long", startReq(func(r *builderv1.StartBuildRequest) { r.TaskTitle = strings.Repeat("é", 501) }), "task_title"},
		{"start: task_description too long", startReq(func(r *builderv1.StartBuildRequest) { r.TaskDescription = strings.Repeat("d", 100_001) }), "task_description"},
		{"start: task_description of too many bytes", startReq(func(r *builderv1.StartBuildRequest) { r.TaskDescription = strings.Repeat("é", 50_001) }), "task_description"},
		{"start: task_description not UTF-8", startReq(func(r *builderv1.StartBuildRequest) { r.TaskDescription = "bad \xff" }), "task_description"},
		{"start: too many context paths", startReq(func(r *builderv1.StartBuildRequest) { r.ContextPaths = manyPaths(201) }), "context_paths"},
		{"start: empty context path", startReq(func(r *builderv1.StartBuildRequest) { r.ContextPaths = []string{"a.go", ""} }), "context_paths[1]"},
		{"start: context path with ..", startReq(func(r *builderv1.StartBuildRequest) { r.ContextPaths = []string{"../etc/passwd"} }), "context_paths[0]"},
		{"start: context path inside with ..", startReq(func(r *builderv1.StartBuildRequest) { r.ContextPaths = []string{"a/../b.go"} }), "context_paths[0]"},
		{"start: absolute context path", startReq(func(r *builderv1.StartBuildRequest) { r.ContextPaths = []string{"/etc/passwd"} }), "context_paths[0]"},
		{"start: unclean context path", startReq(func(r *builderv1.StartBuildRequest) { r.ContextPaths = []string{"a.go", "./b.go"} }), "context_paths[1]"},
		{"start: context path with a trailing slash", startReq(func(r *builderv1.StartBuildRequest) { r.ContextPaths = []string{"lib/"} }), "context_paths[0]"},
		{"start: context path with a backslash", startReq(func(r *builderv1.StartBuildRequest) { r.ContextPaths = []string{`lib\a.go`} }), "context_paths[0]"},
		{"start: duplicate context paths", startReq(func(r *builderv1.StartBuildRequest) { r.ContextPaths = []string{"a.go", "b.go", "a.go"} }), "context_paths[2]"},
		{"start: missing sandbox_id", startReq(func(r *builderv1.StartBuildRequest) { r.SandboxId = "" }), "sandbox_id"},
		{"start: sandbox_id not a UUID", startReq(func(r *builderv1.StartBuildRequest) { r.SandboxId = "sb-1" }), "sandbox_id"},
		{"start: job_id not a UUID", startReq(func(r *builderv1.StartBuildRequest) { r.JobId = "job" }), "job_id"},
		{"start: task_id not a UUID", startReq(func(r *builderv1.StartBuildRequest) { r.TaskId = "12" }), "task_id"},
		{"start: bad repo", startReq(func(r *builderv1.StartBuildRequest) { r.Repo = "no-slash" }), "repo"},
		{"start: repo of dots", startReq(func(r *builderv1.StartBuildRequest) { r.Repo = "../.." }), "repo"},
		{"start: model too long", startReq(func(r *builderv1.StartBuildRequest) { r.Model = strings.Repeat("m", 201) }), "model"},
		{"start: unknown strategy", startReq(func(r *builderv1.StartBuildRequest) { r.Strategy = 99 }), "strategy"},
		{"start: negative max_tokens", startReq(func(r *builderv1.StartBuildRequest) { r.Budget.MaxTokens = -1 }), "budget.max_tokens"},
		{"start: negative max_cost_micros", startReq(func(r *builderv1.StartBuildRequest) { r.Budget.MaxCostMicros = -1 }), "budget.max_cost_micros"},
		{"start: negative max_wall_time", startReq(func(r *builderv1.StartBuildRequest) { r.Budget.MaxWallTime = durationpb.New(-time.Second) }), "budget.max_wall_time"},
		{"start: nil plan", startReq(func(r *builderv1.StartBuildRequest) { r.Plan = nil }), "plan.steps"},
		{"start: no steps", startReq(func(r *builderv1.StartBuildRequest) { r.Plan.Steps = nil }), "plan.steps"},
		{"start: step without id", startReq(step(func(s *typev1.PlanStep) { s.Id = "" })), "plan.steps[1].id"},
		{"start: step id too long", startReq(step(func(s *typev1.PlanStep) { s.Id = strings.Repeat("i", 129) })), "plan.steps[1].id"},
		{"start: duplicate step ids", startReq(step(func(s *typev1.PlanStep) { s.Id, s.DependsOn = "main", nil })), "plan.steps[1].id"},
		{"start: path and command", startReq(step(func(s *typev1.PlanStep) { s.Path = "x.go" })), "plan.steps[1]"},
		{"start: neither path nor command", startReq(step(func(s *typev1.PlanStep) { s.Command = nil })), "plan.steps[1]"},
		{"start: path with ..", startReq(func(r *builderv1.StartBuildRequest) { r.Plan.Steps[0].Path = "../etc/passwd" }), "plan.steps[0].path"},
		{"start: absolute path", startReq(func(r *builderv1.StartBuildRequest) { r.Plan.Steps[0].Path = "/etc/passwd" }), "plan.steps[0].path"},
		{"start: duplicate paths", startReq(step(func(s *typev1.PlanStep) {
			s.Command, s.Path, s.Action = nil, "main.go", typev1.FileAction_FILE_ACTION_MODIFY
		})), "plan.steps[1].path"},
		{"start: file step without action", startReq(func(r *builderv1.StartBuildRequest) { r.Plan.Steps[0].Action = 0 }), "plan.steps[0].action"},
		{"start: file step with workdir", startReq(func(r *builderv1.StartBuildRequest) { r.Plan.Steps[0].Workdir = "sub" }), "plan.steps[0].workdir"},
		{"start: command step with an action", startReq(step(func(s *typev1.PlanStep) { s.Action = create })), "plan.steps[1].action"},
		{"start: empty command[0]", startReq(step(func(s *typev1.PlanStep) { s.Command = []string{"", "x"} })), "plan.steps[1].command"},
		{"start: command workdir with ..", startReq(step(func(s *typev1.PlanStep) { s.Workdir = "../x" })), "plan.steps[1].workdir"},
		{"start: depends_on unknown step", startReq(step(func(s *typev1.PlanStep) { s.DependsOn = []string{"main", "nope"} })), "plan.steps[1].depends_on[1]"},
		{"start: depends_on itself", startReq(step(func(s *typev1.PlanStep) { s.DependsOn = []string{"test"} })), "plan.steps[1].depends_on[0]"},
		{"start: empty package", startReq(func(r *builderv1.StartBuildRequest) { r.Plan.Packages = []string{"ok", ""} }), "plan.packages[1]"},
		{"start: package with a space", startReq(func(r *builderv1.StartBuildRequest) { r.Plan.Packages = []string{"a b"} }), "plan.packages[0]"},
		// GetBuild
		{"get: missing id", get(""), "id"},
		{"get: id not a UUID", get("build-1"), "id"},
		{"get: braced id", get("{" + b.Id + "}"), "id"},
		// ListBuilds
		{"list: page_size 201", list(&builderv1.ListBuildsRequest{PageSize: 201}), "page_size"},
		{"list: negative page_size", list(&builderv1.ListBuildsRequest{PageSize: -1}), "page_size"},
		{"list: unspecified status", list(&builderv1.ListBuildsRequest{Statuses: []builderv1.BuildStatus{0}}), "statuses[0]"},
		{"list: unknown status", list(&builderv1.ListBuildsRequest{Statuses: []builderv1.BuildStatus{1, 42}}), "statuses[1]"},
		{"list: bad job_id", list(&builderv1.ListBuildsRequest{JobId: "j"}), "job_id"},
		{"list: bad task_id", list(&builderv1.ListBuildsRequest{TaskId: "t"}), "task_id"},
		{"list: bad repo", list(&builderv1.ListBuildsRequest{Repo: "a/b/c"}), "repo"},
		{"list: bad page_token", list(&builderv1.ListBuildsRequest{PageToken: "!!!"}), "page_token"},
		{"list: forged page_token", list(&builderv1.ListBuildsRequest{PageToken: "djE6eDp5"}), "page_token"},
		// CancelBuild
		{"cancel: missing id", cancel(&builderv1.CancelBuildRequest{}), "id"},
		{"cancel: id not a UUID", cancel(&builderv1.CancelBuildRequest{Id: "x"}), "id"},
		{"cancel: reason too long", cancel(&builderv1.CancelBuildRequest{Id: b.Id, Reason: strings.Repeat("r", 1001)}), "reason"},
		// PauseBuild
		{"pause: missing id", pause(&builderv1.PauseBuildRequest{}), "id"},
		{"pause: id not a UUID", pause(&builderv1.PauseBuildRequest{Id: "not-a-uuid"}), "id"},
		{"pause: braced id", pause(&builderv1.PauseBuildRequest{Id: "{" + b.Id + "}"}), "id"},
		{"pause: reason too long", pause(&builderv1.PauseBuildRequest{Id: b.Id, Reason: strings.Repeat("r", 1001)}), "reason"},
		// ResumeBuild
		{"resume: missing id", resume(&builderv1.ResumeBuildRequest{}), "id"},
		{"resume: id not a UUID", resume(&builderv1.ResumeBuildRequest{Id: "build-1"}), "id"},
		// RetryStep
		{"retry: missing build_id", retry(&builderv1.RetryStepRequest{StepNumber: 1}), "build_id"},
		{"retry: build_id not a UUID", retry(&builderv1.RetryStepRequest{BuildId: "x", StepNumber: 1}), "build_id"},
		{"retry: step_number 0", retry(&builderv1.RetryStepRequest{BuildId: b.Id}), "step_number"},
		{"retry: negative step_number", retry(&builderv1.RetryStepRequest{BuildId: b.Id, StepNumber: -2}), "step_number"},
		{"retry: guidance too long", retry(&builderv1.RetryStepRequest{BuildId: b.Id, StepNumber: 1, Guidance: strings.Repeat("g", 64<<10+1)}), "guidance"},
		{"retry: request_id with a space", retry(&builderv1.RetryStepRequest{BuildId: b.Id, StepNumber: 1, RequestId: "a b"}), "request_id"},
		{"retry: request_id too long", retry(&builderv1.RetryStepRequest{BuildId: b.Id, StepNumber: 1, RequestId: strings.Repeat("r", 200)}), "request_id"},
		// AddGuidance
		{"guidance: missing build_id", guide(&builderv1.AddGuidanceRequest{Text: "use hi"}), "build_id"},
		{"guidance: build_id not a UUID", guide(&builderv1.AddGuidanceRequest{BuildId: "x", Text: "use hi"}), "build_id"},
		{"guidance: missing text", guide(&builderv1.AddGuidanceRequest{BuildId: b.Id}), "text"},
		{"guidance: blank text", guide(&builderv1.AddGuidanceRequest{BuildId: b.Id, Text: " \n\t"}), "text"},
		{"guidance: text too long", guide(&builderv1.AddGuidanceRequest{BuildId: b.Id, Text: strings.Repeat("é", 8001)}), "text"},
		{"guidance: text with NUL", guide(&builderv1.AddGuidanceRequest{BuildId: b.Id, Text: "use\x00hi"}), "text"},
		{"guidance: text not UTF-8", guide(&builderv1.AddGuidanceRequest{BuildId: b.Id, Text: "use \xff"}), "text"},
		{"guidance: request_id with a space", guide(&builderv1.AddGuidanceRequest{BuildId: b.Id, Text: "use hi", RequestId: "a b"}), "request_id"},
		{"guidance: request_id too long", guide(&builderv1.AddGuidanceRequest{BuildId: b.Id, Text: "use hi", RequestId: strings.Repeat("r", 200)}), "request_id"},
		// WatchBuild
		{"watch: negative after_id", watch(&builderv1.WatchBuildRequest{Id: b.Id, AfterId: -1}), "after_id"},
		{"watch: id not a UUID", watch(&builderv1.WatchBuildRequest{Id: "x"}), "id"},
		{"watch: job_id not a UUID", watch(&builderv1.WatchBuildRequest{JobId: "x"}), "job_id"},
		// AnalyzeDependencies
		{"analyze: no files", analyze(&builderv1.AnalyzeDependenciesRequest{}), "files"},
		{"analyze: path with ..", analyze(&builderv1.AnalyzeDependenciesRequest{Files: []*builderv1.PlannedFile{pf("a/../../b.go", create)}}), "files[0].path"},
		{"analyze: absolute path", analyze(&builderv1.AnalyzeDependenciesRequest{Files: []*builderv1.PlannedFile{pf("a.go", create), pf("/b.go", create)}}), "files[1].path"},
		{"analyze: duplicate path", analyze(&builderv1.AnalyzeDependenciesRequest{Files: []*builderv1.PlannedFile{pf("a.go", create), pf("a.go", create)}}), "files[1].path"},
		{"analyze: unspecified action", analyze(&builderv1.AnalyzeDependenciesRequest{Files: []*builderv1.PlannedFile{pf("a.go", 0)}}), "files[0].action"},
		{"analyze: unknown action", analyze(&builderv1.AnalyzeDependenciesRequest{Files: []*builderv1.PlannedFile{pf("a.go", 77)}}), "files[0].action"},
		{"analyze: depends_on unknown", analyze(&builderv1.AnalyzeDependenciesRequest{Files: []*builderv1.PlannedFile{
			{Path: "a.go", Action: create, DependsOn: []string{"b.go"}}}}), "files[0].depends_on[0]"},
		{"analyze: sandbox and archive", analyze(&builderv1.AnalyzeDependenciesRequest{SandboxId: readySandbox, Archive: tarball(t, false, map[string]string{"a.go": "package a\n"}),
			Files: []*builderv1.PlannedFile{pf("a.go", create)}}), "archive"},
		{"analyze: archive not a tar", analyze(&builderv1.AnalyzeDependenciesRequest{Archive: []byte("definitely not a tarball, just some text"), Files: []*builderv1.PlannedFile{pf("a.go", create)}}), "archive"},
		{"analyze: archive not gzip", analyze(&builderv1.AnalyzeDependenciesRequest{Archive: []byte{0x1f, 0x8b, 0, 1, 2}, Files: []*builderv1.PlannedFile{pf("a.go", create)}}), "archive"},
		{"analyze: archive entry leaves the root", analyze(&builderv1.AnalyzeDependenciesRequest{Archive: tarball(t, true, map[string]string{"../evil.go": "package evil\n"}), Files: []*builderv1.PlannedFile{pf("a.go", create)}}), "archive"},
		{"analyze: archive entry absolute", analyze(&builderv1.AnalyzeDependenciesRequest{Archive: tarball(t, false, map[string]string{"/etc/x.go": "package x\n"}), Files: []*builderv1.PlannedFile{pf("a.go", create)}}), "archive"},
		{"analyze: bad sandbox_id", analyze(&builderv1.AnalyzeDependenciesRequest{SandboxId: "sb", Files: []*builderv1.PlannedFile{pf("a.go", create)}}), "sandbox_id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			grpctest.WantInvalid(t, tc.call(), tc.field)
		})
	}
	t.Cleanup(func() {
		// Nothing but the first build was started or enqueued.
		if got := e.queue.got(); !slices.Equal(got, []string{b.Id}) {
			t.Errorf("enqueued %v, want only %s", got, b.Id)
		}
		if got := e.cancel.got(); len(got) != 0 {
			t.Errorf("cancelled %v", got)
		}
	})
}

func TestStartBuild(t *testing.T) {
	t.Parallel()
	e := start(t)
	c, ctx := e.client, e.alice

	t.Run("sandbox not found", func(t *testing.T) {
		req := validStart()
		req.SandboxId = missingSandbox
		_, err := c.StartBuild(ctx, req)
		grpctest.WantCode(t, err, codes.NotFound, missingSandbox)
	})
	t.Run("sandbox creating", func(t *testing.T) {
		req := validStart()
		req.SandboxId = creatingSandbox
		_, err := c.StartBuild(ctx, req)
		grpctest.WantCode(t, err, codes.FailedPrecondition, creatingSandbox, "READY")
	})
	if got := e.queue.got(); len(got) != 0 {
		t.Fatalf("refused starts enqueued %v", got)
	}

	resp, err := c.StartBuild(ctx, validStart())
	if err != nil {
		t.Fatal(err)
	}
	b := resp.Build
	if b.GetStatus() != builderv1.BuildStatus_BUILD_STATUS_PENDING || b.OwnerId != "alice" || b.RequestId != "req-1" ||
		b.SandboxId != readySandbox || b.JobId != jobID || b.Repo != "acme/app" || len(b.Plan.GetSteps()) != 2 ||
		b.Budget.GetMaxTokens() != 100 || b.Budget.GetMaxWallTime().AsDuration() != time.Minute {
		t.Errorf("started build = %v", b)
	}
	if got := e.queue.got(); !slices.Equal(got, []string{b.Id}) {
		t.Errorf("enqueued %v, want [%s]", got, b.Id)
	}

	again, err := c.StartBuild(ctx, validStart())
	if err != nil {
		t.Fatal(err)
	}
	if again.Build.Id != b.Id {
		t.Errorf("retry started %s, want %s", again.Build.Id, b.Id)
	}
	if got := e.queue.got(); len(got) != 1 {
		t.Errorf("enqueued %v after a retry, want once", got)
	}

	other := validStart()
	other.Plan.Summary = "something else"
	_, err = c.StartBuild(ctx, other)
	grpctest.WantInvalid(t, err, "request_id")

	got, err := c.GetBuild(ctx, &builderv1.GetBuildRequest{Id: b.Id})
	if err != nil || got.Build.Id != b.Id || got.Build.Plan.GetSummary() != "add main" || len(got.Steps) != 0 {
		t.Errorf("GetBuild = %v, %v", got, err)
	}
	// Upper-case ids are the same build.
	if got, err := c.GetBuild(ctx, &builderv1.GetBuildRequest{Id: strings.ToUpper(b.Id)}); err != nil || got.Build.Id != b.Id {
		t.Errorf("GetBuild(upper case) = %v, %v", got, err)
	}
	list, err := c.ListBuilds(ctx, &builderv1.ListBuildsRequest{JobId: jobID, Statuses: []builderv1.BuildStatus{1, 1}})
	if err != nil || len(list.Builds) != 1 || list.Builds[0].Id != b.Id || list.NextPageToken != "" {
		t.Errorf("ListBuilds = %v, %v", list, err)
	}
	// bob's request_id space is his own.
	bobs, err := c.StartBuild(e.bob, validStart())
	if err != nil || bobs.Build.Id == b.Id || bobs.Build.OwnerId != "bob" {
		t.Errorf("bob's StartBuild = %v, %v", bobs, err)
	}
}

func TestStartBuildKeepsTheTaskAndContextPaths(t *testing.T) {
	t.Parallel()
	e := start(t)
	c, ctx := e.client, e.alice

	// The task as written and the context paths are kept with the build, and are part of
	// what a retry must repeat: the same request is the same build, another task is not.
	withTask := func() *builderv1.StartBuildRequest {
		req := validStart()
		req.RequestId = "req-task"
		req.TaskTitle = strings.Repeat("é", 500)
		req.TaskDescription = "Greet people.\n\n" + strings.Repeat("d", 100_000-len("Greet people.\n\n"))
		req.ContextPaths = append([]string{"util/util.go", "README.md"}, manyPaths(198)...)
		return req
	}
	first, err := c.StartBuild(ctx, withTask())
	if err != nil {
		t.Fatalf("StartBuild at the limits: %v", err)
	}
	retried, err := c.StartBuild(ctx, withTask())
	if err != nil || retried.Build.Id != first.Build.Id {
		t.Errorf("retry of the same request = %v, %v; want build %s", retried, err, first.Build.Id)
	}
	for name, change := range map[string]func(*builderv1.StartBuildRequest){
		"task_title":       func(r *builderv1.StartBuildRequest) { r.TaskTitle = "another task" },
		"task_description": func(r *builderv1.StartBuildRequest) { r.TaskDescription = "another task" },
		"context_paths": func(r *builderv1.StartBuildRequest) {
			r.ContextPaths[0], r.ContextPaths[1] = r.ContextPaths[1], r.ContextPaths[0]
		},
	} {
		req := withTask()
		change(req)
		_, err := c.StartBuild(ctx, req)
		t.Run("request_id reused with another "+name, func(t *testing.T) { grpctest.WantInvalid(t, err, "request_id") })
	}
	stored, err := e.store.Get(ctx, "alice", first.Build.Id)
	if err != nil {
		t.Fatal(err)
	}
	if want := withTask(); stored.TaskTitle != want.TaskTitle || stored.TaskDescription != want.TaskDescription ||
		!slices.Equal(stored.ContextPaths, want.ContextPaths) {
		t.Errorf("stored build's task %.40q %.40q, paths %q", stored.TaskTitle, stored.TaskDescription, stored.ContextPaths)
	}
}

func TestOtherUsersBuildsAreNotFound(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	b := e.startBuild(t, e.alice, "mine")
	for name, call := range map[string]func() error{
		"GetBuild": func() error { _, err := c.GetBuild(e.bob, &builderv1.GetBuildRequest{Id: b.Id}); return err },
		"CancelBuild": func() error {
			_, err := c.CancelBuild(e.bob, &builderv1.CancelBuildRequest{Id: b.Id})
			return err
		},
		"RetryStep": func() error {
			_, err := c.RetryStep(e.bob, &builderv1.RetryStepRequest{BuildId: b.Id, StepNumber: 1})
			return err
		},
		"PauseBuild": func() error {
			_, err := c.PauseBuild(e.bob, &builderv1.PauseBuildRequest{Id: b.Id})
			return err
		},
		"PauseBuild missing": func() error {
			_, err := c.PauseBuild(e.alice, &builderv1.PauseBuildRequest{Id: missingID})
			return err
		},
		"ResumeBuild": func() error {
			_, err := c.ResumeBuild(e.bob, &builderv1.ResumeBuildRequest{Id: b.Id})
			return err
		},
		"ResumeBuild missing": func() error {
			_, err := c.ResumeBuild(e.alice, &builderv1.ResumeBuildRequest{Id: missingID})
			return err
		},
		"AddGuidance": func() error {
			_, err := c.AddGuidance(e.bob, &builderv1.AddGuidanceRequest{BuildId: b.Id, Text: "use hi"})
			return err
		},
		"AddGuidance missing": func() error {
			_, err := c.AddGuidance(e.alice, &builderv1.AddGuidanceRequest{BuildId: missingID, Text: "use hi"})
			return err
		},
		"WatchBuild": func() error { return watchErr(e.bob, c, &builderv1.WatchBuildRequest{Id: b.Id}) },
		"GetBuild missing": func() error {
			_, err := c.GetBuild(e.alice, &builderv1.GetBuildRequest{Id: missingID})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			grpctest.WantCode(t, call(), codes.NotFound)
		})
	}
	list, err := c.ListBuilds(e.bob, &builderv1.ListBuildsRequest{})
	if err != nil || len(list.Builds) != 0 {
		t.Errorf("bob's ListBuilds = %v, %v", list, err)
	}
	got, err := c.GetBuild(e.alice, &builderv1.GetBuildRequest{Id: b.Id})
	if err != nil || got.Build.Status != builderv1.BuildStatus_BUILD_STATUS_PENDING || len(got.Build.Guidance) != 0 {
		t.Errorf("alice's build after bob's calls = %v, %v", got, err)
	}
	if got := e.cancel.got(); len(got) != 0 {
		t.Errorf("bob's CancelBuild or PauseBuild reached the engine: %v", got)
	}
}

func TestCancelAndRetry(t *testing.T) {
	t.Parallel()
	e := start(t)
	c, ctx := e.client, e.alice
	b := e.startBuild(t, ctx, "c1")

	_, err := c.RetryStep(ctx, &builderv1.RetryStepRequest{BuildId: b.Id, StepNumber: 1})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "pending")

	resp, err := c.CancelBuild(ctx, &builderv1.CancelBuildRequest{Id: b.Id, Reason: "changed my mind"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Build.Status != builderv1.BuildStatus_BUILD_STATUS_CANCELLED || resp.Build.Error != "changed my mind" || resp.Build.EndTime == nil {
		t.Errorf("cancelled build = %v", resp.Build)
	}
	if got := e.cancel.got(); !slices.Equal(got, []string{b.Id}) {
		t.Errorf("canceller got %v, want [%s]", got, b.Id)
	}
	if got, err := c.GetBuild(ctx, &builderv1.GetBuildRequest{Id: b.Id}); err != nil || got.Build.Status != builderv1.BuildStatus_BUILD_STATUS_CANCELLED {
		t.Errorf("GetBuild after cancel = %v, %v", got, err)
	}
	_, err = c.RetryStep(ctx, &builderv1.RetryStepRequest{BuildId: b.Id, StepNumber: 1})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "cancelled")

	// The watch of a cancelled build opens with a heartbeat, replays its history and ends
	// with the end marker (a heartbeat with end set, at the last event's id).
	s, err := c.WatchBuild(ctx, &builderv1.WatchBuildRequest{Id: b.Id})
	if err != nil {
		t.Fatal(err)
	}
	var got []builderv1.BuildEventType
	var beats int
	var last *builderv1.WatchBuildResponse
	for {
		m, err := s.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("watch: %v", err)
		}
		if last != nil && last.GetHeartbeat().GetEnd() {
			t.Fatalf("message after the end: %v", m)
		}
		last = m
		if m.GetHeartbeat() != nil {
			beats++
			continue
		}
		if m.BuildId != b.Id || m.JobId != jobID || m.Id <= 0 {
			t.Errorf("event = %v", m)
		}
		got = append(got, m.Type)
	}
	want := []builderv1.BuildEventType{builderv1.BuildEventType_BUILD_EVENT_TYPE_CREATED, builderv1.BuildEventType_BUILD_EVENT_TYPE_STATUS_CHANGED}
	if !slices.Equal(got, want) || beats != 2 || !last.GetHeartbeat().GetEnd() {
		t.Errorf("watch = %v with %d heartbeats ending %v, want %v, the opening heartbeat and the end", got, beats, last, want)
	}

	// A completed build cannot be cancelled.
	done := e.startBuild(t, ctx, "c-done")
	lease := "9d9d9d9d-9d9d-4d9d-8d9d-9d9d9d9d9d9d"
	sb, _, ok, err := e.store.Claim(ctx, done.Id, lease, time.Minute)
	if err != nil || !ok {
		t.Fatalf("Claim: %v %v", ok, err)
	}
	sb.Status = builderv1.BuildStatus_BUILD_STATUS_COMPLETED
	if err := e.store.Apply(ctx, lease, store.Change{Build: sb}); err != nil {
		t.Fatal(err)
	}
	_, err = c.CancelBuild(ctx, &builderv1.CancelBuildRequest{Id: done.Id})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "completed")
	if got := e.cancel.got(); len(got) != 1 {
		t.Errorf("canceller got %v after a refused cancel", got)
	}
}

func TestUnauthenticated(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	b := e.startBuild(t, e.alice, "auth")
	forged := metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer not-a-token")
	calls := map[string]func(ctx context.Context) error{
		"StartBuild": func(ctx context.Context) error {
			req := validStart()
			req.RequestId = "anon"
			_, err := c.StartBuild(ctx, req)
			return err
		},
		"GetBuild": func(ctx context.Context) error {
			_, err := c.GetBuild(ctx, &builderv1.GetBuildRequest{Id: b.Id})
			return err
		},
		"ListBuilds": func(ctx context.Context) error {
			_, err := c.ListBuilds(ctx, &builderv1.ListBuildsRequest{})
			return err
		},
		"CancelBuild": func(ctx context.Context) error {
			_, err := c.CancelBuild(ctx, &builderv1.CancelBuildRequest{Id: b.Id})
			return err
		},
		"RetryStep": func(ctx context.Context) error {
			_, err := c.RetryStep(ctx, &builderv1.RetryStepRequest{BuildId: b.Id, StepNumber: 1})
			return err
		},
		"PauseBuild": func(ctx context.Context) error {
			_, err := c.PauseBuild(ctx, &builderv1.PauseBuildRequest{Id: b.Id})
			return err
		},
		"ResumeBuild": func(ctx context.Context) error {
			_, err := c.ResumeBuild(ctx, &builderv1.ResumeBuildRequest{Id: b.Id})
			return err
		},
		"AddGuidance": func(ctx context.Context) error {
			_, err := c.AddGuidance(ctx, &builderv1.AddGuidanceRequest{BuildId: b.Id, Text: "use hi"})
			return err
		},
		"WatchBuild": func(ctx context.Context) error { return watchErr(ctx, c, &builderv1.WatchBuildRequest{Id: b.Id}) },
		"AnalyzeDependencies": func(ctx context.Context) error {
			_, err := c.AnalyzeDependencies(ctx, &builderv1.AnalyzeDependenciesRequest{
				Files: []*builderv1.PlannedFile{{Path: "a.go", Action: typev1.FileAction_FILE_ACTION_CREATE}}})
			return err
		},
	}
	if n := len(builderv1.BuilderService_ServiceDesc.Methods) + len(builderv1.BuilderService_ServiceDesc.Streams); len(calls) != n {
		t.Fatalf("%d calls for %d RPCs", len(calls), n)
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			grpctest.WantCode(t, call(e.anon), codes.Unauthenticated)
			grpctest.WantCode(t, call(forged), codes.Unauthenticated)
		})
	}
	got, err := c.GetBuild(e.alice, &builderv1.GetBuildRequest{Id: b.Id})
	if err != nil || got.Build.Status != builderv1.BuildStatus_BUILD_STATUS_PENDING {
		t.Errorf("build after unauthenticated calls = %v, %v", got, err)
	}
	if q := e.queue.got(); len(q) != 1 {
		t.Errorf("enqueued %v", q)
	}
	if cc := e.cancel.got(); len(cc) != 0 {
		t.Errorf("cancelled %v", cc)
	}
}

func TestAnalyzeDependencies(t *testing.T) {
	t.Parallel()
	e := start(t)
	c, ctx := e.client, e.alice
	create := typev1.FileAction_FILE_ACTION_CREATE
	modify := typev1.FileAction_FILE_ACTION_MODIFY
	nodes := func(g *builderv1.DependencyGraph) map[string][]string {
		out := map[string][]string{}
		for _, n := range g.GetNodes() {
			out[n.Path] = n.DependsOn
		}
		return out
	}

	t.Run("workspace in a sandbox", func(t *testing.T) {
		resp, err := c.AnalyzeDependencies(ctx, &builderv1.AnalyzeDependenciesRequest{
			SandboxId: readySandbox,
			Files: []*builderv1.PlannedFile{
				{Path: "main.go", Action: create, Content: "package main\n\nimport \"example.com/app/util\"\n\nfunc main() { println(util.Hello()) }\n"},
				{Path: "util/util.go", Action: modify},
				{Path: "docs/notes.go", Action: create, Content: "package docs\n"},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		// Topological, ties broken by the smallest path.
		if want := []string{"docs/notes.go", "util/util.go", "main.go"}; !slices.Equal(resp.Graph.GetOrder(), want) {
			t.Errorf("order = %v, want %v", resp.Graph.GetOrder(), want)
		}
		n := nodes(resp.Graph)
		if len(n) != 3 || !slices.Equal(n["main.go"], []string{"util/util.go"}) || len(n["util/util.go"]) != 0 || len(n["docs/notes.go"]) != 0 {
			t.Errorf("nodes = %v", n)
		}
		if resp.Strategy != builderv1.BuildStrategy_BUILD_STRATEGY_DEPENDENCY_ORDER || !strings.Contains(resp.StrategyReason, "1 of 3") {
			t.Errorf("strategy = %v (%q), want DEPENDENCY_ORDER", resp.Strategy, resp.StrategyReason)
		}
	})

	t.Run("no workspace, new project", func(t *testing.T) {
		resp, err := c.AnalyzeDependencies(ctx, &builderv1.AnalyzeDependenciesRequest{
			NewProject: true,
			Files: []*builderv1.PlannedFile{
				{Path: "b.py", Action: create, DependsOn: []string{"a.py"}},
				{Path: "a.py", Action: create},
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		if want := []string{"a.py", "b.py"}; !slices.Equal(resp.Graph.GetOrder(), want) {
			t.Errorf("order = %v, want %v", resp.Graph.GetOrder(), want)
		}
		if resp.Strategy != builderv1.BuildStrategy_BUILD_STRATEGY_SCAFFOLD_FIRST {
			t.Errorf("strategy = %v, want SCAFFOLD_FIRST", resp.Strategy)
		}
	})

	t.Run("independent files", func(t *testing.T) {
		resp, err := c.AnalyzeDependencies(ctx, &builderv1.AnalyzeDependenciesRequest{
			SandboxId: readySandbox,
			Files:     []*builderv1.PlannedFile{{Path: "x/x.go", Action: create, Content: "package x\n"}, {Path: "README.md", Action: modify}},
		})
		if err != nil {
			t.Fatal(err)
		}
		if resp.Strategy != builderv1.BuildStrategy_BUILD_STRATEGY_SEQUENTIAL || !slices.Equal(resp.Graph.GetOrder(), []string{"README.md", "x/x.go"}) {
			t.Errorf("strategy %v order %v, want SEQUENTIAL [README.md x/x.go]", resp.Strategy, resp.Graph.GetOrder())
		}
	})

	t.Run("workspace in an archive", func(t *testing.T) {
		files := map[string]string{
			"go.mod":            "module example.com/app\n\ngo 1.22\n",
			"util/util.go":      "package util\n\nimport \"example.com/app/store\"\n\nfunc Hello() string { return store.Name }\n",
			"README.md":         "# app\n",
			"./vendor/big.go":   "package big\n\n// " + strings.Repeat("x", 1<<20) + "\n",
			"assets/logo.svg":   "<svg/>",
			"util/util_test.go": "package util\n",
		}
		for _, gz := range []bool{true, false} {
			resp, err := c.AnalyzeDependencies(ctx, &builderv1.AnalyzeDependenciesRequest{
				Archive: tarball(t, gz, files),
				Files: []*builderv1.PlannedFile{
					{Path: "main.go", Action: create, Content: "package main\n\nimport \"example.com/app/util\"\n\nfunc main() { println(util.Hello()) }\n"},
					{Path: "store/store.go", Action: create, Content: "package store\n\nconst Name = \"app\"\n"},
				},
			})
			if err != nil {
				t.Fatalf("gzip %v: %v", gz, err)
			}
			// main.go reaches store.go through util.go, which exists in the archive only.
			if n := nodes(resp.Graph); !slices.Equal(n["main.go"], []string{"store/store.go"}) || !slices.Equal(resp.Graph.GetOrder(), []string{"store/store.go", "main.go"}) {
				t.Errorf("gzip %v: nodes %v order %v", gz, n, resp.Graph.GetOrder())
			}
		}
	})

	t.Run("unknown sandbox", func(t *testing.T) {
		_, err := c.AnalyzeDependencies(ctx, &builderv1.AnalyzeDependenciesRequest{
			SandboxId: missingSandbox, Files: []*builderv1.PlannedFile{{Path: "a.go", Action: create}}})
		grpctest.WantCode(t, err, codes.NotFound, missingSandbox)
	})
}

// tarball is a tar archive (gzip-compressed when gz) of files, in name order.
func tarball(t *testing.T, gz bool, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.Writer = &buf
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		w = zw
	}
	tw := tar.NewWriter(w)
	for _, name := range slices.Sorted(maps.Keys(files)) {
		c := files[name]
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(c)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(c)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}
