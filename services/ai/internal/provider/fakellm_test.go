package provider_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/fakellm"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	"github.com/thefold/thefold/services/ai/internal/llm"
	"github.com/thefold/thefold/services/ai/internal/provider"
)

// family is one wire protocol as the tests drive it: the real SDK client of that kind
// against fakellm.
type family struct {
	name     string
	kind     aiv1.ProviderKind
	endpoint string // fakellm's record name for a chat call
	script   func(rs ...fakellm.Response) *fakellm.Script
	// embeds: the kind has an embeddings API; embedEndpoint is its record name.
	embedEndpoint string
}

func (f family) embeds() bool { return f.embedEndpoint != "" }

var families = []family{
	{
		name: "anthropic", kind: aiv1.ProviderKind_PROVIDER_KIND_ANTHROPIC, endpoint: fakellm.EndpointAnthropicMessages,
		script: func(rs ...fakellm.Response) *fakellm.Script { return &fakellm.Script{Anthropic: rs} },
	},
	{
		name: "openai", kind: aiv1.ProviderKind_PROVIDER_KIND_OPENAI, endpoint: fakellm.EndpointOpenAIChat,
		script:        func(rs ...fakellm.Response) *fakellm.Script { return &fakellm.Script{OpenAI: rs} },
		embedEndpoint: fakellm.EndpointOpenAIEmbeddings,
	},
	{
		name: "openai-compatible", kind: aiv1.ProviderKind_PROVIDER_KIND_OPENAI_COMPATIBLE, endpoint: fakellm.EndpointOpenAIChat,
		script:        func(rs ...fakellm.Response) *fakellm.Script { return &fakellm.Script{OpenAI: rs} },
		embedEndpoint: fakellm.EndpointOpenAIEmbeddings,
	},
	{
		name: "gemini", kind: aiv1.ProviderKind_PROVIDER_KIND_GEMINI, endpoint: fakellm.EndpointGeminiGenerate,
		script:        func(rs ...fakellm.Response) *fakellm.Script { return &fakellm.Script{Gemini: rs} },
		embedEndpoint: fakellm.EndpointGeminiBatchEmbed,
	},
}

// waits records the retry policy's waits instead of sleeping them.
type waits struct {
	mu sync.Mutex
	d  []time.Duration
}

func (w *waits) sleep(ctx context.Context, d time.Duration) error {
	w.mu.Lock()
	w.d = append(w.d, d)
	w.mu.Unlock()
	return ctx.Err()
}

func (w *waits) all() []time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]time.Duration(nil), w.d...)
}

type setup struct {
	p     llm.Provider
	srv   *fakellm.Server
	base  string
	waits *waits
}

// start serves s and returns a client of kind f against it. cfg may adjust the config
// (timeouts, retry policy); waits are recorded, never slept, and the backoff is 1ms so a
// recorded wait longer than that was asked for by the provider.
func start(t *testing.T, f family, s *fakellm.Script, cfg func(*provider.Config)) setup {
	t.Helper()
	srv, base := fakellm.Start(t, s)
	w := &waits{}
	c := provider.Config{
		Name: f.name, Kind: f.kind, BaseURL: base, APIKey: "test-key",
		Retry: llm.RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: time.Millisecond, Sleep: w.sleep},
	}
	if cfg != nil {
		cfg(&c)
	}
	p, err := provider.New(c)
	if err != nil {
		t.Fatal(err)
	}
	return setup{p: p, srv: srv, base: base, waits: w}
}

// bodies returns the recorded request bodies of endpoint, decoded.
func bodies(t *testing.T, srv *fakellm.Server, endpoint string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, r := range srv.Requests() {
		if r.Endpoint != endpoint {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(r.Body, &m); err != nil {
			t.Fatalf("recorded body of %s: %v", endpoint, err)
		}
		out = append(out, m)
	}
	return out
}

// dig walks a decoded JSON value by map keys and slice indexes.
func dig(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			s, ok := v.([]any)
			if !ok || k >= len(s) {
				return nil
			}
			v = s[k]
		}
	}
	return v
}
