package loop

// Fake clients for the loop's phase tests (phases_test.go): one scripted stand-in per
// service the loop calls. Every fake embeds its generated client interface backed by a
// connection that answers UNIMPLEMENTED, so a call a test did not script fails the job
// with a clear error instead of panicking. Every call is recorded with a copy of its
// request, in order, for the tests to assert on.

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/db/dbtest"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/agent/internal/store"
	"github.com/thefold/thefold/services/agent/migrations"
)

// unimplemented is a client connection on which every call is UNIMPLEMENTED: the base of
// every fake, for the methods a test did not script.
type unimplemented struct{}

func (unimplemented) Invoke(_ context.Context, method string, _, _ any, _ ...grpc.CallOption) error {
	return status.Errorf(codes.Unimplemented, "fake: %s is not scripted", method)
}

func (unimplemented) NewStream(_ context.Context, _ *grpc.StreamDesc, method string, _ ...grpc.CallOption) (grpc.ClientStream, error) {
	return nil, status.Errorf(codes.Unimplemented, "fake: %s is not scripted", method)
}

// call is one recorded call.
type call struct {
	method string
	req    proto.Message
	at     time.Time
}

// fakes is the scripted world the loop talks to. Its func fields are the services'
// answers (newFakes sets a happy path: the task is planned, built and validated at the
// first try and stops at the review gate); a test replaces the ones it needs.
type fakes struct {
	mu    sync.Mutex
	calls []call

	GetRepo           func(*githubv1.GetRepoRequest) (*githubv1.GetRepoResponse, error)
	SearchMemories    func(*memoryv1.SearchMemoriesRequest) (*memoryv1.SearchMemoriesResponse, error)
	StoreMemory       func(*memoryv1.StoreMemoryRequest) (*memoryv1.StoreMemoryResponse, error)
	AssessConfidence  func(*aiv1.AssessConfidenceRequest) (*aiv1.AssessConfidenceResponse, error)
	PlanTask          func(*aiv1.PlanTaskRequest) (*aiv1.PlanTaskResponse, error)
	BatchCreateTasks  func(*tasksv1.BatchCreateTasksRequest) (*tasksv1.BatchCreateTasksResponse, error)
	CreatePullRequest func(*githubv1.CreatePullRequestRequest) (*githubv1.CreatePullRequestResponse, error)
	// Build is the outcome of the nth build (1-based) the job started.
	Build func(n int) *builderv1.BuildJob
	// Diagnose answers the nth diagnosis (1-based); Intervene the nth intervention.
	Diagnose  func(n int, req *aiv1.DiagnoseFailureRequest) (*aiv1.DiagnoseFailureResponse, error)
	Intervene func(n int, req *aiv1.InterveneRequest) (*aiv1.InterveneResponse, error)
	// Complexity is AssessComplexity's answer (default 3).
	Complexity int32
	// EstimateSubAgentCost and RunSubAgents answer the sub-agents phase (default: unimplemented).
	EstimateSubAgentCost func(*aiv1.EstimateSubAgentCostRequest) (*aiv1.EstimateSubAgentCostResponse, error)
	RunSubAgents         func(n int, req *aiv1.RunSubAgentsRequest) (*aiv1.RunSubAgentsResponse, error)
}

const (
	taskTitle = "Add a Hello function"
	taskDesc  = "greet.Hello returns a greeting"
	testRepo  = "local/r"
	testOwner = "user-alice"
)

var testTree = []string{"greet/greet.go", "pkg/x.go", "README.md"}

