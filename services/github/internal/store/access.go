package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
)

// Namespace is an owner segment held by a person (kind "user") or an organisation ("org").
type Namespace struct {
	Name, Kind, UserID string
	CreateTime         time.Time
	Members            []Member // org only, by user id
}

// Member is one member of an organisation namespace, role "member" or "admin".
type Member struct{ UserID, Role string }

// RepoRole reads a repository and the user's role on it (0 none … 3 admin, see the
// repo_role function); unknown is errs.ErrNotFound.
func (s *Store) RepoRole(ctx context.Context, owner, name, user string) (*Repo, int, error) {
	r := &Repo{}
	var role int
	err := s.pool.QueryRow(ctx, "SELECT "+repoColumns+`, repo_role(owner, name, private, created_by, $3)
		FROM repos WHERE owner = $1 AND name = $2`, owner, name, user).
		Scan(&r.Owner, &r.Name, &r.Description, &r.Private, &r.DefaultBranch, &r.CreatedBy, &r.CreateTime, &r.UpdateTime, &role)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, 0, fmt.Errorf("repository %q: %w", owner+"/"+name, errs.ErrNotFound)
	}
	if err != nil {
		return nil, 0, fmt.Errorf("store: repo role: %w", err)
	}
	return r, role, nil
}

// CreateNamespace claims a namespace; an organisation's creator becomes its admin. A taken
// name is errs.ErrAlreadyExists; a person's second user namespace errs.ErrFailedPrecondition.
func (s *Store) CreateNamespace(ctx context.Context, name, kind, user string) (*Namespace, error) {
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "INSERT INTO namespaces (name, kind, user_id) VALUES ($1, $2, $3)", name, kind, user); err != nil {
			if db.IsUniqueViolation(err, "namespaces_user_idx") {
				return fmt.Errorf("you already hold a user namespace; a person has one: %w", errs.ErrFailedPrecondition)
			}
			if db.IsUniqueViolation(err) {
				return fmt.Errorf("namespace %q: %w", name, errs.ErrAlreadyExists)
			}
			return fmt.Errorf("store: create namespace: %w", err)
		}
		if kind == "org" {
			if _, err := tx.Exec(ctx, "INSERT INTO namespace_members (namespace, user_id, role) VALUES ($1, $2, 'admin')", name, user); err != nil {
				return fmt.Errorf("store: create namespace: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return s.GetNamespace(ctx, name)
}

// GetNamespace reads a namespace with its members; unknown is errs.ErrNotFound.
func (s *Store) GetNamespace(ctx context.Context, name string) (*Namespace, error) {
	n := &Namespace{}
	err := s.pool.QueryRow(ctx, "SELECT name, kind, user_id, create_time FROM namespaces WHERE name = $1", name).
		Scan(&n.Name, &n.Kind, &n.UserID, &n.CreateTime)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("namespace %q: %w", name, errs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get namespace: %w", err)
	}
	rows, err := s.pool.Query(ctx, "SELECT user_id, role FROM namespace_members WHERE namespace = $1 ORDER BY user_id", name)
	if err != nil {
		return nil, fmt.Errorf("store: namespace members: %w", err)
	}
	n.Members, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (Member, error) {
		var m Member
		return m, r.Scan(&m.UserID, &m.Role)
	})
	if err != nil {
		return nil, fmt.Errorf("store: namespace members: %w", err)
	}
	return n, nil
}

// setRole gives the row of table named by its key columns the role, or deletes it ("").
func (s *Store) setRole(ctx context.Context, table string, keyCols []string, keys []any, role string) error {
	var c db.Conds
	var err error
	if role == "" {
		for i, col := range keyCols {
			c.Add(col+" = $%d", keys[i]) // col is one of the callers' literal column names
		}
		_, err = s.pool.Exec(ctx, "DELETE FROM "+table+c.Where(), c.Args...)
	} else {
		marks := make([]string, 0, len(keys)+1)
		for _, k := range keys {
			marks = append(marks, c.Arg(k))
		}
		marks = append(marks, c.Arg(role))
		cols := strings.Join(keyCols, ", ")
		_, err = s.pool.Exec(ctx, "INSERT INTO "+table+" ("+cols+", role) VALUES ("+strings.Join(marks, ", ")+")"+
			" ON CONFLICT ("+cols+") DO UPDATE SET role = EXCLUDED.role", c.Args...)
	}
	if err != nil {
		return fmt.Errorf("store: set role in %s: %w", table, err)
	}
	return nil
}

// SetNamespaceMember sets a member's role ("member", "admin"), or removes them ("").
func (s *Store) SetNamespaceMember(ctx context.Context, name, user, role string) error {
	return s.setRole(ctx, "namespace_members", []string{"namespace", "user_id"}, []any{name, user}, role)
}

// SetCollaborator sets a person's role on a repository ("read", "write", "admin"), or
// removes it ("").
func (s *Store) SetCollaborator(ctx context.Context, owner, name, user, role string) error {
	return s.setRole(ctx, "collaborators", []string{"owner", "name", "user_id"}, []any{owner, name, user}, role)
}

// Collaborators lists a repository's collaborators by user id, after the user id after
// (exclusive), at most limit.
func (s *Store) Collaborators(ctx context.Context, owner, name, after string, limit int) ([]Member, error) {
	rows, err := s.pool.Query(ctx, `SELECT user_id, role FROM collaborators WHERE owner = $1 AND name = $2 AND user_id > $3
		ORDER BY user_id LIMIT $4`, owner, name, after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: collaborators: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Member, error) {
		var m Member
		return m, r.Scan(&m.UserID, &m.Role)
	})
	if err != nil {
		return nil, fmt.Errorf("store: collaborators: %w", err)
	}
	return out, nil
}

