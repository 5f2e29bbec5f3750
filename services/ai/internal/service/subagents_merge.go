package service

import (
	"cmp"
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/tokens"

	"github.com/thefold/thefold/services/ai/internal/engine"
	"github.com/thefold/thefold/services/ai/internal/llm"
	"github.com/thefold/thefold/services/ai/internal/prompts"
)

// merge merges the outputs of the roles that succeeded as req asks: CONCATENATE, each as a
// "## <Role>" section in the team's order; AI_MERGE, one more call on a tier-2 model
// (phase SUB_AGENTS, no role), CONCATENATE again when that call fails. It returns the text,
// the strategy that made it and the merge call's result (nil when there was none, or it
// cost nothing) for its usage.
func (s *AIServer) merge(ctx context.Context, req *aiv1.RunSubAgentsRequest, runs []roleRun) (string, aiv1.MergeStrategy, *aiv1.SubAgentResult) {
	var sections []prompts.SubAgentSection
	var parts, names []string
	for _, r := range runs {
		if r.err != nil {
			continue
		}
		sections = append(sections, prompts.SubAgentSection{Role: r.result.Role, Output: r.result.Output})
		parts = append(parts, "## "+prompts.SubAgentTitle(r.result.Role)+"\n\n"+r.result.Output)
		names = append(names, prompts.SubAgentName(r.result.Role))
	}
	concatenated := strings.Join(parts, "\n\n")
	if req.Merge != aiv1.MergeStrategy_MERGE_STRATEGY_AI_MERGE {
		return concatenated, aiv1.MergeStrategy_MERGE_STRATEGY_CONCATENATE, nil
	}
	p, err := prompts.MergeSubAgents(req.Task, sections)
	if err != nil {
		return concatenated, aiv1.MergeStrategy_MERGE_STRATEGY_CONCATENATE, nil
	}
	requestID := ""
	if req.RequestId != "" {
		requestID = req.RequestId + " #merge " + strings.Join(names, ",")
	}
	c := s.subAgentCall(req, requestID, aiv1.SubAgentRole_SUB_AGENT_ROLE_UNSPECIFIED, mergeTier, p)
	var spent *typev1.Usage
	c.Spent = func(u *typev1.Usage) { spent = u }
	// The merge answers in Markdown: its result is a RunSubAgentsResponse (a message with a
	// usage field, as the engine needs) holding the text.
	out, err := engine.Run(ctx, s.eng, c, func(r *llm.Response) (*aiv1.RunSubAgentsResponse, error) {
		md, err := prompts.ParseMerge(r.Text)
		if err != nil {
			return nil, err
		}
		return &aiv1.RunSubAgentsResponse{MergedContext: md}, nil
	})
	if err != nil {
		// The roles' work is done and paid for: it is not lost to a failed merge (whose own
		// cost, if the provider billed it, still counts).
		var failed *aiv1.SubAgentResult
		if spent.GetCalls() > 0 || spent.GetCostMicros() > 0 {
			failed = &aiv1.SubAgentResult{Usage: spent}
		}
		return concatenated, aiv1.MergeStrategy_MERGE_STRATEGY_CONCATENATE, failed
	}
	return out.GetMergedContext(), aiv1.MergeStrategy_MERGE_STRATEGY_AI_MERGE, &aiv1.SubAgentResult{Usage: out.GetUsage()}
}

// capTokens cuts s at its end to at most limit tokens (pkg/tokens, as the service counts
// prompts), the cut at a line end where one is near, with a note saying so.
func capTokens(s string, limit int) string {
	if tokens.Count(s) <= limit {
		return s
	}
	note := fmt.Sprintf("\n\n[… the rest is cut: the merged context is capped at %d tokens (max_context_tokens)]", limit)
	room := limit - tokens.Count(note)
	// The longest prefix within room: the count of a prefix grows with its length.
	lo, hi := 0, len(s)
	for lo < hi {
		mid := (lo + hi + 1) / 2
		if tokens.Count(s[:mid]) <= room {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	cut := lo
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	if nl := strings.LastIndexByte(s[:cut], '\n'); nl > cut*3/4 {
		cut = nl
	}
	return strings.TrimRight(s[:cut], " \t\n") + note
}

// sumUsage adds up the usages of results: every count and the latency add up; the model
// and provider are those of the call that cost most (the one that did most of the work).
func sumUsage(results []*aiv1.SubAgentResult) *typev1.Usage {
	out := &typev1.Usage{}
	var latency time.Duration
	var top *typev1.Usage
	for _, r := range results {
		u := r.GetUsage()
		if u == nil {
			continue
		}
		out.InputTokens += u.InputTokens
		out.OutputTokens += u.OutputTokens
		out.CacheReadTokens += u.CacheReadTokens
		out.CacheWriteTokens += u.CacheWriteTokens
		out.CostMicros += u.CostMicros
		out.Calls += u.Calls
		latency += u.GetLatency().AsDuration()
		if top == nil || cmp.Or(cmp.Compare(u.CostMicros, top.CostMicros), cmp.Compare(u.OutputTokens, top.OutputTokens)) > 0 {
			top = u
		}
	}
	if top != nil {
		out.Model, out.Provider = top.Model, top.Provider
	}
	out.Latency = durationpb.New(latency)
	return out
}

// teamFailed is RunSubAgents' error when no role succeeded (nil when one did): the most
// telling of the roles' errors, its message saying that every role failed. The caller's
// cancellation comes first; then what every call would hit again and the caller must act
// on (no provider, a refused key, the spend limit, a rate limit); then a provider that did
// not answer; then a model's unusable answer, which a retry may well not repeat.
func teamFailed(ctx context.Context, members []member, runs []roleRun) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	best := -1
	for i, r := range runs {
		if r.err == nil {
			return nil
		}
		if best < 0 || telling(r.err) < telling(runs[best].err) {
			best = i
		}
	}
	if best < 0 {
		return nil
	}
	st := status.Convert(runs[best].err) // public already (runRole)
	names := make([]string, len(members))
	for i, m := range members {
		names[i] = prompts.SubAgentName(m.role)
	}
	pb := st.Proto()
	pb.Message = fmt.Sprintf("every sub-agent failed (%s); the %s: %s", strings.Join(names, ", "), names[best], st.Message())
	return status.FromProto(pb).Err()
}

// telling ranks a role's (public) error for teamFailed: lower tells the caller more.
func telling(err error) int {
	st := status.Convert(err)
	switch st.Code() {
	case codes.FailedPrecondition, codes.InvalidArgument, codes.PermissionDenied, codes.Unauthenticated, codes.NotFound:
		return 0
	case codes.ResourceExhausted:
		return 1
	case codes.Unavailable:
		for _, d := range st.Details() {
			if info, ok := d.(*errdetails.ErrorInfo); ok && info.Reason == engine.ReasonModelOutputInvalid {
				return 3
			}
		}
		return 2
	}
	return 4
}
