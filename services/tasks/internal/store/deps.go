package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/errs"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

// AddDependency records that owner's task taskID is blocked by owner's task blockerID and
// returns taskID's task. An edge that exists already is a successful no-op; an edge that
// would close a cycle (a task blocking itself included) is errs.ErrFailedPrecondition.
func (s *Store) AddDependency(ctx context.Context, owner, taskID, blockerID string) (*tasksv1.Task, error) {
	var result *tasksv1.Task
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockGraph(ctx, tx, owner); err != nil {
			return err
		}
		t, err := getTask(ctx, tx, owner, taskID, "FOR UPDATE")
		if err != nil {
			return err
		}
		var one int
		err = tx.QueryRow(ctx, "SELECT 1 FROM tasks WHERE id = $1 AND owner_id = $2 FOR KEY SHARE", blockerID, owner).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("blocked_by_id: task %q: %w", blockerID, errs.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("store: lock blocker: %w", err)
		}
		if taskID == blockerID {
			return fmt.Errorf("a task cannot block itself: %w", errs.ErrFailedPrecondition)
		}
		for _, b := range t.BlockedBy {
			if b == blockerID {
				result = t
				return nil
			}
		}
		cycle, err := wouldCycle(ctx, tx, taskID, blockerID)
		if err != nil {
			return err
		}
		if cycle {
			return fmt.Errorf("task %s already depends on task %s, directly or through others: the dependency would form a cycle: %w",
				blockerID, taskID, errs.ErrFailedPrecondition)
		}
		if _, err := tx.Exec(ctx, "INSERT INTO task_dependencies (task_id, blocked_by_id) VALUES ($1, $2)", taskID, blockerID); err != nil {
			return dbError("store: insert dependency", err)
		}
		result, err = touch(ctx, tx, owner, taskID)
		if err != nil {
			return err
		}
		return appendEvent(ctx, tx, change{typ: evUpdated, task: result, changedFields: []string{"blocked_by"}})
	})
	if err != nil {
		return nil, err
	}
	return result, nil
}

// RemoveDependency removes the edge "taskID is blocked by blockerID" from owner's graph
// and returns taskID's task. A missing edge is errs.ErrNotFound.
func (s *Store) RemoveDependency(ctx context.Context, owner, taskID, blockerID string) (*tasksv1.Task, error) {
	var result *tasksv1.Task
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockGraph(ctx, tx, owner); err != nil {
			return err
		}
		if _, err := getTask(ctx, tx, owner, taskID, "FOR UPDATE"); err != nil {
			return err
		}
		// Edges only join tasks of one owner, so owning taskID covers the edge.
		tag, err := tx.Exec(ctx, "DELETE FROM task_dependencies WHERE task_id = $1 AND blocked_by_id = $2", taskID, blockerID)
		if err != nil {
			return fmt.Errorf("store: delete dependency: %w", err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("task %q is not blocked by task %q: %w", taskID, blockerID, errs.ErrNotFound)
		}
		if result, err = touch(ctx, tx, owner, taskID); err != nil {
			return err
		}
		return appendEvent(ctx, tx, change{typ: evUpdated, task: result, changedFields: []string{"blocked_by"}})
	})
	if err != nil {
		return nil, err
	}
	return result, nil
}

// touch records that a task changed (its edges) and returns it.
func touch(ctx context.Context, tx pgx.Tx, owner, id string) (*tasksv1.Task, error) {
	if _, err := tx.Exec(ctx, "UPDATE tasks SET update_time = now() WHERE id = $1 AND owner_id = $2", id, owner); err != nil {
		return nil, fmt.Errorf("store: touch task: %w", err)
	}
	return getTask(ctx, tx, owner, id, "")
}

// wouldCycle reports whether the edge "taskID is blocked by blockerID" would close a cycle:
// whether taskID is already reachable from blockerID along blocked-by edges. UNION (not
// UNION ALL) visits each task once, so the walk is linear in the graph even where paths fan
// out and join again.
func wouldCycle(ctx context.Context, tx pgx.Tx, taskID, blockerID string) (bool, error) {
	var cycle bool
	err := tx.QueryRow(ctx, `WITH RECURSIVE reach(id) AS (
			SELECT $1::uuid
			UNION
			SELECT d.blocked_by_id FROM reach r JOIN task_dependencies d ON d.task_id = r.id
		)
		SELECT EXISTS (SELECT 1 FROM reach WHERE id = $2::uuid)`, blockerID, taskID).Scan(&cycle)
	if err != nil {
		return false, fmt.Errorf("store: cycle check: %w", err)
	}
	return cycle, nil
}
