package monitor_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/agent/internal/monitor"
	"github.com/thefold/thefold/services/agent/internal/store"
	"github.com/thefold/thefold/services/agent/migrations"
)

// repoState is what the scripted sandbox finds in the repository.
type repoState struct {
	testsFail bool
	// modules is go list -m -u -json's answer; "" with noProxy: no package source.
	modules string
	noProxy bool
	// markers is grep's output.
	markers string
	// unavailable makes CreateSandbox UNAVAILABLE.
	unavailable bool
	// files are the workspace's manifests (go.mod unless set).
	files map[string]string
	// npmOutdated and pipOutdated are npm's and pip's answers; npmMissing: npm is not
	// installed (exit 127).
	npmOutdated, pipOutdated string
	npmMissing               bool
	// vulns is govulncheck's answer; "": the server has no vulnerability database.
	// vulnsMissing: govulncheck is not installed (exit 127).
	vulns        string
	vulnsMissing bool
}

// sandboxes is a sandbox service that answers from a repoState and records the commands
// run, with the caller of each.
type sandboxes struct {
	sandboxv1.UnimplementedSandboxServiceServer
	mu        sync.Mutex
	repo      repoState
	created   []*sandboxv1.CreateSandboxRequest
	callers   []string
	destroyed int
	commands  []*sandboxv1.RunCommandRequest
}

func (s *sandboxes) state() repoState {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.repo
}

func (s *sandboxes) set(f func(*repoState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.repo)
}

func (s *sandboxes) CreateSandbox(ctx context.Context, req *sandboxv1.CreateSandboxRequest) (*sandboxv1.CreateSandboxResponse, error) {
	p, _ := auth.FromContext(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.repo.unavailable {
		return nil, status.Error(codes.Unavailable, "no sandbox capacity")
	}
	s.created, s.callers = append(s.created, req), append(s.callers, p.UserID)
	return &sandboxv1.CreateSandboxResponse{Sandbox: &sandboxv1.Sandbox{Id: fmt.Sprintf("sb-%d", len(s.created)), BaseCommit: "c0ffee", Language: "go"}}, nil
}

func (s *sandboxes) DestroySandbox(context.Context, *sandboxv1.DestroySandboxRequest) (*sandboxv1.DestroySandboxResponse, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.destroyed++
	return &sandboxv1.DestroySandboxResponse{}, nil
}

func (s *sandboxes) ReadFile(_ context.Context, req *sandboxv1.ReadFileRequest) (*sandboxv1.ReadFileResponse, error) {
	files := s.state().files
	if files == nil {
		files = map[string]string{"go.mod": "module example.com/app\n"}
	}
	c, ok := files[req.Path]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "%s: no such file", req.Path)
	}
	return &sandboxv1.ReadFileResponse{Content: []byte(c)}, nil
}

func (s *sandboxes) Validate(_ context.Context, req *sandboxv1.ValidateRequest) (*sandboxv1.ValidateResponse, error) {
	if len(req.Steps) != 3 {
		return nil, status.Errorf(codes.InvalidArgument, "the monitor asks for typecheck, build and test, got %v", req.Steps)
	}
	test := &sandboxv1.StepResult{Kind: sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TEST, Status: sandboxv1.StepStatus_STEP_STATUS_PASSED,
		Command: []string{"go", "test", "./..."}}
	if s.state().testsFail {
		test.Status, test.ExitCode, test.Output = sandboxv1.StepStatus_STEP_STATUS_FAILED, 1, "--- FAIL: TestGreet\n    greet_test.go:9: got hi, want hello\nFAIL"
	}
	return &sandboxv1.ValidateResponse{Toolchain: "go", Steps: []*sandboxv1.StepResult{
		{Kind: sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TYPECHECK, Status: sandboxv1.StepStatus_STEP_STATUS_PASSED, Command: []string{"go", "build", "./..."}},
		test,
	}}, nil
}