func newFakes() *fakes {
	return &fakes{
		GetRepo: func(req *githubv1.GetRepoRequest) (*githubv1.GetRepoResponse, error) {
			return &githubv1.GetRepoResponse{Repo: &githubv1.Repo{Permission: githubv1.RepoRole_REPO_ROLE_WRITE}}, nil
		},
		SearchMemories: func(*memoryv1.SearchMemoriesRequest) (*memoryv1.SearchMemoriesResponse, error) {
			return &memoryv1.SearchMemoriesResponse{}, nil
		},
		StoreMemory: func(req *memoryv1.StoreMemoryRequest) (*memoryv1.StoreMemoryResponse, error) {
			return &memoryv1.StoreMemoryResponse{Memory: &memoryv1.Memory{Id: "mem-" + shortHash(req.RequestId), Content: req.Content}}, nil
		},
		AssessConfidence: func(*aiv1.AssessConfidenceRequest) (*aiv1.AssessConfidenceResponse, error) {
			return &aiv1.AssessConfidenceResponse{Decision: aiv1.ConfidenceDecision_CONFIDENCE_DECISION_PROCEED, Confidence: 90, Reasoning: "clear"}, nil
		},
		PlanTask: func(req *aiv1.PlanTaskRequest) (*aiv1.PlanTaskResponse, error) {
			return &aiv1.PlanTaskResponse{Plan: &typev1.Plan{Summary: "plan for " + req.GetTask().GetTitle(), Steps: []*typev1.PlanStep{
				{Id: "s1", Action: typev1.FileAction_FILE_ACTION_CREATE, Path: "greet/hello.go", Description: "add Hello"}}}}, nil
		},
		BatchCreateTasks: func(req *tasksv1.BatchCreateTasksRequest) (*tasksv1.BatchCreateTasksResponse, error) {
			resp := &tasksv1.BatchCreateTasksResponse{}
			for i := range req.Tasks {
				resp.Tasks = append(resp.Tasks, &tasksv1.Task{Id: fmt.Sprintf("sub-%d", i+1)})
			}
			return resp, nil
		},
		CreatePullRequest: func(*githubv1.CreatePullRequestRequest) (*githubv1.CreatePullRequestResponse, error) {
			return &githubv1.CreatePullRequestResponse{PullRequest: &githubv1.PullRequest{Number: 7, Url: "http://forge/local/r/pulls/7"}}, nil
		},
		Build: func(int) *builderv1.BuildJob { return okBuild() },
		Diagnose: func(int, *aiv1.DiagnoseFailureRequest) (*aiv1.DiagnoseFailureResponse, error) {
			return &aiv1.DiagnoseFailureResponse{Category: aiv1.FailureCategory_FAILURE_CATEGORY_IMPLEMENTATION_ERROR, Reason: "a typo"}, nil
		},
		Intervene: func(int, *aiv1.InterveneRequest) (*aiv1.InterveneResponse, error) {
			return &aiv1.InterveneResponse{Action: aiv1.InterventionAction_INTERVENTION_ACTION_ESCALATE, Reason: "no idea"}, nil
		},
	}
}

// okBuild is a build that validated, changing one file.
func okBuild() *builderv1.BuildJob {
	return &builderv1.BuildJob{Status: builderv1.BuildStatus_BUILD_STATUS_COMPLETED, Usage: &typev1.Usage{InputTokens: 10},
		Report: &builderv1.BuildReport{Summary: "done", ValidationPassed: true,
			FilesChanged: []*typev1.FileDiff{{Path: "greet/hello.go", Action: typev1.FileAction_FILE_ACTION_CREATE}}}}
}

// failedBuild is a build whose validation failed with msg.
func failedBuild(msg string) *builderv1.BuildJob {
	return &builderv1.BuildJob{Status: builderv1.BuildStatus_BUILD_STATUS_FAILED, Usage: &typev1.Usage{InputTokens: 10},
		Report: &builderv1.BuildReport{Summary: "validation failed", ValidationOutput: msg,
			Diagnostics:  []*typev1.Diagnostic{{Path: "greet/hello.go", Line: 3, Message: msg}},
			FilesChanged: []*typev1.FileDiff{{Path: "greet/hello.go", Action: typev1.FileAction_FILE_ACTION_CREATE}}}}
}

// failing builds fail for the first n builds (each with its own error, so the loop guard
// sees progress), then validate.
func failing(n int) func(int) *builderv1.BuildJob {
	return func(i int) *builderv1.BuildJob {
		if i <= n {
			return failedBuild(fmt.Sprintf("undefined: hello%c", 'a'+rune(i)))
		}
		return okBuild()
	}
}

func (f *fakes) record(method string, req proto.Message) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call{method: method, req: proto.Clone(req), at: time.Now()})
}

// count is how many calls of method were made so far (this one included).
func (f *fakes) count(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if c.method == method {
			n++
		}
	}
	return n
}

