package project

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

func tk(id string, deps ...string) *agentv1.ProjectTask {
	return &agentv1.ProjectTask{Id: id, Title: "do " + id, DependsOn: deps, Status: pending}
}

func ph(tasks ...*agentv1.ProjectTask) *agentv1.ProjectPhase {
	return &agentv1.ProjectPhase{Name: "phase", Tasks: tasks}
}

// cycleIn is the cycle an INVALID_ARGUMENT names ("… cycle: a → b → a"), as its ids.
func cycleIn(t *testing.T, err error) []string {
	t.Helper()
	_, after, ok := strings.Cut(status.Convert(err).Message(), "cycle: ")
	if !ok {
		t.Fatalf("%v names no cycle", err)
	}
	return strings.Split(after, " → ")
}

// wantDependencyOrder checks that c is a closed path in which each must be done before the
// next: the next depends on it.
func wantDependencyOrder(t *testing.T, c []string, deps map[string][]string) {
	t.Helper()
	if len(c) < 3 || c[0] != c[len(c)-1] {
		t.Fatalf("cycle %v is not closed", c)
	}
	for i := 0; i+1 < len(c); i++ {
		if !slices.Contains(deps[c[i+1]], c[i]) {
			t.Errorf("cycle %v: %s comes before %s, but %s does not depend on %s", c, c[i], c[i+1], c[i+1], c[i])
		}
	}
}

func TestCheckNamesTheField(t *testing.T) {
	long := strings.Repeat("x", MaxIDLen+1)
	many := func(prefix string, n int, deps ...string) []*agentv1.ProjectTask {
		var out []*agentv1.ProjectTask
		for i := range n {
			out = append(out, tk(fmt.Sprintf("%s%d", prefix, i), deps...))
		}
		return out
	}
	phases := func(n int) []*agentv1.ProjectPhase {
		var out []*agentv1.ProjectPhase
		for i := range n {
			out = append(out, ph(tk(fmt.Sprintf("p%d", i))))
		}
		return out
	}
	untitled := tk("b")
	untitled.Title = "  \n"
	complex := tk("b")
	complex.Complexity = 11
	cases := []struct {
		name   string
		phases []*agentv1.ProjectPhase
		field  string
	}{
		{"no phase", nil, "phases"},
		{"too many phases", phases(MaxPhases + 1), "phases"},
		{"empty phase", []*agentv1.ProjectPhase{ph(tk("a")), ph()}, "phases[1].tasks"},
		{"no id", []*agentv1.ProjectPhase{ph(tk("a"), tk(""))}, "phases[0].tasks[1].id"},
		{"long id", []*agentv1.ProjectPhase{ph(tk(long))}, "phases[0].tasks[0].id"},
		{"missing title", []*agentv1.ProjectPhase{ph(tk("a")), ph(tk("c"), untitled)}, "phases[1].tasks[1].title"},
		{"complexity", []*agentv1.ProjectPhase{ph(tk("a"), complex)}, "phases[0].tasks[1].complexity"},
		{"duplicate id", []*agentv1.ProjectPhase{ph(tk("a"), tk("b")), ph(tk("b"))}, "phases[1].tasks[0].id"},
		{"unknown dependency", []*agentv1.ProjectPhase{ph(tk("a")), ph(tk("b", "a", "ghost"))}, "phases[1].tasks[0].depends_on[1]"},
		{"dependency on a later phase", []*agentv1.ProjectPhase{ph(tk("a"), tk("b", "c")), ph(tk("c"))}, "phases[0].tasks[1].depends_on[0]"},
		{"self-dependency", []*agentv1.ProjectPhase{ph(tk("a")), ph(tk("b", "a", "b"))}, "phases[1].tasks[0].depends_on[1]"},
		{"too many tasks", []*agentv1.ProjectPhase{ph(many("t", MaxTasks/2)...), ph(many("u", MaxTasks/2+1)...)}, "phases"},
		{"cycle", []*agentv1.ProjectPhase{ph(tk("a", "b"), tk("b", "a"))}, "phases"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			grpctest.WantInvalid(t, Check(c.phases), c.field)
		})
	}
	// The limits themselves are a plan.
	if err := Check([]*agentv1.ProjectPhase{ph(many("t", MaxTasks/2)...), ph(many("u", MaxTasks/2, "t0")...)}); err != nil {
		t.Errorf("%d tasks: %v", MaxTasks, err)
	}
	if err := Check(phases(MaxPhases)); err != nil {
		t.Errorf("%d phases: %v", MaxPhases, err)
	}
}

