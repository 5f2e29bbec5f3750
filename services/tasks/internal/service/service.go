// Package service is the tasks service's gRPC API: it authenticates the caller, validates
// and normalizes requests (InvalidArgument naming the field), and hands them to the store,
// whose sentinel errors the shared error interceptor turns into status codes.
package service

import (
	"context"
	"slices"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"

	"github.com/thefold/thefold/services/tasks/internal/store"
)

// DefaultMaxWatches bounds concurrent WatchTasks streams when no limit is given.
const DefaultMaxWatches = 1024

// Server implements tasksv1.TaskServiceServer.
type Server struct {
	tasksv1.UnimplementedTaskServiceServer
	store *store.Store
	// watches holds a token per running WatchTasks stream. Streams share one listening
	// session (events.Hub) but each reads through the pool when woken; the bound keeps a
	// flood of streams from starving the other RPCs of connections.
	watches chan struct{}
}

// Option configures a Server.
type Option func(*Server)

// WithMaxWatches bounds the number of concurrent WatchTasks streams; one more is refused
// with ResourceExhausted. n <= 0 keeps DefaultMaxWatches.
func WithMaxWatches(n int) Option {
	return func(s *Server) {
		if n > 0 {
			s.watches = make(chan struct{}, n)
		}
	}
}

// New returns a Server backed by st.
func New(st *store.Store, opts ...Option) *Server {
	s := &Server{store: st, watches: make(chan struct{}, DefaultMaxWatches)}
	for _, o := range opts {
		o(s)
	}
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
	t := &tasksv1.Task{
		OwnerId:     owner,
		Repo:        req.GetRepo(),
		Title:       req.GetTitle(),
		Description: req.GetDescription(),
		Status:      req.GetStatus(),
		Source:      req.GetSource(),
		Priority:    req.GetPriority(),
		Labels:      req.GetLabels(),
		ExternalId:  req.GetExternalId(),
		ExternalUrl: req.GetExternalUrl(),
	}
	if err := checkTaskFields("", t, []string{"title", "repo", "description", "labels", "external_url"}); err != nil {
		return nil, err
	}
	switch t.Status {
	case tasksv1.TaskStatus_TASK_STATUS_UNSPECIFIED:
		t.Status = tasksv1.TaskStatus_TASK_STATUS_BACKLOG
	case tasksv1.TaskStatus_TASK_STATUS_BACKLOG, tasksv1.TaskStatus_TASK_STATUS_PLANNED:
	default:
		return nil, errs.Invalid("status", "a task starts in backlog or planned")
	}
	if err := checkSource("source", t.Source); err != nil {
		return nil, err
	}
	if t.Source == tasksv1.TaskSource_TASK_SOURCE_UNSPECIFIED {
		t.Source = tasksv1.TaskSource_TASK_SOURCE_API
	}
	if err := checkPriority("priority", t.Priority, true); err != nil {
		return nil, err
	}
	if t.Priority == tasksv1.TaskPriority_TASK_PRIORITY_UNSPECIFIED {
		t.Priority = tasksv1.TaskPriority_TASK_PRIORITY_MEDIUM
	}
	if err := checkLen("external_id", t.ExternalId, maxExternalID); err != nil {
		return nil, err
	}
	if t.ParentId, err = parseID("parent_id", req.GetParentId(), false); err != nil {
		return nil, err
	}
	if len(req.GetBlockedBy()) > maxBlockedBy {
		return nil, errs.Invalid("blocked_by", "at most %d tasks", maxBlockedBy)
	}
	for _, b := range req.GetBlockedBy() {
		id, err := parseID("blocked_by", b, true)
		if err != nil {
			return nil, err
		}
		if !slices.Contains(t.BlockedBy, id) {
			t.BlockedBy = append(t.BlockedBy, id)
		}
	}
	created, err := s.store.Create(ctx, t)
	if err != nil {
		return nil, err
	}
	return &tasksv1.CreateTaskResponse{Task: created}, nil
}

