package engine

import (
	"context"
	"time"

	"google.golang.org/grpc/status"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/ai/internal/llm"
	"github.com/thefold/thefold/services/ai/internal/registry"
)

// ledgerEntry accumulates one RPC's provider calls for the usage ledger.
type ledgerEntry struct {
	cand    registry.Candidate
	usage   llm.Usage
	cost    int64
	latency time.Duration
	calls   int
	outcome aiv1.CallOutcome
	// id is the ledger row's id once recorded.
	id string
	// model and provider override cand's names (the local embedder has no registry row).
	model, provider string
}

func (l *ledgerEntry) add(r attemptResult) {
	l.usage = l.usage.Add(r.usage)
	l.cost += r.cost
	l.latency += r.latency
	l.calls += r.calls
}

func (l *ledgerEntry) names() (model, prov, modelID string) {
	if l.model != "" {
		return l.model, l.provider, ""
	}
	if l.cand.Model == nil {
		return "", "", ""
	}
	return l.cand.Model.GetName(), l.cand.Provider.GetName(), l.cand.Model.GetId()
}

func (l *ledgerEntry) wireUsage() *typev1.Usage {
	model, prov, _ := l.names()
	return toUsage(model, prov, l.usage, l.cost, l.latency, l.calls)
}

// record writes the call to the usage ledger. A failure to record is logged: the answer is
// not withheld from the caller for it.
func (e *Engine) record(ctx context.Context, p principal, c *Call, l *ledgerEntry, callErr error) {
	if l == nil {
		return
	}
	_, _, modelID := l.names()
	a := c.Attribution
	phase := c.Phase
	if a.GetPhase() != aiv1.CallPhase_CALL_PHASE_UNSPECIFIED {
		phase = a.GetPhase()
	}
	r := &aiv1.UsageRecord{
		UserId: p.userID, Caller: p.caller, Rpc: c.RPC, Phase: phase,
		JobId: a.GetJobId(), TaskId: a.GetTaskId(), BuildId: a.GetBuildId(), ProjectId: a.GetProjectId(),
		Repo: a.GetRepo(), ModelId: modelID, Usage: l.wireUsage(), Outcome: l.outcome,
		RequestId: c.RequestID, Role: a.GetRole(), ConversationId: a.GetConversationId(),
	}
	if callErr != nil {
		if l.outcome == aiv1.CallOutcome_CALL_OUTCOME_OK {
			l.outcome = aiv1.CallOutcome_CALL_OUTCOME_PROVIDER_ERROR
		}
		if ctx.Err() != nil {
			l.outcome = aiv1.CallOutcome_CALL_OUTCOME_CANCELLED
		}
		r.Outcome = l.outcome
		// Only the public text: what the caller was told, never a provider's own words.
		if st, ok := status.FromError(callErr); ok {
			r.Error = st.Message()
		} else if ctx.Err() != nil {
			r.Error = "cancelled by the caller"
		} else {
			r.Error = "internal error"
		}
		if l.calls == 0 {
			// Nothing was called (no provider, unknown model): not a ledger entry.
			return
		}
	}
	// The caller may have gone; the record of what was spent must still be written.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	write := e.st.RecordUsage
	if c.RequestID != "" {
		write = e.st.RecordUsageBeforeAnswer // (recorded's Finish or release follows it)
	}
	id, err := write(rctx, r)
	if err != nil {
		e.log.ErrorContext(ctx, "usage ledger write failed", "rpc", c.RPC, "err", err)
		return
	}
	l.id = id
}
