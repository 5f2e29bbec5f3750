package errs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/protoadapt"
)

// Error is an error with a public face and a private cause: the client sees Code and the
// message given to Public (and any details), never the text of the cause, which only the
// log sees. Use it where a handler knows what to tell the client about a failure whose
// cause (a driver error, a provider's answer) must stay inside:
//
//	return errs.Public(codes.FailedPrecondition, "repository %s is archived", repo).Wrap(err)
type Error struct {
	code    codes.Code
	msg     string
	details []protoadapt.MessageV1
	cause   error
}

// Public returns an error that a client sees as code with the formatted message.
func Public(code codes.Code, format string, args ...any) *Error {
	return &Error{code: code, msg: fmt.Sprintf(format, args...)}
}

// Wrap returns a copy of e with cause attached (for errors.Is/As and the log only).
func (e *Error) Wrap(cause error) *Error {
	c := *e
	c.cause = cause
	return &c
}

// WithDetails returns a copy of e whose status carries details (e.g. errdetails.BadRequest).
func (e *Error) WithDetails(details ...protoadapt.MessageV1) *Error {
	c := *e
	c.details = append(append([]protoadapt.MessageV1(nil), e.details...), details...)
	return &c
}

// Error is the full text, cause included, for logs.
func (e *Error) Error() string {
	if e.cause == nil {
		return e.msg
	}
	return e.msg + ": " + e.cause.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.cause }

// GRPCStatus is the public status: code, message and details, without the cause.
func (e *Error) GRPCStatus() *status.Status {
	st := status.New(e.code, e.msg)
	if len(e.details) > 0 {
		if d, err := st.WithDetails(e.details...); err == nil {
			return d
		}
	}
	return st
}

// masked reports the codes whose message is never shown: they mean "something broke on our
// side", and their text is whatever broke (SQL, a stack, an address).
func masked(c codes.Code) bool {
	return c == codes.Internal || c == codes.Unknown || c == codes.DataLoss
}

// Mask logs cause under a fresh reference and returns the status a client sees instead:
// "internal error (ref <id>)", with code Internal (DataLoss keeps its code: it tells an
// operator something else than a bug).
func Mask(ctx context.Context, log *slog.Logger, method string, code codes.Code, cause error) error {
	if code != codes.DataLoss {
		code = codes.Internal
	}
	ref := newRef()
	log.ErrorContext(ctx, "internal error", "method", method, "ref", ref, "code", code.String(), "err", cause)
	return status.Errorf(code, "internal error (ref %s)", ref)
}

// sentinelText is the message shown for err, which wraps sentinel: err's own text when
// every error it wraps is one of ours (fmt.Errorf("task %q: %w", id, ErrNotFound)), else
// only the sentinel's text, since another wrapped error (a *pgconn.PgError joined beside the
// sentinel) would put driver text in front of the client.
func sentinelText(err, sentinel error) string {
	for _, leaf := range leaves(err, nil) {
		if !isSentinel(leaf) {
			return sentinel.Error()
		}
	}
	return err.Error()
}

func isSentinel(err error) bool {
	for _, s := range sentinelCodes {
		if err == s.err {
			return true
		}
	}
	return false
}

// leaves returns the errors in err's tree that wrap nothing.
func leaves(err error, out []error) []error {
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		if inner := u.Unwrap(); inner != nil {
			return leaves(inner, out)
		}
	case interface{ Unwrap() []error }:
		for _, inner := range u.Unwrap() {
			out = leaves(inner, out)
		}
		return out
	}
	return append(out, err)
}

// publicStatus finds the outermost error in err's chain that carries a status (an *Error, a
// *Downstream or a gRPC status) and reports it, so an explicit errs.Public wrapping a
// downstream error wins over it, and the reverse.
func publicStatus(err error) (interface{ GRPCStatus() *status.Status }, bool) {
	var gs interface{ GRPCStatus() *status.Status }
	if errors.As(err, &gs) && gs.GRPCStatus() != nil {
		return gs, true
	}
	return nil, false
}
