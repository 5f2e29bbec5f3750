package prompts

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/durationpb"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// parseCase is one model reply: either the response it converts to, or the ParseError
// whose text contains errHas (a JSON pointer and what is wrong).
type parseCase struct {
	name   string
	raw    string
	want   proto.Message
	errHas []string
}

func runParse[T proto.Message](t *testing.T, rpc string, parse func(string) (T, error), cases []parseCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := parse(c.raw)
			if c.errHas != nil {
				var pe *ParseError
				if !errors.As(err, &pe) {
					t.Fatalf("got %v (%T), want a *ParseError", err, err)
				}
				if pe.RPC != rpc {
					t.Errorf("ParseError.RPC = %q, want %q", pe.RPC, rpc)
				}
				for _, w := range c.errHas {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got, protocmp.Transform()); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseCommon(t *testing.T) {
	t.Parallel()
	runParse(t, "AssessComplexity", ParseAssessComplexity, []parseCase{
		{name: "no JSON", raw: "I think it is a 5.", errHas: []string{"no JSON object"}},
		{name: "fenced answer with prose", raw: "Here:\n```json\n{\"complexity\":5,\"tier\":3,\"tags\":[\"coding\"],\"budget_mode\":\"balanced\",\"estimated_tokens\":100000,\"reasoning\":\"r\"}\n```",
			want: &aiv1.AssessComplexityResponse{Complexity: 5, Tier: 3, Tags: []string{"coding"}, BudgetMode: aiv1.BudgetMode_BUDGET_MODE_BALANCED, EstimatedTokens: 100000, Reasoning: "r"}},
		{name: "complexity out of range", raw: `{"complexity":11,"tier":3,"tags":[],"budget_mode":"balanced","estimated_tokens":1,"reasoning":"r"}`, errHas: []string{"at /complexity"}},
		{name: "tier out of range", raw: `{"complexity":1,"tier":0,"tags":[],"budget_mode":"balanced","estimated_tokens":1,"reasoning":"r"}`, errHas: []string{"at /tier"}},
		{name: "unknown budget mode", raw: `{"complexity":1,"tier":1,"tags":[],"budget_mode":"cheap","estimated_tokens":1,"reasoning":"r"}`, errHas: []string{"at /budget_mode"}},
		{name: "unknown tag", raw: `{"complexity":1,"tier":1,"tags":["vision"],"budget_mode":"balanced","estimated_tokens":1,"reasoning":"r"}`, errHas: []string{"at /tags/0"}},
		{name: "extra field", raw: `{"complexity":1,"tier":1,"tags":[],"budget_mode":"balanced","estimated_tokens":1,"reasoning":"r","x":1}`, errHas: []string{"at /", "'x'"}},
	})
}

const subtasksJSON = `[{"key":"t1","title":"A","description":"a","depends_on":[],"complexity":2},{"key":"t2","title":"B","description":"b","depends_on":["t1"],"complexity":3,"context_hints":["x.go"]}]`

var subtasks = []*aiv1.TaskProposal{
	{Key: "t1", Title: "A", Description: "a", Complexity: 2},
	{Key: "t2", Title: "B", Description: "b", DependsOn: []string{"t1"}, Complexity: 3, ContextHints: []string{"x.go"}},
}

func TestParseAssessConfidence(t *testing.T) {
	t.Parallel()
	runParse(t, "AssessConfidence", ParseAssessConfidence, []parseCase{
		{name: "proceed drops other lists", raw: `{"confidence":85,"decision":"proceed","reasoning":"clear","questions":["q?"]}`,
			want: &aiv1.AssessConfidenceResponse{Confidence: 85, Decision: aiv1.ConfidenceDecision_CONFIDENCE_DECISION_PROCEED, Reasoning: "clear"}},
		{name: "clarify", raw: `{"confidence":40,"decision":"clarify","reasoning":"r","questions":["Which API?"]}`,
			want: &aiv1.AssessConfidenceResponse{Confidence: 40, Decision: aiv1.ConfidenceDecision_CONFIDENCE_DECISION_CLARIFY, Reasoning: "r", Questions: []string{"Which API?"}}},
		{name: "break down", raw: `{"confidence":30,"decision":"break_down","reasoning":"r","subtasks":` + subtasksJSON + `}`,
			want: &aiv1.AssessConfidenceResponse{Confidence: 30, Decision: aiv1.ConfidenceDecision_CONFIDENCE_DECISION_BREAK_DOWN, Reasoning: "r", SuggestedSubtasks: subtasks}},
		{name: "confidence over 100", raw: `{"confidence":101,"decision":"proceed","reasoning":"r"}`, errHas: []string{"at /confidence"}},
		{name: "unknown decision", raw: `{"confidence":50,"decision":"maybe","reasoning":"r"}`, errHas: []string{"at /decision"}},
		{name: "clarify without questions", raw: `{"confidence":40,"decision":"clarify","reasoning":"r","questions":[" "]}`, errHas: []string{"at /questions"}},
		{name: "break down with one subtask", raw: `{"confidence":30,"decision":"break_down","reasoning":"r","subtasks":[{"key":"t1","title":"A","description":"a","depends_on":[],"complexity":2}]}`, errHas: []string{"at /subtasks", "two"}},
		{name: "subtask depends on unknown key", raw: `{"confidence":30,"decision":"break_down","reasoning":"r","subtasks":[{"key":"t1","title":"A","description":"a","depends_on":["t9"],"complexity":2},{"key":"t2","title":"B","description":"b","depends_on":[],"complexity":2}]}`, errHas: []string{"at /subtasks/0/depends_on/0", `"t9"`}},
		{name: "subtask cycle", raw: `{"confidence":30,"decision":"break_down","reasoning":"r","subtasks":[{"key":"t1","title":"A","description":"a","depends_on":["t2"],"complexity":2},{"key":"t2","title":"B","description":"b","depends_on":["t1"],"complexity":2}]}`, errHas: []string{"cycle", "t1 → t2 → t1"}},
		{name: "duplicate subtask key", raw: `{"confidence":30,"decision":"break_down","reasoning":"r","subtasks":[{"key":"t1","title":"A","description":"a","depends_on":[],"complexity":2},{"key":"t1","title":"B","description":"b","depends_on":[],"complexity":2}]}`, errHas: []string{"at /subtasks/1/key"}},
	})
}

func step(id string, action typev1.FileAction, path, desc string, deps ...string) *typev1.PlanStep {
	return &typev1.PlanStep{Id: id, Action: action, Path: path, Description: desc, DependsOn: deps}
}

func TestParsePlanTask(t *testing.T) {
	t.Parallel()
	const (
		create = typev1.FileAction_FILE_ACTION_CREATE
		modify = typev1.FileAction_FILE_ACTION_MODIFY
		del    = typev1.FileAction_FILE_ACTION_DELETE
	)
	plan := func(steps string) string { return `{"summary":"S","steps":[` + steps + `]}` }
	runParse(t, "PlanTask", ParsePlanTask, []parseCase{
		{name: "valid plan",
			raw: `{"summary":"S","packages":["golang.org/x/time@v0.5.0"],"steps":[
				{"id":"s1","action":"command","command":["go","mod","init","example.com/x"],"workdir":"svc","description":"init"},
				{"id":"s2","action":"create","path":"svc/a.go","description":"A","depends_on":["s1"]},
				{"id":"s3","action":"modify","path":"svc/b.go","description":"B","depends_on":["s2"]},
				{"id":"s4","action":"delete","path":"old.go","description":"gone"}]}`,
			want: &aiv1.PlanTaskResponse{Plan: &typev1.Plan{Summary: "S", Packages: []string{"golang.org/x/time@v0.5.0"}, Steps: []*typev1.PlanStep{
				{Id: "s1", Command: []string{"go", "mod", "init", "example.com/x"}, Workdir: "svc", Description: "init"},
				step("s2", create, "svc/a.go", "A", "s1"),
				step("s3", modify, "svc/b.go", "B", "s2"),
				step("s4", del, "old.go", "gone"),
			}}}},
		{name: "the plan round-trips through the prompt's rendering", raw: planRendering(t), want: &aiv1.PlanTaskResponse{Plan: samplePlan()}},
		{name: "missing id", raw: plan(`{"action":"create","path":"a.go","description":"A"}`), errHas: []string{"at /steps/0", "'id'"}},
		{name: "no steps", raw: plan(``), errHas: []string{"at /steps"}},
		{name: "unknown action", raw: plan(`{"id":"s1","action":"run_command","path":"a.go","description":"A"}`), errHas: []string{"at /steps/0/action"}},
		{name: "duplicate id", raw: plan(`{"id":"s1","action":"create","path":"a.go","description":"A"},{"id":"s1","action":"create","path":"b.go","description":"B"}`), errHas: []string{"at /steps/1/id", `"s1"`}},
		{name: "unknown depends_on", raw: plan(`{"id":"s1","action":"create","path":"a.go","description":"A","depends_on":["s7"]}`), errHas: []string{"at /steps/0/depends_on/0", `"s7"`}},
		{name: "self dependency", raw: plan(`{"id":"s1","action":"create","path":"a.go","description":"A","depends_on":["s1"]}`), errHas: []string{"depends on itself"}},
		{name: "cycle", raw: plan(`{"id":"s1","action":"create","path":"a.go","description":"A","depends_on":["s3"]},{"id":"s2","action":"create","path":"b.go","description":"B","depends_on":["s1"]},{"id":"s3","action":"create","path":"c.go","description":"C","depends_on":["s2"]}`),
			errHas: []string{"cycle", "s1 → s3 → s2 → s1"}},
		{name: "file step without path", raw: plan(`{"id":"s1","action":"create","description":"A"}`), errHas: []string{"at /steps/0/path", "empty"}},
		{name: "absolute path", raw: plan(`{"id":"s1","action":"create","path":"/etc/passwd","description":"A"}`), errHas: []string{"at /steps/0/path", "absolute"}},
		{name: "dot-dot path", raw: plan(`{"id":"s1","action":"modify","path":"a/../../b.go","description":"A"}`), errHas: []string{"at /steps/0/path", `".."`}},
		{name: "backslash path", raw: plan(`{"id":"s1","action":"create","path":"a\\b.go","description":"A"}`), errHas: []string{"at /steps/0/path", "'/'"}},
		{name: "unclean path", raw: plan(`{"id":"s1","action":"create","path":"./a.go","description":"A"}`), errHas: []string{"at /steps/0/path", `"a.go"`}},
		{name: "two steps on one file", raw: plan(`{"id":"s1","action":"create","path":"a.go","description":"A"},{"id":"s2","action":"modify","path":"a.go","description":"B"}`), errHas: []string{"at /steps/1/path", "one step per file"}},
		{name: "file step with command", raw: plan(`{"id":"s1","action":"create","path":"a.go","command":["touch","a.go"],"description":"A"}`), errHas: []string{"at /steps/0/command"}},
		{name: "command without argv", raw: plan(`{"id":"s1","action":"command","command":[],"description":"A"}`), errHas: []string{"at /steps/0/command", "argv"}},
		{name: "command with empty program", raw: plan(`{"id":"s1","action":"command","command":[" ","x"],"description":"A"}`), errHas: []string{"at /steps/0/command"}},
		{name: "command with path", raw: plan(`{"id":"s1","action":"command","command":["go","generate"],"path":"a.go","description":"A"}`), errHas: []string{"at /steps/0/path"}},
		{name: "command workdir outside", raw: plan(`{"id":"s1","action":"command","command":["ls"],"workdir":"../x","description":"A"}`), errHas: []string{"at /steps/0/workdir"}},
	})
}

// planRendering is the sample plan as prompts show it (PlanTask's answer shape).
func planRendering(t *testing.T) string {
	f := fencePlan(samplePlan())
	body := strings.TrimSuffix(strings.TrimPrefix(f, "<data kind=\"plan\">\n"), "\n</data>")
	if body == f {
		t.Fatalf("unexpected rendering %q", f)
	}
	return body
}

func TestParseReviews(t *testing.T) {
	t.Parallel()
	concerns := `[{"severity":"warning","path":"a.go","line":3,"message":"no test"},{"severity":"critical","path":"","line":0,"message":"secret leaked"},{"severity":"warning","path":"b.go","line":0,"message":"fragile"}]`
	wantConcerns := []*typev1.Diagnostic{
		{Severity: typev1.Severity_SEVERITY_CRITICAL, Message: "secret leaked", Tool: "review"},
		{Path: "a.go", Line: 3, Severity: typev1.Severity_SEVERITY_WARNING, Message: "no test", Tool: "review"},
		{Path: "b.go", Severity: typev1.Severity_SEVERITY_WARNING, Message: "fragile", Tool: "review"},
	}
	runParse(t, "ReviewCode", ParseReviewCode, []parseCase{
		{name: "valid, most serious first", raw: `{"quality_score":6,"concerns":` + concerns + `,"documentation":"# Doc","summary":"ok","memories_extracted":["use x", " "]}`,
			want: &aiv1.ReviewCodeResponse{QualityScore: 6, Concerns: wantConcerns, Documentation: "# Doc", Summary: "ok", MemoriesExtracted: []string{"use x"}}},
		{name: "quality 0", raw: `{"quality_score":0,"concerns":[],"documentation":"","summary":"s"}`, errHas: []string{"at /quality_score"}},
		{name: "unknown severity", raw: `{"quality_score":5,"concerns":[{"severity":"major","path":"","line":0,"message":"m"}],"documentation":"","summary":"s"}`, errHas: []string{"at /concerns/0/severity"}},
		{name: "concern path outside", raw: `{"quality_score":5,"concerns":[{"severity":"info","path":"../x","line":0,"message":"m"}],"documentation":"","summary":"s"}`, errHas: []string{"at /concerns/0/path"}},
		{name: "architectural decisions are not a ReviewCode field", raw: `{"quality_score":5,"concerns":[],"documentation":"","summary":"s","architectural_decisions":[]}`, errHas: []string{"'architectural_decisions'"}},
	})
	runParse(t, "ReviewProject", ParseReviewProject, []parseCase{
		{name: "valid", raw: `{"quality_score":8,"concerns":` + concerns + `,"documentation":"d","summary":"s","architectural_decisions":["chi for routing: small"],"memories_extracted":[]}`,
			want: &aiv1.ReviewProjectResponse{QualityScore: 8, Concerns: wantConcerns, Documentation: "d", Summary: "s", ArchitecturalDecisions: []string{"chi for routing: small"}}},
		{name: "quality 11", raw: `{"quality_score":11,"concerns":[],"documentation":"","summary":"s"}`, errHas: []string{"at /quality_score"}},
	})
}

func TestParseDiagnoseFailure(t *testing.T) {
	t.Parallel()
	runParse(t, "DiagnoseFailure", ParseDiagnoseFailure, []parseCase{
		{name: "bad plan", raw: `{"category":"bad_plan","reason":"r","recommended_recovery":"rec","context_requests":["x"],"retry_after_seconds":5}`,
			want: &aiv1.DiagnoseFailureResponse{Category: aiv1.FailureCategory_FAILURE_CATEGORY_BAD_PLAN, Reason: "r", RecommendedRecovery: "rec"}},
		{name: "implementation error", raw: `{"category":"implementation_error","reason":"r","recommended_recovery":"rec"}`,
			want: &aiv1.DiagnoseFailureResponse{Category: aiv1.FailureCategory_FAILURE_CATEGORY_IMPLEMENTATION_ERROR, Reason: "r", RecommendedRecovery: "rec"}},
		{name: "missing context", raw: `{"category":"missing_context","reason":"r","recommended_recovery":"rec","context_requests":["internal/db/db.go","how is auth done"]}`,
			want: &aiv1.DiagnoseFailureResponse{Category: aiv1.FailureCategory_FAILURE_CATEGORY_MISSING_CONTEXT, Reason: "r", RecommendedRecovery: "rec", ContextRequests: []string{"internal/db/db.go", "how is auth done"}}},
		{name: "impossible task", raw: `{"category":"impossible_task","reason":"r","recommended_recovery":"ask"}`,
			want: &aiv1.DiagnoseFailureResponse{Category: aiv1.FailureCategory_FAILURE_CATEGORY_IMPOSSIBLE_TASK, Reason: "r", RecommendedRecovery: "ask"}},
		{name: "environment error", raw: `{"category":"environment_error","reason":"r","recommended_recovery":"wait","retry_after_seconds":30}`,
			want: &aiv1.DiagnoseFailureResponse{Category: aiv1.FailureCategory_FAILURE_CATEGORY_ENVIRONMENT_ERROR, Reason: "r", RecommendedRecovery: "wait", RetryAfter: durationpb.New(30 * time.Second)}},
		{name: "unknown category", raw: `{"category":"flaky","reason":"r","recommended_recovery":"x"}`, errHas: []string{"at /category"}},
		{name: "missing context without requests", raw: `{"category":"missing_context","reason":"r","recommended_recovery":"x"}`, errHas: []string{"at /context_requests"}},
		{name: "retry too long", raw: `{"category":"environment_error","reason":"r","recommended_recovery":"x","retry_after_seconds":86400}`, errHas: []string{"at /retry_after_seconds"}},
	})
}

func TestParseIntervene(t *testing.T) {
	t.Parallel()
	runParse(t, "Intervene", ParseIntervene, []parseCase{
		{name: "rewrite", raw: `{"action":"rewrite_task","reason":"vague","new_title":" Clearer ","new_description":"Do X in a.go.","subtasks":` + subtasksJSON + `}`,
			want: &aiv1.InterveneResponse{Action: aiv1.InterventionAction_INTERVENTION_ACTION_REWRITE_TASK, Reason: "vague", NewTitle: "Clearer", NewDescription: "Do X in a.go."}},
		{name: "split", raw: `{"action":"split_task","reason":"big","subtasks":` + subtasksJSON + `}`,
			want: &aiv1.InterveneResponse{Action: aiv1.InterventionAction_INTERVENTION_ACTION_SPLIT_TASK, Reason: "big", Subtasks: subtasks}},
		{name: "escalate", raw: `{"action":"escalate","reason":"needs a key","new_description":"x"}`,
			want: &aiv1.InterveneResponse{Action: aiv1.InterventionAction_INTERVENTION_ACTION_ESCALATE, Reason: "needs a key"}},
		{name: "unknown action", raw: `{"action":"give_up","reason":"r"}`, errHas: []string{"at /action"}},
		{name: "rewrite without description", raw: `{"action":"rewrite_task","reason":"r","new_title":"T"}`, errHas: []string{"at /new_description"}},
		{name: "split into one", raw: `{"action":"split_task","reason":"r","subtasks":[{"key":"t1","title":"A","description":"a","depends_on":[],"complexity":2}]}`, errHas: []string{"at /subtasks", "two"}},
		{name: "split with a bad complexity", raw: `{"action":"split_task","reason":"r","subtasks":[{"key":"t1","title":"A","description":"a","depends_on":[],"complexity":0},{"key":"t2","title":"B","description":"b","depends_on":[],"complexity":2}]}`, errHas: []string{"at /subtasks/0/complexity"}},
	})
}

func TestParseDecomposeProject(t *testing.T) {
	t.Parallel()
	task := func(key string, deps ...string) string {
		d := `[]`
		if len(deps) > 0 {
			d = `["` + strings.Join(deps, `","`) + `"]`
		}
		return `{"key":"` + key + `","title":"T` + key + `","description":"d","depends_on":` + d + `,"complexity":2}`
	}
	project := func(phases ...string) string {
		return `{"summary":"S","conventions":"C","phases":[` + strings.Join(phases, ",") + `]}`
	}
	phase := func(name string, tasks ...string) string {
		return `{"name":"` + name + `","description":"D","tasks":[` + strings.Join(tasks, ",") + `]}`
	}
	prop := func(key string, deps ...string) *aiv1.TaskProposal {
		return &aiv1.TaskProposal{Key: key, Title: "T" + key, Description: "d", DependsOn: deps, Complexity: 2}
	}
	runParse(t, "DecomposeProject", ParseDecomposeProject, []parseCase{
		{name: "valid", raw: project(phase("P1", task("t1"), task("t2", "t1")), phase("P2", task("t3", "t1", "t2"))),
			want: &aiv1.DecomposeProjectResponse{Plan: &aiv1.ProjectPlan{Summary: "S", Conventions: "C", Phases: []*aiv1.ProjectPhase{
				{Name: "P1", Description: "D", Tasks: []*aiv1.TaskProposal{prop("t1"), prop("t2", "t1")}},
				{Name: "P2", Description: "D", Tasks: []*aiv1.TaskProposal{prop("t3", "t1", "t2")}},
			}}}},
		{name: "depends on a later phase", raw: project(phase("P1", task("t1", "t2")), phase("P2", task("t2"))), errHas: []string{"at /phases/0/tasks/0/depends_on/0", `"t2"`}},
		{name: "key reused across phases", raw: project(phase("P1", task("t1")), phase("P2", task("t1"))), errHas: []string{"at /phases/1/tasks/0/key"}},
		{name: "cycle within a phase", raw: project(phase("P1", task("t1", "t2"), task("t2", "t1"))), errHas: []string{"at /phases/0/tasks", "cycle"}},
		{name: "empty phase", raw: project(phase("P1")), errHas: []string{"at /phases/0/tasks"}},
		{name: "no conventions", raw: `{"summary":"S","phases":[` + phase("P1", task("t1")) + `]}`, errHas: []string{"'conventions'"}},
	})
}

func TestParseReviseProjectPhase(t *testing.T) {
	t.Parallel()
	req := reviseProjectPhaseReq() // phase 1 ("Features") of id-1..id-5
	task := func(key string, deps ...string) string {
		d := `[]`
		if len(deps) > 0 {
			d = `["` + strings.Join(deps, `","`) + `"]`
		}
		return `{"key":"` + key + `","title":"T","description":"d","depends_on":` + d + `,"complexity":3}`
	}
	revised := func(tasks ...string) string {
		return `{"changed":true,"reasoning":"r","phase":{"name":"Features","description":"API.","tasks":[` + strings.Join(tasks, ",") + `]}}`
	}
	parse := func(raw string) (*aiv1.ReviseProjectPhaseResponse, error) { return ParseReviseProjectPhase(raw, req) }
	runParse(t, "ReviseProjectPhase", parse, []parseCase{
		{name: "unchanged keeps the request's phase", raw: `{"changed":false,"reasoning":"fits"}`,
			want: &aiv1.ReviseProjectPhaseResponse{Changed: false, Reasoning: "fits", Phase: projectPlan().Phases[1]}},
		{name: "changed: keep, edit, drop, add", raw: revised(task("id-3", "id-2"), task("n1", "id-1", "id-3")),
			want: &aiv1.ReviseProjectPhaseResponse{Changed: true, Reasoning: "r", Phase: &aiv1.ProjectPhase{Name: "Features", Description: "API.", Tasks: []*aiv1.TaskProposal{
				{Key: "id-3", Title: "T", Description: "d", DependsOn: []string{"id-2"}, Complexity: 3},
				{Key: "n1", Title: "T", Description: "d", DependsOn: []string{"id-1", "id-3"}, Complexity: 3},
			}}}},
		{name: "changed without phase", raw: `{"changed":true,"reasoning":"r"}`, errHas: []string{"at /phase"}},
		{name: "new task takes an earlier phase's key", raw: revised(task("id-1")), errHas: []string{"at /phase/tasks/0/key", `"id-1"`}},
		{name: "new task takes a later phase's key", raw: revised(task("id-5")), errHas: []string{"at /phase/tasks/0/key", `"id-5"`}},
		{name: "depends on a later phase", raw: revised(task("id-3", "id-5")), errHas: []string{"at /phase/tasks/0/depends_on/0", `"id-5"`}},
		{name: "depends on a dropped task", raw: revised(task("id-3", "id-4")), errHas: []string{"at /phase/tasks/0/depends_on/0", `"id-4"`}},
		{name: "cycle", raw: revised(task("id-3", "id-4"), task("id-4", "id-3")), errHas: []string{"cycle"}},
	})
}

func TestParsePlanTaskOrder(t *testing.T) {
	t.Parallel()
	req := planTaskOrderReq() // a, b (blocked by a and by a task not in the list), c
	entry := func(id string) string {
		return `{"task_id":"` + id + `","complexity":4,"estimated_tokens":50000,"reasoning":"r` + id + `"}`
	}
	order := func(ids ...string) string {
		var es []string
		for _, id := range ids {
			es = append(es, entry(id))
		}
		return `{"tasks":[` + strings.Join(es, ",") + `],"reasoning":"overall"}`
	}
	parse := func(raw string) (*aiv1.PlanTaskOrderResponse, error) { return ParsePlanTaskOrder(raw, req) }
	to := func(id string, n int32) *aiv1.TaskOrder {
		return &aiv1.TaskOrder{TaskId: id, Order: n, Complexity: 4, EstimatedTokens: 50000, Reasoning: "r" + id}
	}
	runParse(t, "PlanTaskOrder", parse, []parseCase{
		{name: "valid", raw: order("a", "c", "b"), want: &aiv1.PlanTaskOrderResponse{Reasoning: "overall", Tasks: []*aiv1.TaskOrder{to("a", 1), to("c", 2), to("b", 3)}}},
		{name: "missing task", raw: order("a", "b"), errHas: []string{"at /tasks", `missing "c"`}},
		{name: "task twice", raw: order("a", "b", "c", "a"), errHas: []string{"at /tasks/3/task_id", "twice"}},
		{name: "unknown task", raw: order("a", "b", "c", "d"), errHas: []string{"at /tasks/3/task_id", `"d"`}},
		{name: "before its blocker", raw: order("b", "a", "c"), errHas: []string{"at /tasks/0", `blocked by "a"`}},
		{name: "complexity 0", raw: `{"tasks":[{"task_id":"a","complexity":0,"estimated_tokens":1,"reasoning":""}],"reasoning":"r"}`, errHas: []string{"at /tasks/0/complexity"}},
	})
}
