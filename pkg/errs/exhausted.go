package errs

import (
	"fmt"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ResourceExhausted returns a ResourceExhausted status whose message names the limit that
// was reached and which carries a google.rpc.RetryInfo detail saying when a retry may
// succeed, so clients back off by the server's word rather than by guessing. retryAfter
// below zero is taken as zero.
func ResourceExhausted(retryAfter time.Duration, format string, args ...any) error {
	st := status.New(codes.ResourceExhausted, fmt.Sprintf(format, args...))
	if d, err := st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(max(retryAfter, 0))}); err == nil {
		return d.Err()
	}
	return st.Err()
}

// RetryAfter returns the delay of the RetryInfo detail err's status carries, if any.
func RetryAfter(err error) (time.Duration, bool) {
	st, ok := status.FromError(err)
	if !ok {
		return 0, false
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok && ri.GetRetryDelay() != nil {
			return ri.GetRetryDelay().AsDuration(), true
		}
	}
	return 0, false
}
