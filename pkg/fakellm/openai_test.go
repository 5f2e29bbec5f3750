package fakellm

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestOpenAIChat(t *testing.T) {
	t.Parallel()
	const hello = `{"model":"gpt-test","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"hello"}]}`
	cases := []struct {
		name   string
		script []Response
		body   string
		status int
		check  func(t *testing.T, a answer)
	}{{
		name:   "text answer",
		script: []Response{{Text: "Hello from a script."}},
		body:   hello,
		status: 200,
		check: func(t *testing.T, a answer) {
			want := map[string]any{
				"id": "fakellm-chatcmpl-1", "object": "chat.completion", "created": 1.7e9, "model": "gpt-test",
				"system_fingerprint": "fakellm-scripted",
				"choices": []any{map[string]any{
					"index": 0.0, "finish_reason": "stop", "logprobs": nil,
					"message": map[string]any{"role": "assistant", "content": "Hello from a script.", "refusal": nil},
				}},
				"usage": map[string]any{
					// "be brief" + "hello" = 13 bytes → 4 tokens; the reply 20 bytes → 5.
					"prompt_tokens": 4.0, "completion_tokens": 5.0, "total_tokens": 9.0,
					"prompt_tokens_details":     map[string]any{"cached_tokens": 0.0, "audio_tokens": 0.0},
					"completion_tokens_details": map[string]any{"reasoning_tokens": 0.0, "audio_tokens": 0.0, "accepted_prediction_tokens": 0.0, "rejected_prediction_tokens": 0.0},
				},
			}
			if diff := cmp.Diff(want, a.body); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		},
	}, {
		name:   "tool calls: content null, arguments a JSON string",
		script: []Response{{ToolCalls: []ToolCall{{Name: "plan", Input: json.RawMessage(`{"steps":[1,2]}`)}}}},
		body: `{"model":"gpt-test","tools":[{"type":"function","function":{"name":"plan","parameters":{"type":"object"}}}],
			"messages":[{"role":"user","content":[{"type":"text","text":"plan it"}]},
			{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"x","arguments":"{}"}}]},
			{"role":"tool","tool_call_id":"c1","content":"done"}]}`,
		status: 200,
		check: func(t *testing.T, a answer) {
			msg := get(t, a.body, "choices", 0, "message")
			want := map[string]any{"role": "assistant", "content": nil, "refusal": nil, "tool_calls": []any{map[string]any{
				"id": "fakellm-call-1", "type": "function",
				"function": map[string]any{"name": "plan", "arguments": `{"steps":[1,2]}`},
			}}}
			if diff := cmp.Diff(want, msg); diff != "" {
				t.Errorf("message (-want +got):\n%s", diff)
			}
			if got := str(t, a.body, "choices", 0, "finish_reason"); got != "tool_calls" {
				t.Errorf("finish_reason = %q", got)
			}
		},
	}, {
		name:   "length",
		script: []Response{{Text: "cut", StopReason: "max_tokens"}},
		body:   hello,
		status: 200,
		check: func(t *testing.T, a answer) {
			if got := str(t, a.body, "choices", 0, "finish_reason"); got != "length" {
				t.Errorf("finish_reason = %q", got)
			}
		},
	}, {
		name:   "rate limit with retry-after and retry-after-ms",
		script: []Response{{Error: &Error{Status: 429, Message: "slow down", RetryAfter: 1.5}}},
		body:   hello,
		status: 429,
		check: func(t *testing.T, a answer) {
			want := map[string]any{"error": map[string]any{"message": "slow down", "type": "requests", "param": nil, "code": "rate_limit_exceeded"}}
			if diff := cmp.Diff(want, a.body); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if a.header.Get("Retry-After") != "1.5" || a.header.Get("Retry-After-Ms") != "1500" {
				t.Errorf("retry headers = %q / %q", a.header.Get("Retry-After"), a.header.Get("Retry-After-Ms"))
			}
		},
	}, {
		name:   "scripted type is written as type and code",
		script: []Response{{Error: &Error{Type: "insufficient_quota"}}},
		body:   hello,
		status: 429,
		check: func(t *testing.T, a answer) {
			if str(t, a.body, "error", "type") != "insufficient_quota" || str(t, a.body, "error", "code") != "insufficient_quota" {
				t.Errorf("error = %v", a.body)
			}
		},
	}, {
		name:   "server error",
		script: []Response{{Error: &Error{Status: 503}}},
		body:   hello,
		status: 503,
		check: func(t *testing.T, a answer) {
			if str(t, a.body, "error", "type") != "server_error" || get(t, a.body, "error", "code") != nil {
				t.Errorf("error = %v", a.body)
			}
		},
	}}
	bad := []struct{ name, body, want string }{
		{"not JSON", `[`, "parse"},
		{"no model", `{"messages":[{"role":"user","content":"x"}]}`, "model"},
		{"no messages", `{"model":"m","messages":[]}`, "messages"},
		{"bad role", `{"model":"m","messages":[{"role":"robot","content":"x"}]}`, "messages.0.role"},
		{"bad content", `{"model":"m","messages":[{"role":"user","content":7}]}`, "messages.0.content"},
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
		}})
	}
	clock := func() time.Time { return time.Unix(1.7e9, 0) }
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv, url := Start(t, &Script{OpenAI: c.script}, WithClock(clock))
			a := post(t, url, "/v1/chat/completions", c.body)
			if a.status != c.status {
				t.Fatalf("status = %d, want %d: %s", a.status, c.status, a.raw)
			}
			c.check(t, a)
			if recs := srv.Requests(); len(recs) != 1 || recs[0].Status != c.status || recs[0].Endpoint != EndpointOpenAIChat {
				t.Errorf("record = %+v", recs)
			}
		})
	}
}
