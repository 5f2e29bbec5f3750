package engine

import (
	"context"
	"errors"
	"slices"

	"google.golang.org/grpc/codes"

	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"

	"github.com/thefold/thefold/services/ai/internal/registry"
)

// candidates returns the models to try in order: an explicit model alone; else the
// selected model and its fallbacks. No callable provider at all is FAILED_PRECONDITION
// naming the settings to set.
func (e *Engine) candidates(ctx context.Context, choice *aiv1.ModelChoice, def Defaults, requireTools bool) ([]registry.Candidate, error) {
	all, err := e.reg.Candidates(ctx)
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, errs.Public(codes.FailedPrecondition, "%s", noProviderMessage)
	}
	name := choice.GetModel()
	if name == "" && e.cfg.Model != "" && choice.GetComplexity() == 0 && len(choice.GetTags()) == 0 {
		name = e.cfg.Model
	}
	if name != "" {
		cand, err := e.reg.ResolveModel(ctx, name)
		if err != nil {
			return nil, err
		}
		if !e.Usable(cand.Provider) {
			return nil, errs.Public(codes.FailedPrecondition,
				"model %s belongs to provider %s, which cannot be called here: %s",
				cand.Model.GetName(), cand.Provider.GetName(), noProviderMessage)
		}
		return []registry.Candidate{cand}, nil
	}
	req := &aiv1.SelectModelRequest{
		Complexity:   choice.GetComplexity(),
		Tags:         choice.GetTags(),
		BudgetMode:   choice.GetBudgetMode(),
		RequireTools: requireTools,
	}
	if req.Complexity == 0 {
		req.Complexity = def.Complexity
	}
	defaultTags := len(req.Tags) == 0
	if defaultTags {
		req.Tags = def.Tags
	}
	chosen, fallbacks, _, err := registry.Select(all, req, e.cfg.Provider)
	if err != nil && defaultTags && len(req.Tags) > 0 && errors.Is(err, errs.ErrFailedPrecondition) {
		// The RPC's own tags are a preference, not a requirement the caller made.
		req.Tags = nil
		chosen, fallbacks, _, err = registry.Select(all, req, e.cfg.Provider)
	}
	if err != nil {
		return nil, err
	}
	return append([]registry.Candidate{chosen}, slices.Clip(fallbacks)...), nil
}

// TierCandidates returns the models a call at a registry tier tries in order: the one
// registry.SelectTier chooses (no tags asked: a tag would move the call off its tier where
// no model of that tier carries it) and its fallbacks. No callable provider at all is
// FAILED_PRECONDITION naming the settings to set. The operator's THEFOLD_AI_MODEL does not
// apply: a tier is a hint, and that setting is for calls that give none.
func (e *Engine) TierCandidates(ctx context.Context, tier int32) ([]registry.Candidate, error) {
	all, err := e.reg.Candidates(ctx)
	if err != nil {
		return nil, err
	}
	if len(all) == 0 {
		return nil, errs.Public(codes.FailedPrecondition, "%s", noProviderMessage)
	}
	chosen, fallbacks, _, err := registry.SelectTier(all, tier, &aiv1.SelectModelRequest{}, e.cfg.Provider)
	if err != nil {
		return nil, err
	}
	return append([]registry.Candidate{chosen}, slices.Clip(fallbacks)...), nil
}
