package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/events"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
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
		Payload: &agentv1.WatchJobResponse_StatusChanged{StatusChanged: &agentv1.JobStatusChange{
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
	sc := e.GetStatusChanged()
	return sc != nil && Terminal(sc.Status)
}

// errStop ends a Watch after a job's terminal event.
var errStop = errors.New("stop")

// WatchOptions are the stream-level choices of Watch.
type WatchOptions struct {
	// Heartbeat, when set, is called with the stream's cursor after HeartbeatEvery without
	// an event (and once at the start, so the stream's headers go out at once).
	Heartbeat      func(cursor int64) error
	HeartbeatEvery time.Duration
}

// Watch calls fn, in order, for each of owner's job events with an id above afterID (of job
// id, or all), the history first, then new events as they commit. Watching one job ends
// after the event that finishes it.
func (s *Store) Watch(ctx context.Context, owner, id string, afterID int64, o WatchOptions, fn func(*agentv1.WatchJobResponse) error) error {
	if owner == "" {
		return errors.New("store: watch: owner is required")
	}
	if err := events.CheckCursor(ctx, s.pool, afterID); err != nil {
		return err
	}
	if id != "" {
		// A finished job whose last event is at or before the cursor has nothing more to say.
		var done bool
		if err := s.pool.QueryRow(ctx, `SELECT j.status IN ('completed', 'failed', 'cancelled', 'skipped', 'rejected')
				AND coalesce((SELECT max(e.id) FROM events e WHERE e.stream = $2 AND e.aggregate_id = $1::text), 0) <= $3
			FROM jobs j WHERE j.id = $1::uuid`, id, EventStream, afterID).Scan(&done); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if done {
			return nil
		}
	}
	var opts []events.WatchOption
	if o.Heartbeat != nil {
		if err := o.Heartbeat(afterID); err != nil {
			return err
		}
		opts = append(opts, events.WithHeartbeat(o.HeartbeatEvery, o.Heartbeat))
	}
	filter := events.Filter{Stream: EventStream, OwnerID: owner, AggregateID: id}
	err := s.hub.Watch(ctx, afterID, filter, func(e events.Event) error {
		resp, err := decodeEvent(e)
		if err != nil {
			return err
		}
		if err := fn(resp); err != nil {
			return err
		}
		if id != "" && Finishing(resp) {
			return errStop
		}
		return nil
	}, opts...)
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// LatestEventID is the cursor of a watch "from now".
func (s *Store) LatestEventID(ctx context.Context) (int64, error) { return events.Latest(ctx, s.pool) }
