package store

import (
	"context"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/errs"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

type status = tasksv1.TaskStatus

const evStatusChanged = tasksv1.TaskEventType_TASK_EVENT_TYPE_STATUS_CHANGED

const (
	backlog    = tasksv1.TaskStatus_TASK_STATUS_BACKLOG
	planned    = tasksv1.TaskStatus_TASK_STATUS_PLANNED
	inProgress = tasksv1.TaskStatus_TASK_STATUS_IN_PROGRESS
	inReview   = tasksv1.TaskStatus_TASK_STATUS_IN_REVIEW
	done       = tasksv1.TaskStatus_TASK_STATUS_DONE
	blocked    = tasksv1.TaskStatus_TASK_STATUS_BLOCKED
	cancelled  = tasksv1.TaskStatus_TASK_STATUS_CANCELLED
)

// transitions lists where each status may go. Closed tasks only reopen into the backlog,
// so a finished task is never silently picked up again.
var transitions = map[status][]status{
	backlog:    {planned, inProgress, blocked, cancelled},
	planned:    {backlog, inProgress, blocked, cancelled},
	inProgress: {inReview, done, blocked, backlog, cancelled},
	inReview:   {done, inProgress, blocked, cancelled},
	blocked:    {backlog, planned, inProgress, cancelled},
	done:       {backlog},
	cancelled:  {backlog},
}

// CheckTransition returns nil if a task may move from one status to the other (staying is
// always allowed), else an errs.ErrFailedPrecondition naming both.
func CheckTransition(from, to status) error {
	if from == to {
		return nil
	}
	for _, s := range transitions[from] {
		if s == to {
			return nil
		}
	}
	return fmt.Errorf("cannot move task from %s to %s: %w", StatusName(from), StatusName(to), errs.ErrFailedPrecondition)
}

// SetStatus moves owner's task id to status to, recording reason for blocked and
// cancelled. A move to the status the task has is a successful no-op without an event.
// It fails with errs.ErrFailedPrecondition when expected is set and differs from the
// current status, when the transition is illegal, or when the task would start
// (in_progress) while a blocker is not done.
func (s *Store) SetStatus(ctx context.Context, owner, id string, to tasksv1.TaskStatus, reason string, expected tasksv1.TaskStatus) (*tasksv1.Task, error) {
	var result *tasksv1.Task
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if to == inProgress {
			// Reads the task's blockers: same lock order as Delete and AddDependency.
			if err := lockGraph(ctx, tx, owner); err != nil {
				return err
			}
		}
		cur, err := getTask(ctx, tx, owner, id, "FOR UPDATE")
		if err != nil {
			return err
		}
		if expected != tasksv1.TaskStatus_TASK_STATUS_UNSPECIFIED && cur.Status != expected {
			return fmt.Errorf("task is %s, not the expected %s: %w", StatusName(cur.Status), StatusName(expected), errs.ErrFailedPrecondition)
		}
		if cur.Status == to {
			result = cur
			return nil
		}
		if err := CheckTransition(cur.Status, to); err != nil {
			return err
		}
		if to == inProgress {
			if err := checkBlockersDone(ctx, tx, id); err != nil {
				return err
			}
		}
		if to != blocked && to != cancelled {
			reason = ""
		}
		_, err = tx.Exec(ctx, `UPDATE tasks SET status = $2, status_reason = $3, update_time = now(),
				complete_time = CASE WHEN $2 = 'done' THEN now() END
			WHERE id = $1`, id, StatusName(to), reason)
		if err != nil {
			return fmt.Errorf("store: set status: %w", err)
		}
		if result, err = getTask(ctx, tx, owner, id, ""); err != nil {
			return err
		}
		return appendEvent(ctx, tx, change{typ: evStatusChanged, task: result, previousStatus: cur.Status})
	})
	if err != nil {
		return nil, err
	}
	return result, nil
}

// checkBlockersDone fails naming every blocker of id that is not done. Within an agent
// project a blocker of the same project is also satisfied when it is in review (its work is
// validated and waits for the project's one review, in the sandbox its dependents build in)
// or cancelled (skipped in the project: its dependents go on without its work). The
// blockers stay locked (FOR SHARE) until commit, so none can be reopened under the task
// that starts.
func checkBlockersDone(ctx context.Context, tx pgx.Tx, id string) error {
	rows, err := tx.Query(ctx, `SELECT b.id::text, b.status, b.project_id <> '' AND b.project_id = t.project_id FROM task_dependencies d
		JOIN tasks b ON b.id = d.blocked_by_id
		JOIN tasks t ON t.id = d.task_id
		WHERE d.task_id = $1 ORDER BY b.id FOR SHARE OF b`, id)
	if err != nil {
		return fmt.Errorf("store: read blockers: %w", err)
	}
	type blocker struct {
		ID, Status  string
		SameProject bool
	}
	all, err := pgx.CollectRows(rows, pgx.RowToStructByPos[blocker])
	if err != nil {
		return fmt.Errorf("store: read blockers: %w", err)
	}
	var open []string
	for _, b := range all {
		switch {
		case b.Status == StatusName(done):
		case b.SameProject && (b.Status == StatusName(tasksv1.TaskStatus_TASK_STATUS_IN_REVIEW) || b.Status == StatusName(cancelled)):
		default:
			open = append(open, fmt.Sprintf("%s (%s)", b.ID, b.Status))
		}
	}
	if len(open) > 0 {
		return fmt.Errorf("cannot move task to in_progress: blocked by %s, not done: %w", strings.Join(open, ", "), errs.ErrFailedPrecondition)
	}
	return nil
}
