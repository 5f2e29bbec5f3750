package linearsync_test

import (
	"context"
	"crypto/rand"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/fakelinear"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/linear"
	"github.com/thefold/thefold/pkg/seal"

	"github.com/thefold/thefold/services/agent/internal/linearsync"
	"github.com/thefold/thefold/services/agent/internal/store"
	"github.com/thefold/thefold/services/agent/migrations"
)

// tasks is a tasks service holding tasks in memory, with the caller of each call.
type tasks struct {
	tasksv1.UnimplementedTaskServiceServer
	mu      sync.Mutex
	byID    map[string]*tasksv1.Task
	byKey   map[string]string
	deps    []string // "task<-blocker"
	callers []string
}

func (f *tasks) who(ctx context.Context) {
	p, _ := auth.FromContext(ctx)
	f.callers = append(f.callers, p.UserID)
}

func (f *tasks) CreateTask(ctx context.Context, req *tasksv1.CreateTaskRequest) (*tasksv1.CreateTaskResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.who(ctx)
	if id, ok := f.byKey[req.RequestId]; ok {
		return &tasksv1.CreateTaskResponse{Task: proto.Clone(f.byID[id]).(*tasksv1.Task)}, nil
	}
	id := fmt.Sprintf("task-%d", len(f.byID)+1)
	t := &tasksv1.Task{Id: id, Title: req.Title, Repo: req.Repo, Description: req.Description, Source: req.Source, Priority: req.Priority,
		Labels: req.Labels, ExternalId: req.ExternalId, ExternalUrl: req.ExternalUrl, Status: tasksv1.TaskStatus_TASK_STATUS_BACKLOG,
		UpdateTime: timestamppb.Now()}
	f.byID[id], f.byKey[req.RequestId] = t, id
	return &tasksv1.CreateTaskResponse{Task: proto.Clone(t).(*tasksv1.Task)}, nil
}

func (f *tasks) GetTask(ctx context.Context, req *tasksv1.GetTaskRequest) (*tasksv1.GetTaskResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.byID[req.Id]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "task %s", req.Id)
	}
	return &tasksv1.GetTaskResponse{Task: proto.Clone(t).(*tasksv1.Task)}, nil
}

// ListTasks filters by repo, source and statuses, in one page.
func (f *tasks) ListTasks(ctx context.Context, req *tasksv1.ListTasksRequest) (*tasksv1.ListTasksResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.who(ctx)
	out := &tasksv1.ListTasksResponse{}
	for _, t := range f.byID {
		if (req.Repo == "" || t.Repo == req.Repo) && (req.Source == 0 || t.Source == req.Source) &&
			(len(req.Statuses) == 0 || slices.Contains(req.Statuses, t.Status)) {
			out.Tasks = append(out.Tasks, proto.Clone(t).(*tasksv1.Task))
		}
	}
	return out, nil
}

func (f *tasks) UpdateTask(ctx context.Context, req *tasksv1.UpdateTaskRequest) (*tasksv1.UpdateTaskResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.who(ctx)
	t := f.byID[req.Id]
	for _, p := range req.UpdateMask.Paths {
		switch p {
		case "title":
			t.Title = req.Task.Title
		case "description":
			t.Description = req.Task.Description
		case "priority":
			t.Priority = req.Task.Priority
		case "external_url":
			t.ExternalUrl = req.Task.ExternalUrl
		}
	}
	t.UpdateTime = timestamppb.Now()
	return &tasksv1.UpdateTaskResponse{Task: proto.Clone(t).(*tasksv1.Task)}, nil
}

func (f *tasks) SetTaskStatus(ctx context.Context, req *tasksv1.SetTaskStatusRequest) (*tasksv1.SetTaskStatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.who(ctx)
	t := f.byID[req.Id]
	if req.ExpectedStatus != 0 && t.Status != req.ExpectedStatus {
		return nil, status.Error(codes.Aborted, "status changed")
	}
	t.Status, t.StatusReason, t.UpdateTime = req.Status, req.Reason, timestamppb.Now()
	return &tasksv1.SetTaskStatusResponse{Task: proto.Clone(t).(*tasksv1.Task)}, nil
}

