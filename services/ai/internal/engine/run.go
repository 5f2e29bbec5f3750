package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/tokens"

	"github.com/thefold/thefold/services/ai/internal/llm"
	"github.com/thefold/thefold/services/ai/internal/netguard"
	"github.com/thefold/thefold/services/ai/internal/prompts"
	"github.com/thefold/thefold/services/ai/internal/registry"
)

// Call is one generating RPC's model call.
type Call struct {
	// RPC is the AIService method name, e.g. "PlanTask".
	RPC string
	// Phase is the RPC's own ledger phase; Attribution.phase overrides it.
	Phase aiv1.CallPhase
	// RequestID and Request make the call idempotent (see AIService in ai.proto).
	RequestID   string
	Request     proto.Message
	Model       *aiv1.ModelChoice
	Attribution *aiv1.Attribution
	// Defaults apply when the caller gave no selection hints.
	Defaults Defaults
	// Tier, when above 0, selects the model at this registry tier (the nearest tier that
	// has one, as registry.SelectTier does) instead of from Model's hints and Defaults:
	// RunSubAgents gives each role its tier. Model must then be empty.
	Tier int32
	// RequireTools limits selection to models that support tool use (Complete with tools).
	RequireTools bool
	// LLM is the request without the model name, which the engine fills per candidate.
	LLM llm.Request
	// Fit, when set, makes the request fit a model's context window of limit tokens
	// (prompts.Prompt.Fit): the engine calls it per candidate whose window it knows.
	Fit func(req llm.Request, limit int, count func(string) int) (llm.Request, bool)
	// Stream, when set, gets the reply while the model writes it (StreamComplete): text as
	// it arrives and each tool call once complete, with the registry name of the model
	// answering. Once a delta went out the call is the model's that sent it: no retry, no
	// fallback to another model, no repair round (the caller already has the text). It is
	// not called for an answer recorded under the request_id: the caller sends that whole.
	Stream func(model string, d llm.Delta) error
	// AsService lets a service call as itself, for no owner (Embed: the memory service
	// re-embeds every owner's stored memories when the embedding model changes, work no
	// owner asked for). Such calls are recorded under the service's name, with no user, and
	// no owner's spend limit applies.
	AsService bool
	// Spent, when set, is told what the call cost as the ledger records it, answered or
	// not: a caller that goes on after a failed call (RunSubAgents leaving a role out)
	// still accounts for the tokens the provider billed. Not called for an answer recorded
	// under the request_id (that cost nothing again).
	Spent func(*typev1.Usage)
}

// Defaults are an RPC's selection hints when the caller gives none.
type Defaults struct {
	Complexity int32
	Tags       []string
}

// Repairable marks a parse error worth a repair round: the model answered, but not in
// the required shape. Parse functions return it.
type Repairable interface {
	error
	// Repair returns the request of repair round n (1-based), after req was answered with
	// reply, or false when no further round may follow.
	Repair(req llm.Request, reply string, n int) (llm.Request, bool)
}

// Fitting prompts into context windows. Counts are cl100k_base tokens (pkg/tokens); other
// providers' tokenizers count code differently (Anthropic's is reported to count some 15%
// more tokens on the same code; not measured here, there is no way to count with it
// offline), so a provider's count is scaled by its factor, and windowMargin is left free
// besides the reply's room.
const windowMargin = 1024

var tokenScale = map[aiv1.ProviderKind]float64{aiv1.ProviderKind_PROVIDER_KIND_ANTHROPIC: 1.15}

// fitTo is the call's request as it fits the candidate's context window (c.LLM when the
// model's window is unknown or the call cannot be fitted), or an error when even the
// prompt's essentials do not fit.
func (e *Engine) fitTo(c *Call, cand registry.Candidate) (llm.Request, error) {
	window := int(cand.Model.GetContextWindow())
	if c.Fit == nil || window <= 0 {
		return c.LLM, nil
	}
	// The reply's room as attempt sends it: the answer's limit plus the thinking budget, at
	// most the model's own maximum (the window counts the prompt and all of it).
	reply := c.LLM.MaxTokens + e.effort(cand.Model, c.LLM.Reasoning).Budget()
	if m := int(cand.Model.GetMaxOutputTokens()); m > 0 && (c.LLM.MaxTokens <= 0 || reply > m) {
		reply = m
	}
	limit := window - reply - windowMargin
	scale := tokenScale[cand.Provider.GetKind()]
	if scale == 0 {
		scale = 1
	}
	if prompts.SurelyFits(c.LLM, limit, scale) {
		return c.LLM, nil
	}
	count := func(s string) int { return int(float64(tokens.Count(s))*scale + 0.5) }
	req, ok := c.Fit(c.LLM, limit, count)
	if !ok {
		return c.LLM, errs.Public(codes.FailedPrecondition,
			"the %s prompt does not fit model %s's context window (%d tokens, %d of them kept for the answer) even with its context cut; choose a model with a larger window",
			c.RPC, cand.Model.GetName(), window, reply)
	}
	return req, nil
}

