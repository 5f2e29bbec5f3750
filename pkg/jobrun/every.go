package jobrun

import (
	"context"
	"math/rand/v2"
	"time"
)

// Every calls fn every period until ctx ends, each wait shortened at random by up to a
// tenth of period, so replicas started together do not look at the same moment. fn
// runs to its end before the next wait starts; Every returns when ctx ends.
func Every(ctx context.Context, period time.Duration, fn func(ctx context.Context)) {
	if period <= 0 {
		panic("jobrun: Every needs a positive period")
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

func jitter(period time.Duration) time.Duration {
	if j := int64(period / 10); j > 0 {
		return period - time.Duration(rand.Int64N(j))
	}
	return period
}
