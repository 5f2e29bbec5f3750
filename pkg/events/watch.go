package events

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/db"
)

// batchSize bounds the rows held in memory per read.
const batchSize = 500

// WatchOption configures one Watch.
type WatchOption func(*watcher)

// WithHeartbeat makes Watch call fn(cursor) when no event was delivered (and no heartbeat
// sent) for every (> 0). cursor is the highest id delivered or skipped as not matching: a
// client that reconnects after it misses nothing and reads nothing it has already passed.
// A stream uses it to tell a quiet client that it is alive and how far it has looked.
// An error from fn ends the Watch and is returned as is.
func WithHeartbeat(every time.Duration, fn func(cursor int64) error) WatchOption {
	return func(w *watcher) {
		if every > 0 && fn != nil {
			w.hbEvery, w.hb = every, fn
		}
	}
}

// Watch calls fn, in id order, for every event matching f with an id greater than afterID:
// first the history, then each new event as it commits. An afterID of 0 is the retained
// history: it starts after whatever retention removed. It returns ctx.Err() when ctx ends,
// fn's (or a heartbeat's) error as is when it fails, an error matching ErrCursorExpired
// when retention has removed events after afterID, or a database error. Between reads it
// holds no database session. fn must not modify the event's Payload, which watchers share.
func (h *Hub) Watch(ctx context.Context, afterID int64, f Filter, fn func(Event) error, opts ...WatchOption) error {
	h.watchers.Add(1)
	defer h.watchers.Add(-1)
	w := &watcher{hub: h, filter: f, cursor: afterID, fromOldest: afterID == 0, fn: fn, sub: newSub(f), lastSent: time.Now()}
	for _, o := range opts {
		o(w)
	}
	defer h.leave(w.sub)
	err := w.run(ctx)
	if ce, ok := errors.AsType[callerError](err); ok {
		return ce.err
	}
	return ctxOr(ctx, err)
}

type watcher struct {
	hub    *Hub
	filter Filter
	fn     func(Event) error
	sub    *sub
	cursor int64 // every id <= cursor has been delivered or skipped (or never will exist)
	// fromOldest: the watch started at 0, "the retained history"; delivered: fn was called.
	fromOldest, delivered bool

	hbEvery  time.Duration
	hb       func(int64) error
	lastSent time.Time // of the last event or heartbeat
}

// run alternates between catching up on its own and following the hub's fan-out, which
// it leaves only when the hub drops it (it overflowed its buffer, or the hub stopped).
func (w *watcher) run(ctx context.Context) error {
	for {
		if err := w.catchUp(ctx); err != nil {
			return err
		}
		if err := w.follow(ctx); err != nil {
			return err
		}
	}
}

// catchUp reads history from the cursor through the pool until the cursor reaches the
// hub's position, then joins the fan-out. The join happens under the hub's lock, with
// the cursor at or past the position, so the fan-out starts exactly where the history
// ended: no gap, and the ids <= cursor it may repeat are skipped by follow.
func (w *watcher) catchUp(ctx context.Context) error {
	var poll *time.Timer
	defer func() {
		if poll != nil {
			poll.Stop()
		}
	}()
	for {
		joined, ready, hi, readyCh := w.hub.join(w.sub, w.cursor)
		if joined {
			return nil
		}
		if !ready {
			// Nobody runs the hub (yet): read up to what is committed now and poll.
			var err error
			if hi, err = Latest(ctx, w.hub.pool); err != nil {
				return fmt.Errorf("events: watch: read latest id: %w", err)
			}
		}
		if w.cursor < hi {
			if err := w.readHistory(ctx, hi); err != nil {
				return err
			}
			continue
		}
		if poll == nil {
			poll = time.NewTimer(w.hub.pollInterval())
		} else {
			poll.Reset(w.hub.pollInterval())
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-readyCh:
		case <-poll.C:
		case <-w.heartbeatDue():
		}
		if err := w.heartbeat(); err != nil {
			return err
		}
	}
}

// readHistory delivers the matching events in (cursor, hi]. Every id <= hi is settled
// (ids become visible in id order, see Append), so the cursor may jump to hi past rows
// that did not match.
func (w *watcher) readHistory(ctx context.Context, hi int64) error {
	for w.cursor < hi {
		batch, horizon, err := readAfter(ctx, w.hub.pool, w.filter, w.cursor, hi)
		if err != nil {
			return err
		}
		// The horizon is read after the batch: if retention removed anything past the
		// cursor before the batch was read, it shows here, and nothing with a gap is
		// delivered.
		if horizon > w.cursor {
			if w.fromOldest && !w.delivered {
				// afterID 0 asks for the retained history, whatever retention has removed:
				// start where the kept events begin. Once something was delivered, a
				// prune under the reader is a real gap and is reported.
				w.cursor = horizon
				continue
			}
			return &CursorExpiredError{After: w.cursor, PrunedThrough: horizon}
		}
		if err := w.deliver(ctx, batch); err != nil {
			return err
		}
		if len(batch) < batchSize {
			w.cursor = hi
		}
		if err := w.heartbeat(); err != nil {
			return err
		}
	}
	return nil
}

