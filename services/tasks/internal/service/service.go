// Package service is the tasks service's gRPC API: it authenticates the caller, validates
// and normalizes requests (InvalidArgument naming the field), and hands them to the store,
// whose sentinel errors the shared error interceptor turns into status codes. PlanTaskOrder
// also asks the ai service for the order it stores.
package service

import (
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/events"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/validate"
	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/services/tasks/internal/store"
)

// DefaultMaxWatches bounds concurrent WatchTasks streams when no limit is given;
// DefaultMaxWatchesPerUser those of one caller.
const (
	DefaultMaxWatches        = 1024
	DefaultMaxWatchesPerUser = 32
)

// Server implements tasksv1.TaskServiceServer.
type Server struct {
	tasksv1.UnimplementedTaskServiceServer
	store *store.Store
	// watch serves WatchTasks. Its Watches hold a token per running stream: streams share
	// one listening session (events.Hub) but each reads through the pool when woken; the
	// bound keeps a flood of streams from starving the other RPCs of connections.
	watch *events.Handler[*tasksv1.WatchTasksResponse]
	// maxWatches and maxWatchesPerUser are the bounds watch's Watches is made with.
	maxWatches, maxWatchesPerUser int
	// heartbeat is how long a WatchTasks stream stays silent before a heartbeat.
	heartbeat time.Duration
	// ai orders tasks (PlanTaskOrder); nil when no ai service is configured.
	ai aiv1.AIServiceClient
	// orderTimeout bounds one ai PlanTaskOrder call.
	orderTimeout time.Duration
	// github lists a repository's issues (ImportIssues); nil when no github service is
	// configured.
	github githubv1.RepoServiceClient
	log    *slog.Logger
}

// Option configures a Server.
type Option func(*Server)

// WithMaxWatches bounds the number of concurrent WatchTasks streams; one more is refused
// with ResourceExhausted. n <= 0 keeps DefaultMaxWatches.
func WithMaxWatches(n int) Option {
	return func(s *Server) {
		if n > 0 {
			s.maxWatches = n
		}
	}
}

// WithMaxWatchesPerUser bounds the WatchTasks streams one caller (auth.CallerKey) holds
// at once, so one user cannot take every slot; one more is refused with ResourceExhausted.
// n <= 0 keeps DefaultMaxWatchesPerUser.
func WithMaxWatchesPerUser(n int) Option {
	return func(s *Server) {
		if n > 0 {
			s.maxWatchesPerUser = n
		}
	}
}

// DefaultHeartbeat is how long a WatchTasks stream stays silent before a heartbeat: short
// enough for proxies with a 30–60 s idle timeout and for a client to notice a dead stream.
const DefaultHeartbeat = 15 * time.Second

// WithHeartbeat sets how long a WatchTasks stream stays silent before a heartbeat; d <= 0
// keeps DefaultHeartbeat.
func WithHeartbeat(d time.Duration) Option {
	return func(s *Server) {
		if d > 0 {
			s.heartbeat = d
		}
	}
}

// WithLogger sets the logger for what the client is not told (why the ai service failed);
// nil keeps the default, which discards.
func WithLogger(l *slog.Logger) Option {
	return func(s *Server) {
		if l != nil {
			s.log = l
		}
	}
}

// New returns a Server backed by st.
func New(st *store.Store, opts ...Option) *Server {
	s := &Server{
		store: st, maxWatches: DefaultMaxWatches, maxWatchesPerUser: DefaultMaxWatchesPerUser, heartbeat: DefaultHeartbeat,
		orderTimeout: DefaultOrderTimeout, log: slog.New(slog.DiscardHandler),
	}
	for _, o := range opts {
		o(s)
	}
	s.watch = st.WatchHandler()
	s.watch.Every, s.watch.Watches = s.heartbeat, events.NewWatches(s.maxWatches, "task watches", events.PerCaller(s.maxWatchesPerUser))
	return s
}

var _ tasksv1.TaskServiceServer = (*Server)(nil)

func caller(ctx context.Context) (string, error) {
	p, err := auth.MustFromContext(ctx)
	if err != nil {
		return "", err
	}
	return p.UserID, nil
}

