package service_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

// lastEventID is the id of the newest event in e's outbox, 0 when there is none.
func lastEventID(t *testing.T, e *env) int64 {
	t.Helper()
	var id int64
	if err := e.pool.QueryRow(t.Context(), "SELECT coalesce(max(id), 0) FROM events").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

func (e *env) get(t *testing.T, ctx context.Context, id string) *tasksv1.Task {
	t.Helper()
	resp, err := e.client.GetTask(ctx, &tasksv1.GetTaskRequest{Id: id})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Task
}

func (e *env) plan(ctx context.Context, repo, requestID string) (*tasksv1.PlanTaskOrderResponse, error) {
	return e.client.PlanTaskOrder(ctx, &tasksv1.PlanTaskOrderRequest{Repo: repo, RequestId: requestID})
}

// wantUnchanged fails unless tasks are as given and no event was written after lastEvent.
func wantUnchanged(t *testing.T, e *env, lastEvent int64, tasks ...*tasksv1.Task) {
	t.Helper()
	for _, tk := range tasks {
		if d := cmp.Diff(tk, e.get(t, e.alice, tk.Id), protocmp.Transform()); d != "" {
			t.Errorf("%s changed (-before +after):\n%s", tk.Title, d)
		}
	}
	if got := lastEventID(t, e); got != lastEvent {
		t.Errorf("events written: last id %d, was %d", got, lastEvent)
	}
}

func TestPlanTaskOrder(t *testing.T) {
	t.Parallel()
	e, fake := startWithAI(t)
	c := e.client
	ctx := e.alice
	low, high, urgent := typev1.Priority_PRIORITY_LOW, typev1.Priority_PRIORITY_HIGH, typev1.Priority_PRIORITY_URGENT

	under := e.create(t, ctx, &tasksv1.CreateTaskRequest{Title: "under way"})
	e.setStatus(t, under.Id, inProgress)
	a := e.create(t, ctx, &tasksv1.CreateTaskRequest{Title: "write the schema", Priority: low, Labels: []string{"db"}})
	b := e.create(t, ctx, &tasksv1.CreateTaskRequest{Title: "use the schema", Priority: urgent, BlockedBy: []string{a.Id, under.Id}})
	d := e.create(t, ctx, &tasksv1.CreateTaskRequest{Title: "fix the docs", Description: "the README", Priority: high})
	x := e.create(t, ctx, &tasksv1.CreateTaskRequest{Title: "tune the index"})
	if _, err := c.UpdateTask(ctx, &tasksv1.UpdateTaskRequest{Id: x.Id, Task: &tasksv1.Task{Complexity: 5},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"complexity"}}}); err != nil {
		t.Fatal(err)
	}
	y := e.create(t, ctx, &tasksv1.CreateTaskRequest{Title: "needs a decision"})
	e.setStatus(t, y.Id, blocked)
	closed := e.create(t, ctx, &tasksv1.CreateTaskRequest{Title: "done before"})
	if _, err := c.UpdateTask(ctx, &tasksv1.UpdateTaskRequest{Id: closed.Id, Task: &tasksv1.Task{PlannedOrder: 7},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"planned_order"}}}); err != nil {
		t.Fatal(err)
	}
	e.setStatus(t, closed.Id, inProgress)
	e.setStatus(t, closed.Id, done)
	elsewhere := e.create(t, ctx, &tasksv1.CreateTaskRequest{Title: "other repo", Repo: "local/other"})
	e.create(t, e.bob, &tasksv1.CreateTaskRequest{Title: "bob's"})
	notOrdered := []*tasksv1.Task{e.get(t, ctx, under.Id), e.get(t, ctx, closed.Id), e.get(t, ctx, elsewhere.Id)}
	after := lastEventID(t, e)

	resp, err := e.plan(ctx, "local/demo", "plan-1")
	if err != nil {
		t.Fatal(err)
	}

	// What the ai service was asked: alice's open tasks of the repository, oldest first, with
	// links among them only.
	calls, billed := fake.received()
	if len(calls) != 1 || billed != 1 {
		t.Fatalf("%d ai calls, %d billed; want 1", len(calls), billed)
	}
	call := calls[0]
	if call.user != "alice" {
		t.Errorf("ai called for %q, want alice (the caller's identity forwarded)", call.user)
	}
	if id := call.req.RequestId; !strings.HasPrefix(id, "tasks-order-") || len(id) != len("tasks-order-")+40 {
		t.Errorf("ai request_id = %q", id)
	}
	wantReq := &aiv1.PlanTaskOrderRequest{
		RequestId:   call.req.RequestId,
		Attribution: &aiv1.Attribution{Repo: "local/demo"},
		Tasks: []*aiv1.OrderableTask{
			{Id: a.Id, Title: a.Title, Priority: low, Labels: []string{"db"}},
			{Id: b.Id, Title: b.Title, Priority: urgent, BlockedBy: []string{a.Id}},
			{Id: d.Id, Title: d.Title, Description: "the README", Priority: high},
			{Id: x.Id, Title: x.Title, Priority: typev1.Priority_PRIORITY_MEDIUM, Complexity: 5},
			{Id: y.Id, Title: y.Title, Priority: typev1.Priority_PRIORITY_MEDIUM},
		},
	}
	if diff := cmp.Diff(wantReq, call.req, protocmp.Transform()); diff != "" {
		t.Errorf("ai request (-want +got):\n%s", diff)
	}

	// The fake's order: blockers first, then by priority, then oldest.
	want := &tasksv1.PlanTaskOrderResponse{Reasoning: "blockers first, then the most urgent", Tasks: []*tasksv1.PlannedTask{
		{TaskId: d.Id, Order: 1, Complexity: 3, Reasoning: "0 blockers, PRIORITY_HIGH"},
		{TaskId: x.Id, Order: 2, Complexity: 5, Reasoning: "0 blockers, PRIORITY_MEDIUM"},
		{TaskId: y.Id, Order: 3, Complexity: 3, Reasoning: "0 blockers, PRIORITY_MEDIUM"},
		{TaskId: a.Id, Order: 4, Complexity: 3, Reasoning: "0 blockers, PRIORITY_LOW"},
		{TaskId: b.Id, Order: 5, Complexity: 4, Reasoning: "1 blockers, PRIORITY_URGENT"},
	}}
	if diff := cmp.Diff(want, resp, protocmp.Transform()); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}

	// Stored, and announced: one UPDATED event per task, naming what changed.
	s := watch(t, ctx, c, &tasksv1.WatchTasksRequest{AfterId: after})
	evs := recvN(t, s, len(want.Tasks))
	for i, p := range want.Tasks {
		got := e.get(t, ctx, p.TaskId)
		if got.PlannedOrder != p.Order || got.Complexity != p.Complexity || got.EstimatedTokens != int64(p.Complexity)*1000 {
			t.Errorf("%s: order %d complexity %d tokens %d, want %d %d %d", got.Title, got.PlannedOrder, got.Complexity, got.EstimatedTokens,
				p.Order, p.Complexity, p.Complexity*1000)
		}
		fields := []string{"complexity", "estimated_tokens", "planned_order"}
		if p.TaskId == x.Id {
			fields = fields[1:] // its complexity was set before
		}
		if diff := cmp.Diff(updated(got, fields...), evs[i], protocmp.Transform(),
			protocmp.IgnoreFields(&tasksv1.WatchTasksResponse{}, "id", "time")); diff != "" {
			t.Errorf("event %d (-want +got):\n%s", i, diff)
		}
	}
	wantUnchanged(t, e, lastEventID(t, e), notOrdered...)

	// The same order again, without a request id: asked and billed again, nothing changes.
	last := lastEventID(t, e)
	again, err := e.plan(ctx, "local/demo", "")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, again, protocmp.Transform()); diff != "" {
		t.Errorf("second answer (-want +got):\n%s", diff)
	}
	if calls, billed := fake.received(); len(calls) != 2 || billed != 2 || calls[1].req.RequestId != "" {
		t.Errorf("after a call without request_id: %d calls, %d billed, request_id %q", len(calls), billed, calls[len(calls)-1].req.RequestId)
	}
	if got := lastEventID(t, e); got != last {
		t.Errorf("an unchanged order wrote events (%d → %d)", last, got)
	}
}

