package fakellm

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Endpoint names in Recorded.Endpoint.
const (
	EndpointAnthropicMessages = "anthropic.messages"
	EndpointOpenAIChat        = "openai.chat_completions"
	EndpointOpenAIEmbeddings  = "openai.embeddings"
	EndpointGeminiGenerate    = "gemini.generate_content"
	EndpointGeminiStream      = "gemini.stream_generate_content"
	EndpointGeminiEmbed       = "gemini.embed_content"
	EndpointGeminiBatchEmbed  = "gemini.batch_embed_contents"
)

// Script families: which list of a Script an endpoint reads.
const (
	familyAnthropic  = "anthropic"
	familyOpenAI     = "openai"
	familyGemini     = "gemini"
	familyEmbeddings = "embeddings"
)

const (
	maxBodyBytes      = 32 << 20
	defaultMaxRecords = 10000
	// statusCancelled is recorded when the client went away during a scripted latency
	// (nginx's "client closed request"); nothing is written.
	statusCancelled = 499
)

// Recorded is one request as the server saw it. InputTokens counts the whole prompt,
// cache reads and writes included, whatever the provider reports on the wire (Anthropic's
// input_tokens excludes them). Status 0 means the answer is still being prepared.
type Recorded struct {
	Endpoint string `json:"endpoint"`
	Model    string `json:"model"`
	// Body is the request body; a body that is not JSON is kept as a JSON string.
	Body             json.RawMessage `json:"body"`
	Status           int             `json:"status"`
	InputTokens      int             `json:"input_tokens"`
	OutputTokens     int             `json:"output_tokens"`
	CacheReadTokens  int             `json:"cache_read_tokens"`
	CacheWriteTokens int             `json:"cache_write_tokens"`
	Time             time.Time       `json:"time"`
	// Stream is set when the request asked for a streamed answer (server-sent events).
	Stream bool `json:"stream,omitempty"`
	// FirstDeltaAt is when the first delta of a streamed answer (a piece of text or
	// thinking, or a tool call) began to be written; zero when none was.
	FirstDeltaAt time.Time `json:"first_delta_at,omitzero"`
}

// Text is every string of the request's JSON body (a body that is not JSON whole), joined
// by newlines: the prompt as the model reads it, whatever escaping the SDK's encoder chose
// ("<" as \u003c, quotes and newlines escaped), so a test can look for text in it.
func (r Recorded) Text() string {
	var v any
	if json.Unmarshal(r.Body, &v) != nil {
		return string(r.Body)
	}
	var parts []string
	var walk func(any)
	walk = func(v any) {
		switch x := v.(type) {
		case string:
			parts = append(parts, x)
		case []any:
			for _, e := range x {
				walk(e)
			}
		case map[string]any:
			for _, e := range x {
				walk(e)
			}
		}
	}
	walk(v)
	return strings.Join(parts, "\n")
}

// Option configures a Server.
type Option func(*Server)

// WithLogger logs one line per request to l (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.logger = l } }

// WithClock sets the clock for Recorded.Time and OpenAI's created (default time.Now).
func WithClock(now func() time.Time) Option { return func(s *Server) { s.now = now } }

// WithMaxRecords keeps only the newest n requests (default 10,000), so a long demo does not
// grow without bound.
func WithMaxRecords(n int) Option { return func(s *Server) { s.maxRecords = max(n, 1) } }

// Server answers the providers' endpoints from a Script. It is safe for concurrent use.
type Server struct {
	logger     *slog.Logger
	now        func() time.Time
	maxRecords int
	mux        *http.ServeMux

	mu        sync.Mutex
	script    *Script
	scriptErr error
	matchers  map[string]*matchSet
	state     map[string]*familyState
	records   []*Recorded
	cache     map[string]struct{}
	seq       int
}

// familyState is how far a family's script has been served.
type familyState struct {
	pos, usedAtPos int
	matchedUses    map[int]int
}

