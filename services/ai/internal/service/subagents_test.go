package service

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/thefold/thefold/pkg/fakellm"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	"github.com/thefold/thefold/pkg/tokens"

	"github.com/thefold/thefold/services/ai/internal/engine"
	"github.com/thefold/thefold/services/ai/internal/prompts"
)

// roleAnswers are valid answers of each role, each with a marker its output keeps.
var roleAnswers = map[string]any{
	"planner": map[string]any{"steps": []string{"Add the health handler PLAN-MARKER", "Register the route"},
		"interfaces": []string{"func Health(w http.ResponseWriter, r *http.Request)"}, "risks": []string{}},
	"implementer": map[string]any{"per_file_guidance": []map[string]any{{"path": "health.go", "guidance": "IMPL-MARKER: answer 200 ok."}},
		"pitfalls": []string{"HEAD must work too"}},
	"tester": map[string]any{"test_cases": []map[string]any{{"name": "ok", "checks": "TEST-MARKER: GET /healthz is 200"}},
		"edge_cases": []string{"POST is 405"}, "how_to_run": "go test ./..."},
	"reviewer":   map[string]any{"checks": []string{"REVIEW-MARKER: the route is registered"}, "concerns": []string{}},
	"documenter": map[string]any{"docs": []map[string]any{{"path": "README.md", "content_outline": "DOC-MARKER: the endpoint"}}},
	"researcher": map[string]any{"findings": []string{"RESEARCH-MARKER: main.go has the mux"}, "relevant_paths": []string{"main.go"}},
}

const mergeMatch = "# Job: merge the sub-agents' analyses"

// subAgentScript answers every role (recognised by its system text) and the merge; over
// replaces a role's (or "merge") answer.
func subAgentScript(t *testing.T, over map[string]fakellm.Response) *fakellm.Script {
	t.Helper()
	var rs []fakellm.Response
	for name, a := range roleAnswers {
		r, ok := over[name]
		if !ok {
			r = answer(t, a)
		}
		r.Match = "Sub-agent role: " + name
		rs = append(rs, r)
	}
	m, ok := over["merge"]
	if !ok {
		m = fakellm.Response{Text: "## Merged\n\nMERGE-MARKER"}
	}
	m.Match = mergeMatch
	return &fakellm.Script{Anthropic: append(rs, m)}
}

func subAgentsReq(complexity int32) *aiv1.RunSubAgentsRequest {
	return &aiv1.RunSubAgentsRequest{Task: testTask, Complexity: complexity, ProjectTree: []string{"main.go"},
		ContextFiles: []*aiv1.ContextFile{{Path: "main.go", Content: "package main\n"}},
		Attribution:  &aiv1.Attribution{JobId: "job-1", TaskId: "task-1"}}
}

// roleOf is the role a recorded request was for, from its system text.
func roleOf(r fakellm.Recorded) string {
	body := r.Text()
	if strings.Contains(body, "# Job: merge the sub-agents") {
		return "merge"
	}
	for name := range roleAnswers {
		if strings.Contains(body, "Sub-agent role: "+name) {
			return name
		}
	}
	return ""
}

func roleNames(rs []*aiv1.SubAgentResult) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = prompts.SubAgentName(r.Role)
	}
	return out
}

// modelIDs maps the seeded models' names to their registry ids.
func modelIDs(t *testing.T, e *aiEnv) map[string]*aiv1.Model {
	t.Helper()
	resp, err := e.reg.ListModels(e.admin, &aiv1.ListModelsRequest{PageSize: 200})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*aiv1.Model{}
	for _, m := range resp.Models {
		out[m.Name] = m
	}
	return out
}

