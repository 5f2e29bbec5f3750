package llm

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/thefold/thefold/pkg/wait"
)

// RetryPolicy is the one retry policy of every provider call: the SDKs' own retries are
// switched off so that waits, attempt counts and the ledger agree. The zero value is the
// default policy.
type RetryPolicy struct {
	// MaxAttempts counts the first try; default 4.
	MaxAttempts int
	// BaseDelay is the backoff before the second attempt, doubled after each; default 500ms.
	BaseDelay time.Duration
	// MaxDelay caps the backoff; default 30s.
	MaxDelay time.Duration
	// MaxRetryAfter is the longest retry-after that is waited; a provider asking for longer
	// gets its error returned at once, because a caller is better served by another model
	// than by a minute of silence. Default 60s.
	MaxRetryAfter time.Duration
	// Sleep waits d or until ctx is done; tests replace it to record the waits. Default: a
	// timer that honours ctx.
	Sleep func(ctx context.Context, d time.Duration) error
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 4
	}
	if p.BaseDelay <= 0 {
		p.BaseDelay = 500 * time.Millisecond
	}
	if p.MaxDelay <= 0 {
		p.MaxDelay = 30 * time.Second
	}
	if p.MaxRetryAfter <= 0 {
		p.MaxRetryAfter = 60 * time.Second
	}
	if p.Sleep == nil {
		p.Sleep = wait.Sleep
	}
	return p
}

// Backoff is the wait before attempt n+1 (n ≥ 1 attempts made): full jitter, a uniform
// draw from [0, min(MaxDelay, BaseDelay·2^(n-1))], so that many callers hit by the same
// rate limit do not come back in step.
func (p RetryPolicy) Backoff(n int) time.Duration {
	p = p.withDefaults()
	ceiling := p.MaxDelay
	if n < 1 {
		n = 1
	}
	if n <= 32 {
		if d := p.BaseDelay << (n - 1); d > 0 && d < ceiling {
			ceiling = d
		}
	}
	return time.Duration(rand.Int64N(int64(ceiling) + 1))
}

type attemptKey struct{}

// WithAttemptCounter returns a context whose provider calls count their attempts (retries
// included) into the returned int, so the usage ledger can record how many provider calls
// one answer cost. A call refused before anything is sent (ErrUnsupported, a request the
// provider cannot express) counts as one attempt. One counter per call: a counter read while a call runs,
// or shared by concurrent calls, races.
func WithAttemptCounter(ctx context.Context) (context.Context, *int) {
	n := new(int)
	return context.WithValue(ctx, attemptKey{}, n), n
}

func countAttempt(ctx context.Context) {
	if n, ok := ctx.Value(attemptKey{}).(*int); ok {
		*n++
	}
}

// WithRetry returns p with pol applied to Complete, Stream and Embed: an *Error that is Retryable
// is tried again after max(its RetryAfter, the jittered backoff), up to MaxAttempts. A
// retry-after longer than MaxRetryAfter, or one that would outlast ctx's deadline, ends the
// call with that error. The error returned after retries wraps the last *Error with the
// attempt count (AsError finds it); a failed first attempt that is not retried is returned
// as it is. When ctx ends while waiting, the error wraps ctx.Err(), not a provider error,
// so nobody retries a cancelled call. A stream is retried only until its first delta was
// delivered: after that the caller holds part of a reply, and a second attempt would
// deliver another. The returned provider always streams (see Stream).
func WithRetry(p Provider, pol RetryPolicy) Provider {
	return &retrying{p: p, pol: pol.withDefaults()}
}

type retrying struct {
	p   Provider
	pol RetryPolicy
}

func (r *retrying) Name() string { return r.p.Name() }

func (r *retrying) Complete(ctx context.Context, req Request) (*Response, error) {
	return retry(ctx, r.pol, nil, func(ctx context.Context) (*Response, error) { return r.p.Complete(ctx, req) })
}

func (r *retrying) Stream(ctx context.Context, req Request, on func(Delta) error) (*Response, error) {
	delivered := false
	counted := func(d Delta) error {
		delivered = true
		return on(d)
	}
	return retry(ctx, r.pol, func() bool { return delivered }, func(ctx context.Context) (*Response, error) {
		return Stream(ctx, r.p, req, counted)
	})
}

func (r *retrying) Embed(ctx context.Context, req EmbedRequest) (*EmbedResponse, error) {
	return retry(ctx, r.pol, nil, func(ctx context.Context) (*EmbedResponse, error) { return r.p.Embed(ctx, req) })
}

// retry runs call under pol. committed, when set, reports whether the caller already has
// part of the answer (a stream's delta), which ends the retries.
func retry[T any](ctx context.Context, pol RetryPolicy, committed func() bool, call func(context.Context) (T, error)) (T, error) {
	var zero T
	for n := 1; ; n++ {
		if err := ctx.Err(); err != nil {
			if n == 1 {
				return zero, err
			}
			return zero, fmt.Errorf("after %d attempts: %w", n-1, err)
		}
		countAttempt(ctx)
		out, err := call(ctx)
		if err == nil {
			return out, nil
		}
		pe, ok := AsError(err)
		if !ok || !pe.Retryable() || ctx.Err() != nil {
			return zero, attempted(n, err)
		}
		if committed != nil && committed() {
			return zero, fmt.Errorf("the reply broke off after it began, so it is not tried again: %w", attempted(n, err))
		}
		if n >= pol.MaxAttempts {
			if n == 1 {
				return zero, err
			}
			return zero, fmt.Errorf("gave up after %d attempts: %w", n, err)
		}
		if pe.RetryAfter > pol.MaxRetryAfter {
			return zero, fmt.Errorf("after %d attempts, provider asked to wait %s (more than %s): %w",
				n, pe.RetryAfter, pol.MaxRetryAfter, err)
		}
		wait := max(pe.RetryAfter, pol.Backoff(n))
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			// Waiting would only end in DeadlineExceeded; the provider's error says more.
			return zero, fmt.Errorf("after %d attempts, no time left to wait %s: %w", n, wait, err)
		}
		if serr := pol.Sleep(ctx, wait); serr != nil {
			return zero, fmt.Errorf("after %d attempts (last: %v): %w", n, err, serr)
		}
	}
}

// attempted wraps err with the attempt count when there was more than one attempt.
func attempted(n int, err error) error {
	if n == 1 {
		return err
	}
	return fmt.Errorf("after %d attempts: %w", n, err)
}
