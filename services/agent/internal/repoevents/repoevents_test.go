package repoevents_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/events"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/agent/internal/repoevents"
	"github.com/thefold/thefold/services/agent/internal/store"
	"github.com/thefold/thefold/services/agent/migrations"
)

// importingTasks is a tasks service whose ImportIssues records each request with its
// caller and answers with the next of its answers (an error code, or a task created).
type importingTasks struct {
	tasksv1.UnimplementedTaskServiceServer
	mu      sync.Mutex
	status  tasksv1.TaskStatus // every task's, as GetTask says and SetTaskStatus sets it
	reasons []string
	reqs    []*tasksv1.ImportIssuesRequest
	callers []auth.Principal
	answers []codes.Code // codes.OK: created
}

func (f *importingTasks) ImportIssues(ctx context.Context, req *tasksv1.ImportIssuesRequest) (*tasksv1.ImportIssuesResponse, error) {
	p, _ := auth.FromContext(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs, f.callers = append(f.reqs, req), append(f.callers, p)
	code := codes.OK
	if len(f.answers) > 0 {
		code, f.answers = f.answers[0], f.answers[1:]
	}
	if code != codes.OK {
		return nil, status.Errorf(code, "tasks says %s", code)
	}
	return &tasksv1.ImportIssuesResponse{Created: []*tasksv1.Task{{Id: "task-1", Status: tasksv1.TaskStatus_TASK_STATUS_BACKLOG}}}, nil
}

func (f *importingTasks) GetTask(_ context.Context, req *tasksv1.GetTaskRequest) (*tasksv1.GetTaskResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &tasksv1.GetTaskResponse{Task: &tasksv1.Task{Id: req.Id, Status: f.status}}, nil
}

func (f *importingTasks) SetTaskStatus(_ context.Context, req *tasksv1.SetTaskStatusRequest) (*tasksv1.SetTaskStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.status, f.reasons = req.Status, append(f.reasons, req.Reason)
	return &tasksv1.SetTaskStatusResponse{Task: &tasksv1.Task{Id: req.Id, Status: req.Status}}, nil
}

// roles is a github service that says each login's role on every repository.
type roles struct {
	githubv1.UnimplementedRepoServiceServer
	of map[string]githubv1.RepoRole
}

// GetPullRequest says every pull request is open at head "abc123".
func (r *roles) GetPullRequest(_ context.Context, req *githubv1.GetPullRequestRequest) (*githubv1.GetPullRequestResponse, error) {
	return &githubv1.GetPullRequestResponse{PullRequest: &githubv1.PullRequest{Number: req.Number, HeadSha: "abc123",
		State: githubv1.PullRequestState_PULL_REQUEST_STATE_OPEN}}, nil
}

func (r *roles) GetCollaboratorRole(_ context.Context, req *githubv1.GetCollaboratorRoleRequest) (*githubv1.GetCollaboratorRoleResponse, error) {
	return &githubv1.GetCollaboratorRoleResponse{Role: r.of[req.User]}, nil
}

// revisions plays the agent's job side: the jobs of pull requests, and the revisions started.
type revisions struct {
	mu      sync.Mutex
	jobs    map[int32]*agentv1.Job
	started []revision
	running bool // StartRevision answers ALREADY_EXISTS
}

type revision struct {
	prev                *agentv1.Job
	requestID, feedback string
}

func (r *revisions) JobOfPullRequest(_ context.Context, owner, repo string, n int32) (*agentv1.Job, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if j := r.jobs[n]; j != nil && j.OwnerId == owner && j.Repo == repo {
		return j, nil
	}
	return nil, nil
}

func (r *revisions) JobOfBranch(_ context.Context, owner, repo, branch string) (*agentv1.Job, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, j := range r.jobs {
		if j.Branch == branch && j.OwnerId == owner && j.Repo == repo {
			return j, nil
		}
	}
	return nil, nil
}

func (r *revisions) Revisions(context.Context, string, string, int32) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.started), nil
}

