package service

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/thefold/thefold/pkg/errs"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/memory/internal/store"
)

const (
	maxLanguage   = 32
	maxFilePaths  = 100
	maxSnippet    = 20000
	maxPatternTxt = 8000
)

// StoreCodePattern stores a problem → solution pair.
func (s *Server) StoreCodePattern(ctx context.Context, req *memoryv1.StoreCodePatternRequest) (*memoryv1.StoreCodePatternResponse, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	pat := &memoryv1.CodePattern{OwnerId: p.UserID, Repo: req.GetRepo(), SourceTaskId: req.GetSourceTaskId()}
	for _, f := range []struct {
		name     string
		in       string
		out      *string
		max      int
		required bool
	}{
		{"problem", req.GetProblem(), &pat.Problem, maxPatternTxt, true},
		{"solution", req.GetSolution(), &pat.Solution, maxPatternTxt, true},
		{"code_before", req.GetCodeBefore(), &pat.CodeBefore, maxSnippet, false},
		{"code_after", req.GetCodeAfter(), &pat.CodeAfter, maxSnippet, false},
	} {
		v := sanitize(f.in)
		if f.required && v == "" {
			return nil, errs.Invalid(f.name, "required")
		}
		if err := validate.MaxLen(f.name, v, f.max); err != nil {
			return nil, err
		}
		*f.out = v
	}
	if err := validate.Repo("repo", req.GetRepo(), false); err != nil {
		return nil, err
	}
	lang := strings.ToLower(strings.TrimSpace(req.GetLanguage()))
	if err := validate.MaxLen("language", lang, maxLanguage); err != nil {
		return nil, err
	}
	pat.Language = lang
	if len(req.GetFilePaths()) > maxFilePaths {
		return nil, errs.Invalid("file_paths", "at most %d paths", maxFilePaths)
	}
	for i, fp := range req.GetFilePaths() {
		if err := validate.Path(fmt.Sprintf("file_paths[%d]", i), fp); err != nil {
			return nil, err
		}
	}
	pat.FilePaths = req.GetFilePaths()
	if pat.Tags, err = validate.Labels("tags", req.GetTags(), maxTag, maxTags); err != nil {
		return nil, err
	}
	if err := validate.MaxLen("source_task_id", req.GetSourceTaskId(), maxID); err != nil {
		return nil, err
	}
	pat.Confidence = 0.5
	if req.Confidence != nil {
		if err := checkImportance("confidence", req.GetConfidence()); err != nil {
			return nil, err
		}
		pat.Confidence = req.GetConfidence()
	}
	if err := validate.RequestID("request_id", req.GetRequestId()); err != nil {
		return nil, err
	}
	pat.ContentHash = hash(store.PatternText(pat))
	text := pat.Problem + "\n" + pat.Solution
	vec, next, err := s.storeVectors(ctx, "code_patterns", text)
	if err != nil {
		return nil, err
	}
	out, dedup, err := s.store.InsertPattern(ctx, pat, vec, next, searchText(text, pat.CodeAfter), req.GetRequestId())
	if err != nil {
		return nil, err
	}
	return &memoryv1.StoreCodePatternResponse{Pattern: out, Deduplicated: dedup}, nil
}

// SearchCodePatterns finds code patterns similar to a problem.
func (s *Server) SearchCodePatterns(ctx context.Context, req *memoryv1.SearchCodePatternsRequest) (*memoryv1.SearchCodePatternsResponse, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	query, err := validate.RequiredText("query", sanitize(req.GetQuery()), maxQuery)
	if err != nil {
		return nil, err
	}
	if err := validate.Repo("repo", req.GetRepo(), false); err != nil {
		return nil, err
	}
	if err := validate.MaxLen("language", req.GetLanguage(), maxLanguage); err != nil {
		return nil, err
	}
	tags, err := validate.Labels("tags", req.GetTags(), maxTag, maxTags)
	if err != nil {
		return nil, err
	}
	limit := int(req.GetLimit())
	switch {
	case limit < 0 || limit > 50:
		return nil, errs.Invalid("limit", "want 1 to 50, or 0 for 5")
	case limit == 0:
		limit = 5
	}
	if err := checkImportance("min_similarity", req.GetMinSimilarity()); err != nil {
		return nil, err
	}
	var (
		vec   store.Vector
		cands []*store.PatternCandidate
	)
	search := func() error {
		if vec, err = s.queryVector(ctx, "code_patterns", query); err != nil {
			return err
		}
		cands, err = s.store.SearchPatterns(ctx, store.PatternQuery{Owner: p.UserID, Repo: req.GetRepo(),
			Language: strings.ToLower(req.GetLanguage()), Tags: tags, Vector: vec, Words: queryWords(query), K: s.cfg.Candidates, TextPool: s.cfg.TextPool, EfSearch: s.cfg.EfSearch})
		return err
	}
	if err := search(); err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(cands, func(c *store.PatternCandidate) bool { return c.VectorRank > 0 }) && s.switched(ctx, "code_patterns", vec.Pair()) {
		// Switched to a new embedding model by another replica meanwhile (see SearchMemories).
		if err := search(); err != nil {
			return nil, err
		}
	}
	resp := &memoryv1.SearchCodePatternsResponse{}
	alpha := s.cfg.HybridAlpha
	for _, c := range cands {
		if !c.HashOK {
			s.integrityFailure(ctx, p.UserID, c.GetId())
			continue
		}
		// The blend, weighted by how well the solution worked: a pattern of confidence 0
		// keeps half its similarity, one of confidence 1 all of it.
		score := (alpha*c.Vector + (1-alpha)*c.Text) * (0.5 + 0.5*c.GetConfidence())
		if score <= 0 || score < req.GetMinSimilarity() || math.IsNaN(score) {
			continue
		}
		resp.Results = append(resp.Results, &memoryv1.CodePatternResult{Pattern: c.CodePattern, Score: score})
	}
	slices.SortStableFunc(resp.Results, func(a, b *memoryv1.CodePatternResult) int {
		if a.GetScore() != b.GetScore() {
			return cmpFloat(b.GetScore(), a.GetScore())
		}
		return strings.Compare(a.GetPattern().GetId(), b.GetPattern().GetId())
	})
	if len(resp.Results) > limit {
		resp.Results = resp.Results[:limit]
	}
	ids := make([]string, len(resp.Results))
	for i, r := range resp.Results {
		ids[i] = r.GetPattern().GetId()
		r.Pattern.ReuseCount++
	}
	if err := s.store.CountReuse(ctx, p.UserID, ids); err != nil {
		s.log.WarnContext(ctx, "counting reuse", "err", err)
	}
	return resp, nil
}
