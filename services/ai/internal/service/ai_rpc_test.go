package service

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/fakellm"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

var testTask = &aiv1.TaskSpec{Title: "Add a health endpoint", Description: "Serve GET /healthz returning 200."}

func taskJSON(key, title string, deps ...string) map[string]any {
	if deps == nil {
		deps = []string{}
	}
	return map[string]any{"key": key, "title": title, "description": title + ".", "depends_on": deps, "complexity": 3}
}

var testPlan = &aiv1.ProjectPlan{Summary: "s", Conventions: "Go 1.26", Phases: []*aiv1.ProjectPhase{
	{Name: "core", Tasks: []*aiv1.TaskProposal{{Key: "t1", Title: "model"}, {Key: "t2", Title: "api", DependsOn: []string{"t1"}}}},
}}

// rpcCase is one AIService RPC with a valid request, a model answer its schema accepts,
// and what the response must then hold.
type rpcCase struct {
	name   string
	answer any
	call   func(ctx context.Context, c aiv1.AIServiceClient) (proto.Message, error)
	check  func(t *testing.T, m proto.Message)
}

func rpcCases() []rpcCase {
	return []rpcCase{
		{"AssessConfidence",
			map[string]any{"confidence": 85, "decision": "proceed", "reasoning": "clear"},
			func(ctx context.Context, c aiv1.AIServiceClient) (proto.Message, error) {
				return c.AssessConfidence(ctx, &aiv1.AssessConfidenceRequest{Task: testTask, ProjectTree: []string{"main.go"}})
			},
			func(t *testing.T, m proto.Message) {
				r := m.(*aiv1.AssessConfidenceResponse)
				if r.Confidence != 85 || r.Decision != aiv1.ConfidenceDecision_CONFIDENCE_DECISION_PROCEED {
					t.Errorf("got %v", r)
				}
			}},
		{"AssessComplexity",
			map[string]any{"complexity": 4, "tier": 2, "tags": []string{"coding"}, "budget_mode": "balanced", "estimated_tokens": 20000, "reasoning": "small"},
			func(ctx context.Context, c aiv1.AIServiceClient) (proto.Message, error) {
				return c.AssessComplexity(ctx, &aiv1.AssessComplexityRequest{Task: testTask})
			},
			func(t *testing.T, m proto.Message) {
				r := m.(*aiv1.AssessComplexityResponse)
				if r.Complexity != 4 || r.Tier != 2 || r.BudgetMode != aiv1.BudgetMode_BUDGET_MODE_BALANCED {
					t.Errorf("got %v", r)
				}
			}},
		{"PlanTask",
			map[string]any{"summary": "add handler", "steps": []map[string]any{
				{"id": "s1", "action": "create", "path": "health.go", "description": "handler", "depends_on": []string{}},
				{"id": "s2", "action": "command", "command": []string{"go", "test", "./..."}, "description": "test", "depends_on": []string{"s1"}},
			}},
			func(ctx context.Context, c aiv1.AIServiceClient) (proto.Message, error) {
				return c.PlanTask(ctx, &aiv1.PlanTaskRequest{Task: testTask, ProjectTree: []string{"main.go"}})
			},
			func(t *testing.T, m proto.Message) {
				r := m.(*aiv1.PlanTaskResponse)
				if len(r.Plan.GetSteps()) != 2 || r.Plan.Steps[0].Path != "health.go" || r.Plan.Steps[1].DependsOn[0] != "s1" {
					t.Errorf("got %v", r.Plan)
				}
			}},
		{"GenerateFile",
			"```health.go\npackage main\n\nfunc health() {}\n```",
			func(ctx context.Context, c aiv1.AIServiceClient) (proto.Message, error) {
				return c.GenerateFile(ctx, &aiv1.GenerateFileRequest{Task: testTask,
					File:            &aiv1.FileSpec{Path: "health.go", Action: typev1.FileAction_FILE_ACTION_CREATE, Description: "handler"},
					DependencyFiles: []*aiv1.ContextFile{{Path: "main.go", Content: "package main\n"}}})
			},
			func(t *testing.T, m proto.Message) {
				r := m.(*aiv1.GenerateFileResponse)
				if !strings.Contains(r.Content, "func health") || r.Change.GetPath() != "health.go" {
					t.Errorf("got %v", r)
				}
			}},
		{"FixFile",
			"{\"explanation\": \"removed the stray brace\"}\n\n```main.go\npackage main\n```",
			func(ctx context.Context, c aiv1.AIServiceClient) (proto.Message, error) {
				return c.FixFile(ctx, &aiv1.FixFileRequest{Task: testTask, Path: "main.go", Content: "package main\n}\n", Attempt: 1,
					Errors: []*typev1.Diagnostic{{Path: "main.go", Line: 2, Message: "syntax error: unexpected }", Severity: typev1.Severity_SEVERITY_ERROR}}})
			},
			func(t *testing.T, m proto.Message) {
				if r := m.(*aiv1.FixFileResponse); r.Content != "package main\n" {
					t.Errorf("got %v", r)
				}
			}},
		{"ReviewCode",
			map[string]any{"quality_score": 8, "concerns": []map[string]any{{"severity": "warning", "path": "health.go", "line": 3, "message": "no test"}},
				"documentation": "Adds /healthz.", "summary": "fine"},
			func(ctx context.Context, c aiv1.AIServiceClient) (proto.Message, error) {
				return c.ReviewCode(ctx, &aiv1.ReviewCodeRequest{Task: testTask, Files: []*aiv1.ReviewFile{{Path: "health.go", Action: typev1.FileAction_FILE_ACTION_CREATE, Content: "package main\n"}}})
			},
			func(t *testing.T, m proto.Message) {
				r := m.(*aiv1.ReviewCodeResponse)
				if r.QualityScore != 8 || len(r.Concerns) != 1 || r.Concerns[0].Severity != typev1.Severity_SEVERITY_WARNING {
					t.Errorf("got %v", r)
				}
			}},
		{"DiagnoseFailure",
			map[string]any{"category": "implementation_error", "reason": "typo", "recommended_recovery": "fix the import"},
			func(ctx context.Context, c aiv1.AIServiceClient) (proto.Message, error) {
				return c.DiagnoseFailure(ctx, &aiv1.DiagnoseFailureRequest{Task: testTask, ErrorOutput: "undefined: http"})
			},
			func(t *testing.T, m proto.Message) {
				if r := m.(*aiv1.DiagnoseFailureResponse); r.Category != aiv1.FailureCategory_FAILURE_CATEGORY_IMPLEMENTATION_ERROR {
					t.Errorf("got %v", r)
				}
			}},
		{"Intervene",
			map[string]any{"action": "split_task", "reason": "too big", "subtasks": []any{taskJSON("a", "first"), taskJSON("b", "second", "a")}},
			func(ctx context.Context, c aiv1.AIServiceClient) (proto.Message, error) {
				return c.Intervene(ctx, &aiv1.InterveneRequest{Task: testTask, Attempts: []*aiv1.AttemptRecord{{Attempt: 1, Error: "boom"}}})
			},
			func(t *testing.T, m proto.Message) {
				r := m.(*aiv1.InterveneResponse)
				if r.Action != aiv1.InterventionAction_INTERVENTION_ACTION_SPLIT_TASK || len(r.Subtasks) != 2 {
					t.Errorf("got %v", r)
				}
			}},
		{"DecomposeProject",
			map[string]any{"summary": "a blog", "conventions": "Go", "phases": []any{map[string]any{"name": "core", "description": "d", "tasks": []any{taskJSON("t1", "model"), taskJSON("t2", "api", "t1")}}}},
			func(ctx context.Context, c aiv1.AIServiceClient) (proto.Message, error) {
				return c.DecomposeProject(ctx, &aiv1.DecomposeProjectRequest{Request: "Build a blog"})
			},
			func(t *testing.T, m proto.Message) {
				if r := m.(*aiv1.DecomposeProjectResponse); len(r.Plan.GetPhases()) != 1 || len(r.Plan.Phases[0].Tasks) != 2 {
					t.Errorf("got %v", r)
				}
			}},
		{"ReviseProjectPhase",
			map[string]any{"changed": false, "reasoning": "still right"},
			func(ctx context.Context, c aiv1.AIServiceClient) (proto.Message, error) {
				return c.ReviseProjectPhase(ctx, &aiv1.ReviseProjectPhaseRequest{Request: "Build a blog", Plan: testPlan, PhaseIndex: 0})
			},
			func(t *testing.T, m proto.Message) {
				if r := m.(*aiv1.ReviseProjectPhaseResponse); r.Changed {
					t.Errorf("got %v", r)
				}
			}},
		{"ReviewProject",
			map[string]any{"quality_score": 7, "concerns": []any{}, "documentation": "docs", "summary": "ok"},
			func(ctx context.Context, c aiv1.AIServiceClient) (proto.Message, error) {
				return c.ReviewProject(ctx, &aiv1.ReviewProjectRequest{Request: "Build a blog", Plan: testPlan})
			},
			func(t *testing.T, m proto.Message) {
				if r := m.(*aiv1.ReviewProjectResponse); r.QualityScore != 7 {
					t.Errorf("got %v", r)
				}
			}},
		{"PlanTaskOrder",
			map[string]any{"reasoning": "deps first", "tasks": []map[string]any{
				{"task_id": "a", "complexity": 2, "estimated_tokens": 1000, "reasoning": "base"},
				{"task_id": "b", "complexity": 5, "estimated_tokens": 9000, "reasoning": "needs a"}}},
			func(ctx context.Context, c aiv1.AIServiceClient) (proto.Message, error) {
				return c.PlanTaskOrder(ctx, &aiv1.PlanTaskOrderRequest{Tasks: []*aiv1.OrderableTask{
					{Id: "b", Title: "api", BlockedBy: []string{"a"}}, {Id: "a", Title: "model"}}})
			},
			func(t *testing.T, m proto.Message) {
				r := m.(*aiv1.PlanTaskOrderResponse)
				if len(r.Tasks) != 2 || r.Tasks[0].TaskId != "a" || r.Tasks[0].Order != 1 || r.Tasks[1].TaskId != "b" {
					t.Errorf("got %v", r)
				}
			}},
	}
}

