package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/events"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// EventStream is the events stream every task event is written to.
const EventStream = "task"

// payloadVersion is the version of storedEvent written now. Stored events outlive releases
// (a watcher may replay a week of history), so the outbox holds this internal form — the
// row's own vocabulary, JSON, versioned — and the API message is built from it when read.
// Renaming or renumbering something in the v1 API never corrupts stored history; a change
// of this form bumps the version and keeps a decoder for the old one.
const payloadVersion = 1

// storedEvent is the payload of a task event as stored.
type storedEvent struct {
	V              int        `json:"v"`
	Task           taskRecord `json:"task"`
	PreviousStatus string     `json:"previous_status,omitempty"`
	ChangedFields  []string   `json:"changed_fields,omitempty"`
	PreviousRepo   string     `json:"previous_repo,omitempty"`
}

// taskRecord is a task as stored in an event: enums by their stored names.
type taskRecord struct {
	ID                string     `json:"id"`
	OwnerID           string     `json:"owner_id"`
	Repo              string     `json:"repo"`
	Title             string     `json:"title"`
	Description       string     `json:"description,omitempty"`
	Status            string     `json:"status"`
	Source            string     `json:"source"`
	Priority          string     `json:"priority"`
	Labels            []string   `json:"labels,omitempty"`
	BlockedBy         []string   `json:"blocked_by,omitempty"`
	ParentID          string     `json:"parent_id,omitempty"`
	ExternalID        string     `json:"external_id,omitempty"`
	ExternalURL       string     `json:"external_url,omitempty"`
	JobID             string     `json:"job_id,omitempty"`
	PullRequestRepo   string     `json:"pull_request_repo,omitempty"`
	PullRequestNumber int32      `json:"pull_request_number,omitempty"`
	PullRequestURL    string     `json:"pull_request_url,omitempty"`
	Complexity        int32      `json:"complexity,omitempty"`
	EstimatedTokens   int64      `json:"estimated_tokens,omitempty"`
	PlannedOrder      int32      `json:"planned_order,omitempty"`
	StatusReason      string     `json:"status_reason,omitempty"`
	CreateTime        time.Time  `json:"create_time"`
	UpdateTime        time.Time  `json:"update_time"`
	CompleteTime      *time.Time `json:"complete_time,omitempty"`
	// ProjectID came after version 1's first events: absent there, it reads as none.
	ProjectID string `json:"project_id,omitempty"`
}

func recordOf(t *tasksv1.Task) taskRecord {
	r := taskRecord{
		ID: t.Id, OwnerID: t.OwnerId, Repo: t.Repo, Title: t.Title, Description: t.Description,
		Status: StatusName(t.Status), Source: SourceName(t.Source), Priority: PriorityName(t.Priority),
		Labels: t.Labels, BlockedBy: t.BlockedBy, ParentID: t.ParentId, ExternalID: t.ExternalId,
		ExternalURL: t.ExternalUrl, JobID: t.JobId, Complexity: t.Complexity,
		EstimatedTokens: t.EstimatedTokens, PlannedOrder: t.PlannedOrder, StatusReason: t.StatusReason,
		CreateTime: t.CreateTime.AsTime(), UpdateTime: t.UpdateTime.AsTime(), ProjectID: t.ProjectId,
	}
	if pr := t.PullRequest; pr != nil {
		r.PullRequestRepo, r.PullRequestNumber, r.PullRequestURL = pr.Repo, pr.Number, pr.Url
	}
	if t.CompleteTime != nil {
		ct := t.CompleteTime.AsTime()
		r.CompleteTime = &ct
	}
	return r
}

func (r taskRecord) proto() *tasksv1.Task {
	t := &tasksv1.Task{
		Id: r.ID, OwnerId: r.OwnerID, Repo: r.Repo, Title: r.Title, Description: r.Description,
		Status: parseStatus(r.Status), Source: parseSource(r.Source), Priority: parsePriority(r.Priority),
		Labels: r.Labels, BlockedBy: r.BlockedBy, ParentId: r.ParentID, ExternalId: r.ExternalID,
		ExternalUrl: r.ExternalURL, JobId: r.JobID, Complexity: r.Complexity,
		EstimatedTokens: r.EstimatedTokens, PlannedOrder: r.PlannedOrder, StatusReason: r.StatusReason,
		CreateTime: timestamppb.New(r.CreateTime), UpdateTime: timestamppb.New(r.UpdateTime),
		PullRequest: pullRequest(r.PullRequestRepo, r.PullRequestNumber, r.PullRequestURL),
		ProjectId:   r.ProjectID,
	}
	if r.CompleteTime != nil {
		t.CompleteTime = timestamppb.New(*r.CompleteTime)
	}
	return t
}

// change is what one event records.
type change struct {
	typ            tasksv1.TaskEventType
	task           *tasksv1.Task
	previousStatus tasksv1.TaskStatus
	// changedFields are the proto field names an UPDATED event changed.
	changedFields []string
	// previousRepo is the repository before an UPDATED event moved the task.
	previousRepo string
}

