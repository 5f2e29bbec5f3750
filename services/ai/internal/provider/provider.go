// Package provider holds the ai service's clients of the LLM providers — Anthropic
// Messages, OpenAI (and OpenAI-compatible) Chat Completions and Embeddings, Google Gemini —
// built on the providers' official Go SDKs. Each translates llm.Request to its SDK's params
// and back, classifies failures as *llm.Error, and is wrapped in llm.WithRetry: the SDKs'
// own retries are off and none of them reads the process environment, so a Config says
// everything a client does.
package provider

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	"github.com/thefold/thefold/services/ai/internal/llm"
)

// DefaultTimeout bounds one attempt when Config.Timeout is 0.
const DefaultTimeout = 120 * time.Second

// Public endpoints used when Config.BaseURL is empty.
const (
	AnthropicURL = "https://api.anthropic.com"
	OpenAIURL    = "https://api.openai.com/v1"
	GeminiURL    = "https://generativelanguage.googleapis.com"
)

// Config is one provider account.
//
// BaseURL per kind (empty: the public endpoint above):
//   - ANTHROPIC: the server root; the SDK calls <root>/v1/messages. A trailing "/v1" is
//     dropped, so "https://api.anthropic.com/v1" works too.
//   - OPENAI, OPENAI_COMPATIBLE: the API base the SDK appends "chat/completions" and
//     "embeddings" to, by convention ending in /v1 (http://localhost:11434/v1 for Ollama).
//     A URL without a path is a server root and gets "/v1" appended; a URL with a path is
//     used as it is (https://openrouter.ai/api/v1). Required for OPENAI_COMPATIBLE.
//   - GEMINI: the server root; the SDK calls <root>/v1beta/models/<model>:generateContent.
//     A trailing "/v1beta" is dropped.
//
// So one server root, such as a fakellm's URL, works for every kind.
type Config struct {
	// Name is the registry provider's name, e.g. "anthropic"; it names the provider in
	// errors and logs.
	Name    string
	Kind    aiv1.ProviderKind
	BaseURL string
	// APIKey is required except for OPENAI_COMPATIBLE (local servers often take none).
	APIKey string
	// HTTPClient is optional; its Transport is wrapped, not replaced, and its Timeout
	// should be 0 (Timeout below bounds an attempt).
	HTTPClient *http.Client
	// Timeout bounds one attempt (connect, send, wait, read); default DefaultTimeout. An
	// attempt that runs out is KindUnavailable and retried.
	Timeout time.Duration
	// Retry is the retry policy; the zero value is llm's default.
	Retry llm.RetryPolicy
}

// New validates cfg and returns the kind's client wrapped in cfg.Retry.
func New(cfg Config) (llm.Provider, error) {
	p, err := newClient(cfg)
	if err != nil {
		return nil, err
	}
	return llm.WithRetry(p, cfg.Retry), nil
}

// newClient returns the kind's client without the retry policy.
func newClient(cfg Config) (llm.Provider, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	base, err := endpoint(cfg.Kind, cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("provider %s: base_url: %w", cfg.Name, err)
	}
	t := transport{name: cfg.Name, timeout: cfg.Timeout, http: wrapHTTPClient(cfg.HTTPClient)}
	if t.timeout == 0 {
		t.timeout = DefaultTimeout
	}
	switch cfg.Kind {
	case aiv1.ProviderKind_PROVIDER_KIND_ANTHROPIC:
		return newAnthropic(t, base, cfg.APIKey), nil
	case aiv1.ProviderKind_PROVIDER_KIND_OPENAI:
		return newOpenAI(t, base, cfg.APIKey, false), nil
	case aiv1.ProviderKind_PROVIDER_KIND_OPENAI_COMPATIBLE:
		return newOpenAI(t, base, cfg.APIKey, true), nil
	case aiv1.ProviderKind_PROVIDER_KIND_GEMINI:
		return newGemini(t, base, cfg.APIKey)
	}
	return nil, fmt.Errorf("provider %s: kind %v is not supported", cfg.Name, cfg.Kind)
}

// validate collects every problem, so one look at the error fixes the whole config.
func (c Config) validate() error {
	var problems []error
	if strings.TrimSpace(c.Name) == "" {
		problems = append(problems, errors.New("name is required"))
	}
	switch c.Kind {
	case aiv1.ProviderKind_PROVIDER_KIND_ANTHROPIC, aiv1.ProviderKind_PROVIDER_KIND_OPENAI,
		aiv1.ProviderKind_PROVIDER_KIND_GEMINI:
		if strings.TrimSpace(c.APIKey) == "" {
			problems = append(problems, fmt.Errorf("api key is required for %s", kindName(c.Kind)))
		}
	case aiv1.ProviderKind_PROVIDER_KIND_OPENAI_COMPATIBLE:
		if c.BaseURL == "" {
			problems = append(problems, errors.New("base_url is required for an OpenAI-compatible provider (e.g. http://localhost:11434/v1)"))
		}
	default:
		problems = append(problems, fmt.Errorf("kind %v is not a provider kind", c.Kind))
	}
	if strings.ContainsAny(c.APIKey, "\r\n\x00") {
		problems = append(problems, errors.New("api key contains a line break or NUL"))
	}
	if c.Timeout < 0 {
		problems = append(problems, fmt.Errorf("timeout %s is negative", c.Timeout))
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("provider %q: %w", c.Name, errors.Join(problems...))
}

func kindName(k aiv1.ProviderKind) string {
	return strings.ToLower(strings.TrimPrefix(k.String(), "PROVIDER_KIND_"))
}

// endpoint returns the base URL the kind's SDK is given (see Config).
func endpoint(kind aiv1.ProviderKind, raw string) (string, error) {
	if raw == "" {
		switch kind {
		case aiv1.ProviderKind_PROVIDER_KIND_ANTHROPIC:
			return AnthropicURL, nil
		case aiv1.ProviderKind_PROVIDER_KIND_GEMINI:
			return GeminiURL, nil
		default:
			return OpenAIURL, nil
		}
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%q is not an absolute http or https URL", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("%q has a query or fragment", raw)
	}
	u.RawPath = ""
	path := strings.TrimRight(u.Path, "/")
	switch kind {
	case aiv1.ProviderKind_PROVIDER_KIND_ANTHROPIC:
		path = strings.TrimSuffix(path, "/v1")
	case aiv1.ProviderKind_PROVIDER_KIND_GEMINI:
		path = strings.TrimSuffix(path, "/v1beta")
	default:
		if path == "" {
			path = "/v1"
		}
	}
	u.Path = path
	return u.String(), nil
}