// GetTask returns one of the caller's tasks.
func (s *Server) GetTask(ctx context.Context, req *tasksv1.GetTaskRequest) (*tasksv1.GetTaskResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := parseID("id", req.GetId(), true)
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
	if err := checkRepo("repo", f.Repo, false); err != nil {
		return nil, err
	}
	for _, st := range req.GetStatuses() {
		if err := checkStatus("statuses", st, false); err != nil {
			return nil, err
		}
		if !slices.Contains(f.Statuses, st) {
			f.Statuses = append(f.Statuses, st)
		}
	}
	if err := checkSource("source", f.Source); err != nil {
		return nil, err
	}
	if labels, err := normalizeLabels("label", []string{req.GetLabel()}); err != nil {
		return nil, err
	} else if len(labels) == 1 {
		f.Label = labels[0]
	}
	if f.ParentID, err = parseID("parent_id", req.GetParentId(), false); err != nil {
		return nil, err
	}
	if f.PageSize, err = checkPageSize(req.GetPageSize()); err != nil {
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
	paths := req.GetUpdateMask().GetPaths()
	if len(paths) == 0 {
		return nil, errs.Invalid("update_mask", "required: name the fields to change (%v)", store.UpdatableFields)
	}
	for _, p := range paths {
		if !slices.Contains(store.UpdatableFields, p) {
			return nil, errs.Invalid("update_mask", "%q is not updatable; updatable: %v (status: use SetTaskStatus)", truncate(p, 64), store.UpdatableFields)
		}
	}
	// Work on a copy: the request belongs to the caller (and to gRPC's interceptors).
	t := &tasksv1.Task{
		Title: req.Task.Title, Description: req.Task.Description, Priority: req.Task.Priority,
		Labels: slices.Clone(req.Task.Labels), Repo: req.Task.Repo, ExternalUrl: req.Task.ExternalUrl,
		JobId: req.Task.JobId, PullRequestUrl: req.Task.PullRequestUrl, Complexity: req.Task.Complexity,
		EstimatedTokens: req.Task.EstimatedTokens, PlannedOrder: req.Task.PlannedOrder,
	}
	if t.Id, err = parseID("task.id", req.Task.GetId(), true); err != nil {
		return nil, err
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
	id, err := parseID("id", req.GetId(), true)
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
	id, err := parseID("id", req.GetId(), true)
	if err != nil {
		return nil, err
	}
	if err := checkStatus("status", req.GetStatus(), false); err != nil {
		return nil, err
	}
	if err := checkStatus("expected_status", req.GetExpectedStatus(), true); err != nil {
		return nil, err
	}
	if err := checkLen("reason", req.GetReason(), maxReason); err != nil {
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
	t, err := parseID("task_id", taskID, true)
	if err != nil {
		return "", "", err
	}
	b, err := parseID("blocked_by_id", blockerID, true)
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
	if err := checkRepo("repo", req.GetRepo(), true); err != nil {
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
	if err := checkRepo("repo", req.GetRepo(), false); err != nil {
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

// PlanTaskOrder validates its request; the ordering itself needs the ai service.
func (s *Server) PlanTaskOrder(ctx context.Context, req *tasksv1.PlanTaskOrderRequest) (*tasksv1.PlanTaskOrderResponse, error) {
	if _, err := caller(ctx); err != nil {
		return nil, err
	}
	if err := checkRepo("repo", req.GetRepo(), true); err != nil {
		return nil, err
	}
	return nil, status.Error(codes.Unimplemented,
		"PlanTaskOrder is not implemented yet: it orders tasks with the ai service and arrives with the ai service's issue; GetTaskGraph gives a dependency order meanwhile")
}

// ImportIssues validates its request; the import itself needs the github service.
func (s *Server) ImportIssues(ctx context.Context, req *tasksv1.ImportIssuesRequest) (*tasksv1.ImportIssuesResponse, error) {
	if _, err := caller(ctx); err != nil {
		return nil, err
	}
	if err := checkRepo("repo", req.GetRepo(), true); err != nil {
		return nil, err
	}
	if _, err := normalizeLabels("labels", req.GetLabels()); err != nil {
		return nil, err
	}
	return nil, status.Error(codes.Unimplemented,
		"ImportIssues is not implemented yet: it reads issues through the github service and arrives with the github service's issue")
}

// WatchTasks streams the caller's task events after a cursor.
func (s *Server) WatchTasks(req *tasksv1.WatchTasksRequest, stream grpc.ServerStreamingServer[tasksv1.WatchTasksResponse]) error {
	ctx := stream.Context()
	owner, err := caller(ctx)
	if err != nil {
		return err
	}
	if req.GetAfterId() < 0 {
		return errs.Invalid("after_id", "must not be negative")
	}
	if err := checkRepo("repo", req.GetRepo(), false); err != nil {
		return err
	}
	taskID, err := parseID("task_id", req.GetTaskId(), false)
	if err != nil {
		return err
	}
	select {
	case s.watches <- struct{}{}:
		defer func() { <-s.watches }()
	default:
		return status.Errorf(codes.ResourceExhausted, "too many task watches on this server (%d); retry later", cap(s.watches))
	}
	err = s.store.Watch(ctx, owner, req.GetAfterId(), store.WatchFilter{Repo: req.GetRepo(), TaskID: taskID}, stream.Send)
	if ctxErr := ctx.Err(); ctxErr != nil {
		// The client went away or its deadline passed; a failed Send says no more than that.
		return ctxErr
	}
	return err
}
