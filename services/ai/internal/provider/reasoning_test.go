package provider_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/thefold/thefold/pkg/fakellm"
	"github.com/thefold/thefold/services/ai/internal/llm"
)

// A reasoning effort reaches each provider in its SDK's own field, the output limit grows by
// the effort's budget, and the scripted thinking sent back is not in the answer while its
// tokens are in the output tokens.
func TestReasoningEffort(t *testing.T) {
	t.Parallel()
	temp := 0.2
	req := llm.Request{
		Model: "thinker", Messages: []llm.Message{llm.UserText("Plan the change.")},
		MaxTokens: 1000, Temperature: &temp, Reasoning: llm.EffortMedium,
	}
	budget := float64(llm.EffortMedium.Budget())
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, f, f.script(fakellm.Response{Thinking: "First the schema, then the handler.", Text: `{"summary":"two steps"}`}), nil)
			resp, err := s.p.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != `{"summary":"two steps"}` {
				t.Errorf("Text = %q, want the answer without the thinking", resp.Text)
			}
			rec := s.srv.Requests()[0]
			// The thinking's tokens (35 bytes: 9) are output tokens, as the provider bills them.
			if resp.Usage.OutputTokens != int64(rec.OutputTokens) || rec.OutputTokens < 9+6 {
				t.Errorf("OutputTokens = %d, fakellm counted %d (thinking included)", resp.Usage.OutputTokens, rec.OutputTokens)
			}
			b := bodies(t, s.srv, f.endpoint)[0]
			type check struct {
				path []any
				want any
			}
			var checks []check
			switch f.name {
			case "anthropic":
				checks = []check{
					{[]any{"thinking", "type"}, "enabled"}, {[]any{"thinking", "budget_tokens"}, budget},
					{[]any{"max_tokens"}, 1000 + budget},
					{[]any{"temperature"}, nil}, // refused beside thinking
				}
			case "openai":
				checks = []check{
					{[]any{"reasoning_effort"}, "medium"}, {[]any{"max_completion_tokens"}, 1000 + budget},
					{[]any{"temperature"}, nil},
				}
			case "openai-compatible":
				checks = []check{
					{[]any{"reasoning_effort"}, "medium"}, {[]any{"max_tokens"}, 1000 + budget},
					{[]any{"temperature"}, nil},
				}
			case "gemini":
				checks = []check{
					{[]any{"generationConfig", "thinkingConfig", "thinkingBudget"}, budget},
					{[]any{"generationConfig", "maxOutputTokens"}, 1000 + budget},
					{[]any{"generationConfig", "temperature"}, 0.2},
				}
			}
			for _, c := range checks {
				if got := dig(b, c.path...); got != c.want {
					t.Errorf("request %v = %#v, want %#v", c.path, got, c.want)
				}
			}
		})
	}
}

// Without an effort no provider gets a reasoning field, and the request is as before.
func TestNoReasoningEffort(t *testing.T) {
	t.Parallel()
	temp := 0.2
	req := llm.Request{Model: "plain", Messages: []llm.Message{llm.UserText("hi")}, MaxTokens: 1000, Temperature: &temp}
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, f, f.script(fakellm.Response{Text: "hello"}), nil)
			if _, err := s.p.Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			b := bodies(t, s.srv, f.endpoint)[0]
			var absent [][]any
			maxPath := []any{"max_tokens"}
			switch f.name {
			case "anthropic":
				absent = [][]any{{"thinking"}}
			case "openai":
				absent, maxPath = [][]any{{"reasoning_effort"}}, []any{"max_completion_tokens"}
			case "openai-compatible":
				absent = [][]any{{"reasoning_effort"}}
			case "gemini":
				absent, maxPath = [][]any{{"generationConfig", "thinkingConfig"}}, []any{"generationConfig", "maxOutputTokens"}
			}
			for _, p := range absent {
				if got := dig(b, p...); got != nil {
					t.Errorf("request %v = %v, want none", p, got)
				}
			}
			if got := dig(b, maxPath...); got != 1000.0 {
				t.Errorf("request %v = %v, want 1000", maxPath, got)
			}
		})
	}
}

// Anthropic refuses thinking beside a forced tool choice: the client sends the tool call
// without it (fakellm refuses the request otherwise).
func TestAnthropicNoThinkingWithForcedTool(t *testing.T) {
	t.Parallel()
	f := families[0]
	s := start(t, f, f.script(fakellm.Response{ToolCalls: []fakellm.ToolCall{{Name: "note"}}}), nil)
	req := llm.Request{
		Model: "m", Messages: []llm.Message{llm.UserText("note it")}, Reasoning: llm.EffortHigh,
		Tools:      []llm.Tool{{Name: "note", InputSchema: json.RawMessage(`{"type":"object"}`)}},
		ToolChoice: llm.ToolChoice{Mode: llm.ToolNamed, Name: "note"},
	}
	resp, err := s.p.Complete(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.ToolUses) != 1 {
		t.Errorf("resp = %+v", resp)
	}
	if b := bodies(t, s.srv, f.endpoint)[0]; dig(b, "thinking") != nil || dig(b, "max_tokens") != 4096.0 {
		t.Errorf("thinking %v, max_tokens %v; want none and the default", dig(b, "thinking"), dig(b, "max_tokens"))
	}
}

// Reasoning the answer carries in the providers' other shapes (Anthropic's redacted
// thinking, a Gemini thought part) is not the answer either; Gemini's thoughts are output
// tokens.
func TestReasoningBlocksAreNotTheAnswer(t *testing.T) {
	t.Parallel()
	cases := []struct {
		family     int
		raw        string
		wantOutput int64
	}{
		{0, `{"id":"msg_1","type":"message","role":"assistant","model":"m","stop_reason":"end_turn",
			"content":[{"type":"thinking","thinking":"hmm","signature":"sig"},{"type":"redacted_thinking","data":"xyz"},{"type":"text","text":"answer"}],
			"usage":{"input_tokens":3,"output_tokens":40}}`, 40},
		{3, `{"candidates":[{"content":{"role":"model","parts":[{"text":"hmm, let me see","thought":true},{"text":"answer"}]},"finishReason":"STOP"}],
			"usageMetadata":{"promptTokenCount":3,"candidatesTokenCount":2,"thoughtsTokenCount":30},"modelVersion":"m"}`, 32},
	}
	for _, c := range cases {
		f := families[c.family]
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, f, f.script(fakellm.Response{Raw: c.raw}), nil)
			resp, err := s.p.Complete(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{llm.UserText("q")}, Reasoning: llm.EffortLow})
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != "answer" || resp.Usage.OutputTokens != c.wantOutput {
				t.Errorf("Text %q, output tokens %d; want \"answer\", %d", resp.Text, resp.Usage.OutputTokens, c.wantOutput)
			}
		})
	}
}
