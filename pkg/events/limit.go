package events

import (
	"context"
	"fmt"
	"sync"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/auth"
)

// WatchRetryAfter is the retry delay a refused watch is told (RetryInfo): slots free only
// when other streams end, which no one can foretell, so it is a polite pause, not a promise.
const WatchRetryAfter = 10 * time.Second

// Watches bounds the concurrent watch streams of one server: each holds a hub
// subscription and, catching up, database reads, so a flood of them is refused rather
// than served slowly to everyone. Besides the server-wide bound, each caller (a person, or
// a service acting for an owner: auth.CallerKey) may hold at most a share of the slots, so
// one user holding all of theirs does not stop another from watching.
type Watches struct {
	what      string
	max       int
	perCaller int // 0: no per-caller bound

	mu    sync.Mutex
	total int
	held  map[string]int
}

// WatchesOption configures Watches.
type WatchesOption func(*Watches)

// PerCaller bounds the watches one caller holds at once; n <= 0 leaves only the
// server-wide bound.
func PerCaller(n int) WatchesOption {
	return func(w *Watches) { w.perCaller = max(n, 0) }
}

// NewWatches allows limit concurrent watches (at least one); what names them in the
// refusal ("task watches").
func NewWatches(limit int, what string, opts ...WatchesOption) *Watches {
	w := &Watches{what: what, max: max(limit, 1), held: map[string]int{}}
	for _, o := range opts {
		o(w)
	}
	return w
}

// Max is how many watches may run at once.
func (w *Watches) Max() int { return w.max }

// MaxPerCaller is how many watches one caller may hold at once (0: no bound of its own).
func (w *Watches) MaxPerCaller() int { return w.perCaller }

// Enter takes a slot for ctx's caller (auth.CallerKey of its principal; calls without one
// share a single key), or returns a ResourceExhausted status with a RetryInfo detail when
// the caller's share or the server's slots are all taken. The caller calls leave when its
// stream ends.
func (w *Watches) Enter(ctx context.Context) (leave func(), err error) {
	key, _ := auth.CallerKeyFromContext(ctx)
	return w.EnterAs(key)
}

// EnterAs is Enter for the caller named key (e.g. a service name for a stream only
// services may open).
func (w *Watches) EnterAs(key string) (leave func(), err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.perCaller > 0 && w.held[key] >= w.perCaller {
		return nil, exhausted(WatchRetryAfter, "too many %s for one caller (%d); end one or retry later", w.what, w.perCaller)
	}
	if w.total >= w.max {
		return nil, exhausted(WatchRetryAfter, "too many %s on this server (%d); retry later", w.what, w.max)
	}
	w.total++
	w.held[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			w.total--
			if w.held[key]--; w.held[key] <= 0 {
				delete(w.held, key)
			}
		})
	}, nil
}

// Held is how many watches key holds (for tests and metrics).
func (w *Watches) Held(key string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.held[key]
}

// exhausted is errs.ResourceExhausted, which this package cannot import (errs maps this
// package's errors): the same status, message and RetryInfo detail.
func exhausted(retryAfter time.Duration, format string, args ...any) error {
	st := status.New(codes.ResourceExhausted, fmt.Sprintf(format, args...))
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)}); err == nil {
		return d.Err()
	}
	return st.Err()
}

// Start is where a watch begins: after afterID, or with fromNow after the newest event
// there is now (latest reads it).
func Start(ctx context.Context, afterID int64, fromNow bool, latest func(context.Context) (int64, error)) (int64, error) {
	if !fromNow {
		return afterID, nil
	}
	return latest(ctx)
}

// StreamEnd is the error a watch RPC returns when its stream ended with err: the
// context's error when the client went away or its deadline passed (a failed Send then
// says no more than that), else err.
func StreamEnd(ctx context.Context, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		return ctxErr
	}
	return err
}