// CreateTask creates a task owned by the caller.
func (s *Server) CreateTask(ctx context.Context, req *tasksv1.CreateTaskRequest) (*tasksv1.CreateTaskResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	t, err := newTask("", owner, req)
	if err != nil {
		return nil, err
	}
	r, err := request("request_id", req.GetRequestId(), "CreateTask", req)
	if err != nil {
		return nil, err
	}
	created, err := s.store.Create(ctx, t, r)
	if err != nil {
		return nil, err
	}
	return &tasksv1.CreateTaskResponse{Task: created}, nil
}

// maxBatch bounds BatchCreateTasks: a project's phase or an issue import, not a bulk load.
const maxBatch = 100

// BatchCreateTasks creates several tasks with links among themselves, all or nothing.
func (s *Server) BatchCreateTasks(ctx context.Context, req *tasksv1.BatchCreateTasksRequest) (*tasksv1.BatchCreateTasksResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	n := len(req.GetTasks())
	switch {
	case n == 0:
		return nil, errs.Invalid("tasks", "required: at least one task")
	case n > maxBatch:
		return nil, errs.Invalid("tasks", "at most %d tasks, got %d", maxBatch, n)
	}
	index := make(map[string]int, n)
	for i, bt := range req.GetTasks() {
		field := fmt.Sprintf("tasks[%d].key", i)
		switch k := bt.GetKey(); {
		case k == "":
			return nil, errs.Invalid(field, "required")
		case len(k) > maxRequestID:
			return nil, errs.Invalid(field, "at most %d bytes", maxRequestID)
		case !utf8.ValidString(k):
			return nil, errs.Invalid(field, "not valid UTF-8")
		default:
			if _, dup := index[k]; dup {
				return nil, errs.Invalid(field, "%q is used by another task of the batch", validate.Truncate(k, 64))
			}
			index[k] = i
		}
	}
	items := make([]store.BatchItem, n)
	for i, bt := range req.GetTasks() {
		prefix := fmt.Sprintf("tasks[%d].", i)
		if bt.GetTask() == nil {
			return nil, errs.Invalid(prefix+"task", "required")
		}
		t, err := newTask(prefix+"task.", owner, bt.GetTask())
		if err != nil {
			return nil, err
		}
		items[i].Task = t
		for _, k := range bt.GetBlockedByKeys() {
			j, ok := index[k]
			switch {
			case !ok:
				return nil, errs.Invalid(prefix+"blocked_by_keys", "no task of the batch has key %q", validate.Truncate(k, 64))
			case j == i:
				return nil, errs.Invalid(prefix+"blocked_by_keys", "a task cannot block itself")
			case !slices.Contains(items[i].BlockedBy, j):
				items[i].BlockedBy = append(items[i].BlockedBy, j)
			}
		}
		if len(items[i].BlockedBy)+len(t.BlockedBy) > maxBlockedBy {
			return nil, errs.Invalid(prefix+"blocked_by_keys", "at most %d blockers in all", maxBlockedBy)
		}
	}
	if cycle := batchCycle(items); cycle != nil {
		keys := make([]string, len(cycle))
		for i, c := range cycle {
			keys[i] = req.GetTasks()[c].GetKey()
		}
		return nil, errs.Invalid("tasks", "blocked_by_keys form a cycle: %s", strings.Join(keys, " → "))
	}
	r, err := request("request_id", req.GetRequestId(), "BatchCreateTasks", req)
	if err != nil {
		return nil, err
	}
	created, err := s.store.BatchCreate(ctx, owner, items, r)
	if err != nil {
		return nil, err
	}
	return &tasksv1.BatchCreateTasksResponse{Tasks: created}, nil
}

// batchCycle returns the indexes of a cycle among items' BlockedBy edges (the last blocked
// by the first), or nil.
func batchCycle(items []store.BatchItem) []int {
	const (
		unvisited = iota
		onPath
		done
	)
	state := make([]int, len(items))
	var path []int
	var visit func(i int) []int
	visit = func(i int) []int {
		state[i] = onPath
		path = append(path, i)
		for _, b := range items[i].BlockedBy {
			switch state[b] {
			case onPath:
				return append(slices.Clone(path[slices.Index(path, b):]), b)
			case unvisited:
				if c := visit(b); c != nil {
					return c
				}
			}
		}
		path = path[:len(path)-1]
		state[i] = done
		return nil
	}
	for i := range items {
		if state[i] == unvisited {
			if c := visit(i); c != nil {
				return c
			}
		}
	}
	return nil
}