func (f *tasks) AddDependency(ctx context.Context, req *tasksv1.AddDependencyRequest) (*tasksv1.AddDependencyResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	e := req.TaskId + "<-" + req.BlockedById
	if !slices.Contains(f.deps, e) {
		f.deps = append(f.deps, e)
	}
	return &tasksv1.AddDependencyResponse{}, nil
}

// set changes a task as a person in TheFold (or the agent's loop) would.
func (f *tasks) set(id string, change func(*tasksv1.Task)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	change(f.byID[id])
	f.byID[id].UpdateTime = timestamppb.Now()
}

func (f *tasks) get(id string) *tasksv1.Task {
	f.mu.Lock()
	defer f.mu.Unlock()
	return proto.Clone(f.byID[id]).(*tasksv1.Task)
}

type env struct {
	box    *seal.Box
	st     *store.Store
	lin    *fakelinear.Server
	tasks  *tasks
	s      *linearsync.Syncer
	rec    *store.LinearRecord
	team   string
	states map[string]string // by name
	other  string            // another team
}

const apiKey = "lin_api_test0000000000000000"

func newEnv(t *testing.T) *env {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "agent", migrations.FS)
	st := store.New(pool, nil)
	lin := fakelinear.New()
	lin.AddAPIKey(apiKey, "Alice")
	srv := httptest.NewServer(lin)
	t.Cleanup(srv.Close)
	e := &env{st: st, lin: lin, tasks: &tasks{byID: map[string]*tasksv1.Task{}, byKey: map[string]string{}}, states: map[string]string{}}
	e.team = lin.AddTeam("ENG", "Engineering")
	for _, s := range [][2]string{{"Backlog", "backlog"}, {"Todo", "unstarted"}, {"In Progress", "started"}, {"In Review", "started"},
		{"Done", "completed"}, {"Canceled", "canceled"}} {
		e.states[s[0]] = lin.AddState(e.team, s[0], s[1])
	}
	e.other = lin.AddTeam("OPS", "Operations")
	lin.AddState(e.other, "Todo", "unstarted")
	g := grpctest.Start(t, func(s *grpc.Server) { tasksv1.RegisterTaskServiceServer(s, e.tasks) })
	key := make([]byte, seal.KeySize)
	_, _ = rand.Read(key)
	box, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	cfg := linearsync.DefaultConfig
	cfg.BaseURL = srv.URL + "/graphql"
	e.s = linearsync.New(st, tasksv1.NewTaskServiceClient(g.Conn), box, g.ServiceSigner(t, "agent"), func(u string) bool { return u == "user-disabled" }, cfg, nil)
	e.box = box
	sealedKey, _ := box.Seal(apiKey)
	sealedSecret, _ := box.Seal("secret")
	ctx := context.Background()
	c, _, err := st.CreateLinearConnection(ctx, &agentv1.LinearConnection{OwnerId: "user-alice", Repo: "local/r", TeamIds: []string{e.team},
		TeamKeys: []string{"ENG"}, StateTypes: []string{"started", "unstarted"}, SyncInterval: durationpb.New(10 * time.Minute), ApiKeyHint: "…0000"},
		sealedKey, sealedSecret, "")
	if err != nil {
		t.Fatal(err)
	}
	if e.rec, err = st.GetLinearConnection(ctx, "user-alice", c.Id); err != nil {
		t.Fatal(err)
	}
	return e
}

