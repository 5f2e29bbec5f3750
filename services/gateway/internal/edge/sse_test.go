package edge

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
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
		`{"error":{"code":10,"message":"aborted"}}`,
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
	// retry: first; a heartbeat is an event whose id is its cursor; a failure mid-stream is
	// a failure event, not "error", which EventSource keeps for its own transport errors.
	want := "retry: 3000\n\n" +
		"id: 41\nevent: heartbeat\ndata: " + `{"time":"2026-01-01T00:00:00Z","heartbeat":{"cursor":"41","time":"2026-01-01T00:00:00Z"}}` + "\n\n" +
		"id: 42\nevent: JOB_EVENT_TYPE_CREATED\ndata: " + `{"id":"42","type":"JOB_EVENT_TYPE_CREATED","job_id":"j","created":{"id":"j"}}` + "\n\n" +
		"event: failure\ndata: " + `{"code":10,"message":"aborted"}` + "\n\n"
	if got := rec.Body.String(); got != want {
		t.Errorf("body:\n%s\nwant:\n%s", got, want)
	}
	// Last-Event-ID is the cursor; from_now gives way to it; the inner handler gets JSON.
	if q := inner.got.URL.Query(); q.Get("after_id") != "40" || q.Has("from_now") || inner.got.Header.Get("Accept") != "application/json" {
		t.Errorf("inner request %s, Accept %q", inner.got.URL, inner.got.Header.Get("Accept"))
	}
}

// A quiet stream's heartbeats move Last-Event-ID (a cursor of 0 is omitted by protojson),
// and a finished resource's stream ends with an end event at its cursor.
func TestServerSentEventsHeartbeatsAndEnd(t *testing.T) {
	inner := &ndjson{lines: []string{
		`{"result":{"time":"2026-01-01T00:00:00Z","heartbeat":{"time":"2026-01-01T00:00:00Z"}}}`,
		`{"result":{"time":"2026-01-01T00:00:01Z","heartbeat":{"cursor":"97","time":"2026-01-01T00:00:01Z"}}}`,
		`{"result":{"time":"2026-01-01T00:00:02Z","heartbeat":{"cursor":"98","time":"2026-01-01T00:00:02Z","end":true}}}`,
	}}
	req := httptest.NewRequest(http.MethodGet, "/v1/tasks:watch?id=t", nil)
	req.Header.Set("Accept", "text/event-stream")
	rec := httptest.NewRecorder()
	serverSentEvents(inner).ServeHTTP(rec, req)
	got := sseFields(rec.Body.String())
	want := []string{"retry=3000", "id=0 event=heartbeat", "id=97 event=heartbeat", "id=98 event=end"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("events %q, want %q", got, want)
	}
}

// sseFields is each block of an event stream as "field=value …" without the data.
func sseFields(body string) []string {
	var out []string
	for _, block := range strings.Split(strings.TrimSuffix(body, "\n\n"), "\n\n") {
		var fs []string
		for _, l := range strings.Split(block, "\n") {
			if k, v, ok := strings.Cut(l, ": "); ok && k != "data" {
				fs = append(fs, k+"="+v)
			}
		}
		out = append(out, strings.Join(fs, " "))
	}
	return out
}

// cursorHandler answers like a Watch route whose events up to 50 were removed by
// retention: an expired after_id is OUT_OF_RANGE before the stream starts (in the shape
// body makes of the status), anything else streams one event.
type cursorHandler struct {
	body  func(code int, msg string) string
	calls []string
}

func (c *cursorHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	after := r.URL.Query().Get("after_id")
	c.calls = append(c.calls, after)
	w.Header().Set("Content-Type", "application/json")
	if n, _ := strconv.Atoi(after); n > 0 && n < 50 {
		w.Header().Set("X-Held", "yes")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(c.body(11, "cursor "+after+" has expired: events up to id 50 were removed by retention; the oldest id kept is 51") + "\n"))
		return
	}
	_, _ = w.Write([]byte(`{"result":{"heartbeat":{"time":"2026-01-01T00:00:00Z"}}}` + "\n"))
	_, _ = w.Write([]byte(`{"result":{"id":"51","type":"TASK_EVENT_TYPE_CREATED"}}` + "\n"))
}