// Every generating RPC, through each provider family's real SDK client against fakellm,
// returns a validated answer with its usage and cost, and is in the ledger.
func TestEveryRPCThroughEveryProviderFamily(t *testing.T) {
	t.Parallel()
	for _, prov := range []string{"anthropic", "openai", "gemini"} {
		t.Run(prov, func(t *testing.T) {
			t.Parallel()
			cases := rpcCases()
			var rs []fakellm.Response
			for _, c := range cases {
				rs = append(rs, answer(t, c.answer))
			}
			e := newAIEnv(t, scriptFor(prov, rs...), aiEnvOptions{provider: prov})
			for _, c := range cases {
				m, err := c.call(e.alice, e.ai)
				if err != nil {
					t.Fatalf("%s: %v", c.name, err)
				}
				c.check(t, m)
				u := usageOf(m)
				if u.GetProvider() != prov || u.GetModel() == "" || u.GetInputTokens() <= 0 || u.GetOutputTokens() <= 0 ||
					u.GetCostMicros() <= 0 || u.GetCalls() != 1 || u.GetLatency() == nil {
					t.Errorf("%s: usage %v", c.name, u)
				}
			}
			reqs := e.fake.Requests()
			if len(reqs) != len(cases) {
				t.Fatalf("fakellm got %d requests, want %d", len(reqs), len(cases))
			}
			recs, err := e.reg.ListUsageRecords(e.admin, &aiv1.ListUsageRecordsRequest{PageSize: 100})
			if err != nil {
				t.Fatal(err)
			}
			if len(recs.Records) != len(cases) {
				t.Fatalf("ledger has %d records, want %d", len(recs.Records), len(cases))
			}
			for _, r := range recs.Records {
				if r.UserId != "alice" || r.Outcome != aiv1.CallOutcome_CALL_OUTCOME_OK || r.Usage.GetProvider() != prov {
					t.Errorf("ledger record %v", r)
				}
			}
		})
	}
}

func usageOf(m proto.Message) *typev1.Usage {
	r := m.ProtoReflect()
	fd := r.Descriptor().Fields().ByName("usage")
	if fd == nil || !r.Has(fd) {
		return nil
	}
	return r.Get(fd).Message().Interface().(*typev1.Usage)
}

// jsonText marshals v for a scripted answer.
func jsonText(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
