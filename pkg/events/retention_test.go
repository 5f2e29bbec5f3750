package events_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/config"
	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/events"
)

// age backdates the events with ids in [from, to] by d.
func age(t *testing.T, pool *pgxpool.Pool, from, to int64, d time.Duration) {
	t.Helper()
	if _, err := pool.Exec(t.Context(), "UPDATE events SET create_time = now() - $3 * interval '1 microsecond' WHERE id BETWEEN $1 AND $2",
		from, to, d.Microseconds()); err != nil {
		t.Fatalf("backdate events: %v", err)
	}
}

func count(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), "SELECT count(*) FROM events").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// watchErr runs a Watch from after until it delivers n events (then returns nil) or fails.
func watchErr(t *testing.T, pool *pgxpool.Pool, after int64, n int) ([]int64, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var got []int64
	enough := errors.New("enough")
	err := hubFor(t, pool).Watch(ctx, after, events.Filter{}, func(e events.Event) error {
		got = append(got, e.ID)
		if len(got) == n {
			return enough
		}
		return nil
	})
	if errors.Is(err, enough) {
		err = nil
	}
	return got, err
}

// TestPruneAndExpiredCursors prunes the old prefix of the table (stopping at the first young
// event) and checks which cursors still work: those at or after the horizon read the rest,
// older ones fail with ErrCursorExpired naming the oldest id kept.
func TestPruneAndExpiredCursors(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	var all []events.Event
	for range 12 {
		all = append(all, ev("task", "t1", "", "", "x"))
	}
	ids := appendCommitted(t, pool, all...)
	// 0..5 old, 6 young, 7 old again (kept: it follows a young one), 8.. young.
	age(t, pool, ids[0], ids[5], 48*time.Hour)
	age(t, pool, ids[7], ids[7], 48*time.Hour)

	n, err := events.Prune(t.Context(), pool, 24*time.Hour)
	if err != nil || n != 6 {
		t.Fatalf("Prune = %d, %v; want 6", n, err)
	}
	if got := count(t, pool); got != 6 {
		t.Errorf("%d events left, want 6", got)
	}
	if n, err := events.Prune(t.Context(), pool, 24*time.Hour); err != nil || n != 0 {
		t.Errorf("second Prune = %d, %v; want 0", n, err)
	}
	horizon := ids[5]
	cases := []struct {
		name    string
		after   int64
		expired bool
	}{
		// 0 is "the retained history": it starts where the kept events begin.
		{"from the start", 0, false},
		{"just below the horizon", horizon - 1, true},
		{"at the horizon", horizon, false},
		{"after the horizon", ids[7], false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			from := c.after
			if from == 0 {
				from = horizon
			}
			want := ids[sortSearch(ids, from):]
			got, err := watchErr(t, pool, c.after, len(want))
			if !c.expired {
				if err != nil {
					t.Fatalf("Watch(%d) = %v", c.after, err)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("ids (-want +got):\n%s", diff)
				}
				return
			}
			ce, ok := errors.AsType[*events.CursorExpiredError](err)
			if !ok || !errors.Is(err, events.ErrCursorExpired) {
				t.Fatalf("Watch(%d) = %v, want ErrCursorExpired", c.after, err)
			}
			if ce.OldestKept() != horizon+1 || len(got) != 0 {
				t.Errorf("oldest kept %d after delivering %v, want %d and nothing", ce.OldestKept(), got, horizon+1)
			}
		})
	}
}

// TestPruneEverythingKeepsTheHorizon: when retention empties the table, the horizon still
// says what was removed, and Latest starts after it.
func TestPruneEverythingKeepsTheHorizon(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	ids := appendCommitted(t, pool, ev("task", "t1", "", "", "x"), ev("task", "t1", "", "", "y"))
	age(t, pool, ids[0], ids[1], 48*time.Hour)
	if n, err := events.Prune(t.Context(), pool, time.Hour); err != nil || n != 2 {
		t.Fatalf("Prune = %d, %v; want 2", n, err)
	}
	latest, err := events.Latest(t.Context(), pool)
	if err != nil || latest != ids[1] {
		t.Fatalf("Latest = %d, %v; want %d", latest, err, ids[1])
	}
	if _, err := watchErr(t, pool, ids[0], 1); !errors.Is(err, events.ErrCursorExpired) {
		t.Errorf("Watch(%d) on an emptied table = %v, want ErrCursorExpired", ids[0], err)
	}
	w := startWatch(t, pool, latest, events.Filter{})
	next := appendCommitted(t, pool, ev("task", "t1", "", "", "z"))[0]
	if got := w.count(t, 1); got[0].ID != next {
		t.Errorf("watch from Latest got %d, want %d", got[0].ID, next)
	}
}

