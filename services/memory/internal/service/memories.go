package service

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/memory/internal/store"
)

const (
	maxSummary  = 500
	maxCategory = 64
	maxTag      = 64
	maxTags     = 32
	maxID       = 64
	maxQuery    = 10000
)

// checkContent sanitizes content and checks it is not empty and within the cap.
func (s *Server) checkContent(field, content string) (string, error) {
	clean := sanitize(content)
	if clean == "" {
		return "", errs.Invalid(field, "required (nothing is left after removing control characters and spaces)")
	}
	if n := len([]rune(clean)); n > s.cfg.MaxContent {
		return "", errs.Invalid(field, "%d characters, at most %d", n, s.cfg.MaxContent)
	}
	return clean, nil
}

func checkImportance(field string, v float64) error {
	if math.IsNaN(v) || v < 0 || v > 1 {
		return errs.Invalid(field, "want 0 to 1")
	}
	return nil
}

// trustFor is the trust a store or update by this caller gets (see StoreMemoryRequest).
func trustFor(ctx context.Context, field string, asked memoryv1.MemoryTrustLevel) (memoryv1.MemoryTrustLevel, error) {
	p, err := caller(ctx)
	if err != nil {
		return 0, err
	}
	if err := validate.Enum(field, asked, true); err != nil {
		return 0, err
	}
	if p.Service == "" {
		return memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_USER, nil
	}
	switch asked {
	case memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_UNSPECIFIED:
		return memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_AGENT, nil
	case memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_USER:
		return 0, errs.Invalid(field, "a service cannot vouch for a person: store AGENT or SYSTEM")
	}
	return asked, nil
}

// StoreMemory sanitizes, hashes, embeds and stores a memory.
func (s *Server) StoreMemory(ctx context.Context, req *memoryv1.StoreMemoryRequest) (*memoryv1.StoreMemoryResponse, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	content, err := s.checkContent("content", req.GetContent())
	if err != nil {
		return nil, err
	}
	if err := validate.Repo("repo", req.GetRepo(), false); err != nil {
		return nil, err
	}
	if err := validate.Enum("type", req.GetType(), true); err != nil {
		return nil, err
	}
	typ := req.GetType()
	if typ == typev1.MemoryType_MEMORY_TYPE_UNSPECIFIED {
		typ = typev1.MemoryType_MEMORY_TYPE_GENERAL
	}
	summary := sanitize(req.GetSummary())
	if err := validate.MaxLen("summary", summary, maxSummary); err != nil {
		return nil, err
	}
	if summary == "" {
		summary = summarize(content)
	}
	tags, err := validate.Labels("tags", req.GetTags(), maxTag, maxTags)
	if err != nil {
		return nil, err
	}
	category := strings.TrimSpace(sanitize(req.GetCategory()))
	if err := validate.MaxLen("category", category, maxCategory); err != nil {
		return nil, err
	}
	trust, err := trustFor(ctx, "trust_level", req.GetTrustLevel())
	if err != nil {
		return nil, err
	}
	importance := 0.5
	if req.Importance != nil {
		if err := checkImportance("importance", req.GetImportance()); err != nil {
			return nil, err
		}
		importance = req.GetImportance()
	}
	for field, v := range map[string]string{"source_task_id": req.GetSourceTaskId(), "source_job_id": req.GetSourceJobId()} {
		if err := validate.MaxLen(field, v, maxID); err != nil {
			return nil, err
		}
	}
	var expire *timestamppb.Timestamp
	if req.GetTtl() != nil {
		if err := req.GetTtl().CheckValid(); err != nil || req.GetTtl().AsDuration() <= 0 {
			return nil, errs.Invalid("ttl", "want a positive duration")
		}
		expire = timestamppb.New(s.now().Add(req.GetTtl().AsDuration()))
	}
	if err := validate.RequestID("request_id", req.GetRequestId()); err != nil {
		return nil, err
	}
	vec, next, err := s.storeVectors(ctx, "memories", summary+"\n"+content)
	if err != nil {
		return nil, err
	}
	m := &memoryv1.Memory{
		OwnerId: p.UserID, Repo: req.GetRepo(), Type: typ, Category: category, Content: content, Summary: summary,
		Tags: tags, TrustLevel: trust, Importance: importance, ContentHash: hash(content),
		SourceTaskId: req.GetSourceTaskId(), SourceJobId: req.GetSourceJobId(), Metadata: req.GetMetadata(), ExpireTime: expire,
	}
	out, dedup, err := s.store.Insert(ctx, store.NewMemory{Memory: m, Vector: vec, Next: next, SearchText: searchText(summary, content), RequestID: req.GetRequestId()})
	if err != nil {
		return nil, err
	}
	return &memoryv1.StoreMemoryResponse{Memory: out, Deduplicated: dedup}, nil
}

