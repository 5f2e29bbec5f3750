package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

const (
	evCreated = tasksv1.TaskEventType_TASK_EVENT_TYPE_CREATED
	evUpdated = tasksv1.TaskEventType_TASK_EVENT_TYPE_UPDATED
	evDeleted = tasksv1.TaskEventType_TASK_EVENT_TYPE_DELETED
)

// Create inserts t for t.OwnerId with its blocked-by edges and returns it as stored. The
// caller has validated and defaulted the fields; the id and times are assigned here. A
// parent or blocker that is not the owner's is errs.ErrNotFound. With a non-nil req, a
// repeated request returns the task the first one created (see Request).
func (s *Store) Create(ctx context.Context, t *tasksv1.Task, req *Request) (*tasksv1.Task, error) {
	created, err := s.BatchCreate(ctx, t.OwnerId, []BatchItem{{Task: t}}, req)
	if err != nil {
		return nil, err
	}
	return created[0], nil
}

// BatchItem is one task of BatchCreate.
type BatchItem struct {
	// Task as Create takes it; OwnerId is ignored (the batch's owner counts).
	Task *tasksv1.Task
	// BlockedBy are indexes of other items of the batch that block this one. The caller
	// has checked they are in range and acyclic.
	BlockedBy []int
}

// BatchCreate creates items for owner in one transaction, all or nothing, with their edges
// among themselves and to existing tasks, and returns them in order. One CREATED event per
// task is written, each with its complete blocked_by.
func (s *Store) BatchCreate(ctx context.Context, owner string, items []BatchItem, req *Request) ([]*tasksv1.Task, error) {
	if len(items) == 0 {
		return nil, fmt.Errorf("no tasks to create: %w", errs.ErrInvalid)
	}
	var created []*tasksv1.Task
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if req != nil {
			replayed, err := claimRequest(ctx, tx, owner, req)
			if err != nil || replayed != nil {
				created = replayed
				return err
			}
		}
		ids := make([]string, len(items))
		for i, it := range items {
			id, err := insertTask(ctx, tx, owner, it.Task)
			if err != nil {
				return err
			}
			ids[i] = id
		}
		for i, it := range items {
			for _, b := range it.BlockedBy {
				if _, err := tx.Exec(ctx, "INSERT INTO task_dependencies (task_id, blocked_by_id) VALUES ($1, $2) ON CONFLICT DO NOTHING", ids[i], ids[b]); err != nil {
					return dbError("store: insert dependency", err)
				}
			}
		}
		if req != nil {
			if err := completeRequest(ctx, tx, owner, req.ID, ids); err != nil {
				return err
			}
		}
		// Read everything before the first append: from there on the schema's event lock
		// is held, and every other writer waits for our commit.
		created = make([]*tasksv1.Task, len(ids))
		for i, id := range ids {
			t, err := getTask(ctx, tx, owner, id, "")
			if err != nil {
				return err
			}
			created[i] = t
		}
		for _, t := range created {
			if err := appendEvent(ctx, tx, change{typ: evCreated, task: t}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return created, nil
}

// insertTask inserts t for owner with its edges to existing tasks and returns its id.
func insertTask(ctx context.Context, tx pgx.Tx, owner string, t *tasksv1.Task) (string, error) {
	// FOR KEY SHARE keeps a parent or blocker from being deleted before we commit.
	if t.ParentId != "" {
		var one int
		err := tx.QueryRow(ctx, "SELECT 1 FROM tasks WHERE id = $1 AND owner_id = $2 FOR KEY SHARE", t.ParentId, owner).Scan(&one)
		if errors.Is(err, pgx.ErrNoRows) {
			return "", fmt.Errorf("parent_id: task %q: %w", t.ParentId, errs.ErrNotFound)
		}
		if err != nil {
			return "", fmt.Errorf("store: lock parent: %w", err)
		}
	}
	blockers := slices.Compact(slices.Sorted(slices.Values(t.BlockedBy)))
	if len(blockers) > 0 {
		rows, err := tx.Query(ctx, "SELECT id::text FROM tasks WHERE owner_id = $1 AND id = ANY($2::uuid[]) FOR KEY SHARE", owner, blockers)
		if err != nil {
			return "", fmt.Errorf("store: lock blockers: %w", err)
		}
		found, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return "", fmt.Errorf("store: lock blockers: %w", err)
		}
		for _, id := range blockers {
			if !slices.Contains(found, id) {
				return "", fmt.Errorf("blocked_by: task %q: %w", id, errs.ErrNotFound)
			}
		}
	}
	var parent *string
	if t.ParentId != "" {
		parent = &t.ParentId
	}
	pr := t.GetPullRequest()
	var id string
	err := tx.QueryRow(ctx, `INSERT INTO tasks (owner_id, repo, title, description, status, source, priority,
			labels, parent_id, external_id, external_url, job_id, pull_request_repo, pull_request_number,
			pull_request_url, complexity, estimated_tokens, planned_order, status_reason, project_id)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)
		RETURNING id::text`,
		owner, t.Repo, t.Title, t.Description, StatusName(t.Status), SourceName(t.Source), int16(t.Priority),
		nonNil(t.Labels), parent, t.ExternalId, t.ExternalUrl, t.JobId, pr.GetRepo(), pr.GetNumber(), pr.GetUrl(),
		t.Complexity, t.EstimatedTokens, t.PlannedOrder, t.StatusReason, t.ProjectId).Scan(&id)
	if err != nil {
		return "", dbError("store: insert task", err)
	}
	if len(blockers) > 0 {
		_, err := tx.Exec(ctx, "INSERT INTO task_dependencies (task_id, blocked_by_id) SELECT $1, unnest($2::uuid[])", id, blockers)
		if err != nil {
			return "", dbError("store: insert dependencies", err)
		}
	}
	return id, nil
}

// Get returns owner's task id.
func (s *Store) Get(ctx context.Context, owner, id string) (*tasksv1.Task, error) {
	return getTask(ctx, s.pool, owner, id, "")
}

// Cursor is a position in the newest-first order of ListTasks: the last task of a page.
type Cursor struct {
	CreateTime time.Time
	ID         string
}

// ListFilter selects tasks for List; zero fields match anything.
type ListFilter struct {
	Repo     string
	Statuses []tasksv1.TaskStatus
	Source   tasksv1.TaskSource
	Label    string
	ParentID string
	// ProjectID is an agent project's id in canonical form.
	ProjectID string
	// PageSize is the number of tasks to return, > 0.
	PageSize int
	// After continues a listing after this position.
	After *Cursor
}

// List returns a page of owner's tasks, newest first, and the cursor of the next page (nil
// when this is the last). Keyset pagination on (create_time, id): a page costs the same
// wherever it is, and tasks created meanwhile never shift a later page.
func (s *Store) List(ctx context.Context, owner string, f ListFilter) ([]*tasksv1.Task, *Cursor, error) {
	if f.PageSize <= 0 {
		return nil, nil, errors.New("store: list: page size must be positive")
	}
	var c db.Conds
	c.Add("t.owner_id = $%d", owner)
	if f.Repo != "" {
		c.Add("t.repo = $%d", f.Repo)
	}
	if len(f.Statuses) > 0 {
		names := make([]string, len(f.Statuses))
		for i, st := range f.Statuses {
			names[i] = StatusName(st)
		}
		c.Add("t.status = ANY($%d::text[])", names)
	}
	if f.Source != tasksv1.TaskSource_TASK_SOURCE_UNSPECIFIED {
		c.Add("t.source = $%d", SourceName(f.Source))
	}
	if f.Label != "" {
		c.Add("t.labels @> ARRAY[$%d::text]", f.Label)
	}
	if f.ParentID != "" {
		c.Add("t.parent_id = $%d::uuid", f.ParentID)
	}
	if f.ProjectID != "" {
		// The partial index's predicate, repeated: a generic plan cannot infer it from $n.
		c.Add("t.project_id = $%d AND t.project_id <> ''", f.ProjectID)
	}
	if f.After != nil {
		c.Add("(t.create_time, t.id) < ($%d, $%d::uuid)", f.After.CreateTime, f.After.ID)
	}
	query := "SELECT " + taskColumns + " FROM tasks t" + c.Where() +
		" ORDER BY t.create_time DESC, t.id DESC LIMIT " + c.Arg(f.PageSize+1)
	rows, err := s.pool.Query(ctx, query, c.Args...)
	if err != nil {
		return nil, nil, fmt.Errorf("store: list tasks: %w", err)
	}
	tasks, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*tasksv1.Task, error) { return scanTask(r) })
	if err != nil {
		return nil, nil, fmt.Errorf("store: list tasks: %w", err)
	}
	if len(tasks) <= f.PageSize {
		return tasks, nil, nil
	}
	tasks = tasks[:f.PageSize]
	last := tasks[len(tasks)-1]
	return tasks, &Cursor{CreateTime: last.CreateTime.AsTime(), ID: last.Id}, nil
}