// Credential is a person's stored GitHub token, encrypted.
type Credential struct {
	UserID     string
	Sealed     []byte
	Hint       string
	CreateTime time.Time
}

// PutCredential stores (or replaces) a person's encrypted GitHub token.
func (s *Store) PutCredential(ctx context.Context, c Credential) (*Credential, error) {
	out := &Credential{}
	err := s.pool.QueryRow(ctx, `INSERT INTO github_credentials (user_id, token_enc, hint) VALUES ($1, $2, $3)
		ON CONFLICT (user_id) DO UPDATE SET token_enc = EXCLUDED.token_enc, hint = EXCLUDED.hint, create_time = now()
		RETURNING user_id, token_enc, hint, create_time`, c.UserID, c.Sealed, c.Hint).
		Scan(&out.UserID, &out.Sealed, &out.Hint, &out.CreateTime)
	if err != nil {
		return nil, fmt.Errorf("store: put credential: %w", err)
	}
	return out, nil
}

// GetCredential reads a person's GitHub token; none is errs.ErrNotFound.
func (s *Store) GetCredential(ctx context.Context, user string) (*Credential, error) {
	out := &Credential{}
	err := s.pool.QueryRow(ctx, "SELECT user_id, token_enc, hint, create_time FROM github_credentials WHERE user_id = $1", user).
		Scan(&out.UserID, &out.Sealed, &out.Hint, &out.CreateTime)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("github credential: %w", errs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get credential: %w", err)
	}
	return out, nil
}

// DeleteCredential forgets a person's GitHub token; it reports whether there was one.
func (s *Store) DeleteCredential(ctx context.Context, user string) (bool, error) {
	tag, err := s.pool.Exec(ctx, "DELETE FROM github_credentials WHERE user_id = $1", user)
	if err != nil {
		return false, fmt.Errorf("store: delete credential: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// Grant lets a person reach GitHub repositories through the server's token.
type Grant struct{ UserID, Repo, Role string }

// SetGrant sets a grant ("read", "write", "admin"), or removes it ("").
func (s *Store) SetGrant(ctx context.Context, user, repo, role string) error {
	return s.setRole(ctx, "github_grants", []string{"user_id", "repo"}, []any{user, repo}, role)
}

// Grants lists a person's grants by repo, after the repo after (exclusive), at most limit.
func (s *Store) Grants(ctx context.Context, user, after string, limit int) ([]Grant, error) {
	rows, err := s.pool.Query(ctx, `SELECT user_id, repo, role FROM github_grants WHERE user_id = $1 AND repo > $2
		ORDER BY repo LIMIT $3`, user, after, limit)
	if err != nil {
		return nil, fmt.Errorf("store: grants: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Grant, error) {
		var g Grant
		return g, r.Scan(&g.UserID, &g.Repo, &g.Role)
	})
	if err != nil {
		return nil, fmt.Errorf("store: grants: %w", err)
	}
	return out, nil
}

// GrantRole is the role a person's grants give on "owner/name" (exact or "owner/*"):
// the greater of the two, "" when none.
func (s *Store) GrantRole(ctx context.Context, user, repo string) (string, error) {
	owner, _, _ := strings.Cut(repo, "/")
	var role string
	err := s.pool.QueryRow(ctx, `SELECT role FROM github_grants WHERE user_id = $1 AND repo IN ($2, $3)
		ORDER BY CASE role WHEN 'admin' THEN 3 WHEN 'write' THEN 2 ELSE 1 END DESC LIMIT 1`, user, repo, owner+"/*").Scan(&role)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("store: grant role: %w", err)
	}
	return role, nil
}