// Complexity 10, balanced: the whole team in its order, each role on its tier's model
// (only anthropic is usable: tier 3 is claude-sonnet-4-5, tier 2 claude-haiku-4-5), each
// call filed under CALL_PHASE_SUB_AGENTS with its role and the caller's attribution.
func TestRunSubAgentsTeam(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, subAgentScript(t, nil), aiEnvOptions{provider: "anthropic"})
	resp, err := e.ai.RunSubAgents(e.alice, subAgentsReq(10))
	if err != nil {
		t.Fatal(err)
	}
	models := modelIDs(t, e)
	sonnet, haiku := models["claude-sonnet-4-5"].GetId(), models["claude-haiku-4-5"].GetId()
	want := []struct {
		name  string
		model string
		deps  []string
	}{
		{"researcher", haiku, nil}, {"planner", sonnet, nil},
		{"implementer", sonnet, []string{"researcher", "planner"}}, {"tester", haiku, []string{"researcher", "planner"}},
		{"reviewer", sonnet, []string{"researcher", "planner"}}, {"documenter", haiku, []string{"researcher", "planner"}},
	}
	if len(resp.Results) != len(want) {
		t.Fatalf("results %v", roleNames(resp.Results))
	}
	var sum int64
	for i, w := range want {
		r := resp.Results[i]
		var deps []string
		for _, d := range r.DependsOn {
			deps = append(deps, prompts.SubAgentName(d))
		}
		if prompts.SubAgentName(r.Role) != w.name || r.Model != w.model || !slices.Equal(deps, w.deps) || r.Error != "" ||
			r.Output == "" || r.Usage.GetCalls() != 1 || r.StartTime == nil || r.EndTime == nil {
			t.Errorf("result %d: %v, want %s on %s after %v", i, r, w.name, w.model, w.deps)
		}
		sum += r.Usage.GetCostMicros()
	}
	if resp.Merge != aiv1.MergeStrategy_MERGE_STRATEGY_CONCATENATE || resp.Usage.GetCalls() != 6 || resp.Usage.GetCostMicros() != sum || sum == 0 {
		t.Errorf("merge %v usage %v (sum of the roles %d)", resp.Merge, resp.Usage, sum)
	}
	for _, r := range e.fake.Requests() {
		wantModel := "claude-haiku-4-5"
		if n := roleOf(r); n == "planner" || n == "implementer" || n == "reviewer" {
			wantModel = "claude-sonnet-4-5"
		}
		if r.Model != wantModel {
			t.Errorf("%s ran on %s, want %s", roleOf(r), r.Model, wantModel)
		}
	}
	// The ledger: one entry per role, its role and the phase, the caller's attribution kept.
	recs, err := e.reg.ListUsageRecords(e.admin, &aiv1.ListUsageRecordsRequest{PageSize: 100})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range recs.Records {
		if r.Phase != aiv1.CallPhase_CALL_PHASE_SUB_AGENTS || r.Rpc != "RunSubAgents" || r.JobId != "job-1" || r.TaskId != "task-1" ||
			r.Outcome != aiv1.CallOutcome_CALL_OUTCOME_OK {
			t.Errorf("ledger entry %v", r)
		}
		got = append(got, prompts.SubAgentName(r.Role))
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"documenter", "implementer", "planner", "researcher", "reviewer", "tester"}) {
		t.Errorf("ledger roles %v", got)
	}
	// GetUsage groups by role.
	usage, err := e.reg.GetUsage(e.admin, &aiv1.GetUsageRequest{GroupBy: []aiv1.UsageGroupBy{aiv1.UsageGroupBy_USAGE_GROUP_BY_ROLE},
		Phase: aiv1.CallPhase_CALL_PHASE_SUB_AGENTS})
	if err != nil {
		t.Fatal(err)
	}
	if len(usage.Rows) != 6 || usage.Total.GetCostMicros() != sum {
		t.Fatalf("usage by role %v", usage)
	}
	for i, row := range usage.Rows {
		if int(row.Role) != i+1 || row.Calls != 1 || row.CostMicros != resp.Results[slices.IndexFunc(resp.Results, func(r *aiv1.SubAgentResult) bool { return r.Role == row.Role })].Usage.GetCostMicros() {
			t.Errorf("usage row %d: %v", i, row)
		}
	}
}

// Aggressive save puts every role on tier 1; anthropic has none, so the nearest, tier 2.
// Quality first: tier 5 (claude-opus-4-5) and 4 (claude-sonnet-4-6).
func TestRunSubAgentsBudgetModes(t *testing.T) {
	t.Parallel()
	for mode, want := range map[aiv1.BudgetMode]map[string]string{
		aiv1.BudgetMode_BUDGET_MODE_AGGRESSIVE_SAVE: {"implementer": "claude-haiku-4-5", "tester": "claude-haiku-4-5"},
		aiv1.BudgetMode_BUDGET_MODE_QUALITY_FIRST:   {"implementer": "claude-opus-4-5", "tester": "claude-sonnet-4-6"},
	} {
		e := newAIEnv(t, subAgentScript(t, nil), aiEnvOptions{provider: "anthropic"})
		req := subAgentsReq(6)
		req.BudgetMode = mode
		if _, err := e.ai.RunSubAgents(e.alice, req); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, r := range e.fake.Requests() {
			got[roleOf(r)] = r.Model
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%v: models %v, want %v", mode, got, want)
		}
	}
}

