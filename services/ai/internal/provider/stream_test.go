package provider_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/thefold/thefold/pkg/fakellm"
	"github.com/thefold/thefold/services/ai/internal/llm"
)

// collect records what a stream delivers.
type collect struct {
	text  []string
	tools []llm.Block
	order []string // "text" or "tool", as delivered
}

func (c *collect) on(d llm.Delta) error {
	switch {
	case d.ToolUse != nil:
		c.tools = append(c.tools, *d.ToolUse)
		c.order = append(c.order, "tool")
	default:
		c.text = append(c.text, d.Text)
		c.order = append(c.order, "text")
	}
	return nil
}

// Streaming through each SDK against fakellm's event streams: the text arrives in the
// scripted pieces, each tool call once complete, and the response is the one Complete
// returns for the same answer (tool call ids aside: fakellm numbers every answer's anew),
// with the usage fakellm counted.
func TestStreamTextAndTools(t *testing.T) {
	t.Parallel()
	entry := fakellm.Response{
		Text: "The module is example.com/x; reading two files.",
		ToolCalls: []fakellm.ToolCall{
			{Name: "read_file", Input: json.RawMessage(`{"path":"go.mod","lines":[1,2]}`)},
			{Name: "list_dir"},
		},
		ChunkSize:  6,
		RepeatLast: true,
	}
	tools := []llm.Tool{{Name: "read_file"}, {Name: "list_dir"}}
	req := llm.Request{Model: "test-model", Messages: []llm.Message{llm.UserText("What is the module?")}, Tools: tools, MaxTokens: 200}
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, f, f.script(entry), nil)
			var got collect
			streamed, err := llm.Stream(context.Background(), s.p, req, got.on)
			if err != nil {
				t.Fatal(err)
			}
			// A server of its own, so its prompt cache does not count the stream's prefix.
			whole, err := start(t, f, f.script(entry), nil).p.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			wantPieces := (len(entry.Text) + 5) / 6
			if len(got.text) != wantPieces || strings.Join(got.text, "") != entry.Text {
				t.Errorf("text deltas %q, want %d pieces of the scripted text", got.text, wantPieces)
			}
			if want := []string{"tool", "tool"}; !cmp.Equal(got.order[len(got.order)-2:], want) || len(got.order) != wantPieces+2 {
				t.Errorf("delivered %v, want the text then two tool calls", got.order)
			}
			if diff := cmp.Diff(streamed.ToolUses, got.tools); diff != "" {
				t.Errorf("delivered tool calls differ from the response's (-response +delivered):\n%s", diff)
			}
			if got.tools[0].ToolName != "read_file" || got.tools[0].ToolUseID == "" || string(got.tools[1].Input) != "{}" {
				t.Errorf("tool calls %+v", got.tools)
			}
			var in map[string]any
			if err := json.Unmarshal(got.tools[0].Input, &in); err != nil || in["path"] != "go.mod" {
				t.Errorf("input %s: %v", got.tools[0].Input, err)
			}
			var opts []cmp.Option
			if f.name != "gemini" { // Gemini's ids are the client's numbering: the same
				opts = append(opts, cmpopts.IgnoreFields(llm.Block{}, "ToolUseID"))
			}
			if diff := cmp.Diff(whole, streamed, opts...); diff != "" {
				t.Errorf("streamed response differs from Complete's (-complete +stream):\n%s", diff)
			}
			if streamed.StopReason != llm.StopToolUse || streamed.Model != "test-model" {
				t.Errorf("stop %v model %q", streamed.StopReason, streamed.Model)
			}
			recs := s.srv.Requests()
			if len(recs) != 1 || !recs[0].Stream {
				t.Fatalf("records %+v: want one streamed request", recs)
			}
			if u := streamed.Usage; u.InputTokens != int64(recs[0].InputTokens) || u.OutputTokens != int64(recs[0].OutputTokens) || u.OutputTokens == 0 {
				t.Errorf("usage %+v, fakellm counted %d in, %d out", u, recs[0].InputTokens, recs[0].OutputTokens)
			}
			body := map[string]any{}
			if err := json.Unmarshal(recs[0].Body, &body); err != nil {
				t.Fatal(err)
			}
			switch f.name {
			case "anthropic":
				if body["stream"] != true {
					t.Errorf("stream = %v", body["stream"])
				}
			case "openai", "openai-compatible":
				if body["stream"] != true || dig(body, "stream_options", "include_usage") != true {
					t.Errorf("stream = %v, stream_options = %v", body["stream"], body["stream_options"])
				}
			case "gemini":
				if recs[0].Endpoint != fakellm.EndpointGeminiStream {
					t.Errorf("endpoint %s", recs[0].Endpoint)
				}
			}
		})
	}
}