// A cycle is named in dependency order — each must be done before the next — wherever the
// search for it started.
func TestCheckNamesACycleInDependencyOrder(t *testing.T) {
	cases := []struct {
		name string
		deps [][2]string // task, its dependencies (comma-separated)
		want string
	}{
		{"three", [][2]string{{"a", "c"}, {"b", "a"}, {"c", "b"}}, "a → b → c → a"},
		{"behind an acyclic task", [][2]string{{"x", ""}, {"t1", "t2"}, {"t2", "t3"}, {"t3", "t1"}}, "t1 → t3 → t2 → t1"},
		{"entered from outside", [][2]string{{"t1", "t2"}, {"t2", "t3"}, {"t3", "t2"}}, "t2 → t3 → t2"},
		{"two", [][2]string{{"a", "b"}, {"b", "a"}}, "a → b → a"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			deps := map[string][]string{}
			var tasks []*agentv1.ProjectTask
			for _, d := range c.deps {
				var on []string
				if d[1] != "" {
					on = strings.Split(d[1], ",")
				}
				deps[d[0]] = on
				tasks = append(tasks, tk(d[0], on...))
			}
			err := Check([]*agentv1.ProjectPhase{ph(tk("first")), ph(tasks...)})
			grpctest.WantInvalid(t, err, "phases")
			got := cycleIn(t, err)
			wantDependencyOrder(t, got, deps)
			if strings.Join(got, " → ") != c.want {
				t.Errorf("cycle %q, want %q", strings.Join(got, " → "), c.want)
			}
		})
	}
}

func isUUID(s string) bool {
	u, err := uuid.Parse(s)
	return err == nil && u.String() == s
}

func TestFromTasksLayersTheBlockedByGraph(t *testing.T) {
	// A diamond: b and c wait for a, d for both; given in no particular order, with a
	// blocker outside the list and a task given twice.
	a := &tasksv1.Task{Id: "task-a", Title: "a", Complexity: 3}
	b := &tasksv1.Task{Id: "task-b", Title: "b", BlockedBy: []string{"task-a", "elsewhere"}}
	c := &tasksv1.Task{Id: "task-c", Title: "c", Description: "see", BlockedBy: []string{"task-a"}}
	d := &tasksv1.Task{Id: "task-d", Title: "d", BlockedBy: []string{"task-c", "task-b"}}
	phases, err := FromTasks([]*tasksv1.Task{d, c, a, b, c})
	if err != nil {
		t.Fatal(err)
	}
	var layers [][]string
	byTask := map[string]*agentv1.ProjectTask{}
	for i, p := range phases {
		if p.Number != int32(i+1) || p.Name != fmt.Sprintf("Layer %d", i+1) {
			t.Errorf("phase %d: number %d, name %q", i, p.Number, p.Name)
		}
		var l []string
		for _, pt := range p.Tasks {
			l = append(l, pt.TaskId)
			byTask[pt.TaskId] = pt
			if !isUUID(pt.Id) || pt.Status != pending {
				t.Errorf("task %s: id %q, status %v", pt.TaskId, pt.Id, pt.Status)
			}
		}
		layers = append(layers, l)
	}
	want := [][]string{{"task-a"}, {"task-c", "task-b"}, {"task-d"}}
	if fmt.Sprint(layers) != fmt.Sprint(want) {
		t.Fatalf("layers %v, want %v", layers, want)
	}
	id := func(task string) string { return byTask[task].Id }
	for task, on := range map[string][]string{"task-a": nil, "task-b": {id("task-a")}, "task-c": {id("task-a")}, "task-d": {id("task-c"), id("task-b")}} {
		if got := byTask[task].DependsOn; !slices.Equal(got, on) {
			t.Errorf("%s depends on %v, want %v", task, got, on)
		}
	}
	if pt := byTask["task-c"]; pt.Title != "c" || pt.Description != "see" || byTask["task-a"].Complexity != 3 {
		t.Errorf("task fields not kept: %v %v", pt, byTask["task-a"])
	}

	// Only a blocker outside the list: one layer, no dependency.
	phases, err = FromTasks([]*tasksv1.Task{{Id: "solo", Title: "solo", BlockedBy: []string{"outside"}}})
	if err != nil || len(phases) != 1 || len(phases[0].Tasks) != 1 || len(phases[0].Tasks[0].DependsOn) != 0 {
		t.Fatalf("a blocker outside the list: %v, %v", phases, err)
	}
}