// get reads one of the caller's memories, refusing one that fails its integrity check.
func (s *Server) get(ctx context.Context, field, id string) (*memoryv1.Memory, string, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, "", err
	}
	id, err = validate.UUID(field, id, true)
	if err != nil {
		return nil, "", err
	}
	r, err := s.store.Get(ctx, p.UserID, id)
	if err != nil {
		return nil, "", err
	}
	if !r.HashOK {
		s.integrityFailure(ctx, p.UserID, id)
		return nil, "", errs.Public(codes.FailedPrecondition, "memory %q failed its integrity check (its content no longer matches content_hash) and is withheld", id)
	}
	return r.Memory, p.UserID, nil
}

// GetMemory returns one of the caller's memories and records an access.
func (s *Server) GetMemory(ctx context.Context, req *memoryv1.GetMemoryRequest) (*memoryv1.GetMemoryResponse, error) {
	m, owner, err := s.get(ctx, "id", req.GetId())
	if err != nil {
		return nil, err
	}
	if err := s.store.RecordAccess(ctx, owner, []string{m.GetId()}); err != nil {
		s.log.WarnContext(ctx, "recording an access", "err", err)
	}
	return &memoryv1.GetMemoryResponse{Memory: m}, nil
}

// filter checks the common filters of List and Search.
func filter(repoSet bool, repo string, types []typev1.MemoryType, tags []string, trust []memoryv1.MemoryTrustLevel, categories []string) (store.Filter, error) {
	f := store.Filter{Repo: repo, AnyRepo: !repoSet, Types: types, Trust: trust, Categories: categories}
	if err := validate.Repo("repo", repo, false); err != nil {
		return f, err
	}
	for i, t := range types {
		if err := validate.Enum(fmt.Sprintf("types[%d]", i), t, false); err != nil {
			return f, err
		}
	}
	for i, t := range trust {
		if err := validate.Enum(fmt.Sprintf("trust_levels[%d]", i), t, false); err != nil {
			return f, err
		}
	}
	var err error
	if f.Tags, err = validate.Labels("tags", tags, maxTag, maxTags); err != nil {
		return f, err
	}
	if f.Categories, err = validate.Labels("categories", categories, maxCategory, maxTags); err != nil {
		return f, err
	}
	return f, nil
}

// ListMemories lists the caller's memories, newest first.
func (s *Server) ListMemories(ctx context.Context, req *memoryv1.ListMemoriesRequest) (*memoryv1.ListMemoriesResponse, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	f, err := filter(req.GetRepo() != "", req.GetRepo(), req.GetTypes(), req.GetTags(), req.GetTrustLevels(), nil)
	if err != nil {
		return nil, err
	}
	size, err := validate.PageSize(req.GetPageSize(), 50, 200)
	if err != nil {
		return nil, err
	}
	var (
		afterTime time.Time
		afterID   string
	)
	if t := req.GetPageToken(); t != "" {
		if afterTime, afterID, err = validate.DecodeTimeIDToken(t, "m1", "ListMemories"); err != nil {
			return nil, err
		}
	}
	rows, err := s.store.List(ctx, p.UserID, f, afterTime, afterID, size+1)
	if err != nil {
		return nil, err
	}
	resp := &memoryv1.ListMemoriesResponse{}
	for i, r := range rows {
		if i == size {
			last := rows[size-1]
			resp.NextPageToken = validate.EncodeTimeIDToken("m1", last.GetCreateTime().AsTime(), last.GetId())
			break
		}
		if !r.HashOK {
			s.integrityFailure(ctx, p.UserID, r.GetId())
			continue
		}
		resp.Memories = append(resp.Memories, r.Memory)
	}
	return resp, nil
}

