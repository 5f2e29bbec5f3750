package events_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/events"
)

// TestOneReadPerWakeUp counts the reads of the events table while 100 live watchers
// follow 20 commits: the hub reads each commit's events once and hands them out, instead
// of every watcher reading for itself (which was 2 queries per watcher per commit).
func TestOneReadPerWakeUp(t *testing.T) {
	t.Parallel()
	pool, reads := countingPool(t)
	hubFor(t, pool, events.WithPollInterval(time.Hour))
	const watchers, groups, commits = 100, 10, 20
	ws := make([]*watch, watchers)
	for i := range ws {
		ws[i] = startWatch(t, pool, 0, events.Filter{AggregateID: fmt.Sprintf("g%d", i%groups)})
	}
	// One event per group; once every watcher has its own, every watcher has caught up.
	for g := range groups {
		appendCommitted(t, pool, ev("task", fmt.Sprintf("g%d", g), "", "", "warm"))
	}
	for _, w := range ws {
		w.count(t, 1)
	}

	reads.Store(0)
	for i := range commits {
		g := i % groups
		id := appendCommitted(t, pool, ev("task", fmt.Sprintf("g%d", g), "", "", "x"))[0]
		for k := g; k < watchers; k += groups {
			ws[k].until(t, ws[k].timeout, func(es []events.Event) bool { return es[len(es)-1].ID == id })
		}
	}
	// One read per commit, plus a little slack for a wake-up that found nothing new.
	n := reads.Load()
	t.Logf("%d reads of events for %d commits with %d watchers", n, commits, watchers)
	if n > 2*commits {
		t.Errorf("%d reads of events for %d commits with %d watchers, want at most %d", n, commits, watchers, 2*commits)
	}
}

// countingPool returns a pool on a fresh test database that counts the statements reading
// the events table (SELECTs, alone or in a batch).
func countingPool(t *testing.T) (*pgxpool.Pool, *atomic.Int64) {
	t.Helper()
	_, url := dbtest.NewDatabase(t, schema, nil)
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.ConnConfig.RuntimeParams["search_path"] = schema + ", public"
	tr := &readCounter{}
	cfg.ConnConfig.Tracer = tr
	pool, err := pgxpool.NewWithConfig(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool, &tr.n
}

type readCounter struct{ n atomic.Int64 }

// eventsTable matches a read of events (not of events_horizon).
var eventsTable = regexp.MustCompile(`FROM events\b`)

func (c *readCounter) count(sql string) {
	if strings.HasPrefix(strings.TrimSpace(sql), "SELECT") && eventsTable.MatchString(sql) {
		c.n.Add(1)
	}
}

func (c *readCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	c.count(d.SQL)
	return ctx
}

func (c *readCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}

func (c *readCounter) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, q := range d.Batch.QueuedQueries {
		c.count(q.SQL)
	}
	return ctx
}

func (c *readCounter) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (c *readCounter) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

// TestSlowWatcherDoesNotBlockOthers stalls one watcher's callback while 100 events commit:
// another watcher receives them all meanwhile, and the slow one, whose buffer of 10
// overflows, receives every one of them too, in order and once, when it resumes.
func TestSlowWatcherDoesNotBlockOthers(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	hub := hubFor(t, pool, events.WithWatcherBuffer(10), events.WithPollInterval(time.Hour))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	release := make(chan struct{})
	var (
		mu   sync.Mutex
		slow []int64
	)
	slowDone := make(chan error, 1)
	go func() {
		slowDone <- hub.Watch(ctx, 0, events.Filter{}, func(e events.Event) error {
			<-release
			mu.Lock()
			slow = append(slow, e.ID)
			mu.Unlock()
			return nil
		})
	}()
	fast := startWatch(t, pool, 0, events.Filter{})

	var want []int64
	for range 5 {
		var es []events.Event
		for range 20 {
			es = append(es, ev("task", "t1", "", "", "x"))
		}
		want = append(want, appendCommitted(t, pool, es...)...)
	}
	if diff := cmp.Diff(want, ids(fast.count(t, len(want)))); diff != "" {
		t.Fatalf("fast watcher, while the slow one is stuck (-want +got):\n%s", diff)
	}
	close(release)
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		got := slices.Clone(slow)
		mu.Unlock()
		if len(got) >= len(want) {
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("slow watcher (-want +got):\n%s", diff)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("slow watcher got %d of %d events", len(got), len(want))
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-slowDone
}

// TestWatchersJoiningDuringWritesSeeEveryEventOnce starts watchers at different cursors
// while transactions append concurrently, with a buffer so small that live watchers
// overflow and fall back to reading: each still receives exactly the committed ids after
// its cursor, in order, across its moves between reading history and the fan-out.
func TestWatchersJoiningDuringWritesSeeEveryEventOnce(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	hubFor(t, pool, events.WithWatcherBuffer(3))
	ctx := t.Context()

	var (
		mu        sync.Mutex
		committed []int64
		wg        sync.WaitGroup
	)
	const writers, txPerWriter = 4, 30
	for g := range writers {
		wg.Go(func() {
			for i := range txPerWriter {
				tx, err := pool.Begin(ctx)
				if err != nil {
					t.Errorf("begin: %v", err)
					return
				}
				var mine []int64
				for range 1 + (g+i)%4 {
					id, err := events.Append(ctx, tx, ev("task", "t", "", "", "x"))
					if err != nil {
						t.Errorf("Append: %v", err)
						_ = tx.Rollback(ctx)
						return
					}
					mine = append(mine, id)
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
	type started struct {
		after int64
		w     *watch
	}
	var ws []started
	for i := range 12 {
		mu.Lock()
		var after int64
		if n := len(committed); n > 0 {
			after = slices.Max(committed) - int64(i%3)*3 // some at the head, some behind
		}
		mu.Unlock()
		ws = append(ws, started{max(after, 0), startWatch(t, pool, max(after, 0), events.Filter{})})
		time.Sleep(5 * time.Millisecond) // spread the starts over the writes
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	slices.Sort(committed)
	last := committed[len(committed)-1]
	for i, s := range ws {
		got := s.w.until(t, 30*time.Second, func(es []events.Event) bool {
			return len(es) > 0 && es[len(es)-1].ID >= last
		})
		want := committed[sortSearch(committed, s.after):]
		if diff := cmp.Diff(want, ids(got)); diff != "" {
			t.Errorf("watcher %d after %d (-want +got):\n%s", i, s.after, diff)
		}
	}
}

// sortSearch is the index of the first id above after.
func sortSearch(ids []int64, after int64) int {
	i, _ := slices.BinarySearch(ids, after+1)
	return i
}

// TestWatchersPollWhenHubStops ends the hub's Run while a watcher follows it: the watcher
// goes on receiving events by polling, as it does when no hub runs at all.
func TestWatchersPollWhenHubStops(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	hub := events.NewHub(pool, events.WithPollInterval(20*time.Millisecond))
	hubCtx, stopHub := context.WithCancel(t.Context())
	defer stopHub()
	hubDone := make(chan error, 1)
	go func() { hubDone <- hub.Run(hubCtx) }()

	got := make(chan int64, 10)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- hub.Watch(ctx, 0, events.Filter{}, func(e events.Event) error { got <- e.ID; return nil })
	}()
	for i := range 2 {
		id := appendCommitted(t, pool, ev("task", "t1", "", "", "x"))[0]
		select {
		case g := <-got:
			if g != id {
				t.Fatalf("got %d, want %d", g, id)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("event %d not delivered (hub stopped: %v)", id, i == 1)
		}
		if i == 0 {
			stopHub()
			<-hubDone
		}
	}
	cancel()
	<-done
}