// appendEvent records c in tx.
func appendEvent(ctx context.Context, tx pgx.Tx, c change) error {
	se := storedEvent{V: payloadVersion, Task: recordOf(c.task), ChangedFields: c.changedFields, PreviousRepo: c.previousRepo}
	if c.typ == evStatusChanged {
		se.PreviousStatus = StatusName(c.previousStatus)
	}
	payload, err := json.Marshal(se)
	if err != nil {
		return fmt.Errorf("store: marshal event: %w", err)
	}
	_, err = events.Append(ctx, tx, events.Event{
		Stream:      EventStream,
		AggregateID: c.task.Id,
		OwnerID:     c.task.OwnerId,
		Scope:       c.task.Repo,
		PrevScope:   c.previousRepo,
		Type:        enumName(c.typ.String(), "TASK_EVENT_TYPE_"),
		Payload:     payload,
	})
	return err
}

// decodeEvent builds the API message of a stored event.
func decodeEvent(e events.Event) (*tasksv1.WatchTasksResponse, error) {
	var se storedEvent
	if err := json.Unmarshal(e.Payload, &se); err != nil {
		return nil, fmt.Errorf("store: event %d: decode: %w", e.ID, err)
	}
	if se.V != payloadVersion {
		return nil, fmt.Errorf("store: event %d: payload version %d, this build reads %d", e.ID, se.V, payloadVersion)
	}
	typ := tasksv1.TaskEventType(tasksv1.TaskEventType_value["TASK_EVENT_TYPE_"+upper(e.Type)])
	resp := &tasksv1.WatchTasksResponse{
		Id:     e.ID,
		Time:   timestamppb.New(e.CreateTime),
		Type:   typ,
		TaskId: e.AggregateID,
	}
	t := se.Task.proto()
	switch typ {
	case evCreated:
		resp.Payload = &tasksv1.WatchTasksResponse_Task{Task: t}
	case evUpdated:
		resp.Payload = &tasksv1.WatchTasksResponse_Updated{Updated: &tasksv1.TaskUpdate{
			Task: t, ChangedFields: &fieldmaskpb.FieldMask{Paths: se.ChangedFields}, PreviousRepo: se.PreviousRepo,
		}}
	case evStatusChanged:
		resp.Payload = &tasksv1.WatchTasksResponse_StatusChange{StatusChange: &tasksv1.TaskStatusChange{
			PreviousStatus: parseStatus(se.PreviousStatus), Task: t,
		}}
	case evDeleted:
		resp.Payload = &tasksv1.WatchTasksResponse_Deleted{Deleted: &tasksv1.TaskDeleted{TaskId: t.Id, Repo: t.Repo}}
	default:
		return nil, fmt.Errorf("store: event %d: unknown type %q", e.ID, e.Type)
	}
	return resp, nil
}

// WatchHandler is the task stream's Watch handler (events.Handler): the service sets its
// heartbeat interval and watch bounds. A task's events are found under the repository it
// had after the change and, when the change moved it, under the one before (the scope).
func (s *Store) WatchHandler() *events.Handler[*tasksv1.WatchTasksResponse] {
	return &events.Handler[*tasksv1.WatchTasksResponse]{
		Hub: s.hub, Stream: EventStream, Decode: decodeEvent,
		Heartbeat: func(hb *typev1.Heartbeat) *tasksv1.WatchTasksResponse {
			return &tasksv1.WatchTasksResponse{Time: hb.Time, Payload: &tasksv1.WatchTasksResponse_Heartbeat{Heartbeat: hb}}
		},
	}
}

// WatchState reports whether owner's task id is finished, for a watch of it: a task only
// finishes by being deleted (a closed one may reopen), which its DELETED event still says
// while retention keeps it. errs.ErrNotFound when owner has no such task and had none.
func (s *Store) WatchState(ctx context.Context, owner, id string) (finished bool, err error) {
	var exists, deleted bool
	if err := s.pool.QueryRow(ctx, `SELECT
			EXISTS (SELECT 1 FROM tasks WHERE id = $1::uuid AND owner_id = $2),
			EXISTS (SELECT 1 FROM events WHERE aggregate_id = $1::text AND stream = $3 AND owner_id = $2 AND type = $4)`,
		id, owner, EventStream, enumName(evDeleted.String(), "TASK_EVENT_TYPE_")).Scan(&exists, &deleted); err != nil {
		return false, fmt.Errorf("store: task %s: %w", id, err)
	}
	if !exists && !deleted {
		return false, fmt.Errorf("task %s: %w", id, errs.ErrNotFound)
	}
	return !exists, nil
}

// Deleted reports whether e is a task's DELETED event, the end of a watch of that task.
func Deleted(e *tasksv1.WatchTasksResponse) bool { return e.Type == evDeleted }

// LatestEventID is the id of the newest task event of any owner: the cursor of a watch
// "from now".
func (s *Store) LatestEventID(ctx context.Context) (int64, error) {
	return events.Latest(ctx, s.pool)
}

func pullRequest(repo string, number int32, url string) *typev1.PullRequestRef {
	if repo == "" && number == 0 && url == "" {
		return nil
	}
	return &typev1.PullRequestRef{Repo: repo, Number: number, Url: url}
}
