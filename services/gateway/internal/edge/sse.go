package edge

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
)

// sseRetry is the reconnection delay a stream tells EventSource (`retry:`): long enough
// that a restarting gateway or service is not hammered, short enough that a page catches up
// within seconds.
const sseRetry = 3 * time.Second

// The event names of the stream besides the services' event types. "error" is not one of
// them: EventSource fires its own `error` event for a transport failure (and closes for good
// on some), so a page could not tell a failed stream from a message about one.
const (
	// sseHeartbeat is a heartbeat: its `id:` is the stream's cursor, so a quiet filtered
	// stream's Last-Event-ID advances past the events it skipped.
	sseHeartbeat = "heartbeat"
	// sseEnd is the stream's last message: the watched resource is finished. A page closes
	// its EventSource on it; otherwise EventSource reconnects and is told the same again.
	sseEnd = "end"
	// sseFailure is a failure after the stream started; EventSource reconnects after it
	// with the last id it saw.
	sseFailure = "failure"
	// sseGap says a reconnection's Last-Event-ID had expired: events after it were removed
	// by retention, and the stream resumes from the oldest event kept.
	sseGap = "gap"
)

// serverSentEvents serves the Watch routes (AIP custom method ":watch") as server-sent
// events to a client that asks for them (Accept: text/event-stream), and as grpc-gateway's
// NDJSON otherwise. Each stream message becomes one event: `id:` is the event's id (the
// cursor), `event:` its type, `data:` the message as JSON. Heartbeats are `heartbeat`
// events whose id is the heartbeat's cursor, so Last-Event-ID advances on a quiet filtered
// stream; the end of a finished resource's stream is an `end` event. A reconnecting
// EventSource sends Last-Event-ID; it becomes the request's after_id, so the stream resumes
// after the last event the client saw, and when that cursor has expired the stream resumes
// from the oldest event kept after a `gap` event (a 400 would stop EventSource for good).
// An error before the stream starts keeps its HTTP status and JSON body; an error
// mid-stream is a `failure` event. The stream opens with `retry:` (sseRetry).
func serverSentEvents(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, ":watch") || !acceptsEventStream(r.Header.Values("Accept")) {
			next.ServeHTTP(w, r)
			return
		}
		// The inner handler writes NDJSON; it must not be told the client wants anything else.
		r.Header.Set("Accept", "application/json")
		last := strings.TrimSpace(r.Header.Get("Last-Event-ID"))
		if last == "" {
			sw := newSSEWriter(w, false)
			next.ServeHTTP(sw, r)
			sw.finish()
			return
		}
		id, err := strconv.ParseInt(last, 10, 64)
		if err != nil || id < 0 {
			writeError(w, http.StatusBadRequest, codes.InvalidArgument, "Last-Event-ID: must be the id of an event (a non-negative integer)")
			return
		}
		// The cursor the client holds wins over the one in the URL it first opened.
		held := newSSEWriter(w, true)
		next.ServeHTTP(held, withCursor(r, id))
		gap, expired := held.expired()
		if !expired {
			held.finish()
			return
		}
		sw := newSSEWriter(w, false)
		sw.gap = map[string]any{"after_id": strconv.FormatInt(id, 10), "message": gap + "; resuming from the oldest event kept"}
		next.ServeHTTP(sw, withCursor(r, 0))
		sw.finish()
	})
}

// withCursor is r asking for the events after id (0: the retained history).
func withCursor(r *http.Request, id int64) *http.Request {
	r = r.Clone(r.Context())
	q := r.URL.Query()
	q.Set("after_id", strconv.FormatInt(id, 10))
	q.Del("from_now")
	r.URL.RawQuery = q.Encode()
	return r
}

// acceptsEventStream reports whether an Accept header names text/event-stream.
func acceptsEventStream(values []string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			mt, _, _ := strings.Cut(part, ";")
			if strings.EqualFold(strings.TrimSpace(mt), "text/event-stream") {
				return true
			}
		}
	}
	return false
}

// sseWriter turns the NDJSON stream written to it into server-sent events.
type sseWriter struct {
	w http.ResponseWriter
	// header is what the inner handler sets, copied to w's when the answer is committed:
	// an answer that is held and then replaced (an expired cursor) leaves no trace in w.
	header  http.Header
	status  int
	started bool // the event stream's headers are written
	plain   bool // an error answer: passed through as is
	// hold keeps an error answer (the status and body) in held instead of writing it, so
	// the caller may look at it (expired) before it is sent (finish).
	hold bool
	held bytes.Buffer
	// gap, when set, is sent as a gap event at the start of the stream.
	gap map[string]any
	buf bytes.Buffer
}

func newSSEWriter(w http.ResponseWriter, hold bool) *sseWriter {
	return &sseWriter{w: w, header: w.Header().Clone(), hold: hold}
}

func (s *sseWriter) Header() http.Header { return s.header }

// commit makes the inner handler's headers w's.
func (s *sseWriter) commit() {
	h := s.w.Header()
	for k := range h {
		if _, ok := s.header[k]; !ok {
			delete(h, k)
		}
	}
	for k, v := range s.header {
		h[k] = v
	}
}

