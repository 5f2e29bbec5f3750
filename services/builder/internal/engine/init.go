package engine

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/status"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/builder/internal/analysis"
	"github.com/thefold/thefold/services/builder/internal/store"
)

// init is the init phase: the sandbox checked, the dependency graph of the planned files,
// the strategy, and the build's steps in the order they will run.
func (r *run) init(ctx context.Context) error {
	prev := r.b.Phase
	r.b.Phase = phaseInit
	if err := r.apply(ctx, nil, store.PhaseEvent(prev, r.b)); err != nil {
		return err
	}
	sb, err := r.e.sb.GetSandbox(ctx, &sandboxv1.GetSandboxRequest{Id: r.b.SandboxId})
	if err != nil {
		return fmt.Errorf("sandbox %s: %w", r.b.SandboxId, err)
	}
	if st := sb.GetSandbox().GetStatus(); st != sandboxv1.SandboxStatus_SANDBOX_STATUS_READY {
		return fmt.Errorf("sandbox %s is %s, not ready", r.b.SandboxId, strings.ToLower(strings.TrimPrefix(st.String(), "SANDBOX_STATUS_")))
	}
	plan := r.b.Plan.GetSteps()
	byID := map[string]*typev1.PlanStep{}
	for _, s := range plan {
		byID[s.Id] = s
	}
	var planned []*builderv1.PlannedFile
	for _, s := range plan {
		if s.Path == "" {
			continue
		}
		pf := &builderv1.PlannedFile{Path: s.Path, Action: s.Action}
		for _, d := range s.DependsOn {
			if dep := byID[d]; dep != nil && dep.Path != "" && dep.Path != s.Path && !slices.Contains(pf.DependsOn, dep.Path) {
				pf.DependsOn = append(pf.DependsOn, dep.Path)
			}
		}
		planned = append(planned, pf)
	}
	res, err := analysis.Analyze(ctx, analysis.SandboxSource(r.e.sb, r.b.SandboxId), planned, false)
	if err != nil {
		return fmt.Errorf("dependency graph: %w", err)
	}
	strategy, reason := res.Strategy, res.Reason
	if r.b.RequestedStrategy != builderv1.BuildStrategy_BUILD_STRATEGY_UNSPECIFIED {
		strategy, reason = r.b.RequestedStrategy, "asked for by the request"
	}
	r.b.Graph, r.b.Strategy, r.b.NewProject = res.Graph, strategy, res.NewProject
	r.b.GraphChanged = true
	r.structure = append(append([]string{}, res.Existing...), func() []string {
		var ps []string
		for _, p := range planned {
			if !slices.Contains(res.Existing, p.Path) {
				ps = append(ps, p.Path)
			}
		}
		return ps
	}()...)
	slices.Sort(r.structure)

	// Scaffold: in a new project, the plan's commands that need no file, and the project
	// files the planned languages need. Dependencies: the manifests the plan writes
	// (unless they wait on other files), what they declare installed, then the plan's
	// packages.
	var scaffold, manifests, rest []*typev1.PlanStep
	for _, s := range plan {
		switch {
		case res.NewProject && len(s.Command) > 0 && !dependsOnFile(s, byID):
			scaffold = append(scaffold, s)
		case s.Path != "" && ecosystem(s.Path) != "" && s.Action != typev1.FileAction_FILE_ACTION_DELETE && !dependsOnSource(s, byID):
			manifests = append(manifests, s)
		default:
			rest = append(rest, s)
		}
	}
	var steps []*store.Step
	add := func(phase builderv1.BuildPhase, kind builderv1.StepKind, ps *typev1.PlanStep) *store.Step {
		st := r.newStep(phase, kind)
		st.StepNumber = int32(len(r.steps) + len(steps) + 1)
		if ps != nil {
			st.PlanStepId, st.Action, st.Path, st.Command, st.Workdir, st.Description = ps.Id, ps.Action, ps.Path, ps.Command, ps.Workdir, ps.Description
		}
		steps = append(steps, st)
		return st
	}
	addPrepared := func(phase builderv1.BuildPhase, kind builderv1.StepKind, p prepared) {
		st := add(phase, kind, nil)
		st.Command, st.Workdir, st.Description = p.command, p.workdir, p.description
		if p.path != "" {
			// The builder writes the content itself: the step starts generated.
			st.Kind, st.Action, st.Path, st.Content, st.Generated = builderv1.StepKind_STEP_KIND_FILE, typev1.FileAction_FILE_ACTION_CREATE, p.path, p.content, true
		}
	}
	for _, s := range scaffold {
		add(phaseScaffold, builderv1.StepKind_STEP_KIND_COMMAND, s)
	}
	if res.NewProject {
		for _, p := range skeleton(r.b.Repo, plan, res.Existing) {
			addPrepared(phaseScaffold, builderv1.StepKind_STEP_KIND_COMMAND, p)
		}
	}
	var changed []string
	for _, s := range manifests {
		add(phaseDeps, builderv1.StepKind_STEP_KIND_FILE, s)
		changed = append(changed, s.Path)
	}
	for _, p := range syncCommands(changed, res.Existing) {
		addPrepared(phaseDeps, builderv1.StepKind_STEP_KIND_INSTALL_PACKAGES, p)
	}
	if pk := r.b.Plan.GetPackages(); len(pk) > 0 {
		st := add(phaseDeps, builderv1.StepKind_STEP_KIND_INSTALL_PACKAGES, nil)
		st.Command, st.Description = installCommand(sb.GetSandbox().GetLanguage(), planned, pk), "install the plan's packages"
	}
	for _, s := range orderSteps(rest, res.Graph, strategy) {
		kind := builderv1.StepKind_STEP_KIND_FILE
		if s.Path == "" {
			kind = builderv1.StepKind_STEP_KIND_COMMAND
		}
		add(phaseImplement, kind, s)
	}
	for _, st := range steps {
		if st.Kind == builderv1.StepKind_STEP_KIND_FILE {
			r.b.Files = append(r.b.Files, &builderv1.BuildFile{Path: st.Path, Action: st.Action, Status: builderv1.BuildFileStatus_BUILD_FILE_STATUS_PENDING})
		}
	}
	r.steps = append(r.steps, steps...)
	r.b.TotalSteps = int32(len(r.steps))
	evs := r.resolveSkills(ctx, planned)
	msg := fmt.Sprintf("strategy %s: %s; %d steps, %d files", strings.ToLower(strings.TrimPrefix(strategy.String(), "BUILD_STRATEGY_")),
		reason, len(steps), len(r.b.Files))
	if n := len(res.Graph.GetCycles()); n > 0 {
		msg += fmt.Sprintf("; %d dependency cycles, their files built together", n)
	}
	return r.apply(ctx, steps, append(evs, store.LogEvent(0, phaseInit, msg))...)
}

