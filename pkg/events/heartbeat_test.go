package events_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/events"
)

// TestHeartbeatReportsCursor: a quiet watcher is sent heartbeats carrying its cursor, which
// moves past events it does not match, and after events it received.
func TestHeartbeatReportsCursor(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	hub := hubFor(t, pool)
	start := appendCommitted(t, pool, ev("task", "other", "", "", "x"))[0]

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	beats := make(chan int64, 100)
	got := make(chan int64, 100)
	done := make(chan error, 1)
	go func() {
		done <- hub.Watch(ctx, start, events.Filter{AggregateID: "mine"},
			func(e events.Event) error { got <- e.ID; return nil },
			events.WithHeartbeat(30*time.Millisecond, func(cursor int64) error { beats <- cursor; return nil }))
	}()
	// waitBeat waits for a heartbeat reporting want, failing on any event delivered.
	waitBeat := func(want int64) {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case c := <-beats:
				if c > want {
					t.Fatalf("heartbeat cursor %d, beyond %d", c, want)
				}
				if c == want {
					return
				}
			case id := <-got:
				t.Fatalf("unexpected event %d", id)
			case <-deadline:
				t.Fatalf("no heartbeat with cursor %d", want)
			}
		}
	}
	waitBeat(start)
	skipped := appendCommitted(t, pool, ev("task", "other", "", "", "x"), ev("task", "other", "", "", "y"))
	waitBeat(skipped[1])

	mine := appendCommitted(t, pool, ev("task", "mine", "", "", "x"))[0]
	select {
	case id := <-got:
		if id != mine {
			t.Fatalf("got event %d, want %d", id, mine)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("event not delivered")
	}
	waitBeat(mine)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("Watch = %v, want context.Canceled", err)
	}
}

// TestHeartbeatErrorEndsWatch: a failing heartbeat (the client went away) ends the Watch
// with its error, whether or not a hub runs.
func TestHeartbeatErrorEndsWatch(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	for _, hubRuns := range []bool{true, false} {
		hub := events.NewHub(pool)
		if hubRuns {
			hub = hubFor(t, pool)
		}
		gone := errors.New("client gone")
		err := hub.Watch(t.Context(), 0, events.Filter{}, func(events.Event) error { return nil },
			events.WithHeartbeat(10*time.Millisecond, func(int64) error { return gone }))
		if !errors.Is(err, gone) {
			t.Errorf("hub running %v: Watch = %v, want the heartbeat's error", hubRuns, err)
		}
	}
}
