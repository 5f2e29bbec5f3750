package prompts

import (
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
)

// DecomposeProject builds the prompt that breaks a project request into phases of tasks.
func DecomposeProject(req *aiv1.DecomposeProjectRequest) (*Prompt, error) {
	v := struct {
		Request  string
		Tree     []string
		Files    []*aiv1.ContextFile
		Memories []*aiv1.MemoryFragment
	}{req.GetRequest(), req.GetProjectTree(), req.GetContextFiles(), req.GetMemories()}
	return build("DecomposeProject", "decompose_project", v, "", schemaFor("decompose_project"), 16000)
}

// ParseDecomposeProject converts DecomposeProject's answer: task keys unique across the
// plan, depends_on naming a task of the same or an earlier phase, no cycles.
func ParseDecomposeProject(raw string) (*aiv1.DecomposeProjectResponse, error) {
	const rpc = "DecomposeProject"
	var a projectPlanJSON
	if err := decode(rpc, schemaFor("decompose_project"), raw, &a); err != nil {
		return nil, err
	}
	plan := &aiv1.ProjectPlan{Summary: a.Summary, Conventions: a.Conventions}
	earlier := map[string]bool{}
	for i, ph := range a.Phases {
		at := fmt.Sprintf("/phases/%d/tasks", i)
		if err := checkProposals(rpc, at, ph.Tasks, earlier, earlier); err != nil {
			return nil, err
		}
		for _, t := range ph.Tasks {
			earlier[t.Key] = true
		}
		plan.Phases = append(plan.Phases, &aiv1.ProjectPhase{Name: ph.Name, Description: ph.Description, Tasks: tasksFromJSON(ph.Tasks)})
	}
	return &aiv1.DecomposeProjectResponse{Plan: plan}, nil
}

// ReviseProjectPhase builds the prompt that revises plan.phases[phase_index] in the light
// of the completed tasks.
func ReviseProjectPhase(req *aiv1.ReviseProjectPhaseRequest) (*Prompt, error) {
	phase, err := revisedPhase(req)
	if err != nil {
		return nil, err
	}
	v := struct {
		Request    string
		Plan       *aiv1.ProjectPlan
		Completed  []*aiv1.TaskOutcome
		PhaseIndex int32
		Phase      *aiv1.ProjectPhase
	}{req.GetRequest(), req.GetPlan(), req.GetCompleted(), req.GetPhaseIndex(), phase}
	return build("ReviseProjectPhase", "revise_project_phase", v, "", schemaFor("revise_project_phase"), 12000)
}

func revisedPhase(req *aiv1.ReviseProjectPhaseRequest) (*aiv1.ProjectPhase, error) {
	phases := req.GetPlan().GetPhases()
	i := req.GetPhaseIndex()
	if i < 0 || int(i) >= len(phases) {
		return nil, errs.Invalid("phase_index", "want 0 to %d (the plan has %d phases), got %d", len(phases)-1, len(phases), i)
	}
	return phases[i], nil
}

// ParseReviseProjectPhase converts ReviseProjectPhase's answer. Unchanged, the response is
// the request's phase as it was. Changed: keys unique in the phase and not taken by another
// phase's task (new tasks need new keys), depends_on naming a task of this or an earlier
// phase, no cycles.
func ParseReviseProjectPhase(raw string, req *aiv1.ReviseProjectPhaseRequest) (*aiv1.ReviseProjectPhaseResponse, error) {
	const rpc = "ReviseProjectPhase"
	current, err := revisedPhase(req)
	if err != nil {
		return nil, err
	}
	var a struct {
		Reasoning string     `json:"reasoning"`
		Changed   bool       `json:"changed"`
		Phase     *phaseJSON `json:"phase"`
	}
	if err := decode(rpc, schemaFor("revise_project_phase"), raw, &a); err != nil {
		return nil, err
	}
	out := &aiv1.ReviseProjectPhaseResponse{Changed: a.Changed, Reasoning: a.Reasoning}
	if !a.Changed {
		out.Phase = proto.Clone(current).(*aiv1.ProjectPhase)
		return out, nil
	}
	if a.Phase == nil {
		return nil, parseErr(rpc, "at /phase: \"changed\" is true, so the whole revised phase is required")
	}
	earlier, later := map[string]bool{}, map[string]bool{}
	for j, ph := range req.GetPlan().GetPhases() {
		for _, t := range ph.GetTasks() {
			switch {
			case j < int(req.GetPhaseIndex()):
				earlier[t.GetKey()] = true
			case j > int(req.GetPhaseIndex()):
				later[t.GetKey()] = true
			}
		}
	}
	taken := map[string]bool{}
	for k := range earlier {
		taken[k] = true
	}
	for k := range later {
		taken[k] = true
	}
	if err := checkProposals(rpc, "/phase/tasks", a.Phase.Tasks, taken, earlier); err != nil {
		return nil, err
	}
	out.Phase = &aiv1.ProjectPhase{Name: a.Phase.Name, Description: a.Phase.Description, Tasks: tasksFromJSON(a.Phase.Tasks)}
	return out, nil
}