// maxRepairRounds bounds the repair rounds of any call, whatever its parser allows.
const maxRepairRounds = 3

// attemptResult is what calling one model produced.
type attemptResult struct {
	resp    *llm.Response
	usage   llm.Usage
	cost    int64
	latency time.Duration
	calls   int
}

// Run makes c's model call and parses the answer with parse. The returned response carries
// the call's usage. A retry of a recorded request_id returns the recorded response.
func Run[T proto.Message](ctx context.Context, e *Engine, c *Call, parse func(*llm.Response) (T, error)) (T, error) {
	return recorded(ctx, e, c, func(ctx context.Context) (T, *ledgerEntry, error) { return run(ctx, e, c, parse) })
}

// recorded wraps one RPC's work in what every call gets: its request_id claimed (a retry
// answered from the record), its ledger entry written, and its answer recorded.
func recorded[T proto.Message](ctx context.Context, e *Engine, c *Call, work func(context.Context) (T, *ledgerEntry, error)) (T, error) {
	var zero T
	p, err := principalFrom(ctx, c.AsService)
	if err != nil {
		return zero, err
	}
	release := func() {}
	if c.RequestID != "" {
		answer, held, err := e.claim(ctx, p, c)
		if err != nil {
			return zero, err
		}
		if answer != nil {
			return decodeAnswer[T](answer)
		}
		defer held.stop()
		release = held.release
	}
	out, rec, err := work(ctx)
	e.record(ctx, p, c, rec, err)
	if c.Spent != nil && rec != nil {
		c.Spent(rec.wireUsage())
	}
	usageID := ""
	if rec != nil {
		usageID = rec.id
	}
	if err != nil {
		// Only answers are recorded: the claim goes, and a retry calls again.
		release()
		return zero, err
	}
	if c.RequestID != "" {
		if ferr := e.finish(ctx, p, c, out, usageID); ferr != nil {
			// The claim goes too: left running, a retry would wait on it until it went stale
			// instead of calling again. (An answer the write did record is
			// kept: only a running claim is released.)
			release()
			e.log.WarnContext(ctx, "recording the answer failed; a retry will call the model again",
				"rpc", c.RPC, "err", ferr)
		}
	}
	return out, nil
}

// Idempotent makes work, an RPC whose model calls are Runs of their own (each recorded in
// the ledger by its Run), idempotent by c's request_id: a retry returns the answer work
// recorded, billed once, as Run's retries are. c makes no call itself and has no ledger
// entry; only its RPC, RequestID and Request are used.
func Idempotent[T proto.Message](ctx context.Context, e *Engine, c *Call, work func(context.Context) (T, error)) (T, error) {
	return recorded(ctx, e, c, func(ctx context.Context) (T, *ledgerEntry, error) {
		out, err := work(ctx)
		return out, nil, err
	})
}

func run[T proto.Message](ctx context.Context, e *Engine, c *Call, parse func(*llm.Response) (T, error)) (T, *ledgerEntry, error) {
	var zero T
	rec := &ledgerEntry{outcome: aiv1.CallOutcome_CALL_OUTCOME_PROVIDER_ERROR}
	var cands []registry.Candidate
	var err error
	if c.Tier > 0 {
		cands, err = e.TierCandidates(ctx, c.Tier)
	} else {
		cands, err = e.candidates(ctx, c.Model, c.Defaults, c.RequireTools)
	}
	if err != nil {
		return zero, rec, err
	}
	if err := e.checkSpend(ctx); err != nil {
		return zero, rec, err
	}
	var lastErr error
	// delivered: a streamed delta went out, and the call is the answering model's.
	delivered := false
	for i, cand := range cands {
		rec.cand = cand
		first, ferr := e.fitTo(c, cand)
		if ferr != nil {
			lastErr = ferr
			e.log.WarnContext(ctx, "prompt too large for the model; trying the next", "rpc", c.RPC, "model", cand.Model.GetName(), "err", ferr)
			continue
		}
		var on func(llm.Delta) error
		if c.Stream != nil {
			on = func(d llm.Delta) error {
				delivered = true
				return c.Stream(cand.Model.GetName(), d)
			}
		}
		res, err := e.attempt(ctx, cand, first, on)
		rec.add(res)
		if err != nil {
			lastErr = err
			if ctx.Err() != nil || !failOver(err) || delivered || i == len(cands)-1 {
				break
			}
			e.log.WarnContext(ctx, "model failed; trying the next", "rpc", c.RPC,
				"model", cand.Model.GetName(), "provider", cand.Provider.GetName(), "err", err)
			continue
		}
		out, perr := parse(res.resp)
		req := first
		for n := 1; perr != nil; n++ {
			rp, ok := errors.AsType[Repairable](perr)
			ok = ok && !delivered // a streamed reply cannot be taken back
			var next llm.Request
			if ok && n <= maxRepairRounds {
				next, ok = rp.Repair(req, res.resp.Text, n)
			}
			if !ok || n > maxRepairRounds {
				rec.outcome = aiv1.CallOutcome_CALL_OUTCOME_INVALID_OUTPUT
				return zero, rec, invalidOutput(c.RPC, cand, perr, n-1)
			}
			e.log.InfoContext(ctx, "model answer unusable; repair round", "rpc", c.RPC, "round", n,
				"model", cand.Model.GetName(), "problem", perr.Error())
			req = next
			res, err = e.attempt(ctx, cand, req, on)
			rec.add(res)
			if err != nil {
				return zero, rec, e.providerStatus(ctx, err)
			}
			out, perr = parse(res.resp)
		}
		rec.outcome = aiv1.CallOutcome_CALL_OUTCOME_OK
		setUsage(out, rec.wireUsage())
		return out, rec, nil
	}
	if ctx.Err() != nil {
		rec.outcome = aiv1.CallOutcome_CALL_OUTCOME_CANCELLED
		return zero, rec, ctx.Err()
	}
	if delivered {
		return zero, rec, e.brokeOff(ctx, lastErr)
	}
	return zero, rec, e.providerStatus(ctx, lastErr)
}

