package engine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/wait"
)

// claimHeartbeat is how often a call touches its running claim (store.Touch), well within
// the store's stale period, so no retry takes over a call that is still running.
const claimHeartbeat = 10 * time.Second

// heldClaim is a request_id this call claimed: it is touched while the call runs, until
// stop; release gives it up (a failed call runs again when retried).
type heldClaim struct {
	stop    func()
	release func()
}

// claim registers c's request_id. It returns the recorded answer when there is one (after
// waiting for a call still running), or the claim this call now holds.
//
// The claim is written under a context the RPC's cancellation does not reach (bounded by
// its own timeout): cancelled in flight, the write may still commit, and a claim left
// running that nobody releases would keep every retry waiting until it went stale.
func (e *Engine) claim(ctx context.Context, p principal, c *Call) (recorded []byte, held *heldClaim, err error) {
	fp, err := fingerprint(c.Request)
	if err != nil {
		return nil, nil, err
	}
	key := p.answerKey()
	backoff := 20 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		a, claimed, err := e.st.Claim(cctx, key, c.RequestID, c.RPC, fp)
		cancel()
		if err != nil {
			return nil, nil, err
		}
		if claimed {
			release := func() {
				// Only answers are recorded: a failed call runs again when retried.
				rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
				defer cancel()
				if err := e.st.Release(rctx, key, c.RequestID); err != nil {
					e.log.WarnContext(ctx, "releasing a request_id failed", "err", err)
				}
			}
			if err := ctx.Err(); err != nil {
				release()
				return nil, nil, err
			}
			hctx, stop := context.WithCancel(context.WithoutCancel(ctx))
			done := make(chan struct{})
			go func() {
				defer close(done)
				wait.Every(hctx, e.claimHeartbeat, func(ctx context.Context) {
					tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
					defer cancel()
					if err := e.st.Touch(tctx, key, c.RequestID); err != nil && ctx.Err() == nil {
						e.log.WarnContext(ctx, "touching a request_id's claim failed", "err", err)
					}
				})
			}()
			return nil, &heldClaim{stop: func() { stop(); <-done }, release: release}, nil
		}
		if a.RPC != c.RPC || a.Fingerprint != fp {
			return nil, nil, errs.Invalid("request_id", "%q was used for a different request; use a new request_id", c.RequestID)
		}
		if a.Done {
			return a.Response, nil, nil
		}
		// Another call with this request_id is running: wait for its answer.
		select {
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(backoff*2, time.Second)
	}
}

// finish records the answer under c's request_id.
func (e *Engine) finish(ctx context.Context, p principal, c *Call, out proto.Message, usageID string) error {
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(out)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	return e.st.Finish(rctx, p.answerKey(), c.RequestID, b, usageID)
}

// fingerprint identifies a request's content, request_id left out, so a retry matches and
// a different request under the same id does not.
func fingerprint(req proto.Message) (string, error) {
	if req == nil {
		return "", errors.New("engine: a call with a request_id needs its request")
	}
	m := proto.Clone(req)
	r := m.ProtoReflect()
	if fd := r.Descriptor().Fields().ByName("request_id"); fd != nil && fd.Kind() == protoreflect.StringKind {
		r.Clear(fd)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return "", fmt.Errorf("engine: fingerprint: %w", err)
	}
	sum := sha256.Sum256(append([]byte(string(r.Descriptor().FullName())+"\x00"), b...))
	return hex.EncodeToString(sum[:]), nil
}

// fingerprintKey identifies an API key in the client cache without keeping it as a map key.
func fingerprintKey(k string) string {
	if k == "" {
		return ""
	}
	sum := sha256.Sum256([]byte(k))
	return hex.EncodeToString(sum[:8])
}
