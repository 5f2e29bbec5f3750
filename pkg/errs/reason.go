package errs

import (
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
)

// The ai service's ErrorInfo domain and the reason its callers act on: a model answered
// with output that could not be used even after the repair rounds. The service and the
// provider are up; another attempt (a fix round, a retry) may well succeed.
const (
	AIDomain                 = "ai.thefold.dev"
	ReasonModelOutputInvalid = "MODEL_OUTPUT_INVALID"
)

// HasReason reports whether err is (or wraps) a gRPC status carrying an ErrorInfo with the
// given domain and reason.
func HasReason(err error, domain, reason string) bool {
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.Reason == reason && info.Domain == domain {
			return true
		}
	}
	return false
}

// ModelOutputInvalid reports the ai service's MODEL_OUTPUT_INVALID answer.
func ModelOutputInvalid(err error) bool {
	return HasReason(err, AIDomain, ReasonModelOutputInvalid)
}