func TestPlanTaskOrderNothingOpen(t *testing.T) {
	t.Parallel()
	e, fake := startWithAI(t)
	tk := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "finished"})
	e.setStatus(t, tk.Id, cancelled)
	e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "elsewhere", Repo: "local/other"})
	e.create(t, e.bob, &tasksv1.CreateTaskRequest{Title: "bob's"})
	for _, id := range []string{"", "empty-1", "empty-1"} {
		resp, err := e.plan(e.alice, "local/demo", id)
		if err != nil {
			t.Fatalf("request_id %q: %v", id, err)
		}
		if len(resp.Tasks) != 0 || resp.Reasoning != "" {
			t.Errorf("request_id %q: answer %v, want empty", id, resp)
		}
	}
	if calls, _ := fake.received(); len(calls) != 0 {
		t.Errorf("%d ai calls for a repository without open tasks", len(calls))
	}
}

func TestPlanTaskOrderTooManyTasks(t *testing.T) {
	t.Parallel()
	e, fake := startWithAI(t)
	const n = 501
	for start := 0; start < n; start += 100 {
		var batch []*tasksv1.BatchTask
		for i := start; i < min(start+100, n); i++ {
			batch = append(batch, &tasksv1.BatchTask{Key: fmt.Sprint(i), Task: &tasksv1.CreateTaskRequest{Title: fmt.Sprint("task ", i), Repo: "local/demo"}})
		}
		if _, err := e.client.BatchCreateTasks(e.alice, &tasksv1.BatchCreateTasksRequest{Tasks: batch}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := e.plan(e.alice, "local/demo", "")
	grpctest.WantCode(t, err, codes.FailedPrecondition, "more than 500 open tasks")
	if calls, _ := fake.received(); len(calls) != 0 {
		t.Errorf("%d ai calls for too many tasks", len(calls))
	}
}

func TestPlanTaskOrderWithoutAI(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "t"})
	_, err := e.plan(e.alice, "local/demo", "")
	grpctest.WantCode(t, err, codes.FailedPrecondition, "ai service is not configured")
}

