package events_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/events"
)

const schema = "events_test"

func newPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, schema, nil)
	return pool
}

var (
	hubsMu sync.Mutex
	hubs   = map[*pgxpool.Pool]*events.Hub{}
)

// hubFor returns the running Hub of pool, starting it (until the test ends) with opts on
// first use.
func hubFor(t *testing.T, pool *pgxpool.Pool, opts ...events.HubOption) *events.Hub {
	t.Helper()
	hubsMu.Lock()
	defer hubsMu.Unlock()
	if h, ok := hubs[pool]; ok {
		return h
	}
	h := events.NewHub(pool, opts...)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	t.Cleanup(func() {
		hubsMu.Lock()
		delete(hubs, pool)
		hubsMu.Unlock()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Hub.Run = %v, want context.Canceled", err)
		}
	})
	hubs[pool] = h
	return h
}

// appendCommitted appends es in one transaction and commits it.
func appendCommitted(t *testing.T, pool *pgxpool.Pool, es ...events.Event) []int64 {
	t.Helper()
	ctx := t.Context()
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // no-op after Commit
	ids := make([]int64, 0, len(es))
	for _, e := range es {
		id, err := events.Append(ctx, tx, e)
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		ids = append(ids, id)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	return ids
}

func ev(stream, aggregate, owner, scope, typ string) events.Event {
	return events.Event{Stream: stream, AggregateID: aggregate, OwnerID: owner, Scope: scope, Type: typ,
		Payload: []byte(`{"aggregate":"` + aggregate + `"}`)}
}

// watch runs events.Watch in the background until the test ends, then
// checks that cancelling it makes it return context.Canceled.
type watch struct {
	events  chan events.Event
	got     []events.Event
	done    chan struct{}
	err     error
	timeout time.Duration
}

func startWatch(t *testing.T, pool *pgxpool.Pool, after int64, f events.Filter) *watch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w := &watch{events: make(chan events.Event, 1024), done: make(chan struct{}), timeout: 10 * time.Second}
	go func() {
		defer close(w.done)
		w.err = hubFor(t, pool).Watch(ctx, after, f, func(e events.Event) error {
			select {
			case w.events <- e:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-w.done:
			if !errors.Is(w.err, context.Canceled) {
				t.Errorf("Watch returned %v, want context.Canceled", w.err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Watch did not return after its context was cancelled")
		}
	})
	return w
}

// until receives events until cond holds for all received so far, failing
// the test at the deadline or if Watch stops.
func (w *watch) until(t *testing.T, timeout time.Duration, cond func([]events.Event) bool) []events.Event {
	t.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	for !cond(w.got) {
		select {
		case e := <-w.events:
			w.got = append(w.got, e)
		case <-w.done:
			t.Fatalf("Watch stopped early: %v (received %d events)", w.err, len(w.got))
		case <-deadline.C:
			t.Fatalf("timed out after %v with %d events: %v", timeout, len(w.got), ids(w.got))
		}
	}
	return w.got
}

func (w *watch) count(t *testing.T, n int) []events.Event {
	t.Helper()
	return w.until(t, w.timeout, func(es []events.Event) bool { return len(es) >= n })
}

func ids(es []events.Event) []int64 {
	out := make([]int64, len(es))
	for i, e := range es {
		out[i] = e.ID
	}
	return out
}

// waitNoAcquired waits until pool has no connection checked out: a read cancelled with its
// context gives its connection back asynchronously.
func waitNoAcquired(t *testing.T, pool *pgxpool.Pool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for pool.Stat().AcquiredConns() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still acquired after Watch returned", pool.Stat().AcquiredConns())
		}
		time.Sleep(10 * time.Millisecond)
	}
}
