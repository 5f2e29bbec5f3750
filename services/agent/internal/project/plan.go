// Package project is the agent's project orchestrator: a plan of phases of tasks made from a
// request (ai.DecomposeProject) or from a repository's task graph, checked and edited
// before it runs, and the runner that works through it (see run.go).
package project

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

// Limits of a plan.
const (
	MaxTasks  = 100
	MaxPhases = 20
	// In characters: the tasks service's limits (with room for the "…" an import adds).
	MaxTitle       = 512
	MaxDescription = 65536
	MaxIDLen       = 64
)

const (
	pending = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_PENDING
)

// FromAI makes the phases of a planner's plan: every task gets a UUID (its key maps to it),
// dependencies on unknown keys are dropped, and the result is checked as an edit would be
// (the planner's mistakes are errors, not plans).
func FromAI(plan *aiv1.ProjectPlan) ([]*agentv1.ProjectPhase, error) {
	ids := map[string]string{}
	for _, ph := range plan.GetPhases() {
		for _, t := range ph.Tasks {
			if t.Key == "" {
				t.Key = uuid.NewString()
			}
			if _, dup := ids[t.Key]; !dup {
				ids[t.Key] = uuid.NewString()
			}
		}
	}
	var out []*agentv1.ProjectPhase
	for i, ph := range plan.GetPhases() {
		p := &agentv1.ProjectPhase{Number: int32(i + 1), Name: ph.Name, Description: ph.Description}
		for _, t := range ph.Tasks {
			pt := &agentv1.ProjectTask{Id: ids[t.Key], Title: t.Title, Description: t.Description,
				Complexity: min(max(t.Complexity, 0), 10), Status: pending}
			for _, d := range t.DependsOn {
				if id, ok := ids[d]; ok && id != pt.Id && !slices.Contains(pt.DependsOn, id) {
					pt.DependsOn = append(pt.DependsOn, id)
				}
			}
			p.Tasks = append(p.Tasks, pt)
		}
		if len(p.Tasks) > 0 {
			p.Number = int32(len(out) + 1)
			out = append(out, p)
		}
	}
	if err := Check(out); err != nil {
		return nil, fmt.Errorf("the planner's plan: %w", err)
	}
	return out, nil
}

// FromTasks makes the phases of a plan from existing tasks: their blocked-by links among
// them are the dependencies (a blocker outside the list is ignored), and each phase is one
// layer of that graph (a task's phase is one more than its latest blocker's). The tasks
// keep their ids as task_id.
func FromTasks(tasks []*tasksv1.Task) ([]*agentv1.ProjectPhase, error) {
	byTask := map[string]*agentv1.ProjectTask{}
	var order []*agentv1.ProjectTask
	for _, t := range tasks {
		if _, dup := byTask[t.Id]; dup {
			continue
		}
		pt := &agentv1.ProjectTask{Id: uuid.NewString(), TaskId: t.Id, Title: t.Title, Description: t.Description,
			Complexity: t.Complexity, Status: pending, IssueNumber: IssueNumber(t)}
		byTask[t.Id] = pt
		order = append(order, pt)
	}
	for _, t := range tasks {
		pt := byTask[t.Id]
		for _, b := range t.BlockedBy {
			if d, ok := byTask[b]; ok && d != pt && !slices.Contains(pt.DependsOn, d.Id) {
				pt.DependsOn = append(pt.DependsOn, d.Id)
			}
		}
	}
	if c := cycle(order); c != nil {
		byID := index(order)
		for i, id := range c {
			c[i] = byID[id].TaskId
		}
		return nil, errs.Invalid("task_ids", "the tasks' blocked-by links form a cycle: %s", strings.Join(c, " → "))
	}
	layer := map[string]int{}
	var depth func(pt *agentv1.ProjectTask) int
	byID := index(order)
	depth = func(pt *agentv1.ProjectTask) int {
		if l, ok := layer[pt.Id]; ok {
			return l
		}
		l := 0
		for _, d := range pt.DependsOn {
			l = max(l, depth(byID[d])+1)
		}
		layer[pt.Id] = l
		return l
	}
	var phases []*agentv1.ProjectPhase
	for _, pt := range order {
		l := depth(pt)
		for len(phases) <= l {
			n := len(phases) + 1
			phases = append(phases, &agentv1.ProjectPhase{Number: int32(n), Name: fmt.Sprintf("Layer %d", n),
				Description: fmt.Sprintf("Tasks whose blockers are done by layer %d", n-1)})
		}
		phases[l].Tasks = append(phases[l].Tasks, pt)
	}
	if len(phases) > MaxPhases {
		return nil, errs.Invalid("task_ids", "the tasks' blocked-by links are %d layers deep; a project runs at most %d phases", len(phases), MaxPhases)
	}
	if len(phases) > 0 {
		phases[0].Description = "Tasks blocked by none of the project's tasks"
	}
	return phases, Check(phases)
}

