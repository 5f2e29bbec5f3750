package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/errs"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

// openStatuses are the statuses PlanTaskOrder orders: work that has not started. A blocked
// task waits for a person, but it still needs a place in the order for when it is unblocked.
var openStatuses = []string{StatusName(backlog), StatusName(planned), StatusName(blocked)}

// OpenTasks returns at most limit of owner's open tasks of repo (backlog, planned or
// blocked), oldest first, each with its blocked_by. The order is deterministic, so the same
// tasks make the same ordering request.
func (s *Store) OpenTasks(ctx context.Context, owner, repo string, limit int) ([]*tasksv1.Task, error) {
	if limit <= 0 {
		return nil, errors.New("store: open tasks: limit must be positive")
	}
	rows, err := s.pool.Query(ctx, "SELECT "+taskColumns+` FROM tasks t
		WHERE t.owner_id = $1 AND t.repo = $2 AND t.status = ANY($3::text[])
		ORDER BY t.create_time, t.id LIMIT $4`, owner, repo, openStatuses, limit)
	if err != nil {
		return nil, fmt.Errorf("store: open tasks: %w", err)
	}
	tasks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*tasksv1.Task, error) { return scanTask(r) })
	if err != nil {
		return nil, fmt.Errorf("store: open tasks: %w", err)
	}
	return tasks, nil
}

// OrderItem is one task's place in an order, as the ai service proposed it.
type OrderItem struct {
	TaskID string
	// Complexity (1–10) and EstimatedTokens are the model's estimates, 0 when it gave none.
	Complexity      int32
	EstimatedTokens int64
	Reasoning       string
}

// RecordedOrder returns the answer PlanTaskOrder recorded for req, or nil when req's id has
// not been used. An id used for another request is errs.ErrInvalid.
func (s *Store) RecordedOrder(ctx context.Context, owner string, req *Request) (*tasksv1.PlanTaskOrderResponse, error) {
	return recordedOrder(ctx, s.pool, owner, req)
}

func recordedOrder(ctx context.Context, q querier, owner string, req *Request) (*tasksv1.PlanTaskOrderResponse, error) {
	var (
		method                string
		fingerprint, response []byte
	)
	err := q.QueryRow(ctx, `SELECT method, fingerprint, response FROM create_requests
		WHERE owner_id = $1 AND request_id = $2`, owner, req.ID).Scan(&method, &fingerprint, &response)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store: read request: %w", err)
	}
	if method != req.Method || !bytes.Equal(fingerprint, req.Fingerprint) {
		return nil, fmt.Errorf("request_id: %q was already used for a different request: %w", req.ID, errs.ErrInvalid)
	}
	if response == nil {
		// The claim and the answer commit together, so this is a bug, not a race.
		return nil, fmt.Errorf("store: request %q of %s has no recorded answer", req.ID, method)
	}
	var resp tasksv1.PlanTaskOrderResponse
	if err := proto.Unmarshal(response, &resp); err != nil {
		return nil, fmt.Errorf("store: decode recorded answer of request %q: %w", req.ID, err)
	}
	return &resp, nil
}