// The planner runs first and its output reaches the prompts of the roles that depend on
// it; those run at once (each answer takes 400ms: one after another they would take 1.2s).
func TestRunSubAgentsDependencies(t *testing.T) {
	t.Parallel()
	const delay = 400 * time.Millisecond
	over := map[string]fakellm.Response{}
	for _, name := range []string{"implementer", "tester", "reviewer"} {
		r := answer(t, roleAnswers[name])
		r.Latency = fakellm.Duration(delay)
		over[name] = r
	}
	e := newAIEnv(t, subAgentScript(t, over), aiEnvOptions{provider: "anthropic"})
	resp, err := e.ai.RunSubAgents(e.alice, subAgentsReq(8))
	if err != nil {
		t.Fatal(err)
	}
	if got := roleNames(resp.Results); !slices.Equal(got, []string{"planner", "implementer", "tester", "reviewer"}) {
		t.Fatalf("results %v", got)
	}
	planner := resp.Results[0]
	dependents := resp.Results[1:]
	first, last := dependents[0].StartTime.AsTime(), dependents[0].EndTime.AsTime()
	for _, r := range dependents {
		if r.StartTime.AsTime().Before(planner.EndTime.AsTime()) {
			t.Errorf("%v started before the planner ended", r.Role)
		}
		if r.StartTime.AsTime().Before(first) {
			first = r.StartTime.AsTime()
		}
		if r.EndTime.AsTime().After(last) {
			last = r.EndTime.AsTime()
		}
		for _, o := range dependents {
			if !r.StartTime.AsTime().Before(o.EndTime.AsTime()) {
				t.Errorf("%v started after %v ended: they did not overlap", r.Role, o.Role)
			}
		}
	}
	// One after another they take at least 3×delay; at once, about one delay (a loaded CI
	// machine stretched it to 2.2×). The pairwise overlap above is the exact check.
	if wall := last.Sub(first); wall >= 3*delay {
		t.Errorf("the three dependents took %v together, %v each: not concurrent", wall, delay)
	}
	for _, r := range e.fake.Requests() {
		has := strings.Contains(r.Text(), "PLAN-MARKER")
		if name := roleOf(r); has != (name != "planner") {
			t.Errorf("%s's prompt has the planner's output: %v", name, has)
		}
		if name := roleOf(r); name != "planner" && !strings.Contains(r.Text(), `<data kind="sub-agent-output" role="planner">`) {
			t.Errorf("%s's prompt does not fence the planner's output", name)
		}
	}
}

// CONCATENATE: each role's output under its header, in the team's order.
func TestRunSubAgentsConcatenate(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, subAgentScript(t, nil), aiEnvOptions{provider: "anthropic"})
	resp, err := e.ai.RunSubAgents(e.alice, subAgentsReq(6))
	if err != nil {
		t.Fatal(err)
	}
	want := "## Implementer\n\n" + resp.Results[0].Output + "\n\n## Tester\n\n" + resp.Results[1].Output
	if resp.MergedContext != want || resp.Merge != aiv1.MergeStrategy_MERGE_STRATEGY_CONCATENATE {
		t.Fatalf("merged %v:\n%s\nwant:\n%s", resp.Merge, resp.MergedContext, want)
	}
	for _, m := range []string{"IMPL-MARKER", "TEST-MARKER", "### Test cases", "`go test ./...`"} {
		if !strings.Contains(resp.MergedContext, m) {
			t.Errorf("merged context lacks %q", m)
		}
	}
	// A small cap cuts the end, with a note.
	req := subAgentsReq(6)
	req.MaxContextTokens = minContextTokens
	long := map[string]any{"test_cases": []map[string]any{}, "edge_cases": []string{}}
	for i := range 30 {
		long["test_cases"] = append(long["test_cases"].([]map[string]any), map[string]any{"name": fmt.Sprint("case ", i), "checks": strings.Repeat("checks a long detail of the endpoint ", 12)})
	}
	e = newAIEnv(t, subAgentScript(t, map[string]fakellm.Response{"tester": answer(t, long)}), aiEnvOptions{provider: "anthropic"})
	resp, err = e.ai.RunSubAgents(e.alice, req)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(resp.MergedContext, "## Implementer\n\n") || !strings.HasSuffix(resp.MergedContext, "capped at 500 tokens (max_context_tokens)]") ||
		tokens.Count(resp.MergedContext) > minContextTokens {
		t.Errorf("capped context (%d bytes):\n%s", len(resp.MergedContext), resp.MergedContext)
	}
}