func (s *sandboxes) RunCommand(req *sandboxv1.RunCommandRequest, stream grpc.ServerStreamingServer[sandboxv1.RunCommandResponse]) error {
	s.mu.Lock()
	s.commands = append(s.commands, req)
	repo := s.repo
	s.mu.Unlock()
	out, exit := "", int32(0)
	switch req.Command[0] {
	case "go":
		if req.Network != sandboxv1.NetworkPolicy_NETWORK_POLICY_PACKAGES {
			out, exit = "go: module lookup disabled by GOPROXY=off", 1
		} else if repo.noProxy {
			return errs.Invalid("network", "NETWORK_POLICY_PACKAGES for go needs a package source configured on the server (THEFOLD_SANDBOX_GOPROXY); none is")
		} else if req.Command[1] == "list" {
			out = repo.modules
		}
	case "npm":
		switch {
		case repo.npmMissing:
			out, exit = "sh: npm: not found", 127
		case req.Command[1] == "outdated" && repo.npmOutdated != "":
			out, exit = repo.npmOutdated, 1
		}
	case "pip":
		if req.Command[1] == "list" {
			out = repo.pipOutdated
		}
	case "govulncheck":
		switch {
		case req.Network != sandboxv1.NetworkPolicy_NETWORK_POLICY_PACKAGES:
			out, exit = "govulncheck: fetching vulnerabilities: no network", 1
		case repo.vulns == "":
			return errs.Invalid("network", "NETWORK_POLICY_PACKAGES for govulncheck needs a vulnerability database configured on the server (THEFOLD_SANDBOX_GOVULNDB); none is")
		case repo.vulnsMissing:
			out, exit = "sh: govulncheck: not found", 127
		default:
			out = repo.vulns
		}
	case "grep":
		out = repo.markers
		if out == "" {
			exit = 1
		}
	default:
		return status.Errorf(codes.InvalidArgument, "not scripted: %v", req.Command)
	}
	if out != "" {
		if err := stream.Send(&sandboxv1.RunCommandResponse{Event: &sandboxv1.RunCommandResponse_Output{Output: &sandboxv1.OutputChunk{
			Stream: sandboxv1.OutputStream_OUTPUT_STREAM_STDOUT, Data: []byte(out)}}}); err != nil {
			return err
		}
	}
	return stream.Send(&sandboxv1.RunCommandResponse{Event: &sandboxv1.RunCommandResponse_Result{Result: &sandboxv1.CommandResult{ExitCode: exit}}})
}

// tasks is a tasks service that keeps the tasks created, once per request_id.
type tasks struct {
	tasksv1.UnimplementedTaskServiceServer
	mu      sync.Mutex
	created []*tasksv1.CreateTaskRequest
	callers []string
	byKey   map[string]string
}

func (f *tasks) CreateTask(ctx context.Context, req *tasksv1.CreateTaskRequest) (*tasksv1.CreateTaskResponse, error) {
	p, _ := auth.FromContext(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	if id, ok := f.byKey[req.RequestId]; ok {
		return &tasksv1.CreateTaskResponse{Task: &tasksv1.Task{Id: id}}, nil
	}
	f.created, f.callers = append(f.created, proto.Clone(req).(*tasksv1.CreateTaskRequest)), append(f.callers, p.UserID)
	id := fmt.Sprintf("task-%d", len(f.created))
	f.byKey[req.RequestId] = id
	return &tasksv1.CreateTaskResponse{Task: &tasksv1.Task{Id: id}}, nil
}

func (f *tasks) all() []*tasksv1.CreateTaskRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]*tasksv1.CreateTaskRequest(nil), f.created...)
}

// starter records the tasks started and as whom.
type starter struct {
	mu      sync.Mutex
	started []string
	callers []string
}

