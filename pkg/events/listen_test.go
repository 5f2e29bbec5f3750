package events_test

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/thefold/thefold/pkg/events"
)

// TestHubRelistensAfterSessionTerminated kills the hub's listening session again and
// again: each time the failure is logged and watchers get live events again promptly. The
// fallback poll is an hour, so only the re-established session (its read on connecting,
// then its notifications) can deliver them. The bound per round is far above a healthy
// reconnection (~0.1 s) but below the 3.2 s a backoff that never resets reaches by the
// sixth failure.
func TestHubRelistensAfterSessionTerminated(t *testing.T) {
	t.Parallel()
	pool := newPool(t)
	logs := &syncBuffer{}
	hubFor(t, pool, events.WithLogger(slog.New(slog.NewJSONHandler(logs, nil))),
		events.WithPollInterval(time.Hour))
	w := startWatch(t, pool, 0, events.Filter{})
	pid := waitListener(t, pool, 0)

	const rounds = 8
	for i := range rounds {
		if _, err := pool.Exec(t.Context(), "SELECT pg_terminate_backend($1)", pid); err != nil {
			t.Fatalf("round %d: terminate listener %d: %v", i, pid, err)
		}
		// Committed while nobody listens: read when the hub connects again.
		lost := appendCommitted(t, pool, ev("task", "t1", "", "", "while.down"))[0]
		w.until(t, 3*time.Second, func(es []events.Event) bool { return len(es) > 0 && es[len(es)-1].ID == lost })
		pid = waitListener(t, pool, pid)
		// Committed after: delivered by a notification on the new session.
		live := appendCommitted(t, pool, ev("task", "t1", "", "", "after"))[0]
		w.until(t, 3*time.Second, func(es []events.Event) bool { return es[len(es)-1].ID == live })
	}
	if got, want := len(w.got), 2*rounds; got != want {
		t.Errorf("received %d events, want %d: %v", got, want, ids(w.got))
	}
	text := logs.String()
	if n := strings.Count(text, "listening session failed"); n < rounds {
		t.Errorf("%d listen failures logged, want %d:\n%s", n, rounds, text)
	}
	if !strings.Contains(text, "wait for notification") || !strings.Contains(text, `"level":"WARN"`) {
		t.Errorf("log does not report the failure's cause:\n%s", text)
	}
}

// waitListener returns the pid of the session listening in pool's database once it is not
// old (0: any).
func waitListener(t *testing.T, pool *pgxpool.Pool, old int32) int32 {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var pid int32
		err := pool.QueryRow(t.Context(), `SELECT coalesce(max(pid), 0) FROM pg_stat_activity
			WHERE datname = current_database() AND query LIKE 'LISTEN%' AND pid <> $1`, old).Scan(&pid)
		if err != nil {
			t.Fatalf("find listening session: %v", err)
		}
		if pid != 0 {
			return pid
		}
		if time.Now().After(deadline) {
			t.Fatalf("no listening session other than %d", old)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for a logger and a test to share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
