package linear

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// ErrUnauthorized is returned (wrapped) when Linear refuses the API key: HTTP 401 or 403,
// or a GraphQL error coded AUTHENTICATION_ERROR or FORBIDDEN. Retrying cannot help; the
// key has to change.
var ErrUnauthorized = errors.New("linear: unauthorized")

// ErrNotApplied is returned when Linear answers a mutation with success: false, so a
// caller never mistakes an unapplied change for a done one.
var ErrNotApplied = errors.New("linear: mutation not applied")

// RateLimitError says Linear throttled the request (HTTP 429 or a GraphQL error coded
// RATELIMITED). Reset is when the request budget refills, from the
// X-RateLimit-Requests-Reset header; it is zero when Linear did not say.
type RateLimitError struct {
	Operation string
	Reset     time.Time
}

// Error says the operation was throttled and, when known, until when.
func (e *RateLimitError) Error() string {
	if e.Reset.IsZero() {
		return fmt.Sprintf("linear: %s: rate limited", e.Operation)
	}
	return fmt.Sprintf("linear: %s: rate limited until %s", e.Operation, e.Reset.UTC().Format(time.RFC3339))
}

// StatusError is an HTTP status Linear answered without a usable GraphQL body. A 5xx is
// retryable (see IsRetryable); anything else is not.
type StatusError struct {
	Operation  string
	StatusCode int
}

// Error names the operation and the status.
func (e *StatusError) Error() string {
	return fmt.Sprintf("linear: %s: HTTP %d %s", e.Operation, e.StatusCode, http.StatusText(e.StatusCode))
}

// GraphQLError carries the messages of GraphQL errors that are neither about the key nor
// about the rate limit: a bad query, an unknown issue, an invalid state.
type GraphQLError struct {
	Operation string
	Messages  []string
}

// Error joins Linear's messages.
func (e *GraphQLError) Error() string {
	return fmt.Sprintf("linear: %s: %s", e.Operation, strings.Join(e.Messages, "; "))
}

// transportError is a request that never got an answer (connection refused, reset,
// timed out on the client's own deadline).
type transportError struct {
	op  string
	err error
}

func (e *transportError) Error() string { return fmt.Sprintf("linear: %s: %v", e.op, e.err) }
func (e *transportError) Unwrap() error { return e.err }

// IsRetryable reports whether sending the same request again may succeed: Linear failed
// on its side (5xx), throttled it (wait until RateLimitError.Reset first), or could not be
// reached. A refused key, a bad query or a cancelled context are not retryable.
func IsRetryable(err error) bool {
	var status *StatusError
	if errors.As(err, &status) {
		return status.StatusCode >= http.StatusInternalServerError
	}
	var limited *RateLimitError
	var transport *transportError
	return errors.As(err, &limited) || errors.As(err, &transport)
}

// statusError classifies the statuses that are decided before the body is read: the key
// refused, throttling, a server failure.
func statusError(op string, resp *http.Response) error {
	switch code := resp.StatusCode; {
	case code == http.StatusUnauthorized || code == http.StatusForbidden:
		return fmt.Errorf("%w: %s answered HTTP %d", ErrUnauthorized, op, code)
	case code == http.StatusTooManyRequests:
		return &RateLimitError{Operation: op, Reset: rateLimitReset(resp.Header)}
	case code >= http.StatusInternalServerError:
		return &StatusError{Operation: op, StatusCode: code}
	}
	return nil
}

// graphQLErrors turns a GraphQL errors list into one error; a key or rate-limit error
// anywhere in the list decides the kind.
func graphQLErrors(op string, header http.Header, list []gqlError) error {
	messages := make([]string, 0, len(list))
	for _, e := range list {
		switch e.Extensions.Code {
		case "AUTHENTICATION_ERROR", "FORBIDDEN":
			return fmt.Errorf("%w: %s: %s", ErrUnauthorized, op, e.Message)
		case "RATELIMITED":
			return &RateLimitError{Operation: op, Reset: rateLimitReset(header)}
		}
		messages = append(messages, e.Message)
	}
	return &GraphQLError{Operation: op, Messages: messages}
}

// rateLimitReset reads X-RateLimit-Requests-Reset (epoch milliseconds); zero when absent
// or malformed.
func rateLimitReset(header http.Header) time.Time {
	ms, err := strconv.ParseInt(header.Get("X-RateLimit-Requests-Reset"), 10, 64)
	if err != nil || ms <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(ms)
}
