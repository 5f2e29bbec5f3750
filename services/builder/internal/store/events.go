package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/events"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// EventStream is the events stream every build event is written to.
const EventStream = "build"

// The outbox payload is the event message in protojson with proto field names (without id
// and time, which are the row's). Field names are part of the v1 contract (buf's FILE
// breaking rules keep them), so stored history stays readable across releases; a change
// of form would bump the stream's event type names and keep a decoder for the old ones.

// queueEvents queues evs of build b on batch. The event's scope is the build's agent job, so
// WatchBuild can follow the builds of one job.
func queueEvents(batch *pgx.Batch, b *Build, evs []*builderv1.WatchBuildResponse) error {
	out := make([]events.Event, 0, len(evs))
	for _, e := range evs {
		e.BuildId, e.JobId = b.Id, b.JobId
		payload, err := jsonOut.Marshal(e)
		if err != nil {
			return fmt.Errorf("store: marshal event: %w", err)
		}
		out = append(out, events.Event{
			Stream: EventStream, AggregateID: b.Id, OwnerID: b.OwnerId, Scope: b.JobId,
			Type: enumName(e.Type, "BUILD_EVENT_TYPE_"), Payload: payload,
		})
	}
	return events.QueueAppend(batch, nil, out...)
}

func decodeEvent(e events.Event) (*builderv1.WatchBuildResponse, error) {
	resp := &builderv1.WatchBuildResponse{}
	if err := jsonIn.Unmarshal(e.Payload, resp); err != nil {
		return nil, fmt.Errorf("store: event %d: decode: %w", e.ID, err)
	}
	resp.Id, resp.Time = e.ID, timestamppb.New(e.CreateTime)
	return resp, nil
}

// StatusEvent is the STATUS_CHANGED event of b's move from prev.
func StatusEvent(prev builderv1.BuildStatus, b *Build) *builderv1.WatchBuildResponse {
	return &builderv1.WatchBuildResponse{
		Type: builderv1.BuildEventType_BUILD_EVENT_TYPE_STATUS_CHANGED,
		Payload: &builderv1.WatchBuildResponse_StatusChange{StatusChange: &builderv1.BuildStatusChange{
			PreviousStatus: prev, Status: b.Status, Error: b.Error, Usage: b.Usage,
		}},
	}
}

// PhaseEvent is the PHASE_CHANGED event of b's move from prev.
func PhaseEvent(prev builderv1.BuildPhase, b *Build) *builderv1.WatchBuildResponse {
	return &builderv1.WatchBuildResponse{
		Type: builderv1.BuildEventType_BUILD_EVENT_TYPE_PHASE_CHANGED,
		Payload: &builderv1.WatchBuildResponse_PhaseChange{PhaseChange: &builderv1.BuildPhaseChange{
			PreviousPhase: prev, Phase: b.Phase, Strategy: b.Strategy, TotalSteps: b.TotalSteps,
		}},
	}
}

// StepEvent is a STEP_* event of st; buildUsage is the build's usage after it.
func StepEvent(typ builderv1.BuildEventType, st *Step, buildUsage *typev1.Usage) *builderv1.WatchBuildResponse {
	return &builderv1.WatchBuildResponse{
		Type: typ,
		Payload: &builderv1.WatchBuildResponse_Step{Step: &builderv1.StepSummary{
			StepNumber: st.StepNumber, Phase: st.Phase, Kind: st.Kind, PlanStepId: st.PlanStepId, Action: st.Action,
			Path: st.Path, Command: st.Command, Status: st.Status, Model: st.Model, Usage: st.Usage,
			BuildUsage: buildUsage, FixRounds: int32(len(st.FixRounds)), Error: st.Error,
			StartTime: st.StartTime, EndTime: st.EndTime,
		}},
	}
}

// LogEvent is a LOG event.
func LogEvent(step int32, phase builderv1.BuildPhase, msg string) *builderv1.WatchBuildResponse {
	return &builderv1.WatchBuildResponse{
		Type:    builderv1.BuildEventType_BUILD_EVENT_TYPE_LOG,
		Payload: &builderv1.WatchBuildResponse_Log{Log: &builderv1.BuildLog{StepNumber: step, Phase: phase, Message: msg}},
	}
}

// Terminal reports whether e finishes its build (a move to COMPLETED, FAILED or CANCELLED).
func Terminal(e *builderv1.WatchBuildResponse) bool {
	sc := e.GetStatusChange()
	if sc == nil {
		return false
	}
	switch sc.Status {
	case builderv1.BuildStatus_BUILD_STATUS_COMPLETED, builderv1.BuildStatus_BUILD_STATUS_FAILED, builderv1.BuildStatus_BUILD_STATUS_CANCELLED:
		return true
	}
	return false
}

// errStop ends a Watch after a build's terminal event.
var errStop = errors.New("stop")

// WatchOptions are the stream-level choices of Watch.
type WatchOptions struct {
	// Heartbeat, when set, is called with the stream's cursor after HeartbeatEvery without
	// an event (and once at the start, so the stream's headers go out at once).
	Heartbeat      func(cursor int64) error
	HeartbeatEvery time.Duration
}

// Watch calls fn, in order, for each of owner's build events with an id above afterID
// (of build id, or of the builds of jobID, or all), the history first, then new events as
// they commit. Watching one build ends after the event that finishes it.
func (s *Store) Watch(ctx context.Context, owner, id, jobID string, afterID int64, o WatchOptions, fn func(*builderv1.WatchBuildResponse) error) error {
	if owner == "" {
		return errors.New("store: watch: owner is required")
	}
	if err := events.CheckCursor(ctx, s.pool, afterID); err != nil {
		return err
	}
	var opts []events.WatchOption
	if o.Heartbeat != nil {
		if err := o.Heartbeat(afterID); err != nil {
			return err
		}
		opts = append(opts, events.WithHeartbeat(o.HeartbeatEvery, o.Heartbeat))
	}
	// A build's history can hold several endings (FAILED, then RetryStep and a new run): the
	// watch of one build ends at the ending current when it starts, or at a later one.
	var stopFrom int64
	if id != "" {
		if err := s.pool.QueryRow(ctx, `SELECT coalesce(CASE WHEN b.status IN ('completed', 'failed', 'cancelled')
				THEN (SELECT max(e.id) FROM events e WHERE e.stream = $2 AND e.aggregate_id = $1::text AND e.type = 'status_changed')
				ELSE (SELECT max(e.id) + 1 FROM events e WHERE e.stream = $2 AND e.aggregate_id = $1::text) END, 0)
			FROM builds b WHERE b.id = $1::uuid`, id, EventStream).Scan(&stopFrom); err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
	}
	filter := events.Filter{Stream: EventStream, OwnerID: owner, AggregateID: id, Scope: jobID}
	err := s.hub.Watch(ctx, afterID, filter, func(e events.Event) error {
		resp, err := decodeEvent(e)
		if err != nil {
			return err
		}
		if err := fn(resp); err != nil {
			return err
		}
		if id != "" && Terminal(resp) && resp.Id >= stopFrom {
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
