package service_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"

	"github.com/thefold/thefold/services/ai/internal/registry"
)

func mask(paths ...string) *fieldmaskpb.FieldMask { return &fieldmaskpb.FieldMask{Paths: paths} }

func TestRegistrySeeds(t *testing.T) {
	t.Parallel()
	e := startRegistry(t)
	resp, err := e.client.ListProviders(e.admin, &aiv1.ListProvidersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*aiv1.Provider{}
	for _, p := range resp.Providers {
		byName[p.Name] = p
	}
	if got := len(resp.Providers); got != 5 || resp.NextPageToken != "" {
		t.Fatalf("%d seeded providers (next %q), want 5 on one page", got, resp.NextPageToken)
	}
	for name, want := range map[string]struct{ enabled, key bool }{
		"anthropic": {true, true}, "openai": {true, false}, "gemini": {true, false}, "moonshot": {true, false}, "ollama": {false, false},
	} {
		p := byName[name]
		if p.GetEnabled() != want.enabled || p.GetApiKeyConfigured() != want.key || len(p.GetModels()) == 0 {
			t.Errorf("%s: enabled %v, key configured %v, %d models; want %v, %v, some",
				name, p.GetEnabled(), p.GetApiKeyConfigured(), len(p.GetModels()), want.enabled, want.key)
		}
	}
	sonnet := e.seedModel(t, "claude-sonnet-4-5")
	if sonnet.Tier != 3 || sonnet.ProviderId != byName["anthropic"].GetId() || !sonnet.Enabled {
		t.Errorf("claude-sonnet-4-5 = %v", sonnet)
	}
	if m := e.seedModel(t, "moonshot-v1-32k"); m.Tier != 1 {
		t.Errorf("moonshot-v1-32k tier %d", m.Tier)
	}
	for name, want := range map[string]bool{"claude-sonnet-4-5": true, "claude-haiku-4-5": true, "gemini-2.5-pro": true, "gpt-4o": false, "gemini-2.0-flash": false} {
		if m := e.seedModel(t, name); m.SupportsReasoning != want {
			t.Errorf("%s supports_reasoning = %v, want %v", name, m.SupportsReasoning, want)
		}
	}
	enabled, err := e.client.ListProviders(e.admin, &aiv1.ListProvidersRequest{EnabledOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range enabled.Providers {
		if p.Name == "ollama" {
			t.Error("ollama is listed among the enabled providers")
		}
		for _, m := range p.Models {
			if !m.Enabled {
				t.Errorf("disabled model %s listed with enabled_only", m.Name)
			}
		}
	}
}

func TestProviderLifecycle(t *testing.T) {
	t.Parallel()
	e := startRegistry(t)
	ctx := e.admin
	in := &aiv1.Provider{Name: "fake", Kind: aiv1.ProviderKind_PROVIDER_KIND_OPENAI_COMPATIBLE,
		BaseUrl: "http://llm.example.test/v1", ApiKeyRef: "env:ANTHROPIC_API_KEY", Enabled: true,
		// Output-only fields are ignored.
		Id: regMissingID, ApiKeyConfigured: false, Models: []*aiv1.Model{{Name: "ignored"}}}
	p := e.createProvider(t, in)
	if p.Id == regMissingID || len(p.Models) != 0 || !p.ApiKeyConfigured || p.Name != "fake" {
		t.Fatalf("created %v", p)
	}
	m := e.createModel(t, testModel(p.Id, "m", 2))

	got, err := e.client.GetProvider(ctx, &aiv1.GetProviderRequest{Id: p.Id})
	if err != nil {
		t.Fatal(err)
	}
	want := proto.CloneOf(p)
	want.Models = []*aiv1.Model{m}
	if d := cmp.Diff(want, got.Provider, protocmp.Transform()); d != "" {
		t.Errorf("GetProvider (-want +got):\n%s", d)
	}
	list, err := e.client.ListProviders(ctx, &aiv1.ListProvidersRequest{Name: "FAKE"})
	if err != nil || len(list.Providers) != 1 || list.Providers[0].Id != p.Id {
		t.Fatalf("ListProviders by name = %v, %v", list, err)
	}

	_, err = e.client.CreateProvider(ctx, &aiv1.CreateProviderRequest{Provider: &aiv1.Provider{Name: "Fake", Kind: aiv1.ProviderKind_PROVIDER_KIND_OPENAI}})
	regWantCode(t, err, codes.AlreadyExists, "name")

	up, err := e.client.UpdateProvider(ctx, &aiv1.UpdateProviderRequest{Id: p.Id, UpdateMask: mask("name", "enabled", "api_key_ref"),
		Provider: &aiv1.Provider{Id: p.Id, Name: "fake2", Enabled: false, ApiKeyRef: "env:UNSET_API_KEY", BaseUrl: "https://ignored.test"}})
	if err != nil {
		t.Fatal(err)
	}
	if up.Provider.Name != "fake2" || up.Provider.Enabled || up.Provider.ApiKeyConfigured || up.Provider.BaseUrl != in.BaseUrl || len(up.Provider.Models) != 1 {
		t.Errorf("updated %v", up.Provider)
	}
	// Without a mask, the fields present are the update (AIP-134): the name changes, the
	// rest stays.
	up, err = e.client.UpdateProvider(ctx, &aiv1.UpdateProviderRequest{Id: p.Id, Provider: &aiv1.Provider{Id: p.Id, Name: "fake3"}})
	if err != nil || up.Provider.Name != "fake3" || up.Provider.ApiKeyRef != "env:UNSET_API_KEY" || up.Provider.BaseUrl != in.BaseUrl {
		t.Fatalf("update without a mask: %v %v", up, err)
	}
	// The result must hold as a whole: an OpenAI-compatible provider keeps a base URL.
	_, err = e.client.UpdateProvider(ctx, &aiv1.UpdateProviderRequest{Id: p.Id, UpdateMask: mask("base_url"), Provider: &aiv1.Provider{}})
	regWantInvalid(t, err, "provider.base_url")
	_, err = e.client.UpdateProvider(ctx, &aiv1.UpdateProviderRequest{Id: p.Id, UpdateMask: mask("kind", "base_url"),
		Provider: &aiv1.Provider{Kind: aiv1.ProviderKind_PROVIDER_KIND_OPENAI}})
	if err != nil {
		t.Errorf("openai without base_url: %v", err)
	}
	_, err = e.client.UpdateProvider(ctx, &aiv1.UpdateProviderRequest{Id: regMissingID, UpdateMask: mask("enabled"), Provider: &aiv1.Provider{}})
	regWantCode(t, err, codes.NotFound)

	_, err = e.client.DeleteProvider(ctx, &aiv1.DeleteProviderRequest{Id: p.Id})
	regWantCode(t, err, codes.FailedPrecondition, "delete them first")
	if _, err := e.client.DeleteModel(ctx, &aiv1.DeleteModelRequest{Id: m.Id}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.client.DeleteProvider(ctx, &aiv1.DeleteProviderRequest{Id: p.Id}); err != nil {
		t.Fatal(err)
	}
	_, err = e.client.GetProvider(ctx, &aiv1.GetProviderRequest{Id: p.Id})
	regWantCode(t, err, codes.NotFound)
	_, err = e.client.DeleteProvider(ctx, &aiv1.DeleteProviderRequest{Id: p.Id})
	regWantCode(t, err, codes.NotFound)
}

func TestModelLifecycle(t *testing.T) {
	t.Parallel()
	e := startRegistry(t)
	ctx := e.admin
	p := e.createProvider(t, &aiv1.Provider{Name: "p", Kind: aiv1.ProviderKind_PROVIDER_KIND_OPENAI, Enabled: true})
	in := testModel(p.Id, "llama3.1:8b", 2)
	in.Tags = []string{"chat", "coding", "chat"}
	m := e.createModel(t, in)
	if d := cmp.Diff([]string{"chat", "coding"}, m.Tags); d != "" {
		t.Errorf("tags not normalized (-want +got):\n%s", d)
	}
	got, err := e.client.GetModel(ctx, &aiv1.GetModelRequest{Id: m.Id})
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(m, got.Model, protocmp.Transform()); d != "" {
		t.Errorf("GetModel (-want +got):\n%s", d)
	}
	_, err = e.client.CreateModel(ctx, &aiv1.CreateModelRequest{Model: testModel(p.Id, "llama3.1:8b", 1)})
	regWantCode(t, err, codes.AlreadyExists, "name")
	_, err = e.client.CreateModel(ctx, &aiv1.CreateModelRequest{Model: testModel(regMissingID, "x", 1)})
	regWantCode(t, err, codes.NotFound, "provider_id")

	// Pages through the model names with ':' in them.
	for _, n := range []string{"a:1", "a:2", "b:1"} {
		e.createModel(t, testModel(p.Id, n, 1))
	}
	var names []string
	req := &aiv1.ListModelsRequest{ProviderId: p.Id, PageSize: 2}
	for range 5 {
		page, err := e.client.ListModels(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range page.Models {
			names = append(names, m.Name)
		}
		if page.NextPageToken == "" {
			break
		}
		req.PageToken = page.NextPageToken
	}
	if d := cmp.Diff([]string{"a:1", "a:2", "b:1", "llama3.1:8b"}, names); d != "" {
		t.Errorf("pages (-want +got):\n%s", d)
	}

	up, err := e.client.UpdateModel(ctx, &aiv1.UpdateModelRequest{Id: m.Id, UpdateMask: mask("tier", "tags", "enabled"),
		Model: &aiv1.Model{Id: m.Id, ProviderId: p.Id, Tier: 4, Tags: []string{"planning"}, Enabled: false, Name: "ignored"}})
	if err != nil {
		t.Fatal(err)
	}
	if up.Model.Tier != 4 || up.Model.Enabled || up.Model.Name != m.Name || !cmp.Equal(up.Model.Tags, []string{"planning"}) {
		t.Errorf("updated %v", up.Model)
	}
	// supports_reasoning is set like supports_tools: on create and through update_mask.
	r := testModel(p.Id, "o4-mini", 3)
	r.SupportsReasoning = true
	if got := e.createModel(t, r); !got.SupportsReasoning {
		t.Errorf("created %v without supports_reasoning", got)
	}
	for _, on := range []bool{true, false} {
		up, err := e.client.UpdateModel(ctx, &aiv1.UpdateModelRequest{Id: m.Id, UpdateMask: mask("supports_reasoning"),
			Model: &aiv1.Model{SupportsReasoning: on}})
		if err != nil {
			t.Fatal(err)
		}
		if up.Model.SupportsReasoning != on || up.Model.Tier != 4 {
			t.Errorf("after supports_reasoning=%v: %v", on, up.Model)
		}
	}
	other := e.createProvider(t, &aiv1.Provider{Name: "other", Kind: aiv1.ProviderKind_PROVIDER_KIND_OPENAI})
	_, err = e.client.UpdateModel(ctx, &aiv1.UpdateModelRequest{Id: m.Id, UpdateMask: mask("tier"), Model: &aiv1.Model{ProviderId: other.Id, Tier: 1}})
	regWantInvalid(t, err, "model.provider_id")
	_, err = e.client.UpdateModel(ctx, &aiv1.UpdateModelRequest{Id: m.Id, UpdateMask: mask("max_output_tokens"), Model: &aiv1.Model{MaxOutputTokens: 200_000}})
	regWantInvalid(t, err, "model.max_output_tokens")
	_, err = e.client.UpdateModel(ctx, &aiv1.UpdateModelRequest{Id: m.Id, UpdateMask: mask("name"), Model: &aiv1.Model{Name: "a:1"}})
	regWantCode(t, err, codes.AlreadyExists)
	_, err = e.client.UpdateModel(ctx, &aiv1.UpdateModelRequest{Id: regMissingID, UpdateMask: mask("tier"), Model: &aiv1.Model{Tier: 1}})
	regWantCode(t, err, codes.NotFound)

	if _, err := e.client.DeleteModel(ctx, &aiv1.DeleteModelRequest{Id: m.Id}); err != nil {
		t.Fatal(err)
	}
	_, err = e.client.GetModel(ctx, &aiv1.GetModelRequest{Id: m.Id})
	regWantCode(t, err, codes.NotFound)
	_, err = e.client.DeleteModel(ctx, &aiv1.DeleteModelRequest{Id: m.Id})
	regWantCode(t, err, codes.NotFound)
}

func TestRegistryPermissions(t *testing.T) {
	t.Parallel()
	e := startRegistry(t)
	c := e.client
	calls := map[string]func(ctx context.Context) error{
		"ListProviders": func(ctx context.Context) error {
			_, err := c.ListProviders(ctx, &aiv1.ListProvidersRequest{})
			return err
		},
		"GetProvider": func(ctx context.Context) error {
			_, err := c.GetProvider(ctx, &aiv1.GetProviderRequest{Id: "x"})
			return err
		},
		"CreateProvider": func(ctx context.Context) error {
			_, err := c.CreateProvider(ctx, &aiv1.CreateProviderRequest{})
			return err
		},
		"UpdateProvider": func(ctx context.Context) error {
			_, err := c.UpdateProvider(ctx, &aiv1.UpdateProviderRequest{})
			return err
		},
		"DeleteProvider": func(ctx context.Context) error {
			_, err := c.DeleteProvider(ctx, &aiv1.DeleteProviderRequest{})
			return err
		},
		"ListModels":  func(ctx context.Context) error { _, err := c.ListModels(ctx, &aiv1.ListModelsRequest{}); return err },
		"GetModel":    func(ctx context.Context) error { _, err := c.GetModel(ctx, &aiv1.GetModelRequest{}); return err },
		"CreateModel": func(ctx context.Context) error { _, err := c.CreateModel(ctx, &aiv1.CreateModelRequest{}); return err },
		"UpdateModel": func(ctx context.Context) error { _, err := c.UpdateModel(ctx, &aiv1.UpdateModelRequest{}); return err },
		"DeleteModel": func(ctx context.Context) error { _, err := c.DeleteModel(ctx, &aiv1.DeleteModelRequest{}); return err },
	}
	for name, call := range calls {
		// Not parallel: e.user's deadline runs from startRegistry, and parallel subtests wait
		// for a free slot after every other parallel test of the package (under a loaded CI,
		// past that deadline).
		t.Run(name, func(t *testing.T) {
			// Bad input too: permission is checked before anything else.
			regWantCode(t, call(e.user), codes.PermissionDenied, "admin")
			regWantCode(t, call(e.anon), codes.Unauthenticated)
		})
	}
	if _, err := c.SelectModel(e.user, &aiv1.SelectModelRequest{Complexity: 3}); err != nil {
		t.Errorf("SelectModel as a user: %v", err)
	}
	_, err := c.SelectModel(e.anon, &aiv1.SelectModelRequest{Complexity: 3})
	regWantCode(t, err, codes.Unauthenticated)
}

func TestSelectModel(t *testing.T) {
	t.Parallel()
	e := startRegistry(t, registry.WithPreferred("anthropic"))
	resp, err := e.client.SelectModel(e.user, &aiv1.SelectModelRequest{Complexity: 5, Tags: []string{"coding"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Model.GetName() != "claude-sonnet-4-5" {
		t.Errorf("chose %s, want claude-sonnet-4-5 (reason %q)", resp.Model.GetName(), resp.Reason)
	}
	var fallbacks []string
	for _, f := range resp.Fallbacks {
		fallbacks = append(fallbacks, f.Name)
	}
	// The upgrade path stays with the provider, opus 4.5 before its namesake 4.6 on name.
	if d := cmp.Diff([]string{"claude-sonnet-4-6", "claude-opus-4-5", "claude-opus-4-6"}, fallbacks[:3]); d != "" {
		t.Errorf("fallbacks start (-want +got):\n%s", d)
	}
	if !strings.Contains(resp.Reason, "complexity 5, balanced → tier 3; chose claude-sonnet-4-5 (anthropic, tier 3)") {
		t.Errorf("reason %q", resp.Reason)
	}

	// Excluding the choice moves on; asking what nothing offers is FAILED_PRECONDITION.
	resp2, err := e.client.SelectModel(e.user, &aiv1.SelectModelRequest{Complexity: 5, Tags: []string{"coding"}, ExcludeModelIds: []string{resp.Model.Id}})
	if err != nil || resp2.Model.GetId() == resp.Model.Id {
		t.Fatalf("with the choice excluded: %v, %v", resp2.GetModel().GetName(), err)
	}
	_, err = e.client.SelectModel(e.user, &aiv1.SelectModelRequest{Tags: []string{"poetry"}})
	regWantCode(t, err, codes.FailedPrecondition, "tags [poetry]")
	// Embedding models only when asked.
	emb, err := e.client.SelectModel(e.user, &aiv1.SelectModelRequest{Complexity: 1, Tags: []string{"embedding"}})
	if err != nil || emb.Model.GetEmbeddingDimensions() == 0 {
		t.Errorf("embedding selection = %v, %v", emb.GetModel(), err)
	}
}

func TestSelectModelNothingCallable(t *testing.T) {
	t.Parallel()
	e := startRegistry(t, registry.WithUsable(func(*aiv1.Provider) bool { return false }))
	_, err := e.client.SelectModel(e.user, &aiv1.SelectModelRequest{Complexity: 5})
	regWantCode(t, err, codes.FailedPrecondition, "THEFOLD_AI_PROVIDER")
}

func TestRegistryCache(t *testing.T) {
	t.Parallel()
	e := startRegistry(t)
	ctx := e.admin
	p := e.createProvider(t, &aiv1.Provider{Name: "solo", Kind: aiv1.ProviderKind_PROVIDER_KIND_OPENAI, Enabled: true})
	m := e.createModel(t, testModel(p.Id, "only", 2))
	// Only this provider's tag: selection sees exactly our model.
	sel := &aiv1.SelectModelRequest{Complexity: 3, Tags: []string{"solo-tag"}}
	if _, err := e.client.UpdateModel(ctx, &aiv1.UpdateModelRequest{Id: m.Id, UpdateMask: mask("tags"), Model: &aiv1.Model{Tags: []string{"solo-tag"}}}); err != nil {
		t.Fatal(err)
	}
	// A change through the API is seen at once.
	if resp, err := e.client.SelectModel(e.user, sel); err != nil || resp.Model.GetId() != m.Id {
		t.Fatalf("after an API update: %v, %v", resp.GetModel().GetName(), err)
	}
	// A change behind the service's back (another replica) shows once the cache expires.
	if _, err := e.pool.Exec(t.Context(), "UPDATE models SET enabled = false WHERE id = $1", m.Id); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(registry.DefaultTTL - 1)
	if resp, err := e.client.SelectModel(e.user, sel); err != nil || resp.Model.GetId() != m.Id {
		t.Errorf("within the TTL: %v, %v; want the cached model", resp.GetModel().GetName(), err)
	}
	e.clk.Advance(1)
	_, err := e.client.SelectModel(e.user, sel)
	regWantCode(t, err, codes.FailedPrecondition, "solo-tag")
}
