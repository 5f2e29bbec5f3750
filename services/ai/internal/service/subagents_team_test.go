package service

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
)

type roles = []aiv1.SubAgentRole

// The team follows the complexity: roles in the order they run, each with its dependencies.
func TestTeamByComplexity(t *testing.T) {
	t.Parallel()
	planned := roles{rolePlanner}
	both := roles{roleResearcher, rolePlanner}
	cases := []struct {
		complexity []int32
		want       []member
	}{
		{[]int32{0, 1, 4}, nil},
		{[]int32{5, 6, 7}, []member{{role: roleImplementer}, {role: roleTester}}},
		{[]int32{8, 9}, []member{{role: rolePlanner}, {roleImplementer, planned}, {roleTester, planned}, {roleReviewer, planned}}},
		{[]int32{10}, []member{{role: roleResearcher}, {role: rolePlanner},
			{roleImplementer, both}, {roleTester, both}, {roleReviewer, both}, {roleDocumenter, both}}},
	}
	for _, c := range cases {
		for _, n := range c.complexity {
			got := team(n)
			if d := cmp.Diff(c.want, got, cmp.AllowUnexported(member{})); d != "" {
				t.Errorf("complexity %d (-want +got):\n%s", n, d)
			}
			// Every dependency runs before its dependents.
			for i, m := range got {
				for _, d := range m.deps {
					if j := slices.IndexFunc(got, func(o member) bool { return o.role == d }); j < 0 || j >= i {
						t.Errorf("complexity %d: %v depends on %v, which does not run before it", n, m.role, d)
					}
				}
			}
		}
	}
}

// Each role's tier per budget mode.
func TestRoleTiers(t *testing.T) {
	t.Parallel()
	all := roles{rolePlanner, roleImplementer, roleTester, roleReviewer, roleDocumenter, roleResearcher}
	want := map[aiv1.BudgetMode][]int32{
		aiv1.BudgetMode_BUDGET_MODE_UNSPECIFIED:     {3, 3, 2, 3, 2, 2},
		aiv1.BudgetMode_BUDGET_MODE_BALANCED:        {3, 3, 2, 3, 2, 2},
		aiv1.BudgetMode_BUDGET_MODE_QUALITY_FIRST:   {5, 5, 4, 5, 4, 4},
		aiv1.BudgetMode_BUDGET_MODE_AGGRESSIVE_SAVE: {1, 1, 1, 1, 1, 1},
	}
	for mode, tiers := range want {
		for i, r := range all {
			if got := roleTier(r, mode); got != tiers[i] {
				t.Errorf("%v in %v: tier %d, want %d", r, mode, got, tiers[i])
			}
		}
	}
}

// The graph runs the ready roles at once, each dependent after its dependencies (failed or
// not) with their runs, and a failure stops nothing.
func TestRunGraph(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	running, most := 0, 0
	ended := map[aiv1.SubAgentRole]bool{}
	boom := errors.New("boom")
	runs := runGraph(t.Context(), team(10), func(ctx context.Context, m member, deps []roleRun) roleRun {
		mu.Lock()
		for _, d := range m.deps {
			if !ended[d] {
				t.Errorf("%v started before its dependency %v ended", m.role, d)
			}
		}
		running++
		most = max(most, running)
		mu.Unlock()
		// Wait until the other ready roles have started, or a while.
		deadline := time.Now().Add(2 * time.Second)
		for time.Now().Before(deadline) {
			mu.Lock()
			n := most
			mu.Unlock()
			if (len(m.deps) == 0 && n >= 2) || (len(m.deps) > 0 && n >= 4) {
				break
			}
			time.Sleep(time.Millisecond)
		}
		if len(deps) != len(m.deps) {
			t.Errorf("%v got %d dependency runs, want %d", m.role, len(deps), len(m.deps))
		}
		for i, d := range deps {
			if d.result.GetRole() != m.deps[i] {
				t.Errorf("%v: dependency %d is %v, want %v", m.role, i, d.result.GetRole(), m.deps[i])
			}
		}
		mu.Lock()
		running--
		ended[m.role] = true
		mu.Unlock()
		r := roleRun{result: &aiv1.SubAgentResult{Role: m.role}}
		if m.role == roleResearcher {
			r.err = boom // its dependents still run
		}
		return r
	})
	if len(runs) != 6 || most != 4 {
		t.Fatalf("%d runs, at most %d at once; want 6 runs, 4 at once", len(runs), most)
	}
	for i, m := range team(10) {
		if runs[i].result.GetRole() != m.role || (runs[i].err != nil) != (m.role == roleResearcher) {
			t.Errorf("run %d: %v %v", i, runs[i].result.GetRole(), runs[i].err)
		}
	}
}