// newTask validates and defaults a create request into a task of owner; prefix is put
// before field names in errors.
func newTask(prefix, owner string, req *tasksv1.CreateTaskRequest) (*tasksv1.Task, error) {
	t := &tasksv1.Task{
		OwnerId:     owner,
		Repo:        req.GetRepo(),
		Title:       req.GetTitle(),
		Description: req.GetDescription(),
		Status:      req.GetStatus(),
		Source:      req.GetSource(),
		Priority:    req.GetPriority(),
		Labels:      slices.Clone(req.GetLabels()),
		ExternalId:  req.GetExternalId(),
		ExternalUrl: req.GetExternalUrl(),
		ProjectId:   req.GetProjectId(),
	}
	if err := checkTaskFields(prefix, t, []string{"title", "repo", "description", "labels", "external_url", "project_id"}); err != nil {
		return nil, err
	}
	switch t.Status {
	case tasksv1.TaskStatus_TASK_STATUS_UNSPECIFIED:
		t.Status = tasksv1.TaskStatus_TASK_STATUS_BACKLOG
	case tasksv1.TaskStatus_TASK_STATUS_BACKLOG, tasksv1.TaskStatus_TASK_STATUS_PLANNED:
	default:
		return nil, errs.Invalid(prefix+"status", "a task starts in backlog or planned")
	}
	if err := validate.Enum(prefix+"source", t.Source, true); err != nil {
		return nil, err
	}
	if t.Source == tasksv1.TaskSource_TASK_SOURCE_UNSPECIFIED {
		t.Source = tasksv1.TaskSource_TASK_SOURCE_API
	}
	if err := validate.Enum(prefix+"priority", t.Priority, true); err != nil {
		return nil, err
	}
	if t.Priority == typev1.Priority_PRIORITY_UNSPECIFIED {
		t.Priority = typev1.Priority_PRIORITY_MEDIUM
	}
	if err := validate.MaxLen(prefix+"external_id", t.ExternalId, maxExternalID); err != nil {
		return nil, err
	}
	var err error
	if t.ParentId, err = validate.UUID(prefix+"parent_id", req.GetParentId(), false); err != nil {
		return nil, err
	}
	if len(req.GetBlockedBy()) > maxBlockedBy {
		return nil, errs.Invalid(prefix+"blocked_by", "at most %d tasks", maxBlockedBy)
	}
	for _, b := range req.GetBlockedBy() {
		id, err := validate.UUID(prefix+"blocked_by", b, true)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(t.BlockedBy, id) {
			t.BlockedBy = append(t.BlockedBy, id)
		}
	}
	return t, nil
}

// requestWithID is a create request that carries a caller-chosen request_id.
type requestWithID interface {
	proto.Message
	GetRequestId() string
}

// request returns the idempotency record of req, or nil when it has no request_id. The
// fingerprint hashes req without its request_id, deterministically marshalled, so only a
// byte-identical retry is answered with the first result.
func request(field, id, method string, req requestWithID) (*store.Request, error) {
	if err := validate.RequestID(field, id); err != nil {
		return nil, err
	}
	if id == "" {
		return nil, nil
	}
	c := proto.Clone(req)
	rf := c.ProtoReflect()
	rf.Clear(rf.Descriptor().Fields().ByName("request_id"))
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("fingerprint request: %w", err)
	}
	sum := sha256.Sum256(b)
	return &store.Request{ID: id, Method: method, Fingerprint: sum[:]}, nil
}

// GetTask returns one of the caller's tasks.
func (s *Server) GetTask(ctx context.Context, req *tasksv1.GetTaskRequest) (*tasksv1.GetTaskResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.GetId(), true)
	if err != nil {
		return nil, err
	}
	t, err := s.store.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return &tasksv1.GetTaskResponse{Task: t}, nil
}