func TestFromTasksNamesACycleByTaskIDs(t *testing.T) {
	tasks := []*tasksv1.Task{
		{Id: "task-1", Title: "one"},
		{Id: "task-a", Title: "a", BlockedBy: []string{"task-c", "task-1"}},
		{Id: "task-b", Title: "b", BlockedBy: []string{"task-a"}},
		{Id: "task-c", Title: "c", BlockedBy: []string{"task-b"}},
	}
	_, err := FromTasks(tasks)
	grpctest.WantInvalid(t, err, "task_ids")
	got := cycleIn(t, err)
	deps := map[string][]string{}
	for _, tk := range tasks {
		deps[tk.Id] = tk.BlockedBy
	}
	wantDependencyOrder(t, got, deps)
	if strings.Join(got, " → ") != "task-a → task-b → task-c → task-a" {
		t.Errorf("cycle %v", got)
	}
}

func TestFromAIMapsKeysToUUIDs(t *testing.T) {
	plan := &aiv1.ProjectPlan{Phases: []*aiv1.ProjectPhase{
		{Name: "schema", Tasks: []*aiv1.TaskProposal{
			{Key: "t1", Title: "tables", Complexity: 15},
			{Key: "t2", Title: "migrations", DependsOn: []string{"t1", "ghost", "t1", "t2"}, Complexity: -2},
		}},
		{Name: "nothing"},
		{Name: "api", Description: "handlers", Tasks: []*aiv1.TaskProposal{
			{Key: "t3", Title: "handlers", Description: "REST", DependsOn: []string{"t2", "t1"}, Complexity: 4},
			{Title: "keyless"},
		}},
	}}
	phases, err := FromAI(plan)
	if err != nil {
		t.Fatal(err)
	}
	if len(phases) != 2 || phases[0].Number != 1 || phases[1].Number != 2 || phases[1].Name != "api" || phases[1].Description != "handlers" {
		t.Fatalf("phases %v: the empty phase is dropped and the rest renumbered", phases)
	}
	t1, t2 := phases[0].Tasks[0], phases[0].Tasks[1]
	t3, t4 := phases[1].Tasks[0], phases[1].Tasks[1]
	ids := map[string]bool{}
	for _, pt := range []*agentv1.ProjectTask{t1, t2, t3, t4} {
		if !isUUID(pt.Id) || pt.Status != pending || pt.TaskId != "" {
			t.Errorf("task %q: id %q, status %v, task id %q", pt.Title, pt.Id, pt.Status, pt.TaskId)
		}
		ids[pt.Id] = true
	}
	if len(ids) != 4 {
		t.Errorf("ids not distinct: %v", ids)
	}
	if len(t1.DependsOn) != 0 || !slices.Equal(t2.DependsOn, []string{t1.Id}) || !slices.Equal(t3.DependsOn, []string{t2.Id, t1.Id}) {
		t.Errorf("dependencies: t1 %v, t2 %v, t3 %v (t1 %s, t2 %s)", t1.DependsOn, t2.DependsOn, t3.DependsOn, t1.Id, t2.Id)
	}
	if t1.Complexity != 10 || t2.Complexity != 0 || t3.Complexity != 4 || t3.Description != "REST" {
		t.Errorf("complexities %d %d %d, description %q", t1.Complexity, t2.Complexity, t3.Complexity, t3.Description)
	}

	// The planner's mistakes are errors: a dependency on a later phase.
	_, err = FromAI(&aiv1.ProjectPlan{Phases: []*aiv1.ProjectPhase{
		{Tasks: []*aiv1.TaskProposal{{Key: "a", Title: "a", DependsOn: []string{"b"}}}},
		{Tasks: []*aiv1.TaskProposal{{Key: "b", Title: "b"}}},
	}})
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "later phase") {
		t.Errorf("a dependency on a later phase: %v", err)
	}
}