// New returns a server answering from s (nil: every request gets 500 "fakellm: no script
// loaded"). An invalid script is not refused here, so New stays usable in one expression:
// every request then gets 500 naming the problem.
func New(s *Script, opts ...Option) *Server {
	srv := &Server{
		logger:     slog.New(slog.DiscardHandler),
		now:        time.Now,
		maxRecords: defaultMaxRecords,
		cache:      map[string]struct{}{},
	}
	for _, o := range opts {
		o(srv)
	}
	srv.SetScript(s)
	srv.mux = http.NewServeMux()
	srv.mux.HandleFunc("POST /v1/messages", srv.anthropicMessages)
	srv.mux.HandleFunc("POST /v1/chat/completions", srv.openAIChat)
	srv.mux.HandleFunc("POST /v1/embeddings", srv.openAIEmbeddings)
	srv.mux.HandleFunc("POST /{version}/models/{call}", srv.gemini)
	srv.mux.HandleFunc("GET /fakellm/requests", srv.listRequests)
	srv.mux.HandleFunc("DELETE /fakellm/requests", srv.deleteRequests)
	srv.mux.HandleFunc("GET /healthz", srv.healthz)
	srv.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		http.Error(w, fmt.Sprintf("fakellm: no such endpoint: %s %s", r.Method, r.URL.Path), http.StatusNotFound)
	})
	return srv
}

// ServeHTTP routes to the provider endpoints and the /fakellm/requests record.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// Every answer says where it came from, so nobody mistakes it for a model's.
	w.Header().Set("X-Fakellm", "scripted replay, not a language model")
	s.mux.ServeHTTP(w, r)
}

// SetScript replaces the script and starts serving it from its first entry. The record
// and the prompt cache are kept. The script is copied; nil unloads it.
func (s *Server) SetScript(sc *Script) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = map[string]*familyState{}
	s.matchers = map[string]*matchSet{}
	s.script, s.scriptErr = nil, nil
	if sc == nil {
		return
	}
	cp := *sc
	cp.Anthropic, cp.OpenAI = cloneResponses(sc.Anthropic), cloneResponses(sc.OpenAI)
	cp.Gemini, cp.Embeddings = cloneResponses(sc.Gemini), cloneResponses(sc.Embeddings)
	if err := cp.Validate(); err != nil {
		s.scriptErr = err
		s.logger.Error("fakellm: invalid script; every request will fail", "err", err)
		return
	}
	s.script = &cp
	for fam, entries := range cp.families() {
		s.matchers[fam] = newMatchSet(entries)
	}
}

func cloneResponses(rs []Response) []Response {
	out := make([]Response, len(rs))
	for i, r := range rs {
		r.ToolCalls = append([]ToolCall(nil), r.ToolCalls...)
		r.Faults = append([]string(nil), r.Faults...)
		if r.Error != nil {
			e := *r.Error
			r.Error = &e
		}
		out[i] = r
	}
	return out
}

func (sc *Script) families() map[string][]Response {
	return map[string][]Response{
		familyAnthropic: sc.Anthropic, familyOpenAI: sc.OpenAI,
		familyGemini: sc.Gemini, familyEmbeddings: sc.Embeddings,
	}
}

// Requests returns a copy of the record, oldest first.
func (s *Server) Requests() []Recorded {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Recorded, len(s.records))
	for i, r := range s.records {
		out[i] = *r
	}
	return out
}

// Reset clears the record and the prompt cache; the script keeps its position.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = nil
	s.cache = map[string]struct{}{}
}

// scriptFailure is why the script cannot answer a request: a 500 the SDKs are told not to
// retry (x-should-retry: false), because retrying cannot fix a script.
type scriptFailure struct{ message string }

