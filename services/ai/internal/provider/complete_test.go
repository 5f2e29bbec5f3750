package provider_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/thefold/thefold/pkg/fakellm"
	"github.com/thefold/thefold/services/ai/internal/llm"
	"github.com/thefold/thefold/services/ai/internal/provider"
)

func TestCompleteText(t *testing.T) {
	t.Parallel()
	temp := 0.25
	req := llm.Request{
		Model:         "test-model",
		System:        []llm.Segment{{Text: "You are terse."}, {Text: "Answer in English."}},
		Messages:      []llm.Message{llm.UserText("What is six times seven?")},
		MaxTokens:     100,
		Temperature:   &temp,
		StopSequences: []string{"END"},
	}
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, f, f.script(fakellm.Response{Text: "The answer is 42."}), nil)
			resp, err := s.p.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.Text != "The answer is 42." || resp.StopReason != llm.StopEndTurn || len(resp.ToolUses) != 0 {
				t.Errorf("resp = %+v, want the scripted text ending the turn", resp)
			}
			if resp.Model != "test-model" {
				t.Errorf("Model = %q, want test-model", resp.Model)
			}
			recs := s.srv.Requests()
			if len(recs) != 1 || recs[0].Endpoint != f.endpoint || recs[0].Model != "test-model" {
				t.Fatalf("recorded %+v, want one %s call for test-model", recs, f.endpoint)
			}
			want := llm.Usage{InputTokens: int64(recs[0].InputTokens), OutputTokens: int64(recs[0].OutputTokens)}
			if resp.Usage != want || want.InputTokens == 0 || want.OutputTokens == 0 {
				t.Errorf("Usage = %+v, want %+v (what fakellm counted)", resp.Usage, want)
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
					{[]any{"system", 0, "text"}, "You are terse."},
					{[]any{"system", 1, "text"}, "Answer in English."},
					{[]any{"messages", 0, "content", 0, "text"}, "What is six times seven?"},
					{[]any{"max_tokens"}, 100.0}, {[]any{"temperature"}, 0.25}, {[]any{"stop_sequences", 0}, "END"},
				}
			case "openai", "openai-compatible":
				maxKey := "max_completion_tokens"
				if f.name == "openai-compatible" {
					maxKey = "max_tokens" // what Ollama and vLLM understand
				}
				checks = []check{
					{[]any{"messages", 0, "role"}, "system"},
					{[]any{"messages", 0, "content"}, "You are terse.\n\nAnswer in English."},
					{[]any{"messages", 1, "content"}, "What is six times seven?"},
					{[]any{maxKey}, 100.0}, {[]any{"temperature"}, 0.25}, {[]any{"stop", 0}, "END"},
				}
			case "gemini":
				checks = []check{
					{[]any{"systemInstruction", "parts", 1, "text"}, "Answer in English."},
					{[]any{"contents", 0, "role"}, "user"},
					{[]any{"contents", 0, "parts", 0, "text"}, "What is six times seven?"},
					{[]any{"generationConfig", "maxOutputTokens"}, 100.0},
					{[]any{"generationConfig", "temperature"}, 0.25},
					{[]any{"generationConfig", "stopSequences", 0}, "END"},
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

func TestAnthropicDefaultMaxTokens(t *testing.T) {
	t.Parallel()
	f := families[0]
	s := start(t, f, f.script(fakellm.Response{Text: "ok"}), nil)
	if _, err := s.p.Complete(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{llm.UserText("hi")}}); err != nil {
		t.Fatal(err)
	}
	if got := dig(bodies(t, s.srv, f.endpoint)[0], "max_tokens"); got != float64(provider.DefaultMaxTokens) {
		t.Errorf("max_tokens = %v, want %d", got, provider.DefaultMaxTokens)
	}
}

