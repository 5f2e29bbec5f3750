package llm_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/thefold/thefold/services/ai/internal/llm"
)

// scripted is a Provider that answers from a list of errors (nil: success), one per call,
// and repeats the last.
type scripted struct {
	mu    sync.Mutex
	errs  []error
	calls int
}

func (s *scripted) Name() string { return "scripted" }

func (s *scripted) next() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := min(s.calls, len(s.errs)-1)
	s.calls++
	return s.errs[i]
}

func (s *scripted) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	if err := s.next(); err != nil {
		return nil, err
	}
	return &llm.Response{Text: "ok"}, nil
}

func (s *scripted) Embed(ctx context.Context, req llm.EmbedRequest) (*llm.EmbedResponse, error) {
	if err := s.next(); err != nil {
		return nil, err
	}
	return &llm.EmbedResponse{Vectors: [][]float32{{1}}}, nil
}

func perr(kind llm.ErrorKind, status int, retryAfter time.Duration) error {
	return &llm.Error{Provider: "scripted", Kind: kind, Status: status, RetryAfter: retryAfter, Err: errors.New("scripted")}
}

type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func TestWithRetry(t *testing.T) {
	t.Parallel()
	unsupported := llm.ErrUnsupported
	auth := perr(llm.KindAuth, 401, 0)
	cases := []struct {
		name      string
		errs      []error
		pol       llm.RetryPolicy
		wantCalls int
		wantErr   bool
		wantKind  llm.ErrorKind
		wantSame  error // the error must come back unwrapped
		// minSleeps: each recorded wait must be at least this (retry-after honoured)
		minSleeps []time.Duration
		maxSleep  time.Duration
	}{
		{name: "first try", errs: []error{nil}, wantCalls: 1},
		{
			name:      "429 twice then success honours retry-after",
			errs:      []error{perr(llm.KindRateLimited, 429, 3*time.Second), perr(llm.KindRateLimited, 429, 2*time.Second), nil},
			wantCalls: 3,
			minSleeps: []time.Duration{3 * time.Second, 2 * time.Second},
			maxSleep:  3 * time.Second,
		},
		{
			name:      "overloaded, server, unavailable, invalid response are retried",
			errs:      []error{perr(llm.KindOverloaded, 529, 0), perr(llm.KindServer, 500, 0), perr(llm.KindUnavailable, 0, 0), perr(llm.KindInvalidResponse, 200, 0), nil},
			pol:       llm.RetryPolicy{MaxAttempts: 5, BaseDelay: time.Second, MaxDelay: 2 * time.Second},
			wantCalls: 5,
			minSleeps: []time.Duration{0, 0, 0, 0},
			maxSleep:  2 * time.Second,
		},
		{
			name:      "exhausted",
			errs:      []error{perr(llm.KindServer, 500, 0)},
			wantCalls: 4,
			wantErr:   true,
			wantKind:  llm.KindServer,
			minSleeps: []time.Duration{0, 0, 0},
			maxSleep:  2 * time.Second, // 500ms, 1s, 2s ceilings
		},
		{name: "auth is not retried", errs: []error{auth}, wantCalls: 1, wantErr: true, wantKind: llm.KindAuth, wantSame: auth},
		{name: "bad request is not retried", errs: []error{perr(llm.KindBadRequest, 400, 0)}, wantCalls: 1, wantErr: true, wantKind: llm.KindBadRequest},
		{name: "unsupported passes through", errs: []error{unsupported}, wantCalls: 1, wantErr: true, wantSame: unsupported},
		{
			name:      "retry-after beyond the limit is not waited",
			errs:      []error{perr(llm.KindRateLimited, 429, 2*time.Minute)},
			wantCalls: 1,
			wantErr:   true,
			wantKind:  llm.KindRateLimited,
		},
		{
			name:      "one attempt allowed",
			errs:      []error{perr(llm.KindServer, 503, 0), nil},
			pol:       llm.RetryPolicy{MaxAttempts: 1},
			wantCalls: 1,
			wantErr:   true,
			wantKind:  llm.KindServer,
		},
	}
	for _, tc := range cases {
		for _, op := range []string{"complete", "embed"} {
			t.Run(tc.name+"/"+op, func(t *testing.T) {
				t.Parallel()
				sp := &scripted{errs: tc.errs}
				var sl sleeps
				pol := tc.pol
				pol.Sleep = sl.sleep
				p := llm.WithRetry(sp, pol)
				if p.Name() != "scripted" {
					t.Errorf("Name() = %q", p.Name())
				}
				ctx, counter := llm.WithAttemptCounter(context.Background())
				var err error
				if op == "complete" {
					_, err = p.Complete(ctx, llm.Request{Model: "m"})
				} else {
					_, err = p.Embed(ctx, llm.EmbedRequest{Model: "m", Texts: []string{"a"}})
				}
				if sp.calls != tc.wantCalls || *counter != tc.wantCalls {
					t.Errorf("calls = %d, counted %d, want %d", sp.calls, *counter, tc.wantCalls)
				}
				if (err != nil) != tc.wantErr {
					t.Fatalf("err = %v, want error %v", err, tc.wantErr)
				}
				if tc.wantSame != nil && err != tc.wantSame {
					t.Errorf("err = %v, want %v unwrapped", err, tc.wantSame)
				}
				if tc.wantErr && tc.wantSame == nil {
					pe, ok := llm.AsError(err)
					if !ok || pe.Kind != tc.wantKind {
						t.Errorf("err = %v, want *llm.Error of kind %v", err, tc.wantKind)
					}
					if tc.wantCalls > 1 && !strings.Contains(err.Error(), "attempts") {
						t.Errorf("err = %q does not say how many attempts", err)
					}
				}
				if len(sl.d) != len(tc.minSleeps) {
					t.Fatalf("slept %v, want %d waits", sl.d, len(tc.minSleeps))
				}
				for i, d := range sl.d {
					if d < tc.minSleeps[i] || d > tc.maxSleep {
						t.Errorf("wait %d = %s, want in [%s, %s]", i, d, tc.minSleeps[i], tc.maxSleep)
					}
				}
			})
		}
	}
}

