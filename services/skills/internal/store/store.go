// Package store keeps the skills service's state in its PostgreSQL schema: skills (with
// their routing and rules as protojson), the built-in skills seeded so far, and the results
// logged per job and skill.
package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
)

// Store is the skills schema.
type Store struct{ pool *pgxpool.Pool }

// New returns a store over pool, whose search_path is the skills schema.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Enum names as stored.
var (
	categoryNames = map[skillsv1.SkillCategory]string{
		skillsv1.SkillCategory_SKILL_CATEGORY_GENERAL: "general", skillsv1.SkillCategory_SKILL_CATEGORY_FRAMEWORK: "framework",
		skillsv1.SkillCategory_SKILL_CATEGORY_LANGUAGE: "language", skillsv1.SkillCategory_SKILL_CATEGORY_SECURITY: "security",
		skillsv1.SkillCategory_SKILL_CATEGORY_STYLE: "style", skillsv1.SkillCategory_SKILL_CATEGORY_QUALITY: "quality",
	}
	phaseNames = map[skillsv1.SkillPhase]string{
		skillsv1.SkillPhase_SKILL_PHASE_PRE_RUN: "pre_run", skillsv1.SkillPhase_SKILL_PHASE_INJECT: "inject",
		skillsv1.SkillPhase_SKILL_PHASE_POST_RUN: "post_run",
	}
	scopeNames = map[skillsv1.SkillScope]string{
		skillsv1.SkillScope_SKILL_SCOPE_GLOBAL: "global", skillsv1.SkillScope_SKILL_SCOPE_REPO: "repo",
	}
)

func parse[E comparable](names map[E]string, s string) E {
	for k, v := range names {
		if v == s {
			return k
		}
	}
	var zero E
	return zero
}

// Confidence is successes / (successes + failures), 0.5 (neutral) without results.
func Confidence(successes, failures int64) float64 {
	if successes+failures == 0 {
		return 0.5
	}
	return float64(successes) / float64(successes+failures)
}

const columns = `id::text, name, description, category, phase, prompt_fragment, routing, rules, priority, tokens,
	enabled, scope, repo, success_count, failure_count, version, owner_id, create_time, update_time`

func scan(row pgx.Row) (*skillsv1.Skill, error) {
	s := &skillsv1.Skill{Routing: &skillsv1.SkillRouting{}}
	var (
		category, phase, scope string
		routing, rules         []byte
		created, updated       time.Time
	)
	if err := row.Scan(&s.Id, &s.Name, &s.Description, &category, &phase, &s.PromptFragment, &routing, &rules, &s.Priority,
		&s.Tokens, &s.Enabled, &scope, &s.Repo, &s.SuccessCount, &s.FailureCount, &s.Version, &s.OwnerId, &created, &updated); err != nil {
		return nil, err
	}
	s.Category, s.Phase, s.Scope = parse(categoryNames, category), parse(phaseNames, phase), parse(scopeNames, scope)
	if err := protojson.Unmarshal(routing, s.Routing); err != nil {
		return nil, fmt.Errorf("routing of skill %s: %w", s.Id, err)
	}
	var err error
	if s.Rules, err = unmarshalRules(rules); err != nil {
		return nil, fmt.Errorf("rules of skill %s: %w", s.Id, err)
	}
	s.Confidence = Confidence(s.SuccessCount, s.FailureCount)
	s.CreateTime, s.UpdateTime = timestamppb.New(created), timestamppb.New(updated)
	return s, nil
}

// Rules are stored as a JSON array of protojson SkillRules.
func marshalRules(rules []*skillsv1.SkillRule) ([]byte, error) {
	parts := make([]string, len(rules))
	for i, r := range rules {
		b, err := protojson.Marshal(r)
		if err != nil {
			return nil, err
		}
		parts[i] = string(b)
	}
	return []byte("[" + strings.Join(parts, ",") + "]"), nil
}

