package store_test

import (
	"testing"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"

	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/services/builder/internal/store"
)

// A RetryStep with a request_id runs the step once: a retry of that call returns the build
// as it is, also after the step failed again; another request_id runs it again, and the same
// request_id for another request is refused.
func TestRetryRequestID(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	b := failedBuild(t, s, "rr1")
	r := &recorder{}
	first := store.RetryRequest{ID: "retry-1", Hash: []byte("step 2, guidance g")}

	got, err := s.Retry(ctx, alice, b.Id, 2, "g", first, r.enqueue)
	if err != nil || got.Status != pending || got.Generation != 1 {
		t.Fatalf("first Retry: %v %v", got, err)
	}
	again, err := s.Retry(ctx, alice, b.Id, 2, "g", first, r.enqueue)
	if err != nil || again.Status != pending || again.Generation != 1 {
		t.Fatalf("retried Retry: %v %v, want the build as it is (pending, generation 1)", again, err)
	}
	_, err = s.Retry(ctx, alice, b.Id, 2, "other", store.RetryRequest{ID: "retry-1", Hash: []byte("other")}, r.enqueue)
	grpctest.WantCode(t, err, codes.InvalidArgument, "request_id")

	// The step fails again; the lost answer's retry still runs nothing.
	lease := uuid.NewString()
	cb, _ := mustClaim(t, s, b.Id, lease)
	cb.Status, cb.Error = failed, "step 2 failed again"
	mustApply(t, s, lease, store.Change{Build: cb, Steps: []*store.Step{step(b.Id, 2, stepFailed, "b.go")}})
	late, err := s.Retry(ctx, alice, b.Id, 2, "g", first, r.enqueue)
	if err != nil || late.Status != failed || late.Generation != 1 {
		t.Fatalf("late retry of the first call: %v %v, want the failed build untouched", late, err)
	}
	if n := len(r.got()); n != 1 {
		t.Fatalf("enqueued %d times, want 1", n)
	}
	// A new request runs it again.
	if next, err := s.Retry(ctx, alice, b.Id, 2, "g", store.RetryRequest{ID: "retry-2", Hash: first.Hash}, r.enqueue); err != nil || next.Generation != 2 {
		t.Fatalf("second request: %v %v", next, err)
	}
	if n := len(r.got()); n != 2 {
		t.Fatalf("enqueued %d times, want 2", n)
	}
}