// SearchMemories ranks the caller's memories against a query.
func (s *Server) SearchMemories(ctx context.Context, req *memoryv1.SearchMemoriesRequest) (*memoryv1.SearchMemoriesResponse, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	query, err := validate.RequiredText("query", sanitize(req.GetQuery()), maxQuery)
	if err != nil {
		return nil, err
	}
	f, err := filter(req.GetRepo() != "", req.GetRepo(), req.GetTypes(), req.GetTags(), req.GetTrustLevels(), req.GetCategories())
	if err != nil {
		return nil, err
	}
	// Strategies are what the agent plans by: below the threshold (an AGENT strategy not
	// promoted by a person) none is recalled, whatever the request's filters say.
	f.StrategyTrust = s.cfg.strategyTrust()
	limit := int(req.GetLimit())
	switch {
	case limit < 0 || limit > 50:
		return nil, errs.Invalid("limit", "want 1 to 50, or 0 for 10")
	case limit == 0:
		limit = 10
	}
	if err := checkImportance("min_similarity", req.GetMinSimilarity()); err != nil {
		return nil, err
	}
	if err := validate.Enum("fusion", req.GetFusion(), true); err != nil {
		return nil, err
	}
	fusion := req.GetFusion()
	if fusion == memoryv1.MemoryFusion_MEMORY_FUSION_UNSPECIFIED {
		fusion = memoryv1.MemoryFusion_MEMORY_FUSION_ALPHA
		if s.cfg.Fusion == "rrf" {
			fusion = memoryv1.MemoryFusion_MEMORY_FUSION_RRF
		}
	}
	alpha := s.cfg.HybridAlpha
	if req.VectorWeight != nil {
		if fusion == memoryv1.MemoryFusion_MEMORY_FUSION_RRF {
			return nil, errs.Invalid("vector_weight", "applies to ALPHA fusion only")
		}
		if err := checkImportance("vector_weight", req.GetVectorWeight()); err != nil {
			return nil, err
		}
		alpha = req.GetVectorWeight()
	}
	var (
		vec   store.Vector
		cands []*store.Candidate
	)
	// The owner's version is read while the query is embedded (the in-process rankings
	// need it, and nothing else of the query).
	version := s.store.CheckVersion(ctx, p.UserID)
	search := func() error {
		if vec, err = s.queryVector(ctx, "memories", query); err != nil {
			return err
		}
		cands, err = s.store.Search(ctx, store.SearchQuery{Owner: p.UserID, Filter: f, Version: version, Vector: vec, Words: queryWords(query), K: max(s.cfg.Candidates, limit), TextPool: s.cfg.TextPool, EfSearch: s.cfg.EfSearch})
		return err
	}
	if err := search(); err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(cands, func(c *store.Candidate) bool { return c.VectorRank > 0 }) && s.switched(ctx, "memories", vec.Pair()) {
		// Another replica switched the memories to a new embedding model after this one
		// embedded the query with the old: once more, with the new, and the owner's version
		// read again (the switch changed the vectors after the first read).
		version = nil
		if err := search(); err != nil {
			return nil, err
		}
	}
	resp := &memoryv1.SearchMemoriesResponse{EmbeddingModel: vec.Model}
	now := s.now()
	rank := newScoring(fusion, alpha, req.GetMinSimilarity(), now, s.cfg.halfLife, cands)
	var ranked []*memoryv1.MemorySearchResult
	for _, c := range cands {
		if sc, ok := rank.score(c); ok {
			ranked = append(ranked, &memoryv1.MemorySearchResult{Memory: c.Memory, Score: sc})
		}
	}
	ranked = best(ranked, len(ranked))
	// The candidates were scored without their content: the best are read whole, and one
	// whose content no longer matches its hash gives its place to the next.
	var results []*memoryv1.MemorySearchResult
	for len(results) < limit && len(ranked) > 0 {
		next := ranked[:min(limit-len(results), len(ranked))]
		ranked = ranked[len(next):]
		ids := make([]string, len(next))
		for i, r := range next {
			ids[i] = r.GetMemory().GetId()
		}
		rows, err := s.store.SearchRows(ctx, p.UserID, ids)
		if err != nil {
			return nil, err
		}
		for _, r := range next {
			row, ok := rows[r.GetMemory().GetId()]
			switch {
			case !ok: // deleted or expired since it was found
			case !row.HashOK:
				s.integrityFailure(ctx, p.UserID, row.GetId())
				resp.IntegrityFailures++
			default:
				r.Memory = row.Memory
				results = append(results, r)
			}
		}
	}
	ids := make([]string, len(results))
	for i, r := range results {
		ids[i] = r.GetMemory().GetId()
		r.Memory.AccessCount++
		r.Memory.LastAccessedTime = timestamppb.New(now)
	}
	s.store.RecordAccessLater(ctx, p.UserID, ids, func(err error) { s.log.WarnContext(ctx, "recording accesses", "err", err) })
	resp.Results = results
	return resp, nil
}

