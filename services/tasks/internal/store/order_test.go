package store

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/thefold/thefold/pkg/errs"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

func TestOpenTasks(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	a := mustCreate(t, s, task(alice, "local/demo", "a"))
	mustCreate(t, s, task(alice, "local/demo", "b", func(tk *tasksv1.Task) { tk.BlockedBy = []string{a.Id} }))
	c := mustCreate(t, s, task(alice, "local/demo", "c", func(tk *tasksv1.Task) { tk.Status = planned }))
	mustStatus(t, s, alice, c.Id, blocked)
	for _, to := range []tasksv1.TaskStatus{inProgress, inReview, done} {
		d := mustCreate(t, s, task(alice, "local/demo", "closed or under way"))
		mustStatus(t, s, alice, d.Id, inProgress)
		if to != inProgress {
			mustStatus(t, s, alice, d.Id, to)
		}
	}
	x := mustCreate(t, s, task(alice, "local/demo", "cancelled"))
	mustStatus(t, s, alice, x.Id, cancelled)
	mustCreate(t, s, task(alice, "local/other", "other repo"))
	mustCreate(t, s, task(bob, "local/demo", "bob's"))

	cases := []struct {
		limit int
		want  []string
	}{
		{10, []string{"a", "b", "c"}},
		{2, []string{"a", "b"}},
	}
	for _, tc := range cases {
		got, err := s.OpenTasks(ctx, alice, "local/demo", tc.limit)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(tc.want, titles(got)); d != "" {
			t.Errorf("limit %d (-want +got):\n%s", tc.limit, d)
		}
		if len(got) > 1 && cmp.Diff([]string{a.Id}, got[1].BlockedBy) != "" {
			t.Errorf("b's blocked_by = %v, want %v", got[1].BlockedBy, []string{a.Id})
		}
	}
	if _, err := s.OpenTasks(ctx, alice, "local/demo", 0); err == nil {
		t.Error("OpenTasks with limit 0: no error")
	}
}