// requests are the requests of method's calls, in order.
func requests[T proto.Message](f *fakes, method string) []T {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []T
	for _, c := range f.calls {
		if c.method == method {
			out = append(out, c.req.(T))
		}
	}
	return out
}

// callsOf are the calls of method, in order.
func (f *fakes) callsOf(method string) []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []call
	for _, c := range f.calls {
		if c.method == method {
			out = append(out, c)
		}
	}
	return out
}

// clients are the fakes as the loop's clients (no model registry, no skills).
func (f *fakes) clients() Clients {
	var u unimplemented
	return Clients{
		Tasks:   &fakeTasks{TaskServiceClient: tasksv1.NewTaskServiceClient(u), f: f},
		AI:      &fakeAI{AIServiceClient: aiv1.NewAIServiceClient(u), f: f},
		Builder: &fakeBuilder{BuilderServiceClient: builderv1.NewBuilderServiceClient(u), f: f},
		Sandbox: &fakeSandbox{SandboxServiceClient: sandboxv1.NewSandboxServiceClient(u), f: f},
		Repos:   &fakeRepos{RepoServiceClient: githubv1.NewRepoServiceClient(u), f: f},
		Memory:  &fakeMemory{MemoryServiceClient: memoryv1.NewMemoryServiceClient(u), f: f},
	}
}

type fakeTasks struct {
	tasksv1.TaskServiceClient
	f *fakes
}

func (c *fakeTasks) GetTask(_ context.Context, req *tasksv1.GetTaskRequest, _ ...grpc.CallOption) (*tasksv1.GetTaskResponse, error) {
	c.f.record("GetTask", req)
	return &tasksv1.GetTaskResponse{Task: &tasksv1.Task{Id: req.Id, Title: taskTitle, Description: taskDesc, Repo: testRepo,
		Status: tasksv1.TaskStatus_TASK_STATUS_PLANNED}}, nil
}

func (c *fakeTasks) SetTaskStatus(_ context.Context, req *tasksv1.SetTaskStatusRequest, _ ...grpc.CallOption) (*tasksv1.SetTaskStatusResponse, error) {
	c.f.record("SetTaskStatus", req)
	return &tasksv1.SetTaskStatusResponse{}, nil
}

func (c *fakeTasks) UpdateTask(_ context.Context, req *tasksv1.UpdateTaskRequest, _ ...grpc.CallOption) (*tasksv1.UpdateTaskResponse, error) {
	c.f.record("UpdateTask", req)
	return &tasksv1.UpdateTaskResponse{}, nil
}

func (c *fakeTasks) BatchCreateTasks(_ context.Context, req *tasksv1.BatchCreateTasksRequest, _ ...grpc.CallOption) (*tasksv1.BatchCreateTasksResponse, error) {
	c.f.record("BatchCreateTasks", req)
	return c.f.BatchCreateTasks(req)
}

type fakeAI struct {
	aiv1.AIServiceClient
	f *fakes
}

func (c *fakeAI) AssessConfidence(_ context.Context, req *aiv1.AssessConfidenceRequest, _ ...grpc.CallOption) (*aiv1.AssessConfidenceResponse, error) {
	c.f.record("AssessConfidence", req)
	return c.f.AssessConfidence(req)
}

func (c *fakeAI) AssessComplexity(_ context.Context, req *aiv1.AssessComplexityRequest, _ ...grpc.CallOption) (*aiv1.AssessComplexityResponse, error) {
	c.f.record("AssessComplexity", req)
	return &aiv1.AssessComplexityResponse{Complexity: cmp.Or(c.f.Complexity, 3)}, nil
}

func (c *fakeAI) EstimateSubAgentCost(_ context.Context, req *aiv1.EstimateSubAgentCostRequest, _ ...grpc.CallOption) (*aiv1.EstimateSubAgentCostResponse, error) {
	c.f.record("EstimateSubAgentCost", req)
	if c.f.EstimateSubAgentCost == nil {
		return nil, status.Error(codes.Unimplemented, "fake: EstimateSubAgentCost")
	}
	return c.f.EstimateSubAgentCost(req)
}

