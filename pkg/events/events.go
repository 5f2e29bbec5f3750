// Package events is the transactional outbox every service keeps in its own
// schema, and the ordered reader behind the Watch… streaming RPCs.
//
// A service appends an event in the same transaction as the change it
// describes; a watcher reads events after a cursor in id order, so a client
// that reconnects with its last id misses nothing and sees nothing twice. A
// Hub (hub.go) listens for the schema's notifications on one session and
// reads each wake-up's new events once for all its watchers (watch.go).
// Retention (retention.go) prunes old events; a cursor older than what is
// kept fails with ErrCursorExpired rather than skipping silently. The tables
// are created by the platform migrations of package db; connections must use
// the service's search_path (db.Open), because the tables, the lock and the
// channel are all resolved through current_schema().
package events

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Event is one row of the outbox.
type Event struct {
	ID          int64
	Stream      string // what kind of thing changed, e.g. "task", "build"
	AggregateID string // which one
	OwnerID     string // who may see it; "" if nobody in particular
	Scope       string // an extra grouping, e.g. a repository; may be ""
	// PrevScope is the scope the aggregate had before this event when the event moved it
	// (a task moved to another repository), else "". A watcher filtered on a scope sees
	// the events whose Scope or PrevScope is that scope, so it learns that a task left.
	PrevScope string
	Type      string // what happened, within the stream, e.g. "status_changed"
	// Payload is opaque to this package; its owner versions its form. Watchers share
	// one copy of each event, so a Watch callback must not modify it.
	Payload    []byte
	CreateTime time.Time
}

// Filter narrows a Watch; an empty field matches any value. Scope matches an event's
// Scope or its PrevScope.
type Filter struct {
	Stream, AggregateID, OwnerID, Scope string
}

// Match reports whether e passes f. It is the in-memory twin of selectSQL: the hub reads
// new events once and hands each watcher those Match accepts.
func (f Filter) Match(e Event) bool {
	return (f.Stream == "" || e.Stream == f.Stream) &&
		(f.AggregateID == "" || e.AggregateID == f.AggregateID) &&
		(f.OwnerID == "" || e.OwnerID == f.OwnerID) &&
		(f.Scope == "" || e.Scope == f.Scope || (e.PrevScope != "" && e.PrevScope == f.Scope))
}

// RowQuerier is what Latest needs: a pool, a connection or a transaction.
type RowQuerier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Append writes e (its ID and CreateTime are ignored and assigned by the
// database) in the caller's transaction, notifies watchers at commit, and
// returns the new id.
//
// Appends to one schema are serialized: Append takes a transaction-scoped
// advisory lock before drawing the id, held until the transaction ends. A
// sequence hands out ids at insert time but transactions commit in any
// order, so without the lock id 7 could become visible while id 6 is still
// uncommitted; a watcher would move its cursor past 6 and never see it. With
// the lock, id n+1 is drawn only after the transaction holding n has
// committed or rolled back, so ids become visible in id order and a cursor
// never skips one. The price is that appending transactions of a schema
// queue behind each other: call Append as the last statement before Commit
// and keep those transactions short. Only Append may insert into events.
func Append(ctx context.Context, tx pgx.Tx, e Event) (int64, error) {
	if e.Stream == "" || e.AggregateID == "" || e.Type == "" {
		return 0, fmt.Errorf("events: append: stream, aggregate id and type are required (got %q, %q, %q)",
			e.Stream, e.AggregateID, e.Type)
	}
	if e.Payload == nil {
		e.Payload = []byte{}
	}
	if e.PrevScope == e.Scope {
		e.PrevScope = "" // not a move
	}
	// One round trip: lock, then insert and notify. NOTIFY is delivered at
	// commit and dropped on rollback, like the row.
	b := &pgx.Batch{}
	b.Queue("SELECT pg_advisory_xact_lock(hashtextextended('thefold_events_' || current_schema(), 0))")
	b.Queue(`WITH ins AS (
		INSERT INTO events (stream, aggregate_id, owner_id, scope, prev_scope, type, payload)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		RETURNING id
	)
	SELECT id, pg_notify('thefold_events_' || current_schema(), id::text)::text FROM ins`,
		e.Stream, e.AggregateID, e.OwnerID, e.Scope, e.PrevScope, e.Type, e.Payload)
	br := tx.SendBatch(ctx, b)
	var id int64
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return 0, fmt.Errorf("events: append %s/%s: lock: %w", e.Stream, e.Type, err)
	}
	if err := br.QueryRow().Scan(&id, nil); err != nil {
		_ = br.Close()
		return 0, fmt.Errorf("events: append %s/%s: insert: %w", e.Stream, e.Type, err)
	}
	if err := br.Close(); err != nil {
		return 0, fmt.Errorf("events: append %s/%s: %w", e.Stream, e.Type, err)
	}
	return id, nil
}

