package engine

import (
	"context"
	"errors"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"

	"github.com/thefold/thefold/pkg/embed"
	"github.com/thefold/thefold/services/ai/internal/llm"
	"github.com/thefold/thefold/services/ai/internal/netguard"
	"github.com/thefold/thefold/services/ai/internal/registry"
)

// LocalModel is the name of the built-in embedder, usable with no provider at all.
const LocalModel = "local"

// Embed embeds req.Texts with the named model, the configured default, or the local
// embedder. It is recorded in the ledger like every call (the local embedder at no cost)
// and honours request_id.
func (e *Engine) Embed(ctx context.Context, req *aiv1.EmbedRequest) (*aiv1.EmbedResponse, error) {
	c := &Call{RPC: "Embed", Phase: aiv1.CallPhase_CALL_PHASE_EMBEDDING, RequestID: req.GetRequestId(),
		Request: req, Attribution: req.GetAttribution()}
	return recorded(ctx, e, c, func(ctx context.Context) (*aiv1.EmbedResponse, *ledgerEntry, error) { return e.embed(ctx, req) })
}

func (e *Engine) embed(ctx context.Context, req *aiv1.EmbedRequest) (*aiv1.EmbedResponse, *ledgerEntry, error) {
	name := req.GetModel()
	if name == "" {
		name = e.cfg.EmbedModel
	}
	if isLocal(name) {
		dims := int(req.GetDimensions())
		if dims == 0 {
			dims = localDims(name)
		}
		l := e.local
		if dims != 0 && dims != l.Dimensions() {
			var err error
			if l, err = embed.New(dims); err != nil {
				return nil, nil, errs.Invalid("dimensions", "%v", err)
			}
		}
		start := e.now()
		vecs := l.Embed(req.GetTexts())
		rec := &ledgerEntry{model: LocalModel, provider: LocalModel, calls: 1,
			latency: e.now().Sub(start), outcome: aiv1.CallOutcome_CALL_OUTCOME_OK}
		out := &aiv1.EmbedResponse{Model: LocalModel, Dimensions: int32(l.Dimensions()), Usage: rec.wireUsage()}
		for _, v := range vecs {
			out.Embeddings = append(out.Embeddings, &aiv1.Embedding{Values: v})
		}
		return out, rec, nil
	}
	rec := &ledgerEntry{outcome: aiv1.CallOutcome_CALL_OUTCOME_PROVIDER_ERROR}
	all, err := e.reg.Candidates(ctx)
	if err != nil {
		return nil, rec, err
	}
	if len(all) == 0 {
		return nil, rec, errs.Public(codes.FailedPrecondition, "%s", noProviderMessage)
	}
	cand, err := e.reg.ResolveModel(ctx, name)
	if err != nil {
		return nil, rec, err
	}
	if cand.Model.GetEmbeddingDimensions() == 0 {
		return nil, rec, errs.Invalid("model", "%s is not an embedding model (use %q or a model with embedding_dimensions)", cand.Model.GetName(), LocalModel)
	}
	if !e.Usable(cand.Provider) {
		return nil, rec, errs.Public(codes.FailedPrecondition, "embedding model %s belongs to provider %s, which cannot be called here: %s",
			cand.Model.GetName(), cand.Provider.GetName(), noProviderMessage)
	}
	rec.cand = cand
	if err := e.checkSpend(ctx); err != nil {
		return nil, rec, err
	}
	client, err := e.client(cand.Provider)
	if err != nil {
		return nil, rec, misconfigured(cand.Provider.GetName(), err)
	}
	ctx, counter := llm.WithAttemptCounter(ctx)
	start := e.now()
	resp, err := client.Embed(ctx, llm.EmbedRequest{Model: cand.Model.GetName(), Texts: req.GetTexts(), Dimensions: int(req.GetDimensions())})
	if errors.Is(err, netguard.ErrBlocked) {
		return nil, rec, misconfigured(cand.Provider.GetName(), err)
	}
	rec.add(attemptResult{latency: e.now().Sub(start), calls: max(*counter, 1)})
	if err != nil {
		if ctx.Err() != nil {
			rec.outcome = aiv1.CallOutcome_CALL_OUTCOME_CANCELLED
			return nil, rec, ctx.Err()
		}
		if err == llm.ErrUnsupported {
			return nil, rec, errs.Invalid("model", "provider %s has no embeddings API", cand.Provider.GetName())
		}
		return nil, rec, e.providerStatus(ctx, err)
	}
	if len(resp.Vectors) != len(req.GetTexts()) {
		return nil, rec, errs.Public(codes.Unavailable, "provider %s answered %d embeddings for %d texts", cand.Provider.GetName(), len(resp.Vectors), len(req.GetTexts()))
	}
	rec.usage = resp.Usage
	rec.cost = registry.Price(cand.Model, resp.Usage.InputTokens, 0, 0, 0).Total
	rec.outcome = aiv1.CallOutcome_CALL_OUTCOME_OK
	out := &aiv1.EmbedResponse{Model: cand.Model.GetName(), Usage: rec.wireUsage()}
	for _, v := range resp.Vectors {
		out.Embeddings = append(out.Embeddings, &aiv1.Embedding{Values: v})
	}
	if len(resp.Vectors) > 0 {
		out.Dimensions = int32(len(resp.Vectors[0]))
	}
	return out, rec, nil
}

// localDims is the size a "local-<n>" name asks for, 0 for plain "local".
func localDims(name string) int {
	n, err := strconv.Atoi(strings.TrimPrefix(name, LocalModel+"-"))
	if err != nil {
		return 0
	}
	return n
}

// isLocal reports whether name means the built-in embedder ("local", "local-384").
func isLocal(name string) bool {
	return name == LocalModel || strings.HasPrefix(name, LocalModel+"-")
}
