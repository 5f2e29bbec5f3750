package events_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/thefold/thefold/pkg/events"
)

func TestAppendRollbackLeavesNoEvent(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	ctx := t.Context()

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatalf("begin: %v", err)
	}
	if _, err := events.Append(ctx, tx, ev("task", "t1", "alice", "", "task.created")); err != nil {
		t.Fatalf("Append: %v", err)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatalf("rollback: %v", err)
	}
	if n, err := events.Latest(ctx, pool); err != nil || n != 0 {
		t.Fatalf("Latest after rollback = %d, %v; want 0", n, err)
	}

	ids := appendCommitted(t, pool, ev("task", "t1", "alice", "", "task.created"))
	if n, err := events.Latest(ctx, pool); err != nil || n != ids[0] {
		t.Errorf("Latest after commit = %d, %v; want %d", n, err, ids[0])
	}
	var count int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM events").Scan(&count); err != nil || count != 1 {
		t.Errorf("events rows = %d, %v; want 1", count, err)
	}
}

func TestAppendRejectsIncompleteEvents(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	ctx := t.Context()
	cases := []struct {
		name string
		e    events.Event
	}{
		{"no stream", events.Event{AggregateID: "t1", Type: "x"}},
		{"no aggregate", events.Event{Stream: "task", Type: "x"}},
		{"no type", events.Event{Stream: "task", AggregateID: "t1"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tx, err := pool.Begin(ctx)
			if err != nil {
				t.Fatalf("begin: %v", err)
			}
			defer tx.Rollback(ctx) //nolint:errcheck // test cleanup
			if _, err := events.Append(ctx, tx, c.e); err == nil || !strings.Contains(err.Error(), "required") {
				t.Errorf("Append(%+v) = %v, want a 'required' error", c.e, err)
			}
		})
	}
}

func TestWatchDeliversHistoryAfterCursorInOrder(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	// More than one read batch, written in several transactions.
	var all []events.Event
	for i := range 1234 {
		all = append(all, ev("build", "b"+string(rune('a'+i%7)), "bob", "repo", "build.step"))
	}
	var ids []int64
	for chunk := range slices.Chunk(all, 400) {
		ids = append(ids, appendCommitted(t, pool, chunk...)...)
	}
	after := ids[9]

	w := startWatch(t, pool, after, events.Filter{})
	got := w.count(t, len(ids)-10)
	if diff := cmp.Diff(ids[10:], eventIDs(got)); diff != "" {
		t.Fatalf("ids (-want +got):\n%s", diff)
	}
	want := all[10]
	want.ID = ids[10]
	if diff := cmp.Diff(want, got[0], cmpopts.IgnoreFields(events.Event{}, "CreateTime")); diff != "" {
		t.Errorf("first event (-want +got):\n%s", diff)
	}
	if time.Since(got[0].CreateTime) > time.Minute {
		t.Errorf("CreateTime = %v, want about now", got[0].CreateTime)
	}
}

func TestWatchWakesOnCommit(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	// The fallback poll is an hour, so only a notification can deliver the events below;
	// no wall-clock bound is needed to tell the two apart.
	hubFor(t, pool).SetPollInterval(time.Hour)
	latest, err := events.Latest(t.Context(), pool)
	if err != nil {
		t.Fatalf("Latest: %v", err)
	}
	w := startWatch(t, pool, latest, events.Filter{})
	for i := range 4 {
		id := appendCommitted(t, pool, ev("task", "t1", "alice", "", "task.updated"))[0]
		got := w.until(t, w.timeout, func(es []events.Event) bool { return len(es) > i })
		if got[i].ID != id {
			t.Fatalf("event %d has id %d, want %d", i, got[i].ID, id)
		}
	}
}

func TestWatchFilters(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	es := []events.Event{
		ev("task", "t1", "alice", "repo1", "task.created"),   // 0
		ev("task", "t2", "bob", "repo1", "task.created"),     // 1
		ev("build", "b1", "alice", "repo2", "build.started"), // 2
		ev("task", "t1", "alice", "repo2", "task.updated"),   // 3
		ev("build", "b2", "bob", "", "build.started"),        // 4
	}
	// Pad with non-matching events so cursors must move past whole batches
	// that match nothing.
	for range 1100 {
		es = append(es, ev("noise", "n", "carol", "elsewhere", "noise"))
	}
	// The last event matches every filter, so a stray match before it shows.
	es = append(es, ev("task", "t1", "alice", "repo1", "task.done"))
	ids := appendCommitted(t, pool, es...)
	last := len(es) - 1

	cases := []struct {
		name string
		f    events.Filter
		want []int
	}{
		{"stream", events.Filter{Stream: "task"}, []int{0, 1, 3, last}},
		{"aggregate", events.Filter{AggregateID: "t1"}, []int{0, 3, last}},
		{"owner", events.Filter{OwnerID: "alice"}, []int{0, 2, 3, last}},
		{"scope", events.Filter{Scope: "repo1"}, []int{0, 1, last}},
		{"owner and scope", events.Filter{OwnerID: "alice", Scope: "repo2"}, nil}, // the last does not match
		{"all four", events.Filter{Stream: "task", AggregateID: "t1", OwnerID: "alice", Scope: "repo1"}, []int{0, last}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			want := make([]int64, len(c.want))
			for i, k := range c.want {
				want[i] = ids[k]
			}
			if c.want == nil {
				want = []int64{ids[2], ids[3]} // alice in repo2; nothing after
			}
			w := startWatch(t, pool, 0, c.f)
			got := w.count(t, len(want))
			if diff := cmp.Diff(want, eventIDs(got)); diff != "" {
				t.Errorf("ids (-want +got):\n%s", diff)
			}
		})
	}
}

