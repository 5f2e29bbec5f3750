package registry

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
)

// Candidate is a model together with its provider.
type Candidate struct {
	Model    *aiv1.Model
	Provider *aiv1.Provider
}

// maxFallbacks bounds the fallbacks Select returns: enough to get past a provider outage and
// a rate limit, few enough that a failing call gives up in reasonable time.
const maxFallbacks = 5

// embeddingTag marks embedding models; they are chosen only when a call asks for it.
const embeddingTag = "embedding"

// TargetTier maps a task's complexity (1–10) and budget mode to the tier to select: two
// complexity points per tier (1–2 → 1, …, 9–10 → 5), one tier up for quality_first, one
// down for aggressive_save. Complexity 0 (not given) is the middle tier, 3.
func TargetTier(complexity int32, mode aiv1.BudgetMode) int32 {
	tier := int32(3)
	if complexity > 0 {
		tier = (complexity + 1) / 2
	}
	switch mode {
	case aiv1.BudgetMode_BUDGET_MODE_QUALITY_FIRST:
		tier++
	case aiv1.BudgetMode_BUDGET_MODE_AGGRESSIVE_SAVE:
		tier--
	}
	return min(max(tier, 1), 5)
}

// Select picks the model for a call from cands: the model and its provider enabled, every
// requested tag carried, the context window, tools and vision asked for, not excluded, and
// not an embedding model unless "embedding" is asked for. It prefers the target tier
// (TargetTier), else the nearest higher tier (an upgrade), else the nearest lower one; within
// a tier the provider named prefer (case-insensitive), then the lower price (input + output),
// then the name.
//
// The fallbacks, at most five, are in the order to try them: higher tiers of the chosen
// model's provider (the upgrade path stays with the provider), the rest of the chosen tier
// (same provider first), other providers' higher tiers, then lower tiers, nearest first.
// reason says in words why the model was chosen. No model matching is
// errs.ErrFailedPrecondition with what was asked for.
func Select(cands []Candidate, req *aiv1.SelectModelRequest, prefer string) (chosen Candidate, fallbacks []Candidate, reason string, err error) {
	target := TargetTier(req.GetComplexity(), req.GetBudgetMode())
	return selectAt(cands, req, target, prefer, askedFor(req, target))
}

// SelectTier is Select with the target tier given rather than derived from a complexity and
// budget mode (req's are ignored): RunSubAgents fixes a tier per role. tier is clamped to
// 1–5; the nearest tier with an eligible model is chosen as Select does.
func SelectTier(cands []Candidate, tier int32, req *aiv1.SelectModelRequest, prefer string) (chosen Candidate, fallbacks []Candidate, reason string, err error) {
	tier = min(max(tier, 1), 5)
	return selectAt(cands, req, tier, prefer, fmt.Sprintf("tier %d asked", tier))
}

// selectAt is Select at target; asked says in words how target was arrived at.
func selectAt(cands []Candidate, req *aiv1.SelectModelRequest, target int32, prefer, asked string) (chosen Candidate, fallbacks []Candidate, reason string, err error) {
	var eligible []Candidate
	for _, c := range cands {
		if matches(c, req) {
			eligible = append(eligible, c)
		}
	}
	if len(eligible) == 0 {
		return Candidate{}, nil, "", fmt.Errorf("no enabled model%s: %w", requirements(req), errs.ErrFailedPrecondition)
	}
	rank := func(a, b Candidate) int {
		return cmp.Or(
			boolFirst(isPreferred(a, prefer), isPreferred(b, prefer)),
			cmp.Compare(price(a), price(b)),
			strings.Compare(a.Model.GetName(), b.Model.GetName()),
			strings.Compare(a.Provider.GetName(), b.Provider.GetName()),
			strings.Compare(a.Model.GetId(), b.Model.GetId()),
		)
	}
	tier := chooseTier(eligible, target)
	slices.SortFunc(eligible, func(a, b Candidate) int {
		return cmp.Or(boolFirst(a.Model.GetTier() == tier, b.Model.GetTier() == tier), rank(a, b))
	})
	chosen = eligible[0]
	sameProvider := func(c Candidate) bool { return c.Provider.GetId() == chosen.Provider.GetId() }
	group := func(c Candidate) int {
		t := c.Model.GetTier()
		switch {
		case t > tier && sameProvider(c):
			return 0
		case t == tier:
			return 1
		case t > tier:
			return 2
		}
		return 3
	}
	rest := slices.Clone(eligible[1:])
	slices.SortFunc(rest, func(a, b Candidate) int {
		ga, gb := group(a), group(b)
		if ga != gb {
			return cmp.Compare(ga, gb)
		}
		switch ga {
		case 1:
			return cmp.Or(boolFirst(sameProvider(a), sameProvider(b)), rank(a, b))
		case 3:
			// Lower tiers: the nearest first, the same provider first within one.
			return cmp.Or(cmp.Compare(b.Model.GetTier(), a.Model.GetTier()), boolFirst(sameProvider(a), sameProvider(b)), rank(a, b))
		}
		return cmp.Or(cmp.Compare(a.Model.GetTier(), b.Model.GetTier()), rank(a, b))
	})
	if len(rest) > maxFallbacks {
		rest = rest[:maxFallbacks]
	}
	return chosen, rest, explain(req, asked, target, tier, chosen), nil
}