func (c *fakeAI) RunSubAgents(_ context.Context, req *aiv1.RunSubAgentsRequest, _ ...grpc.CallOption) (*aiv1.RunSubAgentsResponse, error) {
	c.f.record("RunSubAgents", req)
	if c.f.RunSubAgents == nil {
		return nil, status.Error(codes.Unimplemented, "fake: RunSubAgents")
	}
	return c.f.RunSubAgents(c.f.count("RunSubAgents"), req)
}

func (c *fakeAI) PlanTask(_ context.Context, req *aiv1.PlanTaskRequest, _ ...grpc.CallOption) (*aiv1.PlanTaskResponse, error) {
	c.f.record("PlanTask", req)
	return c.f.PlanTask(req)
}

func (c *fakeAI) DiagnoseFailure(_ context.Context, req *aiv1.DiagnoseFailureRequest, _ ...grpc.CallOption) (*aiv1.DiagnoseFailureResponse, error) {
	c.f.record("DiagnoseFailure", req)
	return c.f.Diagnose(c.f.count("DiagnoseFailure"), req)
}

func (c *fakeAI) Intervene(_ context.Context, req *aiv1.InterveneRequest, _ ...grpc.CallOption) (*aiv1.InterveneResponse, error) {
	c.f.record("Intervene", req)
	return c.f.Intervene(c.f.count("Intervene"), req)
}

func (c *fakeAI) ReviewCode(_ context.Context, req *aiv1.ReviewCodeRequest, _ ...grpc.CallOption) (*aiv1.ReviewCodeResponse, error) {
	c.f.record("ReviewCode", req)
	return &aiv1.ReviewCodeResponse{QualityScore: 8, Documentation: "adds Hello", Summary: "fine"}, nil
}

type fakeBuilder struct {
	builderv1.BuilderServiceClient
	f *fakes
}

func (c *fakeBuilder) StartBuild(_ context.Context, req *builderv1.StartBuildRequest, _ ...grpc.CallOption) (*builderv1.StartBuildResponse, error) {
	c.f.record("StartBuild", req)
	return &builderv1.StartBuildResponse{Build: &builderv1.BuildJob{Id: fmt.Sprintf("build-%d", c.f.count("StartBuild"))}}, nil
}

func (c *fakeBuilder) WatchBuild(_ context.Context, req *builderv1.WatchBuildRequest, _ ...grpc.CallOption) (grpc.ServerStreamingClient[builderv1.WatchBuildResponse], error) {
	c.f.record("WatchBuild", req)
	return endedStream{}, nil
}

func (c *fakeBuilder) GetBuild(_ context.Context, req *builderv1.GetBuildRequest, _ ...grpc.CallOption) (*builderv1.GetBuildResponse, error) {
	c.f.record("GetBuild", req)
	n, err := strconv.Atoi(strings.TrimPrefix(req.Id, "build-"))
	if err != nil {
		return nil, status.Errorf(codes.NotFound, "fake: build %q", req.Id)
	}
	b := c.f.Build(n)
	b.Id = req.Id
	return &builderv1.GetBuildResponse{Build: b}, nil
}

// ResumeBuild finds the fake's builds never paused.
func (c *fakeBuilder) ResumeBuild(_ context.Context, req *builderv1.ResumeBuildRequest, _ ...grpc.CallOption) (*builderv1.ResumeBuildResponse, error) {
	c.f.record("ResumeBuild", req)
	return nil, status.Errorf(codes.FailedPrecondition, "fake: build %s is not paused", req.Id)
}

// endedStream is a WatchBuild stream of a build that has already ended.
type endedStream struct{ grpc.ClientStream }

func (endedStream) Recv() (*builderv1.WatchBuildResponse, error) { return nil, io.EOF }

type fakeSandbox struct {
	sandboxv1.SandboxServiceClient
	f *fakes
}

func (c *fakeSandbox) CreateSandbox(_ context.Context, req *sandboxv1.CreateSandboxRequest, _ ...grpc.CallOption) (*sandboxv1.CreateSandboxResponse, error) {
	c.f.record("CreateSandbox", req)
	return &sandboxv1.CreateSandboxResponse{Sandbox: &sandboxv1.Sandbox{Id: fmt.Sprintf("sb-%d", c.f.count("CreateSandbox"))}}, nil
}