func TestPlanTaskOrderRequestID(t *testing.T) {
	t.Parallel()
	e, fake := startWithAI(t)
	a := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "a"})
	e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "b", BlockedBy: []string{a.Id}})
	bobA := e.create(t, e.bob, &tasksv1.CreateTaskRequest{Title: "a"})
	e.create(t, e.bob, &tasksv1.CreateTaskRequest{Title: "b", BlockedBy: []string{bobA.Id}})
	down := status.Error(codes.Unavailable, "no provider answered")
	aiIDs := func(from int) []string {
		calls, _ := fake.received()
		var out []string
		for _, c := range calls[from:] {
			out = append(out, c.req.RequestId)
		}
		return out
	}

	// The first call fails in the ai service; its retry asks again with the same ai
	// request_id, and a retry of the answered call never reaches the ai service.
	fake.set(down, nil)
	_, err := e.plan(e.alice, "local/demo", "retry-1")
	grpctest.WantCode(t, err, codes.Unavailable)
	fake.set(nil, nil)
	first, err := e.plan(e.alice, "local/demo", "retry-1")
	if err != nil {
		t.Fatal(err)
	}
	e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "created after the answer"})
	replay, err := e.plan(e.alice, "local/demo", "retry-1")
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(first, replay, protocmp.Transform()); diff != "" {
		t.Errorf("retry's answer (-first +retry):\n%s", diff)
	}
	alice := aiIDs(0)
	if len(alice) != 2 || alice[0] == "" || alice[0] != alice[1] {
		t.Fatalf("ai request ids of alice's attempts = %q, want two equal ones", alice)
	}
	if _, billed := fake.received(); billed != 1 {
		t.Errorf("billed %d times, want 1", billed)
	}

	// Bob's request with the same request_id is his own.
	if _, err := e.plan(e.bob, "local/demo", "retry-1"); err != nil {
		t.Fatal(err)
	}
	if bob := aiIDs(2); len(bob) != 1 || bob[0] == alice[0] {
		t.Errorf("bob's ai request ids = %q, alice's %q", bob, alice[0])
	}

	// The open tasks changed between a failed attempt and its retry: another question, so
	// another ai request_id (the ai service would refuse a reused one).
	fake.set(down, nil)
	_, err = e.plan(e.alice, "local/demo", "retry-2")
	grpctest.WantCode(t, err, codes.Unavailable)
	e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "created between attempts"})
	fake.set(nil, nil)
	if _, err := e.plan(e.alice, "local/demo", "retry-2"); err != nil {
		t.Fatal(err)
	}
	if ids := aiIDs(3); len(ids) != 2 || ids[0] == ids[1] {
		t.Errorf("ai request ids across a change = %q, want two different ones", ids)
	}

	// An unusable answer is recorded by the ai service like any other: retried with the
	// same request_id it comes back (billed once), and the message says to use a new id.
	fake.set(nil, omitLast)
	_, billedBefore := fake.received()
	for range 2 {
		_, err = e.plan(e.alice, "local/demo", "retry-3")
		grpctest.WantCode(t, err, codes.Unavailable, "cannot be used", "new request_id")
	}
	if _, billed := fake.received(); billed != billedBefore+1 {
		t.Errorf("a retried bad answer billed %d times, want 1", billed-billedBefore)
	}
	fake.set(nil, nil)

	// One request id, one request.
	_, err = e.plan(e.alice, "local/other", "retry-1")
	grpctest.WantCode(t, err, codes.InvalidArgument, "request_id", "different request")
	if _, err := e.client.CreateTask(e.alice, &tasksv1.CreateTaskRequest{Title: "t", Repo: "local/demo", RequestId: "create-1"}); err != nil {
		t.Fatal(err)
	}
	_, err = e.plan(e.alice, "local/demo", "create-1")
	grpctest.WantCode(t, err, codes.InvalidArgument, "request_id", "different request")
}

