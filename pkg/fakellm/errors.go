package fakellm

import (
	"net/http"
	"strconv"
)

// dialect is whose error shape and vocabulary an endpoint speaks.
type dialect int

const (
	dialectAnthropic dialect = iota
	dialectOpenAI
	dialectGemini
)

// statusForType gives the HTTP status a provider uses for an error type, so a script can
// name only the type.
var statusForType = map[string]int{
	// Anthropic
	"invalid_request_error": 400, "authentication_error": 401, "permission_error": 403,
	"not_found_error": 404, "request_too_large": 413, "rate_limit_error": 429,
	"api_error": 500, "overloaded_error": 529,
	// OpenAI codes
	"context_length_exceeded": 400, "invalid_api_key": 401, "model_not_found": 404,
	"rate_limit_exceeded": 429, "insufficient_quota": 429, "server_error": 500,
	// Gemini statuses
	"INVALID_ARGUMENT": 400, "FAILED_PRECONDITION": 400, "UNAUTHENTICATED": 401,
	"PERMISSION_DENIED": 403, "NOT_FOUND": 404, "RESOURCE_EXHAUSTED": 429, "INTERNAL": 500,
	"UNAVAILABLE": 503, "DEADLINE_EXCEEDED": 504,
}

// typeForStatus is the provider's own type (and, for OpenAI, code) for a status.
func typeForStatus(d dialect, status int) (typ, code string) {
	switch d {
	case dialectAnthropic:
		switch status {
		case 400:
			return "invalid_request_error", ""
		case 401:
			return "authentication_error", ""
		case 403:
			return "permission_error", ""
		case 404:
			return "not_found_error", ""
		case 413:
			return "request_too_large", ""
		case 429:
			return "rate_limit_error", ""
		case 529:
			return "overloaded_error", ""
		}
		if status >= 500 {
			return "api_error", ""
		}
		return "invalid_request_error", ""
	case dialectOpenAI:
		switch status {
		case 401:
			return "invalid_request_error", "invalid_api_key"
		case 404:
			return "invalid_request_error", "model_not_found"
		case 429:
			return "requests", "rate_limit_exceeded"
		}
		if status >= 500 {
			return "server_error", ""
		}
		return "invalid_request_error", ""
	default:
		switch status {
		case 401:
			return "UNAUTHENTICATED", ""
		case 403:
			return "PERMISSION_DENIED", ""
		case 404:
			return "NOT_FOUND", ""
		case 429:
			return "RESOURCE_EXHAUSTED", ""
		case 503, 529:
			return "UNAVAILABLE", ""
		case 504:
			return "DEADLINE_EXCEEDED", ""
		}
		if status >= 500 {
			return "INTERNAL", ""
		}
		return "INVALID_ARGUMENT", ""
	}
}

// apiError is an error answer before it is put in a dialect's shape.
type apiError struct {
	status     int
	typ        string // "" derives it from status
	message    string
	retryAfter float64
	// noRetry sets x-should-retry: false, which the Anthropic and OpenAI SDKs obey: a
	// script problem or a malformed request does not get better by retrying.
	noRetry bool
}

// scripted turns a script's Error into an apiError, filling the status from the type.
func scripted(e *Error) apiError {
	status := e.Status
	if status == 0 {
		status = statusForType[e.Type]
		if status == 0 {
			status = http.StatusInternalServerError
		}
	}
	msg := e.Message
	if msg == "" {
		msg = "fakellm: scripted error"
	}
	return apiError{status: status, typ: e.Type, message: msg, retryAfter: e.RetryAfter}
}

// badRequest is a request fakellm cannot parse or that the real API would refuse.
func badRequest(msg string) apiError {
	return apiError{status: http.StatusBadRequest, message: msg, noRetry: true}
}

func writeError(w http.ResponseWriter, d dialect, e apiError) {
	typ, code := typeForStatus(d, e.status)
	if e.typ != "" {
		typ, code = e.typ, e.typ
	}
	h := w.Header()
	if e.retryAfter > 0 {
		h.Set("Retry-After", strconv.FormatFloat(e.retryAfter, 'f', -1, 64))
		if d == dialectOpenAI {
			h.Set("Retry-After-Ms", strconv.FormatInt(int64(e.retryAfter*1000+0.5), 10))
		}
	}
	if e.noRetry {
		h.Set("X-Should-Retry", "false")
	}
	var body any
	switch d {
	case dialectAnthropic:
		body = map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": e.message}}
	case dialectOpenAI:
		var c any
		if code != "" {
			c = code
		}
		body = map[string]any{"error": map[string]any{"message": e.message, "type": typ, "param": nil, "code": c}}
	default:
		body = map[string]any{"error": map[string]any{"code": e.status, "message": e.message, "status": typ}}
	}
	writeJSON(w, e.status, body)
}