// UpdatableFields are the update_mask paths UpdateTask accepts. Status has its own RPC.
var UpdatableFields = []string{
	"title", "description", "priority", "labels", "repo", "external_url", "job_id",
	"pull_request", "complexity", "estimated_tokens", "planned_order", "project_id",
}

// updateColumns are the columns and values field sets from t.
func updateColumns(field string, t *tasksv1.Task) ([]string, []any, error) {
	if field == "pull_request" {
		pr := t.GetPullRequest()
		return []string{"pull_request_repo", "pull_request_number", "pull_request_url"},
			[]any{pr.GetRepo(), pr.GetNumber(), pr.GetUrl()}, nil
	}
	v, err := updateValue(field, t)
	if err != nil {
		return nil, nil, err
	}
	return []string{field}, []any{v}, nil
}

// updateValue is the column value of the single-column field in t.
func updateValue(field string, t *tasksv1.Task) (any, error) {
	switch field {
	case "title":
		return t.Title, nil
	case "description":
		return t.Description, nil
	case "priority":
		return int16(t.Priority), nil
	case "labels":
		return nonNil(t.Labels), nil
	case "repo":
		return t.Repo, nil
	case "external_url":
		return t.ExternalUrl, nil
	case "job_id":
		return t.JobId, nil
	case "complexity":
		return t.Complexity, nil
	case "estimated_tokens":
		return t.EstimatedTokens, nil
	case "planned_order":
		return t.PlannedOrder, nil
	case "project_id":
		return t.ProjectId, nil
	}
	return nil, fmt.Errorf("field %q is not updatable: %w", field, errs.ErrInvalid)
}