// ListTasks lists the caller's tasks, newest first.
func (s *Server) ListTasks(ctx context.Context, req *tasksv1.ListTasksRequest) (*tasksv1.ListTasksResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	f := store.ListFilter{Repo: req.GetRepo(), Source: req.GetSource()}
	if err := validate.Repo("repo", f.Repo, false); err != nil {
		return nil, err
	}
	for _, st := range req.GetStatuses() {
		if err := validate.Enum("statuses", st, false); err != nil {
			return nil, err
		}
		if !slices.Contains(f.Statuses, st) {
			f.Statuses = append(f.Statuses, st)
		}
	}
	if err := validate.Enum("source", f.Source, true); err != nil {
		return nil, err
	}
	if labels, err := validate.Labels("label", []string{req.GetLabel()}, maxLabel, maxLabels); err != nil {
		return nil, err
	} else if len(labels) == 1 {
		f.Label = labels[0]
	}
	if f.ParentID, err = validate.UUID("parent_id", req.GetParentId(), false); err != nil {
		return nil, err
	}
	if f.ProjectID, err = validate.UUID("project_id", req.GetProjectId(), false); err != nil {
		return nil, err
	}
	if f.PageSize, err = validate.PageSize(req.GetPageSize(), defaultPage, maxPageSize); err != nil {
		return nil, err
	}
	if f.After, err = decodePageToken(req.GetPageToken()); err != nil {
		return nil, err
	}
	tasks, next, err := s.store.List(ctx, owner, f)
	if err != nil {
		return nil, err
	}
	return &tasksv1.ListTasksResponse{Tasks: tasks, NextPageToken: encodePageToken(next)}, nil
}

// UpdateTask changes the fields named in update_mask.
func (s *Server) UpdateTask(ctx context.Context, req *tasksv1.UpdateTaskRequest) (*tasksv1.UpdateTaskResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetTask() == nil {
		return nil, errs.Invalid("task", "required")
	}
	paths, err := validate.UpdatePaths(req.GetUpdateMask(), req.GetTask(), store.UpdatableFields)
	if err != nil {
		return nil, err // status is not among them: SetTaskStatus changes it
	}
	// Work on a copy: the request belongs to the caller (and to gRPC's interceptors).
	t := &tasksv1.Task{
		Title: req.Task.Title, Description: req.Task.Description, Priority: req.Task.Priority,
		Labels: slices.Clone(req.Task.Labels), Repo: req.Task.Repo, ExternalUrl: req.Task.ExternalUrl,
		JobId: req.Task.JobId, PullRequest: req.Task.PullRequest, Complexity: req.Task.Complexity,
		EstimatedTokens: req.Task.EstimatedTokens, PlannedOrder: req.Task.PlannedOrder, ProjectId: req.Task.ProjectId,
	}
	if t.Id, err = validate.UUID("id", req.GetId(), true); err != nil {
		return nil, err
	}
	if req.Task.GetId() != "" {
		if tid, err := validate.UUID("task.id", req.Task.GetId(), false); err != nil {
			return nil, err
		} else if tid != t.Id {
			return nil, errs.Invalid("task.id", "names another task than id (%s); leave it empty", t.Id)
		}
	}
	if err := checkTaskFields("task.", t, paths); err != nil {
		return nil, err
	}
	updated, err := s.store.Update(ctx, owner, t, paths)
	if err != nil {
		return nil, err
	}
	return &tasksv1.UpdateTaskResponse{Task: updated}, nil
}

// DeleteTask deletes a task and its dependency edges.
func (s *Server) DeleteTask(ctx context.Context, req *tasksv1.DeleteTaskRequest) (*tasksv1.DeleteTaskResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.GetId(), true)
	if err != nil {
		return nil, err
	}
	if err := s.store.Delete(ctx, owner, id); err != nil {
		return nil, err
	}
	return &tasksv1.DeleteTaskResponse{}, nil
}

// SetTaskStatus moves a task to a new status.
func (s *Server) SetTaskStatus(ctx context.Context, req *tasksv1.SetTaskStatusRequest) (*tasksv1.SetTaskStatusResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.GetId(), true)
	if err != nil {
		return nil, err
	}
	if err := validate.Enum("status", req.GetStatus(), false); err != nil {
		return nil, err
	}
	if err := validate.Enum("expected_status", req.GetExpectedStatus(), true); err != nil {
		return nil, err
	}
	if err := validate.MaxLen("reason", req.GetReason(), maxReason); err != nil {
		return nil, err
	}
	t, err := s.store.SetStatus(ctx, owner, id, req.GetStatus(), req.GetReason(), req.GetExpectedStatus())
	if err != nil {
		return nil, err
	}
	return &tasksv1.SetTaskStatusResponse{Task: t}, nil
}

