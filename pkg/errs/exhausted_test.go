package errs

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestResourceExhaustedCarriesRetryInfo(t *testing.T) {
	t.Parallel()
	err := ResourceExhausted(1500*time.Millisecond, "too many %s (%d per user)", "task watches", 4)
	st := status.Convert(err)
	if st.Code() != codes.ResourceExhausted || st.Message() != "too many task watches (4 per user)" {
		t.Fatalf("status = %v %q", st.Code(), st.Message())
	}
	if d, ok := RetryAfter(err); !ok || d != 1500*time.Millisecond {
		t.Fatalf("RetryAfter = %v %v, want 1.5s", d, ok)
	}
	// The error interceptor passes it through unmasked, detail included.
	mapped := ToStatus(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), "/m", err)
	if d, ok := RetryAfter(mapped); status.Code(mapped) != codes.ResourceExhausted || !ok || d != 1500*time.Millisecond {
		t.Fatalf("after ToStatus: %v, retry %v %v", mapped, d, ok)
	}
	if d, ok := RetryAfter(ResourceExhausted(-time.Second, "x")); !ok || d != 0 {
		t.Errorf("negative delay = %v %v, want 0", d, ok)
	}
	if _, ok := RetryAfter(status.Error(codes.ResourceExhausted, "x")); ok {
		t.Error("RetryAfter found a detail in a status without one")
	}
}