func (s *sseWriter) WriteHeader(code int) {
	if s.status != 0 {
		return
	}
	s.status = code
	if code != http.StatusOK {
		s.plain = true
		if !s.hold {
			s.commit()
			s.w.WriteHeader(code)
		}
		return
	}
	h := s.header
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx and the like: do not buffer the stream
	h.Del("Content-Length")
	s.commit()
	s.w.WriteHeader(http.StatusOK)
	s.started = true
	var out bytes.Buffer
	out.WriteString("retry: " + strconv.FormatInt(sseRetry.Milliseconds(), 10) + "\n\n")
	if s.gap != nil {
		data, _ := json.Marshal(s.gap)
		writeData(&out, "", sseGap, data)
	}
	_, _ = s.w.Write(out.Bytes())
	// Headers out at once: the client knows the stream is open before the first event.
	s.flush()
}

func (s *sseWriter) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.WriteHeader(http.StatusOK)
	}
	if s.plain {
		if s.hold {
			return s.held.Write(p)
		}
		return s.w.Write(p)
	}
	s.buf.Write(p)
	for {
		line, ok := s.nextLine()
		if !ok {
			break
		}
		if err := s.event(line); err != nil {
			return len(p), err
		}
	}
	return len(p), nil
}

func (s *sseWriter) nextLine() ([]byte, bool) {
	i := bytes.IndexByte(s.buf.Bytes(), '\n')
	if i < 0 {
		return nil, false
	}
	line := bytes.TrimSpace(s.buf.Next(i + 1))
	return line, true
}

// Flush writes what is complete and flushes the connection.
func (s *sseWriter) Flush() {
	if s.plain && s.hold {
		return
	}
	s.flush()
}

func (s *sseWriter) flush() {
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// expired reports whether the answer is an error saying the cursor has expired
// (OUT_OF_RANGE), with its message. The error is either the edge's errorBody or
// grpc-gateway's stream error ({"error": status}).
func (s *sseWriter) expired() (string, bool) {
	if !s.plain || s.status != http.StatusBadRequest {
		return "", false
	}
	type st struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	}
	var body struct {
		st
		Error *st `json:"error"`
	}
	if err := json.Unmarshal(bytes.TrimSpace(s.held.Bytes()), &body); err != nil {
		return "", false
	}
	if body.Error != nil {
		body.st = *body.Error
	}
	return body.Message, body.Code == int(codes.OutOfRange)
}

// finish sends a held error answer, or writes a last unterminated line.
func (s *sseWriter) finish() {
	if s.plain {
		if s.hold {
			s.commit()
			s.w.WriteHeader(s.status)
			_, _ = s.w.Write(s.held.Bytes())
		}
		return
	}
	if s.status == 0 {
		// The inner handler wrote nothing at all.
		return
	}
	if s.buf.Len() == 0 {
		return
	}
	_ = s.event(bytes.TrimSpace(s.buf.Bytes()))
	s.buf.Reset()
	s.flush()
}

// event writes one NDJSON line ({"result": …} or {"error": …}) as an event.
func (s *sseWriter) event(line []byte) error {
	if len(line) == 0 {
		return nil
	}
	var msg struct {
		Result json.RawMessage `json:"result"`
		Error  json.RawMessage `json:"error"`
	}
	var out bytes.Buffer
	switch err := json.Unmarshal(line, &msg); {
	case err != nil:
		// Not the shape grpc-gateway streams: pass the line on as data.
		writeData(&out, "", "", line)
	case msg.Error != nil:
		writeData(&out, "", sseFailure, msg.Error)
	default:
		var head struct {
			ID        json.RawMessage `json:"id"`
			Type      string          `json:"type"`
			Heartbeat *struct {
				Cursor json.RawMessage `json:"cursor"`
				End    bool            `json:"end"`
			} `json:"heartbeat"`
		}
		_ = json.Unmarshal(msg.Result, &head)
		id := strings.Trim(string(head.ID), `"`)
		if hb := head.Heartbeat; hb != nil && (id == "" || id == "0") {
			// A heartbeat's cursor is omitted when 0 (protojson leaves zero values out).
			cursor := strings.Trim(string(hb.Cursor), `"`)
			if cursor == "" {
				cursor = "0"
			}
			name := sseHeartbeat
			if hb.End {
				name = sseEnd
			}
			writeData(&out, cursor, name, msg.Result)
			break
		}
		writeData(&out, id, head.Type, msg.Result)
	}
	_, err := s.w.Write(out.Bytes())
	return err
}

// writeData writes one event; data is one line of JSON (newlines in it are escaped by JSON).
func writeData(out *bytes.Buffer, id, typ string, data []byte) {
	if id != "" {
		out.WriteString("id: " + id + "\n")
	}
	if typ != "" {
		out.WriteString("event: " + typ + "\n")
	}
	for _, l := range bytes.Split(data, []byte("\n")) {
		out.WriteString("data: ")
		out.Write(l)
		out.WriteByte('\n')
	}
	out.WriteByte('\n')
}
