package events

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/thefold/thefold/pkg/wait"
)

// ErrCursorExpired is matched (errors.Is) by the error of a Watch whose cursor is older
// than what retention kept: events after it were removed, so reading on would skip them.
// The error is a *CursorExpiredError saying where the kept events begin; pkg/errs maps
// it to OUT_OF_RANGE.
var ErrCursorExpired = errors.New("event cursor expired")

// CursorExpiredError reports a cursor below the retention horizon.
type CursorExpiredError struct {
	After         int64 // the cursor
	PrunedThrough int64 // every id <= PrunedThrough may have been removed
}

// OldestKept is the lowest id that can still exist; a cursor of OldestKept-1 or more
// (such as Latest's) is valid.
func (e *CursorExpiredError) OldestKept() int64 { return e.PrunedThrough + 1 }

// Error is safe to show a client: it names only ids.
func (e *CursorExpiredError) Error() string {
	return fmt.Sprintf("cursor %d has expired: events up to id %d were removed by retention; the oldest id kept is %d",
		e.After, e.PrunedThrough, e.OldestKept())
}

// Is makes errors.Is(err, ErrCursorExpired) hold.
func (e *CursorExpiredError) Is(target error) bool { return target == ErrCursorExpired }

// RetentionConfig is the knob a service loads (config.Load) to run retention.
type RetentionConfig struct {
	// MaxAge is how long events are kept; clients can resume from a cursor this old.
	MaxAge time.Duration `env:"THEFOLD_EVENTS_RETENTION, default=168h"`
	// Every is how often old events are pruned.
	Every time.Duration `env:"THEFOLD_EVENTS_PRUNE_INTERVAL, default=1h"`
}

// Validate reports every problem at once.
func (c *RetentionConfig) Validate() error {
	var errs []error
	if c.MaxAge <= 0 {
		errs = append(errs, errors.New("THEFOLD_EVENTS_RETENTION: must be positive"))
	}
	if c.Every <= 0 {
		errs = append(errs, errors.New("THEFOLD_EVENTS_PRUNE_INTERVAL: must be positive"))
	}
	return errors.Join(errs...)
}

// pruneBatch bounds the rows one DELETE removes, so each transaction stays short.
const pruneBatch = 5000

// Prune removes the events older than olderThan (by the database's clock) and returns how
// many it removed. It removes a prefix of ids, stopping at the first event that is still
// young (create_time is the appending transaction's start, so it is not strictly ordered
// with ids; an old event just after a young one waits for a later Prune). Each batch
// raises the retention horizon in the same transaction as it deletes, so a Watch from a
// cursor below it fails with ErrCursorExpired instead of silently skipping events.
// Replicas may prune concurrently.
func Prune(ctx context.Context, q RowQuerier, olderThan time.Duration) (int64, error) {
	if olderThan <= 0 {
		return 0, fmt.Errorf("events: prune: age %v must be positive", olderThan)
	}
	var bound int64
	err := q.QueryRow(ctx, `SELECT coalesce(
		(SELECT id FROM events WHERE create_time >= now() - $1 * interval '1 microsecond' ORDER BY id LIMIT 1) - 1,
		(SELECT max(id) FROM events),
		0)`, olderThan.Microseconds()).Scan(&bound)
	if err != nil {
		return 0, fmt.Errorf("events: prune: find old events: %w", err)
	}
	var total int64
	for {
		var n int64
		err := q.QueryRow(ctx, `WITH gone AS (
			DELETE FROM events WHERE id IN (
				SELECT id FROM events WHERE id <= $1 ORDER BY id LIMIT $2)
			RETURNING id
		), stats AS (
			SELECT max(id) AS top, count(*) AS n FROM gone
		), horizon AS (
			UPDATE events_horizon SET pruned_through = greatest(pruned_through, stats.top)
			FROM stats WHERE stats.top IS NOT NULL
			RETURNING 1
		)
		SELECT n FROM stats`, bound, pruneBatch).Scan(&n)
		if err != nil {
			return total, fmt.Errorf("events: prune through id %d: %w", bound, err)
		}
		total += n
		if n < pruneBatch {
			return total, nil
		}
	}
}

// RunRetention prunes events older than maxAge now and then every interval until ctx
// ends, and returns ctx's error. A failed prune is logged and tried again at the next
// interval: retention is housekeeping, and a passing database failure must not stop the
// service. Run it in the service's background group beside Run.
func (h *Hub) RunRetention(ctx context.Context, every, maxAge time.Duration) error {
	if every <= 0 || maxAge <= 0 {
		return fmt.Errorf("events: retention: interval %v and age %v must be positive", every, maxAge)
	}
	prune := func(ctx context.Context) {
		n, err := Prune(ctx, h.pool, maxAge)
		switch {
		case ctx.Err() != nil:
		case err != nil:
			h.log.ErrorContext(ctx, "events retention: prune failed", "err", err, "pruned", n)
		case n > 0:
			h.log.InfoContext(ctx, "events retention: pruned old events", "pruned", n, "max_age", maxAge)
		}
	}
	prune(ctx)
	wait.Every(ctx, every, prune)
	return ctx.Err()
}

// CheckCursor fails with a *CursorExpiredError when retention has removed events after
// afterID; 0 (the retained history) always passes. A stream checks its cursor with it
// before it answers anything, so a client learns at once that it must start over; Watch
// checks again as it reads.
func CheckCursor(ctx context.Context, q RowQuerier, afterID int64) error {
	if afterID == 0 {
		return nil
	}
	var horizon int64
	if err := q.QueryRow(ctx, "SELECT pruned_through FROM events_horizon").Scan(&horizon); err != nil {
		return fmt.Errorf("events: read retention horizon: %w", err)
	}
	if horizon > afterID {
		return &CursorExpiredError{After: afterID, PrunedThrough: horizon}
	}
	return nil
}