// TestCursorExpiredIsOutOfRange: the error mapping a Watch RPC returns.
func TestCursorExpiredIsOutOfRange(t *testing.T) {
	t.Parallel()
	err := error(&events.CursorExpiredError{After: 3, PrunedThrough: 41})
	st, _ := status.FromError(errs.ToStatus(t.Context(), slog.New(slog.DiscardHandler), "/x.v1.X/Watch", err))
	if st.Code() != codes.OutOfRange || !strings.Contains(st.Message(), "oldest id kept is 42") {
		t.Errorf("status = %v %q, want OutOfRange naming the oldest id kept (42)", st.Code(), st.Message())
	}
}

// TestRunRetentionPrunesPeriodically: events that grow old are removed at the next round.
func TestRunRetentionPrunesPeriodically(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	hub := hubFor(t, pool)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- hub.RunRetention(ctx, 20*time.Millisecond, time.Hour) }()

	for round := range 2 {
		ids := appendCommitted(t, pool, ev("task", "t1", "", "", "x"), ev("task", "t1", "", "", "y"))
		age(t, pool, ids[0], ids[0], 2*time.Hour)
		deadline := time.Now().Add(10 * time.Second)
		for count(t, pool) != 1 {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: %d events left, want the young one", round, count(t, pool))
			}
			time.Sleep(10 * time.Millisecond)
		}
		age(t, pool, ids[1], ids[1], 2*time.Hour) // old by the next round
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("RunRetention = %v, want context.Canceled", err)
	}
	if err := hub.RunRetention(t.Context(), 0, time.Hour); err == nil {
		t.Error("RunRetention with a zero interval succeeded")
	}
}

func TestRetentionConfig(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		env     map[string]string
		want    events.RetentionConfig
		wantErr string
	}{
		{"defaults", nil, events.RetentionConfig{MaxAge: 168 * time.Hour, Every: time.Hour}, ""},
		{"set", map[string]string{"THEFOLD_EVENTS_RETENTION": "720h", "THEFOLD_EVENTS_PRUNE_INTERVAL": "10m"},
			events.RetentionConfig{MaxAge: 720 * time.Hour, Every: 10 * time.Minute}, ""},
		{"zero", map[string]string{"THEFOLD_EVENTS_RETENTION": "0s", "THEFOLD_EVENTS_PRUNE_INTERVAL": "-1m"},
			events.RetentionConfig{}, "THEFOLD_EVENTS_PRUNE_INTERVAL"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var got events.RetentionConfig
			err := config.Load(t.Context(), &got, config.Map(c.env, nil))
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) || !strings.Contains(err.Error(), "THEFOLD_EVENTS_RETENTION") {
					t.Fatalf("Load = %v, want both variables named", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(c.want, got); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheckCursor: a cursor below the horizon is expired before anything is read; 0 and
// cursors at or above it pass.
func TestCheckCursor(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	ids := appendCommitted(t, pool, ev("task", "t1", "", "", "x"), ev("task", "t1", "", "", "y"), ev("task", "t1", "", "", "z"))
	age(t, pool, ids[0], ids[1], 48*time.Hour)
	if _, err := events.Prune(t.Context(), pool, time.Hour); err != nil {
		t.Fatal(err)
	}
	for after, expired := range map[int64]bool{0: false, ids[0]: true, ids[1]: false, ids[2]: false} {
		err := events.CheckCursor(t.Context(), pool, after)
		if got := errors.Is(err, events.ErrCursorExpired); got != expired || (!expired && err != nil) {
			t.Errorf("CheckCursor(%d) = %v, want expired %v", after, err, expired)
		}
	}
}
