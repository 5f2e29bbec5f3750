// Package store is the tasks service's persistence: hand-written SQL over pgx, every query
// scoped by the owner, every change written together with its event (pkg/events) in one
// transaction, so a watcher sees exactly the changes that committed.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/events"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/errs"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// Store reads and writes the tasks schema. Its methods take the owner explicitly: a task
// of another owner is indistinguishable from a missing one (errs.ErrNotFound).
type Store struct {
	pool *pgxpool.Pool
	hub  *events.Hub
	// beforeCommit, when set, runs inside every mutation after its event is appended and
	// before commit; tests use it to fail a transaction at its last moment.
	beforeCommit func(context.Context) error
}

// New returns a Store on pool, which must use the tasks schema's search_path (db.Open).
// Watchers are woken through hub, which the caller runs (hub.Run).
func New(pool *pgxpool.Pool, hub *events.Hub) *Store { return &Store{pool: pool, hub: hub} }

// inTx runs fn in a transaction (db.InTx), then the beforeCommit hook, and commits; a
// commit refused for a constraint becomes the sentinel dbError gives it.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	committing := false
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		if s.beforeCommit != nil {
			if err := s.beforeCommit(ctx); err != nil {
				return err
			}
		}
		committing = true
		return nil
	})
	if err != nil && committing {
		return dbError("store: commit", err)
	}
	return err
}

// lockGraph serializes, per owner, the transactions that read or change the blocked-by
// graph. Two AddDependency calls that would each be acyclic alone but form a cycle together
// cannot both pass the cycle check: the second waits here and then sees the first's edge
// (READ COMMITTED takes a new snapshot per statement). It also gives graph mutations and
// deletes one lock order, so they cannot deadlock on each other's task rows.
func lockGraph(ctx context.Context, tx pgx.Tx, owner string) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended('thefold/tasks/graph/' || $1, 0))", owner); err != nil {
		return fmt.Errorf("store: lock graph: %w", err)
	}
	return nil
}

// taskColumns selects a task as scanTask reads it; the table must be aliased t.
const taskColumns = `t.id::text, t.owner_id, t.repo, t.title, t.description, t.status, t.source,
	t.priority, t.labels, coalesce(t.parent_id::text, ''), t.external_id, t.external_url, t.job_id,
	t.pull_request_repo, t.pull_request_number, t.pull_request_url, t.complexity, t.estimated_tokens, t.planned_order, t.status_reason,
	t.create_time, t.update_time, t.complete_time, t.project_id,
	ARRAY(SELECT d.blocked_by_id::text FROM task_dependencies d WHERE d.task_id = t.id
		ORDER BY d.create_time, d.blocked_by_id)`

func scanTask(row pgx.Row) (*tasksv1.Task, error) {
	var (
		t                      tasksv1.Task
		status, source         string
		priority               int16
		createTime, updateTime time.Time
		completeTime           *time.Time
		prRepo, prURL          string
		prNumber               int32
	)
	err := row.Scan(&t.Id, &t.OwnerId, &t.Repo, &t.Title, &t.Description, &status, &source,
		&priority, &t.Labels, &t.ParentId, &t.ExternalId, &t.ExternalUrl, &t.JobId,
		&prRepo, &prNumber, &prURL, &t.Complexity, &t.EstimatedTokens, &t.PlannedOrder, &t.StatusReason,
		&createTime, &updateTime, &completeTime, &t.ProjectId, &t.BlockedBy)
	if err != nil {
		return nil, err
	}
	t.Status = parseStatus(status)
	t.Source = parseSource(source)
	t.Priority = typev1.Priority(priority)
	t.PullRequest = pullRequest(prRepo, prNumber, prURL)
	t.CreateTime = timestamppb.New(createTime)
	t.UpdateTime = timestamppb.New(updateTime)
	if completeTime != nil {
		t.CompleteTime = timestamppb.New(*completeTime)
	}
	if len(t.Labels) == 0 {
		t.Labels = nil
	}
	if len(t.BlockedBy) == 0 {
		t.BlockedBy = nil
	}
	return &t, nil
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// getTask reads one of owner's tasks; lock is "" or a locking clause such as "FOR UPDATE".
func getTask(ctx context.Context, q querier, owner, id, lock string) (*tasksv1.Task, error) {
	t, err := scanTask(q.QueryRow(ctx, "SELECT "+taskColumns+" FROM tasks t WHERE t.id = $1 AND t.owner_id = $2 "+lock, id, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get task %s: %w", id, err)
	}
	return t, nil
}

func notFound(id string) error { return fmt.Errorf("task %q: %w", id, errs.ErrNotFound) }

// dbError turns constraint violations the service cannot rule out up front into
// sentinels whose text is fit for a client; any other error is wrapped with op for the log.
func dbError(op string, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return fmt.Errorf("%s: %w", op, err)
	}
	switch {
	case db.IsUniqueViolation(err, "tasks_external_id_idx"):
		return fmt.Errorf("external_id: a task with this external id and source exists already: %w", errs.ErrAlreadyExists)
	case db.IsUniqueViolation(err):
		return fmt.Errorf("duplicate: %w", errs.ErrAlreadyExists)
	case pgErr.Code == "23503": // foreign_key_violation: a referenced task was deleted meanwhile
		return fmt.Errorf("referenced task: %w", errs.ErrNotFound)
	}
	return fmt.Errorf("%s: %w", op, err)
}
