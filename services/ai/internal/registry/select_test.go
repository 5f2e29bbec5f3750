package registry

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
)

const (
	balanced = aiv1.BudgetMode_BUDGET_MODE_BALANCED
	quality  = aiv1.BudgetMode_BUDGET_MODE_QUALITY_FIRST
	save     = aiv1.BudgetMode_BUDGET_MODE_AGGRESSIVE_SAVE
)

func TestTargetTier(t *testing.T) {
	t.Parallel()
	// Complexity 0–10 under each mode.
	want := map[aiv1.BudgetMode][]int32{
		aiv1.BudgetMode_BUDGET_MODE_UNSPECIFIED: {3, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5},
		balanced:                                {3, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5},
		quality:                                 {4, 2, 2, 3, 3, 4, 4, 5, 5, 5, 5},
		save:                                    {2, 1, 1, 1, 1, 2, 2, 3, 3, 4, 4},
	}
	for mode, tiers := range want {
		for c, tier := range tiers {
			if got := TargetTier(int32(c), mode); got != tier {
				t.Errorf("TargetTier(%d, %v) = %d, want %d", c, mode, got, tier)
			}
		}
	}
	// Out-of-range complexity is clamped, not trusted.
	if got := TargetTier(99, quality); got != 5 {
		t.Errorf("TargetTier(99) = %d", got)
	}
}

// catalogue for selection: three providers and a disabled one.
func testCandidates() []Candidate {
	prov := func(id, name string, enabled bool) *aiv1.Provider {
		return &aiv1.Provider{Id: id, Name: name, Enabled: enabled}
	}
	anthropic, openai, gemini, off := prov("pa", "anthropic", true), prov("po", "openai", true), prov("pg", "gemini", true), prov("px", "off", false)
	mk := func(p *aiv1.Provider, name string, tier int32, in, out int64, ctx int32, tags string, tools, vision, enabled bool) Candidate {
		return Candidate{Provider: p, Model: &aiv1.Model{
			Id: "m-" + name, ProviderId: p.Id, Name: name, Tier: tier, InputMicrosPerMtok: in, OutputMicrosPerMtok: out,
			ContextWindow: ctx, Tags: strings.Fields(tags), SupportsTools: tools, SupportsVision: vision, Enabled: enabled,
		}}
	}
	embed := mk(openai, "embed", 1, 20_000, 0, 8191, "embedding", false, false, true)
	embed.Model.EmbeddingDimensions = 1536
	return []Candidate{
		mk(anthropic, "haiku", 2, 1_000_000, 5_000_000, 200_000, "chat coding analysis", true, true, true),
		mk(anthropic, "sonnet", 3, 3_000_000, 15_000_000, 200_000, "chat coding analysis planning", true, true, true),
		mk(anthropic, "opus", 5, 5_000_000, 25_000_000, 200_000, "chat coding analysis planning", true, true, true),
		mk(openai, "mini", 1, 150_000, 600_000, 128_000, "chat coding analysis", true, false, true),
		mk(openai, "gpt-4o", 3, 2_500_000, 10_000_000, 128_000, "chat coding analysis planning", true, true, true),
		mk(openai, "gpt-4.1", 3, 2_000_000, 8_000_000, 1_000_000, "chat coding", true, false, true),
		embed,
		mk(gemini, "flash", 1, 100_000, 400_000, 1_000_000, "chat analysis", true, true, true),
		mk(gemini, "pro", 4, 1_250_000, 10_000_000, 1_000_000, "chat coding analysis planning", true, true, true),
		mk(gemini, "pro-old", 5, 1_250_000, 10_000_000, 2_000_000, "chat coding analysis planning", true, true, false),
		mk(off, "offmodel", 3, 1, 1, 1_000_000, "chat coding only-off", true, true, true),
	}
}