func (c *fakeSandbox) DestroySandbox(_ context.Context, req *sandboxv1.DestroySandboxRequest, _ ...grpc.CallOption) (*sandboxv1.DestroySandboxResponse, error) {
	c.f.record("DestroySandbox", req)
	return &sandboxv1.DestroySandboxResponse{}, nil
}

func (c *fakeSandbox) KeepAliveSandbox(_ context.Context, req *sandboxv1.KeepAliveSandboxRequest, _ ...grpc.CallOption) (*sandboxv1.KeepAliveSandboxResponse, error) {
	c.f.record("KeepAliveSandbox", req)
	return &sandboxv1.KeepAliveSandboxResponse{}, nil
}

func (c *fakeSandbox) Diff(_ context.Context, req *sandboxv1.DiffRequest, _ ...grpc.CallOption) (*sandboxv1.DiffResponse, error) {
	c.f.record("Diff", req)
	return &sandboxv1.DiffResponse{Files: []*typev1.FileDiff{{Path: "greet/hello.go", Action: typev1.FileAction_FILE_ACTION_CREATE, UnifiedDiff: "+package greet"}}}, nil
}

func (c *fakeSandbox) ReadFile(_ context.Context, req *sandboxv1.ReadFileRequest, _ ...grpc.CallOption) (*sandboxv1.ReadFileResponse, error) {
	c.f.record("ReadFile", req)
	return &sandboxv1.ReadFileResponse{Content: []byte("package greet\n")}, nil
}

type fakeRepos struct {
	githubv1.RepoServiceClient
	f *fakes
}

func (c *fakeRepos) GetRepo(_ context.Context, req *githubv1.GetRepoRequest, _ ...grpc.CallOption) (*githubv1.GetRepoResponse, error) {
	c.f.record("GetRepo", req)
	return c.f.GetRepo(req)
}

func (c *fakeRepos) GetTree(_ context.Context, req *githubv1.GetTreeRequest, _ ...grpc.CallOption) (*githubv1.GetTreeResponse, error) {
	c.f.record("GetTree", req)
	resp := &githubv1.GetTreeResponse{}
	for _, p := range testTree {
		resp.Entries = append(resp.Entries, &githubv1.TreeEntry{Path: p, Type: githubv1.TreeEntryType_TREE_ENTRY_TYPE_FILE})
	}
	return resp, nil
}

// FindRelevantFiles answers greet/greet.go and the include paths asked for.
func (c *fakeRepos) FindRelevantFiles(_ context.Context, req *githubv1.FindRelevantFilesRequest, _ ...grpc.CallOption) (*githubv1.FindRelevantFilesResponse, error) {
	c.f.record("FindRelevantFiles", req)
	resp := &githubv1.FindRelevantFilesResponse{}
	for _, p := range append([]string{"greet/greet.go"}, req.IncludePaths...) {
		resp.Files = append(resp.Files, &githubv1.RelevantFile{Path: p, Content: "// " + p, ContentIncluded: true})
	}
	return resp, nil
}

func (c *fakeRepos) CreateBranch(_ context.Context, req *githubv1.CreateBranchRequest, _ ...grpc.CallOption) (*githubv1.CreateBranchResponse, error) {
	c.f.record("CreateBranch", req)
	return &githubv1.CreateBranchResponse{}, nil
}

func (c *fakeRepos) CommitFiles(_ context.Context, req *githubv1.CommitFilesRequest, _ ...grpc.CallOption) (*githubv1.CommitFilesResponse, error) {
	c.f.record("CommitFiles", req)
	return &githubv1.CommitFilesResponse{CommitSha: "abc123"}, nil
}

func (c *fakeRepos) CommentOnIssue(_ context.Context, req *githubv1.CommentOnIssueRequest, _ ...grpc.CallOption) (*githubv1.CommentOnIssueResponse, error) {
	c.f.record("CommentOnIssue", req)
	return &githubv1.CommentOnIssueResponse{Comment: &githubv1.IssueComment{Id: "c1", Body: req.Body}}, nil
}