// edgeIDs validates the two ids of a dependency request.
func edgeIDs(taskID, blockerID string) (string, string, error) {
	t, err := validate.UUID("task_id", taskID, true)
	if err != nil {
		return "", "", err
	}
	b, err := validate.UUID("blocked_by_id", blockerID, true)
	if err != nil {
		return "", "", err
	}
	return t, b, nil
}

// AddDependency records that task_id is blocked by blocked_by_id.
func (s *Server) AddDependency(ctx context.Context, req *tasksv1.AddDependencyRequest) (*tasksv1.AddDependencyResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	taskID, blockerID, err := edgeIDs(req.GetTaskId(), req.GetBlockedById())
	if err != nil {
		return nil, err
	}
	t, err := s.store.AddDependency(ctx, owner, taskID, blockerID)
	if err != nil {
		return nil, err
	}
	return &tasksv1.AddDependencyResponse{Task: t}, nil
}

// RemoveDependency removes a blocked-by edge.
func (s *Server) RemoveDependency(ctx context.Context, req *tasksv1.RemoveDependencyRequest) (*tasksv1.RemoveDependencyResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	taskID, blockerID, err := edgeIDs(req.GetTaskId(), req.GetBlockedById())
	if err != nil {
		return nil, err
	}
	t, err := s.store.RemoveDependency(ctx, owner, taskID, blockerID)
	if err != nil {
		return nil, err
	}
	return &tasksv1.RemoveDependencyResponse{Task: t}, nil
}

// GetTaskGraph returns a repository's tasks, edges, topological order and ready set.
func (s *Server) GetTaskGraph(ctx context.Context, req *tasksv1.GetTaskGraphRequest) (*tasksv1.GetTaskGraphResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := validate.Repo("repo", req.GetRepo(), true); err != nil {
		return nil, err
	}
	g, err := s.store.Graph(ctx, owner, req.GetRepo(), req.GetIncludeClosed())
	if err != nil {
		return nil, err
	}
	resp := &tasksv1.GetTaskGraphResponse{Tasks: g.Tasks, Order: g.Order, Ready: g.Ready}
	for _, e := range g.Edges {
		resp.Edges = append(resp.Edges, &tasksv1.TaskEdge{TaskId: e.TaskID, BlockedById: e.BlockedByID})
	}
	return resp, nil
}

// GetTaskStats counts the caller's tasks.
func (s *Server) GetTaskStats(ctx context.Context, req *tasksv1.GetTaskStatsRequest) (*tasksv1.GetTaskStatsResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := validate.Repo("repo", req.GetRepo(), false); err != nil {
		return nil, err
	}
	st, err := s.store.Stats(ctx, owner, req.GetRepo())
	if err != nil {
		return nil, err
	}
	return &tasksv1.GetTaskStatsResponse{
		Total:         st.Total,
		ByStatus:      st.ByStatus,
		BySource:      st.BySource,
		ByPriority:    st.ByPriority,
		BlockedByOpen: st.BlockedByOpen,
	}, nil
}

// WatchTasks streams the caller's task events after a cursor (events.Handler's rules: a
// watch of one task is NOT_FOUND when the caller has no such task, and ends after the task
// is deleted).
func (s *Server) WatchTasks(req *tasksv1.WatchTasksRequest, stream grpc.ServerStreamingServer[tasksv1.WatchTasksResponse]) error {
	ctx := stream.Context()
	owner, err := caller(ctx)
	if err != nil {
		return err
	}
	if err := validate.Repo("repo", req.GetRepo(), false); err != nil {
		return err
	}
	taskID, err := validate.UUID("id", req.GetId(), false)
	if err != nil {
		return err
	}
	w := events.Watch[*tasksv1.WatchTasksResponse]{AfterID: req.GetAfterId(), FromNow: req.GetFromNow(), OwnerID: owner, Scope: req.GetRepo(), ID: taskID}
	if taskID != "" {
		w.State = func(ctx context.Context) (bool, error) { return s.store.WatchState(ctx, owner, taskID) }
		w.Ends = store.Deleted
	}
	return s.watch.Serve(ctx, w, stream.Send)
}
