package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	"github.com/thefold/thefold/pkg/validate"
)

// live is the SQL condition of a sandbox that has not failed or been destroyed.
const live = "status IN ('creating', 'ready')"

// MarkReady records that the backend made the sandbox: its handle (a container id, or
// empty), base commit and language (detected from the workspace when none was asked for).
func (s *Store) MarkReady(ctx context.Context, id, handle, baseCommit, language string) error {
	return s.exec(ctx, "mark ready", id, `UPDATE sandboxes SET status = 'ready', handle = $2, base_commit = $3, language = $4
		WHERE id = $1 AND status = 'creating'`, id, handle, baseCommit, language)
}

// MarkFailed records why the sandbox could not be made or broke; it is no longer live.
func (s *Store) MarkFailed(ctx context.Context, id, reason string) error {
	return s.exec(ctx, "mark failed", id, `UPDATE sandboxes SET status = 'failed', status_reason = $2
		WHERE id = $1 AND `+live, id, validate.Truncate(reason, 2000))
}

func (s *Store) exec(ctx context.Context, op, id, sql string, args ...any) error {
	tag, err := s.pool.Exec(ctx, sql, args...)
	if err != nil {
		return fmt.Errorf("store: %s: %w", op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("sandbox %q is not live: %w", id, errs.ErrFailedPrecondition)
	}
	return nil
}

// Use returns owner's ready sandbox for an operation and moves its expiry to now + ttl
// (sandboxes expire when idle). A sandbox that is not ready is ErrFailedPrecondition.
func (s *Store) Use(ctx context.Context, owner, id string) (*Sandbox, error) {
	now := s.now()
	// Every file call comes here: its last-used time is written without waiting for the
	// WAL flush (a crash of the database may lose the last few, which only shortens a
	// sandbox's life by that much).
	var sb *Sandbox
	err := db.LazyQueryRow(ctx, s.pool, func(r pgx.Row) (err error) { sb, err = scanSandbox(r); return err },
		`UPDATE sandboxes SET last_used_time = $3::timestamptz,
		expire_time = $3::timestamptz + make_interval(secs => ttl_seconds)
		WHERE id = $1 AND owner_id = $2 RETURNING `+sandboxColumns, id, owner, now)
	if errors.Is(err, pgx.ErrNoRows) || isUUIDSyntax(err) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("store: use sandbox: %w", err)
	}
	if sb.Status != sandboxv1.SandboxStatus_SANDBOX_STATUS_READY {
		return nil, fmt.Errorf("sandbox %s is %s, not ready: %w", id, statusNames[sb.Status], errs.ErrFailedPrecondition)
	}
	return sb, nil
}

// KeepAlive extends owner's live sandbox to now + ttl (0: its own ttl, which ttl replaces
// otherwise) and pins or unpins it.
func (s *Store) KeepAlive(ctx context.Context, owner, id string, ttl time.Duration, pin bool) (*Sandbox, error) {
	now := s.now()
	secs := int64(ttl / time.Second)
	sb, err := scanSandbox(s.pool.QueryRow(ctx, `UPDATE sandboxes SET pinned = $4, last_used_time = $3::timestamptz,
		ttl_seconds = CASE WHEN $5::bigint > 0 THEN $5::bigint ELSE ttl_seconds END,
		expire_time = $3::timestamptz + make_interval(secs => CASE WHEN $5::bigint > 0 THEN $5::bigint ELSE ttl_seconds END)
		WHERE id = $1 AND owner_id = $2 AND `+live+` RETURNING `+sandboxColumns, id, owner, now, pin, secs))
	if errors.Is(err, pgx.ErrNoRows) || isUUIDSyntax(err) {
		if _, gerr := s.Get(ctx, owner, id); gerr != nil {
			return nil, gerr
		}
		return nil, fmt.Errorf("sandbox %s is not live: %w", id, errs.ErrFailedPrecondition)
	}
	if err != nil {
		return nil, fmt.Errorf("store: keep alive: %w", err)
	}
	return sb, nil
}

// Destroyed records that the backend freed the sandbox. Destroying twice is not an error.
func (s *Store) Destroyed(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, `UPDATE sandboxes SET status = 'destroyed', destroy_time = coalesce(destroy_time, $2)
		WHERE id = $1`, id, s.now())
	if err != nil {
		return fmt.Errorf("store: destroyed: %w", err)
	}
	return nil
}

// Expired returns up to limit live, unpinned sandboxes (of any owner) whose expiry has
// passed, oldest first, for the reaper.
func (s *Store) Expired(ctx context.Context, limit int) ([]*Sandbox, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+sandboxColumns+` FROM sandboxes
		WHERE `+live+` AND NOT pinned AND expire_time <= $1 ORDER BY expire_time LIMIT $2`, s.now(), limit)
	if err != nil {
		return nil, fmt.Errorf("store: expired: %w", err)
	}
	return collect(rows)
}

func collect(rows pgx.Rows) ([]*Sandbox, error) {
	defer rows.Close()
	var out []*Sandbox
	for rows.Next() {
		sb, err := scanSandbox(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, sb)
	}
	return out, rows.Err()
}

// Filter selects sandboxes of one owner.
type Filter struct {
	Owner    string
	Repo     string
	JobID    string
	Statuses []sandboxv1.SandboxStatus
	PageSize int
	// After is the last sandbox of the previous page (newest first).
	After *Cursor
}

// Cursor is a position in the newest-first order.
type Cursor struct {
	CreateTime time.Time
	ID         string
}

// List returns a page of the owner's sandboxes, newest first, and the cursor of the next
// page (nil on the last).
func (s *Store) List(ctx context.Context, f Filter) ([]*Sandbox, *Cursor, error) {
	var c db.Conds
	c.Add("owner_id = $%d", f.Owner)
	if f.Repo != "" {
		c.Add("repo = $%d", f.Repo)
	}
	if f.JobID != "" {
		c.Add("job_id = $%d", f.JobID)
	}
	if len(f.Statuses) > 0 {
		names := make([]string, 0, len(f.Statuses))
		for _, st := range f.Statuses {
			names = append(names, statusNames[st])
		}
		c.Add("status = ANY($%d)", names)
	}
	if f.After != nil {
		c.Add("(create_time, id) < ($%d, $%d::uuid)", f.After.CreateTime, f.After.ID)
	}
	rows, err := s.pool.Query(ctx, "SELECT "+sandboxColumns+" FROM sandboxes"+c.Where()+
		" ORDER BY create_time DESC, id DESC LIMIT "+c.Arg(f.PageSize+1), c.Args...)
	if err != nil {
		return nil, nil, fmt.Errorf("store: list sandboxes: %w", err)
	}
	out, err := collect(rows)
	if err != nil {
		return nil, nil, fmt.Errorf("store: list sandboxes: %w", err)
	}
	if len(out) <= f.PageSize {
		return out, nil, nil
	}
	out = out[:f.PageSize]
	last := out[len(out)-1]
	return out, &Cursor{CreateTime: last.CreateTime.AsTime(), ID: last.Id}, nil
}