func TestWithRetryCancelledWhileWaiting(t *testing.T) {
	t.Parallel()
	sp := &scripted{errs: []error{perr(llm.KindServer, 500, 0)}}
	ctx, cancel := context.WithCancel(context.Background())
	p := llm.WithRetry(sp, llm.RetryPolicy{Sleep: func(ctx context.Context, d time.Duration) error {
		cancel()
		return ctx.Err()
	}})
	_, err := p.Complete(ctx, llm.Request{})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if _, ok := llm.AsError(err); ok {
		t.Errorf("err = %v carries a provider error; a cancelled call must not look retryable", err)
	}
	if sp.calls != 1 {
		t.Errorf("calls = %d, want 1", sp.calls)
	}

	// Already cancelled: no call at all.
	sp = &scripted{errs: []error{nil}}
	_, err = llm.WithRetry(sp, llm.RetryPolicy{}).Complete(ctx, llm.Request{})
	if !errors.Is(err, context.Canceled) || sp.calls != 0 {
		t.Errorf("err = %v after %d calls, want context.Canceled and no call", err, sp.calls)
	}
}

func TestWithRetryDoesNotWaitPastDeadline(t *testing.T) {
	t.Parallel()
	sp := &scripted{errs: []error{perr(llm.KindRateLimited, 429, 30*time.Second), nil}}
	var sl sleeps
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := llm.WithRetry(sp, llm.RetryPolicy{Sleep: sl.sleep}).Complete(ctx, llm.Request{})
	if pe, ok := llm.AsError(err); !ok || pe.Kind != llm.KindRateLimited {
		t.Fatalf("err = %v, want the rate-limit error", err)
	}
	if len(sl.d) != 0 || sp.calls != 1 {
		t.Errorf("slept %v after %d calls, want no wait and one call", sl.d, sp.calls)
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	pol := llm.RetryPolicy{BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second}
	cases := []struct {
		n       int
		ceiling time.Duration
	}{
		{0, 100 * time.Millisecond},
		{1, 100 * time.Millisecond},
		{2, 200 * time.Millisecond},
		{4, 800 * time.Millisecond},
		{5, time.Second},
		{80, time.Second},
	}
	for _, tc := range cases {
		var top time.Duration
		for range 2000 {
			d := pol.Backoff(tc.n)
			if d < 0 || d > tc.ceiling {
				t.Fatalf("Backoff(%d) = %s, want in [0, %s]", tc.n, d, tc.ceiling)
			}
			top = max(top, d)
		}
		// Full jitter spreads over the whole range: 2000 draws all in the lower half would
		// mean the ceiling is not what it should be.
		if top < tc.ceiling/2 {
			t.Errorf("Backoff(%d): largest of 2000 draws %s, want some above %s", tc.n, top, tc.ceiling/2)
		}
	}
}

// streaming is a Streamer that, per call, delivers its text deltas then fails with the
// call's error (nil: succeeds).
type streaming struct {
	mu     sync.Mutex
	deltas []string
	// before is how many deltas each call delivers before failing; errs its errors.
	before []int
	errs   []error
	calls  int
}

func (s *streaming) Name() string { return "streaming" }

func (s *streaming) Complete(ctx context.Context, req llm.Request) (*llm.Response, error) {
	return nil, errors.New("not used")
}

func (s *streaming) Embed(ctx context.Context, req llm.EmbedRequest) (*llm.EmbedResponse, error) {
	return nil, llm.ErrUnsupported
}

func (s *streaming) Stream(ctx context.Context, req llm.Request, on func(llm.Delta) error) (*llm.Response, error) {
	s.mu.Lock()
	i := min(s.calls, len(s.errs)-1)
	s.calls++
	s.mu.Unlock()
	n := len(s.deltas)
	if s.errs[i] != nil {
		n = s.before[i]
	}
	for _, d := range s.deltas[:n] {
		if err := on(llm.Delta{Text: d}); err != nil {
			return nil, err
		}
	}
	if s.errs[i] != nil {
		return nil, s.errs[i]
	}
	return &llm.Response{Text: strings.Join(s.deltas, "")}, nil
}

// A stream is retried like a call until its first delta is delivered, and never after.
func TestWithRetryStream(t *testing.T) {
	t.Parallel()
	server := perr(llm.KindServer, 503, 0)
	cases := []struct {
		name      string
		before    []int
		errs      []error
		wantCalls int
		wantText  []string // delivered
		wantErr   bool
	}{
		{"fails before the first delta, then streams", []int{0, 0}, []error{server, nil}, 2, []string{"a", "b", "c"}, false},
		{"breaks after a delta: not retried", []int{1, 0}, []error{server, nil}, 1, []string{"a"}, true},
		{"not retryable before a delta", []int{0}, []error{perr(llm.KindAuth, 401, 0)}, 1, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			sp := &streaming{deltas: []string{"a", "b", "c"}, before: tc.before, errs: tc.errs}
			var sl sleeps
			var got []string
			ctx, counter := llm.WithAttemptCounter(context.Background())
			resp, err := llm.WithRetry(sp, llm.RetryPolicy{Sleep: sl.sleep}).(llm.Streamer).Stream(ctx, llm.Request{},
				func(d llm.Delta) error { got = append(got, d.Text); return nil })
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err == nil && resp.Text != "abc" {
				t.Errorf("text %q", resp.Text)
			}
			if tc.wantErr {
				if _, ok := llm.AsError(err); !ok {
					t.Errorf("err = %v does not carry the provider's error", err)
				}
			}
			if sp.calls != tc.wantCalls || *counter != tc.wantCalls {
				t.Errorf("calls = %d (counted %d), want %d", sp.calls, *counter, tc.wantCalls)
			}
			if !slices.Equal(got, tc.wantText) {
				t.Errorf("delivered %q, want %q", got, tc.wantText)
			}
		})
	}
}

