package store

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
)

func TestModelCreateGetDelete(t *testing.T) {
	t.Parallel()
	s, _ := emptyStore(t)
	ctx := t.Context()
	a := mustProvider(t, s, provider("a"))
	b := mustProvider(t, s, provider("b"))
	in := model(a.Id, "llama3.1:8b", 3, func(m *aiv1.Model) {
		m.CacheReadMicrosPerMtok, m.CacheWriteMicrosPerMtok = 100_000, 1_250_000
		m.EmbeddingDimensions = 0
		m.Tags = []string{"chat", "coding"}
		m.SupportsTools, m.SupportsVision, m.SupportsReasoning = true, true, true
	})
	m := mustModel(t, s, in)
	if d := cmp.Diff(in, m, ignoreOutput...); d != "" {
		t.Errorf("created (-want +got):\n%s", d)
	}
	got, err := s.GetModel(ctx, m.Id)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(m, got, protocmp.Transform()); d != "" {
		t.Errorf("GetModel (-want +got):\n%s", d)
	}

	// The name is unique per provider, case-sensitively (providers' names are).
	_, err = s.CreateModel(ctx, model(a.Id, "llama3.1:8b", 1))
	wantErr(t, err, errs.ErrAlreadyExists)
	mustModel(t, s, model(a.Id, "LLAMA3.1:8b", 1))
	mustModel(t, s, model(b.Id, "llama3.1:8b", 1))
	_, err = s.CreateModel(ctx, model(missingID, "x", 1))
	wantErr(t, err, errs.ErrNotFound)

	if err := s.DeleteModel(ctx, m.Id); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetModel(ctx, m.Id)
	wantErr(t, err, errs.ErrNotFound)
	wantErr(t, s.DeleteModel(ctx, m.Id), errs.ErrNotFound)
}

func TestListModels(t *testing.T) {
	t.Parallel()
	s, _ := emptyStore(t)
	ctx := t.Context()
	beta := mustProvider(t, s, provider("Beta"))
	alpha := mustProvider(t, s, provider("alpha"))
	off := mustProvider(t, s, provider("off", func(p *aiv1.Provider) { p.Enabled = false }))
	for _, m := range []*aiv1.Model{
		model(beta.Id, "b-big", 5, func(m *aiv1.Model) { m.Tags = []string{"planning"} }),
		model(beta.Id, "b-small", 1),
		model(alpha.Id, "a-mid:2", 3, func(m *aiv1.Model) { m.Tags = []string{"chat", "coding"} }),
		model(alpha.Id, "a-mid:1", 3, func(m *aiv1.Model) { m.Enabled = false }),
		model(alpha.Id, "a-small", 1),
		model(off.Id, "o-small", 1),
	} {
		mustModel(t, s, m)
	}
	cases := []struct {
		name string
		f    ModelFilter
		want [][]string
	}{
		{"all, pages of 2", ModelFilter{PageSize: 2}, [][]string{{"a-small", "a-mid:1"}, {"a-mid:2", "b-small"}, {"b-big", "o-small"}}},
		{"all, one page", ModelFilter{PageSize: 6}, [][]string{{"a-small", "a-mid:1", "a-mid:2", "b-small", "b-big", "o-small"}}},
		{"provider", ModelFilter{PageSize: 1, ProviderID: beta.Id}, [][]string{{"b-small"}, {"b-big"}}},
		{"tag", ModelFilter{PageSize: 10, Tag: "coding"}, [][]string{{"a-mid:2"}}},
		{"tier", ModelFilter{PageSize: 10, Tier: 1}, [][]string{{"a-small", "b-small", "o-small"}}},
		{"enabled only", ModelFilter{PageSize: 2, EnabledOnly: true}, [][]string{{"a-small", "a-mid:2"}, {"b-small", "b-big"}}},
		{"name", ModelFilter{PageSize: 10, Name: "a-mid:1"}, [][]string{{"a-mid:1"}}},
		{"nothing", ModelFilter{PageSize: 10, Tag: "vision"}, [][]string{{}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := tc.f
			var got [][]string
			for range 10 {
				page, next, err := s.ListModels(ctx, f)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, names(page))
				if next == nil {
					break
				}
				f.After = next
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("pages (-want +got):\n%s", d)
			}
		})
	}
}

