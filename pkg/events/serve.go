package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// Handler is the one Watch handler: every Watch RPC (WatchTasks, WatchJob, WatchBuild, …)
// is a Handler over its service's stream of events and its message type R, so they all keep
// the same rules (the envelope of thefold/type/v1/event.proto):
//
//   - the first message of every stream is a heartbeat at the starting cursor, so the
//     response headers go out at once, also when there is nothing to send;
//   - a cursor older than what retention kept is refused (ErrCursorExpired: OUT_OF_RANGE);
//   - a watch of one resource that does not exist or is someone else's is refused (its
//     State's error: NOT_FOUND);
//   - a watch of one resource ends when the resource is finished: after the event that
//     finished it (or, when it was finished before the watch began, after its last event),
//     a heartbeat with End set is the last message; a watch of many never ends by itself;
//   - at most Watches' share of streams run at once.
type Handler[R any] struct {
	Hub *Hub
	// Stream is the events stream the service writes its resources' events to ("job").
	Stream string
	// Decode turns an event of Stream into the RPC's message.
	Decode func(Event) (R, error)
	// Heartbeat wraps a heartbeat in the RPC's message (id 0, type UNSPECIFIED).
	Heartbeat func(*typev1.Heartbeat) R
	// Every is how long a stream may stay silent before a heartbeat (0: only the first).
	Every time.Duration
	// Watches bounds the streams running at once; nil: no bound.
	Watches *Watches
}

// Watch is one Watch request, checked by the service.
type Watch[R any] struct {
	// AfterID and FromNow are the request's cursor (AfterID >= 0 is checked here).
	AfterID int64
	FromNow bool
	// OwnerID is whose events the stream carries; required.
	OwnerID string
	// Scope narrows the stream to the events of one scope (e.g. a repository); "" for all.
	Scope string
	// ID, when set, is the one resource watched: its events' aggregate id.
	ID string
	// State reports whether resource ID is finished; its error (errs.ErrNotFound when the
	// resource does not exist or is someone else's) refuses the watch. Required with ID.
	State func(ctx context.Context) (finished bool, err error)
	// Related widens a watch of resource ID to the events of every stream whose Scope is
	// Scope (e.g. a project's task jobs, scoped by the project's id, beside the project's
	// own events); Decode then sees events of other streams too. The end of the watch is
	// still decided by resource ID's own events.
	Related bool
	// Ends reports whether an event finishes resource ID (a move to a terminal status, a
	// deletion). Only events that commit after the watch began count, so a resource that
	// finished, was reopened and runs again is followed to its next end.
	Ends func(R) bool
}

// errEnd stops the hub's Watch once the watched resource has finished.
var errEnd = errors.New("events: the watched resource is finished")

// Serve runs the stream of w, calling send for each message, until the client goes away,
// send fails, or the resource watched is finished (nil then). Its error is what the Watch
// RPC returns (StreamEnd's).
func (h *Handler[R]) Serve(ctx context.Context, w Watch[R], send func(R) error) error {
	return StreamEnd(ctx, h.serve(ctx, w, send))
}

func (h *Handler[R]) serve(ctx context.Context, w Watch[R], send func(R) error) error {
	if w.AfterID < 0 {
		return invalid("after_id", "must not be negative")
	}
	if w.OwnerID == "" {
		// An empty owner would match every owner's events.
		return errors.New("events: serve watch: owner is required")
	}
	if h.Hub == nil {
		return errors.New("events: serve watch: no hub")
	}
	if w.ID != "" && w.State == nil {
		return errors.New("events: serve watch: a watch of one resource needs its State")
	}
	if h.Watches != nil {
		leave, err := h.Watches.Enter(ctx)
		if err != nil {
			return err
		}
		defer leave()
	}
	pool := h.Hub.pool
	after, err := Start(ctx, w.AfterID, w.FromNow, func(ctx context.Context) (int64, error) { return Latest(ctx, pool) })
	if err != nil {
		return err
	}
	if err := CheckCursor(ctx, pool, after); err != nil {
		return err
	}
	// The end of a watch of one resource. Its last event id is read before its state: an
	// event that finishes it and commits after that read has a higher id, so it counts; one
	// that committed before shows in the state as finished, and then the watch ends at the
	// resource's last event, read again after the state.
	var (
		finished      bool
		lastAt, endAt int64
	)
	if w.ID != "" {
		if lastAt, err = h.lastEvent(ctx, w.ID); err != nil {
			return err
		}
		if finished, err = w.State(ctx); err != nil {
			return err
		}
		if finished {
			if endAt, err = h.lastEvent(ctx, w.ID); err != nil {
				return err
			}
		}
	}
	beat := func(cursor int64, end bool) error {
		now := timestamppb.Now()
		return send(h.Heartbeat(&typev1.Heartbeat{Cursor: cursor, Time: now, End: end}))
	}
	if err := beat(after, false); err != nil {
		return err
	}
	if finished && after >= endAt {
		return beat(after, true)
	}
	var endCursor int64
	heartbeat := func(cursor int64) error {
		if finished && cursor >= endAt {
			// The resource's last event is behind the cursor without having been delivered
			// (retention removed it under a watch from the oldest kept): nothing more comes.
			endCursor = cursor
			return errEnd
		}
		return beat(cursor, false)
	}
	filter := Filter{Stream: h.Stream, OwnerID: w.OwnerID, AggregateID: w.ID, Scope: w.Scope}
	if w.Related {
		if w.ID == "" || w.Scope == "" {
			return errors.New("events: serve watch: a related watch needs an ID and a Scope")
		}
		filter.Stream, filter.AggregateID = "", ""
	}
	own := func(e Event) bool { return e.Stream == h.Stream && e.AggregateID == w.ID }
	err = h.Hub.Watch(ctx, after, filter, func(e Event) error {
		msg, err := h.Decode(e)
		if err != nil {
			return err
		}
		if err := send(msg); err != nil {
			return err
		}
		if w.ID != "" && ((finished && e.ID >= endAt) || (!finished && e.ID > lastAt && own(e) && w.Ends != nil && w.Ends(msg))) {
			endCursor = e.ID
			return errEnd
		}
		return nil
	}, WithHeartbeat(h.Every, heartbeat))
	if errors.Is(err, errEnd) {
		return beat(endCursor, true)
	}
	return err
}

// lastEvent is the id of resource id's newest event, 0 if it has none.
func (h *Handler[R]) lastEvent(ctx context.Context, id string) (int64, error) {
	var last int64
	if err := h.Hub.pool.QueryRow(ctx, "SELECT coalesce(max(id), 0) FROM events WHERE aggregate_id = $1 AND stream = $2",
		id, h.Stream).Scan(&last); err != nil {
		return 0, fmt.Errorf("events: last event of %s %s: %w", h.Stream, id, err)
	}
	return last, nil
}

// invalid is errs.Invalid, which this package cannot import (errs maps this package's
// errors): InvalidArgument naming the field, with a BadRequest detail.
func invalid(field, msg string) error {
	st := status.New(codes.InvalidArgument, field+": "+msg)
	if d, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: msg}}}); err == nil {
		return d.Err()
	}
	return st.Err()
}
