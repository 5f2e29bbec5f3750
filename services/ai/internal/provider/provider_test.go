package provider

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	"github.com/thefold/thefold/pkg/testenv"
	"github.com/thefold/thefold/services/ai/internal/llm"
)

const (
	kAnthropic  = aiv1.ProviderKind_PROVIDER_KIND_ANTHROPIC
	kOpenAI     = aiv1.ProviderKind_PROVIDER_KIND_OPENAI
	kGemini     = aiv1.ProviderKind_PROVIDER_KIND_GEMINI
	kCompatible = aiv1.ProviderKind_PROVIDER_KIND_OPENAI_COMPATIBLE
)

var allKinds = []aiv1.ProviderKind{kAnthropic, kOpenAI, kGemini, kCompatible}

func TestNewValidates(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cfg  Config
		want []string // substrings of the error; nil: valid
	}{
		{name: "anthropic", cfg: Config{Name: "anthropic", Kind: kAnthropic, APIKey: "k"}},
		{name: "openai", cfg: Config{Name: "openai", Kind: kOpenAI, APIKey: "k"}},
		{name: "gemini", cfg: Config{Name: "gemini", Kind: kGemini, APIKey: "k"}},
		{name: "ollama without key", cfg: Config{Name: "ollama", Kind: kCompatible, BaseURL: "http://localhost:11434/v1"}},
		{name: "no name", cfg: Config{Kind: kOpenAI, APIKey: "k"}, want: []string{"name is required"}},
		{name: "no kind", cfg: Config{Name: "x"}, want: []string{"not a provider kind"}},
		{name: "unknown kind", cfg: Config{Name: "x", Kind: 99, APIKey: "k"}, want: []string{"not a provider kind"}},
		{name: "anthropic without key", cfg: Config{Name: "a", Kind: kAnthropic}, want: []string{"api key is required for anthropic"}},
		{name: "gemini blank key", cfg: Config{Name: "g", Kind: kGemini, APIKey: "  "}, want: []string{"api key is required for gemini"}},
		{name: "compatible without base url", cfg: Config{Name: "c", Kind: kCompatible}, want: []string{"base_url is required"}},
		{name: "key with newline", cfg: Config{Name: "o", Kind: kOpenAI, APIKey: "k\nX-Evil: 1"}, want: []string{"line break"}},
		{name: "negative timeout", cfg: Config{Name: "o", Kind: kOpenAI, APIKey: "k", Timeout: -time.Second}, want: []string{"negative"}},
		{name: "every problem at once", cfg: Config{Kind: kAnthropic, Timeout: -1}, want: []string{"name is required", "api key", "negative"}},
		{name: "relative base url", cfg: Config{Name: "o", Kind: kOpenAI, APIKey: "k", BaseURL: "localhost:8080"}, want: []string{"base_url", "absolute"}},
		{name: "ftp base url", cfg: Config{Name: "o", Kind: kOpenAI, APIKey: "k", BaseURL: "ftp://x/v1"}, want: []string{"absolute http"}},
		{name: "base url with query", cfg: Config{Name: "o", Kind: kOpenAI, APIKey: "k", BaseURL: "http://x/v1?a=b"}, want: []string{"query"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p, err := New(tc.cfg)
			if tc.want == nil {
				if err != nil || p == nil {
					t.Fatalf("New = %v, %v; want a provider", p, err)
				}
				if p.Name() != tc.cfg.Name {
					t.Errorf("Name() = %q, want %q", p.Name(), tc.cfg.Name)
				}
				return
			}
			if err == nil {
				t.Fatalf("New accepted %+v", tc.cfg)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
		})
	}
}