func index(tasks []*agentv1.ProjectTask) map[string]*agentv1.ProjectTask {
	m := make(map[string]*agentv1.ProjectTask, len(tasks))
	for _, t := range tasks {
		m[t.Id] = t
	}
	return m
}

// Tasks are the tasks of phases in plan order.
func Tasks(phases []*agentv1.ProjectPhase) []*agentv1.ProjectTask {
	var out []*agentv1.ProjectTask
	for _, ph := range phases {
		out = append(out, ph.Tasks...)
	}
	return out
}

// Find returns the project task id of p and its phase, or nil.
func Find(p *agentv1.Project, id string) (*agentv1.ProjectTask, *agentv1.ProjectPhase) {
	for _, ph := range p.Phases {
		for _, t := range ph.Tasks {
			if t.Id == id {
				return t, ph
			}
		}
	}
	return nil, nil
}

// Check reports what makes phases no plan, as INVALID_ARGUMENT naming the field: no task,
// too many, a task without a title, an id used twice, a dependency on a task not in the
// plan or in a later phase, a cycle (named).
func Check(phases []*agentv1.ProjectPhase) error {
	if len(phases) == 0 {
		return errs.Invalid("phases", "a plan needs at least one phase with a task")
	}
	if len(phases) > MaxPhases {
		return errs.Invalid("phases", "at most %d phases, not %d", MaxPhases, len(phases))
	}
	phaseOf := map[string]int{}
	n := 0
	for i, ph := range phases {
		if len(ph.Tasks) == 0 {
			return errs.Invalid(fmt.Sprintf("phases[%d].tasks", i), "a phase needs at least one task")
		}
		for j, t := range ph.Tasks {
			f := fmt.Sprintf("phases[%d].tasks[%d]", i, j)
			switch {
			case t.Id == "":
				return errs.Invalid(f+".id", "required")
			case len(t.Id) > MaxIDLen:
				return errs.Invalid(f+".id", "at most %d characters", MaxIDLen)
			case strings.TrimSpace(t.Title) == "":
				return errs.Invalid(f+".title", "required")
			case utf8.RuneCountInString(t.Title) > MaxTitle:
				return errs.Invalid(f+".title", "at most %d characters", MaxTitle)
			case utf8.RuneCountInString(t.Description) > MaxDescription:
				return errs.Invalid(f+".description", "at most %d characters", MaxDescription)
			case t.Complexity < 0 || t.Complexity > 10:
				return errs.Invalid(f+".complexity", "must be 0–10")
			}
			if _, dup := phaseOf[t.Id]; dup {
				return errs.Invalid(f+".id", "%q names two tasks of the plan", t.Id)
			}
			phaseOf[t.Id] = i
			n++
		}
	}
	if n > MaxTasks {
		return errs.Invalid("phases", "at most %d tasks, not %d", MaxTasks, n)
	}
	for i, ph := range phases {
		for j, t := range ph.Tasks {
			for k, d := range t.DependsOn {
				f := fmt.Sprintf("phases[%d].tasks[%d].depends_on[%d]", i, j, k)
				p, ok := phaseOf[d]
				switch {
				case !ok:
					return errs.Invalid(f, "%q is not a task of the plan", d)
				case d == t.Id:
					return errs.Invalid(f, "task %q depends on itself", t.Id)
				case p > i:
					return errs.Invalid(f, "task %q (phase %d) depends on %q of a later phase (%d); phases run in order", t.Id, i+1, d, p+1)
				}
			}
		}
	}
	if c := cycle(Tasks(phases)); c != nil {
		return errs.Invalid("phases", "the dependencies form a cycle: %s", strings.Join(c, " → "))
	}
	return nil
}

