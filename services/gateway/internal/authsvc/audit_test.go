package authsvc_test

import (
	"strconv"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

// TestLoginAuditAndReport: an admin reads the login audit (filtered, paged, newest first)
// and the report of failed logins — totals, and the addresses over the threshold with
// their lockout — for known and unknown addresses alike; a member may do neither.
func TestLoginAuditAndReport(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	start := time.Now().Add(-time.Second)
	_, _, memberCtx := h.member(t, "frank@example.com") // a code sent, a success
	erin := h.createUser(t, "erin@example.com", gatewayv1.Role_ROLE_MEMBER)
	code := h.requestCode(t, "Erin@Example.com")
	if _, err := h.auth.RequestLoginCode(h.anon, &gatewayv1.RequestLoginCodeRequest{Email: "nobody@example.com"}); err != nil {
		t.Fatal(err)
	}
	for i := range 6 { // five failures lock erin out; the sixth try is refused unchecked
		_, err := h.auth.VerifyLoginCode(h.anon, &gatewayv1.VerifyLoginCodeRequest{Email: "erin@example.com", Code: wrongCode(code)})
		want := codes.Unauthenticated
		if i == 5 {
			want = codes.ResourceExhausted
		}
		grpctest.WantCode(t, err, want)
	}
	for range 2 {
		_, err := h.auth.VerifyLoginCode(h.anon, &gatewayv1.VerifyLoginCodeRequest{Email: "nobody@example.com", Code: "123456"})
		grpctest.WantCode(t, err, codes.Unauthenticated)
	}

	t.Run("report", func(t *testing.T) {
		r, err := h.users.GetLoginReport(h.admin, &gatewayv1.GetLoginReportRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if r.GetCodesSent() != 2 || r.GetCodesNotSent() != 1 || r.GetSuccesses() != 1 || r.GetFailures() != 7 ||
			r.GetLockedOutAttempts() != 1 || r.GetTruncated() {
			t.Errorf("totals = %v", r)
		}
		if got := r.GetEndTime().AsTime().Sub(r.GetStartTime().AsTime()); got != 24*time.Hour {
			t.Errorf("default window = %s, want 24h", got)
		}
		if len(r.GetAddresses()) != 1 {
			t.Fatalf("addresses with ≥ 5 failures = %v, want erin's", r.GetAddresses())
		}
		a := r.GetAddresses()[0]
		if a.GetEmail() != "erin@example.com" || a.GetUserId() != erin.GetId() || a.GetFailures() != 5 ||
			a.GetLockedOutAttempts() != 1 || a.GetPeers() != 1 || a.GetLastFailureTime().AsTime().Before(start) ||
			!a.GetLockedUntil().AsTime().After(time.Now()) {
			t.Errorf("erin in the report = %v", a)
		}
		// A lower threshold lists the unknown address too, after erin, without a user.
		r, err = h.users.GetLoginReport(h.admin, &gatewayv1.GetLoginReportRequest{MinFailures: 2, Window: durationpb.New(time.Hour)})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.GetAddresses()) != 2 || r.GetAddresses()[1].GetEmail() != "nobody@example.com" ||
			r.GetAddresses()[1].GetUserId() != "" || r.GetAddresses()[1].GetFailures() != 2 || r.GetAddresses()[1].GetLockedUntil() != nil {
			t.Errorf("addresses with ≥ 2 failures = %v", r.GetAddresses())
		}
	})

	t.Run("audit", func(t *testing.T) {
		var all []*gatewayv1.LoginAttempt
		req := &gatewayv1.ListLoginAttemptsRequest{Email: "ERIN@example.com", PageSize: 3}
		for pages := 0; ; pages++ {
			resp, err := h.users.ListLoginAttempts(h.admin, req)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, resp.GetAttempts()...)
			if resp.GetNextPageToken() == "" {
				if pages != 2 {
					t.Errorf("%d pages of 3 for 7 rows, want 3", pages+1)
				}
				break
			}
			req.PageToken = resp.GetNextPageToken()
		}
		want := []gatewayv1.LoginOutcome{gatewayv1.LoginOutcome_LOGIN_OUTCOME_LOCKED_OUT}
		for range 5 {
			want = append(want, gatewayv1.LoginOutcome_LOGIN_OUTCOME_BAD_CODE)
		}
		want = append(want, gatewayv1.LoginOutcome_LOGIN_OUTCOME_CODE_SENT)
		if len(all) != len(want) {
			t.Fatalf("erin's audit = %v", all)
		}
		for i, a := range all {
			if a.GetOutcome() != want[i] || a.GetEmail() != "erin@example.com" || a.GetUserId() != erin.GetId() || a.GetTime() == nil {
				t.Errorf("row %d = %v, want %s", i, a, want[i])
			}
			if id, _ := strconv.ParseInt(a.GetId(), 10, 64); i > 0 && id >= mustInt(t, all[i-1].GetId()) {
				t.Errorf("row %d id %s not older than %s", i, a.GetId(), all[i-1].GetId())
			}
		}

		bad, err := h.users.ListLoginAttempts(h.admin, &gatewayv1.ListLoginAttemptsRequest{Outcome: gatewayv1.LoginOutcome_LOGIN_OUTCOME_BAD_CODE})
		if err != nil || len(bad.GetAttempts()) != 7 {
			t.Errorf("BAD_CODE rows = %d, %v; want 7", len(bad.GetAttempts()), err)
		}
		later, err := h.users.ListLoginAttempts(h.admin, &gatewayv1.ListLoginAttemptsRequest{StartTime: timestamppb.New(time.Now().Add(time.Minute))})
		if err != nil || len(later.GetAttempts()) != 0 {
			t.Errorf("rows after now = %v, %v; want none", later.GetAttempts(), err)
		}
	})

	t.Run("member", func(t *testing.T) {
		_, err := h.users.ListLoginAttempts(memberCtx, &gatewayv1.ListLoginAttemptsRequest{})
		grpctest.WantCode(t, err, codes.PermissionDenied)
		_, err = h.users.GetLoginReport(memberCtx, &gatewayv1.GetLoginReportRequest{})
		grpctest.WantCode(t, err, codes.PermissionDenied)
	})
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatalf("%q is not an integer id", s)
	}
	return n
}