func (c *fakeRepos) CreatePullRequest(_ context.Context, req *githubv1.CreatePullRequestRequest, _ ...grpc.CallOption) (*githubv1.CreatePullRequestResponse, error) {
	c.f.record("CreatePullRequest", req)
	return c.f.CreatePullRequest(req)
}

type fakeMemory struct {
	memoryv1.MemoryServiceClient
	f *fakes
}

func (c *fakeMemory) SearchMemories(_ context.Context, req *memoryv1.SearchMemoriesRequest, _ ...grpc.CallOption) (*memoryv1.SearchMemoriesResponse, error) {
	c.f.record("SearchMemories", req)
	return c.f.SearchMemories(req)
}

func (c *fakeMemory) StoreMemory(_ context.Context, req *memoryv1.StoreMemoryRequest, _ ...grpc.CallOption) (*memoryv1.StoreMemoryResponse, error) {
	c.f.record("StoreMemory", req)
	return c.f.StoreMemory(req)
}

// isStrategySearch reports whether req is the strategy-hint lookup.
func isStrategySearch(req *memoryv1.SearchMemoriesRequest) bool {
	return slices.Equal(req.Types, []typev1.MemoryType{typev1.MemoryType_MEMORY_TYPE_STRATEGY})
}

// harness is an engine over a fresh agent schema with the fakes as its services.
type harness struct {
	t  *testing.T
	st *store.Store
	f  *fakes
	e  *Engine
}

// testConfig is a fast loop: tiny backoff, small context.
func testConfig() Config {
	return Config{LeaseExpiry: 10 * time.Second, RenewEvery: time.Second, MaxAttempts: 5, InterveneAfter: 3, MaxPlanRevisions: 2,
		Backoff: time.Millisecond, ContextTokens: 1000, ContextFiles: 5, CallTimeout: 10 * time.Second, SandboxTTL: time.Hour}
}

func newHarness(t *testing.T, f *fakes, cfg Config) *harness {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "agent", migrations.FS)
	st := store.New(pool, nil)
	return &harness{t: t, st: st, f: f, e: New(st, f.clients(), nil, cfg, nil)}
}

func noEnqueue(context.Context, pgx.Tx, string) error { return nil }

// start creates a queued job (budget as given) and runs it until it stops; it returns the
// job's record as stored.
func (h *harness) start(budget *typev1.Budget) *store.Record {
	h.t.Helper()
	return h.run(h.create(budget))
}

// create creates a queued job and returns its id.
func (h *harness) create(budget *typev1.Budget) string {
	h.t.Helper()
	return h.createWith(budget, nil)
}

// createWith creates a queued job that started under prefs and returns its id.
func (h *harness) createWith(budget *typev1.Budget, prefs *agentv1.Preferences) string {
	h.t.Helper()
	rec, created, err := h.st.Create(context.Background(), &agentv1.Job{OwnerId: testOwner, TaskId: uuid.NewString(), Repo: testRepo,
		BaseBranch: "main", Budget: budget, Preferences: prefs}, "", nil, store.RateLimit{}, noEnqueue)
	if err != nil || !created {
		h.t.Fatalf("create job: %v (created %v)", err, created)
	}
	return rec.Job.Id
}

// seed changes job id's stored checkpoint (as a resumed job would find it).
func (h *harness) seed(id string, change func(rec *store.Record)) {
	h.t.Helper()
	if _, err := h.st.Mutate(context.Background(), testOwner, id, func(_ context.Context, _ pgx.Tx, rec *store.Record) (store.Step, error) {
		change(rec)
		return store.Step{}, nil
	}, nil); err != nil {
		h.t.Fatalf("seed: %v", err)
	}
}

// run runs job id until it stops and returns its stored record.
func (h *harness) run(id string) *store.Record {
	h.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := h.e.Run(ctx, id); err != nil {
		h.t.Logf("run: %v", err)
	}
	rec, err := h.st.Load(context.Background(), id)
	if err != nil {
		h.t.Fatalf("load job: %v", err)
	}
	return rec
}