func TestStopReasons(t *testing.T) {
	t.Parallel()
	cases := []struct {
		scripted string
		want     map[string]llm.StopReason // by family; "" for the rest
	}{
		{"end_turn", map[string]llm.StopReason{"": llm.StopEndTurn}},
		{"max_tokens", map[string]llm.StopReason{"": llm.StopMaxTokens}},
		// Only Anthropic tells a stop sequence from the end of a turn.
		{"stop_sequence", map[string]llm.StopReason{"anthropic": llm.StopSequence, "": llm.StopEndTurn}},
	}
	for _, f := range families {
		for _, tc := range cases {
			t.Run(f.name+"/"+tc.scripted, func(t *testing.T) {
				t.Parallel()
				want, ok := tc.want[f.name]
				if !ok {
					want = tc.want[""]
				}
				s := start(t, f, f.script(fakellm.Response{Text: "partial", StopReason: tc.scripted}), nil)
				resp, err := s.p.Complete(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{llm.UserText("go")}, StopSequences: []string{"END"}})
				if err != nil {
					t.Fatal(err)
				}
				if resp.StopReason != want {
					t.Errorf("StopReason = %v, want %v", resp.StopReason, want)
				}
			})
		}
	}
}

// A second call with the same stable prefix reads it from the cache, and llm.Usage counts
// the cached tokens inside InputTokens for every family.
func TestPromptCache(t *testing.T) {
	t.Parallel()
	stable := strings.Repeat("Repository context that does not change between calls. ", 40)
	ask := func(q string) llm.Request {
		return llm.Request{
			Model:    "m",
			System:   []llm.Segment{{Text: "You write Go.", Cache: false}, {Text: stable, Cache: true}},
			Messages: []llm.Message{llm.UserText(q)},
		}
	}
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, f, f.script(fakellm.Response{Text: "ok", RepeatLast: true}), nil)
			var usages []llm.Usage
			for _, q := range []string{"Write the handler.", "Now fix the test."} {
				resp, err := s.p.Complete(context.Background(), ask(q))
				if err != nil {
					t.Fatal(err)
				}
				usages = append(usages, resp.Usage)
			}
			recs := s.srv.Requests()
			for i, u := range usages {
				r := recs[i]
				want := llm.Usage{
					InputTokens: int64(r.InputTokens), OutputTokens: int64(r.OutputTokens),
					CacheReadTokens: int64(r.CacheReadTokens), CacheWriteTokens: int64(r.CacheWriteTokens),
				}
				if u != want {
					t.Errorf("call %d: Usage = %+v, want %+v", i, u, want)
				}
			}
			if usages[0].CacheReadTokens != 0 {
				t.Errorf("first call read %d tokens from an empty cache", usages[0].CacheReadTokens)
			}
			if r := usages[1].CacheReadTokens; r == 0 || r >= usages[1].InputTokens {
				t.Errorf("second call: cache read %d of %d input tokens, want the stable prefix", r, usages[1].InputTokens)
			}
			if f.name == "anthropic" {
				if usages[0].CacheWriteTokens == 0 {
					t.Error("first call wrote nothing to the cache")
				}
				b := bodies(t, s.srv, f.endpoint)[0]
				if dig(b, "system", 1, "cache_control", "type") != "ephemeral" || dig(b, "system", 0, "cache_control") != nil {
					t.Errorf("system = %v, want cache_control on the stable segment only", dig(b, "system"))
				}
			}
		})
	}
}

// Anthropic takes at most four breakpoints: the last four are kept.
func TestAnthropicCacheBreakpoints(t *testing.T) {
	t.Parallel()
	f := families[0]
	s := start(t, f, f.script(fakellm.Response{Text: "ok"}), nil)
	req := llm.Request{
		Model:  "m",
		System: []llm.Segment{{Text: "s1", Cache: true}, {Text: "s2", Cache: true}, {Text: "s3", Cache: true}},
		Messages: []llm.Message{
			{Role: llm.RoleUser, Blocks: []llm.Block{{Kind: llm.BlockText, Text: "file a", Cache: true}, llm.Text("question")}},
			{Role: llm.RoleAssistant, Blocks: []llm.Block{llm.Text("answer")}},
			{Role: llm.RoleUser, Blocks: []llm.Block{{Kind: llm.BlockText, Text: "follow-up", Cache: true}}},
		},
	}
	if _, err := s.p.Complete(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	b := bodies(t, s.srv, f.endpoint)[0]
	var marked []string
	for i := range 3 {
		if dig(b, "system", i, "cache_control") != nil {
			marked = append(marked, dig(b, "system", i, "text").(string))
		}
	}
	for i := range 3 {
		for j := range 2 {
			if dig(b, "messages", i, "content", j, "cache_control") != nil {
				marked = append(marked, dig(b, "messages", i, "content", j, "text").(string))
			}
		}
	}
	if want := []string{"s2", "s3", "file a", "follow-up"}; !cmp.Equal(marked, want) {
		t.Errorf("breakpoints on %v, want %v", marked, want)
	}
}

func TestJSONMode(t *testing.T) {
	t.Parallel()
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, f, f.script(fakellm.Response{Text: `{"ok":true}`}), nil)
			resp, err := s.p.Complete(context.Background(), llm.Request{Model: "m", Messages: []llm.Message{llm.UserText("answer in JSON")}, JSON: true})
			if err != nil || resp.Text != `{"ok":true}` {
				t.Fatalf("Complete = %+v, %v", resp, err)
			}
			b := bodies(t, s.srv, f.endpoint)[0]
			var got, want any
			switch f.name {
			case "anthropic":
				// No JSON mode: the prompt asks, nothing else is sent.
				got, want = dig(b, "response_format"), nil
			case "openai", "openai-compatible":
				got, want = dig(b, "response_format", "type"), "json_object"
			case "gemini":
				got, want = dig(b, "generationConfig", "responseMimeType"), "application/json"
			}
			if got != want {
				t.Errorf("JSON mode sent as %#v, want %#v", got, want)
			}
		})
	}
}