// Update copies fields (names from UpdatableFields, column names alike) from t to owner's
// task t.Id and returns the task after the change.
func (s *Store) Update(ctx context.Context, owner string, t *tasksv1.Task, fields []string) (*tasksv1.Task, error) {
	if len(fields) == 0 {
		return nil, fmt.Errorf("no fields to update: %w", errs.ErrInvalid)
	}
	fields = slices.Compact(slices.Sorted(slices.Values(fields)))
	sets := make([]string, 0, len(fields)+1)
	// The SET values' placeholders follow the id ($1) and owner ($2).
	var args db.Conds
	args.Arg(t.Id)
	args.Arg(owner)
	for _, f := range fields {
		cols, vals, err := updateColumns(f, t)
		if err != nil {
			return nil, err
		}
		for i, c := range cols {
			sets = append(sets, c+" = "+args.Arg(vals[i])) // c is a column of one of UpdatableFields
		}
	}
	sets = append(sets, "update_time = now()")
	var updated *tasksv1.Task
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// The row lock first: the repository before the change decides which watchers see it.
		before, err := getTask(ctx, tx, owner, t.Id, "FOR UPDATE")
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "UPDATE tasks SET "+strings.Join(sets, ", ")+" WHERE id = $1 AND owner_id = $2", args.Args...); err != nil {
			return dbError("store: update task", err)
		}
		if updated, err = getTask(ctx, tx, owner, t.Id, ""); err != nil {
			return err
		}
		c := change{typ: evUpdated, task: updated, changedFields: fields}
		if before.Repo != updated.Repo {
			c.previousRepo = before.Repo
		}
		return appendEvent(ctx, tx, c)
	})
	if err != nil {
		return nil, err
	}
	return updated, nil
}

// Delete deletes owner's task id with its edges. Tasks it blocked lose that blocker and
// its subtasks lose their parent; each of them gets an "updated" event after the
// "deleted" one, so a watcher's copy stays true.
func (s *Store) Delete(ctx context.Context, owner, id string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockGraph(ctx, tx, owner); err != nil {
			return err
		}
		t, err := getTask(ctx, tx, owner, id, "FOR UPDATE")
		if err != nil {
			return err
		}
		// parent_id still names id here: the delete below clears it (ON DELETE SET NULL).
		rows, err := tx.Query(ctx, `UPDATE tasks SET update_time = now()
			WHERE owner_id = $2 AND id <> $1
				AND (parent_id = $1 OR id IN (SELECT task_id FROM task_dependencies WHERE blocked_by_id = $1))
			RETURNING id::text,
				coalesce(parent_id = $1, false),
				id IN (SELECT task_id FROM task_dependencies WHERE blocked_by_id = $1)`, id, owner)
		if err != nil {
			return fmt.Errorf("store: touch dependents: %w", err)
		}
		type dependent struct {
			ID               string
			Child, BlockedBy bool
		}
		affected, err := pgx.CollectRows(rows, pgx.RowToStructByPos[dependent])
		if err != nil {
			return fmt.Errorf("store: touch dependents: %w", err)
		}
		if _, err := tx.Exec(ctx, "DELETE FROM tasks WHERE id = $1 AND owner_id = $2", id, owner); err != nil {
			return fmt.Errorf("store: delete task: %w", err)
		}
		// Read everything before the first append: from there on the schema's event lock
		// is held, and every other writer waits for our commit.
		slices.SortFunc(affected, func(a, b dependent) int { return strings.Compare(a.ID, b.ID) })
		after := make([]change, 0, len(affected))
		for _, a := range affected {
			at, err := getTask(ctx, tx, owner, a.ID, "")
			if err != nil {
				return err
			}
			c := change{typ: evUpdated, task: at}
			if a.BlockedBy {
				c.changedFields = append(c.changedFields, "blocked_by")
			}
			if a.Child {
				c.changedFields = append(c.changedFields, "parent_id")
			}
			after = append(after, c)
		}
		if err := appendEvent(ctx, tx, change{typ: evDeleted, task: t}); err != nil {
			return err
		}
		for _, c := range after {
			if err := appendEvent(ctx, tx, c); err != nil {
				return err
			}
		}
		return nil
	})
}
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