// QueueAppend queues the appends of es on b, for a change whose statements and events go
// to the database in one round trip: the caller queues its own statements first, then
// calls QueueAppend, then sends b with SendBatch in its transaction and commits at once.
// It is Append (same lock, same ordering guarantee) for several events; ids, when not
// nil, receives each event's id when the batch's results are read (at Close).
func QueueAppend(b *pgx.Batch, ids []int64, es ...Event) error {
	if len(es) == 0 {
		return nil
	}
	if ids != nil && len(ids) != len(es) {
		return fmt.Errorf("events: queue append: %d ids for %d events", len(ids), len(es))
	}
	for i := range es {
		e := &es[i]
		if e.Stream == "" || e.AggregateID == "" || e.Type == "" {
			return fmt.Errorf("events: append: stream, aggregate id and type are required (got %q, %q, %q)",
				e.Stream, e.AggregateID, e.Type)
		}
		if e.Payload == nil {
			e.Payload = []byte{}
		}
		if e.PrevScope == e.Scope {
			e.PrevScope = ""
		}
	}
	b.Queue("SELECT pg_advisory_xact_lock(hashtextextended('thefold_events_' || current_schema(), 0))")
	for i, e := range es {
		q := b.Queue(`WITH ins AS (
		INSERT INTO events (stream, aggregate_id, owner_id, scope, prev_scope, type, payload)
		VALUES ($1, $2, $3, $4, $5, $6, $7)
		RETURNING id
	)
	SELECT id, pg_notify('thefold_events_' || current_schema(), id::text)::text FROM ins`,
			e.Stream, e.AggregateID, e.OwnerID, e.Scope, e.PrevScope, e.Type, e.Payload)
		q.QueryRow(func(row pgx.Row) error {
			var id int64
			if err := row.Scan(&id, nil); err != nil {
				return fmt.Errorf("events: append %s/%s: insert: %w", e.Stream, e.Type, err)
			}
			if ids != nil {
				ids[i] = id
			}
			return nil
		})
	}
	return nil
}

// Latest returns a cursor to watch "from now on": the highest event id, or the retention
// horizon if that is higher (retention may have emptied the table, and a cursor below the
// horizon has expired), or 0.
func Latest(ctx context.Context, q RowQuerier) (int64, error) {
	var id int64
	if err := q.QueryRow(ctx, latestSQL).Scan(&id); err != nil {
		return 0, fmt.Errorf("events: latest id: %w", err)
	}
	return id, nil
}

const latestSQL = `SELECT greatest(
	(SELECT coalesce(max(id), 0) FROM events),
	(SELECT pruned_through FROM events_horizon))`

// eventColumns are read by scanEvent, in its order.
const eventColumns = "id, stream, aggregate_id, owner_id, scope, prev_scope, type, payload, create_time"

func scanEvent(row pgx.CollectableRow) (Event, error) {
	var e Event
	err := row.Scan(&e.ID, &e.Stream, &e.AggregateID, &e.OwnerID, &e.Scope, &e.PrevScope, &e.Type, &e.Payload, &e.CreateTime)
	return e, err
}
