package fakellm

import (
	"strings"
	"testing"
)

// anthropicBody builds a Messages request: a system block of system (cached when
// cacheSystem) and alternating user/assistant text messages, the one at cacheAt (if ≥ 0)
// carrying a cache_control breakpoint.
func anthropicBody(t *testing.T, model, system string, cacheSystem bool, msgs []string, cacheAt int) string {
	t.Helper()
	sys := map[string]any{"type": "text", "text": system}
	if cacheSystem {
		sys["cache_control"] = map[string]any{"type": "ephemeral"}
	}
	var messages []any
	for i, m := range msgs {
		block := map[string]any{"type": "text", "text": m}
		if i == cacheAt {
			block["cache_control"] = map[string]any{"type": "ephemeral"}
		}
		role := "user"
		if i%2 == 1 {
			role = "assistant"
		}
		messages = append(messages, map[string]any{"role": role, "content": []any{block}})
	}
	return mustJSON(t, map[string]any{"model": model, "max_tokens": 10, "system": []any{sys}, "messages": messages})
}

func TestAnthropicPromptCache(t *testing.T) {
	t.Parallel()
	sys := strings.Repeat("s", 400)  // 100 tokens
	sys2 := strings.Repeat("t", 400) // another 100-token system prompt
	turn := strings.Repeat("u", 40)  // 10 tokens each
	type usage struct{ input, read, write int }
	// Each case is a sequence of requests to one fresh server; want is each answer's usage
	// (input_tokens on the wire, which leaves out cache reads and writes).
	cases := []struct {
		name      string
		minTokens int
		bodies    []string
		want      []usage
	}{{
		name:   "same cached system prompt is read the second time",
		bodies: []string{anthropicBody(t, "m", sys, true, []string{"hi"}, -1), anthropicBody(t, "m", sys, true, []string{"hi"}, -1)},
		want:   []usage{{1, 0, 100}, {1, 100, 0}},
	}, {
		name:   "a changed system prompt is written, not read",
		bodies: []string{anthropicBody(t, "m", sys, true, []string{"hi"}, -1), anthropicBody(t, "m", sys2, true, []string{"hi"}, -1)},
		want:   []usage{{1, 0, 100}, {1, 0, 100}},
	}, {
		name:   "another model has its own cache",
		bodies: []string{anthropicBody(t, "m", sys, true, []string{"hi"}, -1), anthropicBody(t, "other", sys, true, []string{"hi"}, -1)},
		want:   []usage{{1, 0, 100}, {1, 0, 100}},
	}, {
		name:   "no breakpoint, no caching",
		bodies: []string{anthropicBody(t, "m", sys, false, []string{"hi"}, -1), anthropicBody(t, "m", sys, false, []string{"hi"}, -1)},
		want:   []usage{{101, 0, 0}, {101, 0, 0}},
	}, {
		name: "a conversation moving its breakpoint forward reads the previous turn",
		bodies: []string{
			anthropicBody(t, "m", sys, true, []string{turn}, 0),
			anthropicBody(t, "m", sys, true, []string{turn, turn, turn}, 2),
			anthropicBody(t, "m", sys, true, []string{turn, turn, turn, turn, turn}, 4),
		},
		want: []usage{{0, 0, 110}, {0, 110, 20}, {0, 130, 20}},
	}, {
		name: "a changed earlier message invalidates the later breakpoint but not the system",
		bodies: []string{
			anthropicBody(t, "m", sys, true, []string{turn, turn, turn}, 2),
			anthropicBody(t, "m", sys, true, []string{strings.Repeat("v", 40), turn, turn}, 2),
		},
		want: []usage{{0, 0, 130}, {0, 100, 30}},
	}, {
		name:      "prefixes under the minimum are not cached",
		minTokens: 1024,
		bodies:    []string{anthropicBody(t, "m", sys, true, []string{"hi"}, -1), anthropicBody(t, "m", sys, true, []string{"hi"}, -1)},
		want:      []usage{{101, 0, 0}, {101, 0, 0}},
	}, {
		name: "cached tools come before the system prompt",
		bodies: []string{
			`{"model":"m","max_tokens":5,"tools":[{"name":"` + strings.Repeat("n", 36) + `","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],` +
				`"system":"` + sys + `","messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"m","max_tokens":5,"tools":[{"name":"` + strings.Repeat("n", 36) + `","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}],` +
				`"system":"` + sys2 + `","messages":[{"role":"user","content":"hi"}]}`,
		},
		// The tool is 36 + 17 (schema) = 53 bytes → 14 tokens; the whole prompt 455 → 114.
		want: []usage{{100, 0, 14}, {100, 14, 0}},
	}}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			script := &Script{Anthropic: []Response{{Text: "ok", RepeatLast: true}}, MinCacheTokens: c.minTokens}
			srv, url := Start(t, script)
			for i, body := range c.bodies {
				a := post(t, url, "/v1/messages", body)
				if a.status != 200 {
					t.Fatalf("request %d: %d %s", i, a.status, a.raw)
				}
				got := usage{num(t, a.body, "usage", "input_tokens"), num(t, a.body, "usage", "cache_read_input_tokens"),
					num(t, a.body, "usage", "cache_creation_input_tokens")}
				if got != c.want[i] {
					t.Errorf("request %d: usage {input read write} = %v, want %v", i, got, c.want[i])
				}
				rec := srv.Requests()[i]
				if rec.InputTokens != got.input+got.read+got.write || rec.CacheReadTokens != got.read || rec.CacheWriteTokens != got.write {
					t.Errorf("request %d: record %+v does not match the answer %v", i, rec, got)
				}
			}
		})
	}
}