// attempt calls one model (with the provider's retry policy) and prices the answer. With
// on set the reply is streamed to it (llm.Stream).
func (e *Engine) attempt(ctx context.Context, cand registry.Candidate, req llm.Request, on func(llm.Delta) error) (attemptResult, error) {
	client, err := e.client(cand.Provider)
	if err != nil {
		return attemptResult{}, misconfigured(cand.Provider.GetName(), err)
	}
	req = forVision(req, cand.Model)
	req.Model = cand.Model.GetName()
	req.Reasoning = e.effort(cand.Model, req.Reasoning)
	// The client sends MaxTokens + the effort's budget (thinking counts as output): the
	// answer's room is what the model's own maximum leaves beside the budget.
	if m := int(cand.Model.GetMaxOutputTokens()); m > 0 {
		if room := m - req.Reasoning.Budget(); req.MaxTokens <= 0 || req.MaxTokens > room {
			req.MaxTokens = room
		}
	}
	ctx, counter := llm.WithAttemptCounter(ctx)
	start := e.now()
	var resp *llm.Response
	if on != nil {
		resp, err = llm.Stream(ctx, client, req, on)
	} else {
		resp, err = client.Complete(ctx, req)
	}
	res := attemptResult{latency: e.now().Sub(start), calls: max(*counter, 1)}
	if errors.Is(err, netguard.ErrBlocked) {
		// Refused before anything was sent: not a provider failure, no fallback.
		return attemptResult{}, misconfigured(cand.Provider.GetName(), err)
	}
	if err != nil {
		return res, err
	}
	res.resp = resp
	res.usage = resp.Usage
	res.cost = registry.Price(cand.Model, resp.Usage.InputTokens, resp.Usage.OutputTokens,
		resp.Usage.CacheReadTokens, resp.Usage.CacheWriteTokens).Total
	return res, nil
}

// effort is the reasoning effort a call to m gets: none when THEFOLD_AI_REASONING is off or
// m does not support reasoning (its provider may refuse the setting), and lowered until the
// thinking budget takes at most half of m's output limit, so the answer keeps room.
func (e *Engine) effort(m *aiv1.Model, want llm.Effort) llm.Effort {
	if !e.cfg.reasoningOn() || !m.GetSupportsReasoning() {
		return llm.EffortNone
	}
	limit := int(m.GetMaxOutputTokens())
	for want > llm.EffortNone && limit > 0 && 2*want.Budget() > limit {
		want--
	}
	return want
}

// failOver reports whether another model may succeed where this one failed: the provider
// was down, overloaded, rate-limited or refused the key. A bad request is ours, and a
// caller's cancellation ends the call.
func failOver(err error) bool {
	pe, ok := llm.AsError(err)
	if !ok {
		return false
	}
	return pe.Retryable() || pe.Kind == llm.KindAuth
}

func protoValueOf(u *typev1.Usage) protoreflect.Value {
	return protoreflect.ValueOfMessage(u.ProtoReflect())
}

// decodeAnswer decodes a recorded response.
func decodeAnswer[T proto.Message](b []byte) (T, error) {
	var zero T
	out := zero.ProtoReflect().New().Interface().(T)
	if err := proto.Unmarshal(b, out); err != nil {
		return zero, fmt.Errorf("decode recorded answer: %w", err)
	}
	return out, nil
}
