package service

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/thefold/thefold/pkg/fakellm"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"

	"github.com/thefold/thefold/services/ai/internal/engine"
)

// sentReasoning is the reasoning setting a recorded request carried: the Anthropic or
// Gemini thinking budget, or OpenAI's reasoning_effort; and the output limit it sent.
type sentReasoning struct {
	budget    int
	effort    string
	maxTokens int
	// present: the request had a reasoning field at all.
	present bool
}

func reasoningSent(t *testing.T, rec fakellm.Recorded) sentReasoning {
	t.Helper()
	var b struct {
		MaxTokens           int             `json:"max_tokens"`
		MaxCompletionTokens int             `json:"max_completion_tokens"`
		Thinking            json.RawMessage `json:"thinking"`
		ReasoningEffort     *string         `json:"reasoning_effort"`
		GenerationConfig    struct {
			MaxOutputTokens int             `json:"maxOutputTokens"`
			ThinkingConfig  json.RawMessage `json:"thinkingConfig"`
		} `json:"generationConfig"`
	}
	if err := json.Unmarshal(rec.Body, &b); err != nil {
		t.Fatalf("recorded body: %v", err)
	}
	var s sentReasoning
	var budget struct {
		BudgetTokens   int `json:"budget_tokens"`
		ThinkingBudget int `json:"thinkingBudget"`
	}
	switch rec.Endpoint {
	case fakellm.EndpointAnthropicMessages:
		s.maxTokens, s.present = b.MaxTokens, b.Thinking != nil
		if s.present {
			_ = json.Unmarshal(b.Thinking, &budget)
			s.budget = budget.BudgetTokens
		}
	case fakellm.EndpointOpenAIChat:
		s.maxTokens, s.present = b.MaxCompletionTokens, b.ReasoningEffort != nil
		if s.present {
			s.effort = *b.ReasoningEffort
		}
	case fakellm.EndpointGeminiGenerate:
		s.maxTokens, s.present = b.GenerationConfig.MaxOutputTokens, b.GenerationConfig.ThinkingConfig != nil
		if s.present {
			_ = json.Unmarshal(b.GenerationConfig.ThinkingConfig, &budget)
			s.budget = budget.ThinkingBudget
		}
	}
	return s
}

// addModel creates m for the seeded provider of that name, as the admin over the API.
func addModel(t *testing.T, e *aiEnv, provider string, m *aiv1.Model) {
	t.Helper()
	ps, err := e.reg.ListProviders(e.admin, &aiv1.ListProvidersRequest{Name: provider})
	if err != nil || len(ps.Providers) != 1 {
		t.Fatalf("provider %s: %v %v", provider, ps, err)
	}
	m.ProviderId = ps.Providers[0].Id
	if _, err := e.reg.CreateModel(e.admin, &aiv1.CreateModelRequest{Model: m}); err != nil {
		t.Fatalf("CreateModel(%s): %v", m.Name, err)
	}
}

// planReply is a PlanTask answer, its thinking 400 bytes (100 fakellm tokens) and its text
// 10 tokens.
func planReply(t *testing.T, think bool) fakellm.Response {
	r := answer(t, rpcCases()[2].answer)
	r.OutputTokens = 10
	if think {
		r.Thinking = strings.Repeat("Weigh it. ", 40)
	}
	return r
}

// PlanTask (effort high) through each provider's real client: a model that supports
// reasoning gets its provider's field (thinking, reasoning_effort, thinkingConfig) and room
// for it, a model without it gets none, and THEFOLD_AI_REASONING=off sends none at all.
// The thinking sent back is not the answer, and its tokens are billed as output.
func TestReasoningReachesOnlyModelsThatSupportIt(t *testing.T) {
	t.Parallel()
	high := 16384 // llm.EffortHigh's budget
	cases := []struct {
		name, provider, model string
		add                   *aiv1.Model // created before the call
		off                   bool        // THEFOLD_AI_REASONING=off
		want                  sentReasoning
	}{
		{name: "anthropic, seeded claude", provider: "anthropic", model: "claude-sonnet-4-5",
			want: sentReasoning{present: true, budget: high, maxTokens: 12000 + high}},
		{name: "anthropic, a claude without reasoning", provider: "anthropic", model: "claude-3-5-haiku",
			add:  &aiv1.Model{Name: "claude-3-5-haiku", Tier: 2, MaxOutputTokens: 8192, Tags: []string{"chat"}, Enabled: true},
			want: sentReasoning{maxTokens: 8192}},
		{name: "anthropic, reasoning off", provider: "anthropic", model: "claude-sonnet-4-5", off: true,
			want: sentReasoning{maxTokens: 12000}},
		{name: "openai, o4-mini", provider: "openai", model: "o4-mini",
			add:  &aiv1.Model{Name: "o4-mini", Tier: 3, MaxOutputTokens: 100000, Tags: []string{"planning"}, SupportsReasoning: true, Enabled: true},
			want: sentReasoning{present: true, effort: "high", maxTokens: 12000 + high}},
		{name: "openai, seeded gpt-4o", provider: "openai", model: "gpt-4o",
			want: sentReasoning{maxTokens: 12000}},
		{name: "openai, reasoning off", provider: "openai", model: "o4-mini", off: true,
			add:  &aiv1.Model{Name: "o4-mini", Tier: 3, MaxOutputTokens: 100000, Tags: []string{"planning"}, SupportsReasoning: true, Enabled: true},
			want: sentReasoning{maxTokens: 12000}},
		{name: "gemini, seeded 2.5 pro", provider: "gemini", model: "gemini-2.5-pro",
			want: sentReasoning{present: true, budget: high, maxTokens: 12000 + high}},
		{name: "gemini, seeded 2.0 flash", provider: "gemini", model: "gemini-2.0-flash",
			want: sentReasoning{maxTokens: 8192}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			o := aiEnvOptions{provider: c.provider}
			if c.off {
				o.cfg = func(cfg *engine.Config) { cfg.Reasoning = "off" }
			}
			thinks := c.want.present
			e := newAIEnv(t, scriptFor(c.provider, planReply(t, thinks)), o)
			if c.add != nil {
				addModel(t, e, c.provider, c.add)
			}
			resp, err := e.ai.PlanTask(e.alice, &aiv1.PlanTaskRequest{Task: testTask, Model: &aiv1.ModelChoice{Model: c.model}})
			if err != nil {
				t.Fatal(err)
			}
			if s := resp.Plan.GetSteps(); len(s) != 2 || s[0].Path != "health.go" {
				t.Errorf("plan %v, want the scripted answer's two steps", resp.Plan)
			}
			reqs := e.fake.Requests()
			rec := reqs[len(reqs)-1]
			if got := reasoningSent(t, rec); got != c.want {
				t.Errorf("sent %+v, want %+v", got, c.want)
			}
			wantOut := int64(10)
			if thinks {
				wantOut += 100
			}
			if got := resp.Usage.GetOutputTokens(); got != wantOut || int(got) != rec.OutputTokens {
				t.Errorf("usage output tokens %d (fakellm counted %d), want %d", got, rec.OutputTokens, wantOut)
			}
		})
	}
}

