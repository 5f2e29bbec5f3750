package engine

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"

	"github.com/thefold/thefold/services/ai/internal/keyref"
	"github.com/thefold/thefold/services/ai/internal/netguard"
)

// Config is how the ai service reaches providers. The registry (schema ai) says which
// providers and models exist; this says which of them can be called from this process.
type Config struct {
	// Provider restricts calls to one registry provider by name ("anthropic", "openai",
	// "gemini", "ollama", …). Empty: any enabled provider whose key is configured.
	Provider string `env:"THEFOLD_AI_PROVIDER"`
	// BaseURL overrides the base URL of THEFOLD_AI_PROVIDER: a local OpenAI-compatible
	// server, a proxy, or fakellm in tests and the demo.
	BaseURL string `env:"THEFOLD_AI_BASE_URL"`
	// APIKey is the key for THEFOLD_AI_PROVIDER, used instead of the registry's
	// api_key_ref (e.g. ANTHROPIC_API_KEY).
	APIKey string `env:"THEFOLD_AI_API_KEY" secret:"true"`
	// Model is the model used when a call names none and no selection hints apply;
	// empty selects from the registry.
	Model string `env:"THEFOLD_AI_MODEL"`
	// EmbedModel is the embedding model when a call names none: "local" (the built-in
	// feature-hashing embedder's current version, no network), "local@N" (version N of it,
	// e.g. to keep an older version), "local-<size>", or a registry embedding model.
	EmbedModel string `env:"THEFOLD_AI_EMBED_MODEL, default=local"`
	// EmbedDimensions is the local embedder's vector size.
	EmbedDimensions int `env:"THEFOLD_AI_EMBED_DIMENSIONS, default=384"`
	// AttemptTimeout bounds one provider request; a provider that does not answer in it
	// counts as unavailable and the call is retried or fails over.
	AttemptTimeout time.Duration `env:"THEFOLD_AI_ATTEMPT_TIMEOUT, default=120s"`
	// MaxAttempts is how many times one provider request is tried on 429/5xx/overload.
	MaxAttempts int `env:"THEFOLD_AI_MAX_ATTEMPTS, default=4"`
	// MaxRetryAfter is the longest retry-after a provider may ask for that is waited;
	// longer, the call fails over to the next model instead.
	MaxRetryAfter time.Duration `env:"THEFOLD_AI_MAX_RETRY_AFTER, default=60s"`
	// AnswerRetention is how long answers recorded under a request_id are kept.
	AnswerRetention time.Duration `env:"THEFOLD_AI_ANSWER_RETENTION, default=24h"`
	// KeyEnvAllow are the glob patterns of the variables an api_key_ref "env:NAME" may name
	// (keyref): the providers' keys, never the process's other secrets.
	KeyEnvAllow []string `env:"THEFOLD_AI_KEY_ENV_ALLOW, default=*_API_KEY"`
	// AllowPrivateBaseURLs are the non-global addresses (loopback, private, link-local …)
	// that registry providers' base URLs may reach: "false" none, "true" all, or CIDR
	// prefixes, addresses and host names (netguard.Parse). THEFOLD_AI_BASE_URL is the
	// operator's own setting and is never checked.
	AllowPrivateBaseURLs []string `env:"THEFOLD_AI_ALLOW_PRIVATE_BASE_URLS, default=false"`
	// DailySpendLimitMicros is what one user's calls may cost per UTC day, in micro-dollars
	// (0: no limit). The default, $50, is two full agent job budgets
	// (THEFOLD_AGENT_MAX_COST_MICROS, $25): it never cuts a member's ordinary work short, and
	// a runaway loop or a member scripting the API stops there instead of at the agent's
	// task quota times the job budget ($2,500 a day with the defaults).
	DailySpendLimitMicros int64 `env:"THEFOLD_AI_DAILY_SPEND_LIMIT_MICROS, default=50000000"`
	// SpendLimitExemptAdmins exempts administrators (also calls the agent and builder make
	// on their behalf) from DailySpendLimitMicros.
	SpendLimitExemptAdmins bool `env:"THEFOLD_AI_SPEND_LIMIT_EXEMPT_ADMINS, default=true"`
	// Reasoning is "on" to let models that support it (the registry's supports_reasoning)
	// think before they answer, at each RPC's effort: high for PlanTask, DecomposeProject and
	// ReviseProjectPhase; medium for FixFile, DiagnoseFailure, Intervene, ReviewCode and
	// ReviewProject; low for GenerateFile; none for the assessments, PlanTaskOrder and
	// Complete (Anthropic extended thinking, OpenAI reasoning_effort, Gemini thinkingBudget;
	// the thinking is billed as output tokens). "off" sends no reasoning setting to any model.
	Reasoning string `env:"THEFOLD_AI_REASONING, default=on"`

	// keyAllow and baseURLs are KeyEnvAllow and AllowPrivateBaseURLs parsed by Validate.
	keyAllow keyref.Allow
	baseURLs *netguard.Policy
}