func TestEditKeepsTasksAndChecks(t *testing.T) {
	a := &agentv1.ProjectTask{Id: "7a0e3c8e-0000-4000-8000-00000000000a", TaskId: "task-a", Title: "a", Status: agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_SKIPPED,
		StatusReason: "why", Attempts: 2}
	b := &agentv1.ProjectTask{Id: "7a0e3c8e-0000-4000-8000-00000000000b", TaskId: "task-b", Title: "b", Status: pending, DependsOn: []string{a.Id}}
	current := []*agentv1.ProjectPhase{{Number: 1, Name: "one", Tasks: []*agentv1.ProjectTask{a}}, {Number: 2, Name: "two", Tasks: []*agentv1.ProjectTask{b}}}

	// b dropped; a retitled (the caller's task id and status ignored); a new task without
	// an id; a new task with the caller's id, which another depends on.
	given := []*agentv1.ProjectPhase{
		{Name: "first", Tasks: []*agentv1.ProjectTask{
			{Id: a.Id, TaskId: "forged", Status: agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_COMPLETED, Title: "  a again  ", Complexity: 5},
			{Id: "mine", Title: "chosen", DependsOn: []string{a.Id}},
		}},
		{Name: "second", Tasks: []*agentv1.ProjectTask{{Title: "fresh", DependsOn: []string{"mine", a.Id}}}},
	}
	out, err := Edit(current, given)
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 2 || out[0].Number != 1 || out[1].Number != 2 || out[0].Name != "first" || len(out[0].Tasks) != 2 || len(out[1].Tasks) != 1 {
		t.Fatalf("phases %v", out)
	}
	ka, mine, fresh := out[0].Tasks[0], out[0].Tasks[1], out[1].Tasks[0]
	if ka.Id != a.Id || ka.TaskId != "task-a" || ka.Status != a.Status || ka.StatusReason != "why" || ka.Attempts != 2 || ka.Title != "a again" || ka.Complexity != 5 {
		t.Errorf("kept task %v", ka)
	}
	if mine.Id != "mine" || mine.TaskId != "" || mine.Status != pending || !slices.Equal(mine.DependsOn, []string{a.Id}) {
		t.Errorf("caller's id %v", mine)
	}
	if !isUUID(fresh.Id) || fresh.Status != pending || !slices.Equal(fresh.DependsOn, []string{"mine", a.Id}) {
		t.Errorf("new task %v", fresh)
	}
	if _, ph := Find(&agentv1.Project{Phases: out}, b.Id); ph != nil {
		t.Errorf("dropped task still in the plan")
	}
	// The caller's slices are not shared with the plan.
	given[1].Tasks[0].DependsOn[0] = "changed"
	if fresh.DependsOn[0] != "mine" {
		t.Errorf("depends_on shares the caller's slice")
	}

	// A cycle among edited tasks is refused, named.
	_, err = Edit(current, []*agentv1.ProjectPhase{{Tasks: []*agentv1.ProjectTask{
		{Id: a.Id, Title: "a", DependsOn: []string{b.Id}},
		{Id: b.Id, Title: "b", DependsOn: []string{a.Id}},
	}}})
	grpctest.WantInvalid(t, err, "phases")
	wantDependencyOrder(t, cycleIn(t, err), map[string][]string{a.Id: {b.Id}, b.Id: {a.Id}})
	// So is a dependency on a task the edit dropped.
	_, err = Edit(current, []*agentv1.ProjectPhase{{Tasks: []*agentv1.ProjectTask{{Id: a.Id, Title: "a", DependsOn: []string{b.Id}}}}})
	grpctest.WantInvalid(t, err, "phases[0].tasks[0].depends_on[0]")
}