func (r *revisions) StartRevision(_ context.Context, prev *agentv1.Job, requestID, feedback string) (*agentv1.Job, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running {
		return nil, status.Error(codes.AlreadyExists, "task has an unfinished job")
	}
	r.started = append(r.started, revision{prev, requestID, feedback})
	return &agentv1.Job{Id: "00000000-0000-0000-0000-00000000000" + string(rune('0'+len(r.started)))}, nil
}

type env struct {
	st    *store.Store
	tasks *importingTasks
	revs  *revisions
	p     *repoevents.Processor
	conn  *agentv1.RepoConnection
	logs  *strings.Builder
	mu    *sync.Mutex
}

func newEnv(t *testing.T, disabled func(string) bool) *env {
	t.Helper()
	return newEnvWith(t, disabled, 0)
}

// newEnvWith is newEnv with reviews waiting settle before they are acted on.
func newEnvWith(t *testing.T, disabled func(string) bool, settle time.Duration) *env {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "agent", migrations.FS)
	st := store.New(pool, events.NewHub(pool))
	tasks := &importingTasks{status: tasksv1.TaskStatus_TASK_STATUS_IN_REVIEW}
	gh := &roles{of: map[string]githubv1.RepoRole{"octo": githubv1.RepoRole_REPO_ROLE_ADMIN, "writer": githubv1.RepoRole_REPO_ROLE_WRITE,
		"reader": githubv1.RepoRole_REPO_ROLE_READ}}
	g := grpctest.Start(t, func(s *grpc.Server) {
		tasksv1.RegisterTaskServiceServer(s, tasks)
		githubv1.RegisterRepoServiceServer(s, gh)
	})
	revs := &revisions{jobs: map[int32]*agentv1.Job{
		7: {Id: "job-7", OwnerId: "user-alice", Repo: "local/r", TaskId: "task-7", Branch: "thefold/x", PullRequest: &typev1.PullRequestRef{Number: 7}},
		8: {Id: "job-8", OwnerId: "user-alice", Repo: "local/r", TaskId: "task-8", Crew: true, ProjectId: "p1"},
	}}
	cfg := repoevents.DefaultConfig
	cfg.Backoff = 0 // a failed attempt is due again at once
	cfg.Settle = settle
	logs, mu := &strings.Builder{}, &sync.Mutex{}
	log := slog.New(slog.NewTextHandler(lockedWriter{mu, logs}, nil))
	p := repoevents.NewProcessor(st, repoevents.Clients{Tasks: tasksv1.NewTaskServiceClient(g.Conn), Repos: githubv1.NewRepoServiceClient(g.Conn),
		Revisions: revs}, g.ServiceSigner(t, "agent"), disabled, cfg, log)
	conn, _, err := st.CreateConnection(context.Background(), &agentv1.RepoConnection{OwnerId: "user-alice", Repo: "local/r", IssueLabels: []string{"thefold"}},
		[]byte("sealed"), "")
	if err != nil {
		t.Fatal(err)
	}
	return &env{st: st, tasks: tasks, revs: revs, p: p, conn: conn, logs: logs, mu: mu}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *strings.Builder
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// addEvent stores a pending delivery of event with payload.
func (e *env) addEvent(t *testing.T, id, event string, payload map[string]any) {
	t.Helper()
	payload["repository"] = map[string]any{"full_name": "local/r"}
	body, _ := json.Marshal(payload)
	ev, err := repoevents.Parse(event, body)
	if err != nil {
		t.Fatal(err)
	}
	st, why := ev.Triage()
	if _, _, err := e.st.AddRepoDelivery(context.Background(), &agentv1.RepoDelivery{ConnectionId: e.conn.Id, DeliveryId: id, Event: event,
		Action: ev.Action, State: st, Outcome: why}, body); err != nil {
		t.Fatal(err)
	}
}

func reviewComment(id, review int64, pr int, who, path string, line int, body string) map[string]any {
	return map[string]any{"action": "created", "pull_request": map[string]any{"number": pr},
		"comment": map[string]any{"id": id, "pull_request_review_id": review, "path": path, "line": line, "body": body, "user": map[string]any{"login": who}}}
}

