package store

import (
	"sync"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/errs"
)

func TestClaimFinish(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s, _ := newStore(t, WithClock(clk.Now))
	ctx := t.Context()

	a, claimed, err := s.Claim(ctx, "agent:alice", "r1", "PlanTask", "fp")
	if err != nil || !claimed {
		t.Fatalf("first claim = %v, %v, %v", a, claimed, err)
	}
	if a.Done || a.RPC != "PlanTask" || a.Fingerprint != "fp" || !a.CreateTime.Equal(clk.Now()) {
		t.Errorf("claim = %+v", a)
	}
	// Another caller's id of the same value is another request.
	if _, claimed, err := s.Claim(ctx, "builder:alice", "r1", "PlanTask", "fp"); err != nil || !claimed {
		t.Fatalf("claim by another caller = %v, %v", claimed, err)
	}
	// While it runs, a retry sees the running claim, whatever it asks.
	a, claimed, err = s.Claim(ctx, "agent:alice", "r1", "GenerateFile", "other")
	if err != nil || claimed || a.Done || a.RPC != "PlanTask" || a.Fingerprint != "fp" {
		t.Fatalf("claim while running = %+v, %v, %v", a, claimed, err)
	}

	usage, err := s.RecordUsage(ctx, rec{at: day0, rpc: "PlanTask", calls: 1, outcome: ok}.record())
	if err != nil {
		t.Fatal(err)
	}
	clk.Advance(time.Second)
	if err := s.Finish(ctx, "agent:alice", "r1", []byte("answer"), usage); err != nil {
		t.Fatal(err)
	}
	a, claimed, err = s.Claim(ctx, "agent:alice", "r1", "PlanTask", "fp")
	if err != nil || claimed || !a.Done || string(a.Response) != "answer" || a.UsageRecordID != usage || !a.UpdateTime.Equal(clk.Now()) {
		t.Fatalf("claim after finish = %+v, %v, %v", a, claimed, err)
	}
	// A done answer is neither released nor finished again.
	if err := s.Release(ctx, "agent:alice", "r1"); err != nil {
		t.Fatal(err)
	}
	if err := s.Finish(ctx, "agent:alice", "r1", []byte("second"), ""); err != nil {
		t.Fatal(err)
	}
	if a, err := s.Get(ctx, "agent:alice", "r1"); err != nil || string(a.Response) != "answer" {
		t.Fatalf("answer after release and second finish = %+v, %v", a, err)
	}
	// Even long after, a done answer is not taken over.
	clk.Advance(time.Hour)
	if _, claimed, _ := s.Claim(ctx, "agent:alice", "r1", "PlanTask", "fp"); claimed {
		t.Error("a done answer was claimed again")
	}
}

func TestReleaseAndEmptyAnswer(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	if _, claimed, err := s.Claim(ctx, "c", "r", "Embed", "fp"); err != nil || !claimed {
		t.Fatalf("claim = %v, %v", claimed, err)
	}
	if err := s.Release(ctx, "c", "r"); err != nil {
		t.Fatal(err)
	}
	_, err := s.Get(ctx, "c", "r")
	wantErr(t, err, errs.ErrNotFound)
	// A released id runs again, even for a different request.
	if _, claimed, err := s.Claim(ctx, "c", "r", "Complete", "fp2"); err != nil || !claimed {
		t.Fatalf("claim after release = %v, %v", claimed, err)
	}
	// An empty response (an empty message) is an answer all the same.
	if err := s.Finish(ctx, "c", "r", nil, ""); err != nil {
		t.Fatal(err)
	}
	a, err := s.Get(ctx, "c", "r")
	if err != nil || !a.Done || a.Response == nil || len(a.Response) != 0 || a.UsageRecordID != "" {
		t.Fatalf("empty answer = %+v, %v", a, err)
	}
	wantErr(t, s.Finish(ctx, "c", "missing", []byte("x"), ""), errs.ErrNotFound)
}

