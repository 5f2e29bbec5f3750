package events

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// batchSize bounds the rows held in memory per read.
const batchSize = 500

// defaultPollInterval is the fallback when a notification is lost (say, while the hub
// reconnects); normally NOTIFY wakes watchers.
const defaultPollInterval = 2 * time.Second

// Hub shares one LISTEN session among every watcher of a pool's schema. Without it each
// Watch stream would hold a database session of its own for its whole life — sessions that
// live outside the pool's limit — so the number of open streams would be bounded only by the
// server's max_connections. With a Hub, a watcher holds no session between reads: it reads
// through the pool and sleeps on a channel the Hub signals when a notification arrives.
type Hub struct {
	pool *pgxpool.Pool
	poll time.Duration

	mu   sync.Mutex
	subs map[chan struct{}]struct{}
}

// NewHub returns a Hub over pool (opened with db.Open, so current_schema() is the
// service's). Call Run to start listening; until it listens, watchers fall back to polling.
func NewHub(pool *pgxpool.Pool) *Hub {
	return &Hub{pool: pool, poll: defaultPollInterval, subs: map[chan struct{}]struct{}{}}
}

// Run listens for the schema's notifications until ctx ends, reconnecting after failures,
// and returns ctx's error. Each (re)connection wakes every watcher, so whatever committed
// while nobody listened is read then.
func (h *Hub) Run(ctx context.Context) error {
	backoff := 100 * time.Millisecond
	for {
		err := h.listen(ctx)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			backoff = min(backoff*2, 5*time.Second)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
	}
}

func (h *Hub) listen(ctx context.Context) error {
	pc, err := h.pool.Acquire(ctx)
	if err != nil {
		return fmt.Errorf("events: hub: acquire connection: %w", err)
	}
	// A session that has LISTENed must never go back to the pool: it would hand its
	// notifications to the next user. Hijack takes it out; we close it ourselves.
	conn := pc.Hijack()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	var channel *string
	if err := conn.QueryRow(ctx, "SELECT 'thefold_events_' || current_schema()").Scan(&channel); err != nil {
		return fmt.Errorf("events: hub: %w", err)
	}
	if channel == nil {
		return errors.New("events: hub: no current schema; open the pool with db.Open")
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{*channel}.Sanitize()); err != nil {
		return fmt.Errorf("events: hub: listen on %s: %w", *channel, err)
	}
	h.wakeAll()
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return fmt.Errorf("events: hub: wait for notification: %w", err)
		}
		h.wakeAll()
	}
}

// wakeAll signals every watcher. The channels hold one signal: a burst of notifications
// costs a watcher one read, not one read each.
func (h *Hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for c := range h.subs {
		select {
		case c <- struct{}{}:
		default:
		}
	}
}

func (h *Hub) subscribe() (chan struct{}, func()) {
	c := make(chan struct{}, 1)
	h.mu.Lock()
	h.subs[c] = struct{}{}
	h.mu.Unlock()
	return c, func() {
		h.mu.Lock()
		delete(h.subs, c)
		h.mu.Unlock()
	}
}

// Watchers returns the number of active watchers.
func (h *Hub) Watchers() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.subs)
}

// Watch calls fn, in id order, for every event matching f with an id greater than afterID:
// first the history, then each new event as it commits. It returns ctx.Err() when ctx ends,
// fn's error as is when fn fails, or a database error. Between reads it holds no database
// session.
func (h *Hub) Watch(ctx context.Context, afterID int64, f Filter, fn func(Event) error) error {
	// Subscribe before the first read: an event committed after that read is then sure to
	// leave a signal for us.
	wake, unsubscribe := h.subscribe()
	defer unsubscribe()
	w := &watcher{pool: h.pool, filter: f, cursor: afterID}
	for {
		if err := w.catchUp(ctx, fn); err != nil {
			if fe, ok := errors.AsType[fnError](err); ok {
				return fe.err
			}
			return ctxOr(ctx, err)
		}
		timer := time.NewTimer(h.poll)
		select {
		case <-ctx.Done():
			timer.Stop()
			return ctx.Err()
		case <-wake:
		case <-timer.C:
		}
		timer.Stop()
	}
}

type watcher struct {
	pool   *pgxpool.Pool
	filter Filter
	cursor int64 // every id <= cursor has been read (or never will exist)
}

// catchUp delivers every matching event committed so far. The upper bound hi
// is the largest id visible now; since ids become visible in id order (see
// Append), every id <= hi is settled, and the cursor may jump to hi even
// past rows that did not match.
func (w *watcher) catchUp(ctx context.Context, fn func(Event) error) error {
	for {
		var hi int64
		if err := w.pool.QueryRow(ctx, "SELECT coalesce(max(id), 0) FROM events").Scan(&hi); err != nil {
			return fmt.Errorf("events: watch: read latest id: %w", err)
		}
		if hi <= w.cursor {
			return nil
		}
		query, args := selectSQL(w.filter, w.cursor, hi)
		rows, err := w.pool.Query(ctx, query, args...)
		if err != nil {
			return fmt.Errorf("events: watch: read after %d: %w", w.cursor, err)
		}
		batch, err := pgx.CollectRows(rows, scanEvent)
		if err != nil {
			return fmt.Errorf("events: watch: read after %d: %w", w.cursor, err)
		}
		for _, e := range batch {
			if err := ctx.Err(); err != nil {
				return err
			}
			if err := fn(e); err != nil {
				return fnError{err}
			}
			w.cursor = e.ID
		}
		if len(batch) < batchSize {
			w.cursor = hi
		}
	}
}

// selectSQL reads the next batch in (after, hi]. Only the filters in use
// appear in the SQL, so each combination gets its own prepared statement
// and plan, and the planner can pick the matching (column, id) index.
func selectSQL(f Filter, after, hi int64) (string, []any) {
	q := `SELECT id, stream, aggregate_id, owner_id, scope, type, payload, create_time
		FROM events WHERE id > $1 AND id <= $2`
	args := []any{after, hi}
	for _, c := range []struct{ col, val string }{
		{"stream", f.Stream}, {"aggregate_id", f.AggregateID}, {"owner_id", f.OwnerID}, {"scope", f.Scope},
	} {
		if c.val != "" {
			args = append(args, c.val)
			q += " AND " + c.col + " = $" + strconv.Itoa(len(args))
		}
	}
	return q + " ORDER BY id LIMIT " + strconv.Itoa(batchSize), args
}

func scanEvent(row pgx.CollectableRow) (Event, error) {
	var e Event
	err := row.Scan(&e.ID, &e.Stream, &e.AggregateID, &e.OwnerID, &e.Scope, &e.Type, &e.Payload, &e.CreateTime)
	return e, err
}

// fnError carries the callback's error out unchanged.
type fnError struct{ err error }

func (e fnError) Error() string { return e.err.Error() }

// ctxOr prefers ctx's error: once ctx ends, whatever failed failed because of it.
func ctxOr(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return err
}
