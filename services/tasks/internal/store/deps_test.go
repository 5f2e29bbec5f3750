package store

import (
	"errors"
	"slices"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/thefold/thefold/pkg/errs"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

func TestAddDependency(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	mk := func(title string) string { return mustCreate(t, s, task(alice, "local/demo", title)).Id }
	a, b, c, d := mk("a"), mk("b"), mk("c"), mk("d")
	bobs := mustCreate(t, s, task(bob, "local/demo", "bob's")).Id

	// a ← b ← c, and the diamond a ← d ← c: acyclic, all accepted.
	for _, e := range [][2]string{{b, a}, {c, b}, {d, a}, {c, d}} {
		mustDep(t, s, alice, e[0], e[1])
	}
	got, err := s.Get(ctx, alice, c)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{b, d}, got.BlockedBy); diff != "" {
		t.Errorf("c blocked by, in the order added (-want +got):\n%s", diff)
	}

	before := len(allEvents(t, pool))
	cases := []struct {
		name          string
		owner         string
		task, blocker string
		want          error
	}{
		{"self", alice, a, a, errs.ErrFailedPrecondition},
		{"two-cycle", alice, a, b, errs.ErrFailedPrecondition},
		{"three-cycle", alice, a, c, errs.ErrFailedPrecondition},
		{"cycle through the diamond", alice, d, c, errs.ErrFailedPrecondition},
		{"blocker of another owner", alice, a, bobs, errs.ErrNotFound},
		{"task of another owner", alice, bobs, a, errs.ErrNotFound},
		{"as another owner", bob, c, a, errs.ErrNotFound},
		{"missing task", alice, "00000000-0000-4000-8000-000000000000", a, errs.ErrNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.AddDependency(ctx, tc.owner, tc.task, tc.blocker)
			wantErr(t, err, tc.want)
		})
	}
	// An existing edge is a no-op.
	again, err := s.AddDependency(ctx, alice, c, b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := diffTask(got, again); diff != "" {
		t.Errorf("re-adding an edge changed the task (-before +after):\n%s", diff)
	}
	if after := len(allEvents(t, pool)); after != before {
		t.Errorf("refused and repeated edges wrote %d events", after-before)
	}
	// A transitive edge that closes no cycle is fine.
	mustDep(t, s, alice, c, a)
}

func TestRemoveDependency(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	a := mustCreate(t, s, task(alice, "local/demo", "a"))
	b := mustCreate(t, s, task(alice, "local/demo", "b", func(tk *tasksv1.Task) { tk.BlockedBy = []string{a.Id} }))

	_, err := s.RemoveDependency(ctx, bob, b.Id, a.Id)
	wantErr(t, err, errs.ErrNotFound)
	_, err = s.RemoveDependency(ctx, alice, a.Id, b.Id) // the reverse edge does not exist
	wantErr(t, err, errs.ErrNotFound)
	got, err := s.RemoveDependency(ctx, alice, b.Id, a.Id)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.BlockedBy) != 0 {
		t.Errorf("blocked_by = %v after removal", got.BlockedBy)
	}
	_, err = s.RemoveDependency(ctx, alice, b.Id, a.Id)
	wantErr(t, err, errs.ErrNotFound)
	// Now a may wait for b.
	mustDep(t, s, alice, a.Id, b.Id)

	evs := allEvents(t, pool)
	if diff := cmp.Diff([]string{"created", "created", "updated", "updated"}, eventTypes(evs)); diff != "" {
		t.Errorf("event types (-want +got):\n%s", diff)
	}
}

// TestConcurrentAddDependencyCannotFormCycle races two edges that are each acyclic alone
// but close a cycle together: exactly one may win, every round.
func TestConcurrentAddDependencyCannotFormCycle(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	const rounds = 10
	scenarios := []struct {
		name string
		// edges returns the two racing edges {task, blocker}, after any setup.
		edges func() [2][2]string
	}{
		{"two-cycle", func() [2][2]string {
			p, q := mkRace(t, s, "p"), mkRace(t, s, "q")
			return [2][2]string{{p, q}, {q, p}}
		}},
		{"three-cycle", func() [2][2]string {
			x, y, z := mkRace(t, s, "x"), mkRace(t, s, "y"), mkRace(t, s, "z")
			mustDep(t, s, alice, y, x) // y ← x; then z ← y and x ← z would close x → z → y → x
			return [2][2]string{{z, y}, {x, z}}
		}},
	}
	for _, sc := range scenarios {
		for round := range rounds {
			edges := sc.edges()
			start := make(chan struct{})
			var (
				wg      sync.WaitGroup
				results [2]error
			)
			for i, e := range edges {
				wg.Go(func() {
					<-start
					_, results[i] = s.AddDependency(ctx, alice, e[0], e[1])
				})
			}
			close(start)
			wg.Wait()
			var ok, refused int
			for _, err := range results {
				switch {
				case err == nil:
					ok++
				case errors.Is(err, errs.ErrFailedPrecondition):
					refused++
				default:
					t.Fatalf("%s round %d: unexpected error %v", sc.name, round, err)
				}
			}
			if ok != 1 || refused != 1 {
				t.Fatalf("%s round %d: %d succeeded, %d refused; want one each (%v)", sc.name, round, ok, refused, results)
			}
		}
	}
	assertAcyclic(t, s, "local/race")
}

func mkRace(t *testing.T, s *Store, title string) string {
	t.Helper()
	return mustCreate(t, s, task(alice, "local/race", title)).Id
}

// assertAcyclic checks that every stored edge of repo goes forward in the topological
// order, which tasks on a cycle could not satisfy.
func assertAcyclic(t *testing.T, s *Store, repo string) {
	t.Helper()
	g, err := s.Graph(t.Context(), alice, repo, true)
	if err != nil {
		t.Fatal(err)
	}
	pos := map[string]int{}
	for i, id := range g.Order {
		pos[id] = i
	}
	for _, e := range g.Edges {
		if pos[e.BlockedByID] >= pos[e.TaskID] {
			t.Errorf("edge %s ← %s goes backwards: the graph has a cycle", e.TaskID, e.BlockedByID)
		}
	}
	if !slices.Equal(slices.Sorted(slices.Values(g.Order)), slices.Sorted(slices.Values(ids(g.Tasks)))) {
		t.Errorf("order %v does not cover the tasks", g.Order)
	}
}
