package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/fakellm"
)

// subAgentLatency is every sub-agent call's scripted latency: the ruler the test measures
// the team's concurrency with.
const subAgentLatency = 1500 * time.Millisecond

// subAgentsScript answers the sub-agents test's tasks: complexity 8 (planner, then
// implementer, tester and reviewer), each role slow by subAgentLatency, the tester failing;
// then the plan and the file.
func subAgentsScript() []fakellm.Response {
	const marker = "[SUBAGENTS]"
	role := func(name string) string { return both("Sub-agent role: "+name, regexp.QuoteMeta(marker)) }
	answer := func(v any) string {
		b, _ := json.Marshal(v)
		return string(b)
	}
	lat := fakellm.Duration(subAgentLatency)
	return []fakellm.Response{
		{Match: both("# Job: assess complexity", regexp.QuoteMeta(marker)), Text: `{"complexity": 8, "tier": 4, "tags": ["coding"], "budget_mode": "balanced", "estimated_tokens": 20000, "reasoning": "several parts"}`},
		{Match: role("planner"), Latency: lat, Text: answer(map[string]any{"steps": []string{"PLANNER-SAYS: write subagents/f.go"}, "interfaces": []string{"func F() int"}, "risks": []string{}})},
		{Match: role("implementer"), Latency: lat, Text: answer(map[string]any{"per_file_guidance": []map[string]any{{"path": "subagents/f.go", "guidance": "IMPLEMENTER-SAYS: return one"}}, "pitfalls": []string{}})},
		{Match: role("reviewer"), Latency: lat, Text: answer(map[string]any{"checks": []string{"REVIEWER-SAYS: a doc comment"}, "concerns": []string{}})},
		// The tester's model refuses the request: its output is left out.
		{Match: role("tester"), Latency: lat, Error: &fakellm.Error{Status: 400, Message: "scripted: the tester's request is refused"}},
		{Match: planMatch(marker), Text: planAnswer("Write subagents/f.go.", "subagents/f.go")},
		{Match: genMatch("subagents/f.go"), Text: content(fmt.Sprintf(goodGo, "subagents"))},
	}
}

