package store

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"google.golang.org/protobuf/types/known/timestamppb"

	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

func TestTopoOrder(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	mk := func(id string, p typev1.Priority, age int) *tasksv1.Task {
		return &tasksv1.Task{Id: id, Priority: p, CreateTime: timestamppb.New(t0.Add(time.Duration(age) * time.Minute))}
	}
	const (
		low    = typev1.Priority_PRIORITY_LOW
		medium = typev1.Priority_PRIORITY_MEDIUM
		urgent = typev1.Priority_PRIORITY_URGENT
	)
	cases := []struct {
		name  string
		tasks []*tasksv1.Task
		edges []Edge
		want  []string
	}{
		{"empty", nil, nil, []string{}},
		{"priority then age then id", []*tasksv1.Task{mk("c", medium, 1), mk("b", medium, 0), mk("a", medium, 1), mk("u", urgent, 5), mk("l", low, 0)}, nil,
			[]string{"u", "b", "a", "c", "l"}},
		{"blockers first even if less urgent", []*tasksv1.Task{mk("u", urgent, 0), mk("l", low, 0)},
			[]Edge{{TaskID: "u", BlockedByID: "l"}}, []string{"l", "u"}},
		{"chain and diamond", []*tasksv1.Task{mk("a", low, 0), mk("b", medium, 1), mk("c", medium, 2), mk("d", urgent, 3)},
			[]Edge{{"b", "a"}, {"c", "a"}, {"d", "b"}, {"d", "c"}}, []string{"a", "b", "c", "d"}},
		{"a cycle is kept, not lost", []*tasksv1.Task{mk("a", low, 0), mk("b", low, 1), mk("c", low, 2)},
			[]Edge{{"a", "b"}, {"b", "a"}}, []string{"c", "a", "b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if d := cmp.Diff(c.want, topoOrder(c.tasks, c.edges), cmpopts.EquateEmpty()); d != "" {
				t.Errorf("order (-want +got):\n%s", d)
			}
		})
	}
}

func TestGraph(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	mk := func(repo, title string, opts ...func(*tasksv1.Task)) *tasksv1.Task {
		return mustCreate(t, s, task(alice, repo, title, opts...))
	}
	// design ← api ← ui; api ← elsewhere (another repo); docs alone; shipped (done) ← ui
	design := mk("local/demo", "design")
	elsewhere := mk("local/other", "elsewhere")
	shipped := mk("local/demo", "shipped")
	mustStatus(t, s, alice, shipped.Id, inProgress)
	mustStatus(t, s, alice, shipped.Id, done)
	api := mk("local/demo", "api", func(tk *tasksv1.Task) { tk.BlockedBy = []string{design.Id, elsewhere.Id} })
	ui := mk("local/demo", "ui", func(tk *tasksv1.Task) {
		tk.BlockedBy = []string{api.Id, shipped.Id}
		tk.Priority = typev1.Priority_PRIORITY_URGENT
	})
	docs := mk("local/demo", "docs", func(tk *tasksv1.Task) { tk.Priority = typev1.Priority_PRIORITY_LOW })
	stuck := mk("local/demo", "stuck")
	if _, err := s.SetStatus(ctx, alice, stuck.Id, blocked, "waiting for a person", 0); err != nil {
		t.Fatal(err)
	}
	after := mk("local/demo", "after shipped", func(tk *tasksv1.Task) { tk.BlockedBy = []string{shipped.Id} })
	mustCreate(t, s, task(bob, "local/demo", "bob's"))

	t.Run("open", func(t *testing.T) {
		g, err := s.Graph(ctx, alice, "local/demo", false)
		if err != nil {
			t.Fatal(err)
		}
		want := &Graph{
			// api is older than stuck and after; once it is placed, urgent ui goes next.
			Order: []string{design.Id, api.Id, ui.Id, stuck.Id, after.Id, docs.Id},
			Edges: []Edge{{api.Id, design.Id}, {ui.Id, api.Id}},
			Ready: []string{design.Id, after.Id, docs.Id},
		}
		if d := cmp.Diff(want, g, cmpopts.IgnoreFields(Graph{}, "Tasks")); d != "" {
			t.Errorf("graph (-want +got):\n%s", d)
		}
		if d := cmp.Diff(g.Order, ids(g.Tasks)); d != "" {
			t.Errorf("tasks not in order (-order +tasks):\n%s", d)
		}
	})
	t.Run("include closed", func(t *testing.T) {
		g, err := s.Graph(ctx, alice, "local/demo", true)
		if err != nil {
			t.Fatal(err)
		}
		want := &Graph{
			Order: []string{design.Id, shipped.Id, api.Id, ui.Id, stuck.Id, after.Id, docs.Id},
			Edges: []Edge{{api.Id, design.Id}, {ui.Id, shipped.Id}, {ui.Id, api.Id}, {after.Id, shipped.Id}},
			Ready: []string{design.Id, after.Id, docs.Id},
		}
		if d := cmp.Diff(want, g, cmpopts.IgnoreFields(Graph{}, "Tasks")); d != "" {
			t.Errorf("graph (-want +got):\n%s", d)
		}
	})
	t.Run("blockers elsewhere count", func(t *testing.T) {
		mustStatus(t, s, alice, design.Id, inProgress)
		mustStatus(t, s, alice, design.Id, done)
		g, err := s.Graph(ctx, alice, "local/demo", false)
		if err != nil {
			t.Fatal(err)
		}
		// api still waits for the task in local/other.
		if d := cmp.Diff([]string{after.Id, docs.Id}, g.Ready); d != "" {
			t.Errorf("ready (-want +got):\n%s", d)
		}
		mustStatus(t, s, alice, elsewhere.Id, inProgress)
		mustStatus(t, s, alice, elsewhere.Id, done)
		g, err = s.Graph(ctx, alice, "local/demo", false)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{api.Id, after.Id, docs.Id}, g.Ready); d != "" {
			t.Errorf("ready (-want +got):\n%s", d)
		}
	})
	t.Run("another owner sees nothing", func(t *testing.T) {
		g, err := s.Graph(ctx, bob, "local/other", true)
		if err != nil {
			t.Fatal(err)
		}
		if len(g.Tasks) != 0 || len(g.Edges) != 0 {
			t.Errorf("bob sees %v", g)
		}
	})
}