func TestSelect(t *testing.T) {
	t.Parallel()
	cands := testCandidates()
	cases := []struct {
		name      string
		req       *aiv1.SelectModelRequest
		prefer    string
		want      string
		fallbacks []string
		reason    []string
	}{
		{"target tier, cheapest; fallbacks: same tier, higher tiers, lower tiers",
			&aiv1.SelectModelRequest{Complexity: 5}, "",
			"gpt-4.1", []string{"gpt-4o", "sonnet", "pro", "opus", "haiku"},
			[]string{"complexity 5, balanced → tier 3; chose gpt-4.1 (openai, tier 3)"}},
		{"preferred provider wins the tier; its higher tiers come first",
			&aiv1.SelectModelRequest{Complexity: 6, BudgetMode: balanced}, "anthropic",
			"sonnet", []string{"opus", "gpt-4.1", "gpt-4o", "pro", "haiku"}, nil},
		{"preference is case-insensitive",
			&aiv1.SelectModelRequest{Complexity: 5}, "ANTHROPIC", "sonnet", nil, nil},
		{"the exact tier beats the preferred provider",
			&aiv1.SelectModelRequest{Complexity: 7, Tags: []string{"coding"}}, "anthropic",
			"pro", []string{"opus", "sonnet", "gpt-4.1", "gpt-4o", "haiku"},
			[]string{"complexity 7, balanced → tier 4; chose pro (gemini, tier 4)"}},
		{"no model at the tier: upgrade",
			&aiv1.SelectModelRequest{Complexity: 7, Tags: []string{"coding"}, ExcludeModelIds: []string{"m-pro"}}, "anthropic",
			"opus", []string{"sonnet", "gpt-4.1", "gpt-4o", "haiku", "mini"},
			[]string{"→ tier 4; chose opus (anthropic, tier 5: no enabled tier-4 model with tags [coding] (1 excluded))"}},
		{"quality first is clamped at 5",
			&aiv1.SelectModelRequest{Complexity: 10, BudgetMode: quality}, "", "opus", nil,
			[]string{"complexity 10, quality first → tier 5"}},
		{"aggressive save: cheapest tier 1, embedding models left out; the provider's upgrade first",
			&aiv1.SelectModelRequest{Complexity: 1, BudgetMode: save}, "",
			"flash", []string{"pro", "mini", "haiku", "gpt-4.1", "gpt-4o"},
			[]string{"complexity 1, aggressive save → tier 1"}},
		{"complexity 0 is the middle tier",
			&aiv1.SelectModelRequest{}, "", "gpt-4.1", nil, []string{"complexity unset, balanced → tier 3"}},
		{"tags narrow the tier",
			&aiv1.SelectModelRequest{Complexity: 5, Tags: []string{"planning"}}, "", "gpt-4o", nil, nil},
		{"nearest higher tier, not the cheapest higher one",
			&aiv1.SelectModelRequest{Complexity: 2, Tags: []string{"planning"}}, "",
			"gpt-4o", []string{"sonnet", "pro", "opus"}, nil},
		{"context window",
			&aiv1.SelectModelRequest{Complexity: 5, MinContextWindow: 500_000}, "",
			"gpt-4.1", []string{"pro", "flash"}, nil},
		{"vision",
			&aiv1.SelectModelRequest{Complexity: 2, RequireVision: true}, "",
			"flash", []string{"pro", "haiku", "gpt-4o", "sonnet", "opus"}, nil},
		{"tools, vision and planning; lower tiers with the same provider first",
			&aiv1.SelectModelRequest{Complexity: 9, RequireTools: true, RequireVision: true, Tags: []string{"planning"}}, "",
			"opus", []string{"pro", "sonnet", "gpt-4o"}, nil},
		{"embedding when asked; lower tier when nothing is at or above",
			&aiv1.SelectModelRequest{Tags: []string{"embedding"}}, "",
			"embed", nil, []string{"chose embed (openai, tier 1: no enabled model with tags [embedding] at tier 3 or above)"}},
		{"lower tiers, nearest first and the same provider first",
			&aiv1.SelectModelRequest{Complexity: 10, Tags: []string{"chat"}, ExcludeModelIds: []string{"m-opus", "m-pro"}}, "",
			"gpt-4.1", []string{"gpt-4o", "sonnet", "haiku", "mini", "flash"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			chosen, fallbacks, reason, err := Select(cands, tc.req, tc.prefer)
			if err != nil {
				t.Fatal(err)
			}
			if chosen.Model.GetName() != tc.want {
				t.Errorf("chose %s, want %s (reason %q)", chosen.Model.GetName(), tc.want, reason)
			}
			got := make([]string, len(fallbacks))
			for i, f := range fallbacks {
				got[i] = f.Model.GetName()
			}
			if len(got) > maxFallbacks {
				t.Errorf("%d fallbacks, at most %d", len(got), maxFallbacks)
			}
			if tc.fallbacks != nil {
				if d := cmp.Diff(tc.fallbacks, got); d != "" {
					t.Errorf("fallbacks (-want +got):\n%s", d)
				}
			}
			for _, f := range append([]Candidate{chosen}, fallbacks...) {
				if !f.Model.GetEnabled() || !f.Provider.GetEnabled() {
					t.Errorf("%s is disabled but was returned", f.Model.GetName())
				}
			}
			for _, part := range tc.reason {
				if !strings.Contains(reason, part) {
					t.Errorf("reason %q does not contain %q", reason, part)
				}
			}
		})
	}
}

