package errs

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestModelOutputInvalid(t *testing.T) {
	st, err := status.New(codes.Unavailable, "model m answered badly").WithDetails(&errdetails.ErrorInfo{Reason: ReasonModelOutputInvalid, Domain: AIDomain})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := status.New(codes.Unavailable, "down").WithDetails(&errdetails.ErrorInfo{Reason: "PROVIDER_UNAVAILABLE", Domain: AIDomain})
	foreign, _ := status.New(codes.Unavailable, "x").WithDetails(&errdetails.ErrorInfo{Reason: ReasonModelOutputInvalid, Domain: "example.com"})
	cases := []struct {
		err  error
		want bool
	}{
		{st.Err(), true},
		{fmt.Errorf("generate a.go: %w", st.Err()), true},
		{other.Err(), false},
		{foreign.Err(), false},
		{status.Error(codes.Unavailable, "down"), false},
		{errors.New("plain"), false},
		{nil, false},
	}
	for i, c := range cases {
		if got := ModelOutputInvalid(c.err); got != c.want {
			t.Errorf("case %d (%v): %v, want %v", i, c.err, got, c.want)
		}
	}
}