func TestStaleClaimIsTakenOver(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s, _ := newStore(t, WithClock(clk.Now), WithStaleClaim(10*time.Minute))
	ctx := t.Context()
	if _, claimed, _ := s.Claim(ctx, "c", "r", "PlanTask", "fp"); !claimed {
		t.Fatal("first claim failed")
	}
	clk.Advance(10 * time.Minute)
	if _, claimed, _ := s.Claim(ctx, "c", "r", "PlanTask", "fp"); claimed {
		t.Fatal("a claim exactly at the stale period was taken over")
	}
	clk.Advance(time.Second)
	a, claimed, err := s.Claim(ctx, "c", "r", "PlanTask", "fp")
	if err != nil || !claimed || !a.CreateTime.Equal(clk.Now()) {
		t.Fatalf("stale claim = %+v, %v, %v; want taken over", a, claimed, err)
	}
	// The new claim is fresh: a retry right after waits on it.
	if _, claimed, _ := s.Claim(ctx, "c", "r", "PlanTask", "fp"); claimed {
		t.Error("a fresh takeover was claimed again")
	}
}

// A running claim its call keeps touching is never stale; once the touches stop, it is
// after the stale period. Touching a done answer changes nothing.
func TestTouchKeepsAClaimFresh(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s, _ := newStore(t, WithClock(clk.Now), WithStaleClaim(time.Minute))
	ctx := t.Context()
	if _, claimed, _ := s.Claim(ctx, "c", "r", "PlanTask", "fp"); !claimed {
		t.Fatal("first claim failed")
	}
	for range 3 {
		clk.Advance(50 * time.Second)
		if err := s.Touch(ctx, "c", "r"); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(time.Minute)
	if _, claimed, _ := s.Claim(ctx, "c", "r", "PlanTask", "fp"); claimed {
		t.Fatal("a claim touched a minute ago was taken over (150 s after it was made)")
	}
	clk.Advance(time.Second)
	if _, claimed, _ := s.Claim(ctx, "c", "r", "PlanTask", "fp"); !claimed {
		t.Fatal("a claim untouched for longer than the stale period was not taken over")
	}
	if err := s.Finish(ctx, "c", "r", []byte("answer"), ""); err != nil {
		t.Fatal(err)
	}
	before, _ := s.Get(ctx, "c", "r")
	clk.Advance(time.Hour)
	if err := s.Touch(ctx, "c", "r"); err != nil {
		t.Fatal(err)
	}
	if after, _ := s.Get(ctx, "c", "r"); !after.Done || !after.UpdateTime.Equal(before.UpdateTime) {
		t.Fatalf("touching a done answer changed it: %+v, was %+v", after, before)
	}
}

func TestConcurrentClaims(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	const n = 8
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		winners int
	)
	for range n {
		wg.Go(func() {
			_, claimed, err := s.Claim(ctx, "c", "same", "PlanTask", "fp")
			if err != nil {
				t.Error(err)
				return
			}
			if claimed {
				mu.Lock()
				winners++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if winners != 1 {
		t.Errorf("%d of %d concurrent claims won, want 1", winners, n)
	}
}

func TestPruneAnswers(t *testing.T) {
	t.Parallel()
	clk := newClock()
	s, _ := newStore(t, WithClock(clk.Now))
	ctx := t.Context()
	start := clk.Now()
	for _, id := range []string{"old-done", "old-running"} {
		if _, claimed, _ := s.Claim(ctx, "c", id, "PlanTask", "fp"); !claimed {
			t.Fatal("claim failed")
		}
	}
	if err := s.Finish(ctx, "c", "old-done", []byte("a"), ""); err != nil {
		t.Fatal(err)
	}
	clk.Advance(25 * time.Hour)
	if _, claimed, _ := s.Claim(ctx, "c", "new", "PlanTask", "fp"); !claimed {
		t.Fatal("claim failed")
	}
	n, err := s.PruneAnswers(ctx, start.Add(24*time.Hour))
	if err != nil || n != 2 {
		t.Fatalf("pruned %d, %v; want 2", n, err)
	}
	if _, err := s.Get(ctx, "c", "new"); err != nil {
		t.Errorf("the new claim was pruned: %v", err)
	}
	_, err = s.Get(ctx, "c", "old-done")
	wantErr(t, err, errs.ErrNotFound)
}
