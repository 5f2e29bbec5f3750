package hub

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-github/v84/github"

	"github.com/thefold/thefold/pkg/errs"
)

// mapErr turns the error of a GitHub call about subject (public text: `repository "a/b"`,
// `pull request #3 in "a/b"`) into the error contract of package forge. It is the one place
// GitHub's answers are mapped; GitHub's text goes to the log, never to the caller.
//
//	rate limit (primary or secondary)  → ErrUnavailable, saying when it resets
//	429 (other throttling)             → ErrUnavailable
//	401                                → ErrUnavailable, naming THEFOLD_GITHUB_TOKEN
//	403, 404, 410                      → ErrNotFound (GitHub answers 403/404 for what the
//	                                     token may not see; never reveal that it exists)
//	409                                → ErrConflict (callers handle "repository is empty" first)
//	422                                → ErrInvalid (callers handle the 422s they expect first)
//	202 (still computing), 5xx, network → ErrUnavailable
//	context canceled / deadline        → returned as is
//	anything else                      → internal (masked by the server), with GitHub's text
func (p *Provider) mapErr(ctx context.Context, err error, subject string) error {
	if err == nil {
		return nil
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	if errors.Is(err, errNoCredential) {
		return fmt.Errorf("no GitHub credential for %s: %w", subject, errs.ErrPermissionDenied)
	}
	if rl, ok := errors.AsType[*github.RateLimitError](err); ok {
		p.log.WarnContext(ctx, "github rate limit exhausted", "subject", subject, "reset", rl.Rate.Reset.Time, "err", err)
		return rateLimitErr(rl.Rate.Reset.Time)
	}
	if ab, ok := errors.AsType[*github.AbuseRateLimitError](err); ok {
		p.log.WarnContext(ctx, "github secondary rate limit", "subject", subject, "retry_after", ab.GetRetryAfter(), "err", err)
		if ab.RetryAfter == nil {
			return fmt.Errorf("GitHub secondary rate limit hit; try again in a minute: %w", errs.ErrUnavailable)
		}
		return fmt.Errorf("GitHub secondary rate limit hit; retry after %s: %w", clock(time.Now().Add(*ab.RetryAfter)), errs.ErrUnavailable)
	}
	if _, ok := errors.AsType[*github.AcceptedError](err); ok {
		p.log.InfoContext(ctx, "github still computing", "subject", subject)
		return fmt.Errorf("GitHub is still computing %s; try again shortly: %w", subject, errs.ErrUnavailable)
	}
	if status := httpStatus(err); status != 0 {
		level := p.log.WarnContext
		if status == http.StatusNotFound || status == http.StatusUnprocessableEntity {
			level = p.log.DebugContext
		}
		level(ctx, "github error", "subject", subject, "status", status, "err", err)
		switch {
		case status == http.StatusUnauthorized:
			return fmt.Errorf("GitHub rejected the token (your own, set with SetGitHubCredential, or the server's THEFOLD_GITHUB_TOKEN): %w", errs.ErrUnavailable)
		case status == http.StatusForbidden, status == http.StatusNotFound, status == http.StatusGone:
			return fmt.Errorf("%s: %w", subject, errs.ErrNotFound)
		case status == http.StatusTooManyRequests:
			return fmt.Errorf("GitHub is throttling requests; try again later: %w", errs.ErrUnavailable)
		case status == http.StatusConflict:
			return fmt.Errorf("%s changed concurrently: %w", subject, errs.ErrConflict)
		case status == http.StatusUnprocessableEntity:
			return fmt.Errorf("%s: GitHub refused the request as invalid: %w", subject, errs.ErrInvalid)
		case status >= 500:
			return fmt.Errorf("GitHub is unavailable; try again later: %w", errs.ErrUnavailable)
		}
		return fmt.Errorf("github: %s: %w", subject, err) // internal: masked by the server
	}
	var ue *url.Error
	var ne net.Error
	if errors.As(err, &ue) || errors.As(err, &ne) {
		p.log.WarnContext(ctx, "github unreachable", "subject", subject, "err", err)
		return fmt.Errorf("GitHub cannot be reached; try again later: %w", errs.ErrUnavailable)
	}
	return fmt.Errorf("github: %s: %w", subject, err)
}

// rateLimitErr is the public error of an exhausted primary rate limit.
func rateLimitErr(reset time.Time) error {
	if reset.IsZero() {
		return fmt.Errorf("GitHub rate limit exhausted; try again later: %w", errs.ErrUnavailable)
	}
	return fmt.Errorf("GitHub rate limit exhausted; resets at %s: %w", clock(reset), errs.ErrUnavailable)
}

func clock(t time.Time) string { return t.UTC().Format("15:04:05") + " UTC" }

// httpStatus is the HTTP status of a GitHub error response, 0 when err is not one.
func httpStatus(err error) int {
	if er, ok := errors.AsType[*github.ErrorResponse](err); ok && er.Response != nil {
		return er.Response.StatusCode
	}
	return 0
}

// errorText is GitHub's message and the messages of its validation errors, lowercased: for
// telling apart the 409s and 422s that mean something (never shown to the caller).
func errorText(err error) string {
	er, ok := errors.AsType[*github.ErrorResponse](err)
	if !ok {
		return ""
	}
	var b strings.Builder
	b.WriteString(er.Message)
	for _, e := range er.Errors {
		b.WriteString(" | ")
		b.WriteString(e.Message)
		b.WriteString(" ")
		b.WriteString(e.Code)
	}
	return strings.ToLower(b.String())
}

// isStatus reports whether err is a GitHub error response with status code and, when
// contains is set, whose text contains it (case-insensitive).
func isStatus(err error, code int, contains string) bool {
	return httpStatus(err) == code && (contains == "" || strings.Contains(errorText(err), strings.ToLower(contains)))
}

// isEmptyRepo reports GitHub's answer for git data of a repository without commits:
// 409 "Git Repository is empty.".
func isEmptyRepo(err error) bool { return isStatus(err, http.StatusConflict, "empty") }

// retryBuffer is added to a rate limit's reset: GitHub's reset is whole seconds.
const retryBuffer = 500 * time.Millisecond

// rateLimitWait reports how long to wait before err's rate limit lets a call through.
func rateLimitWait(err error) (time.Duration, bool) {
	if rl, ok := errors.AsType[*github.RateLimitError](err); ok {
		if rl.Rate.Reset.IsZero() {
			return 0, false
		}
		return max(time.Until(rl.Rate.Reset.Time), 0) + retryBuffer, true
	}
	if ab, ok := errors.AsType[*github.AbuseRateLimitError](err); ok {
		if ab.RetryAfter == nil {
			// GitHub: without retry-after, wait at least a minute.
			return time.Minute, true
		}
		return *ab.RetryAfter + retryBuffer/5, true
	}
	if er, ok := errors.AsType[*github.ErrorResponse](err); ok && er.Response != nil && er.Response.StatusCode == http.StatusTooManyRequests {
		if secs, perr := strconv.Atoi(er.Response.Header.Get("Retry-After")); perr == nil && secs >= 0 {
			return time.Duration(secs)*time.Second + retryBuffer/5, true
		}
	}
	return 0, false
}

// read makes a read call, and once more after a rate limit that resets within
// MaxRetryWait. Writes are never retried here: a write refused by a rate limit is
// ErrUnavailable and the caller decides.
func read[T any](ctx context.Context, p *Provider, call func(context.Context) (T, *github.Response, error)) (T, *github.Response, error) {
	v, resp, err := call(ctx)
	if err == nil {
		return v, resp, nil
	}
	wait, ok := rateLimitWait(err)
	if !ok || wait > p.maxRetryWait {
		return v, resp, err
	}
	p.log.InfoContext(ctx, "github rate limit: waiting to retry", "wait", wait)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-ctx.Done():
		var zero T
		return zero, nil, ctx.Err()
	case <-t.C:
	}
	return call(ctx)
}

// readNoValue is read for calls that return only a response.
func readNoValue(ctx context.Context, p *Provider, call func(context.Context) (*github.Response, error)) (*github.Response, error) {
	_, resp, err := read(ctx, p, func(ctx context.Context) (struct{}, *github.Response, error) {
		resp, err := call(ctx)
		return struct{}{}, resp, err
	})
	return resp, err
}