func unmarshalRules(b []byte) ([]*skillsv1.SkillRule, error) {
	// Through a message holding the array: protojson reads messages, not bare arrays.
	wrapped := append(append([]byte(`{"rules":`), b...), '}')
	var holder skillsv1.Skill
	if err := protojson.Unmarshal(wrapped, &holder); err != nil {
		return nil, err
	}
	return holder.GetRules(), nil
}

// Insert stores a new skill (validated, with its tokens counted) for owner. A name taken in
// the same scope is errs.ErrAlreadyExists.
func (s *Store) Insert(ctx context.Context, sk *skillsv1.Skill, owner string, builtin bool) (*skillsv1.Skill, error) {
	return insert(ctx, s.pool, sk, owner, builtin)
}

type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

func insert(ctx context.Context, q querier, sk *skillsv1.Skill, owner string, builtin bool) (*skillsv1.Skill, error) {
	routing, err := protojson.Marshal(sk.GetRouting())
	if err != nil {
		return nil, err
	}
	rules, err := marshalRules(sk.GetRules())
	if err != nil {
		return nil, err
	}
	out, err := scan(q.QueryRow(ctx, `INSERT INTO skills (name, description, category, phase, prompt_fragment, routing, rules,
			priority, tokens, enabled, scope, repo, owner_id, builtin)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14) RETURNING `+columns,
		sk.GetName(), sk.GetDescription(), categoryNames[sk.GetCategory()], phaseNames[sk.GetPhase()], sk.GetPromptFragment(),
		routing, rules, sk.GetPriority(), sk.GetTokens(), sk.GetEnabled(), scopeNames[sk.GetScope()], sk.GetRepo(), owner, builtin))
	if db.IsUniqueViolation(err) {
		return nil, fmt.Errorf("%w: a skill named %q exists in this scope", errs.ErrAlreadyExists, sk.GetName())
	}
	if err != nil {
		return nil, fmt.Errorf("store: insert skill: %w", err)
	}
	return out, nil
}

// Get returns one skill, errs.ErrNotFound when there is none.
func (s *Store) Get(ctx context.Context, id string) (*skillsv1.Skill, error) {
	sk, err := scan(s.pool.QueryRow(ctx, "SELECT "+columns+" FROM skills WHERE id = $1", id))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("%w: skill %q", errs.ErrNotFound, id)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get skill: %w", err)
	}
	return sk, nil
}

// Filter selects skills to list.
type Filter struct {
	Category skillsv1.SkillCategory
	Phase    skillsv1.SkillPhase
	// Repo: the global skills and this repository's ("" lists every skill).
	Repo    string
	Enabled *bool
}

// Cursor is the last skill of a page in list order (priority descending, name, id).
type Cursor struct {
	Priority int32
	Name, ID string
}

// List returns up to limit skills after the cursor (nil: from the start), highest priority
// first, and the cursor of the next page (nil on the last).
func (s *Store) List(ctx context.Context, f Filter, after *Cursor, limit int) ([]*skillsv1.Skill, *Cursor, error) {
	var c db.Conds
	if f.Category != skillsv1.SkillCategory_SKILL_CATEGORY_UNSPECIFIED {
		c.Add("category = $%d", categoryNames[f.Category])
	}
	if f.Phase != skillsv1.SkillPhase_SKILL_PHASE_UNSPECIFIED {
		c.Add("phase = $%d", phaseNames[f.Phase])
	}
	if f.Repo != "" {
		c.Add("(scope = 'global' OR repo = $%d)", f.Repo)
	}
	if f.Enabled != nil {
		c.Add("enabled = $%d", *f.Enabled)
	}
	if after != nil {
		c.Add("(-priority, name, id) > ($%d, $%d, $%d::uuid)", -after.Priority, after.Name, after.ID)
	}
	q := "SELECT " + columns + " FROM skills" + c.Where() + " ORDER BY priority DESC, name, id LIMIT " + c.Arg(limit+1)
	rows, err := s.pool.Query(ctx, q, c.Args...)
	if err != nil {
		return nil, nil, fmt.Errorf("store: list skills: %w", err)
	}
	defer rows.Close()
	var out []*skillsv1.Skill
	for rows.Next() {
		sk, err := scan(rows)
		if err != nil {
			return nil, nil, fmt.Errorf("store: list skills: %w", err)
		}
		out = append(out, sk)
	}
	if err := rows.Err(); err != nil {
		return nil, nil, fmt.Errorf("store: list skills: %w", err)
	}
	if len(out) <= limit {
		return out, nil, nil
	}
	last := out[limit-1]
	return out[:limit], &Cursor{Priority: last.GetPriority(), Name: last.GetName(), ID: last.GetId()}, nil
}

