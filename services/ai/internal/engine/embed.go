package engine

import (
	"context"
	"errors"
	"slices"
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

// LocalModel is the name of the built-in embedder, usable with no provider at all: "local"
// is its current version, "local@N" version N, "local-<dims>" the current version at that
// size. An answer always names the exact version ("local@1"), so a stored vector says which
// embedder made it.
const LocalModel = "local"

// CurrentLocal is the version "local" means: 2, the trained embedder (dense vectors, which
// also make a better HNSW graph); stored vectors of version 1 are re-embedded by the memory
// service when it sees the new version.
const CurrentLocal = 2

// localEmbedder is one version of the built-in embedder at one size.
type localEmbedder interface {
	Embed(texts []string) [][]float32
	Dimensions() int
}

// localVersions makes each version of the built-in embedder at a size (0: its default).
// A version's vectors never change — they are compared with vectors stored long ago — so a
// changed embedder is a new version here (and a new CurrentLocal), never an edit of one.
// The engine's default embedder is built from this table too (currentLocal), so a new
// version is one line here and CurrentLocal.
var localVersions = map[int]func(dims int) (localEmbedder, error){
	1: func(dims int) (localEmbedder, error) { return embed.New(dims) },        // feature hashing (pkg/embed Local)
	2: func(dims int) (localEmbedder, error) { return embed.NewTrained(dims) }, // trained word vectors + lexical features (pkg/embed Trained)
}

// currentLocal is CurrentLocal at a size known to be valid (validated config).
func currentLocal(dims int) localEmbedder {
	l, err := localVersions[CurrentLocal](dims)
	if err != nil {
		panic("engine: local embedder: " + err.Error())
	}
	return l
}

// LocalName is the exact name of a version of the built-in embedder ("local@1").
func LocalName(version int) string { return LocalModel + "@" + strconv.Itoa(version) }

// Embed embeds req.Texts with the named model, the configured default, or the local
// embedder. It is recorded in the ledger like every call (the local embedder at no cost)
// and honours request_id. Unlike the generating RPCs, a service may call it as itself, for
// no owner (see Call.AsService).
func (e *Engine) Embed(ctx context.Context, req *aiv1.EmbedRequest) (*aiv1.EmbedResponse, error) {
	c := &Call{RPC: "Embed", Phase: aiv1.CallPhase_CALL_PHASE_EMBEDDING, RequestID: req.GetRequestId(),
		Request: req, Attribution: req.GetAttribution(), AsService: true}
	return recorded(ctx, e, c, func(ctx context.Context) (*aiv1.EmbedResponse, *ledgerEntry, error) { return e.embed(ctx, req) })
}

func (e *Engine) embed(ctx context.Context, req *aiv1.EmbedRequest) (*aiv1.EmbedResponse, *ledgerEntry, error) {
	name := req.GetModel()
	if name == "" {
		name = e.cfg.EmbedModel
	}
	if isLocal(name) {
		version, dims, err := parseLocal(name)
		if err != nil {
			return nil, nil, err
		}
		if d := int(req.GetDimensions()); d != 0 {
			dims = d
		}
		var l localEmbedder = e.local
		if version != CurrentLocal || (dims != 0 && dims != l.Dimensions()) {
			if l, err = localVersions[version](dims); err != nil {
				return nil, nil, errs.Invalid("dimensions", "%v", err)
			}
		}
		model := LocalName(version)
		start := e.now()
		vecs := l.Embed(req.GetTexts())
		rec := &ledgerEntry{model: model, provider: LocalModel, calls: 1,
			latency: e.now().Sub(start), outcome: aiv1.CallOutcome_CALL_OUTCOME_OK}
		out := &aiv1.EmbedResponse{Model: model, Dimensions: int32(l.Dimensions()), Usage: rec.wireUsage()}
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
	dims := int(req.GetDimensions())
	if dims == int(cand.Model.GetEmbeddingDimensions()) {
		// The model's own size: asked of it as no size, which every embeddings API accepts
		// (some refuse a dimensions parameter at all). A store re-embedding a query with the
		// model and size its vectors were made with sends both.
		dims = 0
	}
	resp, err := client.Embed(ctx, llm.EmbedRequest{Model: cand.Model.GetName(), Texts: req.GetTexts(), Dimensions: dims})
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

// parseLocal reads a name of the built-in embedder: "local" and "local-<dims>" are
// CurrentLocal, "local@N" is version N; dims is 0 when the name asks for no size.
func parseLocal(name string) (version, dims int, err error) {
	switch {
	case name == LocalModel:
		return CurrentLocal, 0, nil
	case strings.HasPrefix(name, LocalModel+"-"):
		dims, err := strconv.Atoi(strings.TrimPrefix(name, LocalModel+"-"))
		if err != nil || dims <= 0 {
			return 0, 0, errs.Invalid("model", "%q: want %q, %q or %q followed by a size (\"local-256\")", name, LocalModel, LocalName(CurrentLocal), LocalModel)
		}
		return CurrentLocal, dims, nil
	}
	v, err := strconv.Atoi(strings.TrimPrefix(name, LocalModel+"@"))
	if _, known := localVersions[v]; err != nil || !known {
		return 0, 0, errs.Invalid("model", "%q: the built-in embedder has no such version (known: %s; %q is %s)",
			name, strings.Join(localNames(), ", "), LocalModel, LocalName(CurrentLocal))
	}
	return v, 0, nil
}

// localNames are the exact names of the built-in embedder's versions, oldest first.
func localNames() []string {
	var out []string
	for v := range localVersions {
		out = append(out, LocalName(v))
	}
	slices.Sort(out)
	return out
}

// isLocal reports whether name means the built-in embedder ("local", "local@1",
// "local-384").
func isLocal(name string) bool {
	return name == LocalModel || strings.HasPrefix(name, LocalModel+"-") || strings.HasPrefix(name, LocalModel+"@")
}