// matches reports whether c is eligible for req.
func matches(c Candidate, req *aiv1.SelectModelRequest) bool {
	m, p := c.Model, c.Provider
	switch {
	case m == nil || p == nil || !m.GetEnabled() || !p.GetEnabled():
		return false
	case req.GetMinContextWindow() > 0 && m.GetContextWindow() < req.GetMinContextWindow():
		return false
	case req.GetRequireTools() && !m.GetSupportsTools():
		return false
	case req.GetRequireVision() && !m.GetSupportsVision():
		return false
	case slices.Contains(req.GetExcludeModelIds(), m.GetId()):
		return false
	case IsEmbedding(m) && !slices.Contains(req.GetTags(), embeddingTag):
		return false
	}
	for _, t := range req.GetTags() {
		if !slices.Contains(m.GetTags(), t) {
			return false
		}
	}
	return true
}

// IsEmbedding reports whether m is an embedding model (a vector size or the embedding tag).
func IsEmbedding(m *aiv1.Model) bool {
	return m.GetEmbeddingDimensions() > 0 || slices.Contains(m.GetTags(), embeddingTag)
}

// chooseTier is target when a model has it, else the nearest tier above, else below.
func chooseTier(cands []Candidate, target int32) int32 {
	best := int32(0)
	for _, c := range cands {
		t := c.Model.GetTier()
		switch {
		case t == target:
			return t
		case t > target && (best < target || t < best):
			best = t
		case t < target && best < target && t > best:
			best = t
		}
	}
	return best
}

func isPreferred(c Candidate, prefer string) bool {
	return prefer != "" && strings.EqualFold(c.Provider.GetName(), prefer)
}

// price orders models by what a typical call costs: input and output per million tokens.
func price(c Candidate) int64 {
	return addSat(c.Model.GetInputMicrosPerMtok(), c.Model.GetOutputMicrosPerMtok())
}

// boolFirst orders true before false.
func boolFirst(a, b bool) int {
	switch {
	case a == b:
		return 0
	case a:
		return -1
	}
	return 1
}

// requirements describes what req asks of a model, e.g. " with tags [coding] and tools".
func requirements(req *aiv1.SelectModelRequest) string {
	var parts []string
	if len(req.GetTags()) > 0 {
		parts = append(parts, fmt.Sprintf("tags [%s]", strings.Join(req.GetTags(), " ")))
	}
	if n := req.GetMinContextWindow(); n > 0 {
		parts = append(parts, fmt.Sprintf("a context window of at least %d tokens", n))
	}
	if req.GetRequireTools() {
		parts = append(parts, "tools")
	}
	if req.GetRequireVision() {
		parts = append(parts, "vision")
	}
	var s string
	switch len(parts) {
	case 0:
	case 1:
		s = " with " + parts[0]
	default:
		s = " with " + strings.Join(parts[:len(parts)-1], ", ") + " and " + parts[len(parts)-1]
	}
	if n := len(req.GetExcludeModelIds()); n > 0 {
		s += fmt.Sprintf(" (%d excluded)", n)
	}
	return s
}

// askedFor says how Select arrived at its target tier, e.g. "complexity 7, balanced → tier 4".
func askedFor(req *aiv1.SelectModelRequest, target int32) string {
	c := "complexity unset"
	if req.GetComplexity() > 0 {
		c = fmt.Sprintf("complexity %d", req.GetComplexity())
	}
	mode := "balanced"
	switch req.GetBudgetMode() {
	case aiv1.BudgetMode_BUDGET_MODE_QUALITY_FIRST:
		mode = "quality first"
	case aiv1.BudgetMode_BUDGET_MODE_AGGRESSIVE_SAVE:
		mode = "aggressive save"
	}
	return fmt.Sprintf("%s, %s → tier %d", c, mode, target)
}

// explain is Select's reason, e.g. "complexity 7, balanced → tier 4; chose claude-opus-4-5
// (anthropic, tier 5: no tier-4 model with tags [coding])".
func explain(req *aiv1.SelectModelRequest, asked string, target, tier int32, chosen Candidate) string {
	s := fmt.Sprintf("%s; chose %s (%s, tier %d", asked, chosen.Model.GetName(), chosen.Provider.GetName(), tier)
	switch {
	case tier > target:
		s += fmt.Sprintf(": no enabled tier-%d model%s", target, requirements(req))
	case tier < target:
		s += fmt.Sprintf(": no enabled model%s at tier %d or above", requirements(req), target)
	}
	return s + ")"
}
