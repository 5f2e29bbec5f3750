package main

import (
	"context"
	"strings"
	"testing"

	"github.com/thefold/thefold/pkg/config"
)

// The ai service's configuration: the defaults start a service with no provider, and every
// bad setting is named.
func TestConfig(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want []string // in the error; none: valid
	}{
		{"defaults: no provider", nil, nil},
		{"anthropic at fakellm", map[string]string{"THEFOLD_AI_PROVIDER": "anthropic", "THEFOLD_AI_BASE_URL": "http://127.0.0.1:8090", "THEFOLD_AI_API_KEY": "k"}, nil},
		{"base URL without a provider", map[string]string{"THEFOLD_AI_BASE_URL": "http://127.0.0.1:8090"}, []string{"THEFOLD_AI_BASE_URL", "THEFOLD_AI_PROVIDER"}},
		{"key without a provider", map[string]string{"THEFOLD_AI_API_KEY": "k"}, []string{"THEFOLD_AI_API_KEY"}},
		{"not a URL", map[string]string{"THEFOLD_AI_PROVIDER": "ollama", "THEFOLD_AI_BASE_URL": "localhost:11434"}, []string{"THEFOLD_AI_BASE_URL"}},
		{"private base URLs by CIDR, address and name", map[string]string{"THEFOLD_AI_ALLOW_PRIVATE_BASE_URLS": "10.0.0.0/8,127.0.0.1,ollama.lan"}, nil},
		{"private base URLs: not a prefix", map[string]string{"THEFOLD_AI_ALLOW_PRIVATE_BASE_URLS": "10.0.0.0/99"}, []string{"THEFOLD_AI_ALLOW_PRIVATE_BASE_URLS"}},
		{"key variables: bad glob", map[string]string{"THEFOLD_AI_KEY_ENV_ALLOW": "[A-"}, []string{"THEFOLD_AI_KEY_ENV_ALLOW"}},
		{"an old local embedder kept", map[string]string{"THEFOLD_AI_EMBED_MODEL": "local@1"}, nil},
		{"a local embedder of no such version", map[string]string{"THEFOLD_AI_EMBED_MODEL": "local@99"}, []string{"THEFOLD_AI_EMBED_MODEL", "local@1"}},
		{"negative spend limit", map[string]string{"THEFOLD_AI_DAILY_SPEND_LIMIT_MICROS": "-1"}, []string{"THEFOLD_AI_DAILY_SPEND_LIMIT_MICROS"}},
		{"reasoning off", map[string]string{"THEFOLD_AI_REASONING": "off"}, nil},
		{"reasoning neither on nor off", map[string]string{"THEFOLD_AI_REASONING": "high"}, []string{"THEFOLD_AI_REASONING", "on or off"}},
		{"every problem at once", map[string]string{"THEFOLD_AI_EMBED_DIMENSIONS": "8", "THEFOLD_AI_MAX_ATTEMPTS": "0", "THEFOLD_AI_PRUNE_INTERVAL": "0s", "THEFOLD_AI_ANSWER_RETENTION": "1m"},
			[]string{"THEFOLD_AI_EMBED_DIMENSIONS", "THEFOLD_AI_MAX_ATTEMPTS", "THEFOLD_AI_PRUNE_INTERVAL", "THEFOLD_AI_ANSWER_RETENTION"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var cfg aiConfig
			err := config.Load(context.Background(), &cfg, config.Map(tc.env, nil))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %v", tc.env)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
}

// The secret is masked when the effective configuration is logged.
func TestAPIKeyIsMasked(t *testing.T) {
	var cfg aiConfig
	if err := config.Load(context.Background(), &cfg, config.Map(map[string]string{"THEFOLD_AI_PROVIDER": "anthropic", "THEFOLD_AI_API_KEY": "sk-secret-123"}, nil)); err != nil {
		t.Fatal(err)
	}
	for k, v := range config.Redacted(&cfg) {
		if strings.Contains(v, "sk-secret-123") {
			t.Fatalf("%s shows the key: %s", k, v)
		}
	}
}

// The defaults: provider keys only from *_API_KEY variables, no private base URLs, $50 a
// day per member with admins exempt.
func TestSecurityDefaults(t *testing.T) {
	var cfg aiConfig
	if err := config.Load(context.Background(), &cfg, config.Map(nil, nil)); err != nil {
		t.Fatal(err)
	}
	e := &cfg.Engine
	if !e.KeyAllow().Allows("ANTHROPIC_API_KEY") || e.KeyAllow().Allows("THEFOLD_DATABASE_URL") {
		t.Errorf("key allow-list %q", e.KeyAllow())
	}
	if e.BaseURLPolicy().AllowsAll() || e.BaseURLPolicy().AllowsHost("localhost") {
		t.Error("private base URLs allowed by default")
	}
	if e.DailySpendLimitMicros != 50_000_000 || !e.SpendLimitExemptAdmins {
		t.Errorf("spend limit %d, exempt admins %v", e.DailySpendLimitMicros, e.SpendLimitExemptAdmins)
	}
}