// Validate collects every problem.
func (c *Config) Validate() error {
	var problems []error
	if c.BaseURL != "" {
		u, err := url.Parse(c.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, fmt.Errorf("THEFOLD_AI_BASE_URL: %q is not an http(s) URL", c.BaseURL))
		}
		if c.Provider == "" {
			problems = append(problems, errors.New("THEFOLD_AI_BASE_URL: set THEFOLD_AI_PROVIDER too (the provider whose URL it replaces)"))
		}
	}
	if c.APIKey != "" && c.Provider == "" {
		problems = append(problems, errors.New("THEFOLD_AI_API_KEY: set THEFOLD_AI_PROVIDER too (the provider the key is for)"))
	}
	if isLocal(c.EmbedModel) {
		if _, _, err := parseLocal(c.EmbedModel); err != nil {
			problems = append(problems, fmt.Errorf("THEFOLD_AI_EMBED_MODEL: %w", err))
		}
	}
	if c.EmbedDimensions < 16 || c.EmbedDimensions > 4096 {
		problems = append(problems, fmt.Errorf("THEFOLD_AI_EMBED_DIMENSIONS: %d is outside 16–4096", c.EmbedDimensions))
	} else if _, err := localVersions[CurrentLocal](c.EmbedDimensions); err != nil {
		problems = append(problems, fmt.Errorf("THEFOLD_AI_EMBED_DIMENSIONS: %s: %w", LocalName(CurrentLocal), err))
	}
	if c.AttemptTimeout <= 0 {
		problems = append(problems, errors.New("THEFOLD_AI_ATTEMPT_TIMEOUT: must be positive"))
	}
	if c.MaxAttempts < 1 || c.MaxAttempts > 10 {
		problems = append(problems, fmt.Errorf("THEFOLD_AI_MAX_ATTEMPTS: %d is outside 1–10", c.MaxAttempts))
	}
	if c.MaxRetryAfter < 0 {
		problems = append(problems, errors.New("THEFOLD_AI_MAX_RETRY_AFTER: must not be negative"))
	}
	if c.AnswerRetention < time.Hour {
		problems = append(problems, errors.New("THEFOLD_AI_ANSWER_RETENTION: at least 1h (the contract keeps answers 24h)"))
	}
	var err error
	if c.keyAllow, err = keyref.ParseAllow(c.KeyEnvAllow); err != nil {
		problems = append(problems, fmt.Errorf("THEFOLD_AI_KEY_ENV_ALLOW: %w", err))
	}
	if c.baseURLs, err = netguard.Parse(c.AllowPrivateBaseURLs); err != nil {
		problems = append(problems, fmt.Errorf("THEFOLD_AI_ALLOW_PRIVATE_BASE_URLS: %w", err))
	}
	if c.Reasoning != "on" && c.Reasoning != "off" {
		problems = append(problems, fmt.Errorf("THEFOLD_AI_REASONING: %q: want on or off", c.Reasoning))
	}
	if c.DailySpendLimitMicros < 0 {
		problems = append(problems, errors.New("THEFOLD_AI_DAILY_SPEND_LIMIT_MICROS: must not be negative (0: no limit)"))
	}
	return errors.Join(problems...)
}