// DeleteMemory deletes one of the caller's memories.
func (s *Server) DeleteMemory(ctx context.Context, req *memoryv1.DeleteMemoryRequest) (*memoryv1.DeleteMemoryResponse, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.GetId(), true)
	if err != nil {
		return nil, err
	}
	if err := s.store.Delete(ctx, p.UserID, id); err != nil {
		return nil, err
	}
	return &memoryv1.DeleteMemoryResponse{}, nil
}

// memoryUpdatable are the fields UpdateMemory changes.
var memoryUpdatable = []string{"content", "summary", "tags", "category", "importance", "expire_time", "trust_level"}

// UpdateMemory changes the fields of a memory named in update_mask.
func (s *Server) UpdateMemory(ctx context.Context, req *memoryv1.UpdateMemoryRequest) (*memoryv1.UpdateMemoryResponse, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.GetId(), true)
	if err != nil {
		return nil, err
	}
	in := req.GetMemory()
	if in.GetId() != "" && !strings.EqualFold(in.GetId(), id) {
		return nil, errs.Invalid("memory.id", "must equal id or be empty")
	}
	paths, err := validate.UpdatePaths(req.GetUpdateMask(), in, memoryUpdatable)
	if err != nil {
		return nil, err
	}
	var u store.Update
	for _, path := range paths {
		switch path {
		case "content":
			content, err := s.checkContent("memory.content", in.GetContent())
			if err != nil {
				return nil, err
			}
			u.Content, u.Hash = &content, hash(content)
		case "summary":
			sum := sanitize(in.GetSummary())
			if err := validate.MaxLen("memory.summary", sum, maxSummary); err != nil {
				return nil, err
			}
			u.Summary = &sum
		case "tags":
			tags, err := validate.Labels("memory.tags", in.GetTags(), maxTag, maxTags)
			if err != nil {
				return nil, err
			}
			u.Tags = &tags
		case "category":
			c := strings.TrimSpace(sanitize(in.GetCategory()))
			if err := validate.MaxLen("memory.category", c, maxCategory); err != nil {
				return nil, err
			}
			u.Category = &c
		case "importance":
			v := in.GetImportance()
			if err := checkImportance("memory.importance", v); err != nil {
				return nil, err
			}
			u.Importance = &v
		case "expire_time":
			var t *time.Time
			if in.GetExpireTime() != nil {
				if err := in.GetExpireTime().CheckValid(); err != nil {
					return nil, errs.Invalid("memory.expire_time", "%v", err)
				}
				tt := in.GetExpireTime().AsTime()
				t = &tt
			}
			u.ExpireTime = &t
		case "trust_level":
			t := in.GetTrustLevel()
			if err := validate.Enum("memory.trust_level", t, false); err != nil {
				return nil, err
			}
			u.Trust = &t
			if p.Service == "" {
				u.PromotedBy = p.UserID // a person vouches (when it is a promotion to USER)
			} else {
				// A service may lower trust, never raise it (see TrustFloor).
				u.TrustFloor = trustAtLeast(t)
			}
		default:
			return nil, errs.Invalid("update_mask", "%q cannot be updated; want content, summary, tags, category, importance, expire_time or trust_level", validate.Truncate(path, 64))
		}
	}
	if p.Service != "" && (u.Content != nil || u.Summary != nil) {
		// What a person or TheFold vouched for was the old text: new text from a service
		// is the agent's own.
		agent := memoryv1.MemoryTrustLevel_MEMORY_TRUST_LEVEL_AGENT
		u.Trust, u.TrustFloor = &agent, nil
	}
	cur, _, err := s.get(ctx, "id", id)
	if err != nil {
		return nil, err
	}
	if u.Content != nil || u.Summary != nil {
		// The embedding and the full-text vector are of the summary and the content
		// together: either changing makes both new.
		summary, content := cur.GetSummary(), cur.GetContent()
		if u.Summary != nil {
			summary = *u.Summary
		}
		if u.Content != nil {
			content = *u.Content
		}
		vec, next, err := s.storeVectors(ctx, "memories", summary+"\n"+content)
		if err != nil {
			return nil, err
		}
		u.Vector, u.Next, u.SearchText = &vec, next, searchText(summary, content)
	}
	m, err := s.store.Update(ctx, p.UserID, id, u)
	if err != nil {
		return nil, err
	}
	return &memoryv1.UpdateMemoryResponse{Memory: m}, nil
}