// cycle returns a dependency cycle among tasks as the ids along it (the first repeated at
// the end), or nil.
func cycle(tasks []*agentv1.ProjectTask) []string {
	byID := index(tasks)
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var path []string
	var visit func(id string) []string
	visit = func(id string) []string {
		color[id] = grey
		path = append(path, id)
		for _, d := range byID[id].GetDependsOn() {
			if _, ok := byID[d]; !ok {
				continue
			}
			switch color[d] {
			case grey:
				at := slices.Index(path, d)
				return append(slices.Clone(path[at:]), d)
			case white:
				if c := visit(d); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		color[id] = black
		return nil
	}
	for _, t := range tasks {
		if color[t.Id] == white {
			if c := visit(t.Id); c != nil {
				slices.Reverse(c) // dependency order: the first must be done before the next
				return c
			}
		}
	}
	return nil
}

// Edit makes the plan of an UpdateProject from the caller's phases and the project's
// current ones: phases renumbered in the order given; a task keeps its id, task id and
// state when its id names a current task, a task without an id gets a UUID; only title,
// description, depends_on and complexity are taken from the caller. The result is checked.
func Edit(current, given []*agentv1.ProjectPhase) ([]*agentv1.ProjectPhase, error) {
	old := index(Tasks(current))
	var out []*agentv1.ProjectPhase
	for i, ph := range given {
		np := &agentv1.ProjectPhase{Number: int32(i + 1), Name: ph.Name, Description: ph.Description}
		for _, t := range ph.Tasks {
			nt := &agentv1.ProjectTask{Id: t.Id, Status: pending}
			if o, ok := old[t.Id]; ok && t.Id != "" {
				nt = &agentv1.ProjectTask{Id: o.Id, TaskId: o.TaskId, Status: o.Status, JobId: o.JobId, Usage: o.Usage,
					OutputFiles: o.OutputFiles, Error: o.Error, StatusReason: o.StatusReason, Attempts: o.Attempts}
			} else if t.Id == "" {
				nt.Id = uuid.NewString()
			}
			nt.Title, nt.Description, nt.Complexity = strings.TrimSpace(t.Title), t.Description, t.Complexity
			nt.DependsOn = slices.Clone(t.DependsOn)
			np.Tasks = append(np.Tasks, nt)
		}
		out = append(out, np)
	}
	if err := Check(out); err != nil {
		return nil, err
	}
	return out, nil
}

// TaskEvent is the TASK_* event typ of task t of phase ph as it now is.
func TaskEvent(typ agentv1.ProjectEventType, t *agentv1.ProjectTask, ph *agentv1.ProjectPhase) *agentv1.WatchProjectResponse {
	reason := t.StatusReason
	if t.Status == agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_FAILED && t.Error != "" {
		reason = t.Error
	}
	return &agentv1.WatchProjectResponse{Type: typ, Worker: t.Worker, ProjectTaskId: t.Id, Payload: &agentv1.WatchProjectResponse_Task{Task: &agentv1.ProjectTaskChange{
		ProjectTaskId: t.Id, TaskId: t.TaskId, JobId: t.JobId, PhaseNumber: ph.GetNumber(), Status: t.Status, Reason: reason, Usage: t.Usage,
		Worker: t.Worker, PullRequest: t.PullRequest}}}
}

// IssueNumber is the number of the issue a task was imported from (its external id
// "github:<repo>#<n>", as tasks.ImportIssues makes it), 0 for none.
func IssueNumber(t *tasksv1.Task) int32 {
	id := t.GetExternalId()
	i := strings.LastIndexByte(id, '#')
	if !strings.HasPrefix(id, "github:") || i < 0 {
		return 0
	}
	n, err := strconv.ParseInt(id[i+1:], 10, 32)
	if err != nil || n <= 0 {
		return 0
	}
	return int32(n)
}

func newID() string { return uuid.NewString() }
