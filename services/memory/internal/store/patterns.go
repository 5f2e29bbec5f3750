package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
)

const patternColumns = `m.id::text, m.owner_id, m.repo, m.problem, m.solution, m.language, m.file_paths, m.tags, m.code_before,
	m.code_after, m.source_task_id, m.confidence, m.reuse_count, m.content_hash, m.embedding_model, m.create_time, m.update_time,
	encode(sha256(convert_to(m.problem || E'\n' || m.solution || E'\n' || m.code_before || E'\n' || m.code_after, 'UTF8')), 'hex') = m.content_hash`

// PatternText is what a code pattern's hash covers.
func PatternText(p *memoryv1.CodePattern) string {
	return p.GetProblem() + "\n" + p.GetSolution() + "\n" + p.GetCodeBefore() + "\n" + p.GetCodeAfter()
}

// PatternRow is a stored code pattern and whether its content still matches its hash.
type PatternRow struct {
	*memoryv1.CodePattern
	HashOK bool
}

func scanPattern(row pgx.Row, extra ...any) (*PatternRow, error) {
	p := &memoryv1.CodePattern{}
	var (
		created, updated time.Time
		ok               bool
	)
	dest := []any{&p.Id, &p.OwnerId, &p.Repo, &p.Problem, &p.Solution, &p.Language, &p.FilePaths, &p.Tags, &p.CodeBefore,
		&p.CodeAfter, &p.SourceTaskId, &p.Confidence, &p.ReuseCount, &p.ContentHash, &p.EmbeddingModel, &created, &updated, &ok}
	if err := row.Scan(append(dest, extra...)...); err != nil {
		return nil, err
	}
	p.CreateTime, p.UpdateTime = timestamppb.New(created), timestamppb.New(updated)
	return &PatternRow{CodePattern: p, HashOK: ok}, nil
}

// InsertPattern stores a code pattern; the same content for the same owner, or the same
// request_id, returns the existing one and dedup = true. next, while the code patterns are
// re-embedded for another model, is the pattern's vector of that model.
func (s *Store) InsertPattern(ctx context.Context, p *memoryv1.CodePattern, v Vector, next *Vector, searchText, requestID string) (*memoryv1.CodePattern, bool, error) {
	if err := s.EnsureIndex(ctx, "code_patterns", v.Model, len(v.Values)); err != nil {
		return nil, false, err
	}
	var reqID *string
	if requestID != "" {
		reqID = &requestID
	}
	var id string
	q, args := withNext(`INSERT INTO code_patterns (owner_id, repo, problem, solution, language, file_paths, tags,
			code_before, code_after, source_task_id, confidence, content_hash, embedding, embedding_model, embedding_dims, search, request_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13::vector, $14, $15, to_tsvector('english', $16), $17)
		ON CONFLICT DO NOTHING RETURNING id`, []any{
		p.GetOwnerId(), p.GetRepo(), p.GetProblem(), p.GetSolution(), p.GetLanguage(), nonNil(p.GetFilePaths()), nonNil(p.GetTags()),
		p.GetCodeBefore(), p.GetCodeAfter(), p.GetSourceTaskId(), p.GetConfidence(), p.GetContentHash(), v.param(), v.Model,
		len(v.Values), searchText, reqID}, "code_pattern_next_embeddings", next)
	err := s.pool.QueryRow(ctx, q, args...).Scan(&id)
	dedup := false
	if errors.Is(err, pgx.ErrNoRows) {
		dedup = true
		if reqID != nil {
			err = s.pool.QueryRow(ctx, "SELECT id::text FROM code_patterns WHERE owner_id = $1 AND request_id = $2", p.GetOwnerId(), requestID).Scan(&id)
		}
		if reqID == nil || errors.Is(err, pgx.ErrNoRows) {
			err = s.pool.QueryRow(ctx, "SELECT id::text FROM code_patterns WHERE owner_id = $1 AND content_hash = $2", p.GetOwnerId(), p.GetContentHash()).Scan(&id)
		}
	}
	if err != nil {
		return nil, false, fmt.Errorf("store: insert code pattern: %w", err)
	}
	r, err := scanPattern(s.pool.QueryRow(ctx, "SELECT "+patternColumns+" FROM code_patterns m WHERE m.id = $1", id))
	if err != nil {
		return nil, false, fmt.Errorf("store: read code pattern: %w", err)
	}
	return r.CodePattern, dedup, nil
}

// PatternQuery asks for the candidates of a code-pattern search.
type PatternQuery struct {
	Owner, Repo, Language string
	Tags                  []string
	Vector                Vector
	// Words is the query's words (see SearchQuery.Words).
	Words    string
	K        int
	TextPool int
	// EfSearch is the HNSW walk's candidate list (see SearchQuery.EfSearch).
	EfSearch int
}

// PatternCandidate is a code pattern with its vector and full-text scores.
type PatternCandidate struct {
	*PatternRow
	Vector, Text float64
	// VectorRank is the 1-based position in the vector ranking, 0 when absent.
	VectorRank int
}

// SearchPatterns returns the union of the K nearest code patterns and the K best by full
// text, with both scores.
func (s *Store) SearchPatterns(ctx context.Context, q PatternQuery) ([]*PatternCandidate, error) {
	hits, err := hybrid(ctx, s, ranking{
		table: "code_patterns", columns: patternColumns,
		where: "m.owner_id = $1 AND ($2 = '' OR m.repo = $2) AND ($3 = '' OR m.language = $3) AND m.tags @> $4",
		args:  []any{q.Owner, q.Repo, q.Language, nonNil(q.Tags)},
		vec:   q.Vector, words: q.Words, k: q.K, pool: q.TextPool, ef: q.EfSearch,
	}, func(rows pgx.Rows, v, t *float64) (*PatternRow, string, error) {
		r, err := scanPattern(rows, v, t)
		if err != nil {
			return nil, "", err
		}
		return r, r.GetId(), nil
	}, nil) // code patterns rank in PostgreSQL (no scan): nothing is held
	if err != nil {
		return nil, err
	}
	out := make([]*PatternCandidate, len(hits))
	for i, h := range hits {
		out[i] = &PatternCandidate{PatternRow: h.row, Vector: h.vector, Text: h.text, VectorRank: h.vectorRank}
	}
	return out, nil
}

// CountReuse counts a reuse of each pattern.
func (s *Store) CountReuse(ctx context.Context, owner string, ids []string) error {
	if len(ids) == 0 {
		return nil
	}
	// A search counts its results' reuse; it does not wait for a switch to a new embedding
	// model (Switch holds off writes to the table): that count is lost instead.
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `SELECT set_config('lock_timeout', '200ms', true)`); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `UPDATE code_patterns SET reuse_count = reuse_count + 1 WHERE owner_id = $1 AND id = ANY($2::uuid[])`, owner, ids)
		return err
	})
	if err != nil {
		return fmt.Errorf("store: count reuse: %w", err)
	}
	return nil
}