// trustAtLeast is the trust levels ranked at least as high as t.
func trustAtLeast(t memoryv1.MemoryTrustLevel) []memoryv1.MemoryTrustLevel {
	var out []memoryv1.MemoryTrustLevel
	for _, l := range trustByName {
		if trustRank(l) >= trustRank(t) {
			out = append(out, l)
		}
	}
	slices.Sort(out)
	return out
}

// PromoteMemory raises a memory to USER: a person vouches for it. The owner may promote
// their memory, an admin anyone's; a service may not, even acting for the owner, since it
// cannot vouch for a person.
func (s *Server) PromoteMemory(ctx context.Context, req *memoryv1.PromoteMemoryRequest) (*memoryv1.PromoteMemoryResponse, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if p.Service != "" {
		return nil, errs.Public(codes.PermissionDenied, "only a person promotes a memory, with their own token: the %s service acts for %s and cannot vouch for them", p.Service, p.UserID)
	}
	id, err := validate.UUID("id", req.GetId(), true)
	if err != nil {
		return nil, err
	}
	admin := p.HasRole(auth.RoleAdmin)
	r, err := s.store.Promote(ctx, p.UserID, admin, id, p.UserID)
	if errors.Is(err, store.ErrIntegrity) {
		s.integrityFailure(ctx, r.GetOwnerId(), id)
		return nil, errs.Public(codes.FailedPrecondition, "memory %q failed its integrity check (its content no longer matches content_hash) and is not promoted", id)
	}
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "memory promoted", "memory_id", id, "owner", r.GetOwnerId(), "by", p.UserID,
		"admin_for_another", r.GetOwnerId() != p.UserID, "promoted_by", r.GetPromotedBy())
	return &memoryv1.PromoteMemoryResponse{Memory: r.Memory}, nil
}

// MarkMemoriesUsed records that memories were used.
func (s *Server) MarkMemoriesUsed(ctx context.Context, req *memoryv1.MarkMemoriesUsedRequest) (*memoryv1.MarkMemoriesUsedResponse, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if n := len(req.GetIds()); n == 0 || n > 100 {
		return nil, errs.Invalid("ids", "want 1 to 100 memory ids, got %d", n)
	}
	ids := make([]string, 0, len(req.GetIds()))
	for i, raw := range req.GetIds() {
		id, err := validate.UUID(fmt.Sprintf("ids[%d]", i), raw, true)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for field, v := range map[string]string{"job_id": req.GetJobId(), "task_id": req.GetTaskId()} {
		if err := validate.MaxLen(field, v, maxID); err != nil {
			return nil, err
		}
	}
	if err := validate.RequestID("request_id", req.GetRequestId()); err != nil {
		return nil, err
	}
	marked, err := s.store.MarkUsed(ctx, p.UserID, ids, req.GetRequestId())
	if err != nil {
		return nil, err
	}
	resp := &memoryv1.MarkMemoriesUsedResponse{MarkedIds: marked}
	for _, id := range ids {
		if !slices.Contains(marked, id) {
			resp.UnknownIds = append(resp.UnknownIds, id)
		}
	}
	s.log.InfoContext(ctx, "memories used", "marked", len(marked), "job_id", req.GetJobId(), "task_id", req.GetTaskId())
	return resp, nil
}

// GetStats summarizes the caller's memories.
func (s *Server) GetStats(ctx context.Context, req *memoryv1.GetStatsRequest) (*memoryv1.GetStatsResponse, error) {
	p, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := validate.Repo("repo", req.GetRepo(), false); err != nil {
		return nil, err
	}
	resp, err := s.store.Stats(ctx, p.UserID, req.GetRepo(), req.GetRepo() != "", s.cfg.halfLife)
	if err != nil {
		return nil, err
	}
	if resp.MemoryEmbedding, err = s.embeddingStatus(ctx, "memories", p.UserID, req.GetRepo(), req.GetRepo() != "", resp.GetTotal()); err != nil {
		return nil, err
	}
	if resp.CodePatternEmbedding, err = s.embeddingStatus(ctx, "code_patterns", p.UserID, req.GetRepo(), req.GetRepo() != "", resp.GetCodePatternCount()); err != nil {
		return nil, err
	}
	return resp, nil
}
