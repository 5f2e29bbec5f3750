// Package wait holds the context-aware pause the services share: a retry backoff, a
// breaker's wait, a token's not-before.
package wait

import (
	"context"
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
