package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/thefold/thefold/services/ai/internal/llm"
	"github.com/thefold/thefold/services/ai/internal/netguard"
)

// transport is what the three clients share: the HTTP client, the per-attempt timeout and
// the classification of failures. Classification looks at what happened on the wire (was
// a request sent, what status and headers came back) rather than at each SDK's error
// types: the SDKs disagree (genai's APIError has no headers, so no retry-after), the wire
// does not.
type transport struct {
	name    string
	timeout time.Duration
	http    *http.Client
}

// exchange records the last HTTP round trip of one attempt.
type exchange struct {
	mu     sync.Mutex
	sent   bool
	status int
	header http.Header
	// blocked is the connection's refusal by the base-URL policy (netguard), kept here
	// because not every SDK wraps the transport's error so that errors.Is finds it.
	blocked error
}

type exchangeKey struct{}

func (x *exchange) record(resp *http.Response, err error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	if errors.Is(err, netguard.ErrBlocked) {
		x.blocked = err
		return // nothing left this process
	}
	x.sent = true
	if resp != nil {
		x.status, x.header = resp.StatusCode, resp.Header.Clone()
	}
}

func (x *exchange) get() (sent bool, status int, header http.Header, blocked error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.sent, x.status, x.header, x.blocked
}

// recorder is the RoundTripper that fills the attempt's exchange.
type recorder struct{ next http.RoundTripper }

func (r recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if x, ok := req.Context().Value(exchangeKey{}).(*exchange); ok {
		x.record(resp, err)
	}
	return resp, err
}

// wrapHTTPClient returns a copy of c (or a new client) whose transport records exchanges.
func wrapHTTPClient(c *http.Client) *http.Client {
	var out http.Client
	if c != nil {
		out = *c
	}
	next := out.Transport
	if next == nil {
		next = http.DefaultTransport
	}
	out.Transport = recorder{next: next}
	return &out
}

// attempt runs one SDK call under the per-attempt timeout and turns its failure into an
// *llm.Error — or, when ctx itself ended, into ctx's error, which is never retried.
// kindOf may refine the kind from the SDK's error (Anthropic's overloaded_error type).
func (t transport) attempt(ctx context.Context, kindOf func(error) (llm.ErrorKind, bool), call func(ctx context.Context) error) error {
	actx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	x := &exchange{}
	err := call(context.WithValue(actx, exchangeKey{}, x))
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("%s: %w", t.name, cerr)
	}
	sent, status, header, blocked := x.get()
	e := &llm.Error{Provider: t.name, Status: status, Err: err}
	timedOut := actx.Err() != nil || errors.Is(err, context.DeadlineExceeded)
	switch {
	case blocked != nil && !sent:
		// The base URL reaches an address the operator does not allow: nothing was sent,
		// and trying again cannot help. The refusal itself is the error (errors.Is finds
		// netguard.ErrBlocked through it, whatever the SDK made of it).
		e.Kind, e.Err = llm.KindBadRequest, blocked
	case status >= 400:
		e.Kind = kindOfStatus(status)
		e.RetryAfter = retryAfter(header, time.Now())
	case status != 0 && timedOut:
		e.Kind, e.Err = llm.KindUnavailable, fmt.Errorf("answer not read within %s: %v", t.timeout, err)
	case status != 0:
		// An answer came and the SDK could not make sense of it.
		e.Kind = llm.KindInvalidResponse
	case timedOut:
		// %v, not %w: the attempt's deadline is not the caller's, and errors.Is must not
		// say DeadlineExceeded for a provider that did not answer.
		e.Kind, e.Err = llm.KindUnavailable, fmt.Errorf("no answer within %s: %v", t.timeout, err)
	case sent:
		// Sent and no status: the connection failed (refused, reset, DNS).
		e.Kind = llm.KindUnavailable
	default:
		// The SDK gave up before sending: the request itself is wrong.
		e.Kind = llm.KindBadRequest
	}
	if kindOf != nil && status != 0 {
		// status >= 400, or an error event in a stream that began with 200.
		if k, ok := kindOf(err); ok {
			e.Kind = k
		}
	}
	return e
}

// stream runs one streaming SDK call like attempt. The call hands each delta to emit,
// which passes it to on. An error of on is the caller's (the client went away): it ends
// the call and is returned as it is, never classified as the provider's.
func (t transport) stream(ctx context.Context, kindOf func(error) (llm.ErrorKind, bool), on func(llm.Delta) error,
	call func(ctx context.Context, emit func(llm.Delta) error) error) error {
	var onErr error
	emit := func(d llm.Delta) error {
		if err := on(d); err != nil {
			onErr = err
			return err
		}
		return nil
	}
	err := t.attempt(ctx, kindOf, func(ctx context.Context) error { return call(ctx, emit) })
	if onErr != nil {
		return onErr
	}
	return err
}

// invalid is the error for an answer that decoded but is not a usable reply.
func (t transport) invalid(format string, args ...any) error {
	return &llm.Error{Provider: t.name, Kind: llm.KindInvalidResponse, Status: http.StatusOK, Err: fmt.Errorf(format, args...)}
}

// badRequest is the error for an llm.Request this provider cannot express.
func (t transport) badRequest(format string, args ...any) error {
	return &llm.Error{Provider: t.name, Kind: llm.KindBadRequest, Err: fmt.Errorf(format, args...)}
}

func kindOfStatus(status int) llm.ErrorKind {
	switch {
	case status == http.StatusTooManyRequests:
		return llm.KindRateLimited
	case status == 529:
		return llm.KindOverloaded
	case status == http.StatusRequestTimeout:
		return llm.KindUnavailable
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		return llm.KindAuth
	case status == http.StatusBadRequest || status == http.StatusNotFound ||
		status == http.StatusRequestEntityTooLarge || status == http.StatusUnprocessableEntity:
		return llm.KindBadRequest
	case status >= 500:
		return llm.KindServer
	}
	return llm.KindUnknown
}

// retryAfter reads how long the provider asked to wait: retry-after-ms (OpenAI), else
// retry-after in seconds or as an HTTP date. 0 when absent or unreadable.
func retryAfter(h http.Header, now time.Time) time.Duration {
	if h == nil {
		return 0
	}
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s > 0 && s < 1e9 {
			return time.Duration(s * float64(time.Second))
		}
		return 0
	}
	if at, err := http.ParseTime(v); err == nil && at.After(now) {
		return at.Sub(now)
	}
	return 0
}
