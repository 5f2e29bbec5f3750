// Package store keeps the github service's state in its PostgreSQL schema: the local
// forge's repository registry, pull requests, issues and comments, and the answers of
// side-effecting RPCs made with a request_id (for every provider). The git objects of the
// local forge are on disk, not here.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
)

// Store is the github schema.
type Store struct {
	pool *pgxpool.Pool
}

// New returns a store over pool, whose search_path is the github schema.
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Repo is a local repository's registry row.
type Repo struct {
	Owner, Name   string
	Description   string
	Private       bool
	DefaultBranch string
	CreatedBy     string
	CreateTime    time.Time
	UpdateTime    time.Time
	// Role is the reader's role on it (0 none … 3 admin), where the query computed one.
	Role int
}

// FullName is "owner/name".
func (r *Repo) FullName() string { return r.Owner + "/" + r.Name }

const repoColumns = "owner, name, description, private, default_branch, created_by, create_time, update_time"

func scanRepo(row pgx.Row) (*Repo, error) {
	r := &Repo{}
	err := row.Scan(&r.Owner, &r.Name, &r.Description, &r.Private, &r.DefaultBranch, &r.CreatedBy, &r.CreateTime, &r.UpdateTime)
	return r, err
}

// CreateRepo registers a repository; a taken name is errs.ErrAlreadyExists.
func (s *Store) CreateRepo(ctx context.Context, r *Repo) (*Repo, error) {
	row := s.pool.QueryRow(ctx, `INSERT INTO repos (owner, name, description, private, default_branch, created_by)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING `+repoColumns,
		r.Owner, r.Name, r.Description, r.Private, r.DefaultBranch, r.CreatedBy)
	out, err := scanRepo(row)
	if db.IsUniqueViolation(err) {
		return nil, fmt.Errorf("repository %q: %w", r.FullName(), errs.ErrAlreadyExists)
	}
	if err != nil {
		return nil, fmt.Errorf("store: create repo: %w", err)
	}
	return out, nil
}

// DeleteRepo removes a registry row (used to undo a create whose git init failed).
func (s *Store) DeleteRepo(ctx context.Context, owner, name string) error {
	if _, err := s.pool.Exec(ctx, "DELETE FROM repos WHERE owner = $1 AND name = $2", owner, name); err != nil {
		return fmt.Errorf("store: delete repo: %w", err)
	}
	return nil
}

// GetRepo reads a repository; unknown is errs.ErrNotFound.
func (s *Store) GetRepo(ctx context.Context, owner, name string) (*Repo, error) {
	r, err := scanRepo(s.pool.QueryRow(ctx, "SELECT "+repoColumns+" FROM repos WHERE owner = $1 AND name = $2", owner, name))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("repository %q: %w", owner+"/"+name, errs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get repo: %w", err)
	}
	return r, nil
}

// ListRepos lists repositories after the full name after (exclusive), by full name, that
// the user can see (a role of read or more, see repo_role), or all for an admin.
func (s *Store) ListRepos(ctx context.Context, owner, user string, admin bool, after string, limit int) ([]*Repo, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+repoColumns+`, CASE WHEN $4 THEN 3 ELSE repo_role(owner, name, private, created_by, $3) END AS role
		FROM repos
		WHERE ($1 = '' OR owner = $1) AND (owner || '/' || name) > $2
		  AND ($4 OR repo_role(owner, name, private, created_by, $3) > 0)
		ORDER BY owner || '/' || name LIMIT $5`, owner, after, user, admin, limit)
	if err != nil {
		return nil, fmt.Errorf("store: list repos: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*Repo, error) {
		r := &Repo{}
		err := row.Scan(&r.Owner, &r.Name, &r.Description, &r.Private, &r.DefaultBranch, &r.CreatedBy, &r.CreateTime, &r.UpdateTime, &r.Role)
		return r, err
	})
	if err != nil {
		return nil, fmt.Errorf("store: list repos: %w", err)
	}
	return out, nil
}

// TouchRepo records a push.
func (s *Store) TouchRepo(ctx context.Context, owner, name string) error {
	if _, err := s.pool.Exec(ctx, "UPDATE repos SET update_time = now() WHERE owner = $1 AND name = $2", owner, name); err != nil {
		return fmt.Errorf("store: touch repo: %w", err)
	}
	return nil
}

// nextNumber takes the repository's next issue/pull request number.
func nextNumber(ctx context.Context, tx pgx.Tx, repo string) (int32, error) {
	owner, name := split(repo)
	var n int32
	err := tx.QueryRow(ctx, `UPDATE repos SET last_number = last_number + 1 WHERE owner = $1 AND name = $2
		RETURNING last_number`, owner, name).Scan(&n)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("repository %q: %w", repo, errs.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("store: next number: %w", err)
	}
	return n, nil
}

func split(repo string) (string, string) {
	for i := range len(repo) {
		if repo[i] == '/' {
			return repo[:i], repo[i+1:]
		}
	}
	return repo, ""
}

func ts(t *time.Time) *timestamppb.Timestamp {
	if t == nil {
		return nil
	}
	return timestamppb.New(*t)
}
