package service_test

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/types/known/fieldmaskpb"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"

	"github.com/thefold/thefold/services/ai/internal/keyref"
	"github.com/thefold/thefold/services/ai/internal/netguard"
	"github.com/thefold/thefold/services/ai/internal/service"
)

// An api_key_ref may name only the variables the operator allows (THEFOLD_AI_KEY_ENV_ALLOW,
// default *_API_KEY): env:THEFOLD_DATABASE_URL is INVALID_ARGUMENT naming the field, at
// creation and at update, and the message never holds a variable's value.
func TestKeyRefAllowList(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		allow keyref.Allow // nil: the default
		ref   string
		ok    bool
	}{
		{"provider key", nil, "env:ANTHROPIC_API_KEY", true},
		{"another provider's key", nil, "env:MY_LLM_API_KEY", true},
		{"no key", nil, "", true},
		{"database URL", nil, "env:THEFOLD_DATABASE_URL", false},
		{"github token", nil, "env:THEFOLD_GITHUB_TOKEN", false},
		{"SMTP password", nil, "env:THEFOLD_SMTP_PASSWORD", false},
		{"HOME", nil, "env:HOME", false},
		{"suffix only", nil, "env:ANTHROPIC_API_KEY_FILE", false},
		{"operator's own list", keyref.Allow{"LLM_*"}, "env:LLM_TOKEN", true},
		{"outside the operator's list", keyref.Allow{"LLM_*"}, "env:ANTHROPIC_API_KEY", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var opts []service.RegistryOption
			if tc.allow != nil {
				opts = append(opts, service.WithKeyAllow(tc.allow))
			}
			e := startRegistryWith(t, opts)
			in := &aiv1.Provider{Name: "p", Kind: aiv1.ProviderKind_PROVIDER_KIND_OPENAI_COMPATIBLE,
				BaseUrl: "https://llm.example.test/v1", ApiKeyRef: tc.ref, Enabled: true}
			_, err := e.client.CreateProvider(e.admin, &aiv1.CreateProviderRequest{Provider: in})
			if tc.ok {
				if err != nil {
					t.Fatalf("CreateProvider(%q): %v", tc.ref, err)
				}
				return
			}
			regWantInvalid(t, err, "provider.api_key_ref")
			if strings.Contains(err.Error(), "sk-ant-test") {
				t.Errorf("the error shows a key: %v", err)
			}
			// The same reference through an update of an existing provider.
			in.ApiKeyRef, in.Name = "", "q"
			p := e.createProvider(t, in)
			_, err = e.client.UpdateProvider(e.admin, &aiv1.UpdateProviderRequest{Id: p.Id,
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"api_key_ref"}}, Provider: &aiv1.Provider{ApiKeyRef: tc.ref}})
			regWantInvalid(t, err, "provider.api_key_ref")
		})
	}
}

// A base_url may not reach loopback, private, link-local (the metadata endpoint),
// unspecified or other non-global addresses — as a literal, or as a name resolving to one —
// unless the operator allows them.
func TestBaseURLPolicy(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		policy *netguard.Policy // nil: the default (none allowed)
		url    string
		ok     bool
	}{
		{"public name", nil, "https://public.example.test/v1", true},
		{"public address", nil, "http://93.184.215.14/v1", true},
		{"name that does not resolve", nil, "https://llm.example.test/v1", true},
		{"no base URL (public endpoint)", nil, "", true},
		{"loopback", nil, "http://127.0.0.1:8090/v1", false},
		{"loopback 127/8", nil, "http://127.1.2.3/v1", false},
		{"IPv6 loopback", nil, "http://[::1]:8090/v1", false},
		{"metadata endpoint", nil, "http://169.254.169.254/latest", false},
		{"link-local IPv6", nil, "http://[fe80::1]/v1", false},
		{"RFC 1918 10/8", nil, "http://10.0.0.1/v1", false},
		{"RFC 1918 172.16/12", nil, "http://172.16.5.4/v1", false},
		{"RFC 1918 192.168/16", nil, "http://192.168.1.1/v1", false},
		{"unique local fc00::/7", nil, "http://[fd12::1]/v1", false},
		{"unspecified", nil, "http://0.0.0.0:8090/v1", false},
		{"shared address space", nil, "http://100.64.0.1/v1", false},
		{"IPv4-mapped loopback", nil, "http://[::ffff:127.0.0.1]/v1", false},
		{"NAT64 of a private address", nil, "http://[64:ff9b::a00:1]/v1", false},
		{"localhost", nil, "http://localhost:11434/v1", false},
		{"name resolving to the metadata endpoint", nil, "http://metadata.example.test/v1", false},
		{"name with one private address", nil, "http://intranet.example.test/v1", false},
		{"all allowed", netguard.MustParse("true"), "http://169.254.169.254/latest", true},
		{"prefix allowed", netguard.MustParse("10.0.0.0/8"), "http://10.0.0.1/v1", true},
		{"outside the allowed prefix", netguard.MustParse("10.0.0.0/8"), "http://127.0.0.1/v1", false},
		{"address allowed", netguard.MustParse("127.0.0.1"), "http://127.0.0.1:8090/v1", true},
		{"host allowed", netguard.MustParse("localhost"), "http://localhost:11434/v1", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var opts []service.RegistryOption
			if tc.policy != nil {
				opts = append(opts, service.WithBaseURLPolicy(tc.policy))
			}
			e := startRegistryWith(t, opts)
			kind := aiv1.ProviderKind_PROVIDER_KIND_OPENAI_COMPATIBLE
			if tc.url == "" {
				kind = aiv1.ProviderKind_PROVIDER_KIND_OPENAI
			}
			_, err := e.client.CreateProvider(e.admin, &aiv1.CreateProviderRequest{Provider: &aiv1.Provider{
				Name: "p", Kind: kind, BaseUrl: tc.url, Enabled: true}})
			if tc.ok {
				if err != nil {
					t.Fatalf("CreateProvider(%q): %v", tc.url, err)
				}
				return
			}
			regWantInvalid(t, err, "provider.base_url")
			p := e.createProvider(t, &aiv1.Provider{Name: "q", Kind: aiv1.ProviderKind_PROVIDER_KIND_OPENAI, Enabled: true})
			_, err = e.client.UpdateProvider(e.admin, &aiv1.UpdateProviderRequest{Id: p.Id,
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"base_url"}}, Provider: &aiv1.Provider{BaseUrl: tc.url}})
			regWantInvalid(t, err, "provider.base_url")
		})
	}
}
