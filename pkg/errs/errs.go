// Package errs is the one place where domain errors become gRPC statuses. Stores return the
// sentinels below (wrapped with context); handlers return InvalidArgument for bad input with
// the field named; the server's error interceptor maps the rest and masks anything
// unexpected, so no SQL or provider text ever reaches a client.
package errs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/events"
)

// Sentinel errors for stores and domain logic. Wrap them with fmt.Errorf("…: %w", ErrX);
// the text before the sentinel is shown to the client, so keep it free of internals.
var (
	ErrNotFound           = errors.New("not found")
	ErrAlreadyExists      = errors.New("already exists")
	ErrConflict           = errors.New("conflict")
	ErrFailedPrecondition = errors.New("failed precondition")
	ErrPermissionDenied   = errors.New("permission denied")
	ErrInvalid            = errors.New("invalid argument")
	ErrUnavailable        = errors.New("unavailable")
)

// Invalid returns an InvalidArgument status naming field, with a BadRequest detail that
// machine clients can read.
func Invalid(field, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	st := status.New(codes.InvalidArgument, field+": "+msg)
	if d, err := st.WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: field, Description: msg}}}); err == nil {
		return d.Err()
	}
	return st.Err()
}

// FieldViolations are the field violations of st's BadRequest details (what Invalid puts
// there), in order; none for a status without them.
func FieldViolations(st *status.Status) []*errdetails.BadRequest_FieldViolation {
	var out []*errdetails.BadRequest_FieldViolation
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			out = append(out, br.GetFieldViolations()...)
		}
	}
	return out
}

// Precondition returns a FailedPrecondition status.
func Precondition(format string, args ...any) error {
	return status.Errorf(codes.FailedPrecondition, format, args...)
}

// NotFound returns a NotFound status for a resource the caller may not see.
func NotFound(kind, id string) error {
	return status.Errorf(codes.NotFound, "%s %q not found", kind, id)
}

var sentinelCodes = []struct {
	err  error
	code codes.Code
}{
	{ErrNotFound, codes.NotFound},
	{ErrAlreadyExists, codes.AlreadyExists},
	{ErrConflict, codes.Aborted},
	{ErrFailedPrecondition, codes.FailedPrecondition},
	{ErrPermissionDenied, codes.PermissionDenied},
	{ErrInvalid, codes.InvalidArgument},
	{ErrUnavailable, codes.Unavailable},
	// A Watch cursor older than retention kept; the message names the oldest id kept.
	{events.ErrCursorExpired, codes.OutOfRange},
}

// ToStatus maps err to the status a client sees, showing only public text:
//   - the outermost status in err's chain — an *Error (its public message, never its
//     cause), a *Downstream (mapped by downstreamCodes, its text never shown) or a gRPC
//     status (its own message, not the text of what wraps it);
//   - else a sentinel's code, with the text around it when nothing but sentinels is wrapped;
//   - Unknown, Internal and DataLoss, and anything else, are masked: "internal error (ref
//     <id>)" to the client, the full error logged under that reference.
func ToStatus(ctx context.Context, log *slog.Logger, method string, err error) error {
	if err == nil {
		return nil
	}
	if gs, ok := publicStatus(err); ok {
		if d, ok := gs.(*Downstream); ok {
			return fromDownstream(ctx, log, method, d, err)
		}
		st := gs.GRPCStatus()
		if masked(st.Code()) {
			return Mask(ctx, log, method, st.Code(), err)
		}
		return st.Err()
	}
	// Its text names only ids and tells the client where the kept events begin.
	if ce, ok := errors.AsType[*events.CursorExpiredError](err); ok {
		return status.Error(codes.OutOfRange, ce.Error())
	}
	for _, s := range sentinelCodes {
		if errors.Is(err, s.err) {
			return status.Error(s.code, sentinelText(err, s.err))
		}
	}
	switch {
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, "request canceled")
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, "deadline exceeded")
	}
	return Mask(ctx, log, method, codes.Internal, err)
}

func newRef() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// UnaryServerInterceptor maps handler errors with ToStatus.
func UnaryServerInterceptor(log *slog.Logger) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		if err != nil {
			return nil, ToStatus(ctx, log, info.FullMethod, err)
		}
		return resp, nil
	}
}

// StreamServerInterceptor maps stream handler errors with ToStatus.
func StreamServerInterceptor(log *slog.Logger) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		return ToStatus(ss.Context(), log, info.FullMethod, h(srv, ss))
	}
}
