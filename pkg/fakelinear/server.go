// Package fakelinear is Linear's GraphQL API in memory, for tests: the queries and
// mutations TheFold's Linear client (pkg/linear) sends, answered from teams, workflow
// states, projects, issues, relations and comments that a test sets up, over HTTP so the
// real client runs unchanged against it.
//
// Its schema is an embedded subset of Linear's public schema under Linear's own names,
// and every query is validated against it: a field, argument or input Linear does not
// have is refused here as it is there. Filters and cursor paging behave as Linear's do
// for what the subset covers. API keys are checked as Linear checks personal keys (the
// Authorization header, no "Bearer"), every request is recorded, and failures (429 with
// the reset header, 5xx) can be injected.
//
// It is not Linear: one workspace, no permissions beyond a known key, no history, no
// webhooks sent. Setup methods (AddTeam, AddIssue, SetIssueState, …) and read-back
// methods (Issue, Comments, Requests) are safe for concurrent use with requests being
// served. A setup or read-back method given an ID that does not exist panics: that is a
// mistake in the test, not a state to handle.
package fakelinear

import (
	_ "embed"
	"encoding/json"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/graph-gophers/graphql-go"
)

//go:embed schema.graphql
var schemaSDL string

// OrganizationID is the one workspace the fake serves; webhook payloads carry it.
const OrganizationID = "00000000-0000-4000-8000-00000000f01d"

// urlKey is the workspace's URL key, the first path segment of its issue URLs.
const urlKey = "thefold-fake"

// maxRequestBytes bounds a request body, as any server bounds it.
const maxRequestBytes = 1 << 20

// rateLimitWindow is how far in the future an injected 429 says the budget refills.
const rateLimitWindow = time.Minute

// Request is one GraphQL request as the server received it.
type Request struct {
	OperationName string
	Query         string
	Variables     map[string]any
}

// Server is the fake Linear API; it is an http.Handler serving POST /graphql.
type Server struct {
	schema *graphql.Schema

	mu         sync.Mutex
	users      map[string]*user // by API key
	teams      []*team
	states     []*state
	projects   []*project
	issues     []*issue
	relations  []*relation
	comments   []*comment
	seq        int
	lastTime   time.Time
	lastSyncID float64
	reqs       []Request
	failLeft   int
	failStatus int
}

// New returns a server with no API keys and no data.
func New() *Server {
	s := &Server{users: map[string]*user{}}
	s.schema = graphql.MustParseSchema(schemaSDL, &rootResolver{s: s})
	return s
}

// ServeHTTP answers POST /graphql: it records the request, fails it if a failure was
// injected, checks the API key and executes the query against the schema.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/graphql" {
		http.NotFound(w, r)
		return
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	var req struct {
		Query         string         `json:"query"`
		OperationName string         `json:"operationName"`
		Variables     map[string]any `json:"variables"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBytes)).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, graphQLError{Message: "POST body must be a JSON GraphQL request"})
		return
	}
	// Resolvers run under this lock and read the store without taking it.
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, Request{OperationName: req.OperationName, Query: req.Query, Variables: req.Variables})
	if s.failLeft > 0 {
		s.failLeft--
		s.writeFailure(w)
		return
	}
	viewer, ok := s.users[r.Header.Get("Authorization")]
	if !ok {
		writeError(w, http.StatusBadRequest, authenticationError())
		return
	}
	resp := s.schema.Exec(withViewer(r.Context(), viewer), req.Query, req.OperationName, req.Variables)
	writeJSON(w, responseStatus(resp), resp)
}

// responseStatus is 400 when the request itself is wrong (it does not parse, does not
// validate against the schema, or its variables do not fit their types), as Linear
// answers; those errors have no path. Errors of resolvers (an unknown issue) come with a
// path and a 200, data null where they struck.
func responseStatus(resp *graphql.Response) int {
	for _, e := range resp.Errors {
		if len(e.Path) == 0 {
			return http.StatusBadRequest
		}
	}
	return http.StatusOK
}

// FailNext makes the next n requests answer status instead of being executed. A 429
// carries Linear's rate-limit headers, X-RateLimit-Requests-Reset a minute ahead, and a
// RATELIMITED error; any other status carries an error with its status text.
func (s *Server) FailNext(n, status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failLeft, s.failStatus = n, status
}

// Requests returns every request received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.reqs...)
}

// writeFailure answers the failure FailNext injected.
func (s *Server) writeFailure(w http.ResponseWriter) {
	if s.failStatus != http.StatusTooManyRequests {
		writeError(w, s.failStatus, graphQLError{Message: http.StatusText(s.failStatus)})
		return
	}
	reset := time.Now().Add(rateLimitWindow).UnixMilli()
	w.Header().Set("X-RateLimit-Requests-Limit", "1500")
	w.Header().Set("X-RateLimit-Requests-Remaining", "0")
	w.Header().Set("X-RateLimit-Requests-Reset", strconv.FormatInt(reset, 10))
	writeError(w, http.StatusTooManyRequests, graphQLError{
		Message:    "Rate limit exceeded",
		Extensions: map[string]any{"code": "RATELIMITED", "type": "ratelimited"},
	})
}

// graphQLError is an error entry of a response the fake writes itself.
type graphQLError struct {
	Message    string         `json:"message"`
	Extensions map[string]any `json:"extensions,omitempty"`
}

// authenticationError is what Linear answers for a missing or unknown API key.
func authenticationError() graphQLError {
	return graphQLError{
		Message: "Authentication required, not authenticated",
		Extensions: map[string]any{
			"code":                   "AUTHENTICATION_ERROR",
			"type":                   "authentication error",
			"userPresentableMessage": "You need to authenticate to access this operation.",
		},
	}
}

// writeError answers a request the schema never saw with one GraphQL error.
func writeError(w http.ResponseWriter, status int, e graphQLError) {
	writeJSON(w, status, map[string]any{"errors": []graphQLError{e}})
}

// writeJSON writes v as a JSON answer with status.
func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
