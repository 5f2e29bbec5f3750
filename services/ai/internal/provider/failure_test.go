package provider_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/thefold/thefold/pkg/fakellm"
	"github.com/thefold/thefold/services/ai/internal/llm"
	"github.com/thefold/thefold/services/ai/internal/provider"
)

func ok() fakellm.Response { return fakellm.Response{Text: "ok"} }

func fail(status int, retryAfter float64) fakellm.Response {
	return fakellm.Response{Error: &fakellm.Error{Status: status, RetryAfter: retryAfter}}
}

// sameWaits compares recorded waits with wanted ones: a wanted 0 is the backoff, capped at
// 1ms in these tests; anything else is a retry-after and must be exact.
func sameWaits(got, want []time.Duration) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		if got[i] != want[i] && (want[i] != 0 || got[i] > time.Millisecond) {
			return false
		}
	}
	return true
}

func TestFailures(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		only        string // a family name, or "" for all
		responses   []fakellm.Response
		maxAttempts int
		timeout     time.Duration
		// wantKind is the error's kind; -1: success.
		wantKind     llm.ErrorKind
		wantStatus   int
		wantAttempts int
		wantWaits    []time.Duration
		wantRetryAft time.Duration
		wantText     string // in the error
	}{
		{
			name:      "429 twice then success, retry-after honoured",
			responses: []fakellm.Response{{Error: &fakellm.Error{Status: 429, RetryAfter: 2}, Times: 2}, ok()},
			wantKind:  -1, wantAttempts: 3, wantWaits: []time.Duration{2 * time.Second, 2 * time.Second},
		},
		{
			name:      "429 reports its retry-after",
			responses: []fakellm.Response{fail(429, 1.5)}, maxAttempts: 1,
			wantKind: llm.KindRateLimited, wantStatus: 429, wantAttempts: 1, wantRetryAft: 1500 * time.Millisecond,
		},
		{
			name:      "429 asking for longer than the policy waits is not waited",
			responses: []fakellm.Response{fail(429, 120), ok()},
			wantKind:  llm.KindRateLimited, wantStatus: 429, wantAttempts: 1, wantRetryAft: 120 * time.Second,
			wantText: "asked to wait",
		},
		{
			name:      "529 overloaded then success",
			responses: []fakellm.Response{fail(529, 0), ok()},
			wantKind:  -1, wantAttempts: 2, wantWaits: []time.Duration{0},
		},
		{
			name:      "529 overloaded",
			responses: []fakellm.Response{fail(529, 0)}, maxAttempts: 1,
			wantKind: llm.KindOverloaded, wantStatus: 529, wantAttempts: 1,
		},
		{
			name: "overloaded_error type on another status", only: "anthropic",
			responses: []fakellm.Response{{Error: &fakellm.Error{Status: 503, Type: "overloaded_error"}}}, maxAttempts: 1,
			wantKind: llm.KindOverloaded, wantStatus: 503, wantAttempts: 1,
		},
		{
			name:      "500 until the attempts run out",
			responses: []fakellm.Response{{Error: &fakellm.Error{Status: 500}, RepeatLast: true}}, maxAttempts: 3,
			wantKind: llm.KindServer, wantStatus: 500, wantAttempts: 3, wantWaits: []time.Duration{0, 0},
			wantText: "3 attempts",
		},
		{
			name:      "401 is not retried",
			responses: []fakellm.Response{fail(401, 0), ok()},
			wantKind:  llm.KindAuth, wantStatus: 401, wantAttempts: 1,
		},
		{
			name:      "400 is not retried",
			responses: []fakellm.Response{fail(400, 0), ok()},
			wantKind:  llm.KindBadRequest, wantStatus: 400, wantAttempts: 1,
		},
		{
			name:      "malformed JSON",
			responses: []fakellm.Response{{Raw: `{"id": "fakellm-1", "content": [`, RepeatLast: true}}, maxAttempts: 2,
			wantKind: llm.KindInvalidResponse, wantStatus: 200, wantAttempts: 2, wantWaits: []time.Duration{0},
		},
		{
			name:      "malformed JSON once, then success",
			responses: []fakellm.Response{{Raw: `not json at all`}, ok()},
			wantKind:  -1, wantAttempts: 2, wantWaits: []time.Duration{0},
		},
		{
			name:      "JSON that is no answer",
			responses: []fakellm.Response{{Raw: `{}`}}, maxAttempts: 1,
			wantKind: llm.KindInvalidResponse, wantStatus: 200, wantAttempts: 1,
		},
		{
			name:      "no answer within the attempt timeout",
			responses: []fakellm.Response{{Text: "late", Latency: fakellm.Duration(time.Minute)}}, maxAttempts: 1,
			timeout:  200 * time.Millisecond,
			wantKind: llm.KindUnavailable, wantStatus: 0, wantAttempts: 1, wantText: "no answer within 200ms",
		},
	}
	for _, f := range families {
		for _, tc := range cases {
			if tc.only != "" && tc.only != f.name {
				continue
			}
			t.Run(f.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				s := start(t, f, f.script(tc.responses...), func(c *provider.Config) {
					c.Retry.MaxAttempts = tc.maxAttempts
					c.Retry.MaxRetryAfter = time.Minute
					c.Timeout = tc.timeout
				})
				ctx, counter := llm.WithAttemptCounter(context.Background())
				resp, err := s.p.Complete(ctx, llm.Request{Model: "m", Messages: []llm.Message{llm.UserText("hello")}})
				if *counter != tc.wantAttempts || len(s.srv.Requests()) != tc.wantAttempts {
					t.Errorf("attempts counted %d, served %d; want %d", *counter, len(s.srv.Requests()), tc.wantAttempts)
				}
				if w := s.waits.all(); !sameWaits(w, tc.wantWaits) {
					t.Errorf("waits = %v, want %v", w, tc.wantWaits)
				}
				if tc.wantKind == -1 {
					if err != nil || resp.Text != "ok" {
						t.Fatalf("Complete = %+v, %v; want ok", resp, err)
					}
					return
				}
				pe, isProvider := llm.AsError(err)
				if !isProvider {
					t.Fatalf("err = %v, want an *llm.Error", err)
				}
				if pe.Kind != tc.wantKind || pe.Status != tc.wantStatus || pe.Provider != f.name {
					t.Errorf("error kind %v status %d provider %q, want %v %d %q (%v)", pe.Kind, pe.Status, pe.Provider, tc.wantKind, tc.wantStatus, f.name, err)
				}
				if pe.RetryAfter != tc.wantRetryAft {
					t.Errorf("RetryAfter = %s, want %s", pe.RetryAfter, tc.wantRetryAft)
				}
				if !strings.Contains(err.Error(), tc.wantText) {
					t.Errorf("err = %q, want it to say %q", err, tc.wantText)
				}
				if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
					t.Errorf("err = %v passes for the caller's cancellation", err)
				}
			})
		}
	}
}