func (s *starter) StartTask(ctx context.Context, req *agentv1.StartTaskRequest) (*agentv1.StartTaskResponse, error) {
	p, _ := auth.FromContext(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started, s.callers = append(s.started, req.TaskId), append(s.callers, p.UserID)
	return &agentv1.StartTaskResponse{Job: &agentv1.Job{Id: "job-1"}}, nil
}

type env struct {
	st    *store.Store
	sb    *sandboxes
	tasks *tasks
	start *starter
	m     *monitor.Monitor
	conn  *agentv1.RepoConnection
}

const outdated = `{"Path": "example.com/app", "Main": true, "GoVersion": "1.22"}
{"Path": "example.test/dep", "Version": "v1.0.0", "Update": {"Path": "example.test/dep", "Version": "v1.1.0"}}
{"Path": "example.test/deep", "Version": "v0.1.0", "Indirect": true, "Update": {"Path": "example.test/deep", "Version": "v0.2.0"}}
{"Path": "example.test/fresh", "Version": "v2.0.0"}
`

func newEnv(t *testing.T, h *agentv1.RepoHealthSettings, cfg monitor.Config) *env {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "agent", migrations.FS)
	st := store.New(pool, nil)
	sb := &sandboxes{repo: repoState{modules: outdated, markers: "./main.go:3:// TODO: greet in more languages\n./vendor/a/b.go:1:// TODO: theirs\n" +
		"./x/y.go:10:\t// FIXME: racy\n./api/api.pb.go:7:// TODO: generated\n./img.png:2:\x00TODO\xff\n"}}
	tk := &tasks{byKey: map[string]string{}}
	g := grpctest.Start(t, func(s *grpc.Server) {
		sandboxv1.RegisterSandboxServiceServer(s, sb)
		tasksv1.RegisterTaskServiceServer(s, tk)
	})
	start := &starter{}
	m := monitor.New(st, monitor.Clients{Sandbox: sandboxv1.NewSandboxServiceClient(g.Conn), Tasks: tasksv1.NewTaskServiceClient(g.Conn), Agent: start},
		g.ServiceSigner(t, "agent"), func(u string) bool { return u == "user-disabled" }, cfg, nil)
	if h == nil {
		h = &agentv1.RepoHealthSettings{TodoThreshold: 200}
	}
	conn, _, err := st.CreateConnection(context.Background(), &agentv1.RepoConnection{OwnerId: "user-alice", Repo: "local/r", Health: h}, []byte("sealed"), "")
	if err != nil {
		t.Fatal(err)
	}
	return &env{st: st, sb: sb, tasks: tk, start: start, m: m, conn: conn}
}

// check queues a check of the connection, runs the monitor once and returns the report.
func (e *env) check(t *testing.T) *agentv1.RepoHealthReport {
	t.Helper()
	ctx := context.Background()
	r, _, err := e.st.QueueHealthCheck(ctx, e.conn.Id, "")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := e.m.Once(ctx); err != nil || n != 1 {
		t.Fatalf("Once: %d checks, %v", n, err)
	}
	got, err := e.st.LatestHealthReport(ctx, e.conn.Id)
	if err != nil {
		t.Fatal(err)
	}
	if got.Id != r.Id {
		t.Fatalf("the latest report is %s, not the check queued (%s)", got.Id, r.Id)
	}
	return got
}

func checkStatus(r *agentv1.RepoHealthReport, name string) agentv1.RepoHealthCheckStatus {
	for _, c := range r.Checks {
		if c.Name == name {
			return c.Status
		}
	}
	return agentv1.RepoHealthCheckStatus_REPO_HEALTH_CHECK_STATUS_UNSPECIFIED
}

func keys(fs []*agentv1.RepoHealthFinding) string {
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s:%s:%v", f.Key, f.TaskId, f.New))
	}
	return strings.Join(out, " ")
}