func TestUpdateModel(t *testing.T) {
	t.Parallel()
	s, _ := emptyStore(t)
	ctx := t.Context()
	p := mustProvider(t, s, provider("p"))
	m := mustModel(t, s, model(p.Id, "m", 2))
	mustModel(t, s, model(p.Id, "taken", 2))

	change := &aiv1.Model{
		ProviderId: missingID, Name: "m2", DisplayName: "M two", Tier: 4,
		InputMicrosPerMtok: 1, OutputMicrosPerMtok: 2, CacheReadMicrosPerMtok: 3, CacheWriteMicrosPerMtok: 4,
		ContextWindow: 5, MaxOutputTokens: 6, EmbeddingDimensions: 7, Tags: []string{"x", "y"},
		SupportsTools: true, SupportsVision: true, SupportsReasoning: true, Enabled: false,
	}
	got, err := s.UpdateModel(ctx, m.Id, change, ModelFields, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := proto.CloneOf(change)
	want.Id, want.ProviderId, want.CreateTime = m.Id, p.Id, m.CreateTime // provider_id is not a field
	if d := cmp.Diff(want, got, protocmp.Transform(), protocmp.IgnoreFields(&aiv1.Model{}, "update_time")); d != "" {
		t.Errorf("updated (-want +got):\n%s", d)
	}

	// Only the named fields change.
	got, err = s.UpdateModel(ctx, m.Id, &aiv1.Model{Tier: 1, Name: "ignored"}, []string{"tier"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Tier != 1 || got.Name != "m2" || got.DisplayName != "M two" {
		t.Errorf("after a tier update: %v", got)
	}

	refused := errors.New("refused")
	_, err = s.UpdateModel(ctx, m.Id, &aiv1.Model{Tier: 5}, []string{"tier"}, func(before, after *aiv1.Model) error {
		if before.Tier != 1 || after.Tier != 5 {
			t.Errorf("check saw tier %d → %d", before.Tier, after.Tier)
		}
		return refused
	})
	wantErr(t, err, refused)
	_, err = s.UpdateModel(ctx, m.Id, &aiv1.Model{Name: "taken"}, []string{"name"}, nil)
	wantErr(t, err, errs.ErrAlreadyExists)
	_, err = s.UpdateModel(ctx, m.Id, &aiv1.Model{ProviderId: missingID}, []string{"provider_id"}, nil)
	wantErr(t, err, errs.ErrInvalid)
	_, err = s.UpdateModel(ctx, missingID, &aiv1.Model{Tier: 1}, []string{"tier"}, nil)
	wantErr(t, err, errs.ErrNotFound)
	if again, _ := s.GetModel(ctx, m.Id); again.GetTier() != 1 {
		t.Errorf("tier after refused updates = %d", again.GetTier())
	}
}

func TestSeedCatalogue(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	cat, err := s.Catalogue(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		provider, kind string
		enabled        bool
	}
	byName := map[string]*aiv1.Provider{}
	for _, p := range cat {
		byName[p.Name] = p
	}
	for _, want := range []row{
		{"anthropic", "anthropic", true}, {"openai", "openai", true}, {"gemini", "gemini", true},
		{"moonshot", "openai_compatible", true}, {"ollama", "openai_compatible", false},
	} {
		p := byName[want.provider]
		if p == nil || KindName(p.Kind) != want.kind || p.Enabled != want.enabled {
			t.Errorf("provider %s = %v, want kind %s enabled %v", want.provider, p, want.kind, want.enabled)
		}
	}
	find := func(provider, name string) *aiv1.Model {
		for _, m := range byName[provider].GetModels() {
			if m.Name == name {
				return m
			}
		}
		t.Fatalf("seed model %s/%s missing", provider, name)
		return nil
	}
	// The seed document's tiers.
	for _, c := range []struct {
		provider, name string
		tier           int32
	}{
		{"moonshot", "moonshot-v1-32k", 1}, {"moonshot", "moonshot-v1-128k", 1}, {"openai", "gpt-4o-mini", 1},
		{"gemini", "gemini-2.0-flash", 1}, {"anthropic", "claude-haiku-4-5", 2}, {"anthropic", "claude-sonnet-4-5", 3},
		{"openai", "gpt-4o", 3}, {"anthropic", "claude-opus-4-5", 5}, {"gemini", "gemini-2.0-pro", 5},
	} {
		if m := find(c.provider, c.name); m.Tier != c.tier {
			t.Errorf("%s tier = %d, want %d", c.name, m.Tier, c.tier)
		}
	}
	sonnet := find("anthropic", "claude-sonnet-4-5")
	if sonnet.InputMicrosPerMtok != 3_000_000 || sonnet.CacheReadMicrosPerMtok != 300_000 || sonnet.CacheWriteMicrosPerMtok != 3_750_000 {
		t.Errorf("claude-sonnet-4-5 prices = %v", sonnet)
	}
	if m := find("openai", "text-embedding-3-small"); m.EmbeddingDimensions != 1536 || !cmp.Equal(m.Tags, []string{"embedding"}) {
		t.Errorf("text-embedding-3-small = %v", m)
	}
	if m := find("ollama", "nomic-embed-text"); m.EmbeddingDimensions != 768 || m.InputMicrosPerMtok != 0 {
		t.Errorf("nomic-embed-text = %v", m)
	}
	if p := byName["ollama"]; p.BaseUrl != "http://localhost:11434/v1" || p.ApiKeyRef != "" {
		t.Errorf("ollama = %v", p)
	}
	for _, p := range cat {
		for _, m := range p.Models {
			if m.Tier < 1 || m.Tier > 5 || len(m.Tags) == 0 || m.DisplayName == "" {
				t.Errorf("seed model %s/%s is incomplete: %v", p.Name, m.Name, m)
			}
		}
	}
	// Reasoning as the providers document it: every Claude 4.x (Haiku 4.5 too) and Gemini
	// 2.5; not GPT-4o/4.1, Gemini 2.0, the OpenAI-compatible servers' or embedding models.
	reasoning := map[string]bool{
		"anthropic/claude-haiku-4-5": true, "anthropic/claude-sonnet-4-5": true, "anthropic/claude-sonnet-4-6": true,
		"anthropic/claude-opus-4-5": true, "anthropic/claude-opus-4-6": true,
		"gemini/gemini-2.5-flash": true, "gemini/gemini-2.5-pro": true,
	}
	for _, p := range cat {
		for _, m := range p.Models {
			if want := reasoning[p.Name+"/"+m.Name]; m.SupportsReasoning != want {
				t.Errorf("seed model %s/%s supports_reasoning = %v, want %v", p.Name, m.Name, m.SupportsReasoning, want)
			}
		}
	}
}
