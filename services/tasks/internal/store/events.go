package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/events"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

// EventStream is the events stream every task event is written to.
const EventStream = "task"

// appendEvent records what happened to t in tx. The payload is the WatchTasksResponse a
// watcher receives, less the event id and time, which the outbox row assigns.
func appendEvent(ctx context.Context, tx pgx.Tx, typ tasksv1.TaskEventType, t *tasksv1.Task, previous tasksv1.TaskStatus) error {
	payload, err := proto.Marshal(&tasksv1.WatchTasksResponse{Type: typ, Task: t, PreviousStatus: previous})
	if err != nil {
		return fmt.Errorf("store: marshal event: %w", err)
	}
	_, err = events.Append(ctx, tx, events.Event{
		Stream:      EventStream,
		AggregateID: t.Id,
		OwnerID:     t.OwnerId,
		Scope:       t.Repo,
		Type:        enumName(typ.String(), "TASK_EVENT_TYPE_"),
		Payload:     payload,
	})
	return err
}

// WatchFilter narrows Watch; empty fields match anything.
type WatchFilter struct {
	Repo   string
	TaskID string
}

// Watch calls fn, in order, for each of owner's task events with an id above afterID: the
// history first, then new events as they commit, until ctx ends or fn fails. A task's
// events are found under the repository it had after the change.
func (s *Store) Watch(ctx context.Context, owner string, afterID int64, f WatchFilter, fn func(*tasksv1.WatchTasksResponse) error) error {
	if owner == "" {
		// An empty owner would match every owner's events.
		return errors.New("store: watch: owner is required")
	}
	filter := events.Filter{Stream: EventStream, OwnerID: owner, Scope: f.Repo, AggregateID: f.TaskID}
	return s.hub.Watch(ctx, afterID, filter, func(e events.Event) error {
		var resp tasksv1.WatchTasksResponse
		if err := proto.Unmarshal(e.Payload, &resp); err != nil {
			return fmt.Errorf("store: watch: event %d: %w", e.ID, err)
		}
		resp.EventId = e.ID
		resp.EventTime = timestamppb.New(e.CreateTime)
		return fn(&resp)
	})
}