// A check of a repository with an outdated direct dependency and failing tests files one
// healing task per finding, as the owner; the next check files none (the findings keep
// their tasks); a finding that went away and came back files a new one.
func TestFindingsFileOneTaskEach(t *testing.T) {
	e := newEnv(t, nil, monitor.DefaultConfig)
	e.sb.set(func(r *repoState) { r.testsFail = true })
	r := e.check(t)
	if r.State != agentv1.RepoHealthState_REPO_HEALTH_STATE_DONE || r.Commit != "c0ffee" || r.FinishTime == nil {
		t.Fatalf("report: %v", r)
	}
	want := map[string]agentv1.RepoHealthCheckStatus{"build": 1, "test": 2, "dependencies": 2, "vulnerabilities": 3, "todos": 1}
	for name, st := range want {
		if got := checkStatus(r, name); got != st {
			t.Errorf("%s: %s, want %s", name, got, st)
		}
	}
	if len(r.Outdated) != 2 || r.Outdated[0].Name != "example.test/dep" || !r.Outdated[0].Direct || r.Outdated[0].Latest != "v1.1.0" || r.Outdated[1].Direct {
		t.Errorf("outdated: %v", r.Outdated)
	}
	if r.TodoCount != 2 || r.Todos[1].Path != "x/y.go" || r.Todos[1].Line != 10 || r.Todos[1].Text != "// FIXME: racy" {
		t.Errorf("todos: %d %v", r.TodoCount, r.Todos)
	}
	if got := keys(r.Findings); got != "tests:task-1:true dependency:go:example.test/dep:task-2:true" {
		t.Fatalf("findings: %s", got)
	}
	created := e.tasks.all()
	if len(created) != 2 {
		t.Fatalf("%d tasks filed, want 2", len(created))
	}
	for i, c := range created {
		if c.Source != tasksv1.TaskSource_TASK_SOURCE_HEALING || c.Repo != "local/r" || c.ExternalId == "" || len(c.ExternalId) > 128 ||
			c.RequestId != c.ExternalId || e.tasks.callers[i] != "user-alice" {
			t.Errorf("task %d: %v as %q", i, c, e.tasks.callers[i])
		}
	}
	if d := created[0].Description; !strings.Contains(d, "got hi, want hello") || !strings.Contains(d, `<data kind="health_evidence"`) {
		t.Errorf("the tests' task does not carry the failure, fenced:\n%s", d)
	}
	if d := created[1].Description; !strings.Contains(d, "example.test/dep v1.0.0") || !strings.Contains(d, "v1.1.0") {
		t.Errorf("the dependency's task does not name the versions:\n%s", d)
	}
	// The go list ran with the package source; the sandbox was made as the owner and destroyed.
	var list *sandboxv1.RunCommandRequest
	for _, c := range e.sb.commands {
		if c.Command[0] == "go" {
			list = c
		}
	}
	if list == nil || list.Network != sandboxv1.NetworkPolicy_NETWORK_POLICY_PACKAGES || strings.Join(list.Command, " ") != "go list -m -u -json all" {
		t.Errorf("go list: %v", list)
	}
	if e.sb.callers[0] != "user-alice" || e.sb.destroyed != 1 || e.sb.created[0].Repo != "local/r" || e.sb.created[0].Ref != "" {
		t.Errorf("sandbox: created %v as %v, destroyed %d", e.sb.created, e.sb.callers, e.sb.destroyed)
	}

	// The same findings again: no new task.
	r = e.check(t)
	if got := keys(r.Findings); got != "tests:task-1:false dependency:go:example.test/dep:task-2:false" {
		t.Fatalf("second check's findings: %s", got)
	}
	if n := len(e.tasks.all()); n != 2 {
		t.Fatalf("%d tasks after the second check, want 2", n)
	}
	// The tests pass: the finding closes. They fail again: a new occurrence, a new task.
	e.sb.set(func(r *repoState) { r.testsFail = false })
	if r = e.check(t); keys(r.Findings) != "dependency:go:example.test/dep:task-2:false" {
		t.Fatalf("third check's findings: %s", keys(r.Findings))
	}
	e.sb.set(func(r *repoState) { r.testsFail = true })
	r = e.check(t)
	if got := keys(r.Findings); got != "tests:task-3:true dependency:go:example.test/dep:task-2:false" {
		t.Fatalf("fourth check's findings: %s", got)
	}
	all := e.tasks.all()
	if len(all) != 3 || all[2].ExternalId == all[0].ExternalId {
		t.Fatalf("tasks: %v", all)
	}
	open, err := e.st.OpenFindings(context.Background(), e.conn.Id)
	if err != nil || len(open) != 2 {
		t.Fatalf("open findings: %v %v", open, err)
	}
	trend, err := e.st.HealthTrend(context.Background(), e.conn.Id, 10)
	if err != nil || len(trend) != 4 || trend[0].FailedChecks != 2 || trend[1].FailedChecks != 1 || trend[0].OutdatedCount != 2 || trend[0].FindingCount != 2 {
		t.Fatalf("trend: %v %v", trend, err)
	}
	if len(e.start.started) != 0 {
		t.Errorf("tasks started without auto_start: %v", e.start.started)
	}
}