// SaveOrder stores items, in execution order, as the planned order of owner's tasks of repo
// in one transaction, and returns the answer as PlanTaskOrder gives it. Positions are 1-based
// among the tasks still there: a task deleted or moved to another repository since it was
// read is left out. Tasks not in items keep their planned order.
//
// The model's complexity is stored only where a task has none (0): the column cannot tell a
// person's rating from an earlier estimate, and a person's must not be overwritten by a bulk
// guess. Its token estimate, when it gives one, replaces the old one: it is only ever an
// estimate, and the newer one was made knowing the current tasks.
//
// Each task whose fields change gets an UPDATED event naming them; an unchanged one gets
// none. Items that put a task before a blocker — a dependency added while the model was
// ordering — are errs.ErrConflict, and nothing is stored.
//
// With a non-nil req, the answer is recorded under it; when a concurrent call with the same
// id committed first, its answer is returned and items are not applied.
func (s *Store) SaveOrder(ctx context.Context, owner, repo string, items []OrderItem, reasoning string, req *Request) (*tasksv1.PlanTaskOrderResponse, error) {
	var resp *tasksv1.PlanTaskOrderResponse
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if req != nil {
			tag, err := tx.Exec(ctx, `INSERT INTO create_requests (owner_id, request_id, method, fingerprint, task_ids)
				VALUES ($1, $2, $3, $4, '{}') ON CONFLICT (owner_id, request_id) DO NOTHING`,
				owner, req.ID, req.Method, req.Fingerprint)
			if err != nil {
				return fmt.Errorf("store: claim request: %w", err)
			}
			if tag.RowsAffected() == 0 {
				// The insert waited for the other transaction on the key; its row is visible now.
				if resp, err = recordedOrder(ctx, tx, owner, req); err == nil && resp == nil {
					err = fmt.Errorf("store: request %q vanished", req.ID)
				}
				return err
			}
		}
		// The graph lock keeps dependencies from changing between the check below and commit.
		if err := lockGraph(ctx, tx, owner); err != nil {
			return err
		}
		before, err := lockOrdered(ctx, tx, owner, repo, items)
		if err != nil {
			return err
		}
		resp = &tasksv1.PlanTaskOrderResponse{Reasoning: reasoning}
		var (
			ids, changedIDs []string
			positions       = map[string]int32{}
			upd             struct {
				ids         []string
				order, cplx []int32
				tokens      []int64
			}
			fields = map[string][]string{}
		)
		for _, it := range items {
			b, ok := before[it.TaskID]
			if !ok {
				continue
			}
			pos := int32(len(ids) + 1)
			ids = append(ids, it.TaskID)
			positions[it.TaskID] = pos
			complexity, tokens := b.Complexity, b.EstimatedTokens
			if complexity == 0 {
				complexity = it.Complexity
			}
			if it.EstimatedTokens > 0 {
				tokens = it.EstimatedTokens
			}
			// Field names sorted, as UpdateTask reports them.
			var f []string
			if complexity != b.Complexity {
				f = append(f, "complexity")
			}
			if tokens != b.EstimatedTokens {
				f = append(f, "estimated_tokens")
			}
			if pos != b.PlannedOrder {
				f = append(f, "planned_order")
			}
			if len(f) > 0 {
				fields[it.TaskID] = f
				changedIDs = append(changedIDs, it.TaskID)
				upd.ids, upd.order, upd.cplx, upd.tokens = append(upd.ids, it.TaskID), append(upd.order, pos), append(upd.cplx, complexity), append(upd.tokens, tokens)
			}
			resp.Tasks = append(resp.Tasks, &tasksv1.PlannedTask{TaskId: it.TaskID, Order: pos, Complexity: complexity, Reasoning: it.Reasoning})
		}
		if err := checkBlockers(ctx, tx, ids, positions); err != nil {
			return err
		}
		if len(upd.ids) > 0 {
			_, err := tx.Exec(ctx, `UPDATE tasks t SET planned_order = u.pos, complexity = u.cplx,
					estimated_tokens = u.tokens, update_time = now()
				FROM unnest($1::uuid[], $2::int[], $3::int[], $4::bigint[]) AS u(id, pos, cplx, tokens)
				WHERE t.id = u.id AND t.owner_id = $5`, upd.ids, upd.order, upd.cplx, upd.tokens, owner)
			if err != nil {
				return dbError("store: store order", err)
			}
		}
		if req != nil {
			b, err := proto.Marshal(resp)
			if err != nil {
				return fmt.Errorf("store: encode answer: %w", err)
			}
			if _, err := tx.Exec(ctx, "UPDATE create_requests SET task_ids = $3::uuid[], response = $4 WHERE owner_id = $1 AND request_id = $2",
				owner, req.ID, nonNil(ids), b); err != nil {
				return fmt.Errorf("store: record request: %w", err)
			}
		}
		// Read everything before the first append: from there on the schema's event lock
		// is held, and every other writer waits for our commit.
		changes := make([]change, 0, len(changedIDs))
		for _, id := range changedIDs {
			t, err := getTask(ctx, tx, owner, id, "")
			if err != nil {
				return err
			}
			changes = append(changes, change{typ: evUpdated, task: t, changedFields: fields[id]})
		}
		for _, c := range changes {
			if err := appendEvent(ctx, tx, c); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return resp, nil
}

// lockOrdered locks the tasks of items that are still owner's and in repo, in id order (one
// lock order for every multi-row locker), and returns them by id.
func lockOrdered(ctx context.Context, tx pgx.Tx, owner, repo string, items []OrderItem) (map[string]*tasksv1.Task, error) {
	ids := make([]string, len(items))
	for i, it := range items {
		ids[i] = it.TaskID
	}
	rows, err := tx.Query(ctx, "SELECT "+taskColumns+` FROM tasks t
		WHERE t.owner_id = $1 AND t.repo = $2 AND t.id = ANY($3::uuid[]) ORDER BY t.id FOR UPDATE`, owner, repo, ids)
	if err != nil {
		return nil, fmt.Errorf("store: lock ordered tasks: %w", err)
	}
	tasks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*tasksv1.Task, error) { return scanTask(r) })
	if err != nil {
		return nil, fmt.Errorf("store: lock ordered tasks: %w", err)
	}
	byID := make(map[string]*tasksv1.Task, len(tasks))
	for _, t := range tasks {
		byID[t.Id] = t
	}
	return byID, nil
}

// checkBlockers fails with errs.ErrConflict when an edge among ids puts a task before one
// that blocks it.
func checkBlockers(ctx context.Context, tx pgx.Tx, ids []string, positions map[string]int32) error {
	if len(ids) < 2 {
		return nil
	}
	rows, err := tx.Query(ctx, `SELECT task_id::text, blocked_by_id::text FROM task_dependencies
		WHERE task_id = ANY($1::uuid[]) AND blocked_by_id = ANY($1::uuid[])`, ids)
	if err != nil {
		return fmt.Errorf("store: order edges: %w", err)
	}
	edges, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Edge])
	if err != nil {
		return fmt.Errorf("store: order edges: %w", err)
	}
	for _, e := range edges {
		if positions[e.BlockedByID] > positions[e.TaskID] {
			return fmt.Errorf("task %s is now blocked by %s, which the order puts after it: the dependencies changed while the tasks were being ordered; order them again: %w",
				e.TaskID, e.BlockedByID, errs.ErrConflict)
		}
	}
	return nil
}