// resolveSkills asks the skills service for the fragments to inject into this build's
// generations. A build works without them: a failure is reported as a log event.
func (r *run) resolveSkills(ctx context.Context, planned []*builderv1.PlannedFile) []*builderv1.WatchBuildResponse {
	if r.e.skills == nil {
		return nil
	}
	desc := r.b.Plan.GetSummary()
	if desc == "" {
		desc = "build " + strconv.Itoa(len(planned)) + " planned files"
	}
	tc := &skillsv1.TaskContext{Description: desc, Repo: r.b.Repo}
	for _, p := range planned {
		tc.FilePaths = append(tc.FilePaths, p.Path)
	}
	done := r.e.timed("skills")
	resp, err := r.e.skills.ResolveSkills(ctx, &skillsv1.ResolveSkillsRequest{Context: tc, Phase: skillsv1.SkillPhase_SKILL_PHASE_INJECT})
	done()
	if err != nil {
		r.e.log.WarnContext(ctx, "build: skills not resolved", "build", r.b.Id, "error", err)
		return []*builderv1.WatchBuildResponse{store.LogEvent(0, phaseInit, "skills not resolved, building without them: "+status.Convert(err).Message())}
	}
	var names []string
	r.b.Skills = nil
	for _, s := range resp.GetSelected() {
		r.b.Skills = append(r.b.Skills, &aiv1.SkillFragment{Id: s.SkillId, Name: s.Name, Content: s.PromptFragment, Priority: s.Priority})
		names = append(names, s.Name)
	}
	if len(names) == 0 {
		return []*builderv1.WatchBuildResponse{store.LogEvent(0, phaseInit, "no skills apply")}
	}
	return []*builderv1.WatchBuildResponse{store.LogEvent(0, phaseInit, "skills injected: "+strings.Join(names, ", "))}
}