func TestEndpoint(t *testing.T) {
	t.Parallel()
	cases := []struct {
		kind aiv1.ProviderKind
		raw  string
		want string
	}{
		{kAnthropic, "", "https://api.anthropic.com"},
		{kOpenAI, "", "https://api.openai.com/v1"},
		{kGemini, "", "https://generativelanguage.googleapis.com"},
		// A server root (fakellm) works for every kind.
		{kAnthropic, "http://127.0.0.1:8090", "http://127.0.0.1:8090"},
		{kOpenAI, "http://127.0.0.1:8090", "http://127.0.0.1:8090/v1"},
		{kCompatible, "http://127.0.0.1:8090/", "http://127.0.0.1:8090/v1"},
		{kGemini, "http://127.0.0.1:8090", "http://127.0.0.1:8090"},
		// The versioned forms people paste work too.
		{kAnthropic, "https://api.anthropic.com/v1/", "https://api.anthropic.com"},
		{kGemini, "https://generativelanguage.googleapis.com/v1beta", "https://generativelanguage.googleapis.com"},
		{kCompatible, "http://localhost:11434/v1", "http://localhost:11434/v1"},
		// A base with a path of its own is kept.
		{kCompatible, "https://openrouter.ai/api/v1", "https://openrouter.ai/api/v1"},
		{kAnthropic, "https://proxy.example/anthropic", "https://proxy.example/anthropic"},
	}
	for _, tc := range cases {
		got, err := endpoint(tc.kind, tc.raw)
		if err != nil || got != tc.want {
			t.Errorf("endpoint(%v, %q) = %q, %v; want %q", tc.kind, tc.raw, got, err, tc.want)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name string
		h    http.Header
		want time.Duration
	}{
		{"none", http.Header{}, 0},
		{"nil", nil, 0},
		{"seconds", http.Header{"Retry-After": {"7"}}, 7 * time.Second},
		{"fractional seconds", http.Header{"Retry-After": {"1.5"}}, 1500 * time.Millisecond},
		{"milliseconds win", http.Header{"Retry-After": {"7"}, "Retry-After-Ms": {"250"}}, 250 * time.Millisecond},
		{"bad milliseconds fall back", http.Header{"Retry-After": {"3"}, "Retry-After-Ms": {"soon"}}, 3 * time.Second},
		{"http date", http.Header{"Retry-After": {now.Add(90 * time.Second).Format(http.TimeFormat)}}, 90 * time.Second},
		{"date in the past", http.Header{"Retry-After": {now.Add(-time.Minute).Format(http.TimeFormat)}}, 0},
		{"negative", http.Header{"Retry-After": {"-4"}}, 0},
		{"garbage", http.Header{"Retry-After": {"later"}}, 0},
	}
	for _, tc := range cases {
		if got := retryAfter(tc.h, now); got != tc.want {
			t.Errorf("%s: retryAfter = %s, want %s", tc.name, got, tc.want)
		}
	}
}

func TestKindOfStatus(t *testing.T) {
	t.Parallel()
	cases := map[int]llm.ErrorKind{
		400: llm.KindBadRequest, 401: llm.KindAuth, 403: llm.KindAuth, 404: llm.KindBadRequest,
		408: llm.KindUnavailable, 409: llm.KindUnknown, 413: llm.KindBadRequest, 422: llm.KindBadRequest,
		429: llm.KindRateLimited, 500: llm.KindServer, 502: llm.KindServer, 503: llm.KindServer,
		529: llm.KindOverloaded,
	}
	for status, want := range cases {
		if got := kindOfStatus(status); got != want {
			t.Errorf("kindOfStatus(%d) = %v, want %v", status, got, want)
		}
	}
}

// closedURL returns the URL of a port nobody listens on.
func closedURL(t *testing.T) string {
	t.Helper()
	return "http://" + testenv.RefusedAddr(t)
}

// A provider that is down is Unavailable at once, for every kind, through the real SDKs.
func TestProviderDown(t *testing.T) {
	t.Parallel()
	base := closedURL(t)
	for _, kind := range allKinds {
		t.Run(kindName(kind), func(t *testing.T) {
			t.Parallel()
			var waits []time.Duration
			p, err := New(Config{Name: "down", Kind: kind, BaseURL: base, APIKey: "k", Retry: llm.RetryPolicy{
				MaxAttempts: 3,
				Sleep:       func(_ context.Context, d time.Duration) error { waits = append(waits, d); return nil },
			}})
			if err != nil {
				t.Fatal(err)
			}
			ctx, counter := llm.WithAttemptCounter(context.Background())
			_, err = p.Complete(ctx, llm.Request{Model: "m", Messages: []llm.Message{llm.UserText("hi")}})
			pe, ok := llm.AsError(err)
			if !ok || pe.Kind != llm.KindUnavailable || pe.Status != 0 || pe.Provider != "down" {
				t.Fatalf("err = %v, want Unavailable from provider down with no status", err)
			}
			if *counter != 3 || len(waits) != 2 {
				t.Errorf("attempts %d, waits %v; want 3 attempts and 2 waits", *counter, waits)
			}
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				t.Errorf("err = %v looks like a cancellation", err)
			}
		})
	}
}