// reasoningOn is THEFOLD_AI_REASONING; a Config built by hand (tests) leaves it on.
func (c *Config) reasoningOn() bool { return c.Reasoning != "off" }

// KeyAllow is the parsed THEFOLD_AI_KEY_ENV_ALLOW; a Config that was not validated (tests
// building one by hand) allows the default "*_API_KEY".
func (c *Config) KeyAllow() keyref.Allow {
	switch {
	case c.keyAllow != nil:
		return c.keyAllow
	case c.KeyEnvAllow == nil:
		return keyref.Default()
	}
	a, _ := keyref.ParseAllow(c.KeyEnvAllow) // Validate reported a bad pattern
	return a
}

// BaseURLPolicy is the parsed THEFOLD_AI_ALLOW_PRIVATE_BASE_URLS; unvalidated, it allows no
// non-global address.
func (c *Config) BaseURLPolicy() *netguard.Policy {
	if c.baseURLs == nil {
		if p, err := netguard.Parse(c.AllowPrivateBaseURLs); err == nil {
			return p
		}
		return &netguard.Policy{}
	}
	return c.baseURLs
}

// GuardedLookup restricts lookup to the variables api_key_ref may name (KeyAllow): every
// "env:NAME" resolution goes through it, so a reference that got into the registry some
// other way (an older version, a hand-edited row) still cannot read another secret.
func (c *Config) GuardedLookup(lookup func(string) (string, bool)) func(string) (string, bool) {
	return c.KeyAllow().Guard(lookup)
}

// noProviderMessage is the FAILED_PRECONDITION text of a generating call when nothing can
// be called: it names the settings that fix it.
const noProviderMessage = "no LLM provider is configured: set THEFOLD_AI_PROVIDER (anthropic, openai, gemini, " +
	"or another registry provider such as ollama) and its key (THEFOLD_AI_API_KEY, or the provider's " +
	"own variable such as ANTHROPIC_API_KEY), or THEFOLD_AI_PROVIDER=ollama with THEFOLD_AI_BASE_URL " +
	"pointing at an OpenAI-compatible server (e.g. http://localhost:11434/v1); embeddings with the " +
	"local embedder work without one"

// Usable returns the test of whether a provider can be called from this process: it is
// THEFOLD_AI_PROVIDER, or (when that is unset) its key is configured. Naming a provider in
// THEFOLD_AI_PROVIDER is the operator's choice of it, so it is usable even where the
// registry seeds it disabled (the local Ollama entry). The registry filters selection
// with it.
func (c *Config) Usable(lookup func(string) (string, bool)) func(*aiv1.Provider) bool {
	return func(p *aiv1.Provider) bool {
		if c.Provider != "" {
			return strings.EqualFold(p.GetName(), c.Provider)
		}
		return c.APIKeyFor(p, lookup) != ""
	}
}

// APIKeyFor returns p's key: THEFOLD_AI_API_KEY for THEFOLD_AI_PROVIDER, else what the
// provider's api_key_ref resolves to.
func (c *Config) APIKeyFor(p *aiv1.Provider, lookup func(string) (string, bool)) string {
	if c.Provider != "" && c.APIKey != "" && strings.EqualFold(p.GetName(), c.Provider) {
		return c.APIKey
	}
	return ResolveKey(p.GetApiKeyRef(), lookup)
}

// ResolveKey resolves an api_key_ref: "env:NAME" reads NAME through lookup (which
// GuardedLookup restricts to the allowed names); anything else (secret stores) is not
// supported yet and resolves to nothing.
func ResolveKey(ref string, lookup func(string) (string, bool)) string {
	name, ok := keyref.EnvName(ref)
	if !ok || lookup == nil {
		return ""
	}
	v, _ := lookup(name)
	return strings.TrimSpace(v)
}