func dependsOnFile(s *typev1.PlanStep, byID map[string]*typev1.PlanStep) bool {
	for _, d := range s.DependsOn {
		if dep := byID[d]; dep != nil && dep.Path != "" {
			return true
		}
	}
	return false
}

// dependsOnSource reports whether s declares a dependency on a step that is not a manifest
// (such a manifest waits for it in the implement phase).
func dependsOnSource(s *typev1.PlanStep, byID map[string]*typev1.PlanStep) bool {
	for _, d := range s.DependsOn {
		if dep := byID[d]; dep != nil && (dep.Path == "" || ecosystem(dep.Path) == "") {
			return true
		}
	}
	return false
}

// orderSteps orders plan steps for the strategy: each after the steps it declares and, but
// for SEQUENTIAL, after the steps of the files it depends on in the graph. Ties go to the
// graph's order (SEQUENTIAL: the plan's); commands that are ready go first. A cycle is
// broken at its first step by that key, so its files come together.
func orderSteps(steps []*typev1.PlanStep, g *builderv1.DependencyGraph, strategy builderv1.BuildStrategy) []*typev1.PlanStep {
	n := len(steps)
	idx := map[string]int{}
	byPath := map[string]int{}
	for i, s := range steps {
		idx[s.Id] = i
		if s.Path != "" {
			byPath[s.Path] = i
		}
	}
	pos := map[string]int{}
	for i, p := range g.GetOrder() {
		pos[p] = i
	}
	key := make([]int, n)
	for i, s := range steps {
		switch {
		case strategy == builderv1.BuildStrategy_BUILD_STRATEGY_SEQUENTIAL:
			key[i] = i
		case s.Path == "":
			key[i] = -n + i
		default:
			key[i] = pos[s.Path]
		}
	}
	deps := make([]map[int]bool, n)
	for i := range deps {
		deps[i] = map[int]bool{}
	}
	for i, s := range steps {
		for _, d := range s.DependsOn {
			if j, ok := idx[d]; ok && j != i {
				deps[i][j] = true
			}
		}
	}
	if strategy != builderv1.BuildStrategy_BUILD_STRATEGY_SEQUENTIAL {
		for _, node := range g.GetNodes() {
			i, ok := byPath[node.Path]
			if !ok {
				continue
			}
			for _, d := range node.DependsOn {
				if j, ok := byPath[d]; ok && j != i {
					deps[i][j] = true
				}
			}
		}
	}
	done := make([]bool, n)
	out := make([]*typev1.PlanStep, 0, n)
	for len(out) < n {
		best := -1
		for i := range steps {
			if done[i] {
				continue
			}
			ready := true
			for j := range deps[i] {
				if !done[j] {
					ready = false
					break
				}
			}
			if ready && (best < 0 || key[i] < key[best]) {
				best = i
			}
		}
		if best < 0 {
			// Every step left waits on another: break the cycle that waits on nothing
			// outside itself at its first step by key.
			best = firstOfSourceCycle(deps, done, key)
		}
		done[best] = true
		out = append(out, steps[best])
	}
	return out
}

// firstOfSourceCycle returns, among the steps not done, the first by key of those whose
// unfinished dependencies all lead back to them (the members of a cycle that depends on no
// other unfinished step). Some cycle always qualifies when no step is ready.
func firstOfSourceCycle(deps []map[int]bool, done []bool, key []int) int {
	reach := func(v int) map[int]bool {
		seen := map[int]bool{}
		stack := []int{v}
		for len(stack) > 0 {
			u := stack[len(stack)-1]
			stack = stack[:len(stack)-1]
			for w := range deps[u] {
				if !done[w] && !seen[w] {
					seen[w] = true
					stack = append(stack, w)
				}
			}
		}
		return seen
	}
	reaches := make([]map[int]bool, len(deps))
	best := -1
	for v := range deps {
		if done[v] {
			continue
		}
		if reaches[v] == nil {
			reaches[v] = reach(v)
		}
		source := true
		for u := range reaches[v] {
			if reaches[u] == nil {
				reaches[u] = reach(u)
			}
			if !reaches[u][v] {
				source = false
				break
			}
		}
		if source && (best < 0 || key[v] < key[best]) {
			best = v
		}
	}
	return best
}
