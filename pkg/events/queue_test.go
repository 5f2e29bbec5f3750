package events_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/events"
)

// TestQueueAppendSendsAChangeAndItsEventsInOneBatch: the events come back with their ids in
// order, watchers see them, and a rolled-back batch leaves none.
func TestQueueAppendSendsAChangeAndItsEventsInOneBatch(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	ctx := t.Context()
	w := startWatch(t, pool, 0, events.Filter{Stream: "build"})

	if err := events.QueueAppend(&pgx.Batch{}, nil, events.Event{Stream: "build"}); err == nil {
		t.Fatal("an event without aggregate id and type was queued")
	}
	if err := events.QueueAppend(&pgx.Batch{}, make([]int64, 1), ev("build", "b1", "alice", "", "a"), ev("build", "b1", "alice", "", "b")); err == nil {
		t.Fatal("one id slot for two events was accepted")
	}

	send := func(commit bool, es ...events.Event) []int64 {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		b := &pgx.Batch{}
		b.Queue("SELECT 1")
		ids := make([]int64, len(es))
		if err := events.QueueAppend(b, ids, es...); err != nil {
			t.Fatal(err)
		}
		if err := tx.SendBatch(ctx, b).Close(); err != nil {
			t.Fatal(err)
		}
		if commit {
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
		}
		return ids
	}
	send(false, ev("build", "b0", "alice", "", "rolled_back"))
	got := send(true, ev("build", "b1", "alice", "", "started"), ev("build", "b1", "alice", "", "step"), ev("build", "b1", "alice", "", "ended"))
	if got[0] == 0 || got[1] != got[0]+1 || got[2] != got[1]+1 {
		t.Fatalf("ids %v, want three in a row", got)
	}
	seen := w.count(t, 3)
	for i, e := range seen {
		if e.ID != got[i] || e.AggregateID != "b1" {
			t.Errorf("watched %d: %+v, want id %d of b1", i, e, got[i])
		}
	}
	time.Sleep(50 * time.Millisecond)
	if n, err := events.Latest(ctx, pool); err != nil || n != got[2] {
		t.Errorf("Latest = %d, %v; want %d (the rolled-back event is gone)", n, err, got[2])
	}
}
