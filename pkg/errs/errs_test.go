package errs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestToStatus(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&logs, nil))
	cases := []struct {
		name     string
		err      error
		code     codes.Code
		contains string
		hides    string
	}{
		{"not found", fmt.Errorf("task %q: %w", "x", ErrNotFound), codes.NotFound, `task "x"`, ""},
		{"precondition", fmt.Errorf("cannot move: %w", ErrFailedPrecondition), codes.FailedPrecondition, "cannot move", ""},
		{"status passes", status.Error(codes.InvalidArgument, "title: required"), codes.InvalidArgument, "title", ""},
		{"canceled", fmt.Errorf("q: %w", context.Canceled), codes.Canceled, "", ""},
		{"internal masked", errors.New(`pq: relation "tasks" does not exist`), codes.Internal, "internal error (ref ", "relation"},
	}
	for _, tc := range cases {
		got := ToStatus(context.Background(), log, "/m", tc.err)
		st := status.Convert(got)
		if st.Code() != tc.code {
			t.Errorf("%s: code = %v, want %v", tc.name, st.Code(), tc.code)
		}
		if !strings.Contains(st.Message(), tc.contains) {
			t.Errorf("%s: message %q lacks %q", tc.name, st.Message(), tc.contains)
		}
		if tc.hides != "" && strings.Contains(st.Message(), tc.hides) {
			t.Errorf("%s: message %q leaks %q", tc.name, st.Message(), tc.hides)
		}
	}
	if !strings.Contains(logs.String(), "relation") {
		t.Error("internal error detail not logged")
	}
}

func TestInvalidNamesField(t *testing.T) {
	t.Parallel()
	st := status.Convert(Invalid("title", "required"))
	if st.Code() != codes.InvalidArgument || st.Message() != "title: required" {
		t.Fatalf("status = %v", st)
	}
	var found bool
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok && br.FieldViolations[0].Field == "title" {
			found = true
		}
	}
	if !found {
		t.Fatal("no BadRequest detail")
	}
}

func TestFieldViolations(t *testing.T) {
	if v := FieldViolations(status.Convert(Invalid("connection.repo", "required"))); len(v) != 1 || v[0].GetField() != "connection.repo" ||
		v[0].GetDescription() != "required" {
		t.Fatalf("violations of Invalid: %v", v)
	}
	if v := FieldViolations(status.Convert(Precondition("no"))); len(v) != 0 {
		t.Fatalf("violations of a status without them: %v", v)
	}
}