// Without a package source the dependency audit is skipped, and a dependency finding seen
// before stays open (its part did not run); markers over the threshold are a finding, and
// markers a month-old check saw are stale.
func TestSkippedPartsKeepTheirFindings(t *testing.T) {
	cfg := monitor.DefaultConfig
	cfg.StaleAge = 0 // every earlier check is old enough
	e := newEnv(t, &agentv1.RepoHealthSettings{TodoThreshold: 1}, cfg)
	r := e.check(t)
	if got := keys(r.Findings); got != "dependency:go:example.test/dep:task-1:true todos:task-2:true" {
		t.Fatalf("findings: %s", got)
	}
	if r.StaleTodoCount != 0 {
		t.Errorf("first check: %d stale markers", r.StaleTodoCount)
	}
	e.sb.set(func(r *repoState) {
		r.noProxy = true
		r.markers = "./main.go:4:// TODO: greet in more languages\n./new.go:1:// TODO: new\n./z.go:2:// TODO: z\n"
	})
	r = e.check(t)
	if checkStatus(r, "dependencies") != agentv1.RepoHealthCheckStatus_REPO_HEALTH_CHECK_STATUS_SKIPPED {
		t.Fatalf("dependencies without a package source: %v", r.Checks)
	}
	if got := keys(r.Findings); got != "todos:task-2:false" {
		t.Fatalf("second check's findings: %s", got)
	}
	open, err := e.st.OpenFindings(context.Background(), e.conn.Id)
	if err != nil || keys(open) != "dependency:go:example.test/dep:task-1:false todos:task-2:false" {
		t.Fatalf("open findings: %s %v", keys(open), err)
	}
	// main.go's marker moved a line down: still the same one, so stale.
	if r.TodoCount != 3 || r.StaleTodoCount != 1 {
		t.Errorf("markers %d, stale %d; want 3 and 1", r.TodoCount, r.StaleTodoCount)
	}
}

// auto_start starts each healing task as the owner.
func TestAutoStart(t *testing.T) {
	e := newEnv(t, &agentv1.RepoHealthSettings{TodoThreshold: 200, AutoStart: true}, monitor.DefaultConfig)
	e.check(t)
	if strings.Join(e.start.started, ",") != "task-1" || e.start.callers[0] != "user-alice" {
		t.Fatalf("started %v as %v", e.start.started, e.start.callers)
	}
}

// A sandbox that cannot be had puts the check back in the queue until its attempts run out;
// then it FAILED, with why.
func TestUnavailableSandboxRetries(t *testing.T) {
	cfg := monitor.DefaultConfig
	cfg.MaxAttempts = 2
	e := newEnv(t, nil, cfg)
	e.sb.set(func(r *repoState) { r.unavailable = true })
	ctx := context.Background()
	q, _, err := e.st.QueueHealthCheck(ctx, e.conn.Id, "")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []agentv1.RepoHealthState{agentv1.RepoHealthState_REPO_HEALTH_STATE_QUEUED, agentv1.RepoHealthState_REPO_HEALTH_STATE_FAILED} {
		if _, err := e.m.Once(ctx); err != nil {
			t.Fatal(err)
		}
		r, err := e.st.LatestHealthReport(ctx, e.conn.Id)
		if err != nil {
			t.Fatal(err)
		}
		if r.Id != q.Id || r.State != want {
			t.Fatalf("after attempt %d: %s, want %s", i+1, r.State, want)
		}
		if want == agentv1.RepoHealthState_REPO_HEALTH_STATE_FAILED && !strings.Contains(r.Error, "no sandbox capacity") {
			t.Errorf("error: %q", r.Error)
		}
	}
	if n := len(e.tasks.all()); n != 0 {
		t.Errorf("%d tasks filed by a check that did not run", n)
	}
}

