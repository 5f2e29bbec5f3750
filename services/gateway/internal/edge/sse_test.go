package edge

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
)

// ndjson is a stand-in for grpc-gateway's stream writer: it records the request it got
// and writes lines, flushing after each, split mid-line to test the buffering.
type ndjson struct {
	lines  []string
	status int
	got    *http.Request
}

func (n *ndjson) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n.got = r
	w.Header().Set("Content-Type", "application/json")
	if n.status != 0 {
		w.WriteHeader(n.status)
	}
	for _, l := range n.lines {
		half := len(l) / 2
		_, _ = w.Write([]byte(l[:half]))
		_, _ = w.Write([]byte(l[half:] + "\n"))
		w.(http.Flusher).Flush()
	}
}

func TestServerSentEvents(t *testing.T) {
	inner := &ndjson{lines: []string{
		`{"result":{"time":"2026-01-01T00:00:00Z","heartbeat":{"cursor":"41","time":"2026-01-01T00:00:00Z"}}}`,
		`{"result":{"id":"42","type":"JOB_EVENT_TYPE_CREATED","job_id":"j","created":{"id":"j"}}}`,
		`{"error":{"code":10,"message":"cursor expired"}}`,
	}}
	h := serverSentEvents(inner)
	req := httptest.NewRequest(http.MethodGet, "/v1/jobs/j:watch?from_now=true", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", "40")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" || rec.Code != http.StatusOK {
		t.Fatalf("status %d, content type %q", rec.Code, ct)
	}
	want := ": heartbeat 41\n\n" +
		"id: 42\nevent: JOB_EVENT_TYPE_CREATED\ndata: " + `{"id":"42","type":"JOB_EVENT_TYPE_CREATED","job_id":"j","created":{"id":"j"}}` + "\n\n" +
		"event: error\ndata: " + `{"code":10,"message":"cursor expired"}` + "\n\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("body:\n%s\nwant:\n%s", got, want)
	}
	// Last-Event-ID is the cursor; from_now gives way to it; the inner handler gets JSON.
	if q := inner.got.URL.Query(); q.Get("after_id") != "40" || q.Has("from_now") || inner.got.Header.Get("Accept") != "application/json" {
		t.Errorf("inner request %s, Accept %q", inner.got.URL, inner.got.Header.Get("Accept"))
	}
}

func TestServerSentEventsLeavesOtherRequestsAlone(t *testing.T) {
	line := `{"result":{"id":"1"}}`
	for _, tc := range []struct {
		name, method, path, accept string
	}{
		{"NDJSON client", http.MethodGet, "/v1/jobs/j:watch", "application/json"},
		{"no Accept", http.MethodGet, "/v1/jobs/j:watch", ""},
		{"not a watch", http.MethodGet, "/v1/jobs/j", "text/event-stream"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := &ndjson{lines: []string{line}}
			req := httptest.NewRequest(tc.method, tc.path, nil)
			if tc.accept != "" {
				req.Header.Set("Accept", tc.accept)
			}
			rec := httptest.NewRecorder()
			serverSentEvents(inner).ServeHTTP(rec, req)
			if rec.Body.String() != line+"\n" || rec.Header().Get("Content-Type") != "application/json" {
				t.Errorf("body %q, content type %q", rec.Body.String(), rec.Header().Get("Content-Type"))
			}
		})
	}
}

func TestServerSentEventsErrors(t *testing.T) {
	// An error before the stream starts keeps its status and JSON body.
	inner := &ndjson{status: http.StatusNotFound, lines: []string{`{"code":5,"message":"job not found"}`}}
	req := httptest.NewRequest(http.MethodGet, "/v1/jobs/j:watch", nil)
	req.Header.Set("Accept", "text/event-stream, */*;q=0.1")
	rec := httptest.NewRecorder()
	serverSentEvents(inner).ServeHTTP(rec, req)
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "job not found") || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("error answer: %d %q %q", rec.Code, rec.Body.String(), rec.Header().Get("Content-Type"))
	}
	// A Last-Event-ID that is not an event id is a 400 naming the header.
	req = httptest.NewRequest(http.MethodGet, "/v1/jobs/j:watch", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", "abc")
	rec = httptest.NewRecorder()
	serverSentEvents(&ndjson{}).ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "Last-Event-ID") {
		t.Errorf("bad Last-Event-ID: %d %q", rec.Code, rec.Body.String())
	}
}

// Every error has one shape: code and its name, message, the fields named, the request
// id, the details; a RetryInfo becomes Retry-After.
func TestErrorShape(t *testing.T) {
	st := status.New(codes.ResourceExhausted, "rate limit: 20 tasks started in the last 1h0m0s")
	st, _ = st.WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(90500 * time.Millisecond)},
		&errdetails.BadRequest{FieldViolations: []*errdetails.BadRequest_FieldViolation{{Field: "task_id", Description: "required"}}})
	rec := httptest.NewRecorder()
	rec.Header().Set("X-Request-Id", "req-1")
	errorHandler(context.Background(), nil, nil, rec, httptest.NewRequest(http.MethodPost, "/v1/jobs", nil), st.Err())
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "91" || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("status %d, Retry-After %q", rec.Code, rec.Header().Get("Retry-After"))
	}
	var body struct {
		Code            int    `json:"code"`
		Status          string `json:"status"`
		Message         string `json:"message"`
		RequestID       string `json:"request_id"`
		FieldViolations []struct {
			Field, Description string
		} `json:"field_violations"`
		Details []map[string]any `json:"details"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	if body.Code != 8 || body.Status != "RESOURCE_EXHAUSTED" || body.RequestID != "req-1" || len(body.FieldViolations) != 1 ||
		body.FieldViolations[0].Field != "task_id" || len(body.Details) != 2 || !strings.HasPrefix(body.Message, "rate limit") {
		t.Errorf("body %s", rec.Body.String())
	}
	rec = httptest.NewRecorder()
	errorHandler(context.Background(), nil, nil, rec, httptest.NewRequest(http.MethodGet, "/v1/jobs", nil), status.Error(codes.Unauthenticated, "no token"))
	if rec.Code != http.StatusUnauthorized || rec.Header().Get("WWW-Authenticate") == "" {
		t.Errorf("unauthenticated: %d %q", rec.Code, rec.Header().Get("WWW-Authenticate"))
	}
}

func TestCodeName(t *testing.T) {
	for c, want := range map[codes.Code]string{codes.OK: "OK", codes.InvalidArgument: "INVALID_ARGUMENT", codes.NotFound: "NOT_FOUND",
		codes.DeadlineExceeded: "DEADLINE_EXCEEDED", codes.Unauthenticated: "UNAUTHENTICATED", codes.DataLoss: "DATA_LOSS"} {
		if got := codeName(c); got != want {
			t.Errorf("codeName(%v) = %q, want %q", c, got, want)
		}
	}
}
