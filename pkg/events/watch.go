package events

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// batchSize bounds the rows held in memory per read.
const batchSize = 500

// pollInterval is the fallback when a notification is lost (say, the server's notification
// queue filled up); normally NOTIFY wakes us. A variable so a test can make polling too slow
// to matter and prove that notifications alone wake watchers.
var pollInterval = 2 * time.Second

// Watch calls fn, in id order, for every event matching f with an id greater
// than afterID: first the history, then each new event as it commits. It
// returns ctx.Err() when ctx ends, fn's error as is when fn fails, or a
// database error. Only one connection of pool is used, for as long as Watch
// runs; it is closed afterwards, never returned to the pool, because a
// session that has LISTENed would hand its notifications to the next user.
func Watch(ctx context.Context, pool *pgxpool.Pool, afterID int64, f Filter, fn func(Event) error) error {
	pc, err := pool.Acquire(ctx)
	if err != nil {
		return ctxOr(ctx, fmt.Errorf("events: watch: acquire connection: %w", err))
	}
	conn := pc.Hijack()
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()

	var channel *string
	if err := conn.QueryRow(ctx, "SELECT 'thefold_events_' || current_schema()").Scan(&channel); err != nil {
		return ctxOr(ctx, fmt.Errorf("events: watch: %w", err))
	}
	if channel == nil {
		return errors.New("events: watch: no current schema; open the pool with db.Open")
	}
	// LISTEN before the first read: an event committed after that read is
	// then sure to leave a notification for us.
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{*channel}.Sanitize()); err != nil {
		return ctxOr(ctx, fmt.Errorf("events: watch: listen on %s: %w", *channel, err))
	}

	w := &watcher{conn: conn, filter: f, cursor: afterID}
	for {
		if err := w.catchUp(ctx, fn); err != nil {
			if fe, ok := errors.AsType[fnError](err); ok {
				return fe.err
			}
			return ctxOr(ctx, err)
		}
		if err := w.wait(ctx); err != nil {
			return ctxOr(ctx, err)
		}
	}
}

type watcher struct {
	conn   *pgx.Conn
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
		if err := w.conn.QueryRow(ctx, "SELECT coalesce(max(id), 0) FROM events").Scan(&hi); err != nil {
			return fmt.Errorf("events: watch: read latest id: %w", err)
		}
		if hi <= w.cursor {
			return nil
		}
		query, args := selectSQL(w.filter, w.cursor, hi)
		rows, err := w.conn.Query(ctx, query, args...)
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

// wait returns when a notification arrives, the poll interval passes, or ctx
// ends (then with ctx's error).
func (w *watcher) wait(ctx context.Context) error {
	wctx, cancel := context.WithTimeout(ctx, pollInterval)
	defer cancel()
	_, err := w.conn.WaitForNotification(wctx)
	if err != nil && wctx.Err() == nil {
		return fmt.Errorf("events: watch: wait for notification: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	// Notifications already buffered are for events the next catchUp reads
	// anyway; drop them so a burst of appends costs one read, not one each.
	// An expired context makes WaitForNotification return only what is buffered.
	done, cancelDone := context.WithCancel(ctx)
	cancelDone()
	for {
		if n, _ := w.conn.WaitForNotification(done); n == nil {
			return nil
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