// A connection with the monitor on is checked when due, once per interval.
func TestPeriodicChecks(t *testing.T) {
	e := newEnv(t, &agentv1.RepoHealthSettings{Enabled: true, TodoThreshold: 200}, monitor.DefaultConfig)
	ctx := context.Background()
	// CreateConnection stores the interval it is given: a day.
	if _, err := e.st.UpdateConnection(ctx, "user-alice", e.conn.Id, store.ConnectionUpdate{Health: &agentv1.RepoHealthSettings{Enabled: true,
		TodoThreshold: 200, Interval: durationOf(time.Hour)}}); err != nil {
		t.Fatal(err)
	}
	if n, err := e.m.Once(ctx); err != nil || n != 1 {
		t.Fatalf("first Once: %d checks, %v", n, err)
	}
	if n, err := e.m.Once(ctx); err != nil || n != 0 {
		t.Fatalf("second Once: %d checks, %v (the next is an hour away)", n, err)
	}
	r, err := e.st.LatestHealthReport(ctx, e.conn.Id)
	if err != nil || r.Manual || r.State != agentv1.RepoHealthState_REPO_HEALTH_STATE_DONE {
		t.Fatalf("periodic report: %v %v", r, err)
	}
	c, err := e.st.GetConnection(ctx, "user-alice", e.conn.Id)
	if err != nil {
		t.Fatal(err)
	}
	if next := time.Until(c.Health.NextCheckTime.AsTime()); next < 59*time.Minute || next > time.Hour {
		t.Errorf("next check in %s, want an hour", next)
	}
}

