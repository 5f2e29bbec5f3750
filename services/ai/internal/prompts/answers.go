package prompts

import (
	"fmt"
	"path"
	"strings"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// The JSON shapes of the answers (and of plans shown back to the model), as the schemas in
// schemas/ describe them. Enums are lowercase words; the maps below turn them into proto
// enums.

type taskJSON struct {
	Key          string   `json:"key"`
	Title        string   `json:"title"`
	Description  string   `json:"description"`
	DependsOn    []string `json:"depends_on"`
	Complexity   int32    `json:"complexity"`
	ContextHints []string `json:"context_hints,omitempty"`
}

type phaseJSON struct {
	Name        string     `json:"name"`
	Description string     `json:"description"`
	Tasks       []taskJSON `json:"tasks"`
}

type projectPlanJSON struct {
	Summary     string      `json:"summary"`
	Conventions string      `json:"conventions"`
	Phases      []phaseJSON `json:"phases"`
}

type stepJSON struct {
	ID          string   `json:"id"`
	Action      string   `json:"action"`
	Path        string   `json:"path,omitempty"`
	Command     []string `json:"command,omitempty"`
	Workdir     string   `json:"workdir,omitempty"`
	Description string   `json:"description"`
	DependsOn   []string `json:"depends_on,omitempty"`
}

type planJSON struct {
	Summary  string     `json:"summary"`
	Steps    []stepJSON `json:"steps"`
	Packages []string   `json:"packages,omitempty"`
}

type concernJSON struct {
	Severity string `json:"severity"`
	Path     string `json:"path"`
	Line     int32  `json:"line"`
	Message  string `json:"message"`
}

const actionCommand = "command"

var fileActions = map[string]typev1.FileAction{
	"create": typev1.FileAction_FILE_ACTION_CREATE,
	"modify": typev1.FileAction_FILE_ACTION_MODIFY,
	"delete": typev1.FileAction_FILE_ACTION_DELETE,
}

func actionName(a typev1.FileAction) string {
	for name, v := range fileActions {
		if v == a {
			return name
		}
	}
	return "unspecified"
}

var severities = map[string]typev1.Severity{
	"info":     typev1.Severity_SEVERITY_INFO,
	"warning":  typev1.Severity_SEVERITY_WARNING,
	"error":    typev1.Severity_SEVERITY_ERROR,
	"critical": typev1.Severity_SEVERITY_CRITICAL,
}

var categories = map[string]aiv1.FailureCategory{
	"bad_plan":             aiv1.FailureCategory_FAILURE_CATEGORY_BAD_PLAN,
	"implementation_error": aiv1.FailureCategory_FAILURE_CATEGORY_IMPLEMENTATION_ERROR,
	"missing_context":      aiv1.FailureCategory_FAILURE_CATEGORY_MISSING_CONTEXT,
	"impossible_task":      aiv1.FailureCategory_FAILURE_CATEGORY_IMPOSSIBLE_TASK,
	"environment_error":    aiv1.FailureCategory_FAILURE_CATEGORY_ENVIRONMENT_ERROR,
}

func categoryName(c aiv1.FailureCategory) string {
	for name, v := range categories {
		if v == c {
			return name
		}
	}
	return "unspecified"
}

var decisions = map[string]aiv1.ConfidenceDecision{
	"proceed":    aiv1.ConfidenceDecision_CONFIDENCE_DECISION_PROCEED,
	"clarify":    aiv1.ConfidenceDecision_CONFIDENCE_DECISION_CLARIFY,
	"break_down": aiv1.ConfidenceDecision_CONFIDENCE_DECISION_BREAK_DOWN,
}

var budgetModes = map[string]aiv1.BudgetMode{
	"balanced":        aiv1.BudgetMode_BUDGET_MODE_BALANCED,
	"quality_first":   aiv1.BudgetMode_BUDGET_MODE_QUALITY_FIRST,
	"aggressive_save": aiv1.BudgetMode_BUDGET_MODE_AGGRESSIVE_SAVE,
}

var interventions = map[string]aiv1.InterventionAction{
	"rewrite_task": aiv1.InterventionAction_INTERVENTION_ACTION_REWRITE_TASK,
	"split_task":   aiv1.InterventionAction_INTERVENTION_ACTION_SPLIT_TASK,
	"escalate":     aiv1.InterventionAction_INTERVENTION_ACTION_ESCALATE,
}

// enum maps a schema-checked enum word to its proto value; an unknown word (possible only
// if a schema and a map disagree) is a ParseError.
func enum[T any](rpc, at, word string, m map[string]T) (T, error) {
	v, ok := m[word]
	if !ok {
		var zero T
		return zero, parseErr(rpc, "at %s: unknown value %q", at, word)
	}
	return v, nil
}

func planToJSON(p *typev1.Plan) planJSON {
	out := planJSON{Summary: p.GetSummary(), Packages: p.GetPackages(), Steps: []stepJSON{}}
	for _, s := range p.GetSteps() {
		action := actionCommand
		if s.GetAction() != typev1.FileAction_FILE_ACTION_UNSPECIFIED {
			action = actionName(s.GetAction())
		}
		out.Steps = append(out.Steps, stepJSON{ID: s.GetId(), Action: action, Path: s.GetPath(), Command: s.GetCommand(),
			Workdir: s.GetWorkdir(), Description: s.GetDescription(), DependsOn: s.GetDependsOn()})
	}
	return out
}

func projectPlanToJSON(p *aiv1.ProjectPlan) projectPlanJSON {
	out := projectPlanJSON{Summary: p.GetSummary(), Conventions: p.GetConventions(), Phases: []phaseJSON{}}
	for _, ph := range p.GetPhases() {
		out.Phases = append(out.Phases, phaseToJSON(ph))
	}
	return out
}

func phaseToJSON(ph *aiv1.ProjectPhase) phaseJSON {
	out := phaseJSON{Name: ph.GetName(), Description: ph.GetDescription(), Tasks: []taskJSON{}}
	for _, t := range ph.GetTasks() {
		deps := t.GetDependsOn()
		if deps == nil {
			deps = []string{}
		}
		out.Tasks = append(out.Tasks, taskJSON{Key: t.GetKey(), Title: t.GetTitle(), Description: t.GetDescription(),
			DependsOn: deps, Complexity: t.GetComplexity(), ContextHints: t.GetContextHints()})
	}
	return out
}

func taskFromJSON(t taskJSON) *aiv1.TaskProposal {
	return &aiv1.TaskProposal{Key: t.Key, Title: t.Title, Description: t.Description, DependsOn: t.DependsOn,
		Complexity: t.Complexity, ContextHints: t.ContextHints}
}

func tasksFromJSON(ts []taskJSON) []*aiv1.TaskProposal {
	out := make([]*aiv1.TaskProposal, 0, len(ts))
	for _, t := range ts {
		out = append(out, taskFromJSON(t))
	}
	return out
}

// checkProposals checks a list of proposed tasks at JSON pointer at: unique keys (not in
// taken either), depends_on naming a task of the list or a key of outside, no cycles.
func checkProposals(rpc, at string, ts []taskJSON, taken, outside map[string]bool) error {
	index := map[string]int{}
	for i, t := range ts {
		if _, dup := index[t.Key]; dup || taken[t.Key] {
			return parseErr(rpc, "at %s/%d/key: key %q is used twice; keys must be unique", at, i, t.Key)
		}
		index[t.Key] = i
	}
	deps := make([][]string, len(ts))
	for i, t := range ts {
		for j, d := range t.DependsOn {
			if d == t.Key {
				return parseErr(rpc, "at %s/%d/depends_on/%d: task %q depends on itself", at, i, j, d)
			}
			if _, ok := index[d]; !ok && !outside[d] {
				return parseErr(rpc, "at %s/%d/depends_on/%d: %q is not the key of a task it may depend on", at, i, j, d)
			}
		}
		deps[i] = t.DependsOn
	}
	keys := make([]string, len(ts))
	for i, t := range ts {
		keys[i] = t.Key
	}
	if cycle := findCycle(keys, deps); cycle != nil {
		return parseErr(rpc, "at %s: depends_on forms a cycle: %s", at, strings.Join(cycle, " → "))
	}
	return nil
}

// findCycle returns one dependency cycle among nodes (deps[i] are node i's dependencies by
// id; ids not among nodes are ignored) as the ids along it, first repeated at the end, or
// nil. Nodes are visited in order, so the answer is deterministic.
func findCycle(ids []string, deps [][]string) []string {
	index := make(map[string]int, len(ids))
	for i, id := range ids {
		index[id] = i
	}
	const (
		unvisited = iota
		onPath
		done
	)
	state := make([]int, len(ids))
	var stack []int
	var cycle []string
	var visit func(i int) bool
	visit = func(i int) bool {
		state[i] = onPath
		stack = append(stack, i)
		for _, d := range deps[i] {
			j, ok := index[d]
			if !ok {
				continue
			}
			switch state[j] {
			case onPath:
				for k := len(stack) - 1; k >= 0; k-- {
					if stack[k] == j {
						for _, n := range stack[k:] {
							cycle = append(cycle, ids[n])
						}
						cycle = append(cycle, ids[j])
						return true
					}
				}
			case unvisited:
				if visit(j) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[i] = done
		return false
	}
	for i := range ids {
		if state[i] == unvisited && visit(i) {
			return cycle
		}
	}
	return nil
}

// checkRelPath checks a repository path: relative, '/'-separated, clean, no "..".
func checkRelPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("the path is empty")
	case strings.ContainsAny(p, "\x00\n\r"):
		return fmt.Errorf("the path %q has control characters", p)
	case strings.HasPrefix(p, "/") || (len(p) > 1 && p[1] == ':'):
		return fmt.Errorf("the path %q is absolute; give it relative to the repository root", p)
	case strings.Contains(p, `\`):
		return fmt.Errorf("the path %q uses '\\'; separate with '/'", p)
	}
	for _, el := range strings.Split(p, "/") {
		if el == ".." {
			return fmt.Errorf("the path %q leaves the repository (\"..\")", p)
		}
	}
	if c := path.Clean(p); c != p || c == "." {
		return fmt.Errorf("the path %q is not clean; write it as %q", p, c)
	}
	return nil
}