func TestSelectNothingMatches(t *testing.T) {
	t.Parallel()
	cands := testCandidates()
	all := make([]string, len(cands))
	for i, c := range cands {
		all[i] = c.Model.GetId()
	}
	cases := []struct {
		name  string
		cands []Candidate
		req   *aiv1.SelectModelRequest
		parts []string
	}{
		{"unknown tag", cands, &aiv1.SelectModelRequest{Tags: []string{"coding", "poetry"}}, []string{"no enabled model with tags [coding poetry]"}},
		{"only a disabled provider's model", cands, &aiv1.SelectModelRequest{Tags: []string{"only-off"}}, []string{"tags [only-off]"}},
		{"everything excluded", cands, &aiv1.SelectModelRequest{ExcludeModelIds: all}, []string{fmt.Sprint("(", len(all), " excluded)")}},
		{"all requirements named", cands, &aiv1.SelectModelRequest{MinContextWindow: 5_000_000, RequireTools: true, RequireVision: true},
			[]string{"with a context window of at least 5000000 tokens, tools and vision"}},
		{"empty catalogue", nil, &aiv1.SelectModelRequest{Complexity: 3}, []string{"no enabled model"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, _, _, err := Select(tc.cands, tc.req, "")
			if !errors.Is(err, errs.ErrFailedPrecondition) {
				t.Fatalf("err = %v, want failed precondition", err)
			}
			for _, p := range tc.parts {
				if !strings.Contains(err.Error(), p) {
					t.Errorf("error %q does not contain %q", err, p)
				}
			}
		})
	}
}

func TestSelectTies(t *testing.T) {
	t.Parallel()
	p1 := &aiv1.Provider{Id: "p1", Name: "zeta", Enabled: true}
	p2 := &aiv1.Provider{Id: "p2", Name: "alpha", Enabled: true}
	m := func(p *aiv1.Provider, name string, in int64) Candidate {
		return Candidate{Provider: p, Model: &aiv1.Model{Id: p.Id + name, Name: name, Tier: 3, InputMicrosPerMtok: in, Enabled: true}}
	}
	cands := []Candidate{m(p1, "b", 5), m(p2, "c", 5), m(p1, "a", 5), m(p2, "a", 5), m(p2, "cheap", 4)}
	names := func(prefer string) []string {
		chosen, fallbacks, _, err := Select(cands, &aiv1.SelectModelRequest{Complexity: 5}, prefer)
		if err != nil {
			t.Fatal(err)
		}
		out := []string{chosen.Provider.Name + "/" + chosen.Model.Name}
		for _, f := range fallbacks {
			out = append(out, f.Provider.Name+"/"+f.Model.Name)
		}
		return out
	}
	// Price first, then model name, then provider name.
	if d := cmp.Diff([]string{"alpha/cheap", "alpha/a", "alpha/c", "zeta/a", "zeta/b"}, names("")); d != "" {
		t.Errorf("no preference (-want +got):\n%s", d)
	}
	// The preferred provider before price; the chosen provider's own tier-mates next.
	if d := cmp.Diff([]string{"zeta/a", "zeta/b", "alpha/cheap", "alpha/a", "alpha/c"}, names("zeta")); d != "" {
		t.Errorf("prefer zeta (-want +got):\n%s", d)
	}
}

// SelectTier selects at a tier given directly (RunSubAgents' roles), the nearest tier with
// a model when it has none, whatever the request's complexity says.
func TestSelectTier(t *testing.T) {
	t.Parallel()
	anthropicOnly := func() []Candidate {
		var out []Candidate
		for _, c := range testCandidates() {
			if c.Provider.Name == "anthropic" {
				out = append(out, c)
			}
		}
		return out
	}
	cases := []struct {
		cands  []Candidate
		tier   int32
		prefer string
		want   string
		reason string
	}{
		{testCandidates(), 3, "anthropic", "sonnet", "tier 3 asked; chose sonnet (anthropic, tier 3)"},
		{testCandidates(), 3, "", "gpt-4.1", "tier 3 asked; chose gpt-4.1"},
		{testCandidates(), 4, "", "pro", "tier 4 asked"},
		{anthropicOnly(), 1, "", "haiku", "tier 1 asked; chose haiku (anthropic, tier 2: no enabled tier-1 model)"},
		{anthropicOnly(), 4, "", "opus", "tier 4 asked; chose opus (anthropic, tier 5: no enabled tier-4 model)"},
		{testCandidates(), 0, "", "flash", "tier 1 asked"},
		{testCandidates(), 9, "anthropic", "opus", "tier 5 asked"},
	}
	for _, c := range cases {
		got, _, reason, err := SelectTier(c.cands, c.tier, &aiv1.SelectModelRequest{Complexity: 10}, c.prefer)
		if err != nil {
			t.Fatalf("tier %d: %v", c.tier, err)
		}
		if got.Model.Name != c.want || !strings.HasPrefix(reason, c.reason) {
			t.Errorf("tier %d: chose %s (%q), want %s (%q…)", c.tier, got.Model.Name, reason, c.want, c.reason)
		}
	}
}
