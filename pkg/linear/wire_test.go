package linear_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/thefold/thefold/pkg/linear"
)

// Answers the fake does not give, from a stub server: how the client classifies each.
func TestAnswerClassification(t *testing.T) {
	t.Parallel()
	reset := time.UnixMilli(1767225600123)
	viewer := func(ctx context.Context, c *linear.Client) error { _, err := c.Viewer(ctx); return err }
	cases := []struct {
		name   string
		status int
		header map[string]string
		body   string
		call   func(context.Context, *linear.Client) error
		check  func(t *testing.T, err error)
	}{
		{
			name: "RATELIMITED error with HTTP 400", status: 400,
			header: map[string]string{"X-RateLimit-Requests-Reset": "1767225600123"},
			body:   `{"errors":[{"message":"Rate limit exceeded","extensions":{"code":"RATELIMITED"}}]}`,
			check: func(t *testing.T, err error) {
				var limited *linear.RateLimitError
				if !errors.As(err, &limited) || !limited.Reset.Equal(reset) || !linear.IsRetryable(err) {
					t.Errorf("err = %v, want a RateLimitError resetting at %v", err, reset)
				}
			},
		},
		{
			name: "429 without a reset header", status: 429, body: `{}`,
			check: func(t *testing.T, err error) {
				var limited *linear.RateLimitError
				if !errors.As(err, &limited) || !limited.Reset.IsZero() {
					t.Errorf("err = %v, want a RateLimitError with no reset", err)
				}
			},
		},
		{
			name: "FORBIDDEN error", status: 200,
			body: `{"data":null,"errors":[{"message":"Not allowed","extensions":{"code":"FORBIDDEN"}}]}`,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, linear.ErrUnauthorized) || linear.IsRetryable(err) {
					t.Errorf("err = %v, want ErrUnauthorized", err)
				}
			},
		},
		{
			name: "HTTP 401", status: 401, body: `<html>nope</html>`,
			check: func(t *testing.T, err error) {
				if !errors.Is(err, linear.ErrUnauthorized) {
					t.Errorf("err = %v, want ErrUnauthorized", err)
				}
			},
		},
		{
			name: "other GraphQL errors", status: 200,
			body: `{"data":null,"errors":[{"message":"first problem"},{"message":"second problem","extensions":{"code":"INPUT_ERROR"}}]}`,
			check: func(t *testing.T, err error) {
				var gqlErr *linear.GraphQLError
				if !errors.As(err, &gqlErr) || linear.IsRetryable(err) {
					t.Fatalf("err = %v, want a GraphQLError", err)
				}
				if diff := cmp.Diff([]string{"first problem", "second problem"}, gqlErr.Messages); diff != "" {
					t.Errorf("messages (-want +got):\n%s", diff)
				}
			},
		},
		{
			name: "503 from a proxy", status: 503, body: `<html>maintenance</html>`,
			check: func(t *testing.T, err error) {
				var status *linear.StatusError
				if !errors.As(err, &status) || status.StatusCode != 503 || !linear.IsRetryable(err) {
					t.Errorf("err = %v, want a retryable StatusError 503", err)
				}
			},
		},
		{
			name: "404 from a wrong URL", status: 404, body: `not found`,
			check: func(t *testing.T, err error) {
				var status *linear.StatusError
				if !errors.As(err, &status) || status.StatusCode != 404 || linear.IsRetryable(err) {
					t.Errorf("err = %v, want a StatusError 404, not retryable", err)
				}
			},
		},
		{
			name: "answer over the size limit", status: 200,
			body: `{"data":{"viewer":{"name":"` + strings.Repeat("x", 5<<20) + `"}}}`,
			check: func(t *testing.T, err error) {
				if err == nil || !strings.Contains(err.Error(), "larger than") || linear.IsRetryable(err) {
					t.Errorf("err = %v, want a size error", err)
				}
			},
		},
		{
			name: "success false", status: 200,
			body: `{"data":{"issueUpdate":{"success":false,"issue":null}}}`,
			call: func(ctx context.Context, c *linear.Client) error {
				_, err := c.UpdateIssueState(ctx, "issue", "state")
				return err
			},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, linear.ErrNotApplied) {
					t.Errorf("err = %v, want ErrNotApplied", err)
				}
			},
		},
		{
			name: "more pages without a cursor", status: 200,
			body: `{"data":{"issues":{"nodes":[],"pageInfo":{"hasNextPage":true,"endCursor":null}}}}`,
			call: func(ctx context.Context, c *linear.Client) error {
				_, err := c.AllIssues(ctx, linear.IssueFilter{}, 10)
				return err
			},
			check: func(t *testing.T, err error) {
				if err == nil || !strings.Contains(err.Error(), "no new cursor") {
					t.Errorf("err = %v, want a paging error", err)
				}
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("Authorization") != testKey || r.Header.Get("Content-Type") != "application/json" {
					t.Errorf("headers = %v", r.Header)
				}
				for k, v := range tc.header {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte(tc.body))
			}))
			t.Cleanup(srv.Close)
			client := &linear.Client{BaseURL: srv.URL, APIKey: testKey, HTTP: srv.Client()}
			call := tc.call
			if call == nil {
				call = viewer
			}
			err := call(t.Context(), client)
			if err == nil {
				t.Fatal("call succeeded")
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("error %q contains the API key", err)
			}
			tc.check(t, err)
		})
	}
}

func TestUnreachableAndCancelled(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	client := &linear.Client{BaseURL: url, APIKey: testKey}

	_, err := client.Viewer(t.Context())
	if err == nil || !linear.IsRetryable(err) {
		t.Errorf("unreachable: err = %v, want retryable", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = client.Viewer(ctx)
	if !errors.Is(err, context.Canceled) || linear.IsRetryable(err) {
		t.Errorf("cancelled: err = %v, want context.Canceled, not retryable", err)
	}
}
