package fakellm

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestGeminiGenerateContent(t *testing.T) {
	t.Parallel()
	const hello = `{"systemInstruction":{"parts":[{"text":"be brief"}]},
		"contents":[{"role":"user","parts":[{"text":"hello"}]}],
		"generationConfig":{"maxOutputTokens":50}}`
	const path = "/v1beta/models/gemini-test:generateContent"
	cases := []struct {
		name   string
		path   string
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
				"candidates": []any{map[string]any{
					"content":      map[string]any{"role": "model", "parts": []any{map[string]any{"text": "Hello from a script."}}},
					"finishReason": "STOP", "index": 0.0,
				}},
				"usageMetadata": map[string]any{"promptTokenCount": 4.0, "candidatesTokenCount": 5.0, "totalTokenCount": 9.0},
				"modelVersion":  "gemini-test", "responseId": "fakellm-resp-1",
			}
			if diff := cmp.Diff(want, a.body); diff != "" {
				t.Errorf("answer (-want +got):\n%s", diff)
			}
		},
	}, {
		name:   "function call after a function response, v1 also served",
		path:   "/v1/models/gemini-test:generateContent",
		script: []Response{{ToolCalls: []ToolCall{{Name: "write_file", Input: json.RawMessage(`{"path":"a.go"}`)}}}},
		body: `{"tools":[{"functionDeclarations":[{"name":"write_file","parameters":{"type":"OBJECT"}}]}],
			"contents":[{"role":"user","parts":[{"text":"go"}]},
			{"role":"model","parts":[{"functionCall":{"name":"read","args":{}}}]},
			{"role":"user","parts":[{"functionResponse":{"name":"read","response":{"ok":true}}}]}]}`,
		status: 200,
		check: func(t *testing.T, a answer) {
			want := []any{map[string]any{"functionCall": map[string]any{"name": "write_file", "args": map[string]any{"path": "a.go"}}}}
			if diff := cmp.Diff(want, get(t, a.body, "candidates", 0, "content", "parts")); diff != "" {
				t.Errorf("parts (-want +got):\n%s", diff)
			}
		},
	}, {
		name:   "max tokens",
		script: []Response{{Text: "cut", StopReason: "length"}},
		body:   hello,
		status: 200,
		check: func(t *testing.T, a answer) {
			if got := str(t, a.body, "candidates", 0, "finishReason"); got != "MAX_TOKENS" {
				t.Errorf("finishReason = %q", got)
			}
		},
	}, {
		name:   "resource exhausted",
		script: []Response{{Error: &Error{Status: 429, Message: "quota", RetryAfter: 3}}},
		body:   hello,
		status: 429,
		check: func(t *testing.T, a answer) {
			want := map[string]any{"error": map[string]any{"code": 429.0, "message": "quota", "status": "RESOURCE_EXHAUSTED"}}
			if diff := cmp.Diff(want, a.body); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if a.header.Get("Retry-After") != "3" {
				t.Errorf("Retry-After = %q", a.header.Get("Retry-After"))
			}
		},
	}, {
		name:   "status from type",
		script: []Response{{Error: &Error{Type: "UNAVAILABLE"}}},
		body:   hello,
		status: 503,
		check: func(t *testing.T, a answer) {
			if str(t, a.body, "error", "status") != "UNAVAILABLE" {
				t.Errorf("error = %v", a.body)
			}
		},
	}}
	bad := []struct{ name, body, want string }{
		{"not JSON", `{"contents":`, "Invalid JSON"},
		{"no contents", `{"contents":[]}`, "contents"},
		{"bad role", `{"contents":[{"role":"assistant","parts":[{"text":"x"}]}]}`, "role"},
		{"no parts", `{"contents":[{"role":"user","parts":[]}]}`, "parts"},
	}
	for _, b := range bad {
		cases = append(cases, struct {
			name   string
			path   string
			script []Response
			body   string
			status int
			check  func(t *testing.T, a answer)
		}{"bad request: " + b.name, "", []Response{{Text: "unused"}}, b.body, 400, func(t *testing.T, a answer) {
			if str(t, a.body, "error", "status") != "INVALID_ARGUMENT" || !strings.Contains(str(t, a.body, "error", "message"), b.want) {
				t.Errorf("error = %v, want INVALID_ARGUMENT mentioning %q", a.body, b.want)
			}
		}})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			srv, url := Start(t, &Script{Gemini: c.script})
			p := c.path
			if p == "" {
				p = path
			}
			a := post(t, url, p, c.body)
			if a.status != c.status {
				t.Fatalf("status = %d, want %d: %s", a.status, c.status, a.raw)
			}
			c.check(t, a)
			if recs := srv.Requests(); len(recs) != 1 || recs[0].Model != "gemini-test" || recs[0].Endpoint != EndpointGeminiGenerate {
				t.Errorf("record = %+v", recs)
			}
		})
	}
}

func TestGeminiUnknownPaths(t *testing.T) {
	t.Parallel()
	_, url := Start(t, &Script{Gemini: []Response{{Text: "x"}}})
	for _, p := range []string{
		"/v1beta/models/gemini-test:countTokens",
		"/v2/models/gemini-test:generateContent",
		"/v1beta/models/gemini-test",
		"/v1beta/models/:generateContent",
	} {
		if a := post(t, url, p, `{}`); a.status != 404 || str(t, a.body, "error", "status") != "NOT_FOUND" {
			t.Errorf("POST %s: %d %s, want a 404 in Gemini's shape", p, a.status, a.raw)
		}
	}
}
