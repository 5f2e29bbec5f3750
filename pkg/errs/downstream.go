package errs

import (
	"context"
	"errors"
	"log/slog"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Downstream is a status another service (or the client transport) answered a call with.
// pkg/grpcclient returns every failed call as one, so that this service never passes it
// through as its own answer: a downstream NOT_FOUND is not the caller's NOT_FOUND, and the
// downstream's text can hold internal addresses ("dial tcp 10.0.0.3:9090: …").
//
// GRPCStatus returns the downstream status unchanged, so status.Code(err) still tells a
// handler what happened, and a pure proxy (the REST edge) still relays the answer. Servers map
// it on purpose (ToStatus, table downstreamCodes); a handler that wants another mapping
// converts explicitly, e.g.
//
//	if errs.DownstreamCode(err) == codes.NotFound { return nil, errs.NotFound("repository", repo) }
type Downstream struct {
	// Service is the full gRPC service name ("thefold.tasks.v1.TaskService").
	Service string
	// Method is the method's name ("GetTask").
	Method string
	Status *status.Status
}

// NewDownstream wraps err, the error of a call to fullMethod ("/pkg.Service/Method"), as a
// Downstream; nil stays nil and errors that carry no status are returned unchanged.
func NewDownstream(fullMethod string, err error) error {
	if err == nil {
		return nil
	}
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.OK {
		return err
	}
	svc, meth, _ := strings.Cut(strings.TrimPrefix(fullMethod, "/"), "/")
	return &Downstream{Service: svc, Method: meth, Status: st}
}

func (d *Downstream) Error() string {
	return "downstream " + d.Service + "/" + d.Method + ": " + d.Status.Code().String() + ": " + d.Status.Message()
}

// GRPCStatus is the downstream status itself (see the type's comment).
func (d *Downstream) GRPCStatus() *status.Status { return d.Status }

// DownstreamCode returns the code a downstream call failed with, and OK when err did not
// come from one.
func DownstreamCode(err error) codes.Code {
	var d *Downstream
	if errors.As(err, &d) {
		return d.Status.Code()
	}
	return codes.OK
}

// downstreamCodes is how a downstream status becomes this service's answer when the handler
// did not convert it. The rule: the caller cannot act on the downstream's reasons, only on
// "try again" or "this cannot be done now"; what is a bug on our side is masked.
//
//	Canceled                                   → Canceled (the caller went away)
//	DeadlineExceeded                           → DeadlineExceeded
//	Unavailable, ResourceExhausted             → Unavailable (a dependency is down or throttled; retry later)
//	Aborted                                    → Aborted (a concurrent change; re-read and retry)
//	NotFound, FailedPrecondition,
//	AlreadyExists, OutOfRange                  → FailedPrecondition (the operation cannot be done in
//	                                             the current state of something it depends on)
//	InvalidArgument, Unauthenticated,
//	PermissionDenied, Unimplemented, Internal,
//	Unknown, DataLoss                          → Internal, masked (we sent a bad request, or our
//	                                             identity or deployment is wrong: a bug, not the caller's)
var downstreamCodes = map[codes.Code]codes.Code{
	codes.Canceled:           codes.Canceled,
	codes.DeadlineExceeded:   codes.DeadlineExceeded,
	codes.Unavailable:        codes.Unavailable,
	codes.ResourceExhausted:  codes.Unavailable,
	codes.Aborted:            codes.Aborted,
	codes.NotFound:           codes.FailedPrecondition,
	codes.FailedPrecondition: codes.FailedPrecondition,
	codes.AlreadyExists:      codes.FailedPrecondition,
	codes.OutOfRange:         codes.FailedPrecondition,
}

// MapDownstreamCode is the code a caller sees for a downstream code (table above).
func MapDownstreamCode(c codes.Code) codes.Code {
	if m, ok := downstreamCodes[c]; ok {
		return m
	}
	return codes.Internal
}

// fromDownstream is ToStatus for a downstream error: mapped code, a message naming only the
// dependency and what it answered, the downstream's own text in the log.
func fromDownstream(ctx context.Context, log *slog.Logger, method string, d *Downstream, err error) error {
	code := MapDownstreamCode(d.Status.Code())
	var msg string
	switch code {
	case codes.Internal:
		return Mask(ctx, log, method, codes.Internal, err)
	case codes.Canceled:
		return status.Error(code, "request canceled")
	case codes.DeadlineExceeded:
		msg = "a dependency (" + d.Service + ") did not answer in time"
	case codes.Unavailable:
		msg = "a dependency (" + d.Service + ") is unavailable; try again later"
	case codes.Aborted:
		msg = "a concurrent change in a dependency (" + d.Service + "); try again"
	default:
		msg = "a dependency (" + d.Service + ") refused the operation (" + d.Status.Code().String() + ")"
	}
	log.WarnContext(ctx, "downstream error", "method", method, "downstream", d.Service+"/"+d.Method,
		"downstream_code", d.Status.Code().String(), "code", code.String(), "err", err)
	return status.Error(code, msg)
}