func TestPlanTaskOrderAIErrors(t *testing.T) {
	t.Parallel()
	e, fake := startWithAI(t)
	a := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "a"})
	b := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "b", BlockedBy: []string{a.Id}})
	last := lastEventID(t, e)

	cases := []struct {
		name  string
		ai    error
		code  codes.Code
		parts []string
		hides string
	}{
		{"no provider", status.Error(codes.FailedPrecondition, "no model provider is configured; set THEFOLD_AI_PROVIDER"),
			codes.FailedPrecondition, []string{"ordering tasks needs an LLM provider", "THEFOLD_AI_PROVIDER", "no model provider is configured"}, ""},
		{"unavailable", status.Error(codes.Unavailable, "connection error: dial tcp 10.0.0.3:9104: connect: connection refused"),
			codes.Unavailable, []string{"the ai service could not order the tasks", "try again"}, "10.0.0.3"},
		{"rate limited", status.Error(codes.ResourceExhausted, "anthropic: 429 rate_limit_error"),
			codes.Unavailable, []string{"the ai service could not order the tasks", "rate limit"}, "anthropic"},
		{"too slow", status.Error(codes.DeadlineExceeded, "provider timed out after 120s"),
			codes.Unavailable, []string{"the ai service could not order the tasks", "in time"}, "120s"},
		{"not found: default mapping", status.Error(codes.NotFound, "model claude-x not found"),
			codes.FailedPrecondition, []string{"thefold.ai.v1.AIService"}, "claude-x"},
		{"our bad request: masked", status.Error(codes.InvalidArgument, "tasks[0].title: required"),
			codes.Internal, []string{"internal error (ref "}, "title"},
		{"ai internal: masked", status.Error(codes.Internal, "parse: unexpected end of JSON"),
			codes.Internal, []string{"internal error (ref "}, "JSON"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake.set(tc.ai, nil)
			_, err := e.plan(e.alice, "local/demo", "")
			grpctest.WantCode(t, err, tc.code, tc.parts...)
			if tc.hides != "" && strings.Contains(status.Convert(err).Message(), tc.hides) {
				t.Errorf("message %q passes on %q", status.Convert(err).Message(), tc.hides)
			}
		})
	}
	wantUnchanged(t, e, last, a, b)
}

// Spoilers of an answer, as a model (or a bug) might produce.
func omitLast(o []*aiv1.TaskOrder) []*aiv1.TaskOrder { return o[:len(o)-1] }

func TestPlanTaskOrderBadAnswer(t *testing.T) {
	t.Parallel()
	e, fake := startWithAI(t)
	a := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "a"})
	b := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "b", BlockedBy: []string{a.Id}})
	cTask := e.create(t, e.alice, &tasksv1.CreateTaskRequest{Title: "c"})
	last := lastEventID(t, e)

	cases := []struct {
		name  string
		spoil func([]*aiv1.TaskOrder) []*aiv1.TaskOrder
		part  string
	}{
		{"a task left out", omitLast, "is missing"},
		{"a task before its blocker", func(o []*aiv1.TaskOrder) []*aiv1.TaskOrder {
			// The fake puts a first (it blocks b); swap a and b.
			ia, ib := 0, 0
			for i, t := range o {
				switch t.TaskId {
				case a.Id:
					ia = i
				case b.Id:
					ib = i
				}
			}
			o[ia].TaskId, o[ib].TaskId = o[ib].TaskId, o[ia].TaskId
			return o
		}, "which blocks it"},
		{"a task twice", func(o []*aiv1.TaskOrder) []*aiv1.TaskOrder { o[len(o)-1].TaskId = o[0].TaskId; return o }, "twice"},
		{"a task not asked for", func(o []*aiv1.TaskOrder) []*aiv1.TaskOrder { o[len(o)-1].TaskId = missingID; return o }, "not asked for"},
		{"positions out of step", func(o []*aiv1.TaskOrder) []*aiv1.TaskOrder { o[0].Order = 2; return o }, "position"},
		{"complexity out of range", func(o []*aiv1.TaskOrder) []*aiv1.TaskOrder { o[0].Complexity = 11; return o }, "complexity"},
		{"negative token estimate", func(o []*aiv1.TaskOrder) []*aiv1.TaskOrder { o[0].EstimatedTokens = -1; return o }, "token"},
		{"nothing", func([]*aiv1.TaskOrder) []*aiv1.TaskOrder { return nil }, "is missing"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fake.set(nil, tc.spoil)
			_, err := e.plan(e.alice, "local/demo", "")
			grpctest.WantCode(t, err, codes.Unavailable, "cannot be used", "nothing was stored", tc.part)
		})
	}
	wantUnchanged(t, e, last, a, b, cTask)
}