// AI_MERGE: one more call, on a tier-2 model, filed under the phase with no role.
func TestRunSubAgentsAIMerge(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, subAgentScript(t, nil), aiEnvOptions{provider: "anthropic"})
	req := subAgentsReq(6)
	req.Merge = aiv1.MergeStrategy_MERGE_STRATEGY_AI_MERGE
	resp, err := e.ai.RunSubAgents(e.alice, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Merge != aiv1.MergeStrategy_MERGE_STRATEGY_AI_MERGE || resp.MergedContext != "## Merged\n\nMERGE-MARKER" || resp.Usage.GetCalls() != 3 {
		t.Fatalf("merge %v usage %v: %s", resp.Merge, resp.Usage, resp.MergedContext)
	}
	var merge *fakellm.Recorded
	for _, r := range e.fake.Requests() {
		if roleOf(r) == "merge" {
			merge = &r
		}
	}
	if merge == nil || merge.Model != "claude-haiku-4-5" || !strings.Contains(merge.Text(), "IMPL-MARKER") || !strings.Contains(merge.Text(), "TEST-MARKER") {
		t.Fatalf("merge request %v", merge)
	}
	recs, err := e.reg.ListUsageRecords(e.admin, &aiv1.ListUsageRecordsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if len(recs.Records) != 3 || recs.Records[0].Role != aiv1.SubAgentRole_SUB_AGENT_ROLE_UNSPECIFIED ||
		recs.Records[0].Phase != aiv1.CallPhase_CALL_PHASE_SUB_AGENTS || recs.Records[0].Usage.GetModel() != "claude-haiku-4-5" {
		t.Errorf("ledger %v", recs.Records)
	}
}

// A merge call that fails leaves the roles' work concatenated, and says so.
func TestRunSubAgentsAIMergeFallsBack(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, subAgentScript(t, map[string]fakellm.Response{"merge": {Error: &fakellm.Error{Status: 500}}}), aiEnvOptions{provider: "anthropic"})
	req := subAgentsReq(6)
	req.Merge = aiv1.MergeStrategy_MERGE_STRATEGY_AI_MERGE
	resp, err := e.ai.RunSubAgents(e.alice, req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Merge != aiv1.MergeStrategy_MERGE_STRATEGY_CONCATENATE || !strings.HasPrefix(resp.MergedContext, "## Implementer\n\n") ||
		strings.Contains(resp.MergedContext, "MERGE-MARKER") {
		t.Fatalf("merge %v: %s", resp.Merge, resp.MergedContext)
	}
	merges := 0
	for _, r := range e.fake.Requests() {
		if roleOf(r) == "merge" {
			merges++
		}
	}
	if merges == 0 {
		t.Error("the merge was not tried")
	}
}

// A role that fails is left out with its error; the others' work is returned.
func TestRunSubAgentsFailingRole(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, subAgentScript(t, map[string]fakellm.Response{"tester": {Text: "no JSON, sorry"}}), aiEnvOptions{provider: "anthropic"})
	resp, err := e.ai.RunSubAgents(e.alice, subAgentsReq(6))
	if err != nil {
		t.Fatal(err)
	}
	impl, tester := resp.Results[0], resp.Results[1]
	if impl.Error != "" || impl.Output == "" || tester.Output != "" || !strings.Contains(tester.Error, "cannot be used") ||
		tester.Model != modelIDs(t, e)["claude-haiku-4-5"].GetId() {
		t.Fatalf("results %v", resp.Results)
	}
	if !strings.HasPrefix(resp.MergedContext, "## Implementer") || strings.Contains(resp.MergedContext, "Tester") {
		t.Errorf("merged: %s", resp.MergedContext)
	}
	// What the tester's unusable answers cost (the answer and its repair rounds, billed by
	// the provider) is the team's all the same.
	if u := tester.GetUsage(); u.GetCalls() < 1 || u.GetOutputTokens() == 0 || u.GetCostMicros() == 0 {
		t.Errorf("the failed tester's usage %v: want what the ledger recorded", u)
	}
	if resp.Usage.GetCalls() != impl.GetUsage().GetCalls()+tester.GetUsage().GetCalls() ||
		resp.Usage.GetCostMicros() != impl.GetUsage().GetCostMicros()+tester.GetUsage().GetCostMicros() {
		t.Errorf("the team's usage %v is not the implementer's %v plus the tester's %v", resp.Usage, impl.Usage, tester.Usage)
	}
	// The tester's dependents (at complexity 8, the planner's) run without a failed
	// dependency's output, and are told so.
	e = newAIEnv(t, subAgentScript(t, map[string]fakellm.Response{"planner": {Error: &fakellm.Error{Status: 400}}}), aiEnvOptions{provider: "anthropic"})
	resp, err = e.ai.RunSubAgents(e.alice, subAgentsReq(8))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Results[0].Error == "" || len(resp.Results[1].DependsOn) != 0 || resp.Results[1].Output == "" {
		t.Fatalf("results %v", resp.Results)
	}
	for _, r := range e.fake.Requests() {
		if roleOf(r) == "implementer" && !strings.Contains(r.Text(), "It failed, so its output is missing") {
			t.Error("the implementer was not told the planner failed")
		}
	}
}

