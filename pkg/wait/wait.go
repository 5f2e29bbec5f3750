// Package wait holds the context-aware pauses the services share: a retry backoff, a
// breaker's wait, a token's not-before (Sleep), and periodic work (Every).
package wait

import (
	"context"
	"math/rand/v2"
	"time"
)

// Sleep waits d, or until ctx ends (then it returns ctx's error). d <= 0 returns at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// Every calls fn every period until ctx ends: the one way the services run periodic work
// (the stale-job reaper, the sandbox reaper, memory consolidation, event retention). Each
// wait is shortened at random by up to a tenth of period, so replicas started together do
// not all look at the same moment; fn runs to its end before the next wait starts. The
// first call is after one period: call fn first for work that should also run at start.
// Every returns when ctx ends.
func Every(ctx context.Context, period time.Duration, fn func(ctx context.Context)) {
	if period <= 0 {
		panic("wait: Every needs a positive period")
	}
	t := time.NewTimer(jitter(period))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		fn(ctx)
		t.Reset(jitter(period))
	}
}

// jitter is period shortened at random by up to a tenth.
func jitter(period time.Duration) time.Duration {
	if j := int64(period / 10); j > 0 {
		return period - time.Duration(rand.Int64N(j))
	}
	return period
}