// follow delivers what the hub hands this watcher until the hub drops it.
func (w *watcher) follow(ctx context.Context) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w.sub.wake:
		case <-w.heartbeatDue():
			// Take the mailbox first: its upTo is the cursor a heartbeat reports.
		}
		pending, upTo, evicted := w.sub.take()
		if evicted {
			return nil // read from the cursor again
		}
		if err := w.deliver(ctx, pending); err != nil {
			return err
		}
		w.cursor = max(w.cursor, upTo)
		if err := w.heartbeat(); err != nil {
			return err
		}
	}
}

// deliver calls fn for each event past the cursor, in order.
func (w *watcher) deliver(ctx context.Context, es []Event) error {
	for _, e := range es {
		if e.ID <= w.cursor {
			continue // handed out by the hub before this watcher's history read ended
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := w.fn(e); err != nil {
			return callerError{err}
		}
		w.cursor = e.ID
		w.delivered = true
		w.lastSent = time.Now()
	}
	return nil
}

// heartbeatDue returns a channel that fires when a heartbeat is due, nil without one.
func (w *watcher) heartbeatDue() <-chan time.Time {
	if w.hb == nil {
		return nil
	}
	return time.After(time.Until(w.lastSent.Add(w.hbEvery)))
}

// heartbeat sends one if none was sent and no event delivered for the interval.
func (w *watcher) heartbeat() error {
	if w.hb == nil || time.Since(w.lastSent) < w.hbEvery {
		return nil
	}
	w.lastSent = time.Now()
	if err := w.hb(w.cursor); err != nil {
		return callerError{err}
	}
	return nil
}

// readAfter reads the next batch of events matching f in (after, hi] (hi 0: no bound),
// then the retention horizon, in one round trip. The two statements run in this order,
// so a horizon at or below after proves the batch missed nothing to retention.
func readAfter(ctx context.Context, q batchSender, f Filter, after, hi int64) ([]Event, int64, error) {
	query, args := selectSQL(f, after, hi)
	b := &pgx.Batch{}
	b.Queue(query, args...)
	b.Queue("SELECT pruned_through FROM events_horizon")
	br := q.SendBatch(ctx, b)
	defer br.Close()
	rows, err := br.Query()
	if err != nil {
		return nil, 0, fmt.Errorf("events: read after %d: %w", after, err)
	}
	batch, err := pgx.CollectRows(rows, scanEvent)
	if err != nil {
		return nil, 0, fmt.Errorf("events: read after %d: %w", after, err)
	}
	var horizon int64
	if err := br.QueryRow().Scan(&horizon); err != nil {
		return nil, 0, fmt.Errorf("events: read retention horizon: %w", err)
	}
	if err := br.Close(); err != nil {
		return nil, 0, fmt.Errorf("events: read after %d: %w", after, err)
	}
	return batch, horizon, nil
}

type batchSender interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// selectSQL reads the next batch in (after, hi] (hi 0: no upper bound). Only the filters
// in use appear in the SQL, so each combination gets its own prepared statement and plan,
// and the planner can pick the matching (column, id) index. The scope filter repeats
// prev_scope <> ” so the partial index on prev_scope applies.
func selectSQL(f Filter, after, hi int64) (string, []any) {
	var c db.Conds
	c.Add("id > $%d", after)
	if hi > 0 {
		c.Add("id <= $%d", hi)
	}
	if f.Stream != "" {
		c.Add("stream = $%d", f.Stream)
	}
	if f.AggregateID != "" {
		c.Add("aggregate_id = $%d", f.AggregateID)
	}
	if f.OwnerID != "" {
		c.Add("owner_id = $%d", f.OwnerID)
	}
	if f.Scope != "" {
		c.Add("(scope = $%[1]d OR (prev_scope = $%[1]d AND prev_scope <> ''))", f.Scope)
	}
	return "SELECT " + eventColumns + " FROM events" + c.Where() + " ORDER BY id LIMIT " + strconv.Itoa(batchSize), c.Args
}

// callerError carries an error of the caller's callback (fn or heartbeat) out unchanged.
type callerError struct{ err error }

func (e callerError) Error() string { return e.err.Error() }

// ctxOr prefers ctx's error: once ctx ends, whatever failed failed because of it.
func ctxOr(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return err
}
