package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/events"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/protoenum"
)

// EventStream is the events stream every job event is written to.
const EventStream = "job"

// queueEvents queues evs of job j on batch (payload: the event in protojson with proto
// field names, without id and time, which are the row's).
func queueEvents(batch *pgx.Batch, j *agentv1.Job, evs []*agentv1.WatchJobResponse) error {
	out := make([]events.Event, 0, len(evs))
	for _, e := range evs {
		e.JobId = j.Id
		payload, err := jsonOut.Marshal(e)
		if err != nil {
			return fmt.Errorf("store: marshal event: %w", err)
		}
		out = append(out, events.Event{
			Stream: EventStream, AggregateID: j.Id, OwnerID: j.OwnerId, Scope: j.ProjectId,
			Type: protoenum.Name(e.Type, "JOB_EVENT_TYPE_"), Payload: payload,
		})
	}
	return events.QueueAppend(batch, nil, out...)
}

func decodeEvent(e events.Event) (*agentv1.WatchJobResponse, error) {
	resp := &agentv1.WatchJobResponse{}
	if err := jsonIn.Unmarshal(e.Payload, resp); err != nil {
		return nil, fmt.Errorf("store: event %d: decode: %w", e.ID, err)
	}
	resp.Id, resp.Time = e.ID, timestamppb.New(e.CreateTime)
	return resp, nil
}

// StatusEvent is the STATUS_CHANGED event of j's move from prev.
func StatusEvent(prev agentv1.JobStatus, j *agentv1.Job) *agentv1.WatchJobResponse {
	return &agentv1.WatchJobResponse{
		Type: agentv1.JobEventType_JOB_EVENT_TYPE_STATUS_CHANGED,
		Payload: &agentv1.WatchJobResponse_StatusChange{StatusChange: &agentv1.JobStatusChange{
			PreviousStatus: prev, Status: j.Status, Reason: j.StatusReason,
		}},
	}
}

// PhaseEvent is the PHASE_CHANGED event of j's move from prev.
func PhaseEvent(prev agentv1.JobPhase, j *agentv1.Job) *agentv1.WatchJobResponse {
	return &agentv1.WatchJobResponse{
		Type:    agentv1.JobEventType_JOB_EVENT_TYPE_PHASE_CHANGED,
		Payload: &agentv1.WatchJobResponse_PhaseChanged{PhaseChanged: &agentv1.JobPhaseChange{PreviousPhase: prev, Phase: j.Phase, Attempt: j.Attempt}},
	}
}

// ThoughtEvent is a THOUGHT event: one line for people watching.
func ThoughtEvent(text string) *agentv1.WatchJobResponse {
	return &agentv1.WatchJobResponse{
		Type:    agentv1.JobEventType_JOB_EVENT_TYPE_THOUGHT,
		Payload: &agentv1.WatchJobResponse_Thought{Thought: &agentv1.JobThought{Text: text}},
	}
}

// Finishing reports whether e ends its job: a move to a terminal status.
func Finishing(e *agentv1.WatchJobResponse) bool {
	sc := e.GetStatusChange()
	return sc != nil && Terminal(sc.Status)
}

// WatchHandler is the job stream's Watch handler (events.Handler): the service sets its
// heartbeat interval and watch bounds.
func (s *Store) WatchHandler() *events.Handler[*agentv1.WatchJobResponse] {
	return &events.Handler[*agentv1.WatchJobResponse]{
		Hub: s.hub, Stream: EventStream, Decode: decodeEvent,
		Heartbeat: func(hb *typev1.Heartbeat) *agentv1.WatchJobResponse {
			return &agentv1.WatchJobResponse{Time: hb.Time, Payload: &agentv1.WatchJobResponse_Heartbeat{Heartbeat: hb}}
		},
	}
}

// WatchState reports whether owner's job id is finished (a terminal status), for a watch of
// it; errs.ErrNotFound when there is no such job of owner's.
func (s *Store) WatchState(ctx context.Context, owner, id string) (finished bool, err error) {
	var status string
	err = s.pool.QueryRow(ctx, "SELECT status FROM jobs WHERE id = $1 AND owner_id = $2", id, owner).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("job %s: %w", id, errs.ErrNotFound)
	}
	if err != nil {
		return false, fmt.Errorf("store: job %s: %w", id, err)
	}
	return Terminal(parseStatus(status)), nil
}