// TestSubAgentsEnrichTheBuild: a person who turned sub-agents on starts a complexity-8
// task: the planner runs, then implementer, tester and reviewer at once on its output; the
// tester fails and is left out with a note, the job still reaches review, and the merged
// analysis is in the build's GenerateFile request. With the preference off, no sub-agent
// call is made.
func TestSubAgentsEnrichTheBuild(t *testing.T) {
	parallel(t)
	priv, err := auth.LoadPrivateKey(filepath.Join(mesh.KeyDir(), auth.PrivateKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	user := fmt.Sprintf("subagents-%d", time.Now().UnixNano())
	tok, _, err := auth.NewSigner(priv).Issue(user, []string{auth.RoleUser}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	repo := agentRepo(t, "subagents-"+user)
	if code, body := rest(t, http.MethodPut, "/v1/repos/"+repo+"/collaborators/"+user, token, map[string]any{"role": "REPO_ROLE_WRITE"}); code != http.StatusOK {
		t.Fatalf("collaborator: %d %v", code, body)
	}
	setSubAgents := func(on bool) {
		t.Helper()
		if code, body := rest(t, http.MethodPatch, "/v1/preferences?update_mask=sub_agents_enabled", tok, map[string]any{"sub_agents_enabled": on}); code != http.StatusOK {
			t.Fatalf("preferences: %d %v", code, body)
		}
	}
	start := func(title string) string {
		t.Helper()
		code, task := rest(t, http.MethodPost, "/v1/tasks", tok, map[string]any{"title": title, "repo": repo, "description": "F returns one."})
		if code != http.StatusOK {
			t.Fatalf("create task: %d %v", code, task)
		}
		code, job := rest(t, http.MethodPost, "/v1/jobs", tok, map[string]any{"task_id": task["task"].(map[string]any)["id"]})
		if code != http.StatusOK {
			t.Fatalf("start job: %d %v", code, job)
		}
		return job["job"].(map[string]any)["id"].(string)
	}
	wait := func(id string) map[string]any {
		t.Helper()
		deadline := time.Now().Add(liveness(4 * time.Minute))
		for {
			code, got := rest(t, http.MethodGet, "/v1/jobs/"+id, tok, nil)
			if code != http.StatusOK {
				t.Fatalf("get job: %d %v", code, got)
			}
			job := got["job"].(map[string]any)
			switch job["status"] {
			case "JOB_STATUS_PENDING_REVIEW":
				return job
			case "JOB_STATUS_FAILED", "JOB_STATUS_HUMAN_NEEDED", "JOB_STATUS_CANCELLED":
				t.Fatalf("job %s is %v: %v %v", id, job["status"], job["status_reason"], job["error"])
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s still %v in %v", id, job["status"], job["phase"])
			}
			time.Sleep(200 * time.Millisecond)
		}
	}

	setSubAgents(true)
	title := "Write package subagents " + user + " [SUBAGENTS]"
	job := wait(start(title))
	sa, _ := job["sub_agents"].(map[string]any)
	roles, _ := sa["roles"].([]any)
	outcome := map[string]string{}
	for _, r := range roles {
		m := r.(map[string]any)
		e, _ := m["error"].(string)
		outcome[m["role"].(string)] = e
	}
	if len(outcome) != 4 || outcome["SUB_AGENT_ROLE_TESTER"] == "" || outcome["SUB_AGENT_ROLE_PLANNER"] != "" ||
		outcome["SUB_AGENT_ROLE_IMPLEMENTER"] != "" || outcome["SUB_AGENT_ROLE_REVIEWER"] != "" {
		t.Fatalf("the job's sub-agents: %v", sa)
	}
	if prefs, _ := job["preferences"].(map[string]any); prefs["sub_agents_enabled"] != true {
		t.Errorf("the job's preferences: %v", job["preferences"])
	}

	// The calls as the model saw them: the planner first; the three others at once, each
	// after the planner answered and each given its output.
	starts := map[string]time.Time{}
	var gens []string
	for _, r := range llm.Requests() {
		b := r.Text()
		if !strings.Contains(b, user) {
			continue
		}
		for _, name := range []string{"planner", "implementer", "tester", "reviewer"} {
			if strings.Contains(b, "Sub-agent role: "+name) {
				starts[name] = r.Time
				if name != "planner" && !strings.Contains(b, "PLANNER-SAYS") {
					t.Errorf("the %s was not given the planner's output", name)
				}
			}
		}
		if regexp.MustCompile(genMatch("subagents/f.go")).MatchString(b) {
			gens = append(gens, b)
		}
	}
	if len(starts) != 4 {
		t.Fatalf("sub-agent calls seen: %v", starts)
	}
	var second []time.Time
	for _, n := range []string{"implementer", "tester", "reviewer"} {
		if starts[n].Sub(starts["planner"]) < subAgentLatency {
			t.Errorf("the %s started %s after the planner, before its answer", n, starts[n].Sub(starts["planner"]))
		}
		second = append(second, starts[n])
	}
	first, last := slices.MinFunc(second, time.Time.Compare), slices.MaxFunc(second, time.Time.Compare)
	if spread := last.Sub(first); spread >= subAgentLatency {
		t.Errorf("the three dependents started %s apart: one after another, not at once", spread)
	}
	t.Logf("sub-agent phase: planner at 0, the three others from %s to %s (each call %s)",
		first.Sub(starts["planner"]).Round(time.Millisecond), last.Sub(starts["planner"]).Round(time.Millisecond), subAgentLatency)
	if len(gens) == 0 || !strings.Contains(gens[0], "IMPLEMENTER-SAYS") || !strings.Contains(gens[0], "REVIEWER-SAYS") ||
		!strings.Contains(gens[0], `<data kind="sub-agents">`) {
		t.Fatalf("the build's GenerateFile does not carry the merged analysis (%d requests)", len(gens))
	}
	if !anyThought(t, tok, job["id"].(string), "sub-agent tester left out") {
		t.Error("no note in the job's events that the tester was left out")
	}
	// Their cost is the job's, in a phase of its own.
	code, metrics := rest(t, http.MethodGet, "/v1/jobs/"+job["id"].(string)+"/metrics", tok, nil)
	var saPhase map[string]any
	for _, p := range metrics["phases"].([]any) {
		if m := p.(map[string]any); m["phase"] == "JOB_PHASE_SUB_AGENTS" {
			saPhase = m
		}
	}
	if code != http.StatusOK || saPhase == nil || saPhase["usage"].(map[string]any)["cost_micros"] == nil {
		t.Fatalf("metrics: %d, the sub_agents phase %v", code, saPhase)
	}
	t.Logf("the sub_agents phase took %v: two rounds of calls of %s (the planner, then three at once), not four", saPhase["duration"], subAgentLatency)
	// The estimate before anything runs, over REST; a complexity out of range is refused.
	code, est := rest(t, http.MethodGet, "/v1/ai/sub-agents/cost:estimate?complexity=8&budget_mode=BUDGET_MODE_BALANCED", tok, nil)
	if team, _ := est["team"].([]any); code != http.StatusOK || len(team) != 4 || est["max_cost_micros"] == nil {
		t.Errorf("estimate: %d %v", code, est)
	}
	if code, body := rest(t, http.MethodGet, "/v1/ai/sub-agents/cost:estimate?complexity=11", tok, nil); code != http.StatusBadRequest ||
		!strings.Contains(fmt.Sprint(body["field_violations"]), "complexity") {
		t.Errorf("estimate of complexity 11: %d %v", code, body)
	}

	// Off: the same kind of task makes no sub-agent call (once the first job, which holds
	// the repository, is decided).
	if code, body := rest(t, http.MethodPost, "/v1/reviews/"+job["review_id"].(string)+":reject", tok, map[string]any{"reason": "measured, not merged"}); code != http.StatusOK {
		t.Fatalf("reject: %d %v", code, body)
	}
	setSubAgents(false)
	before := len(llm.Requests())
	off := wait(start("Write package subagents " + user + " again [SUBAGENTS]"))
	if off["sub_agents"] != nil {
		t.Errorf("with sub-agents off the job has %v", off["sub_agents"])
	}
	for _, r := range llm.Requests()[before:] {
		if b := r.Text(); strings.Contains(b, user) && strings.Contains(b, "Sub-agent role:") {
			t.Fatal("a sub-agent call with the preference off")
		}
	}
}

// anyThought reports whether one of job id's thought events contains sub (REST audit of
// its events through the watch's history).
func anyThought(t *testing.T, tok, id, sub string) bool {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, mesh.GatewayURL()+"/v1/jobs/"+id+":watch", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Accept", "text/event-stream")
	client := &http.Client{Timeout: 5 * time.Second}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	buf := make([]byte, 1<<20)
	var seen strings.Builder
	for !strings.Contains(seen.String(), `"JOB_STATUS_PENDING_REVIEW"`) {
		n, err := resp.Body.Read(buf)
		seen.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return strings.Contains(seen.String(), sub)
}