func TestAutomaticPromptCache(t *testing.T) {
	t.Parallel()
	sys := strings.Repeat("s", 400) // 100 tokens
	openAI := func(system, user string) string {
		return mustJSON(t, map[string]any{"model": "gpt-test", "messages": []any{
			map[string]any{"role": "system", "content": system}, map[string]any{"role": "user", "content": user},
		}})
	}
	gemini := func(system, user string) string {
		return mustJSON(t, map[string]any{
			"systemInstruction": map[string]any{"parts": []any{map[string]any{"text": system}}},
			"contents":          []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": user}}}},
		})
	}
	cases := []struct {
		name   string
		path   string
		build  func(system, user string) string
		cached func(t *testing.T, body map[string]any) (prompt, cached int)
	}{
		{"openai", "/v1/chat/completions", openAI, func(t *testing.T, b map[string]any) (int, int) {
			return num(t, b, "usage", "prompt_tokens"), num(t, b, "usage", "prompt_tokens_details", "cached_tokens")
		}},
		{"gemini", "/v1beta/models/gemini-test:generateContent", gemini, func(t *testing.T, b map[string]any) (int, int) {
			cached := 0
			if v, ok := get(t, b, "usageMetadata").(map[string]any)["cachedContentTokenCount"]; ok {
				cached = int(v.(float64))
			}
			return num(t, b, "usageMetadata", "promptTokenCount"), cached
		}},
	}
	// system 400 bytes + "hello"/"other" 5 bytes = 405 → 102 tokens.
	steps := []struct {
		system, user   string
		prompt, cached int
	}{
		{sys, "hello", 102, 0},
		{sys, "hello", 102, 102},                          // the whole prompt again
		{sys, "other", 102, 100},                          // same system, new message
		{strings.Repeat("t", 400), "hello", 102, 0},       // changed prefix
		{strings.Repeat("t", 400), "hello", 102, 102},     // …now seen
		{strings.Repeat("s", 399) + "x", "hello", 102, 0}, // one byte differs
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			script := &Script{OpenAI: []Response{{Text: "ok", RepeatLast: true}}, Gemini: []Response{{Text: "ok", RepeatLast: true}}}
			srv, url := Start(t, script)
			for i, s := range steps {
				a := post(t, url, c.path, c.build(s.system, s.user))
				if a.status != 200 {
					t.Fatalf("step %d: %d %s", i, a.status, a.raw)
				}
				prompt, cached := c.cached(t, a.body)
				if prompt != s.prompt || cached != s.cached {
					t.Errorf("step %d: prompt %d cached %d, want %d %d", i, prompt, cached, s.prompt, s.cached)
				}
				if rec := srv.Requests()[i]; rec.InputTokens != prompt || rec.CacheReadTokens != cached || rec.CacheWriteTokens != 0 {
					t.Errorf("step %d: record %+v", i, rec)
				}
			}
			// Reset forgets the cache.
			srv.Reset()
			a := post(t, url, c.path, c.build(sys, "hello"))
			if _, cached := c.cached(t, a.body); cached != 0 {
				t.Errorf("after Reset: cached %d, want 0", cached)
			}
		})
	}

	t.Run("minimum", func(t *testing.T) {
		t.Parallel()
		_, url := Start(t, &Script{OpenAI: []Response{{Text: "ok", RepeatLast: true}}, MinCacheTokens: 1024})
		for i := range 2 {
			a := post(t, url, "/v1/chat/completions", openAI(sys, "hello"))
			if got := num(t, a.body, "usage", "prompt_tokens_details", "cached_tokens"); got != 0 {
				t.Errorf("request %d: cached %d under the minimum", i, got)
			}
		}
	})
}
