package fakellm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// thought is the scripted reasoning of these tests: 48 bytes, 12 tokens.
const thought = "The user greets me; a short greeting will do it."

// Each API's reasoning setting is taken, checked as the API checks it and recorded with the
// request; scripted thinking is sent the way that API sends it, before the answer, and its
// tokens are output tokens.
func TestThinking(t *testing.T) {
	t.Parallel()
	entry := Response{Thinking: thought, Text: "Hello!"} // answer: 6 bytes, 2 tokens
	cases := []struct {
		name, path, body string
		script           *Script
		check            func(t *testing.T, a answer)
	}{{
		name: "anthropic: a thinking block first, its tokens in output_tokens",
		path: "/v1/messages", script: &Script{Anthropic: []Response{entry}},
		body: `{"model":"claude-test","max_tokens":3000,"thinking":{"type":"enabled","budget_tokens":2048},
			"messages":[{"role":"user","content":"hi"}]}`,
		check: func(t *testing.T, a answer) {
			want := []any{
				map[string]any{"type": "thinking", "thinking": thought, "signature": "fakellm-signature-1"},
				map[string]any{"type": "text", "text": "Hello!"},
			}
			if d := cmp.Diff(want, a.body["content"]); d != "" {
				t.Errorf("content (-want +got):\n%s", d)
			}
			if got := num(t, a.body, "usage", "output_tokens"); got != 12+2 {
				t.Errorf("output_tokens = %d, want 14 (thinking 12 + answer 2)", got)
			}
		},
	}, {
		name: "anthropic: no thinking block unless thinking is enabled",
		path: "/v1/messages", script: &Script{Anthropic: []Response{entry}},
		body: `{"model":"claude-test","max_tokens":100,"thinking":{"type":"disabled"},"messages":[{"role":"user","content":"hi"}]}`,
		check: func(t *testing.T, a answer) {
			if d := cmp.Diff([]any{map[string]any{"type": "text", "text": "Hello!"}}, a.body["content"]); d != "" {
				t.Errorf("content (-want +got):\n%s", d)
			}
			if got := num(t, a.body, "usage", "output_tokens"); got != 2 {
				t.Errorf("output_tokens = %d, want 2", got)
			}
		},
	}, {
		name: "openai: reasoning_content and reasoning_tokens, counted in completion_tokens",
		path: "/v1/chat/completions", script: &Script{OpenAI: []Response{entry}},
		body: `{"model":"o4-mini","reasoning_effort":"medium","messages":[{"role":"user","content":"hi"}]}`,
		check: func(t *testing.T, a answer) {
			msg := get(t, a.body, "choices", 0, "message")
			if str(t, msg, "reasoning_content") != thought || str(t, msg, "content") != "Hello!" {
				t.Errorf("message = %v", msg)
			}
			if got := num(t, a.body, "usage", "completion_tokens"); got != 14 {
				t.Errorf("completion_tokens = %d, want 14", got)
			}
			if got := num(t, a.body, "usage", "completion_tokens_details", "reasoning_tokens"); got != 12 {
				t.Errorf("reasoning_tokens = %d, want 12", got)
			}
		},
	}, {
		name: "openai: reasoning_effort none reasons not",
		path: "/v1/chat/completions", script: &Script{OpenAI: []Response{entry}},
		body: `{"model":"gpt-5.1","reasoning_effort":"none","temperature":0.2,"messages":[{"role":"user","content":"hi"}]}`,
		check: func(t *testing.T, a answer) {
			if msg := get(t, a.body, "choices", 0, "message").(map[string]any); msg["reasoning_content"] != nil {
				t.Errorf("message = %v, want no reasoning", msg)
			}
			if got := num(t, a.body, "usage", "completion_tokens"); got != 2 {
				t.Errorf("completion_tokens = %d, want 2", got)
			}
		},
	}, {
		name: "gemini: thoughtsTokenCount beside the candidates' tokens; no thought part unasked",
		path: "/v1beta/models/gemini-2.5-pro:generateContent", script: &Script{Gemini: []Response{entry}},
		body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"thinkingConfig":{"thinkingBudget":2048}}}`,
		check: func(t *testing.T, a answer) {
			if d := cmp.Diff([]any{map[string]any{"text": "Hello!"}}, get(t, a.body, "candidates", 0, "content", "parts")); d != "" {
				t.Errorf("parts (-want +got):\n%s", d)
			}
			if num(t, a.body, "usageMetadata", "candidatesTokenCount") != 2 || num(t, a.body, "usageMetadata", "thoughtsTokenCount") != 12 ||
				num(t, a.body, "usageMetadata", "totalTokenCount") != 1+14 {
				t.Errorf("usage = %v", a.body["usageMetadata"])
			}
		},
	}, {
		name: "gemini: includeThoughts sends a thought part first",
		path: "/v1beta/models/gemini-2.5-pro:generateContent", script: &Script{Gemini: []Response{entry}},
		body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"thinkingConfig":{"includeThoughts":true}}}`,
		check: func(t *testing.T, a answer) {
			want := []any{map[string]any{"text": thought, "thought": true}, map[string]any{"text": "Hello!"}}
			if d := cmp.Diff(want, get(t, a.body, "candidates", 0, "content", "parts")); d != "" {
				t.Errorf("parts (-want +got):\n%s", d)
			}
		},
	}, {
		name: "gemini: a budget of 0 turns thinking off",
		path: "/v1beta/models/gemini-2.5-flash:generateContent", script: &Script{Gemini: []Response{entry}},
		body: `{"contents":[{"role":"user","parts":[{"text":"hi"}]}],"generationConfig":{"thinkingConfig":{"thinkingBudget":0,"includeThoughts":true}}}`,
		check: func(t *testing.T, a answer) {
			if len(get(t, a.body, "candidates", 0, "content", "parts").([]any)) != 1 || get(t, a.body, "usageMetadata", "thoughtsTokenCount") != nil {
				t.Errorf("answer = %v, want no thoughts", a.body)
			}
		},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv, url := Start(t, c.script)
			a := post(t, url, c.path, c.body)
			if a.status != 200 {
				t.Fatalf("status = %d: %s", a.status, a.raw)
			}
			c.check(t, a)
			recs := srv.Requests()
			if len(recs) != 1 {
				t.Fatalf("records = %+v", recs)
			}
			// The record holds the request as sent, reasoning settings included.
			var sent, recorded any
			_ = json.Unmarshal([]byte(c.body), &sent)
			_ = json.Unmarshal(recs[0].Body, &recorded)
			if d := cmp.Diff(sent, recorded); d != "" {
				t.Errorf("recorded body (-sent +recorded):\n%s", d)
			}
			if got := recs[0].OutputTokens; got != outputOf(t, c.path, a) {
				t.Errorf("recorded output tokens %d, answer says %d", got, outputOf(t, c.path, a))
			}
		})
	}
}

