package wait

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	t.Parallel()
	start := time.Now()
	if err := Sleep(context.Background(), 20*time.Millisecond); err != nil || time.Since(start) < 20*time.Millisecond {
		t.Fatalf("Sleep = %v after %v", err, time.Since(start))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep on a cancelled context = %v", err)
	}
	if err := Sleep(context.Background(), 0); err != nil {
		t.Fatalf("Sleep(0) = %v", err)
	}
}

// Every calls its function each period, never sooner than nine tenths of it, and stops
// when its context ends.
func TestEvery(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	const period = 20 * time.Millisecond
	var calls []time.Time
	done := make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		Every(ctx, period, func(context.Context) {
			calls = append(calls, time.Now())
			if len(calls) == 5 {
				cancel()
			}
		})
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Every did not stop when its context ended")
	}
	if len(calls) != 5 {
		t.Fatalf("called %d times, want 5", len(calls))
	}
	prev := start
	for i, c := range calls {
		if gap := c.Sub(prev); gap < period*9/10 {
			t.Errorf("call %d came %v after the one before, want at least %v", i, gap, period*9/10)
		}
		prev = c
	}
}
