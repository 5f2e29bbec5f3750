package fakellm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestAnthropicMessages(t *testing.T) {
	t.Parallel()
	const hello = `{"model":"claude-test","max_tokens":100,"messages":[{"role":"user","content":"hello there"}]}`
	cases := []struct {
		name   string
		script []Response
		body   string
		status int
		check  func(t *testing.T, a answer)
	}{{
		name:   "text answer",
		script: []Response{{Text: "Hi! I am scripted."}},
		body:   hello,
		status: 200,
		check: func(t *testing.T, a answer) {
			want := map[string]any{
				"id": "fakellm-msg-1", "type": "message", "role": "assistant", "model": "claude-test",
				"content":     []any{map[string]any{"type": "text", "text": "Hi! I am scripted."}},
				"stop_reason": "end_turn", "stop_sequence": nil,
				"usage": map[string]any{
					// "hello there" is 11 bytes → 3 tokens; the reply 18 bytes → 5.
					"input_tokens": 3.0, "output_tokens": 5.0,
					"cache_creation_input_tokens": 0.0, "cache_read_input_tokens": 0.0,
					"cache_creation": map[string]any{"ephemeral_5m_input_tokens": 0.0, "ephemeral_1h_input_tokens": 0.0},
					"service_tier":   "standard",
				},
			}
			if diff := cmp.Diff(want, a.body); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "tool calls after text, stop reason tool_use",
		script: []Response{{Text: "Reading it.", ToolCalls: []ToolCall{
			{Name: "read_file", Input: json.RawMessage(`{"path":"a.go"}`)}, {Name: "list"},
		}}},
		body: `{"model":"claude-test","max_tokens":100,
			"tools":[{"name":"read_file","description":"reads","input_schema":{"type":"object"}}],
			"tool_choice":{"type":"auto"},
			"messages":[{"role":"user","content":[{"type":"text","text":"read a.go"}]}]}`,
		status: 200,
		check: func(t *testing.T, a answer) {
			if got := str(t, a.body, "stop_reason"); got != "tool_use" {
				t.Errorf("stop_reason = %q", got)
			}
			want := []any{
				map[string]any{"type": "text", "text": "Reading it."},
				map[string]any{"type": "tool_use", "id": "fakellm-toolu-1", "name": "read_file", "input": map[string]any{"path": "a.go"}},
				map[string]any{"type": "tool_use", "id": "fakellm-toolu-2", "name": "list", "input": map[string]any{}},
			}
			if diff := cmp.Diff(want, a.body["content"]); diff != "" {
				t.Errorf("content (-want +got):\n%s", diff)
			}
		},
	}, {
		name: "a tool call's input captured from the request: the last match's group",
		script: []Response{{ToolCalls: []ToolCall{
			{Name: "start_task", Input: json.RawMessage(`{"task_id":"$capture:\"id\":\"(task-[0-9]+)\"","note":"kept"}`)},
		}}},
		body: `{"model":"claude-test","max_tokens":100,"messages":[{"role":"user","content":"make it"},
			{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"create_task","input":{}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"{\"id\":\"task-7\"} {\"id\":\"task-42\"}"}]}]}`,
		status: 200,
		check: func(t *testing.T, a answer) {
			want := []any{map[string]any{"type": "tool_use", "id": "fakellm-toolu-1", "name": "start_task",
				"input": map[string]any{"task_id": "task-42", "note": "kept"}}}
			if diff := cmp.Diff(want, a.body["content"]); diff != "" {
				t.Errorf("content (-want +got):\n%s", diff)
			}
		},
	}, {
		name:   "a capture that matches nothing fails the request",
		script: []Response{{ToolCalls: []ToolCall{{Name: "start_task", Input: json.RawMessage(`{"task_id":"$capture:task-(\\d+)"}`)}}}},
		body:   hello,
		status: 500,
		check: func(t *testing.T, a answer) {
			if !strings.Contains(str(t, a.body, "error", "message"), "matches nothing") {
				t.Errorf("error = %v", a.body["error"])
			}
		},
	}, {
		name:   "stop_sequence names the request's sequence; output_tokens override",
		script: []Response{{Text: "partial", StopReason: "stop_sequence", OutputTokens: 42}},
		body:   `{"model":"m","max_tokens":5,"stop_sequences":["END"],"messages":[{"role":"user","content":"x"}]}`,
		status: 200,
		check: func(t *testing.T, a answer) {
			if str(t, a.body, "stop_reason") != "stop_sequence" || str(t, a.body, "stop_sequence") != "END" {
				t.Errorf("stop = %v %v", a.body["stop_reason"], a.body["stop_sequence"])
			}
			if got := num(t, a.body, "usage", "output_tokens"); got != 42 {
				t.Errorf("output_tokens = %d, want 42", got)
			}
		},
	}, {
		name:   "max_tokens in another vocabulary",
		script: []Response{{Text: "cut", StopReason: "length"}},
		body:   hello,
		status: 200,
		check: func(t *testing.T, a answer) {
			if got := str(t, a.body, "stop_reason"); got != "max_tokens" {
				t.Errorf("stop_reason = %q", got)
			}
		},
	}, {
		name:   "scripted overloaded error with retry-after",
		script: []Response{{Error: &Error{Type: "overloaded_error", Message: "busy", RetryAfter: 2}}},
		body:   hello,
		status: 529,
		check: func(t *testing.T, a answer) {
			want := map[string]any{"type": "error", "error": map[string]any{"type": "overloaded_error", "message": "busy"}}
			if diff := cmp.Diff(want, a.body); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if a.header.Get("Retry-After") != "2" || a.header.Get("Retry-After-Ms") != "" {
				t.Errorf("retry headers = %q / %q", a.header.Get("Retry-After"), a.header.Get("Retry-After-Ms"))
			}
		},
	}, {
		name:   "scripted status gets Anthropic's type",
		script: []Response{{Error: &Error{Status: 429, RetryAfter: 0.5}}},
		body:   hello,
		status: 429,
		check: func(t *testing.T, a answer) {
			if got := str(t, a.body, "error", "type"); got != "rate_limit_error" {
				t.Errorf("type = %q", got)
			}
			if got := a.header.Get("Retry-After"); got != "0.5" {
				t.Errorf("Retry-After = %q", got)
			}
		},
	}, {
		name:   "raw body verbatim",
		script: []Response{{Raw: `{"id":"fakellm-raw","content":[`}},
		body:   hello,
		status: 200,
		check: func(t *testing.T, a answer) {
			if a.raw != `{"id":"fakellm-raw","content":[` {
				t.Errorf("raw = %q", a.raw)
			}
		},
	}}
	bad := []struct{ name, body, want string }{
		{"not JSON", `{`, "request body"},
		{"no model", `{"max_tokens":1,"messages":[{"role":"user","content":"x"}]}`, "model"},
		{"no max_tokens", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, "max_tokens"},
		{"no messages", `{"model":"m","max_tokens":1,"messages":[]}`, "messages"},
		{"bad role", `{"model":"m","max_tokens":1,"messages":[{"role":"system","content":"x"}]}`, "messages.0.role"},
		{"empty content", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[]}]}`, "messages.0.content"},
		{"block without type", `{"model":"m","max_tokens":1,"messages":[{"role":"user","content":[{"text":"x"}]}]}`, "type"},
		{"five breakpoints", `{"model":"m","max_tokens":1,"system":[` + strings.Repeat(`{"type":"text","text":"s","cache_control":{"type":"ephemeral"}},`, 4) +
			`{"type":"text","text":"s"}],"messages":[{"role":"user","content":[{"type":"text","text":"x","cache_control":{"type":"ephemeral"}}]}]}`, "maximum of 4"},
	}
	for _, b := range bad {
		cases = append(cases, struct {
			name   string
			script []Response
			body   string
			status int
			check  func(t *testing.T, a answer)
		}{"bad request: " + b.name, []Response{{Text: "unused"}}, b.body, 400, func(t *testing.T, a answer) {
			if str(t, a.body, "error", "type") != "invalid_request_error" || !strings.Contains(str(t, a.body, "error", "message"), b.want) {
				t.Errorf("error = %v, want invalid_request_error mentioning %q", a.body, b.want)
			}
			if a.header.Get("X-Should-Retry") != "false" {
				t.Error("a bad request must not be retried")
			}
		}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv, url := Start(t, &Script{Anthropic: c.script})
			a := post(t, url, "/v1/messages", c.body)
			if a.status != c.status {
				t.Fatalf("status = %d, want %d: %s", a.status, c.status, a.raw)
			}
			c.check(t, a)
			recs := srv.Requests()
			if len(recs) != 1 || recs[0].Status != c.status || recs[0].Endpoint != EndpointAnthropicMessages {
				t.Errorf("record = %+v", recs)
			}
		})
	}
}