func TestSaveOrder(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	a := mustCreate(t, s, task(alice, "local/demo", "a"))
	b := mustCreate(t, s, task(alice, "local/demo", "b", func(tk *tasksv1.Task) {
		tk.BlockedBy = []string{a.Id}
		tk.Complexity = 8 // set by a person: kept
	}))
	c := mustCreate(t, s, task(alice, "local/demo", "c", func(tk *tasksv1.Task) { tk.PlannedOrder = 1; tk.EstimatedTokens = 5 }))
	gone := mustCreate(t, s, task(alice, "local/demo", "deleted while ordering"))
	other := mustCreate(t, s, task(alice, "local/other", "not in the order", func(tk *tasksv1.Task) { tk.PlannedOrder = 4 }))
	if err := s.Delete(ctx, alice, gone.Id); err != nil {
		t.Fatal(err)
	}
	before := len(allEvents(t, pool))

	items := []OrderItem{
		{TaskID: c.Id, Complexity: 2, Reasoning: "no blockers, urgent"},
		{TaskID: gone.Id, Complexity: 3, EstimatedTokens: 100, Reasoning: "gone"},
		{TaskID: a.Id, Complexity: 4, EstimatedTokens: 4000, Reasoning: "blocks b"},
		{TaskID: b.Id, Complexity: 6, EstimatedTokens: 9000, Reasoning: "after a"},
	}
	req := &Request{ID: "order-1", Method: "PlanTaskOrder", Fingerprint: []byte("repo local/demo")}
	resp, err := s.SaveOrder(ctx, alice, "local/demo", items, "a first", req)
	if err != nil {
		t.Fatal(err)
	}
	want := &tasksv1.PlanTaskOrderResponse{Reasoning: "a first", Tasks: []*tasksv1.PlannedTask{
		{TaskId: c.Id, Order: 1, Complexity: 2, Reasoning: "no blockers, urgent"},
		{TaskId: a.Id, Order: 2, Complexity: 4, Reasoning: "blocks b"},
		{TaskId: b.Id, Order: 3, Complexity: 8, Reasoning: "after a"},
	}}
	if d := cmp.Diff(want, resp, protocmp.Transform()); d != "" {
		t.Errorf("answer (-want +got):\n%s", d)
	}
	stored := map[string]struct {
		order, complexity int32
		tokens            int64
	}{
		c.Id:     {1, 2, 5}, // no token estimate in the answer: the old one stays
		a.Id:     {2, 4, 4000},
		b.Id:     {3, 8, 9000},
		other.Id: {4, 0, 0},
	}
	for id, w := range stored {
		got, err := s.Get(ctx, alice, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.PlannedOrder != w.order || got.Complexity != w.complexity || got.EstimatedTokens != w.tokens {
			t.Errorf("%s: order %d complexity %d tokens %d, want %+v", got.Title, got.PlannedOrder, got.Complexity, got.EstimatedTokens, w)
		}
	}
	evs := allEvents(t, pool)[before:]
	wantFields := map[string][]string{
		c.Id: {"complexity"},
		a.Id: {"complexity", "estimated_tokens", "planned_order"},
		b.Id: {"estimated_tokens", "planned_order"},
	}
	if len(evs) != len(wantFields) {
		t.Fatalf("%d events, want %d: %v", len(evs), len(wantFields), eventTypes(evs))
	}
	for _, e := range evs {
		u := e.Payload.GetUpdated()
		if e.Type != "updated" || u == nil {
			t.Fatalf("event %v, want updated", e.Payload)
		}
		if d := cmp.Diff(wantFields[e.Agg], u.GetChangedFields().GetPaths()); d != "" {
			t.Errorf("%s changed fields (-want +got):\n%s", e.Task.GetTitle(), d)
		}
		if e.Task.PlannedOrder != stored[e.Agg].order {
			t.Errorf("%s event carries order %d", e.Task.GetTitle(), e.Task.PlannedOrder)
		}
	}

	// The same request again (a concurrent twin that lost the race, or a retry): the first
	// answer, and these items are not applied.
	again, err := s.SaveOrder(ctx, alice, "local/demo", []OrderItem{{TaskID: a.Id}, {TaskID: b.Id}, {TaskID: c.Id}}, "other", req)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, again, protocmp.Transform()); d != "" {
		t.Errorf("replayed answer (-want +got):\n%s", d)
	}
	if rec, err := s.RecordedOrder(ctx, alice, req); err != nil || cmp.Diff(want, rec, protocmp.Transform()) != "" {
		t.Errorf("RecordedOrder = %v, %v", rec, err)
	}
	if n := len(allEvents(t, pool)); n != before+len(wantFields) {
		t.Errorf("%d events after the replay, want %d", n, before+len(wantFields))
	}
	// One request id, one request: another repository, another method, another owner.
	_, err = s.SaveOrder(ctx, alice, "local/other", nil, "", &Request{ID: "order-1", Method: "PlanTaskOrder", Fingerprint: []byte("repo local/other")})
	wantErr(t, err, errs.ErrInvalid)
	_, err = s.RecordedOrder(ctx, alice, &Request{ID: "order-1", Method: "CreateTask", Fingerprint: req.Fingerprint})
	wantErr(t, err, errs.ErrInvalid)
	if rec, err := s.RecordedOrder(ctx, bob, req); rec != nil || err != nil {
		t.Errorf("bob's RecordedOrder = %v, %v; want nothing", rec, err)
	}
	// Saving the same order again without a request id changes nothing, so no events.
	if _, err := s.SaveOrder(ctx, alice, "local/demo", items, "", nil); err != nil {
		t.Fatal(err)
	}
	if n := len(allEvents(t, pool)); n != before+len(wantFields) {
		t.Errorf("%d events after an unchanged order, want %d", n, before+len(wantFields))
	}
}

// A dependency added while the model was ordering makes the order wrong: nothing is stored,
// and the request id stays free for the retry.
func TestSaveOrderDependencyChanged(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	a := mustCreate(t, s, task(alice, "local/demo", "a"))
	b := mustCreate(t, s, task(alice, "local/demo", "b"))
	mustDep(t, s, alice, a.Id, b.Id) // a is now blocked by b
	before := len(allEvents(t, pool))
	req := &Request{ID: "order-2", Method: "PlanTaskOrder", Fingerprint: []byte("x")}
	_, err := s.SaveOrder(ctx, alice, "local/demo", []OrderItem{{TaskID: a.Id, Complexity: 1}, {TaskID: b.Id, Complexity: 1}}, "", req)
	wantErr(t, err, errs.ErrConflict)
	for _, id := range []string{a.Id, b.Id} {
		got, err := s.Get(ctx, alice, id)
		if err != nil {
			t.Fatal(err)
		}
		if got.PlannedOrder != 0 || got.Complexity != 0 {
			t.Errorf("%s stored: order %d complexity %d", got.Title, got.PlannedOrder, got.Complexity)
		}
	}
	if n := len(allEvents(t, pool)); n != before {
		t.Errorf("%d events, want %d", n, before)
	}
	if rec, err := s.RecordedOrder(ctx, alice, req); rec != nil || err != nil {
		t.Errorf("RecordedOrder after the conflict = %v, %v; want nothing", rec, err)
	}
	if _, err := s.SaveOrder(ctx, alice, "local/demo", []OrderItem{{TaskID: b.Id}, {TaskID: a.Id}}, "", req); err != nil {
		t.Errorf("the right order after the conflict: %v", err)
	}
}
