package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/errs"

	"github.com/thefold/thefold/services/ai/internal/llm"
	"github.com/thefold/thefold/services/ai/internal/netguard"
	"github.com/thefold/thefold/services/ai/internal/registry"
)

// errorDomain is the ErrorInfo domain of the ai service's own failure reasons, so callers
// (the agent) can tell a model that answered badly from a provider that did not answer.
const errorDomain = errs.AIDomain

// Reasons in ErrorInfo.reason.
const (
	ReasonModelOutputInvalid = errs.ReasonModelOutputInvalid
	ReasonProviderRateLimit  = "PROVIDER_RATE_LIMITED"
	ReasonProviderDown       = "PROVIDER_UNAVAILABLE"
	ReasonProviderAuth       = "PROVIDER_AUTH_FAILED"
	ReasonProviderRejected   = "PROVIDER_REJECTED_REQUEST"
)

// providerStatus maps the last provider failure to the caller's status. The provider's
// own text (which can hold request ids, URLs, quotas) is logged, never shown: the message
// names the provider, what kind of failure it was and the HTTP status.
func (e *Engine) providerStatus(ctx context.Context, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if pub, ok := err.(*errs.Error); ok {
		return pub // already the caller's answer (a refused base URL), whatever it wraps
	}
	pe, ok := llm.AsError(err)
	if !ok {
		// Not a provider failure (e.g. a misconfigured provider, already public).
		return err
	}
	e.log.WarnContext(ctx, "provider call failed", "provider", pe.Provider, "kind", pe.Kind.String(), "status", pe.Status, "err", err)
	what := pe.Kind.String()
	if pe.Status != 0 {
		what = fmt.Sprintf("%s, HTTP %d", what, pe.Status)
	}
	info := func(reason string) *errdetails.ErrorInfo {
		return &errdetails.ErrorInfo{Reason: reason, Domain: errorDomain, Metadata: map[string]string{"provider": pe.Provider}}
	}
	switch pe.Kind {
	case llm.KindRateLimited:
		pub := errs.Public(codes.ResourceExhausted, "provider %s rate-limited the call (%s) and no fallback model answered", pe.Provider, what).
			WithDetails(info(ReasonProviderRateLimit))
		if pe.RetryAfter > 0 {
			pub = pub.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(pe.RetryAfter.Round(time.Second))})
		}
		return pub.Wrap(err)
	case llm.KindAuth:
		return errs.Public(codes.FailedPrecondition, "provider %s refused the API key (%s): check THEFOLD_AI_API_KEY or the provider's api_key_ref", pe.Provider, what).
			WithDetails(info(ReasonProviderAuth)).Wrap(err)
	case llm.KindBadRequest:
		return errs.Public(codes.FailedPrecondition, "provider %s refused the request (%s): the model may not exist there, or the prompt exceeds its context window", pe.Provider, what).
			WithDetails(info(ReasonProviderRejected)).Wrap(err)
	default:
		return errs.Public(codes.Unavailable, "provider %s did not answer usably (%s) and no fallback model answered", pe.Provider, what).
			WithDetails(info(ReasonProviderDown)).Wrap(err)
	}
}

// brokeOff is the answer when a streamed reply failed after its first delta went out: no
// retry and no other model were tried (the caller holds part of the reply), so the status
// says so rather than "no fallback model answered".
func (e *Engine) brokeOff(ctx context.Context, err error) error {
	pe, ok := llm.AsError(err)
	if !ok {
		return e.providerStatus(ctx, err) // the caller's own (the stream's Send), or public
	}
	e.log.WarnContext(ctx, "streamed reply broke off", "provider", pe.Provider, "kind", pe.Kind.String(), "status", pe.Status, "err", err)
	return errs.Public(codes.Unavailable, "provider %s broke off the reply after it began (%s); a reply is not tried again once part of it was sent: call again",
		pe.Provider, pe.Kind).
		WithDetails(&errdetails.ErrorInfo{Reason: ReasonProviderDown, Domain: errorDomain, Metadata: map[string]string{"provider": pe.Provider}}).Wrap(err)
}

// invalidOutput is the answer when the model's reply could not be parsed or repaired. It is
// UNAVAILABLE (a retry, or a stronger model, may well answer correctly) with the reason
// MODEL_OUTPUT_INVALID, and names what was wrong with the reply — the model's words are
// not internal state, and the caller needs them to decide what to do.
func invalidOutput(rpc string, cand registry.Candidate, perr error, rounds int) error {
	msg := perr.Error()
	if len(msg) > 500 {
		msg = msg[:500] + "…"
	}
	after := "with no repair round"
	switch {
	case rounds == 1:
		after = "also after a repair round"
	case rounds > 1:
		after = fmt.Sprintf("also after %d repair rounds", rounds)
	}
	return errs.Public(codes.Unavailable, "model %s answered %s with output that cannot be used, %s: %s",
		cand.Model.GetName(), rpc, after, msg).
		WithDetails(&errdetails.ErrorInfo{Reason: ReasonModelOutputInvalid, Domain: errorDomain,
			Metadata: map[string]string{"model": cand.Model.GetName(), "rpc": rpc}}).Wrap(perr)
}

// misconfigured is the answer when a provider's client cannot be built or its base URL
// reaches an address the operator does not allow (netguard): FAILED_PRECONDITION naming
// the provider and the setting that decides. Keys never appear in err.
func misconfigured(provider string, err error) error {
	if errors.Is(err, netguard.ErrBlocked) {
		return errs.Public(codes.FailedPrecondition,
			"provider %s is misconfigured: its base_url reaches an address providers may not (%v); the operator allows such addresses with THEFOLD_AI_ALLOW_PRIVATE_BASE_URLS, or sets THEFOLD_AI_BASE_URL",
			provider, err).Wrap(err)
	}
	return errs.Public(codes.FailedPrecondition, "provider %s is misconfigured: %v", provider, err).Wrap(err)
}

// PublicError is err as the caller of method would be told it (errs.ToStatus): a status
// error with a public message, anything internal logged under a reference and masked.
// RunSubAgents reports each failed role's error in the role's result this way.
func (e *Engine) PublicError(ctx context.Context, method string, err error) error {
	return errs.ToStatus(ctx, e.log, method, err)
}