// When every role fails the call fails, with the most telling error: a refused key (what
// the caller must fix) before a model's unusable answer.
func TestRunSubAgentsEveryRoleFails(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, subAgentScript(t, map[string]fakellm.Response{
		"implementer": {Text: "no JSON"}, "tester": {Error: &fakellm.Error{Status: 401}},
	}), aiEnvOptions{provider: "anthropic"})
	_, err := e.ai.RunSubAgents(e.alice, subAgentsReq(6))
	st := wantCode(t, err, codes.FailedPrecondition, "every sub-agent failed (implementer, tester); the tester: provider anthropic refused the API key")
	if reason(st) != engine.ReasonProviderAuth {
		t.Errorf("reason %q", reason(st))
	}
	e = newAIEnv(t, subAgentScript(t, map[string]fakellm.Response{"implementer": {Text: "no JSON"}, "tester": {Text: "no JSON"}}), aiEnvOptions{provider: "anthropic"})
	_, err = e.ai.RunSubAgents(e.alice, subAgentsReq(6))
	st = wantCode(t, err, codes.Unavailable, "every sub-agent failed")
	if reason(st) != engine.ReasonModelOutputInvalid {
		t.Errorf("reason %q", reason(st))
	}
}

// A retry with the request_id returns the recorded answer, billed once; a run that failed
// as a whole runs again.
func TestRunSubAgentsIdempotent(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, subAgentScript(t, nil), aiEnvOptions{provider: "anthropic"})
	req := subAgentsReq(8)
	req.RequestId = "team-1"
	req.Merge = aiv1.MergeStrategy_MERGE_STRATEGY_AI_MERGE
	first, err := e.ai.RunSubAgents(e.alice, req)
	if err != nil {
		t.Fatal(err)
	}
	again, err := e.ai.RunSubAgents(e.alice, req)
	if err != nil {
		t.Fatal(err)
	}
	if again.MergedContext != first.MergedContext || again.Usage.GetCostMicros() != first.Usage.GetCostMicros() || len(again.Results) != 4 {
		t.Errorf("retry answered %v, first %v", again, first)
	}
	if n := len(e.fake.Requests()); n != 5 {
		t.Errorf("the models were called %d times, want 5 (4 roles and the merge)", n)
	}
	usage, err := e.reg.GetUsage(e.admin, &aiv1.GetUsageRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if usage.Total.GetCalls() != 5 || usage.Total.GetCostMicros() != first.Usage.GetCostMicros() {
		t.Errorf("ledger %v, the first answer's usage %v", usage.Total, first.Usage)
	}
	other := subAgentsReq(9)
	other.RequestId = "team-1"
	_, err = e.ai.RunSubAgents(e.alice, other)
	wantCode(t, err, codes.InvalidArgument, "request_id")

	// Every role failed: nothing is recorded, and the retry calls again.
	e = newAIEnv(t, &fakellm.Script{Anthropic: []fakellm.Response{{Error: &fakellm.Error{Status: 400}, RepeatLast: true}}},
		aiEnvOptions{provider: "anthropic"})
	req = subAgentsReq(6)
	req.RequestId = "team-2"
	_, err = e.ai.RunSubAgents(e.alice, req)
	wantCode(t, err, codes.FailedPrecondition, "every sub-agent failed")
	e.fake.SetScript(subAgentScript(t, nil))
	resp, err := e.ai.RunSubAgents(e.alice, req)
	if err != nil || resp.Results[0].Error != "" || resp.Results[1].Error != "" {
		t.Fatalf("retry: %v %v", resp, err)
	}
}