func TestTaskEventCarriesTheError(t *testing.T) {
	p := &agentv1.ProjectPhase{Number: 3}
	failed := &agentv1.ProjectTask{Id: "x", TaskId: "t", JobId: "j", Status: agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_FAILED, Error: "boom", StatusReason: "old"}
	ev := TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_FAILED, failed, p)
	if c := ev.GetTask(); c.GetReason() != "boom" || c.PhaseNumber != 3 || c.ProjectTaskId != "x" || c.JobId != "j" || ev.Type != agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_FAILED {
		t.Errorf("failed: %v", ev)
	}
	skipped := &agentv1.ProjectTask{Id: "x", Status: agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_SKIPPED, Error: "boom", StatusReason: "skip"}
	if r := TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_SKIPPED, skipped, p).GetTask().GetReason(); r != "skip" {
		t.Errorf("skipped reason %q", r)
	}
}

// Whatever the tasks service holds can be planned: its limits are 500 characters of title
// and 65536 of description (an imported issue's body is cut there), so a project made from
// its tasks must take them. (Check counts bytes against 500 and 16 KiB: a long issue, or a
// title of 500 non-ASCII characters, makes PlanProject fail with INVALID_ARGUMENT on
// phases[i].tasks[j].description, a field the request does not have.)
func TestFromTasksTakesWhatTheTasksServiceHolds(t *testing.T) {
	cases := []struct {
		name string
		task *tasksv1.Task
	}{
		{"long description", &tasksv1.Task{Id: "task-a", Title: "a", Description: strings.Repeat("d", 20000)}},
		{"description at the tasks service's limit", &tasksv1.Task{Id: "task-a", Title: "a", Description: strings.Repeat("d", 65536)}},
		{"500 non-ASCII characters of title", &tasksv1.Task{Id: "task-a", Title: strings.Repeat("é", 500)}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			phases, err := FromTasks([]*tasksv1.Task{c.task})
			if err != nil {
				t.Fatalf("a task the tasks service holds is refused: %v", err)
			}
			if pt := phases[0].Tasks[0]; pt.Title != c.task.Title || pt.Description != c.task.Description {
				t.Errorf("task changed on the way")
			}
		})
	}
}

// A blocked-by chain deeper than MaxPhases is valid input to PlanProject (at most 100
// tasks, any links): it is planned, or refused naming the request's field — not
// "phases", which a PlanProject request does not have.
func TestFromTasksDeepChainNamesARequestField(t *testing.T) {
	var tasks []*tasksv1.Task
	for i := range MaxPhases + 1 {
		tk := &tasksv1.Task{Id: fmt.Sprintf("task-%02d", i), Title: fmt.Sprintf("step %d", i)}
		if i > 0 {
			tk.BlockedBy = []string{tasks[i-1].Id}
		}
		tasks = append(tasks, tk)
	}
	phases, err := FromTasks(tasks)
	if err != nil {
		grpctest.WantInvalid(t, err, "task_ids")
		return
	}
	if n := len(Tasks(phases)); n != len(tasks) {
		t.Errorf("%d tasks planned, want %d", n, len(tasks))
	}
	if err := Check(phases); err != nil {
		t.Errorf("the plan does not check: %v", err)
	}
}