// A provider that cannot stream answers whole: the text as one delta, then each tool call.
func TestStreamWithoutStreamer(t *testing.T) {
	t.Parallel()
	p := &whole{resp: &llm.Response{Text: "all at once", ToolUses: []llm.Block{
		{Kind: llm.BlockToolUse, ToolUseID: "1", ToolName: "a"}, {Kind: llm.BlockToolUse, ToolUseID: "2", ToolName: "b"}}}}
	var got []string
	resp, err := llm.Stream(context.Background(), llm.WithRetry(p, llm.RetryPolicy{}), llm.Request{}, func(d llm.Delta) error {
		if d.ToolUse != nil {
			got = append(got, "tool "+d.ToolUse.ToolName)
		} else {
			got = append(got, d.Text)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"all at once", "tool a", "tool b"}; !slices.Equal(got, want) || resp != p.resp {
		t.Errorf("delivered %q, want %q", got, want)
	}
	stop := errors.New("stop")
	if _, err := llm.Stream(context.Background(), p, llm.Request{}, func(llm.Delta) error { return stop }); err != stop {
		t.Errorf("err = %v, want the callback's", err)
	}
}

type whole struct{ resp *llm.Response }

func (w *whole) Name() string { return "whole" }
func (w *whole) Complete(context.Context, llm.Request) (*llm.Response, error) {
	return w.resp, nil
}
func (w *whole) Embed(context.Context, llm.EmbedRequest) (*llm.EmbedResponse, error) {
	return nil, llm.ErrUnsupported
}