// pick chooses the entry for a request of family fam whose text is text, advancing the
// family's position. Embeddings without entries get a zero Response (compute vectors).
func (s *Server) pick(fam, endpoint, text string) (Response, *scriptFailure) {
	if s.scriptErr != nil {
		return Response{}, &scriptFailure{"fakellm: invalid script: " + s.scriptErr.Error()}
	}
	if s.script == nil {
		return Response{}, &scriptFailure{"fakellm: no script loaded"}
	}
	entries := s.script.families()[fam]
	if fam == familyEmbeddings && len(entries) == 0 {
		return Response{}, nil
	}
	st := s.state[fam]
	if st == nil {
		st = &familyState{matchedUses: map[int]int{}}
		s.state[fam] = st
	}
	ms := s.matchers[fam]
	found := ms.scan(text)
	for i, e := range entries {
		if e.Match == "" || (e.Times > 0 && st.matchedUses[i] >= e.Times) || !ms.matches(i, text, found) {
			continue
		}
		st.matchedUses[i]++
		return e.captured(text)
	}
	var ordered []Response
	for _, e := range entries {
		if e.Match == "" {
			ordered = append(ordered, e)
		}
	}
	if st.pos < len(ordered) {
		e := ordered[st.pos]
		st.usedAtPos++
		if st.usedAtPos >= max(e.Times, 1) && !(e.RepeatLast && st.pos == len(ordered)-1) {
			st.pos, st.usedAtPos = st.pos+1, 0
		}
		return e.captured(text)
	}
	return Response{}, &scriptFailure{"fakellm: script exhausted for " + endpoint}
}

// begin records a request on arrival, so the record is in arrival order even when
// scripted latencies make answers finish out of order.
func (s *Server) begin(endpoint string, body []byte) *Recorded {
	rec := &Recorded{Endpoint: endpoint, Time: s.now()}
	if json.Valid(body) {
		rec.Body = json.RawMessage(append([]byte(nil), body...))
	} else {
		rec.Body, _ = json.Marshal(string(body))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.records = append(s.records, rec)
	if over := len(s.records) - s.maxRecords; over > 0 {
		s.records = append([]*Recorded(nil), s.records[over:]...)
	}
	return rec
}

// tokens is one request's token accounting; input counts the whole prompt.
type tokens struct{ input, output, cacheRead, cacheWrite int }

// finish completes a request's record; all writes happen under the lock because Requests
// may read the record concurrently.
func (s *Server) finish(rec *Recorded, model string, status int, t tokens) {
	s.mu.Lock()
	rec.Model, rec.Status = model, status
	rec.InputTokens, rec.OutputTokens = t.input, t.output
	rec.CacheReadTokens, rec.CacheWriteTokens = t.cacheRead, t.cacheWrite
	endpoint := rec.Endpoint
	s.mu.Unlock()
	s.logger.Info("fakellm answered", "endpoint", endpoint, "model", model, "status", status,
		"input_tokens", t.input, "cache_read_tokens", t.cacheRead, "cache_write_tokens", t.cacheWrite,
		"output_tokens", t.output)
}

// streamed marks a request's record as asking for a stream.
func (s *Server) streamed(rec *Recorded) {
	s.mu.Lock()
	rec.Stream = true
	s.mu.Unlock()
}

// nextID returns a fresh id with the given prefix, e.g. "fakellm-msg-1".
func (s *Server) nextID(kind string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	return fmt.Sprintf("fakellm-%s-%d", kind, s.seq)
}

func readBody(r *http.Request, w http.ResponseWriter) ([]byte, error) {
	return io.ReadAll(http.MaxBytesReader(w, r.Body, maxBodyBytes))
}

// wait sleeps the scripted latency; false when the request was cancelled meanwhile.
func wait(r *http.Request, d Duration) bool {
	if d <= 0 {
		return r.Context().Err() == nil
	}
	t := time.NewTimer(time.Duration(d))
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-r.Context().Done():
		return false
	}
}

func (s *Server) listRequests(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, s.Requests())
}

func (s *Server) deleteRequests(w http.ResponseWriter, _ *http.Request) {
	s.Reset()
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) healthz(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	loaded := s.script != nil
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "script_loaded": loaded})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "fakellm: encoding the answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