// approve approves the job's pending review the way ReviewService does and runs the job on.
func (h *harness) approve(id string) *store.Record {
	h.t.Helper()
	_, err := h.st.Mutate(context.Background(), testOwner, id, func(ctx context.Context, tx pgx.Tx, rec *store.Record) (store.Step, error) {
		r, err := store.LoadReview(ctx, tx, rec.Job.ReviewId)
		if err != nil {
			return store.Step{}, err
		}
		r.Status = agentv1.ReviewStatus_REVIEW_STATUS_APPROVED
		prev := rec.Job.Status
		rec.Job.Status, rec.Job.Phase = running, phaseComplete
		return store.Step{Events: []*agentv1.WatchJobResponse{store.StatusEvent(prev, rec.Job)},
			After: func(ctx context.Context, tx pgx.Tx) error { return store.UpdateReview(ctx, tx, r) }}, nil
	}, nil)
	if err != nil {
		h.t.Fatalf("approve: %v", err)
	}
	return h.run(id)
}

// events are the job's events as stored, in order.
func (h *harness) events(id string) []*agentv1.WatchJobResponse {
	h.t.Helper()
	rows, err := h.st.Pool().Query(context.Background(), `SELECT payload FROM events WHERE stream = $1 AND aggregate_id = $2 ORDER BY id`, store.EventStream, id)
	if err != nil {
		h.t.Fatalf("events: %v", err)
	}
	payloads, err := pgx.CollectRows(rows, pgx.RowTo[[]byte])
	if err != nil {
		h.t.Fatalf("events: %v", err)
	}
	var out []*agentv1.WatchJobResponse
	for _, p := range payloads {
		e := &agentv1.WatchJobResponse{}
		if err := (protojson.UnmarshalOptions{DiscardUnknown: true}).Unmarshal(p, e); err != nil {
			h.t.Fatalf("event %s: %v", p, err)
		}
		out = append(out, e)
	}
	return out
}

// thoughts are the texts of the job's THOUGHT events.
func (h *harness) thoughts(id string) []string {
	var out []string
	for _, e := range h.events(id) {
		if e.Type == agentv1.JobEventType_JOB_EVENT_TYPE_THOUGHT {
			out = append(out, e.GetThought().GetText())
		}
	}
	return out
}

// ofType are the job's events of type typ.
func (h *harness) ofType(id string, typ agentv1.JobEventType) []*agentv1.WatchJobResponse {
	var out []*agentv1.WatchJobResponse
	for _, e := range h.events(id) {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// diagnoses are the DIAGNOSED events' diagnoses.
func (h *harness) diagnoses(id string) []*agentv1.Diagnosis {
	var out []*agentv1.Diagnosis
	for _, e := range h.ofType(id, agentv1.JobEventType_JOB_EVENT_TYPE_DIAGNOSED) {
		out = append(out, e.GetDiagnosis())
	}
	return out
}

// recoveries are the recoveries the diagnoses chose, for messages.
func recoveries(ds []*agentv1.Diagnosis) []string {
	var out []string
	for _, d := range ds {
		out = append(out, d.Recovery)
	}
	return out
}

// truncateList is at most n of ss (the first n-1 and the last).
func truncateList(ss []string, n int) []string {
	if len(ss) <= n {
		return ss
	}
	return append(slices.Clip(ss[:n-1]), "…", ss[len(ss)-1])
}

// wantStatus fails the test unless the job ended in want with a reason containing reason.
func wantStatus(t *testing.T, rec *store.Record, want agentv1.JobStatus, reason string) {
	t.Helper()
	if j := rec.Job; j.Status != want || !strings.Contains(j.StatusReason, reason) {
		t.Fatalf("job is %v (%q, error %q, phase %v), want %v with %q", j.Status, j.StatusReason, j.Error, j.Phase, want, reason)
	}
}

// anyContains reports whether some s contains sub.
func anyContains(ss []string, sub string) bool {
	return slices.ContainsFunc(ss, func(s string) bool { return strings.Contains(s, sub) })
}

// taskStatuses are the statuses the job set its task to, in order.
func (f *fakes) taskStatuses() []tasksv1.TaskStatus {
	var out []tasksv1.TaskStatus
	for _, r := range requests[*tasksv1.SetTaskStatusRequest](f, "SetTaskStatus") {
		out = append(out, r.Status)
	}
	return out
}