// sync runs a sync (full or what changed) on the connection as stored now.
func (e *env) sync(t *testing.T, full bool) *agentv1.SyncLinearResponse {
	t.Helper()
	rec, err := e.st.GetLinearConnection(context.Background(), "user-alice", e.rec.Id)
	if err != nil {
		t.Fatal(err)
	}
	out, err := e.s.Sync(context.Background(), rec, full)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func (e *env) issue(t *testing.T, issueID string) *store.LinearIssueRecord {
	t.Helper()
	r, err := e.st.LinearIssue(context.Background(), e.rec.Id, issueID)
	if err != nil || r == nil {
		t.Fatalf("synced issue %s: %v %v", issueID, r, err)
	}
	return r
}

func counts(o *agentv1.SyncLinearResponse) string {
	return fmt.Sprintf("created %d updated %d unchanged %d pushed %d conflicts %d problems %v", o.Created, o.Updated, o.Unchanged, o.Pushed,
		o.Conflicts, o.Problems)
}

// The issues of the chosen team and states become tasks as the owner, with Linear's blocks
// relations as blocked-by; the query the client sent filters by the team and the states.
func TestPullCreatesTasksWithRelations(t *testing.T) {
	e := newEnv(t)
	a := e.lin.AddIssue(e.team, fakelinear.NewIssue{Title: "Schema", Description: "Add the table.", Priority: 2, StateID: e.states["Todo"]})
	b := e.lin.AddIssue(e.team, fakelinear.NewIssue{Title: "Login", Priority: 1, StateID: e.states["In Progress"]})
	e.lin.AddIssue(e.team, fakelinear.NewIssue{Title: "Someday", StateID: e.states["Backlog"]})
	e.lin.AddIssue(e.other, fakelinear.NewIssue{Title: "Not ours"})
	e.lin.AddRelation(a.ID, b.ID, linear.RelationBlocks)

	if got := counts(e.sync(t, true)); got != "created 2 updated 0 unchanged 0 pushed 0 conflicts 0 problems []" {
		t.Fatalf("first sync: %s", got)
	}
	ta, tb := e.tasks.get(e.issue(t, a.ID).TaskID), e.tasks.get(e.issue(t, b.ID).TaskID)
	if ta.Title != a.Identifier+": Schema" || ta.Description != "Add the table." || ta.Source != tasksv1.TaskSource_TASK_SOURCE_LINEAR ||
		ta.ExternalId != "linear:"+a.ID || ta.ExternalUrl != a.URL || ta.Priority != typev1.Priority_PRIORITY_HIGH || ta.Repo != "local/r" {
		t.Errorf("task of %s: %v", a.Identifier, ta)
	}
	if tb.Priority != typev1.Priority_PRIORITY_URGENT {
		t.Errorf("task of %s: %v", b.Identifier, tb)
	}
	if want := tb.Id + "<-" + ta.Id; !slices.Equal(e.tasks.deps, []string{want}) {
		t.Errorf("dependencies %v, want %s", e.tasks.deps, want)
	}
	for _, c := range e.tasks.callers {
		if c != "user-alice" {
			t.Fatalf("a tasks call as %q, not the owner", c)
		}
	}
	var issuesReq *fakelinear.Request
	for _, r := range e.lin.Requests() {
		if r.OperationName == linear.OpIssues {
			issuesReq = &r
		}
	}
	if issuesReq == nil {
		t.Fatal("no issues query")
	}
	f := fmt.Sprint(issuesReq.Variables["filter"])
	if !strings.Contains(f, e.team) || !strings.Contains(f, "started") || !strings.Contains(f, "unstarted") || strings.Contains(f, "backlog") {
		t.Errorf("issues filter %s", f)
	}
	// Nothing changed: a second sync makes nothing.
	if got := counts(e.sync(t, true)); got != "created 0 updated 0 unchanged 2 pushed 0 conflicts 0 problems []" {
		t.Fatalf("second sync: %s", got)
	}
}

// A task's status is written back once: in review moves the issue to "In Review" with a
// comment linking the pull request (the mutation checked); blocked comments the reason;
// an issue completed in Linear completes its task and is not written back.
func TestPushStatuses(t *testing.T) {
	e := newEnv(t)
	a := e.lin.AddIssue(e.team, fakelinear.NewIssue{Title: "Schema", StateID: e.states["In Progress"]})
	b := e.lin.AddIssue(e.team, fakelinear.NewIssue{Title: "Login", StateID: e.states["Todo"]})
	e.sync(t, true)
	ta, tb := e.issue(t, a.ID).TaskID, e.issue(t, b.ID).TaskID
	e.tasks.set(ta, func(t *tasksv1.Task) {
		t.Status = tasksv1.TaskStatus_TASK_STATUS_IN_REVIEW
		t.PullRequest = &typev1.PullRequestRef{Repo: "local/r", Number: 7, Url: "https://forge/local/r/pulls/7"}
	})
	e.tasks.set(tb, func(t *tasksv1.Task) {
		t.Status, t.StatusReason = tasksv1.TaskStatus_TASK_STATUS_BLOCKED, "impossible_task: the API it needs does not exist"
	})
	if got := counts(e.sync(t, false)); got != "created 0 updated 0 unchanged 0 pushed 2 conflicts 0 problems []" {
		t.Fatalf("push: %s", got)
	}
	if got := e.lin.Issue(a.ID).State.Name; got != "In Review" {
		t.Errorf("%s is in %q, want In Review", a.Identifier, got)
	}
	var update *fakelinear.Request
	for _, r := range e.lin.Requests() {
		if r.OperationName == linear.OpUpdateIssueState {
			update = &r
		}
	}
	if update == nil || update.Variables["id"] != a.ID || !strings.Contains(fmt.Sprint(update.Variables), e.states["In Review"]) {
		t.Errorf("issueUpdate mutation: %+v", update)
	}
	if cs := e.lin.Comments(a.ID); len(cs) != 1 || !strings.Contains(cs[0].Body, "https://forge/local/r/pulls/7") {
		t.Errorf("comments on %s: %v", a.Identifier, cs)
	}
	if cs := e.lin.Comments(b.ID); len(cs) != 1 || !strings.Contains(cs[0].Body, "the API it needs does not exist") {
		t.Errorf("comments on %s: %v", b.Identifier, cs)
	}
	if e.lin.Issue(b.ID).State.Name != "Todo" {
		t.Errorf("a blocked task moved its issue to %s", e.lin.Issue(b.ID).State.Name)
	}
	// Written once.
	if got := counts(e.sync(t, false)); !strings.Contains(got, "pushed 0") {
		t.Fatalf("second push: %s", got)
	}
	// Completed in Linear: the task is done, and nothing is written back.
	e.lin.SetIssueState(a.ID, e.states["Done"])
	if got := counts(e.sync(t, false)); got != "created 0 updated 1 unchanged 0 pushed 0 conflicts 0 problems []" {
		t.Fatalf("after Done in Linear: %s", got)
	}
	if st := e.tasks.get(ta).Status; st != tasksv1.TaskStatus_TASK_STATUS_DONE {
		t.Errorf("task of a completed issue: %s", st)
	}
	if cs := e.lin.Comments(a.ID); len(cs) != 1 {
		t.Errorf("comments after completion: %v", cs)
	}
	// A task never worked on cannot be done: completed in Linear, it is cancelled, saying so.
	e.lin.SetIssueState(b.ID, e.states["Done"])
	e.sync(t, false)
	if tk := e.tasks.get(tb); tk.Status != tasksv1.TaskStatus_TASK_STATUS_CANCELLED || !strings.Contains(tk.StatusReason, "completed in Linear") {
		t.Errorf("blocked task of a completed issue: %s %q", tk.Status, tk.StatusReason)
	}
}

// An edit in Linear alone updates the task; an edit on both sides keeps the newer and
// records the conflict.
func TestConflictKeepsTheNewest(t *testing.T) {
	e := newEnv(t)
	a := e.lin.AddIssue(e.team, fakelinear.NewIssue{Title: "Schema", Description: "v1", StateID: e.states["Todo"]})
	e.sync(t, true)
	task := e.issue(t, a.ID).TaskID

	e.lin.EditIssue(a.ID, "Schema v2", "v2")
	if got := counts(e.sync(t, false)); got != "created 0 updated 1 unchanged 0 pushed 0 conflicts 0 problems []" {
		t.Fatalf("Linear edit: %s", got)
	}
	if tk := e.tasks.get(task); tk.Title != a.Identifier+": Schema v2" || tk.Description != "v2" {
		t.Fatalf("task after a Linear edit: %v", tk)
	}
	// TheFold first, then Linear: Linear's is newer and kept.
	e.tasks.set(task, func(t *tasksv1.Task) { t.Title = "Edited in TheFold" })
	time.Sleep(5 * time.Millisecond)
	e.lin.EditIssue(a.ID, "Edited in Linear", "v3")
	if got := counts(e.sync(t, false)); got != "created 0 updated 1 unchanged 0 pushed 0 conflicts 1 problems []" {
		t.Fatalf("both edited: %s", got)
	}
	if tk := e.tasks.get(task); tk.Title != a.Identifier+": Edited in Linear" {
		t.Fatalf("kept %q, not Linear's newer title", tk.Title)
	}
	if c := e.issue(t, a.ID).Conflict; !strings.Contains(c, "kept Linear's") {
		t.Fatalf("conflict recorded: %q", c)
	}
	// Linear first, then TheFold: TheFold's is newer and kept.
	e.lin.EditIssue(a.ID, "Linear again", "v4")
	time.Sleep(5 * time.Millisecond)
	e.tasks.set(task, func(t *tasksv1.Task) { t.Title = "TheFold again" })
	if got := counts(e.sync(t, false)); !strings.Contains(got, "conflicts 1") {
		t.Fatalf("both edited again: %s", got)
	}
	if tk := e.tasks.get(task); tk.Title != "TheFold again" {
		t.Fatalf("kept %q, not TheFold's newer title", tk.Title)
	}
	if c := e.issue(t, a.ID).Conflict; !strings.Contains(c, "kept TheFold's") {
		t.Fatalf("conflict recorded: %q", c)
	}
}

// A webhook's issue is read by the next sync even when it is not in the changed set; a
// refused key fails the sync and is recorded on the connection.
func TestDeliveriesAndFailures(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.lin.AddIssue(e.team, fakelinear.NewIssue{Title: "Schema", StateID: e.states["Todo"]})
	if dup, err := e.st.AddLinearDelivery(ctx, e.rec.Id, "d-1", a.ID); err != nil || dup {
		t.Fatalf("delivery: %v %v", dup, err)
	}
	if dup, _ := e.st.AddLinearDelivery(ctx, e.rec.Id, "d-1", a.ID); !dup {
		t.Fatal("a replayed delivery stored twice")
	}
	if n, err := e.s.Once(ctx); err != nil || n != 1 {
		t.Fatalf("Once: %d %v", n, err)
	}
	if e.issue(t, a.ID).TaskID == "" {
		t.Fatal("no task")
	}
	ids, _, err := e.st.PendingLinearDeliveries(ctx, e.rec.Id)
	if err != nil || len(ids) != 0 {
		t.Fatalf("deliveries left: %v %v", ids, err)
	}
	e.lin.FailNext(1, 500)
	if _, err := e.s.Sync(ctx, e.rec, false); err == nil || !linear.IsRetryable(err) {
		t.Fatalf("a 500 from Linear: %v", err)
	}
	rec, err := e.st.GetLinearConnection(ctx, "user-alice", e.rec.Id)
	if err != nil || !strings.HasPrefix(rec.LastSyncStatus, "failed: ") || time.Until(rec.NextSyncTime.AsTime()) < time.Minute {
		t.Fatalf("after a failed sync: %q next %s %v", rec.LastSyncStatus, rec.NextSyncTime.AsTime(), err)
	}
}

// A delivery that comes while a sync runs (after the sync read the pending deliveries) is
// not put off by the sync's interval: the connection stays due and the next sync reads it.
// A failed sync keeps its backoff, delivery or not.
func TestDeliveryDuringASyncIsNotPutOff(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.lin.AddIssue(e.team, fakelinear.NewIssue{Title: "Schema", StateID: e.states["Todo"]})
	// The sync read no delivery; then the delivery comes; then the sync records its end.
	if _, err := e.st.AddLinearDelivery(ctx, e.rec.Id, "d-late", a.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.st.LinearSynced(ctx, e.rec.Id, nil, time.Time{}, false, "0 created", time.Hour, true); err != nil {
		t.Fatal(err)
	}
	rec, err := e.st.GetLinearConnection(ctx, "user-alice", e.rec.Id)
	if err != nil || time.Until(rec.NextSyncTime.AsTime()) > time.Minute {
		t.Fatalf("a delivery waits, yet the next sync is at %s (%v)", rec.NextSyncTime.AsTime(), err)
	}
	if n, err := e.s.Once(ctx); err != nil || n != 1 || e.issue(t, a.ID).TaskID == "" {
		t.Fatalf("the next sync: %d %v", n, err)
	}

	b := e.lin.AddIssue(e.team, fakelinear.NewIssue{Title: "Login", StateID: e.states["Todo"]})
	if _, err := e.st.AddLinearDelivery(ctx, e.rec.Id, "d-failed", b.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.st.LinearSynced(ctx, e.rec.Id, nil, time.Time{}, false, "failed: Linear answered 500", time.Hour, false); err != nil {
		t.Fatal(err)
	}
	if rec, err = e.st.GetLinearConnection(ctx, "user-alice", e.rec.Id); err != nil || time.Until(rec.NextSyncTime.AsTime()) < 50*time.Minute {
		t.Fatalf("after a failed sync with a delivery waiting, the next sync is at %s (%v), want its backoff", rec.NextSyncTime.AsTime(), err)
	}
}

// Between syncs, the push alone writes a status back, once, as the owner.
func TestPushBetweenSyncs(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	a := e.lin.AddIssue(e.team, fakelinear.NewIssue{Title: "Schema", StateID: e.states["Todo"]})
	if n, err := e.s.Once(ctx); err != nil || n != 1 {
		t.Fatalf("first Once: %d %v", n, err)
	}
	task := e.issue(t, a.ID).TaskID
	e.tasks.set(task, func(t *tasksv1.Task) { t.Status = tasksv1.TaskStatus_TASK_STATUS_IN_PROGRESS })
	reads := func() int {
		n := 0
		for _, r := range e.lin.Requests() {
			if r.OperationName == linear.OpIssues {
				n++
			}
		}
		return n
	}
	before := reads()
	// The sync is ten minutes away; the push is due (the first Once set it 30 s on: make it due).
	rec, err := e.st.GetLinearConnection(ctx, "user-alice", e.rec.Id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Push(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if got := e.lin.Issue(a.ID).State.Name; got != "In Progress" {
		t.Fatalf("after the push the issue is %q", got)
	}
	if reads() != before {
		t.Error("a push read Linear's issues")
	}
	out, err := e.s.Push(ctx, rec)
	if err != nil || out.Pushed != 0 {
		t.Fatalf("a second push: %v %v", out, err)
	}
	if n, err := e.s.Once(ctx); err != nil || n != 0 {
		t.Fatalf("Once before anything is due: %d %v", n, err)
	}
}

// A disabled owner's connection is neither pulled nor pushed; the sync says why.
func TestDisabledOwnerIsNotSynced(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	e.lin.AddIssue(e.team, fakelinear.NewIssue{Title: "Schema", StateID: e.states["Todo"]})
	key, _ := e.box.Seal(apiKey)
	c, _, err := e.st.CreateLinearConnection(ctx, &agentv1.LinearConnection{OwnerId: "user-disabled", Repo: "local/r", TeamIds: []string{e.team},
		StateTypes: []string{"unstarted"}, SyncInterval: durationpb.New(time.Minute), ApiKeyHint: "…0000"}, key, key, "")
	if err != nil {
		t.Fatal(err)
	}
	rec, err := e.st.GetLinearConnection(ctx, "user-disabled", c.Id)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.s.Sync(ctx, rec, true); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("sync of a disabled owner: %v", err)
	}
	if _, err := e.s.Push(ctx, rec); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("push of a disabled owner: %v", err)
	}
	if len(e.tasks.callers) != 0 {
		t.Fatalf("tasks called for a disabled owner: %v", e.tasks.callers)
	}
	if rec, _ = e.st.GetLinearConnection(ctx, "user-disabled", c.Id); !strings.Contains(rec.LastSyncStatus, "disabled") {
		t.Fatalf("status %q", rec.LastSyncStatus)
	}
}
