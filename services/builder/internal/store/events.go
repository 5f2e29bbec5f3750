package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/errs"
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

// Terminal reports whether e finishes its build (a move to COMPLETED, FAILED or CANCELLED;
// not PAUSED: a paused build waits to be resumed or cancelled, and a watch of it stays open).
func Terminal(e *builderv1.WatchBuildResponse) bool {
	sc := e.GetStatusChange()
	return sc != nil && terminalStatus(sc.Status)
}

func terminalStatus(s builderv1.BuildStatus) bool {
	switch s {
	case builderv1.BuildStatus_BUILD_STATUS_COMPLETED, builderv1.BuildStatus_BUILD_STATUS_FAILED, builderv1.BuildStatus_BUILD_STATUS_CANCELLED:
		return true
	}
	return false
}

// WatchHandler is the build stream's Watch handler (events.Handler): the service sets its
// heartbeat interval and watch bounds. A build's history can hold several endings (FAILED,
// then RetryStep and a new run): the handler ends a watch of one build at the ending
// current when it starts, or at one that commits later.
func (s *Store) WatchHandler() *events.Handler[*builderv1.WatchBuildResponse] {
	return &events.Handler[*builderv1.WatchBuildResponse]{
		Hub: s.hub, Stream: EventStream, Decode: decodeEvent,
		Heartbeat: func(hb *typev1.Heartbeat) *builderv1.WatchBuildResponse {
			return &builderv1.WatchBuildResponse{Time: hb.Time, Payload: &builderv1.WatchBuildResponse_Heartbeat{Heartbeat: hb}}
		},
	}
}

// WatchState reports whether owner's build id is finished (COMPLETED, FAILED or
// CANCELLED; a PAUSED build is not), for a watch of it; errs.ErrNotFound when there is no such build of owner's.
func (s *Store) WatchState(ctx context.Context, owner, id string) (finished bool, err error) {
	var status string
	err = s.pool.QueryRow(ctx, "SELECT status FROM builds WHERE id = $1 AND owner_id = $2", id, owner).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return false, fmt.Errorf("build %s: %w", id, errs.ErrNotFound)
	}
	if err != nil {
		return false, fmt.Errorf("store: build %s: %w", id, err)
	}
	return terminalStatus(parseStatus(status)), nil
}

// LatestEventID is the cursor of a watch "from now".
func (s *Store) LatestEventID(ctx context.Context) (int64, error) { return events.Latest(ctx, s.pool) }
