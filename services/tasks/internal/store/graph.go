package store

import (
	"cmp"
	"container/heap"
	"context"
	"fmt"
	"slices"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/db"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// Edge says TaskID is blocked by BlockedByID.
type Edge struct {
	TaskID, BlockedByID string
}

// Graph is a repository's tasks with their blocked-by edges.
type Graph struct {
	// Tasks in Order.
	Tasks []*tasksv1.Task
	// Edges between Tasks, in Order of TaskID.
	Edges []Edge
	// Order lists task ids so that every task comes after the tasks that block it; among
	// tasks free to go next, higher priority first, then older first.
	Order []string
	// Ready are the open tasks that can start now: every blocker done (or none), and not
	// closed or explicitly blocked (a blocked task waits for a person, not for a blocker).
	Ready []string
}

// Graph returns owner's tasks of repo, without done and cancelled ones unless
// includeClosed, with their edges, a topological order and the ready set.
func (s *Store) Graph(ctx context.Context, owner, repo string, includeClosed bool) (*Graph, error) {
	var (
		tasks    []*tasksv1.Task
		blockers []blockerEdge
	)
	err := db.ReadTx(ctx, s.pool, func(tx pgx.Tx) error {
		q := "SELECT " + taskColumns + " FROM tasks t WHERE t.owner_id = $1 AND t.repo = $2"
		if !includeClosed {
			q += " AND t.status NOT IN ('done', 'cancelled')"
		}
		rows, err := tx.Query(ctx, q, owner, repo)
		if err != nil {
			return fmt.Errorf("store: graph tasks: %w", err)
		}
		if tasks, err = pgx.CollectRows(rows, func(r pgx.CollectableRow) (*tasksv1.Task, error) { return scanTask(r) }); err != nil {
			return fmt.Errorf("store: graph tasks: %w", err)
		}
		// Every blocker of the repository's tasks, with its status: a blocker may be closed
		// or in another repository and still decide whether a task is ready.
		rows, err = tx.Query(ctx, `SELECT d.task_id::text, d.blocked_by_id::text, b.status
			FROM task_dependencies d
			JOIN tasks t ON t.id = d.task_id
			JOIN tasks b ON b.id = d.blocked_by_id
			WHERE t.owner_id = $1 AND t.repo = $2`, owner, repo)
		if err != nil {
			return fmt.Errorf("store: graph edges: %w", err)
		}
		if blockers, err = pgx.CollectRows(rows, pgx.RowToStructByPos[blockerEdge]); err != nil {
			return fmt.Errorf("store: graph edges: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return buildGraph(tasks, blockers), nil
}

type blockerEdge struct {
	TaskID, BlockedByID, BlockerStatus string
}

// buildGraph orders tasks (Kahn's algorithm) and finds the ready ones.
func buildGraph(tasks []*tasksv1.Task, blockers []blockerEdge) *Graph {
	byID := make(map[string]*tasksv1.Task, len(tasks))
	for _, t := range tasks {
		byID[t.Id] = t
	}
	var edges []Edge
	notDone := map[string]bool{} // tasks with a blocker that is not done
	for _, b := range blockers {
		if b.BlockerStatus != StatusName(done) {
			notDone[b.TaskID] = true
		}
		if byID[b.TaskID] != nil && byID[b.BlockedByID] != nil {
			edges = append(edges, Edge{TaskID: b.TaskID, BlockedByID: b.BlockedByID})
		}
	}
	order := topoOrder(tasks, edges)
	pos := make(map[string]int, len(order))
	g := &Graph{Order: order, Tasks: make([]*tasksv1.Task, 0, len(order))}
	for i, id := range order {
		pos[id] = i
		t := byID[id]
		g.Tasks = append(g.Tasks, t)
		if !closed(t.Status) && t.Status != blocked && !notDone[id] {
			g.Ready = append(g.Ready, id)
		}
	}
	slices.SortFunc(edges, func(a, b Edge) int {
		return cmp.Or(cmp.Compare(pos[a.TaskID], pos[b.TaskID]), cmp.Compare(pos[a.BlockedByID], pos[b.BlockedByID]))
	})
	g.Edges = edges
	return g
}

// topoOrder returns the ids of tasks so that each comes after its blockers (Kahn's
// algorithm). Among the tasks whose blockers are all placed, the most urgent goes first,
// then the oldest, then the smallest id, so the order is deterministic. Tasks on a cycle,
// which the store never lets form, would be appended at the end rather than lost.
func topoOrder(tasks []*tasksv1.Task, edges []Edge) []string {
	indegree := make(map[string]int, len(tasks))
	blocks := map[string][]string{} // blocker -> tasks it blocks
	for _, e := range edges {
		indegree[e.TaskID]++
		blocks[e.BlockedByID] = append(blocks[e.BlockedByID], e.TaskID)
	}
	byID := make(map[string]*tasksv1.Task, len(tasks))
	q := &taskHeap{}
	for _, t := range tasks {
		byID[t.Id] = t
		if indegree[t.Id] == 0 {
			heap.Push(q, t)
		}
	}
	order := make([]string, 0, len(tasks))
	placed := make(map[string]bool, len(tasks))
	for q.Len() > 0 {
		t := heap.Pop(q).(*tasksv1.Task)
		order = append(order, t.Id)
		placed[t.Id] = true
		for _, next := range blocks[t.Id] {
			if indegree[next]--; indegree[next] == 0 {
				heap.Push(q, byID[next])
			}
		}
	}
	if len(order) < len(tasks) {
		rest := &taskHeap{}
		for _, t := range tasks {
			if !placed[t.Id] {
				heap.Push(rest, t)
			}
		}
		for rest.Len() > 0 {
			order = append(order, heap.Pop(rest).(*tasksv1.Task).Id)
		}
	}
	return order
}

// taskHeap pops the task that should go first.
type taskHeap []*tasksv1.Task

func (h taskHeap) Len() int { return len(h) }
func (h taskHeap) Less(i, j int) bool {
	a, b := h[i], h[j]
	return cmp.Or(
		cmp.Compare(b.Priority, a.Priority),
		a.CreateTime.AsTime().Compare(b.CreateTime.AsTime()),
		cmp.Compare(a.Id, b.Id),
	) < 0
}
func (h taskHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *taskHeap) Push(x any)   { *h = append(*h, x.(*tasksv1.Task)) }
func (h *taskHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	*h = old[:len(old)-1]
	return t
}

// Stats are counts over an owner's tasks. The maps have a key for every defined value.
type Stats struct {
	Total      int64
	ByStatus   map[string]int64
	BySource   map[string]int64
	ByPriority map[string]int64
	// BlockedByOpen counts open tasks with at least one blocker that is not done.
	BlockedByOpen int64
}

// Stats counts owner's tasks, of repo when it is not empty.
func (s *Store) Stats(ctx context.Context, owner, repo string) (*Stats, error) {
	st := &Stats{ByStatus: map[string]int64{}, BySource: map[string]int64{}, ByPriority: map[string]int64{}}
	for v := range tasksv1.TaskStatus_name {
		if v != 0 {
			st.ByStatus[StatusName(tasksv1.TaskStatus(v))] = 0
		}
	}
	for v := range tasksv1.TaskSource_name {
		if v != 0 {
			st.BySource[SourceName(tasksv1.TaskSource(v))] = 0
		}
	}
	for v := range typev1.Priority_name {
		if v != 0 {
			st.ByPriority[PriorityName(typev1.Priority(v))] = 0
		}
	}
	err := db.ReadTx(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT status, source, priority, count(*) FROM tasks
			WHERE owner_id = $1 AND ($2 = '' OR repo = $2)
			GROUP BY status, source, priority`, owner, repo)
		if err != nil {
			return fmt.Errorf("store: stats: %w", err)
		}
		var (
			status, source string
			priority       int16
			n              int64
		)
		_, err = pgx.ForEachRow(rows, []any{&status, &source, &priority, &n}, func() error {
			st.Total += n
			st.ByStatus[status] += n
			st.BySource[source] += n
			st.ByPriority[PriorityName(typev1.Priority(priority))] += n
			return nil
		})
		if err != nil {
			return fmt.Errorf("store: stats: %w", err)
		}
		err = tx.QueryRow(ctx, `SELECT count(*) FROM tasks t
			WHERE t.owner_id = $1 AND ($2 = '' OR t.repo = $2) AND t.status NOT IN ('done', 'cancelled')
			AND EXISTS (SELECT 1 FROM task_dependencies d JOIN tasks b ON b.id = d.blocked_by_id
				WHERE d.task_id = t.id AND b.status <> 'done')`, owner, repo).Scan(&st.BlockedByOpen)
		if err != nil {
			return fmt.Errorf("store: stats blocked: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return st, nil
}