// InScope returns every skill (enabled or not) that applies to repo: the global ones and
// the repository's.
func (s *Store) InScope(ctx context.Context, repo string) ([]*skillsv1.Skill, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+columns+" FROM skills WHERE scope = 'global' OR (repo <> '' AND repo = $1) ORDER BY priority DESC, name, id", repo)
	if err != nil {
		return nil, fmt.Errorf("store: skills in scope: %w", err)
	}
	defer rows.Close()
	var out []*skillsv1.Skill
	for rows.Next() {
		sk, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("store: skills in scope: %w", err)
		}
		out = append(out, sk)
	}
	return out, rows.Err()
}

// ByIDs returns the skills of ids in their order; an unknown id is errs.ErrNotFound.
func (s *Store) ByIDs(ctx context.Context, ids []string) ([]*skillsv1.Skill, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+columns+" FROM skills WHERE id = ANY($1::uuid[])", ids)
	if err != nil {
		return nil, fmt.Errorf("store: skills by id: %w", err)
	}
	defer rows.Close()
	byID := map[string]*skillsv1.Skill{}
	for rows.Next() {
		sk, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("store: skills by id: %w", err)
		}
		byID[sk.GetId()] = sk
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: skills by id: %w", err)
	}
	out := make([]*skillsv1.Skill, 0, len(ids))
	for _, id := range ids {
		sk, ok := byID[id]
		if !ok {
			return nil, fmt.Errorf("%w: skill %q", errs.ErrNotFound, id)
		}
		out = append(out, sk)
	}
	return out, nil
}

