package fakellm

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// sseEvent is one server-sent event: its name ("" when the stream names none) and data.
type sseEvent struct {
	name string
	data string
}

// parseSSE splits a server-sent event stream into its events.
func parseSSE(t *testing.T, raw string) []sseEvent {
	t.Helper()
	var out []sseEvent
	for _, block := range strings.Split(raw, "\n\n") {
		if strings.TrimSpace(block) == "" {
			continue
		}
		var ev sseEvent
		for _, line := range strings.Split(block, "\n") {
			switch {
			case strings.HasPrefix(line, "event: "):
				ev.name = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				ev.data = strings.TrimPrefix(line, "data: ")
			default:
				t.Fatalf("not an event line: %q", line)
			}
		}
		out = append(out, ev)
	}
	return out
}

func (e sseEvent) json(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(e.data), &m); err != nil {
		t.Fatalf("event %s: data is not a JSON object: %q", e.name, e.data)
	}
	return m
}

func TestChunks(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		n    int
		want []string
	}{
		{"", 4, nil},
		{"abcdefghij", 4, []string{"abcd", "efgh", "ij"}},
		{strings.Repeat("x", 40), 0, []string{strings.Repeat("x", 16), strings.Repeat("x", 16), strings.Repeat("x", 8)}},
		// Cuts move back to character boundaries; a character longer than n is one piece.
		{"héllo", 2, []string{"h", "é", "ll", "o"}},
		{"日本", 1, []string{"日", "本"}},
	}
	for _, c := range cases {
		got := chunks(c.in, c.n)
		if !cmp.Equal(got, c.want) {
			t.Errorf("chunks(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
		for _, p := range got {
			if !utf8.ValidString(p) {
				t.Errorf("chunks(%q, %d): piece %q is not valid UTF-8", c.in, c.n, p)
			}
		}
	}
}

// streamCase is one family's streaming request, and how to read its events back into the
// answer's text, tool calls (name and input) and output tokens.
type streamCase struct {
	family   string
	path     string
	body     string
	endpoint string
	script   func(...Response) *Script
	read     func(t *testing.T, evs []sseEvent) (text []string, calls [][2]string, output int)
}

var streamCases = []streamCase{
	{
		family: "anthropic", path: "/v1/messages", endpoint: EndpointAnthropicMessages,
		body:   `{"model":"m","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`,
		script: func(rs ...Response) *Script { return &Script{Anthropic: rs} },
		read: func(t *testing.T, evs []sseEvent) (text []string, calls [][2]string, output int) {
			var names []string
			for _, ev := range evs {
				names = append(names, ev.name)
				m := ev.json(t)
				if m["type"] != ev.name {
					t.Errorf("event %s has type %v", ev.name, m["type"])
				}
				switch ev.name {
				case "content_block_start":
					if cb := get(t, m, "content_block").(map[string]any); cb["type"] == "tool_use" {
						calls = append(calls, [2]string{cb["name"].(string), ""})
					}
				case "content_block_delta":
					switch d := get(t, m, "delta").(map[string]any); d["type"] {
					case "text_delta":
						text = append(text, d["text"].(string))
					case "input_json_delta":
						calls[len(calls)-1][1] += d["partial_json"].(string)
					}
				case "message_delta":
					output = num(t, m, "usage", "output_tokens")
				}
			}
			if names[0] != "message_start" || names[len(names)-1] != "message_stop" || names[len(names)-2] != "message_delta" {
				t.Errorf("events %v: want message_start … message_delta, message_stop", names)
			}
			return text, calls, output
		},
	},
	{
		family: "openai", path: "/v1/chat/completions", endpoint: EndpointOpenAIChat,
		body:   `{"model":"m","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}]}`,
		script: func(rs ...Response) *Script { return &Script{OpenAI: rs} },
		read: func(t *testing.T, evs []sseEvent) (text []string, calls [][2]string, output int) {
			if last := evs[len(evs)-1]; last.data != "[DONE]" {
				t.Fatalf("last event %q, want [DONE]", last.data)
			}
			evs = evs[:len(evs)-1]
			for i, ev := range evs {
				m := ev.json(t)
				if m["object"] != "chat.completion.chunk" || ev.name != "" {
					t.Errorf("chunk %d: %v", i, m)
				}
				if i == len(evs)-1 {
					// The usage chunk: no choices.
					if len(get(t, m, "choices").([]any)) != 0 {
						t.Errorf("usage chunk has choices: %v", m)
					}
					output = num(t, m, "usage", "completion_tokens")
					continue
				}
				if m["usage"] != nil {
					t.Errorf("chunk %d: usage %v before the last chunk", i, m["usage"])
				}
				d := get(t, m, "choices", 0, "delta").(map[string]any)
				if c, _ := d["content"].(string); c != "" {
					text = append(text, c)
				}
				tcs, _ := d["tool_calls"].([]any)
				for _, tc := range tcs {
					idx := num(t, tc, "index")
					if idx == len(calls) {
						calls = append(calls, [2]string{str(t, tc, "function", "name"), ""})
					}
					calls[idx][1] += str(t, tc, "function", "arguments")
				}
			}
			return text, calls, output
		},
	},
	{
		family: "gemini", path: "/v1beta/models/gemini-test:streamGenerateContent?alt=sse", endpoint: EndpointGeminiStream,
		body:   `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`,
		script: func(rs ...Response) *Script { return &Script{Gemini: rs} },
		read: func(t *testing.T, evs []sseEvent) (text []string, calls [][2]string, output int) {
			for i, ev := range evs {
				if ev.name != "" {
					t.Errorf("event %d is named %q: genai reads data lines only", i, ev.name)
				}
				m := ev.json(t)
				for _, p := range get(t, m, "candidates", 0, "content", "parts").([]any) {
					p := p.(map[string]any)
					if fc, ok := p["functionCall"].(map[string]any); ok {
						args, _ := json.Marshal(fc["args"])
						calls = append(calls, [2]string{fc["name"].(string), string(args)})
					} else {
						text = append(text, p["text"].(string))
					}
				}
				_, finished := get(t, m, "candidates", 0).(map[string]any)["finishReason"]
				if finished != (i == len(evs)-1) {
					t.Errorf("chunk %d of %d: finishReason present %v", i, len(evs), finished)
				}
				if i == len(evs)-1 {
					output = num(t, m, "usageMetadata", "candidatesTokenCount")
				}
			}
			return text, calls, output
		},
	},
}

// A streamed answer is the whole answer in pieces: the same text and tool calls, in deltas
// of chunk_size bytes, with the same token counts in the record; the record says it was
// streamed and when the first delta went out.
func TestStreamedAnswers(t *testing.T) {
	t.Parallel()
	entry := Response{
		Text:       "The answer, in pieces: forty-two.",
		ToolCalls:  []ToolCall{{Name: "read_file", Input: json.RawMessage(`{"path": "go.mod", "lines": [1, 2]}`)}},
		ChunkSize:  5,
		RepeatLast: true,
	}
	for _, c := range streamCases {
		t.Run(c.family, func(t *testing.T) {
			t.Parallel()
			srv, url := Start(t, c.script(entry))
			a := post(t, url, c.path, c.body)
			if a.status != 200 || !strings.HasPrefix(a.header.Get("Content-Type"), "text/event-stream") {
				t.Fatalf("status %d, content type %q: %s", a.status, a.header.Get("Content-Type"), a.raw)
			}
			text, calls, output := c.read(t, parseSSE(t, a.raw))
			if got := strings.Join(text, ""); got != entry.Text {
				t.Errorf("text %q, want %q", got, entry.Text)
			}
			if want := chunks(entry.Text, 5); !cmp.Equal(text, want) {
				t.Errorf("text deltas %q, want %q", text, want)
			}
			if len(calls) != 1 || calls[0][0] != "read_file" {
				t.Fatalf("tool calls %v", calls)
			}
			var in map[string]any
			if err := json.Unmarshal([]byte(calls[0][1]), &in); err != nil || in["path"] != "go.mod" {
				t.Errorf("tool input %q: %v", calls[0][1], err)
			}

			// The same entry answered whole counts the same tokens.
			whole := strings.Replace(strings.Replace(c.body, `"stream":true,`, "", 1), `"stream_options":{"include_usage":true},`, "", 1)
			wholePath := strings.Replace(c.path, ":streamGenerateContent?alt=sse", ":generateContent", 1)
			if b := post(t, url, wholePath, whole); b.status != 200 {
				t.Fatalf("whole answer: %d %s", b.status, b.raw)
			}
			recs := srv.Requests()
			if len(recs) != 2 {
				t.Fatalf("%d records", len(recs))
			}
			st, wh := recs[0], recs[1]
			if st.Endpoint != c.endpoint || !st.Stream || st.FirstDeltaAt.IsZero() || st.FirstDeltaAt.Before(st.Time) {
				t.Errorf("stream record: endpoint %s stream %v first delta %v (arrived %v)", st.Endpoint, st.Stream, st.FirstDeltaAt, st.Time)
			}
			if wh.Stream || !wh.FirstDeltaAt.IsZero() {
				t.Errorf("whole record: stream %v first delta %v", wh.Stream, wh.FirstDeltaAt)
			}
			if st.InputTokens != wh.InputTokens || st.OutputTokens != wh.OutputTokens || st.OutputTokens != output || output == 0 {
				t.Errorf("streamed %d in/%d out (answer says %d), whole %d in/%d out", st.InputTokens, st.OutputTokens, output, wh.InputTokens, wh.OutputTokens)
			}
		})
	}
}

// Gemini streams only as server-sent events; OpenAI sends no usage chunk unless asked.
func TestStreamRequestVariants(t *testing.T) {
	t.Parallel()
	_, url := Start(t, &Script{Gemini: []Response{{Text: "x"}}, OpenAI: []Response{{Text: "hello there", ChunkSize: 4}}})
	a := post(t, url, "/v1beta/models/g:streamGenerateContent", `{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	if a.status != 400 || !strings.Contains(a.raw, "alt=sse") {
		t.Errorf("without alt=sse: %d %s", a.status, a.raw)
	}
	a = post(t, url, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	evs := parseSSE(t, a.raw)
	for _, ev := range evs[:len(evs)-1] {
		if _, ok := ev.json(t)["usage"]; ok {
			t.Errorf("usage without stream_options.include_usage: %s", ev.data)
		}
	}
	if n := len(evs); n != 1+3+1+1 { // role, three content deltas, finish, [DONE]
		t.Errorf("%d events, want 6: %v", n, evs)
	}
}

// A scripted error is an error answer, not a stream; thinking streams where the request
// asks for it.
func TestStreamErrorsAndThinking(t *testing.T) {
	t.Parallel()
	_, url := Start(t, &Script{Anthropic: []Response{
		{Error: &Error{Status: 429, RetryAfter: 2}},
		{Thinking: "Let me think.", Text: "Done.", ChunkSize: 4},
	}})
	a := post(t, url, "/v1/messages", `{"model":"m","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if a.status != 429 || a.header.Get("Retry-After") != "2" || str(t, a.body, "error", "type") != "rate_limit_error" {
		t.Errorf("scripted error: %d %v %s", a.status, a.header, a.raw)
	}
	a = post(t, url, "/v1/messages", `{"model":"m","max_tokens":3000,"stream":true,"thinking":{"type":"enabled","budget_tokens":1024},"messages":[{"role":"user","content":"hi"}]}`)
	var thinking, signature string
	for _, ev := range parseSSE(t, a.raw) {
		if ev.name != "content_block_delta" {
			continue
		}
		switch d := ev.json(t)["delta"].(map[string]any); d["type"] {
		case "thinking_delta":
			thinking += d["thinking"].(string)
		case "signature_delta":
			signature = d["signature"].(string)
		}
	}
	if thinking != "Let me think." || signature == "" {
		t.Errorf("thinking %q signature %q", thinking, signature)
	}
}

// chunk_delay paces the deltas: the stream takes at least the delays between them.
func TestStreamChunkDelay(t *testing.T) {
	t.Parallel()
	const delay = 20 * time.Millisecond
	srv, url := Start(t, &Script{OpenAI: []Response{{Text: "abcdefgh", ChunkSize: 2, ChunkDelay: Duration(delay)}}})
	start := time.Now()
	a := post(t, url, "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	took := time.Since(start)
	if a.status != 200 {
		t.Fatal(a.raw)
	}
	// Four deltas: three delays between them.
	if took < 3*delay {
		t.Errorf("stream took %v, want at least %v", took, 3*delay)
	}
	if rec := srv.Requests()[0]; rec.FirstDeltaAt.Sub(rec.Time) > took-2*delay {
		t.Errorf("first delta at +%v of %v: the delay came before it", rec.FirstDeltaAt.Sub(rec.Time), took)
	}
}

// break_after breaks the stream off after that many text deltas: Anthropic with an
// overloaded_error event, OpenAI and Gemini by dropping the connection.
func TestStreamBreakAfter(t *testing.T) {
	t.Parallel()
	entry := Response{Text: "one two three four", ChunkSize: 4, BreakAfter: 2}
	for _, c := range streamCases {
		t.Run(c.family, func(t *testing.T) {
			t.Parallel()
			_, url := Start(t, c.script(entry))
			req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, url+c.path, strings.NewReader(c.body))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, readErr := io.ReadAll(resp.Body)
			var texts int
			evs := parseSSE(t, string(raw))
			for _, ev := range evs {
				if strings.Contains(ev.data, `"text_delta"`) || strings.Contains(ev.data, `"content":"`) && !strings.Contains(ev.data, `"content":""`) ||
					strings.Contains(ev.data, `"parts":[{"text"`) {
					texts++
				}
			}
			if texts != 2 {
				t.Errorf("%d text deltas before the break, want 2:\n%s", texts, raw)
			}
			if c.family == "anthropic" {
				last := evs[len(evs)-1]
				if readErr != nil || last.name != "error" || !strings.Contains(last.data, "overloaded_error") {
					t.Errorf("read error %v, last event %v", readErr, last)
				}
				return
			}
			if !errors.Is(readErr, io.ErrUnexpectedEOF) {
				t.Errorf("read error %v, want an unexpected EOF (the connection dropped)", readErr)
			}
		})
	}
}