func review(id int64, pr int, who, state, body string) map[string]any {
	return map[string]any{"action": "submitted", "pull_request": map[string]any{"number": pr},
		"review": map[string]any{"id": id, "state": state, "body": body, "user": map[string]any{"login": who}}}
}

// add stores a pending delivery of an issues event of issue n in repo.
func (e *env) add(t *testing.T, id, repo string, n int) {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"action": "opened", "repository": map[string]any{"full_name": repo}, "issue": map[string]any{"number": n}})
	if _, _, err := e.st.AddRepoDelivery(context.Background(), &agentv1.RepoDelivery{ConnectionId: e.conn.Id, DeliveryId: id, Event: "issues",
		Action: "opened", State: agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_PENDING}, body); err != nil {
		t.Fatal(err)
	}
}

// get is the stored delivery id.
func (e *env) get(t *testing.T, id string) *agentv1.RepoDelivery {
	t.Helper()
	list, _, err := e.st.ListRepoDeliveries(context.Background(), e.conn.Id, 100, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range list {
		if d.DeliveryId == id {
			return d
		}
	}
	t.Fatalf("no delivery %s", id)
	return nil
}

// once runs the processor once and reports how many deliveries it took.
func (e *env) once(t *testing.T) int {
	t.Helper()
	n, err := e.p.Once(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// An issue's delivery imports that issue, with the connection's labels, as the
// connection's owner through the agent's own identity; it is done, saying what it made,
// and not taken again.
func TestIssueEventImportsTheIssueAsTheOwner(t *testing.T) {
	e := newEnv(t, nil)
	e.add(t, "d-1", "local/r", 7)
	if n := e.once(t); n != 1 {
		t.Fatalf("took %d deliveries, want 1", n)
	}
	if len(e.tasks.reqs) != 1 {
		t.Fatalf("%d imports, want 1", len(e.tasks.reqs))
	}
	req, p := e.tasks.reqs[0], e.tasks.callers[0]
	if req.Repo != "local/r" || len(req.Numbers) != 1 || req.Numbers[0] != 7 || len(req.Labels) != 1 || req.Labels[0] != "thefold" {
		t.Fatalf("import %v", req)
	}
	if p.UserID != "user-alice" || p.Service != "agent" {
		t.Fatalf("imported as %+v, want the agent for user-alice", p)
	}
	d := e.get(t, "d-1")
	if d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_DONE || d.Attempts != 1 || d.FinishTime == nil ||
		!strings.Contains(d.Outcome, "issue #7 (opened) became task task-1") {
		t.Fatalf("delivery %v", d)
	}
	if n := e.once(t); n != 0 {
		t.Fatalf("took %d deliveries again", n)
	}
}

// A transient failure is tried again (the outcome says so) until it succeeds; one that
// keeps failing gives up after MaxAttempts; a refusal fails at once; a payload naming
// another repository than its connection's fails without a call.
func TestFailedDeliveriesRetryOrFail(t *testing.T) {
	e := newEnv(t, nil)
	e.tasks.answers = []codes.Code{codes.Unavailable, codes.OK}
	e.add(t, "retried", "local/r", 1)
	e.once(t)
	if d := e.get(t, "retried"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_PENDING || !strings.Contains(d.Outcome, "attempt 1 failed, trying again") {
		t.Fatalf("after a transient failure: %v", d)
	}
	e.once(t)
	if d := e.get(t, "retried"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_DONE || d.Attempts != 2 {
		t.Fatalf("after the retry: %v", d)
	}

	e.tasks.answers = []codes.Code{codes.InvalidArgument}
	e.add(t, "refused", "local/r", 2)
	e.once(t)
	if d := e.get(t, "refused"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_FAILED || !strings.Contains(d.Outcome, "tasks says InvalidArgument") {
		t.Fatalf("after a refusal: %v", d)
	}

	e.tasks.answers = make([]codes.Code, repoevents.DefaultConfig.MaxAttempts)
	for i := range e.tasks.answers {
		e.tasks.answers[i] = codes.Unavailable
	}
	e.add(t, "gave-up", "local/r", 3)
	for range repoevents.DefaultConfig.MaxAttempts {
		e.once(t)
	}
	if d := e.get(t, "gave-up"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_FAILED || int(d.Attempts) != repoevents.DefaultConfig.MaxAttempts ||
		!strings.Contains(d.Outcome, "gave up after 8 attempts") {
		t.Fatalf("after every attempt failed: %v", d)
	}

	calls := len(e.tasks.reqs)
	e.add(t, "elsewhere", "local/other", 4)
	e.once(t)
	if d := e.get(t, "elsewhere"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_FAILED || !strings.Contains(d.Outcome, "names local/other") {
		t.Fatalf("another repository's payload: %v", d)
	}
	if len(e.tasks.reqs) != calls {
		t.Fatal("another repository's payload was imported")
	}
}

// A delivery claimed by one processor is not taken by another until its lease ends.
func TestClaimedDeliveriesAreLeased(t *testing.T) {
	e := newEnv(t, nil)
	e.add(t, "d-1", "local/r", 1)
	ctx := context.Background()
	first, err := e.st.ClaimRepoDeliveries(ctx, 10, time.Hour)
	if err != nil || len(first) != 1 {
		t.Fatalf("first claim: %v %v", first, err)
	}
	if second, err := e.st.ClaimRepoDeliveries(ctx, 10, time.Hour); err != nil || len(second) != 0 {
		t.Fatalf("second claim: %v %v", second, err)
	}
	if n := e.once(t); n != 0 {
		t.Fatalf("the processor took a leased delivery")
	}
}

// A disabled owner's deliveries fail without a call.
func TestDisabledOwnersDeliveriesFail(t *testing.T) {
	e := newEnv(t, func(u string) bool { return u == "user-alice" })
	e.add(t, "d-1", "local/r", 1)
	e.once(t)
	if d := e.get(t, "d-1"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_FAILED || !strings.Contains(d.Outcome, "disabled") || len(e.tasks.reqs) != 0 {
		t.Fatalf("delivery %v, %d imports", d, len(e.tasks.reqs))
	}
}

// Line comments of people with write access are kept; their review asking for changes
// starts one revision of the pull request's job, told the review and every comment with its
// file and line, keyed by the delivery; the comments are not given to a second revision.
// A reader's comment is ignored and logged; a comment review without line comments changes
// nothing; a crew's pull request and one no job opened are left alone.
func TestReviewsStartARevision(t *testing.T) {
	e := newEnv(t, nil)
	e.addEvent(t, "c1", "pull_request_review_comment", reviewComment(101, 55, 7, "writer", "greet/greet.go", 4, "Say Hi, not Hello."))
	e.addEvent(t, "c2", "pull_request_review_comment", reviewComment(102, 55, 7, "octo", "greet/greet_test.go", 9, "Test the new greeting."))
	e.addEvent(t, "c3", "pull_request_review_comment", reviewComment(103, 56, 7, "reader", "greet/greet.go", 1, "Rename the package."))
	e.addEvent(t, "r1", "pull_request_review", review(55, 7, "writer", "CHANGES_REQUESTED", "Two things to change."))
	for e.once(t) > 0 {
	}
	if d := e.get(t, "c1"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_DONE || !strings.Contains(d.Outcome, "greet/greet.go:4 kept") {
		t.Fatalf("c1: %v", d)
	}
	if d := e.get(t, "c3"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_IGNORED || !strings.Contains(d.Outcome, "reader has no write access") {
		t.Fatalf("c3: %v", d)
	}
	e.mu.Lock()
	logged := strings.Contains(e.logs.String(), "without write access") && strings.Contains(e.logs.String(), "actor=reader")
	e.mu.Unlock()
	if !logged {
		t.Fatal("the reader's comment was not logged as ignored")
	}
	if d := e.get(t, "r1"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_DONE || !strings.Contains(d.Outcome, "started with 2 line comments") {
		t.Fatalf("r1: %v", d)
	}
	if len(e.revs.started) != 1 {
		t.Fatalf("%d revisions, want 1", len(e.revs.started))
	}
	r := e.revs.started[0]
	for _, want := range []string{"pull request #7", "Review by writer:\nTwo things to change.", "- greet/greet.go:4, writer: Say Hi, not Hello.",
		"- greet/greet_test.go:9, octo: Test the new greeting."} {
		if !strings.Contains(r.feedback, want) {
			t.Fatalf("feedback %q lacks %q", r.feedback, want)
		}
	}
	if strings.Contains(r.feedback, "Rename the package") || r.prev.Id != "job-7" || r.requestID != "pr-review:"+e.conn.Id+":r1" {
		t.Fatalf("revision %+v", r)
	}

	// A second review without new comments starts a revision with its text only.
	e.addEvent(t, "r2", "pull_request_review", review(57, 7, "octo", "changes_requested", "Also log it."))
	e.once(t)
	if len(e.revs.started) != 2 || strings.Contains(e.revs.started[1].feedback, "Say Hi") || !strings.Contains(e.revs.started[1].feedback, "Also log it.") {
		t.Fatalf("second revision %+v", e.revs.started)
	}
	// A comment-only review without line comments, a crew's pull request, one no job opened.
	e.addEvent(t, "r3", "pull_request_review", review(58, 7, "octo", "commented", "Looks fine so far."))
	e.addEvent(t, "r4", "pull_request_review", review(59, 8, "octo", "changes_requested", "x"))
	e.addEvent(t, "r5", "pull_request_review", review(60, 9, "octo", "changes_requested", "x"))
	e.once(t)
	for id, want := range map[string]string{"r3": "nothing to revise", "r4": "crew worker", "r5": "not opened by a job"} {
		if d := e.get(t, id); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_IGNORED || !strings.Contains(d.Outcome, want) {
			t.Fatalf("%s: %v, want ignored with %q", id, d, want)
		}
	}
	if len(e.revs.started) != 2 {
		t.Fatalf("%d revisions, want 2", len(e.revs.started))
	}
}

// A review waits Settle after it arrives (its line comments come with it) without spending
// an attempt; while a job of the task runs, the revision is tried again later.
func TestReviewWaitsForItsCommentsAndARunningJob(t *testing.T) {
	e := newEnv(t, nil)
	e.revs.running = true
	e.addEvent(t, "r1", "pull_request_review", review(55, 7, "writer", "changes_requested", "Change it."))
	e.once(t)
	if d := e.get(t, "r1"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_PENDING || !strings.Contains(d.Outcome, "still running") {
		t.Fatalf("while a job runs: %v", d)
	}
	e.revs.mu.Lock()
	e.revs.running = false
	e.revs.mu.Unlock()
	e.once(t)
	if d := e.get(t, "r1"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_DONE || d.Attempts != 2 {
		t.Fatalf("after the job: %v", d)
	}

	e2 := newEnvWith(t, nil, time.Hour)
	e2.addEvent(t, "r9", "pull_request_review", review(55, 7, "writer", "changes_requested", "Change it."))
	e2.once(t)
	if d := e2.get(t, "r9"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_PENDING || d.Attempts != 0 || len(e2.revs.started) != 0 {
		t.Fatalf("a fresh review: %v, %d revisions", d, len(e2.revs.started))
	}
}

// An approval or a merge by a person with write access completes the task in review; a
// close without a merge does not.
func TestApprovalOrMergeCompletesTheTask(t *testing.T) {
	e := newEnv(t, nil)
	e.addEvent(t, "a1", "pull_request_review", review(61, 7, "octo", "approved", "LGTM"))
	e.once(t)
	if d := e.get(t, "a1"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_DONE || !strings.Contains(d.Outcome, "approved by octo: task task-7 done") ||
		e.tasks.status != tasksv1.TaskStatus_TASK_STATUS_DONE {
		t.Fatalf("approval: %v, task %v", d, e.tasks.status)
	}
	e.tasks.status = tasksv1.TaskStatus_TASK_STATUS_IN_REVIEW
	e.addEvent(t, "m0", "pull_request", map[string]any{"action": "closed", "pull_request": map[string]any{"number": 7, "merged": false}})
	e.addEvent(t, "m1", "pull_request", map[string]any{"action": "closed", "pull_request": map[string]any{"number": 7, "merged": true,
		"merged_by": map[string]any{"login": "writer"}}})
	e.once(t)
	if d := e.get(t, "m0"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_IGNORED || !strings.Contains(d.Outcome, "without a merge") {
		t.Fatalf("closed: %v", d)
	}
	if d := e.get(t, "m1"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_DONE || !strings.Contains(d.Outcome, "merged by writer") ||
		e.tasks.status != tasksv1.TaskStatus_TASK_STATUS_DONE {
		t.Fatalf("merged: %v, task %v", d, e.tasks.status)
	}
	// An approval by a reader changes nothing.
	e.tasks.status = tasksv1.TaskStatus_TASK_STATUS_IN_REVIEW
	e.addEvent(t, "a2", "pull_request_review", review(62, 7, "reader", "approved", ""))
	e.once(t)
	if d := e.get(t, "a2"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_IGNORED || e.tasks.status != tasksv1.TaskStatus_TASK_STATUS_IN_REVIEW {
		t.Fatalf("a reader's approval: %v, task %v", d, e.tasks.status)
	}
}

func checkRun(pr int, sha, name, conclusion string) map[string]any {
	return map[string]any{"action": "completed", "check_run": map[string]any{"name": name, "head_sha": sha, "conclusion": conclusion,
		"html_url": "https://ci.example/run/1", "output": map[string]any{"title": name + " failed", "summary": "1 test failed",
			"text": "--- FAIL: TestHello\n    greet_test.go:9: got Hello, want Hi"},
		"pull_requests": []map[string]any{{"number": pr}}}}
}

// A check that failed on a pull request's head starts a revision told what it reported (fenced
// as data), keyed by the commit so that two failed checks of one commit start one; a check of
// an older commit, a passing one, and a failed status of the pull request's branch are told
// apart; after three revisions the checks are left to a person.
func TestFailedChecksStartARevision(t *testing.T) {
	e := newEnv(t, nil)
	e.addEvent(t, "k1", "check_run", checkRun(7, "abc123", "go test", "failure"))
	e.addEvent(t, "k2", "check_run", checkRun(7, "0ld5ha", "go test", "failure"))
	e.addEvent(t, "k3", "check_run", checkRun(7, "abc123", "lint", "success"))
	for e.once(t) > 0 {
	}
	if d := e.get(t, "k1"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_DONE || !strings.Contains(d.Outcome, `check "go test" failed: revision job`) {
		t.Fatalf("k1: %v", d)
	}
	if d := e.get(t, "k2"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_IGNORED || !strings.Contains(d.Outcome, "stale") {
		t.Fatalf("k2: %v", d)
	}
	if d := e.get(t, "k3"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_IGNORED || !strings.Contains(d.Outcome, "ended success") {
		t.Fatalf("k3: %v", d)
	}
	if len(e.revs.started) != 1 {
		t.Fatalf("%d revisions, want 1", len(e.revs.started))
	}
	r := e.revs.started[0]
	if r.prev.Id != "job-7" || r.requestID != "pr-check:"+e.conn.Id+":abc123" || !strings.Contains(r.feedback, `<data kind="check-output"`) ||
		!strings.Contains(r.feedback, "greet_test.go:9: got Hello, want Hi") || !strings.Contains(r.feedback, `The check "go test" failed (failure)`) {
		t.Fatalf("revision %+v", r)
	}
	// A failed commit status names a branch, not a pull request.
	e.addEvent(t, "s1", "status", map[string]any{"sha": "abc123", "state": "failure", "context": "ci/build", "description": "build broke",
		"target_url": "https://ci.example/b/2", "branches": []map[string]any{{"name": "thefold/x"}}})
	e.addEvent(t, "s2", "status", map[string]any{"sha": "abc123", "state": "failure", "context": "ci/build", "branches": []map[string]any{{"name": "main"}}})
	e.once(t)
	if d := e.get(t, "s1"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_DONE || len(e.revs.started) != 2 ||
		!strings.Contains(e.revs.started[1].feedback, "build broke") {
		t.Fatalf("s1: %v, %d revisions", d, len(e.revs.started))
	}
	if d := e.get(t, "s2"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_IGNORED || !strings.Contains(d.Outcome, "branch main has no pull request") {
		t.Fatalf("s2: %v", d)
	}
	e.addEvent(t, "k4", "check_run", checkRun(7, "abc123", "vet", "failure"))
	e.once(t)
	e.addEvent(t, "k5", "check_run", checkRun(7, "abc123", "race", "timed_out"))
	e.once(t)
	if d := e.get(t, "k5"); d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_IGNORED || !strings.Contains(d.Outcome, "after 3 revisions") {
		t.Fatalf("k5: %v (%d revisions)", d, len(e.revs.started))
	}
}

// The jobs of a pull request, found by number or branch, and its revisions counted, over the
// real schema.
func TestJobsOfAPullRequest(t *testing.T) {
	pool, _ := dbtest.NewDatabase(t, "agent", migrations.FS)
	st := store.New(pool, events.NewHub(pool))
	ctx := context.Background()
	none := func(context.Context, pgx.Tx, string) error { return nil }
	pr := &typev1.PullRequestRef{Repo: "local/r", Number: 4}
	first, _, err := st.Create(ctx, &agentv1.Job{OwnerId: "alice", TaskId: "t1", Repo: "local/r", BaseBranch: "main", Branch: "thefold/a", PullRequest: pr}, "", nil, store.RateLimit{}, none)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Mutate(ctx, "alice", first.Job.Id, func(_ context.Context, _ pgx.Tx, rec *store.Record) (store.Step, error) {
		rec.Job.Status = agentv1.JobStatus_JOB_STATUS_COMPLETED
		return store.Step{}, nil
	}, nil); err != nil {
		t.Fatal(err)
	}
	second, _, err := st.Create(ctx, &agentv1.Job{OwnerId: "alice", TaskId: "t1", Repo: "local/r", BaseBranch: "main", Branch: "thefold/a", PullRequest: pr,
		RevisesJobId: first.Job.Id}, "", nil, store.RateLimit{}, none)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Create(ctx, &agentv1.Job{OwnerId: "alice", TaskId: "t2", Repo: "local/r", BaseBranch: "main"}, "", nil, store.RateLimit{}, none); err != nil {
		t.Fatal(err)
	}
	if j, err := st.JobOfPullRequest(ctx, "alice", "local/r", 4); err != nil || j.GetId() != second.Job.Id {
		t.Fatalf("by number: %v %v, want %s", j.GetId(), err, second.Job.Id)
	}
	if j, err := st.JobOfBranch(ctx, "alice", "local/r", "thefold/a"); err != nil || j.GetId() != second.Job.Id {
		t.Fatalf("by branch: %v %v", j.GetId(), err)
	}
	for _, miss := range []func() (*agentv1.Job, error){
		func() (*agentv1.Job, error) { return st.JobOfPullRequest(ctx, "bob", "local/r", 4) },
		func() (*agentv1.Job, error) { return st.JobOfPullRequest(ctx, "alice", "local/r", 5) },
		func() (*agentv1.Job, error) { return st.JobOfBranch(ctx, "alice", "local/r", "main") },
	} {
		if j, err := miss(); err != nil || j != nil {
			t.Fatalf("a miss found %v %v", j, err)
		}
	}
	if n, err := st.RevisionsOf(ctx, "alice", "local/r", 4); err != nil || n != 1 {
		t.Fatalf("revisions %d %v, want 1", n, err)
	}
}