// Each RPC's effort, as the model is asked for it: planning high, fixing, diagnosis,
// intervention and review medium, a planned file low, the assessments and the task order
// none.
func TestReasoningEffortPerRPC(t *testing.T) {
	t.Parallel()
	const high, medium, low = 16384, 8192, 2048
	want := map[string]int{
		"AssessConfidence": 0, "AssessComplexity": 0, "PlanTask": high, "GenerateFile": low, "FixFile": medium,
		"ReviewCode": medium, "DiagnoseFailure": medium, "Intervene": medium, "DecomposeProject": high,
		"ReviseProjectPhase": high, "ReviewProject": medium, "PlanTaskOrder": 0,
	}
	cases := rpcCases()
	var rs []fakellm.Response
	for _, c := range cases {
		r := answer(t, c.answer)
		r.Thinking = "Think first."
		rs = append(rs, r)
	}
	e := newAIEnv(t, scriptFor("anthropic", rs...), aiEnvOptions{provider: "anthropic"})
	for _, c := range cases {
		m, err := c.call(e.alice, e.ai)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		c.check(t, m) // the thinking block is not part of the answer
	}
	reqs := e.fake.Requests()
	if len(reqs) != len(cases) || len(want) != len(cases) {
		t.Fatalf("%d requests for %d RPCs (%d expected efforts)", len(reqs), len(cases), len(want))
	}
	for i, c := range cases {
		if got := reasoningSent(t, reqs[i]); got.budget != want[c.name] || got.present != (want[c.name] > 0) {
			t.Errorf("%s: sent %+v, want a thinking budget of %d", c.name, got, want[c.name])
		}
	}
}

// A model whose output limit cannot hold the effort's budget beside an answer gets a lower
// effort (the budget at most half the limit), and the answer the rest of the limit.
func TestReasoningEffortFitsTheModel(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, scriptFor("anthropic", planReply(t, true)), aiEnvOptions{provider: "anthropic"})
	addModel(t, e, "anthropic", &aiv1.Model{Name: "claude-small", Tier: 2, MaxOutputTokens: 16000,
		Tags: []string{"planning"}, SupportsReasoning: true, Enabled: true})
	if _, err := e.ai.PlanTask(e.alice, &aiv1.PlanTaskRequest{Task: testTask, Model: &aiv1.ModelChoice{Model: "claude-small"}}); err != nil {
		t.Fatal(err)
	}
	// High (16384) and medium (8192) take more than half of 16000: low's 2048 it is.
	if got := reasoningSent(t, e.fake.Requests()[0]); got != (sentReasoning{present: true, budget: 2048, maxTokens: 12000 + 2048}) {
		t.Errorf("sent %+v, want a low budget beside the prompt's 12000", got)
	}
}

// A repair round asks with the same effort; the thinking of the unusable answer is not in
// the reply the model is shown.
func TestReasoningInRepairRounds(t *testing.T) {
	t.Parallel()
	bad := fakellm.Response{Thinking: "Hidden musing.", Text: `{"summary": "no steps"}`}
	e := newAIEnv(t, scriptFor("anthropic", bad, planReply(t, true)), aiEnvOptions{provider: "anthropic"})
	resp, err := e.ai.PlanTask(e.alice, &aiv1.PlanTaskRequest{Task: testTask, Model: &aiv1.ModelChoice{Model: "claude-sonnet-4-5"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Plan.GetSteps()) != 2 {
		t.Errorf("plan %v", resp.Plan)
	}
	reqs := e.fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want the answer and one repair", len(reqs))
	}
	for i, r := range reqs {
		if got := reasoningSent(t, r); got.budget != 16384 {
			t.Errorf("request %d sent %+v, want the high budget", i, got)
		}
	}
	if strings.Contains(string(reqs[1].Body), "Hidden musing") {
		t.Error("the repair round shows the model its earlier thinking")
	}
}