// A stream is retried while nothing was delivered (a 429 before the first event), never
// after (a stream that broke off mid-text): the caller holds part of a reply. An error of
// the caller's callback ends the call as it is.
func TestStreamRetries(t *testing.T) {
	t.Parallel()
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			t.Run("before the first delta", func(t *testing.T) {
				t.Parallel()
				s := start(t, f, f.script(fail(429, 1), fakellm.Response{Text: "second try", ChunkSize: 3}), nil)
				var got collect
				resp, err := llm.Stream(context.Background(), s.p, llm.Request{Model: "m", Messages: []llm.Message{llm.UserText("hi")}}, got.on)
				if err != nil {
					t.Fatal(err)
				}
				if resp.Text != "second try" || strings.Join(got.text, "") != "second try" || len(s.srv.Requests()) != 2 {
					t.Errorf("text %q, delivered %q after %d requests", resp.Text, got.text, len(s.srv.Requests()))
				}
			})
			t.Run("after the first delta", func(t *testing.T) {
				t.Parallel()
				s := start(t, f, f.script(fakellm.Response{Text: "a reply that breaks", ChunkSize: 4, BreakAfter: 2}, ok()), nil)
				var got collect
				_, err := llm.Stream(context.Background(), s.p, llm.Request{Model: "m", Messages: []llm.Message{llm.UserText("hi")}}, got.on)
				pe, isProvider := llm.AsError(err)
				if !isProvider || !pe.Retryable() {
					t.Fatalf("err = %v, want a retryable provider error (retried only because nothing was delivered)", err)
				}
				if f.name == "anthropic" && pe.Kind != llm.KindOverloaded {
					t.Errorf("kind %v, want overloaded (the error event's type)", pe.Kind)
				}
				if len(got.text) != 2 || len(s.srv.Requests()) != 1 || len(s.waits.all()) != 0 {
					t.Errorf("delivered %q, %d requests, waits %v: want 2 deltas and no retry", got.text, len(s.srv.Requests()), s.waits.all())
				}
			})
			t.Run("the caller's error", func(t *testing.T) {
				t.Parallel()
				s := start(t, f, f.script(fakellm.Response{Text: "a long enough reply", ChunkSize: 2}, ok()), nil)
				stop := errors.New("the client went away")
				n := 0
				_, err := llm.Stream(context.Background(), s.p, llm.Request{Model: "m", Messages: []llm.Message{llm.UserText("hi")}},
					func(llm.Delta) error {
						n++
						return stop
					})
				if err != stop || n != 1 || len(s.srv.Requests()) != 1 {
					t.Errorf("err = %v after %d deltas and %d requests, want the callback's error as it is, at once", err, n, len(s.srv.Requests()))
				}
			})
		})
	}
}

// An image in a user message reaches each provider in its own format; an image in an
// assistant message is a request the client refuses before sending anything.
func TestImages(t *testing.T) {
	t.Parallel()
	png := []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR fake pixels")
	const b64 = "iVBORw0KGgoAAAANSUhEUiBmYWtlIHBpeGVscw=="
	req := llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.RoleUser, Blocks: []llm.Block{
		llm.Text("What is in this picture?"), llm.Image("image/png", png),
	}}}}
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, f, f.script(fakellm.Response{Text: "A cat.", RepeatLast: true}), nil)
			if _, err := s.p.Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			if _, err := llm.Stream(context.Background(), s.p, req, func(llm.Delta) error { return nil }); err != nil {
				t.Fatal(err)
			}
			for i, r := range s.srv.Requests() {
				var b map[string]any
				if err := json.Unmarshal(r.Body, &b); err != nil {
					t.Fatal(err)
				}
				type check struct {
					path []any
					want any
				}
				var checks []check
				switch f.name {
				case "anthropic":
					checks = []check{
						{[]any{"messages", 0, "content", 0, "text"}, "What is in this picture?"},
						{[]any{"messages", 0, "content", 1, "type"}, "image"},
						{[]any{"messages", 0, "content", 1, "source", "type"}, "base64"},
						{[]any{"messages", 0, "content", 1, "source", "media_type"}, "image/png"},
						{[]any{"messages", 0, "content", 1, "source", "data"}, b64},
					}
				case "openai", "openai-compatible":
					checks = []check{
						{[]any{"messages", 0, "role"}, "user"},
						{[]any{"messages", 0, "content", 0, "type"}, "text"},
						{[]any{"messages", 0, "content", 0, "text"}, "What is in this picture?"},
						{[]any{"messages", 0, "content", 1, "type"}, "image_url"},
						{[]any{"messages", 0, "content", 1, "image_url", "url"}, "data:image/png;base64," + b64},
					}
				case "gemini":
					checks = []check{
						{[]any{"contents", 0, "parts", 0, "text"}, "What is in this picture?"},
						{[]any{"contents", 0, "parts", 1, "inlineData", "mimeType"}, "image/png"},
						{[]any{"contents", 0, "parts", 1, "inlineData", "data"}, b64},
					}
				}
				for _, c := range checks {
					if got := dig(b, c.path...); got != c.want {
						t.Errorf("request %d %v = %#v, want %#v", i+1, c.path, got, c.want)
					}
				}
			}
			bad := llm.Request{Model: "m", Messages: []llm.Message{
				{Role: llm.RoleUser, Blocks: []llm.Block{llm.Text("hi")}},
				{Role: llm.RoleAssistant, Blocks: []llm.Block{llm.Image("image/png", png)}},
				llm.UserText("and?"),
			}}
			before := len(s.srv.Requests())
			_, err := s.p.Complete(context.Background(), bad)
			if pe, ok := llm.AsError(err); !ok || pe.Kind != llm.KindBadRequest || !strings.Contains(err.Error(), "user message") {
				t.Errorf("image from the assistant: err = %v, want a bad request", err)
			}
			if len(s.srv.Requests()) != before {
				t.Errorf("the refused request was sent")
			}
		})
	}
}
