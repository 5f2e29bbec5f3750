package edge

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
)

// serverSentEvents serves the Watch routes (AIP custom method ":watch") as server-sent
// events to a client that asks for them (Accept: text/event-stream), and as grpc-gateway's
// NDJSON otherwise. Each stream message becomes one event: `id:` is the event's id (the
// cursor), `event:` its type, `data:` the message as JSON. Heartbeats become comment lines,
// which keep proxies from closing an idle stream and which EventSource ignores. A
// reconnecting EventSource sends Last-Event-ID; it becomes the request's after_id, so the
// stream resumes after the last event the client saw. An error before the stream starts
// keeps its HTTP status and JSON body; an error mid-stream is an `error` event.
func serverSentEvents(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, ":watch") || !acceptsEventStream(r.Header.Values("Accept")) {
			next.ServeHTTP(w, r)
			return
		}
		if last := strings.TrimSpace(r.Header.Get("Last-Event-ID")); last != "" {
			id, err := strconv.ParseInt(last, 10, 64)
			if err != nil || id < 0 {
				writeError(w, http.StatusBadRequest, codes.InvalidArgument, "Last-Event-ID: must be the id of an event (a non-negative integer)")
				return
			}
			// The cursor the client holds wins over the one in the URL it first opened.
			q := r.URL.Query()
			q.Set("after_id", strconv.FormatInt(id, 10))
			q.Del("from_now")
			r.URL.RawQuery = q.Encode()
		}
		// The inner handler writes NDJSON; it must not be told the client wants anything else.
		r.Header.Set("Accept", "application/json")
		sw := &sseWriter{w: w}
		next.ServeHTTP(sw, r)
		sw.finish()
	})
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
	w       http.ResponseWriter
	status  int
	started bool // the event stream's headers are written
	plain   bool // an error answer: passed through as is
	buf     bytes.Buffer
}

func (s *sseWriter) Header() http.Header { return s.w.Header() }

func (s *sseWriter) WriteHeader(code int) {
	if s.status != 0 {
		return
	}
	s.status = code
	if code != http.StatusOK {
		s.plain = true
		s.w.WriteHeader(code)
		return
	}
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // nginx and the like: do not buffer the stream
	h.Del("Content-Length")
	s.w.WriteHeader(http.StatusOK)
	s.started = true
	// Headers out at once: the client knows the stream is open before the first event.
	s.flush()
}

func (s *sseWriter) Write(p []byte) (int, error) {
	if s.status == 0 {
		s.WriteHeader(http.StatusOK)
	}
	if s.plain {
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
func (s *sseWriter) Flush() { s.flush() }

func (s *sseWriter) flush() {
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// finish writes a last unterminated line.
func (s *sseWriter) finish() {
	if s.plain || s.buf.Len() == 0 {
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
		writeData(&out, "", "error", msg.Error)
	default:
		var head struct {
			ID        json.RawMessage `json:"id"`
			Type      string          `json:"type"`
			Heartbeat *struct {
				Cursor json.RawMessage `json:"cursor"`
			} `json:"heartbeat"`
		}
		_ = json.Unmarshal(msg.Result, &head)
		id := strings.Trim(string(head.ID), `"`)
		if head.Heartbeat != nil && (id == "" || id == "0") {
			out.WriteString(": heartbeat " + strings.Trim(string(head.Heartbeat.Cursor), `"`) + "\n\n")
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