// An expired cursor on reconnect resumes from the oldest event kept after a gap event,
// instead of a 400 that would stop EventSource for good.
func TestServerSentEventsExpiredCursor(t *testing.T) {
	shapes := map[string]func(code int, msg string) string{
		"edge error body": func(code int, msg string) string {
			return fmt.Sprintf(`{"code":%d,"status":"OUT_OF_RANGE","message":%q,"details":[]}`, code, msg)
		},
		"stream error": func(code int, msg string) string {
			return fmt.Sprintf(`{"error":{"code":%d,"message":%q,"details":[]}}`, code, msg)
		},
	}
	for name, body := range shapes {
		t.Run(name, func(t *testing.T) {
			inner := &cursorHandler{body: body}
			req := httptest.NewRequest(http.MethodGet, "/v1/tasks:watch", nil)
			req.Header.Set("Accept", "text/event-stream")
			req.Header.Set("Last-Event-ID", "7")
			rec := httptest.NewRecorder()
			serverSentEvents(inner).ServeHTTP(rec, req)
			if rec.Code != http.StatusOK || rec.Header().Get("Content-Type") != "text/event-stream" || rec.Header().Get("X-Held") != "" {
				t.Fatalf("status %d, headers %v", rec.Code, rec.Header())
			}
			if strings.Join(inner.calls, ",") != "7,0" {
				t.Errorf("inner calls after_id %v, want 7 then 0", inner.calls)
			}
			if got, want := strings.Join(sseFields(rec.Body.String()), "|"), "retry=3000|event=gap|id=0 event=heartbeat|id=51 event=TASK_EVENT_TYPE_CREATED"; got != want {
				t.Errorf("events %q, want %q", got, want)
			}
			if !strings.Contains(rec.Body.String(), `data: {"after_id":"7","message":"cursor 7 has expired`) {
				t.Errorf("gap notice: %s", rec.Body.String())
			}
		})
	}
	// A cursor that has not expired resumes as it is; the URL's own expired after_id (not a
	// reconnection) stays the 400 it is.
	inner := &cursorHandler{body: shapes["edge error body"]}
	req := httptest.NewRequest(http.MethodGet, "/v1/tasks:watch", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", "60")
	rec := httptest.NewRecorder()
	serverSentEvents(inner).ServeHTTP(rec, req)
	if rec.Code != http.StatusOK || strings.Join(inner.calls, ",") != "60" || strings.Contains(rec.Body.String(), "event: gap") {
		t.Errorf("resume at 60: %d, calls %v, body %q", rec.Code, inner.calls, rec.Body.String())
	}
	req = httptest.NewRequest(http.MethodGet, "/v1/tasks:watch?after_id=7", nil)
	req.Header.Set("Accept", "text/event-stream")
	rec = httptest.NewRecorder()
	serverSentEvents(inner).ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "OUT_OF_RANGE") {
		t.Errorf("after_id in the URL: %d %q", rec.Code, rec.Body.String())
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
	// So does one on reconnection that is not an expired cursor, headers included.
	inner = &ndjson{status: http.StatusNotFound, lines: []string{`{"error":{"code":5,"message":"job not found"}}`}}
	req = httptest.NewRequest(http.MethodGet, "/v1/jobs/j:watch", nil)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", "3")
	rec = httptest.NewRecorder()
	serverSentEvents(inner).ServeHTTP(rec, req)
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "job not found") || rec.Header().Get("Content-Type") != "application/json" {
		t.Errorf("error answer on reconnection: %d %q %q", rec.Code, rec.Body.String(), rec.Header().Get("Content-Type"))
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
