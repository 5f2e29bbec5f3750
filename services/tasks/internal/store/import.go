package store

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

// ImportItem is one issue to import as a task.
type ImportItem struct {
	// Task holds repo, title, description, labels, source, external id and url; the
	// external id ("github:owner/name#12") is the natural key of the import.
	Task *tasksv1.Task
	// BlockedBy are the external ids of the issues that block this one. Those that are
	// neither in the import nor imported before (a closed issue, say) are left out.
	BlockedBy []string
	// Existing only updates the task the issue became and makes none: an issue followed
	// after it closed, or one without the import's labels.
	Existing bool
	// Closed says the issue is closed: the task it became follows (ClosedReason).
	Closed bool
}

// ClosedReason is the status reason of a task cancelled because its issue closed; such a
// task goes back to the backlog when the issue reopens (a task a person cancelled stays).
const ClosedReason = "the issue was closed"

// ImportResult says what an import did.
type ImportResult struct {
	Created, Updated []*tasksv1.Task
	// Skipped counts the items whose task was already up to date.
	Skipped int
}

// Import creates or updates one task per item in one transaction, keyed by (owner, source,
// external id), so a second import updates rather than duplicates. Title, description,
// labels and url follow the source; status, priority and everything the agent set stay.
// Blocked-by edges between imported tasks follow the source too: edges to other tasks of the
// same source are added and removed to match, edges a person added to other tasks stay. An
// edge that would close a cycle is left out.
func (s *Store) Import(ctx context.Context, owner string, items []ImportItem) (*ImportResult, error) {
	res := &ImportResult{}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockGraph(ctx, tx, owner); err != nil {
			return err
		}
		ids := map[string]string{}
		state := make([]string, len(items))   // "created", "updated" or ""
		moved := map[int]tasksv1.TaskStatus{} // item → the status its task had before it followed its issue
		for i, it := range items {
			t := it.Task
			var (
				id, title, desc, url, cur, reason string
				labels                            []string
			)
			err := tx.QueryRow(ctx, `SELECT id::text, title, description, labels, external_url, status, status_reason FROM tasks
				WHERE owner_id = $1 AND source = $2 AND external_id = $3 FOR UPDATE`,
				owner, SourceName(t.Source), t.ExternalId).Scan(&id, &title, &desc, &labels, &url, &cur, &reason)
			if err == nil {
				from := parseStatus(cur)
				if to, ok := followIssue(from, reason, it.Closed); ok {
					if err := moveImported(ctx, tx, id, to); err != nil {
						return err
					}
					moved[i] = from
				}
			}
			switch {
			case errors.Is(err, pgx.ErrNoRows) && it.Existing:
				continue
			case errors.Is(err, pgx.ErrNoRows):
				if id, err = insertTask(ctx, tx, owner, t); err != nil {
					return err
				}
				state[i] = "created"
			case err != nil:
				return fmt.Errorf("store: find imported task: %w", err)
			case title != t.Title || desc != t.Description || url != t.ExternalUrl || !slices.Equal(labels, nonNil(t.Labels)):
				if _, err := tx.Exec(ctx, `UPDATE tasks SET title = $3, description = $4, labels = $5, external_url = $6,
					update_time = now() WHERE id = $1 AND owner_id = $2`, id, owner, t.Title, t.Description, nonNil(t.Labels), t.ExternalUrl); err != nil {
					return dbError("store: update imported task", err)
				}
				state[i] = "updated"
			}
			ids[t.ExternalId] = id
		}
		for i, it := range items {
			if _, ok := ids[it.Task.ExternalId]; !ok {
				continue // Existing, and no task
			}
			changed, err := syncImportedEdges(ctx, tx, owner, it, ids)
			if err != nil {
				return err
			}
			if _, ok := moved[i]; (changed || ok) && state[i] == "" {
				state[i] = "updated"
			}
		}
		// Read everything before the first append (which takes the schema's event lock).
		var evs []change
		for i, it := range items {
			if state[i] == "" {
				res.Skipped++
				continue
			}
			t, err := getTask(ctx, tx, owner, ids[it.Task.ExternalId], "")
			if err != nil {
				return err
			}
			if state[i] == "created" {
				res.Created = append(res.Created, t)
				evs = append(evs, change{typ: evCreated, task: t})
			} else {
				res.Updated = append(res.Updated, t)
				evs = append(evs, change{typ: evUpdated, task: t, changedFields: []string{"title", "description", "labels", "external_url", "blocked_by"}})
			}
			if from, ok := moved[i]; ok {
				evs = append(evs, change{typ: evStatusChanged, task: t, previousStatus: from})
			}
		}
		for _, c := range evs {
			if err := appendEvent(ctx, tx, c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// syncImportedEdges makes the task's edges to tasks of the same source match the item's
// blockers, and reports whether anything changed.
func syncImportedEdges(ctx context.Context, tx pgx.Tx, owner string, it ImportItem, ids map[string]string) (bool, error) {
	id := ids[it.Task.ExternalId]
	want := map[string]bool{}
	for _, ext := range it.BlockedBy {
		b, ok := ids[ext]
		if !ok {
			err := tx.QueryRow(ctx, "SELECT id::text FROM tasks WHERE owner_id = $1 AND source = $2 AND external_id = $3",
				owner, SourceName(it.Task.Source), ext).Scan(&b)
			if errors.Is(err, pgx.ErrNoRows) {
				continue
			}
			if err != nil {
				return false, fmt.Errorf("store: find blocker: %w", err)
			}
		}
		if b != id {
			want[b] = true
		}
	}
	rows, err := tx.Query(ctx, `SELECT d.blocked_by_id::text FROM task_dependencies d JOIN tasks b ON b.id = d.blocked_by_id
		WHERE d.task_id = $1 AND b.source = $2`, id, SourceName(it.Task.Source))
	if err != nil {
		return false, fmt.Errorf("store: imported edges: %w", err)
	}
	have, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return false, fmt.Errorf("store: imported edges: %w", err)
	}
	changed := false
	for _, b := range have {
		if !want[b] {
			if _, err := tx.Exec(ctx, "DELETE FROM task_dependencies WHERE task_id = $1 AND blocked_by_id = $2", id, b); err != nil {
				return false, fmt.Errorf("store: delete dependency: %w", err)
			}
			changed = true
		}
	}
	for _, b := range slices.Sorted(func(yield func(string) bool) {
		for k := range want {
			if !yield(k) {
				return
			}
		}
	}) {
		if slices.Contains(have, b) {
			continue
		}
		cycle, err := wouldCycle(ctx, tx, id, b)
		if err != nil {
			return false, err
		}
		if cycle {
			continue
		}
		if _, err := tx.Exec(ctx, "INSERT INTO task_dependencies (task_id, blocked_by_id) VALUES ($1, $2)", id, b); err != nil {
			return false, dbError("store: insert dependency", err)
		}
		changed = true
	}
	return changed, nil
}

// followIssue is the status an imported task moves to as its issue is closed or open, and
// false when it stays: a closed issue's task in review is done (its pull request closed the
// issue, or a person did the rest), one not started is cancelled; a task in progress stays
// with its job. A reopened issue's task that was cancelled because the issue closed goes back
// to the backlog.
func followIssue(from tasksv1.TaskStatus, reason string, isClosed bool) (tasksv1.TaskStatus, bool) {
	switch {
	case isClosed && from == inReview:
		return done, true
	case isClosed && (from == backlog || from == planned || from == blocked):
		return cancelled, true
	case !isClosed && from == cancelled && reason == ClosedReason:
		return backlog, true
	}
	return 0, false
}

// moveImported sets an imported task's status as its issue says (followIssue).
func moveImported(ctx context.Context, tx pgx.Tx, id string, to tasksv1.TaskStatus) error {
	reason := ""
	if to == cancelled {
		reason = ClosedReason
	}
	if _, err := tx.Exec(ctx, `UPDATE tasks SET status = $2, status_reason = $3, update_time = now(),
			complete_time = CASE WHEN $2 = 'done' THEN now() END
		WHERE id = $1`, id, StatusName(to), reason); err != nil {
		return fmt.Errorf("store: follow the issue's state: %w", err)
	}
	return nil
}
