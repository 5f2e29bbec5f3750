package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/fakellm"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// The acceptance probe of the ai service: with THEFOLD_AI_PROVIDER=anthropic pointed at
// fakellm, PlanTask and GenerateFile over gRPC return validated answers with usage and
// cost, and the ledger (REST, admin) shows them. fakellm replays the demo script.
func TestAIPlansAndGeneratesThroughTheAnthropicWireFormat(t *testing.T) {
	parallel(t)
	ctx, cancel := context.WithTimeout(authed(context.Background()), liveness(time.Minute))
	defer cancel()
	ai := aiv1.NewAIServiceClient(dial(t, "ai"))
	task := &aiv1.TaskSpec{Title: "Add a health endpoint", Description: "GET /healthz answers 200 ok."}
	jobID := fmt.Sprintf("e2e-job-%d", time.Now().UnixNano())
	attr := &aiv1.Attribution{JobId: jobID, Repo: "local/demo"}

	plan, err := ai.PlanTask(ctx, &aiv1.PlanTaskRequest{Task: task, ProjectTree: []string{"go.mod", "main.go"}, Attribution: attr})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Plan.GetSteps()) != 3 || plan.Plan.Steps[0].Path != "health.go" || plan.Plan.Steps[2].Command[0] != "go" {
		t.Fatalf("plan %v", plan.Plan)
	}
	gen, err := ai.GenerateFile(ctx, &aiv1.GenerateFileRequest{Task: task, Attribution: attr,
		File: &aiv1.FileSpec{Path: "health.go", Action: typev1.FileAction_FILE_ACTION_CREATE, Description: plan.Plan.Steps[0].Description}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(gen.Content, "func healthz") || gen.Change.GetAction() != typev1.FileAction_FILE_ACTION_CREATE {
		t.Fatalf("generated %v", gen)
	}
	for name, u := range map[string]*typev1.Usage{"PlanTask": plan.Usage, "GenerateFile": gen.Usage} {
		if u.GetProvider() != "anthropic" || u.GetModel() == "" || u.GetInputTokens() == 0 || u.GetOutputTokens() == 0 || u.GetCostMicros() == 0 {
			t.Errorf("%s usage %v", name, u)
		}
	}

	// The ledger, over REST through the gateway.
	code, body := rest(t, "GET", "/v1/ai/usage/records?job_id="+jobID, token, nil)
	if code != http.StatusOK {
		t.Fatalf("ledger: %d %v", code, body)
	}
	recs, _ := body["records"].([]any)
	var rpcs []string
	for _, r := range recs {
		rpcs = append(rpcs, r.(map[string]any)["rpc"].(string))
	}
	if strings.Join(rpcs, ",") != "GenerateFile,PlanTask" {
		t.Fatalf("ledger rpcs %v (newest first), body %v", rpcs, body)
	}
	code, body = rest(t, "GET", "/v1/ai/usage?job_id="+jobID+"&group_by=USAGE_GROUP_BY_RPC", token, nil)
	if code != http.StatusOK {
		t.Fatalf("usage: %d %v", code, body)
	}
	total, _ := body["total"].(map[string]any)
	if total["calls"] != "2" {
		t.Fatalf("usage total %v", body)
	}
}

// Embed with the local embedder needs no provider and no network.
func TestEmbedLocal(t *testing.T) {
	alone(t)
	ctx, cancel := context.WithTimeout(authed(context.Background()), liveness(30*time.Second))
	defer cancel()
	ai := aiv1.NewAIServiceClient(dial(t, "ai"))
	before := len(llm.Requests())
	resp, err := ai.Embed(ctx, &aiv1.EmbedRequest{Texts: []string{"retry the request", "retryRequest"}, Model: "local"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model != "local@2" || resp.Dimensions != 384 || len(resp.Embeddings) != 2 {
		t.Fatalf("embed %s %d %d", resp.Model, resp.Dimensions, len(resp.Embeddings))
	}
	if after := len(llm.Requests()); after != before {
		t.Fatalf("the local embedder called fakellm")
	}
}

// tasks.PlanTaskOrder is the mesh's first cross-service call: tasks asks ai, ai asks the
// model, tasks stores the order.
func TestTasksPlanTaskOrderThroughAI(t *testing.T) {
	alone(t)
	ctx, cancel := context.WithTimeout(authed(context.Background()), liveness(time.Minute))
	defer cancel()
	tasks := tasksv1.NewTaskServiceClient(dial(t, "tasks"))
	repo := fmt.Sprintf("e2e/order-%d", time.Now().UnixNano())
	base, err := tasks.CreateTask(ctx, &tasksv1.CreateTaskRequest{Title: "data model", Repo: repo})
	if err != nil {
		t.Fatal(err)
	}
	api, err := tasks.CreateTask(ctx, &tasksv1.CreateTaskRequest{Title: "REST API", Repo: repo, BlockedBy: []string{base.Task.Id}})
	if err != nil {
		t.Fatal(err)
	}
	order := map[string]any{"reasoning": "the model first", "tasks": []map[string]any{
		{"task_id": base.Task.Id, "complexity": 3, "estimated_tokens": 20000, "reasoning": "nothing depends on"},
		{"task_id": api.Task.Id, "complexity": 5, "estimated_tokens": 40000, "reasoning": "needs the model"},
	}}
	b, _ := json.Marshal(order)
	llm.SetScript(&fakellm.Script{Anthropic: []fakellm.Response{{Match: api.Task.Id, Text: string(b)}}})
	defer llm.SetScript(script) // the suite's own script, build entries included
	code, body := rest(t, "POST", "/v1/tasks:planOrder", token, map[string]any{"repo": repo})
	if code != http.StatusOK {
		t.Fatalf("plan-order: %d %v", code, body)
	}
	got, err := tasks.GetTask(ctx, &tasksv1.GetTaskRequest{Id: api.Task.Id})
	if err != nil {
		t.Fatal(err)
	}
	if got.Task.PlannedOrder != 2 || got.Task.Complexity != 5 {
		t.Fatalf("stored order %d complexity %d", got.Task.PlannedOrder, got.Task.Complexity)
	}
}
