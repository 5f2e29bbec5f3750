package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/client"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

// cliJSON runs the CLI with -o json and decodes what it printed into v; it fails the test
// on another exit code than 0 or output that does not decode.
func cliJSON(t *testing.T, cfg string, env []string, v any, args ...string) {
	t.Helper()
	out, errOut, code := cli(t, cfg, env, append(args, "-o", "json")...)
	if code != 0 {
		t.Fatalf("%v: exit %d\n%s", args, code, errOut)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("%v printed %q: %v", args, out, err)
	}
}

// lineWith is the first line of out that contains s.
func lineWith(out, s string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}

// The tasks graph as text with its blocked-by links, and tasks changed and deleted, from the
// command line.
func TestCLIOpsTasks(t *testing.T) {
	parallel(t)
	ctx, cancel := context.WithTimeout(context.Background(), liveness(time.Minute))
	defer cancel()
	cfg := t.TempDir()
	tok := []string{"THEFOLD_TOKEN=" + token}
	repo := agentRepo(t, fmt.Sprintf("cli-ops-%d", time.Now().UnixNano()))
	c := meshClient(t, client.Config{Token: token})
	var ids []string
	for _, title := range []string{"Write the store", "Add the API"} {
		resp, err := c.Tasks().CreateTask(ctx, &tasksv1.CreateTaskRequest{Repo: repo, Title: title})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, resp.Task.Id)
	}
	if _, err := c.Tasks().AddDependency(ctx, &tasksv1.AddDependencyRequest{TaskId: ids[1], BlockedById: ids[0]}); err != nil {
		t.Fatal(err)
	}

	out, errOut, code := cli(t, cfg, tok, "tasks", "graph", "--repo", repo)
	store, api := lineWith(out, ids[0]), lineWith(out, ids[1])
	if code != 0 || !strings.HasPrefix(store, "#1") || !strings.Contains(store, "● Write the store [backlog]") || strings.Contains(store, "blocked by") ||
		!strings.HasPrefix(api, "#2") || !strings.Contains(api, "○ Add the API [backlog]") || !strings.Contains(api, "← blocked by #1") {
		t.Fatalf("graph: exit %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("thefold tasks graph --repo %s\n%s", repo, out)
	var graph struct {
		Order []string `json:"order"`
		Ready []string `json:"ready"`
		Edges []struct {
			TaskID      string `json:"task_id"`
			BlockedByID string `json:"blocked_by_id"`
		} `json:"edges"`
	}
	cliJSON(t, cfg, tok, &graph, "tasks", "graph", "--repo", repo)
	if fmt.Sprint(graph.Order) != fmt.Sprint(ids) || fmt.Sprint(graph.Ready) != fmt.Sprint(ids[:1]) || len(graph.Edges) != 1 || graph.Edges[0].BlockedByID != ids[0] {
		t.Fatalf("graph as JSON: %+v", graph)
	}

	var task map[string]any
	cliJSON(t, cfg, tok, &task, "tasks", "update", ids[1], "--title", "Add the HTTP API", "--priority", "high", "--label", "api")
	if task["title"] != "Add the HTTP API" || task["priority"] != "PRIORITY_HIGH" || fmt.Sprint(task["labels"]) != "[api]" {
		t.Fatalf("update: %v", task)
	}
	if out, _, code = cli(t, cfg, tok, "tasks", "get", ids[1]); code != 0 || !strings.Contains(out, "Add the HTTP API") {
		t.Fatalf("after update: %d %q", code, out)
	}
	if out, errOut, code = cli(t, cfg, tok, "tasks", "delete", ids[1]); code != 0 || !strings.Contains(out, "deleted") {
		t.Fatalf("delete: %d %q %s", code, out, errOut)
	}
	for _, args := range [][]string{
		{"tasks", "get", ids[1]},
		{"tasks", "delete", ids[1]},
		{"tasks", "update", ids[1], "--title", "gone"},
	} {
		if _, errOut, code := cli(t, cfg, tok, args...); code != 4 {
			t.Errorf("%v: exit %d %s, want 4", args, code, errOut)
		}
	}
	if out, _, code = cli(t, cfg, tok, "tasks", "graph", "--repo", repo); code != 0 || strings.Contains(out, "blocked by") || !strings.Contains(out, "1 tasks, 1 ready") {
		t.Fatalf("graph after the delete: %d\n%s", code, out)
	}
}

// A job steered from the command line: started, its question answered, cancelled; then its
// audit trail and metrics; the models, the usage and the skills.
func TestCLIOpsJobsModelsUsageSkills(t *testing.T) {
	parallel(t)
	cfg := t.TempDir()
	tok := []string{"THEFOLD_TOKEN=" + token}
	repo := agentRepo(t, fmt.Sprintf("cli-ops-job-%d", time.Now().UnixNano()))
	var task, job map[string]any
	cliJSON(t, cfg, tok, &task, "tasks", "create", "--repo", repo, "--title", "Write package clarify [AGENT-CLARIFY]", "--description", "F returns a colour.")
	cliJSON(t, cfg, tok, &job, "jobs", "start", task["id"].(string))
	id := job["id"].(string)
	for deadline := time.Now().Add(liveness(2 * time.Minute)); job["status"] != "JOB_STATUS_WAITING_CLARIFICATION"; time.Sleep(200 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the job did not ask its question: %v", job)
		}
		cliJSON(t, cfg, tok, &job, "jobs", "get", id)
	}
	if out, errOut, code := cli(t, cfg, tok, "jobs", "answer", id, "use blue"); code != 0 || !strings.Contains(out, id) {
		t.Fatalf("answer: %d %q %s", code, out, errOut)
	}
	if out, errOut, code := cli(t, cfg, tok, "jobs", "cancel", id, "--reason", "the ops test is done"); code != 0 || !strings.Contains(out, "cancelled") {
		t.Fatalf("cancel: %d %q %s", code, out, errOut)
	}
	if out, _, code := cli(t, cfg, tok, "jobs", "get", id); code != 0 || !strings.Contains(lineWith(out, "status"), "cancelled") || !strings.Contains(out, "the ops test is done") {
		t.Fatalf("get after cancel: %d\n%s", code, out)
	}
	if _, errOut, code := cli(t, cfg, tok, "jobs", "cancel", id); code != 5 {
		t.Fatalf("cancelling a cancelled job: %d %s", code, errOut)
	}

	out, errOut, code := cli(t, cfg, tok, "jobs", "audit", id)
	if code != 0 || !strings.HasPrefix(out, "TIME") || !strings.Contains(out, "job_cancelled") {
		t.Fatalf("audit: %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("thefold jobs audit %s\n%s", id, out)
	var entries []map[string]any
	cliJSON(t, cfg, tok, &entries, "jobs", "audit", id)
	if len(entries) == 0 || entries[0]["job_id"] != id {
		t.Fatalf("audit as JSON: %v", entries)
	}
	out, errOut, code = cli(t, cfg, tok, "jobs", "metrics", id)
	if code != 0 || !strings.HasPrefix(out, "PHASE") || !strings.Contains(out, "confidence") || lineWith(out, "total") == "" {
		t.Fatalf("metrics: %d\n%s\n%s", code, out, errOut)
	}
	t.Logf("thefold jobs metrics %s\n%s", id, out)
	var metrics struct {
		Phases []map[string]any `json:"phases"`
	}
	cliJSON(t, cfg, tok, &metrics, "jobs", "metrics", id)
	if len(metrics.Phases) == 0 {
		t.Fatal("metrics as JSON: no phases")
	}

	var models []map[string]any
	cliJSON(t, cfg, tok, &models, "models", "list")
	if len(models) == 0 || models[0]["name"] == nil {
		t.Fatalf("models: %v", models)
	}
	if out, _, code = cli(t, cfg, tok, "models", "list"); code != 0 || !strings.HasPrefix(out, "ID") || !strings.Contains(out, "anthropic") {
		t.Fatalf("models table: %d\n%s", code, out)
	}
	t.Logf("thefold models list\n%s", out)
	var usage struct {
		Rows  []map[string]any `json:"rows"`
		Total map[string]any   `json:"total"`
	}
	cliJSON(t, cfg, tok, &usage, "usage", "--since", "24h", "--by", "day,model")
	if len(usage.Rows) == 0 || usage.Total == nil {
		t.Fatalf("usage: %+v", usage)
	}
	if out, _, code = cli(t, cfg, tok, "usage", "--job", id, "--by", "phase"); code != 0 || !strings.HasPrefix(out, "PHASE") || !strings.Contains(out, "confidence") {
		t.Fatalf("usage of the job: %d\n%s", code, out)
	}
	t.Logf("thefold usage --job %s --by phase\n%s", id, out)

	var skills []map[string]any
	cliJSON(t, cfg, tok, &skills, "skills", "list")
	if len(skills) == 0 {
		t.Fatal("no skills listed")
	}
	if out, _, code = cli(t, cfg, tok, "skills", "get", skills[0]["id"].(string)); code != 0 || !strings.Contains(out, skills[0]["name"].(string)) {
		t.Fatalf("skills get: %d\n%s", code, out)
	}

	const missing = "00000000-0000-4000-8000-000000000000"
	for _, args := range [][]string{
		{"jobs", "audit", missing},
		{"jobs", "metrics", missing},
		{"jobs", "pause", missing},
		{"jobs", "answer", missing, "blue"},
		{"skills", "get", missing},
	} {
		if _, errOut, code := cli(t, cfg, tok, args...); code != 4 {
			t.Errorf("%v: exit %d %s, want 4", args, code, errOut)
		}
	}
}