// Cancelling the caller's context ends a call at once, with the context's error and not a
// provider error anyone would retry.
func TestCancellation(t *testing.T) {
	t.Parallel()
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, f, f.script(fakellm.Response{Text: "late", Latency: fakellm.Duration(time.Hour)}), nil)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			ctx, counter := llm.WithAttemptCounter(ctx)
			done := make(chan error, 1)
			go func() {
				_, err := s.p.Complete(ctx, llm.Request{Model: "m", Messages: []llm.Message{llm.UserText("hello")}})
				done <- err
			}()
			// Cancel once fakellm holds the request (it records arrivals), so the cancel
			// lands mid-call.
			deadline := time.Now().Add(10 * time.Second)
			for len(s.srv.Requests()) == 0 {
				if time.Now().After(deadline) {
					t.Fatal("the request never reached fakellm")
				}
				time.Sleep(5 * time.Millisecond)
			}
			cancel()
			err := <-done
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("err = %v, want context.Canceled", err)
			}
			if _, ok := llm.AsError(err); ok {
				t.Errorf("err = %v is a provider error", err)
			}
			if *counter != 1 || len(s.waits.all()) != 0 {
				t.Errorf("attempts %d, waits %v; want one attempt and no wait", *counter, s.waits.all())
			}
		})
	}
}

// A caller's deadline is the caller's: it is not an Unavailable provider.
func TestCallerDeadline(t *testing.T) {
	t.Parallel()
	for _, f := range families {
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, f, f.script(fakellm.Response{Text: "late", Latency: fakellm.Duration(time.Hour)}), nil)
			ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
			defer cancel()
			_, err := s.p.Complete(ctx, llm.Request{Model: "m", Messages: []llm.Message{llm.UserText("hello")}})
			if !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("err = %v, want context.DeadlineExceeded", err)
			}
			if _, ok := llm.AsError(err); ok {
				t.Errorf("err = %v is a provider error", err)
			}
		})
	}
}

func TestEmbedRetries(t *testing.T) {
	t.Parallel()
	for _, f := range families {
		if !f.embeds() {
			continue
		}
		t.Run(f.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, f, &fakellm.Script{Embeddings: []fakellm.Response{fail(429, 3), {RepeatLast: true}}}, nil)
			ctx, counter := llm.WithAttemptCounter(context.Background())
			resp, err := s.p.Embed(ctx, llm.EmbedRequest{Model: "e", Texts: []string{"a"}})
			if err != nil || len(resp.Vectors) != 1 {
				t.Fatalf("Embed = %+v, %v", resp, err)
			}
			if *counter != 2 || !cmp.Equal(s.waits.all(), []time.Duration{3 * time.Second}) {
				t.Errorf("attempts %d, waits %v; want 2 and [3s]", *counter, s.waits.all())
			}
			// Exhausted with 401: not retried.
			s.srv.SetScript(&fakellm.Script{Embeddings: []fakellm.Response{fail(401, 0)}})
			_, err = s.p.Embed(context.Background(), llm.EmbedRequest{Model: "e", Texts: []string{"a"}})
			if pe, ok := llm.AsError(err); !ok || pe.Kind != llm.KindAuth {
				t.Errorf("err = %v, want Auth", err)
			}
		})
	}
}
