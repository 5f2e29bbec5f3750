package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/errs"
)

// toolError is a failed call as the tool's caller reads it: the gRPC status code, the API's
// message and the field violations by field. The SDK turns a handler's error into a result
// with IsError set, so the model sees it and can correct the call; a protocol error is
// left for what is wrong with the MCP exchange itself (an unknown tool, arguments that are
// not JSON).
type toolError struct {
	// what is the step that failed ("start the job"), empty when it is the whole tool.
	what string
	st   *status.Status
}

// callError wraps err, the error of a call to TheFold or of the tool's own input checks
// (pkg/validate's statuses), for the tool's result.
func callError(what string, err error) error {
	var st *status.Status
	var se interface{ GRPCStatus() *status.Status }
	switch {
	case errors.As(err, &se):
		st = se.GRPCStatus()
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		st = status.FromContextError(err)
	default:
		st = status.Convert(err)
	}
	return &toolError{what: what, st: st}
}

func (e *toolError) Error() string {
	var b strings.Builder
	if e.what != "" {
		b.WriteString("could not " + e.what + ": ")
	}
	fmt.Fprintf(&b, "%s: %s", codeName(e.st.Code()), e.st.Message())
	var fields []string
	for _, f := range errs.FieldViolations(e.st) {
		v := f.GetField() + ": " + f.GetDescription()
		// errs.Invalid's message is its one violation: say it once.
		if v != e.st.Message() {
			fields = append(fields, "\n  "+v)
		}
	}
	if len(fields) > 0 {
		sort.Strings(fields)
		b.WriteString("\nfield violations:" + strings.Join(fields, ""))
	}
	switch e.st.Code() {
	case codes.Unauthenticated:
		b.WriteString("\n(the login this server was started with is not accepted: start it again with a fresh token or API key)")
	case codes.Unavailable, codes.DeadlineExceeded:
		b.WriteString("\n(TheFold did not answer in time: is it running? retry the call)")
	case codes.NotFound:
		b.WriteString("\n(it does not exist, or it is not the person's)")
	}
	return b.String()
}

// codeName is the code as the API documents it: INVALID_ARGUMENT, NOT_FOUND, …
func codeName(c codes.Code) string {
	if c == codes.Canceled {
		return "CANCELLED"
	}
	s := c.String()
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return strings.ToUpper(b.String())
}