// A disabled owner's check fails without a sandbox.
func TestDisabledOwner(t *testing.T) {
	e := newEnv(t, nil, monitor.DefaultConfig)
	ctx := context.Background()
	c, _, err := e.st.CreateConnection(ctx, &agentv1.RepoConnection{OwnerId: "user-disabled", Repo: "local/r"}, []byte("sealed"), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.st.QueueHealthCheck(ctx, c.Id, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Once(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := e.st.LatestHealthReport(ctx, c.Id)
	if err != nil || r.State != agentv1.RepoHealthState_REPO_HEALTH_STATE_FAILED || !strings.Contains(r.Error, "disabled") || len(e.sb.created) != 0 {
		t.Fatalf("report %v %v; sandboxes %d", r, err, len(e.sb.created))
	}
}

func durationOf(d time.Duration) *durationpb.Duration { return durationpb.New(d) }

// npm and pip are audited where their manifests are: npm outdated's packages are direct,
// pip's are direct when requirements.txt names them; an ecosystem whose tool is missing is
// skipped without failing the others.
func TestNPMAndPipAudits(t *testing.T) {
	e := newEnv(t, nil, monitor.DefaultConfig)
	e.sb.set(func(r *repoState) {
		r.files = map[string]string{
			"package.json":     `{"dependencies": {"left-pad": "^1.0.0", "lodash": "^4.0.0"}, "devDependencies": {"jest": "^29.0.0"}}`,
			"requirements.txt": "# pinned\nRequests==2.0.0\nflask>=2.0  # web\n-r more.txt\n",
		}
		r.npmOutdated = `{"left-pad": {"current": "1.0.0", "wanted": "1.3.0", "latest": "1.3.0", "dependent": "app"},
			"lodash": {"current": "4.17.21", "wanted": "4.17.21", "latest": "4.17.21"}}`
		r.pipOutdated = `[{"name": "requests", "version": "2.0.0", "latest_version": "2.32.3", "latest_filetype": "wheel"},
			{"name": "urllib3", "version": "1.0", "latest_version": "2.2.0", "latest_filetype": "wheel"}]`
	})
	r := e.check(t)
	if checkStatus(r, "dependencies") != agentv1.RepoHealthCheckStatus_REPO_HEALTH_CHECK_STATUS_FAILED {
		t.Fatalf("dependencies: %v", r.Checks)
	}
	var got []string
	for _, d := range r.Outdated {
		got = append(got, fmt.Sprintf("%s:%s:%s->%s:%v", d.Ecosystem, d.Name, d.Version, d.Latest, d.Direct))
	}
	want := "npm:left-pad:1.0.0->1.3.0:true pip:requests:2.0.0->2.32.3:true pip:urllib3:1.0->2.2.0:false"
	if strings.Join(got, " ") != want {
		t.Fatalf("outdated:\n%s\nwant\n%s", strings.Join(got, " "), want)
	}
	if k := keys(r.Findings); k != "dependency:npm:left-pad:task-1:true dependency:pip:requests:task-2:true" {
		t.Fatalf("findings: %s", k)
	}
	var ran []string
	for _, c := range e.sb.commands {
		if c.Command[0] != "grep" {
			ran = append(ran, strings.Join(c.Command[:2], " "))
			if c.Network != sandboxv1.NetworkPolicy_NETWORK_POLICY_PACKAGES {
				t.Errorf("%v ran without the package source", c.Command)
			}
		}
	}
	if strings.Join(ran, ",") != "npm install,npm outdated,pip install,pip list" {
		t.Errorf("commands: %v", ran)
	}

	// npm missing from the sandbox: npm is skipped, pip still audited.
	e.sb.set(func(r *repoState) { r.npmMissing = true })
	r = e.check(t)
	deps := r.Checks[2]
	if deps.Name != "dependencies" || deps.Status != agentv1.RepoHealthCheckStatus_REPO_HEALTH_CHECK_STATUS_FAILED ||
		!strings.Contains(deps.Summary, "npm: skipped") || !strings.Contains(deps.Summary, "pip: 2 of 2") {
		t.Fatalf("with npm missing: %v", deps)
	}
	// The npm finding's part ran only for pip: npm's finding stays open.
	open, err := e.st.OpenFindings(context.Background(), e.conn.Id)
	if err != nil || len(open) != 2 {
		t.Fatalf("open findings: %s %v", keys(open), err)
	}
}

// A Go module whose code calls a function with a known vulnerability (govulncheck's real
// answer, testdata/govulncheck.json: GO-2099-0001 in example.test/dep's Greeting, reached from
// greet/greet.go, and GO-2099-0002 in a function of the same module nothing calls) files one
// high-priority task for the called one only; the next check files none; a check that cannot
// run govulncheck keeps the finding open, and one whose answer no longer has it closes it.
func TestCalledVulnerabilitiesFileATask(t *testing.T) {
	answer, err := os.ReadFile("testdata/govulncheck.json")
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, nil, monitor.DefaultConfig)
	e.sb.set(func(r *repoState) { r.modules, r.vulns = "", string(answer) })
	r := e.check(t)
	if st := checkStatus(r, "vulnerabilities"); st != agentv1.RepoHealthCheckStatus_REPO_HEALTH_CHECK_STATUS_FAILED {
		t.Fatalf("vulnerabilities: %s (%v)", st, r.Checks)
	}
	if c := r.Checks[3]; c.Name != "vulnerabilities" || c.Summary != "2 known vulnerabilities in the 1 module the code requires, 1 of them called by the code" {
		t.Errorf("the part: %v", c)
	}
	var got []string
	for _, v := range r.Vulnerabilities {
		got = append(got, fmt.Sprintf("%s %v %s@%s fixed=%s called=%v %s at %s %q %s", v.Id, v.Aliases, v.Module, v.Version, v.FixedVersion,
			v.Called, v.Function, v.Position, v.Summary, v.Url))
	}
	want := []string{
		`GO-2099-0001 [CVE-2099-0001] example.test/dep@v1.0.0 fixed=v1.1.0 called=true example.test/dep.Greeting at greet/greet.go:6:42 "Greeting says too much in example.test/dep" https://pkg.go.dev/vuln/GO-2099-0001`,
		`GO-2099-0002 [] example.test/dep@v1.0.0 fixed= called=false  at  "Farewell leaks a goroutine." `,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("vulnerabilities:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if k := keys(r.Findings); k != "vulnerability:GO-2099-0001:task-1:true" {
		t.Fatalf("findings: %s", k)
	}
	task := e.tasks.all()[0]
	if task.Priority != typev1.Priority_PRIORITY_HIGH || task.Title != "Fix GO-2099-0001 in local/r: update example.test/dep from v1.0.0 to v1.1.0" ||
		!strings.Contains(task.Description, "CVE-2099-0001") || !strings.Contains(task.Description, "reached from greet/greet.go:6:42") {
		t.Errorf("task: %s %q\n%s", task.Priority, task.Title, task.Description)
	}
	var ran *sandboxv1.RunCommandRequest
	for _, c := range e.sb.commands {
		if c.Command[0] == "govulncheck" {
			ran = c
		}
	}
	if ran == nil || strings.Join(ran.Command, " ") != "govulncheck -format json ./..." || ran.Network != sandboxv1.NetworkPolicy_NETWORK_POLICY_PACKAGES ||
		ran.Env["GOWORK"] != "off" {
		t.Errorf("govulncheck ran as %v", ran)
	}
	trend, err := e.st.HealthTrend(context.Background(), e.conn.Id, 5)
	if err != nil || len(trend) != 1 || trend[0].VulnerabilityCount != 1 {
		t.Fatalf("trend: %v %v", trend, err)
	}

	// Again: the finding keeps its task.
	if r = e.check(t); keys(r.Findings) != "vulnerability:GO-2099-0001:task-1:false" {
		t.Fatalf("second check's findings: %s", keys(r.Findings))
	}
	// govulncheck missing from the sandbox: the part is skipped, the finding stays open.
	e.sb.set(func(r *repoState) { r.vulnsMissing = true })
	r = e.check(t)
	if c := r.Checks[3]; c.Status != agentv1.RepoHealthCheckStatus_REPO_HEALTH_CHECK_STATUS_SKIPPED || !strings.Contains(c.Summary, "not installed") {
		t.Fatalf("without govulncheck: %v", c)
	}
	open, err := e.st.OpenFindings(context.Background(), e.conn.Id)
	if err != nil || keys(open) != "vulnerability:GO-2099-0001:task-1:false" {
		t.Fatalf("open findings without govulncheck: %s %v", keys(open), err)
	}
	// An unreadable answer is an error, and keeps the finding too.
	e.sb.set(func(r *repoState) { r.vulnsMissing, r.vulns = false, `{"progress": {"message": "not a scan"}}` })
	if c := e.check(t).Checks[3]; c.Status != agentv1.RepoHealthCheckStatus_REPO_HEALTH_CHECK_STATUS_ERROR || !strings.Contains(c.Summary, "unreadable") {
		t.Fatalf("unreadable answer: %v", c)
	}
	// The module updated: nothing found, the finding closes.
	e.sb.set(func(r *repoState) {
		r.vulns = `{"config": {"protocol_version": "v1.0.0"}}
{"SBOM": {"modules": [{"path": "example.com/app"}, {"path": "example.test/dep", "version": "v1.1.0"}, {"path": "stdlib", "version": "v1.26.8"}]}}`
	})
	r = e.check(t)
	if c := r.Checks[3]; c.Status != agentv1.RepoHealthCheckStatus_REPO_HEALTH_CHECK_STATUS_PASSED ||
		c.Summary != "no known vulnerability in the 1 module the code requires" || len(r.Findings) != 0 {
		t.Fatalf("after the update: %v %s", c, keys(r.Findings))
	}
	if open, err = e.st.OpenFindings(context.Background(), e.conn.Id); err != nil || len(open) != 0 {
		t.Fatalf("open findings after the update: %s %v", keys(open), err)
	}
}
