package fakellm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"unicode/utf8"
)

// DefaultChunkSize is the bytes of text (or of a tool call's JSON input) per delta of a
// streamed answer when the entry sets no ChunkSize.
const DefaultChunkSize = 16

// chunks splits s into pieces of at most n bytes (n ≤ 0: DefaultChunkSize), each cut moved
// back to a UTF-8 character boundary (a character longer than n is one piece).
func chunks(s string, n int) []string {
	if n <= 0 {
		n = DefaultChunkSize
	}
	var out []string
	for len(s) > 0 {
		cut := min(n, len(s))
		for cut < len(s) && cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		if cut == 0 { // one character longer than n
			_, cut = utf8.DecodeRuneInString(s)
		}
		out = append(out, s[:cut])
		s = s[cut:]
	}
	return out
}

// compactInput is a scripted call's input as Anthropic's input_json deltas carry it:
// compact JSON, as the whole answer's encoder writes the input object.
func compactInput(tc ToolCall) string {
	var b bytes.Buffer
	if err := json.Compact(&b, toolInput(tc)); err != nil {
		return string(toolInput(tc)) // Validate checked it is an object
	}
	return b.String()
}

// eventStream writes a streamed answer as server-sent events, flushing each, and paces its
// deltas: the entry's ChunkDelay before every delta after the first, and the record's
// FirstDeltaAt just before the first.
type eventStream struct {
	s    *Server
	w    http.ResponseWriter
	rc   *http.ResponseController
	r    *http.Request
	rec  *Recorded
	e    Response
	sent int // deltas written
	text int // text deltas written
	err  error
}

func (s *Server) newEventStream(w http.ResponseWriter, r *http.Request, rec *Recorded, e Response) *eventStream {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &eventStream{s: s, w: w, rc: http.NewResponseController(w), r: r, rec: rec, e: e}
}

// ok reports whether the stream is still being written (the client is there).
func (es *eventStream) ok() bool { return es.err == nil }

// event writes one event: "event: <name>" (none when name is empty) and data as JSON.
func (es *eventStream) event(name string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		es.err = err
		return
	}
	es.write(name, b)
}

func (es *eventStream) write(name string, data []byte) {
	if es.err != nil {
		return
	}
	var b bytes.Buffer
	if name != "" {
		fmt.Fprintf(&b, "event: %s\n", name)
	}
	b.WriteString("data: ")
	b.Write(data)
	b.WriteString("\n\n")
	if _, err := es.w.Write(b.Bytes()); err != nil {
		es.err = err
		return
	}
	es.err = es.rc.Flush()
}

// delta writes an event carrying a piece of the answer, after the pacing. text marks a
// piece of the answer's text (what BreakAfter counts).
func (es *eventStream) delta(name string, data any, text bool) {
	if es.err != nil {
		return
	}
	if es.sent > 0 && es.e.ChunkDelay > 0 {
		if !wait(es.r, es.e.ChunkDelay) {
			es.err = es.r.Context().Err()
			return
		}
	}
	if es.sent == 0 {
		es.s.firstDelta(es.rec)
	}
	es.event(name, data)
	es.sent++
	if text {
		es.text++
	}
}

// breaking reports whether the answer breaks off after the text delta just sent: the
// BreakAfter-th, or the last one when there are fewer.
func (es *eventStream) breaking(last bool) bool {
	return es.ok() && es.e.BreakAfter > 0 && (es.text >= es.e.BreakAfter || last)
}

// abort ends the stream without its end, the way a dropped connection does: the client
// reads an unexpected EOF. (net/http recovers http.ErrAbortHandler without logging.)
func (es *eventStream) abort() {
	panic(http.ErrAbortHandler)
}

// firstDelta notes when the first delta of a streamed answer is written.
func (s *Server) firstDelta(rec *Recorded) {
	now := s.now()
	s.mu.Lock()
	rec.FirstDeltaAt = now
	s.mu.Unlock()
}

// replyStream is reply for a request that asked for a stream: the script failure, the
// latency, the scripted error (an error answer, before any event, as the APIs refuse a
// request) and a raw body (sent verbatim as the event stream) as reply does them; else
// count fills in the output tokens, the record is completed, and send writes the events.
func (s *Server) replyStream(w http.ResponseWriter, r *http.Request, rec *Recorded, model string, d dialect,
	e Response, failure *scriptFailure, t tokens, count func(Response, *tokens), send func(*eventStream, Response, tokens)) {
	if s.replyFailure(w, r, rec, model, d, e, failure, t) {
		return
	}
	if e.Raw != "" {
		t.output = outputTokens(e.Raw, e.OutputTokens)
		s.finish(rec, model, http.StatusOK, t)
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte(e.Raw))
		return
	}
	e = e.withFaults()
	count(e, &t)
	s.finish(rec, model, http.StatusOK, t)
	send(s.newEventStream(w, r, rec, e), e, t)
}