func TestEmbed(t *testing.T) {
	t.Parallel()
	texts := []string{"func main() {}", "package main"}
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, f, &fakellm.Script{Embeddings: []fakellm.Response{{RepeatLast: true}}}, nil)
			resp, err := s.p.Embed(context.Background(), llm.EmbedRequest{Model: "embed-model", Texts: texts, Dimensions: 16})
			if !f.embeds() {
				if !errors.Is(err, llm.ErrUnsupported) || resp != nil {
					t.Fatalf("Embed = %v, %v; want ErrUnsupported", resp, err)
				}
				if len(s.srv.Requests()) != 0 {
					t.Error("an unsupported call reached the server")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.Vectors) != len(texts) {
				t.Fatalf("%d vectors for %d texts", len(resp.Vectors), len(texts))
			}
			for i, v := range resp.Vectors {
				var want []float32
				for _, x := range fakellm.Embed(texts[i], 16) {
					want = append(want, float32(x))
				}
				if !cmp.Equal(v, want) {
					t.Errorf("vector %d = %v, want fakellm's %v", i, v, want)
				}
				var norm float64
				for _, x := range v {
					norm += float64(x) * float64(x)
				}
				if math.Abs(norm-1) > 1e-3 {
					t.Errorf("vector %d has norm² %f", i, norm)
				}
			}
			recs := s.srv.Requests()
			if len(recs) != 1 || recs[0].Endpoint != f.embedEndpoint || recs[0].Model != "embed-model" {
				t.Fatalf("recorded %+v, want one %s call", recs, f.embedEndpoint)
			}
			if int64(recs[0].InputTokens) != resp.Usage.InputTokens && f.name != "gemini" {
				t.Errorf("Usage.InputTokens = %d, fakellm counted %d", resp.Usage.InputTokens, recs[0].InputTokens)
			}
			// No texts, no call.
			empty, err := s.p.Embed(context.Background(), llm.EmbedRequest{Model: "embed-model"})
			if err != nil || len(empty.Vectors) != 0 || len(s.srv.Requests()) != 1 {
				t.Errorf("Embed of nothing = %+v, %v after %d requests", empty, err, len(s.srv.Requests()))
			}
		})
	}
}

// The engine shares one client between calls: concurrent use must be safe (run with -race)
// and each call must get its own answer and usage.
func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			var rs []fakellm.Response
			for i := range 8 {
				rs = append(rs, fakellm.Response{Match: fmt.Sprintf("question %d$", i), Text: fmt.Sprintf("answer %d", i)})
			}
			s := start(t, f, f.script(rs...), nil)
			var wg sync.WaitGroup
			errs := make(chan error, 8)
			for i := range 8 {
				wg.Go(func() {
					ctx, counter := llm.WithAttemptCounter(context.Background())
					resp, err := s.p.Complete(ctx, llm.Request{Model: "m", Messages: []llm.Message{llm.UserText(fmt.Sprintf("question %d", i))}})
					switch {
					case err != nil:
						errs <- err
					case resp.Text != fmt.Sprintf("answer %d", i) || resp.Usage.InputTokens == 0 || *counter != 1:
						errs <- fmt.Errorf("question %d: %+v after %d attempts", i, resp, *counter)
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}
