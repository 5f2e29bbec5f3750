package errs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// TestPublicTextOnly: whatever a handler returns, the client sees a code and public text;
// driver text, downstream text and masked codes' messages stay in the log.
func TestPublicTextOnly(t *testing.T) {
	t.Parallel()
	pgErr := &pgconn.PgError{Code: "42P01", Message: `relation "secret_table" does not exist`}
	downstream := func(c codes.Code, msg string) error {
		return NewDownstream("/thefold.tasks.v1.TaskService/GetTask", status.Error(c, msg))
	}
	cases := []struct {
		name  string
		err   error
		code  codes.Code
		shows string // the message contains it
		hides string // and never this
	}{
		{"wrapped driver error", fmt.Errorf("store: %w", pgErr), codes.Internal, "internal error (ref ", "secret_table"},
		{"status Internal with SQL", status.Error(codes.Internal, `pq: relation "secret_table"`), codes.Internal, "internal error (ref ", "secret_table"},
		{"status Unknown", status.Error(codes.Unknown, "secret_table"), codes.Internal, "internal error (ref ", "secret_table"},
		{"status DataLoss", status.Error(codes.DataLoss, "secret_table page checksum"), codes.DataLoss, "internal error (ref ", "secret_table"},
		{"wrapped status keeps only its message", fmt.Errorf("secret_table: %w", status.Error(codes.NotFound, "task not found")), codes.NotFound, "task not found", "secret_table"},
		{"sentinel beside a driver error", fmt.Errorf("insert %w: %w", ErrAlreadyExists, pgErr), codes.AlreadyExists, "already exists", "secret_table"},
		{"sentinel alone keeps its context", fmt.Errorf("task %q: %w", "t1", ErrNotFound), codes.NotFound, `task "t1": not found`, ""},
		{"public message, private cause", Public(codes.FailedPrecondition, "repository is archived").Wrap(pgErr), codes.FailedPrecondition, "repository is archived", "secret_table"},
		{"public wrapped by context", fmt.Errorf("secret_table: %w", Public(codes.NotFound, "no such repository")), codes.NotFound, "no such repository", "secret_table"},
		{"public Internal still masked", Public(codes.Internal, "secret_table broke"), codes.Internal, "internal error (ref ", "secret_table"},
		{"downstream NotFound", downstream(codes.NotFound, "dial tcp 10.0.0.3:9090: task not found"), codes.FailedPrecondition, "thefold.tasks.v1.TaskService", "10.0.0.3"},
		{"downstream InvalidArgument is our bug", downstream(codes.InvalidArgument, "id: 10.0.0.3"), codes.Internal, "internal error (ref ", "10.0.0.3"},
		{"downstream Unavailable", downstream(codes.Unavailable, "dial tcp 10.0.0.3:9090: connection refused"), codes.Unavailable, "unavailable", "10.0.0.3"},
		{"downstream ResourceExhausted", downstream(codes.ResourceExhausted, "quota of 10.0.0.3"), codes.Unavailable, "try again", "10.0.0.3"},
		{"downstream Aborted", downstream(codes.Aborted, "10.0.0.3 lost update"), codes.Aborted, "try again", "10.0.0.3"},
		{"downstream Unauthenticated", downstream(codes.Unauthenticated, "token for 10.0.0.3"), codes.Internal, "internal error (ref ", "10.0.0.3"},
		{"downstream wrapped", fmt.Errorf("get: %w", downstream(codes.NotFound, "10.0.0.3")), codes.FailedPrecondition, "NotFound", "10.0.0.3"},
		{"explicit conversion wins", Public(codes.NotFound, "task t1 not found").Wrap(downstream(codes.NotFound, "10.0.0.3")), codes.NotFound, "task t1 not found", "10.0.0.3"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var logs bytes.Buffer
			log := slog.New(slog.NewJSONHandler(&logs, nil))
			st := status.Convert(ToStatus(context.Background(), log, "/m", tc.err))
			if st.Code() != tc.code {
				t.Errorf("code = %v, want %v (%q)", st.Code(), tc.code, st.Message())
			}
			if !strings.Contains(st.Message(), tc.shows) {
				t.Errorf("message %q lacks %q", st.Message(), tc.shows)
			}
			if tc.hides != "" && strings.Contains(st.Message(), tc.hides) {
				t.Errorf("message %q leaks %q", st.Message(), tc.hides)
			}
			if ref, ok := strings.CutPrefix(st.Message(), "internal error (ref "); ok {
				ref = strings.TrimSuffix(ref, ")")
				if !strings.Contains(logs.String(), ref) || !strings.Contains(logs.String(), tc.hides) {
					t.Errorf("log lacks the reference %s or the cause: %s", ref, logs.String())
				}
			}
		})
	}
}

func TestPublicDetailsAndChain(t *testing.T) {
	t.Parallel()
	cause := errors.New("cause")
	e := Public(codes.InvalidArgument, "title: required").
		WithDetails(&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "title"}}}).
		Wrap(cause)
	if !errors.Is(e, cause) {
		t.Error("cause not in the chain")
	}
	st := status.Convert(ToStatus(context.Background(), slog.New(slog.DiscardHandler), "/m", e))
	if st.Message() != "title: required" || len(st.Details()) != 1 {
		t.Errorf("status = %v %v", st.Message(), st.Details())
	}
	if DownstreamCode(e) != codes.OK {
		t.Error("not a downstream error")
	}
	d := NewDownstream("/a.B/C", status.Error(codes.NotFound, "x"))
	if DownstreamCode(fmt.Errorf("w: %w", d)) != codes.NotFound || status.Code(d) != codes.NotFound {
		t.Error("downstream code not readable")
	}
	if NewDownstream("/a.B/C", nil) != nil {
		t.Error("nil wrapped")
	}
}