// outputOf is the output tokens an answer reports, thinking included.
func outputOf(t *testing.T, path string, a answer) int {
	t.Helper()
	switch {
	case strings.HasPrefix(path, "/v1/messages"):
		return num(t, a.body, "usage", "output_tokens")
	case strings.HasPrefix(path, "/v1/chat"):
		return num(t, a.body, "usage", "completion_tokens")
	}
	u := a.body["usageMetadata"].(map[string]any)
	n := num(t, u, "candidatesTokenCount")
	if _, ok := u["thoughtsTokenCount"]; ok {
		n += num(t, u, "thoughtsTokenCount")
	}
	return n
}

// What each API refuses about reasoning, fakellm refuses with a 400 in its words.
func TestThinkingBadRequests(t *testing.T) {
	t.Parallel()
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	const contents = `"contents":[{"role":"user","parts":[{"text":"hi"}]}]`
	cases := []struct{ name, path, body, want string }{
		{"anthropic: budget under 1024", "/v1/messages",
			`{"model":"m","max_tokens":4000,"thinking":{"type":"enabled","budget_tokens":512},` + msgs + `}`, "greater than or equal to 1024"},
		{"anthropic: budget not below max_tokens", "/v1/messages",
			`{"model":"m","max_tokens":2048,"thinking":{"type":"enabled","budget_tokens":2048},` + msgs + `}`, "`max_tokens` must be greater than `thinking.budget_tokens`"},
		{"anthropic: no budget", "/v1/messages",
			`{"model":"m","max_tokens":2048,"thinking":{"type":"enabled"},` + msgs + `}`, "budget_tokens: Field required"},
		{"anthropic: unknown type", "/v1/messages",
			`{"model":"m","max_tokens":2048,"thinking":{"type":"deep"},` + msgs + `}`, "'deep'"},
		{"anthropic: temperature beside thinking", "/v1/messages",
			`{"model":"m","max_tokens":4000,"temperature":0.2,"thinking":{"type":"enabled","budget_tokens":1024},` + msgs + `}`, "`temperature` may only be set to 1"},
		{"anthropic: a forced tool beside thinking", "/v1/messages",
			`{"model":"m","max_tokens":4000,"tool_choice":{"type":"any"},"tools":[{"name":"t","input_schema":{"type":"object"}}],` +
				`"thinking":{"type":"enabled","budget_tokens":1024},` + msgs + `}`, "tool_choice forces tool use"},
		{"openai: unknown effort", "/v1/chat/completions",
			`{"model":"o3","reasoning_effort":"extreme",` + msgs + `}`, "Invalid value: 'extreme'"},
		{"openai: temperature beside an effort", "/v1/chat/completions",
			`{"model":"o3","reasoning_effort":"high","temperature":0.3,` + msgs + `}`, "'temperature' does not support 0.3"},
		{"gemini: budget out of range", "/v1beta/models/g:generateContent",
			`{` + contents + `,"generationConfig":{"thinkingConfig":{"thinkingBudget":100000}}}`, "thinking_budget"},
		{"gemini: budget and level", "/v1beta/models/g:generateContent",
			`{` + contents + `,"generationConfig":{"thinkingConfig":{"thinkingBudget":1024,"thinkingLevel":"HIGH"}}}`, "mutually exclusive"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := []Response{{Text: "unused"}}
			_, url := Start(t, &Script{Anthropic: r, OpenAI: r, Gemini: r})
			a := post(t, url, c.path, c.body)
			if a.status != 400 || !strings.Contains(a.raw, c.want) {
				t.Errorf("status %d %s, want 400 mentioning %q", a.status, a.raw, c.want)
			}
		})
	}
}

// Thinking is what the model thinks before an answer: an entry without one is refused.
func TestThinkingNeedsAnAnswer(t *testing.T) {
	t.Parallel()
	_, err := ParseScript([]byte(`{"anthropic":[{"thinking":"hmm","error":{"status":500}}],"gemini":[{"thinking":"hmm","tool_calls":[{"name":"f"}]}]}`))
	if err == nil || !strings.Contains(err.Error(), "anthropic[0].thinking: goes before an answer") || strings.Contains(err.Error(), "gemini[0]") {
		t.Errorf("err = %v, want anthropic[0].thinking refused and gemini[0] accepted", err)
	}
}