func TestWatchReturnsFnError(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	appendCommitted(t, pool, ev("task", "t1", "", "", "a"), ev("task", "t1", "", "", "b"))
	stop := errors.New("enough")
	var seen []string
	err := hubFor(t, pool).Watch(t.Context(), 0, events.Filter{}, func(e events.Event) error {
		seen = append(seen, e.Type)
		return stop
	})
	if !errors.Is(err, stop) {
		t.Errorf("Watch = %v, want the callback's error", err)
	}
	if diff := cmp.Diff([]string{"a"}, seen); diff != "" {
		t.Errorf("seen (-want +got):\n%s", diff)
	}
	waitNoAcquired(t, pool)
}

func TestWatchReturnsOnCancel(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	cases := []struct {
		name    string
		timeout time.Duration // 0: cancel once the event arrived
		want    error
	}{
		{"cancel", 0, context.Canceled},
		{"deadline", time.Second, context.DeadlineExceeded},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(t.Context())
			if c.timeout > 0 {
				ctx, cancel = context.WithTimeout(t.Context(), c.timeout)
			}
			defer cancel()
			after, err := events.Latest(ctx, pool)
			if err != nil {
				t.Fatalf("Latest: %v", err)
			}
			delivered := make(chan struct{}, 1)
			done := make(chan error, 1)
			go func() {
				done <- hubFor(t, pool).Watch(ctx, after, events.Filter{}, func(events.Event) error {
					delivered <- struct{}{}
					return nil
				})
			}()
			appendCommitted(t, pool, ev("task", "t1", "", "", "x"))
			if c.timeout == 0 {
				select {
				case <-delivered:
				case <-time.After(10 * time.Second):
					t.Fatal("event not delivered")
				}
				cancel() // the watcher is now waiting for a notification
			}
			select {
			case err := <-done:
				if !errors.Is(err, c.want) {
					t.Errorf("Watch = %v, want %v", err, c.want)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Watch did not return after its context ended")
			}
			waitNoAcquired(t, pool)
		})
	}
}

// TestConcurrentAppendersAreSeenOnceInOrder is the outbox's core promise: with
// many transactions appending and committing (or rolling back) in parallel,
// a watcher started at 0 receives every committed id exactly once, in
// strictly increasing order, and no rolled-back one.
func TestConcurrentAppendersAreSeenOnceInOrder(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	ctx := t.Context()
	w := startWatch(t, pool, 0, events.Filter{})

	const writers, txPerWriter = 8, 40
	var (
		mu        sync.Mutex
		committed []int64
		wg        sync.WaitGroup
	)
	for g := range writers {
		wg.Go(func() {
			for i := range txPerWriter {
				tx, err := pool.Begin(ctx)
				if err != nil {
					t.Errorf("begin: %v", err)
					return
				}
				var mine []int64
				for range 1 + i%3 {
					id, err := events.Append(ctx, tx, ev("task", "t", "", "", "x"))
					if err != nil {
						t.Errorf("Append: %v", err)
						_ = tx.Rollback(ctx)
						return
					}
					mine = append(mine, id)
				}
				// Keep the transaction open a little after appending, so
				// commits would interleave if Append did not order them.
				if _, err := tx.Exec(ctx, "SELECT pg_sleep(0.001)"); err != nil {
					t.Errorf("exec: %v", err)
				}
				if (g+i)%5 == 0 {
					_ = tx.Rollback(ctx)
					continue
				}
				if err := tx.Commit(ctx); err != nil {
					t.Errorf("commit: %v", err)
					return
				}
				mu.Lock()
				committed = append(committed, mine...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	slices.Sort(committed)
	maxID := committed[len(committed)-1]
	got := w.until(t, 30*time.Second, func(es []events.Event) bool {
		return len(es) > 0 && es[len(es)-1].ID >= maxID
	})
	if diff := cmp.Diff(committed, eventIDs(got)); diff != "" {
		t.Errorf("delivered ids (-committed +delivered):\n%s", diff)
	}
}

func eventIDs(es []events.Event) []int64 { return ids(es) }

func TestManyWatchersShareOneSession(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	const n = 50
	ws := make([]*watch, n)
	for i := range ws {
		ws[i] = startWatch(t, pool, 0, events.Filter{})
	}
	id := appendCommitted(t, pool, ev("task", "t1", "alice", "", "created"))[0]
	for i, w := range ws {
		got := w.until(t, w.timeout, func(es []events.Event) bool { return len(es) > 0 })
		if got[0].ID != id {
			t.Fatalf("watcher %d got %d, want %d", i, got[0].ID, id)
		}
	}
	var sessions int32
	// Client sessions only: an autovacuum worker of the test's database is listed with it
	// too (a CI run under load counted 6 here).
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND backend_type = 'client backend'").Scan(&sessions); err != nil {
		t.Fatal(err)
	}
	// The pool's own sessions plus the hub's one listening session, however many watchers.
	if limit := pool.Config().MaxConns + 1; sessions > limit {
		t.Errorf("%d sessions for %d watchers, want at most %d", sessions, n, limit)
	}
	if got := hubFor(t, pool).Watchers(); got != n {
		t.Errorf("hub has %d watchers, want %d", got, n)
	}
}
