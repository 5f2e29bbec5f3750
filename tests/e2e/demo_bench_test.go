package e2e

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// llmClock adds up the time the scripted model spends answering, so the demo benchmark can
// tell model time from the rest.
type llmClock struct {
	mu    sync.Mutex
	total time.Duration
	calls int
	// spans are the answers' times, the latest last (at most maxLLMSpans).
	spans []llmSpan
	next  http.Handler
}

type llmSpan struct{ from, to time.Time }

const maxLLMSpans = 10000

func (c *llmClock) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	c.next.ServeHTTP(w, r)
	end := time.Now()
	c.mu.Lock()
	c.total += end.Sub(start)
	c.calls++
	if len(c.spans) == maxLLMSpans {
		c.spans = append(c.spans[:0], c.spans[maxLLMSpans/2:]...)
	}
	c.spans = append(c.spans, llmSpan{start, end})
	c.mu.Unlock()
}

// within is the time the scripted model spent answering between from and to outside the
// spans skip (sorted, not overlapping), and the number of answers that took it.
func (c *llmClock) within(from, to time.Time, skip []llmSpan) (time.Duration, int) {
	c.mu.Lock()
	spans := slices.Clone(c.spans)
	c.mu.Unlock()
	var d time.Duration
	n := 0
	for _, s := range spans {
		lo, hi := maxTime(s.from, from), minTime(s.to, to)
		if !hi.After(lo) {
			continue
		}
		in := hi.Sub(lo)
		for _, k := range skip {
			if a, b := maxTime(lo, k.from), minTime(hi, k.to); b.After(a) {
				in -= b.Sub(a)
			}
		}
		if in > 0 {
			d += in
			n++
		}
	}
	return d, n
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func (c *llmClock) read() (time.Duration, int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.total, c.calls
}

// BenchmarkDemoTask is the README's demo task — "Add a health endpoint" on a fresh Go
// repository, the scripted model answering at once — from StartTask to PENDING_REVIEW on the
// mesh's default sandbox backend (docker where it runs). It prints where the time went: the
// job's phases (GetJobMetrics), the toolchain commands of its sandbox (the sandbox's command
// log), the model's answers, and orchestration, which is everything else. Targets: ≤ 15 s in
// all, orchestration ≤ 20% of it.
func BenchmarkDemoTask(b *testing.B) {
	for i := 0; i < b.N; i++ {
		repo := fmt.Sprintf("local/bench-demo-%d-%d", time.Now().UnixNano(), i)
		demoRepo(b, repo)
		llmBefore, callsBefore := llmTime.read()
		start := time.Now()
		_, jobID := startJob(b, repo, "Add a health endpoint", "")
		job := pollJob(b, jobID, 5*time.Minute, "JOB_STATUS_PENDING_REVIEW")
		elapsed := time.Since(start)
		llmAfter, callsAfter := llmTime.read()
		model := llmAfter - llmBefore

		code, metrics := rest(b, http.MethodGet, "/v1/jobs/"+jobID+"/metrics", token, nil)
		if code != http.StatusOK {
			b.Fatalf("job metrics: %d %v", code, metrics)
		}
		cmds := sandboxCommands(b, job["sandbox_id"].(string))
		var toolchain time.Duration
		for _, c := range cmds {
			toolchain += c.took
		}
		orchestration := elapsed - toolchain - model
		share := orchestration.Seconds() / elapsed.Seconds()
		b.ReportMetric(elapsed.Seconds(), "s/task")
		b.ReportMetric(100*share, "%orchestration")

		var out strings.Builder
		fmt.Fprintf(&out, "demo task: StartTask → PENDING_REVIEW in %s (target ≤ 15 s); the job's own clock: %v\n", elapsed.Round(time.Millisecond), metrics["total_duration"])
		fmt.Fprintf(&out, "  phases:")
		for _, p := range metrics["phases"].([]any) {
			pm := p.(map[string]any)
			fmt.Fprintf(&out, " %s %v;", strings.TrimPrefix(fmt.Sprint(pm["phase"]), "JOB_PHASE_"), pm["duration"])
		}
		fmt.Fprintf(&out, "\n  toolchain commands in the sandbox: %d, %s in all\n", len(cmds), toolchain.Round(time.Millisecond))
		for _, c := range cmds {
			fmt.Fprintf(&out, "    %8s  exit %d  %s\n", c.took.Round(time.Millisecond), c.exit, c.argv)
		}
		fmt.Fprintf(&out, "  model: %d calls, %s\n", callsAfter-callsBefore, model.Round(time.Millisecond))
		fmt.Fprintf(&out, "  orchestration (the rest): %s, %.0f%% of the task (target ≤ 20%%)\n", orchestration.Round(time.Millisecond), 100*share)
		fmt.Print(out.String())
		_, _ = rest(b, http.MethodPost, "/v1/jobs/"+jobID+":cancel", token, map[string]any{})
	}
}

// pollJob is waitJob with a finer poll, for timing.
func pollJob(t testing.TB, id string, timeout time.Duration, want string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		code, got := rest(t, http.MethodGet, "/v1/jobs/"+id, token, nil)
		if code != http.StatusOK {
			t.Fatalf("get job: %d %v", code, got)
		}
		job := got["job"].(map[string]any)
		switch st, _ := job["status"].(string); {
		case st == want:
			return job
		case slices.Contains([]string{"JOB_STATUS_COMPLETED", "JOB_STATUS_FAILED", "JOB_STATUS_CANCELLED", "JOB_STATUS_HUMAN_NEEDED"}, st):
			t.Fatalf("job %s is %s (%v), want %s", id, st, job["status_reason"], want)
		case time.Now().After(deadline):
			t.Fatalf("job %s still %s after %s", id, st, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

type loggedCommand struct {
	argv string
	exit int
	took time.Duration
}

// sandboxCommands reads the sandbox's command log (the sandbox service's table).
func sandboxCommands(t testing.TB, sandboxID string) []loggedCommand {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, mesh.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT array_to_string(argv, ' '), exit_code, duration_us FROM sandbox.commands
		WHERE sandbox_id = $1 ORDER BY create_time, id`, sandboxID)
	if err != nil {
		t.Fatal(err)
	}
	var out []loggedCommand
	for rows.Next() {
		var c loggedCommand
		var us int64
		if err := rows.Scan(&c.argv, &c.exit, &us); err != nil {
			t.Fatal(err)
		}
		c.took = time.Duration(us) * time.Microsecond
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
