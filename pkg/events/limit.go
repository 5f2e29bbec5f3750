package events

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Watches bounds the concurrent watch streams of one server: each holds a hub
// subscription and, catching up, database reads, so a flood of them is refused rather
// than served slowly to everyone.
type Watches struct {
	slots chan struct{}
	what  string
}

// NewWatches allows limit concurrent watches (at least one); what names them in the
// refusal ("task watches").
func NewWatches(limit int, what string) *Watches {
	return &Watches{slots: make(chan struct{}, max(limit, 1)), what: what}
}

// Max is how many watches may run at once.
func (w *Watches) Max() int { return cap(w.slots) }

// Enter takes a slot, or returns a ResourceExhausted status when all are taken; the
// caller calls leave when its stream ends.
func (w *Watches) Enter() (leave func(), err error) {
	select {
	case w.slots <- struct{}{}:
		return func() { <-w.slots }, nil
	default:
		return nil, status.Errorf(codes.ResourceExhausted, "too many %s on this server (%d); retry later", w.what, cap(w.slots))
	}
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