// Update applies change to the skill under a row lock and writes it back with its version
// incremented. A non-zero version that is not the current one is errs.ErrConflict.
func (s *Store) Update(ctx context.Context, id string, version int32, change func(*skillsv1.Skill) error) (*skillsv1.Skill, error) {
	var out *skillsv1.Skill
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		sk, err := scan(tx.QueryRow(ctx, "SELECT "+columns+" FROM skills WHERE id = $1 FOR UPDATE", id))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: skill %q", errs.ErrNotFound, id)
		}
		if err != nil {
			return fmt.Errorf("store: update skill: %w", err)
		}
		if version != 0 && version != sk.GetVersion() {
			return fmt.Errorf("%w: skill %q is at version %d, not %d: read it again", errs.ErrConflict, id, sk.GetVersion(), version)
		}
		if err := change(sk); err != nil {
			return err // the caller's own error (e.g. invalid input), as it is
		}
		routing, err := protojson.Marshal(sk.GetRouting())
		if err != nil {
			return fmt.Errorf("store: update skill: %w", err)
		}
		rules, err := marshalRules(sk.GetRules())
		if err != nil {
			return fmt.Errorf("store: update skill: %w", err)
		}
		out, err = scan(tx.QueryRow(ctx, `UPDATE skills SET name = $2, description = $3, category = $4, phase = $5,
				prompt_fragment = $6, routing = $7, rules = $8, priority = $9, tokens = $10, enabled = $11, scope = $12, repo = $13,
				version = version + 1, update_time = now()
			WHERE id = $1 RETURNING `+columns,
			id, sk.GetName(), sk.GetDescription(), categoryNames[sk.GetCategory()], phaseNames[sk.GetPhase()], sk.GetPromptFragment(),
			routing, rules, sk.GetPriority(), sk.GetTokens(), sk.GetEnabled(), scopeNames[sk.GetScope()], sk.GetRepo()))
		if db.IsUniqueViolation(err) {
			return fmt.Errorf("%w: a skill named %q exists in this scope", errs.ErrAlreadyExists, sk.GetName())
		}
		if err != nil {
			return fmt.Errorf("store: update skill: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Delete deletes a skill; its results stay.
func (s *Store) Delete(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, "DELETE FROM skills WHERE id = $1", id)
	if err != nil {
		return fmt.Errorf("store: delete skill: %w", err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: skill %q", errs.ErrNotFound, id)
	}
	return nil
}

// Result is how a job that used skills went.
type Result struct {
	JobID, TaskID, Owner string
	Success              bool
	QualityScore         int32
}

// LogResult records r once per skill of ids (a repeat for the same job and skill changes
// nothing) and returns each skill's counts after it. An unknown id is errs.ErrNotFound and
// records nothing.
func (s *Store) LogResult(ctx context.Context, r Result, ids []string) ([]*skillsv1.SkillScore, error) {
	var out []*skillsv1.SkillScore
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		out = out[:0]
		for _, id := range ids {
			var inserted bool
			err := tx.QueryRow(ctx, `WITH s AS (SELECT id FROM skills WHERE id = $2 FOR UPDATE),
					ins AS (INSERT INTO skill_results (job_id, skill_id, task_id, success, quality_score, owner_id)
						SELECT $1, s.id, $3, $4, $5, $6 FROM s ON CONFLICT DO NOTHING RETURNING 1)
				SELECT EXISTS (SELECT 1 FROM s), EXISTS (SELECT 1 FROM ins)`,
				r.JobID, id, r.TaskID, r.Success, r.QualityScore, r.Owner).Scan(new(bool), &inserted)
			if err != nil {
				return err
			}
			sc := &skillsv1.SkillScore{SkillId: id}
			success, failure := 0, 0
			if inserted {
				if r.Success {
					success = 1
				} else {
					failure = 1
				}
			}
			err = tx.QueryRow(ctx, `UPDATE skills SET success_count = success_count + $2, failure_count = failure_count + $3
				WHERE id = $1 RETURNING success_count, failure_count`, id, success, failure).Scan(&sc.SuccessCount, &sc.FailureCount)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("%w: skill %q", errs.ErrNotFound, id)
			}
			if err != nil {
				return err
			}
			sc.Confidence = Confidence(sc.SuccessCount, sc.FailureCount)
			out = append(out, sc)
		}
		return nil
	})
	if err != nil {
		if errors.Is(err, errs.ErrNotFound) {
			return nil, err
		}
		return nil, fmt.Errorf("store: log result: %w", err)
	}
	return out, nil
}

// Seed inserts each built-in skill not seeded before (by name), owned by "system", and
// records it as seeded; a name an admin already uses for a skill of their own is left to
// them. Concurrent replicas seed one at a time.
func (s *Store) Seed(ctx context.Context, skills []*skillsv1.Skill) (int, error) {
	n := 0
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		n = 0
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtext('thefold skills seed'))"); err != nil {
			return err
		}
		for _, sk := range skills {
			tag, err := tx.Exec(ctx, "INSERT INTO seeded (name) VALUES ($1) ON CONFLICT DO NOTHING", sk.GetName())
			if err != nil {
				return err
			}
			if tag.RowsAffected() == 0 {
				continue
			}
			if _, err := tx.Exec(ctx, "SAVEPOINT seed"); err != nil {
				return err
			}
			if _, err := insert(ctx, tx, sk, "system", true); err != nil {
				if !errors.Is(err, errs.ErrAlreadyExists) {
					return err
				}
				if _, err := tx.Exec(ctx, "ROLLBACK TO SAVEPOINT seed"); err != nil {
					return err
				}
				continue
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("store: seed skills: %w", err)
	}
	return n, nil
}
