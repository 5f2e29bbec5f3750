package service

import (
	"context"
	"sync"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
)

// Roles, short.
const (
	rolePlanner     = aiv1.SubAgentRole_SUB_AGENT_ROLE_PLANNER
	roleImplementer = aiv1.SubAgentRole_SUB_AGENT_ROLE_IMPLEMENTER
	roleTester      = aiv1.SubAgentRole_SUB_AGENT_ROLE_TESTER
	roleReviewer    = aiv1.SubAgentRole_SUB_AGENT_ROLE_REVIEWER
	roleDocumenter  = aiv1.SubAgentRole_SUB_AGENT_ROLE_DOCUMENTER
	roleResearcher  = aiv1.SubAgentRole_SUB_AGENT_ROLE_RESEARCHER
)

// minTeamComplexity is the lowest complexity a team works on: below it one model call does
// the planning well enough, and a team only costs more.
const minTeamComplexity = 5

// mergeTier is the registry tier of the AI merge: combining texts is easy work.
const mergeTier = 2

// member is one role of a team and the roles whose outputs it is given.
type member struct {
	role aiv1.SubAgentRole
	deps []aiv1.SubAgentRole
}

// team is the team for a complexity, in the order the roles run (each after the roles it
// depends on): none below 5; 5–7 the implementer and the tester, side by side; 8–9 the
// planner, then the implementer, tester and reviewer on its plan; 10 the researcher and the
// planner side by side, then those three and the documenter on both.
func team(complexity int32) []member {
	switch {
	case complexity < minTeamComplexity:
		return nil
	case complexity <= 7:
		return []member{{role: roleImplementer}, {role: roleTester}}
	case complexity <= 9:
		after := []aiv1.SubAgentRole{rolePlanner}
		return []member{{role: rolePlanner},
			{roleImplementer, after}, {roleTester, after}, {roleReviewer, after}}
	}
	after := []aiv1.SubAgentRole{roleResearcher, rolePlanner}
	return []member{{role: roleResearcher}, {role: rolePlanner},
		{roleImplementer, after}, {roleTester, after}, {roleReviewer, after}, {roleDocumenter, after}}
}

// roleTier is the registry tier a role runs on in a budget mode (UNSPECIFIED is BALANCED):
// the roles whose output shapes the work (planner, implementer, reviewer) a tier above the
// supporting ones (tester, documenter, researcher) — 3 and 2 balanced, 5 and 4 quality
// first — and every role on tier 1 to save. The registry picks the nearest tier that has
// a model.
func roleTier(role aiv1.SubAgentRole, mode aiv1.BudgetMode) int32 {
	leading := role == rolePlanner || role == roleImplementer || role == roleReviewer
	switch mode {
	case aiv1.BudgetMode_BUDGET_MODE_AGGRESSIVE_SAVE:
		return 1
	case aiv1.BudgetMode_BUDGET_MODE_QUALITY_FIRST:
		if leading {
			return 5
		}
		return 4
	}
	if leading {
		return 3
	}
	return 2
}

// roleRun is how one role ended: its result, and the error that left its output out.
type roleRun struct {
	result *aiv1.SubAgentResult
	err    error
}

// runGraph runs every member of members (a team, each member after those it depends on)
// once all its dependencies have ended, however they ended: the ready members at once,
// each in a goroutine of its own. A member that fails cancels nothing; its dependents run
// without its output (run gets every dependency's roleRun and tells them apart). It returns
// the runs in the members' order.
func runGraph(ctx context.Context, members []member, run func(ctx context.Context, m member, deps []roleRun) roleRun) []roleRun {
	out := make([]roleRun, len(members))
	done := make(map[aiv1.SubAgentRole]chan struct{}, len(members))
	index := make(map[aiv1.SubAgentRole]int, len(members))
	for i, m := range members {
		done[m.role] = make(chan struct{})
		index[m.role] = i
	}
	var wg sync.WaitGroup
	for i, m := range members {
		wg.Go(func() {
			defer close(done[m.role])
			deps := make([]roleRun, 0, len(m.deps))
			for _, d := range m.deps {
				<-done[d] // a dependency always ends: its run returns
				deps = append(deps, out[index[d]])
			}
			out[i] = run(ctx, m, deps)
		})
	}
	wg.Wait()
	return out
}
