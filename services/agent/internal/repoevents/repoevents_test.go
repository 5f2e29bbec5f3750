package repoevents_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/events"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
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

type env struct {
	st    *store.Store
	tasks *importingTasks
	p     *repoevents.Processor
	conn  *agentv1.RepoConnection
}

func newEnv(t *testing.T, disabled func(string) bool) *env {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "agent", migrations.FS)
	st := store.New(pool, events.NewHub(pool))
	tasks := &importingTasks{}
	g := grpctest.Start(t, func(s *grpc.Server) { tasksv1.RegisterTaskServiceServer(s, tasks) })
	cfg := repoevents.DefaultConfig
	cfg.Backoff = 0 // a failed attempt is due again at once
	p := repoevents.NewProcessor(st, tasksv1.NewTaskServiceClient(g.Conn), g.ServiceSigner(t, "agent"), disabled, cfg, nil)
	conn, _, err := st.CreateConnection(context.Background(), &agentv1.RepoConnection{OwnerId: "user-alice", Repo: "local/r", IssueLabels: []string{"thefold"}},
		[]byte("sealed"), "")
	if err != nil {
		t.Fatal(err)
	}
	return &env{st: st, tasks: tasks, p: p, conn: conn}
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