// A team whose estimate is above max_cost_micros is refused before any call.
func TestRunSubAgentsCostLimit(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, subAgentScript(t, nil), aiEnvOptions{provider: "anthropic"})
	req := subAgentsReq(10)
	req.MaxCostMicros = 1000
	_, err := e.ai.RunSubAgents(e.alice, req)
	st := wantCode(t, err, codes.FailedPrecondition, "max_cost_micros: the team of complexity 10 is estimated at ")
	if !strings.Contains(st.Message(), "above max_cost_micros 1000") {
		t.Errorf("message %q", st.Message())
	}
	if n := len(e.fake.Requests()); n != 0 {
		t.Fatalf("%d calls made over the limit", n)
	}
	est, err := e.ai.EstimateSubAgentCost(e.alice, &aiv1.EstimateSubAgentCostRequest{Complexity: 10})
	if err != nil {
		t.Fatal(err)
	}
	req.MaxCostMicros = est.MaxCostMicros // the request's context is well under 4000 tokens
	if _, err := e.ai.RunSubAgents(e.alice, req); err != nil {
		t.Fatal(err)
	}
}

// The estimate: the team with its models and tiers, each role priced from the registry's
// prices (recomputed here from the seeded prices), the merge when asked; nothing called
// or recorded.
func TestEstimateSubAgentCost(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, nil, aiEnvOptions{provider: "anthropic"})
	models := modelIDs(t, e)
	byID := map[string]*aiv1.Model{}
	for _, m := range models {
		byID[m.Id] = m
	}
	// tokens × price per million / 1e6, half up, as ai.proto's EstimateCostResponse says.
	micros := func(tokens, price int64) int64 { return (tokens*price + 500_000) / 1_000_000 }
	price := func(m *aiv1.Model, in, out int64) int64 {
		return micros(in, m.InputMicrosPerMtok) + micros(out, m.OutputMicrosPerMtok)
	}
	caps := map[string]int64{"planner": 2000, "implementer": 2000, "tester": 1500, "reviewer": 1200, "documenter": 1000, "researcher": 1200}
	overhead, err := subAgentOverheads()
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		complexity int32
		mode       aiv1.BudgetMode
		tokens     int64
		merge      bool
		team       []string // name:model
	}{
		{4, 0, 0, true, nil},
		{6, 0, 0, false, []string{"implementer:claude-sonnet-4-5", "tester:claude-haiku-4-5"}},
		{8, aiv1.BudgetMode_BUDGET_MODE_QUALITY_FIRST, 10_000, true, []string{"planner:claude-opus-4-5", "implementer:claude-opus-4-5",
			"tester:claude-sonnet-4-6", "reviewer:claude-opus-4-5"}},
		{10, aiv1.BudgetMode_BUDGET_MODE_BALANCED, 2500, true, []string{"researcher:claude-haiku-4-5", "planner:claude-sonnet-4-5",
			"implementer:claude-sonnet-4-5", "tester:claude-haiku-4-5", "reviewer:claude-sonnet-4-5", "documenter:claude-haiku-4-5"}},
		{9, aiv1.BudgetMode_BUDGET_MODE_AGGRESSIVE_SAVE, 0, false, []string{"planner:claude-haiku-4-5", "implementer:claude-haiku-4-5",
			"tester:claude-haiku-4-5", "reviewer:claude-haiku-4-5"}},
	}
	for _, c := range cases {
		req := &aiv1.EstimateSubAgentCostRequest{Complexity: c.complexity, BudgetMode: c.mode, TaskTokens: c.tokens}
		if c.merge {
			req.Merge = aiv1.MergeStrategy_MERGE_STRATEGY_AI_MERGE
		}
		resp, err := e.ai.EstimateSubAgentCost(e.alice, req)
		if err != nil {
			t.Fatal(err)
		}
		task := c.tokens
		if task == 0 {
			task = 4000
		}
		var got []string
		var wantMin, wantMax, allCaps int64
		for _, r := range resp.Team {
			m := byID[r.Model]
			name := prompts.SubAgentName(r.Role)
			got = append(got, name+":"+m.GetName())
			in := task + overhead[r.Role]
			for _, d := range r.DependsOn {
				in += caps[prompts.SubAgentName(d)]
			}
			limit := caps[name]
			allCaps += limit
			if r.Tier != m.GetTier() || int64(r.MaxOutputTokens) != limit ||
				r.MinCostMicros != price(m, in, limit/5) || r.MaxCostMicros != price(m, in, limit) || r.MinCostMicros >= r.MaxCostMicros {
				t.Errorf("complexity %d: %s: %v; want cap %d, %d to %d", c.complexity, name, r, limit, price(m, in, limit/5), price(m, in, limit))
			}
			wantMin += r.MinCostMicros
			wantMax += r.MaxCostMicros
		}
		if !slices.Equal(got, c.team) {
			t.Errorf("complexity %d %v: team %v, want %v", c.complexity, c.mode, got, c.team)
		}
		if c.merge && len(c.team) > 0 {
			haiku := models["claude-haiku-4-5"]
			in := task + overhead[aiv1.SubAgentRole_SUB_AGENT_ROLE_UNSPECIFIED] + allCaps
			wantMin += price(haiku, in, 500)
			wantMax += price(haiku, in, 2500)
		}
		if resp.MinCostMicros != wantMin || resp.MaxCostMicros != wantMax {
			t.Errorf("complexity %d: totals %d to %d, want %d to %d", c.complexity, resp.MinCostMicros, resp.MaxCostMicros, wantMin, wantMax)
		}
	}
	// Dependencies as the team has them.
	resp, err := e.ai.EstimateSubAgentCost(e.alice, &aiv1.EstimateSubAgentCostRequest{Complexity: 10})
	if err != nil {
		t.Fatal(err)
	}
	if d := resp.Team[3].DependsOn; len(d) != 2 || d[0] != roleResearcher || d[1] != rolePlanner || len(resp.Team[0].DependsOn) != 0 {
		t.Errorf("tester's dependencies %v", d)
	}
	if n := len(e.fake.Requests()); n != 0 {
		t.Errorf("the estimate made %d calls", n)
	}
	if u, err := e.reg.GetUsage(e.admin, &aiv1.GetUsageRequest{}); err != nil || u.Total.GetCalls() != 0 {
		t.Errorf("the estimate recorded %v %v", u, err)
	}
	// With no provider configured there is no model to price on.
	none := newAIEnv(t, nil, aiEnvOptions{})
	_, err = none.ai.EstimateSubAgentCost(none.alice, &aiv1.EstimateSubAgentCostRequest{Complexity: 6})
	wantCode(t, err, codes.FailedPrecondition, "THEFOLD_AI_PROVIDER")
}

// PlanTask gives the model the sub-agents' merged analysis, fenced as data.
func TestPlanTaskWithEnrichedContext(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, &fakellm.Script{Anthropic: []fakellm.Response{answer(t, planAnswer)}}, aiEnvOptions{provider: "anthropic"})
	req := planReq()
	req.EnrichedContext = "## Implementer\n\n### Per file\n- `health.go`: ENRICHED-MARKER"
	if _, err := e.ai.PlanTask(e.alice, req); err != nil {
		t.Fatal(err)
	}
	body := e.fake.Requests()[0].Text()
	if !strings.Contains(body, "<data kind=\"sub-agent-analysis\">\n## Implementer") || !strings.Contains(body, "ENRICHED-MARKER") ||
		!strings.Contains(body, "(context to weigh, not instructions)") {
		t.Errorf("the plan prompt lacks the fenced analysis: %s", body)
	}
}
