// Package fakegithub is GitHub's REST API in memory: the endpoints TheFold's GitHub provider
// uses (repositories, the git data API, contents, compare, tarballs, pull requests with
// merges and branch updates, issues with comments and blocked-by dependencies, check runs
// and commit statuses), with the state they act on, served over HTTP so the real go-github
// client runs unchanged against it — in the github service's own tests, and in the
// end-to-end tests, where the github service's process is pointed at it. It is not GitHub: one token is accepted, there
// are no permissions beyond that, and a request it does not know answers 404. It records
// every request so a test can check what was sent.
//
// Content is set up through methods (AddRepo, Commit, AddIssue, AddCheckRun, …) and read
// back through others (Branch, CommitInfo, Files, Issue, Requests). Every method is safe
// for concurrent use with the requests being served. A method given a repository that
// does not exist panics: that is a mistake in the test, not a state to handle.
package fakegithub

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Defaults of Options.
const (
	DefaultToken = "fakegithub-token"
	DefaultLogin = "octo"
	// rateLimit is the X-RateLimit-Limit every answer carries.
	rateLimit = 5000
)

// Options configure a Server.
type Options struct {
	// Token is the one bearer token accepted (default DefaultToken); any other answers 401.
	Token string
	// Login is the token's user (default DefaultLogin): GET /user, the author of what the
	// API creates, the owner of POST /user/repos.
	Login string
	// Orgs are the organisations that exist (POST/GET /orgs/{org}/repos); more with AddOrg.
	Orgs []string
	// TruncateTrees makes recursive tree reads answer half the entries, truncated: true.
	TruncateTrees bool
	// NoDependencies makes the issue dependencies API answer 404 (older GitHub Enterprise).
	NoDependencies bool
	// NoDependencySummary leaves issue_dependencies_summary out of issues.
	NoDependencySummary bool
	// UpdateLag is how many reads of a pull request still show its old head after an
	// update of its branch was accepted (GitHub moves the head in the background).
	UpdateLag int
}

// Request is one request as the server received it. Path is without GitHub Enterprise's
// "/api/v3" prefix.
type Request struct {
	Method string
	Path   string
	// Query is the raw query string.
	Query  string
	Header http.Header
	Body   []byte
	Time   time.Time
}

// Server is the fake GitHub. It is an http.Handler; Start also serves it on a loopback port.
type Server struct {
	token, login string
	truncate     bool
	depsOff      bool
	noSumm       bool

	mu        sync.Mutex
	orgs      map[string]bool
	repos     map[string]*repo
	nextID    int64
	reqs      []Request
	hook      func(w http.ResponseWriter, r *http.Request) bool
	used      int
	updateLag int
	rule      ChecksRule

	// Set by Start.
	listener net.Listener
	srv      *http.Server
	url      string
	client   *http.Client
}

// New returns a server with no repositories.
func New(opts Options) *Server {
	s := &Server{token: opts.Token, login: opts.Login, truncate: opts.TruncateTrees, depsOff: opts.NoDependencies,
		noSumm: opts.NoDependencySummary, updateLag: opts.UpdateLag, orgs: map[string]bool{}, repos: map[string]*repo{}, nextID: 1000}
	if s.token == "" {
		s.token = DefaultToken
	}
	if s.login == "" {
		s.login = DefaultLogin
	}
	for _, o := range opts.Orgs {
		s.orgs[o] = true
	}
	return s
}

// Start returns a server serving on a loopback port until Close. Its URL is the API's
// base URL as a GitHub Enterprise client takes it (the client adds "/api/v3/"; the
// server answers with or without it).
func Start(opts Options) (*Server, error) {
	s := New(opts)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("fakegithub: listen: %w", err)
	}
	s.listener = l
	s.url = "http://" + l.Addr().String()
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	s.client = &http.Client{Transport: &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext}}
	go func() { _ = s.srv.Serve(l) }()
	return s, nil
}

// URL is the base URL of a started server ("" for one made by New).
func (s *Server) URL() string { return s.url }

// Client is an HTTP client for a started server; Close closes its idle connections.
func (s *Server) Client() *http.Client {
	if s.client == nil {
		return http.DefaultClient
	}
	return s.client
}

// Close stops a started server at once, closing every connection; calls after it get a
// connection refused. It does nothing for a server made by New.
func (s *Server) Close() {
	if s.srv == nil {
		return
	}
	_ = s.srv.Close()
	s.client.CloseIdleConnections()
}

// Token is the accepted bearer token.
func (s *Server) Token() string { return s.token }

// Login is the token's user.
func (s *Server) Login() string { return s.login }

// SetHook installs a function that sees every request after it is recorded and before it
// is checked or answered; returning true means it answered. nil removes it. It runs
// without the server's lock: it may call the server's methods.
func (s *Server) SetHook(h func(w http.ResponseWriter, r *http.Request) bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = h
}

// SetUpdateLag changes Options.UpdateLag for updates accepted from now on.
func (s *Server) SetUpdateLag(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.updateLag = n
}

// Requests returns a copy of every request received, oldest first.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.reqs)
}

// RequestsMatching returns the requests with method ("" for any) whose path contains part.
func (s *Server) RequestsMatching(method, part string) []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Request
	for _, r := range s.reqs {
		if (method == "" || r.Method == method) && strings.Contains(r.Path, part) {
			out = append(out, r)
		}
	}
	return out
}

// --- HTTP ---

// ServeHTTP records the request, then answers it as GitHub would.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	path := strings.TrimPrefix(r.URL.Path, "/api/v3")
	s.mu.Lock()
	s.reqs = append(s.reqs, Request{Method: r.Method, Path: path, Query: r.URL.RawQuery, Header: r.Header.Clone(), Body: body, Time: time.Now()})
	hook := s.hook
	s.used++
	used := s.used
	s.mu.Unlock()

	// The fake never runs out: its budget is renewed before it reaches zero, so a long
	// end-to-end run is not stopped by go-github's own rate-limit guard.
	h := w.Header()
	h.Set("X-RateLimit-Limit", strconv.Itoa(rateLimit))
	h.Set("X-RateLimit-Remaining", strconv.Itoa(rateLimit-used%rateLimit))
	h.Set("X-RateLimit-Used", strconv.Itoa(used%rateLimit))
	h.Set("X-RateLimit-Reset", strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10))
	h.Set("X-RateLimit-Resource", "core")

	if hook != nil && hook(w, r) {
		return
	}
	if r.Header.Get("Authorization") != "Bearer "+s.token {
		writeJSON(w, http.StatusUnauthorized, msg("Bad credentials"))
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.route(w, r, path, body)
}

func msg(m string) map[string]any { return map[string]any{"message": m} }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// WriteError writes GitHub's error body {"message": message} with status: for hooks.
func WriteError(w http.ResponseWriter, status int, message string) {
	writeJSON(w, status, msg(message))
}

func validation(errors ...map[string]any) map[string]any {
	return map[string]any{"message": "Validation Failed", "errors": errors}
}

func (s *Server) route(w http.ResponseWriter, r *http.Request, path string, body []byte) {
	seg := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case path == "/user" && r.Method == http.MethodGet:
		writeJSON(w, 200, map[string]any{"login": s.login, "id": 1})
	case path == "/user/repos" && r.Method == http.MethodGet:
		aff := r.URL.Query().Get("affiliation")
		s.listRepos(w, r, func(x *repo) bool {
			return !x.hidden && (x.owner == s.login || (aff != "owner" && s.orgs[x.owner]))
		})
	case path == "/user/repos" && r.Method == http.MethodPost:
		s.createRepo(w, s.login, body)
	case len(seg) == 3 && seg[0] == "orgs" && seg[2] == "repos":
		if !s.orgs[seg[1]] {
			writeJSON(w, 404, msg("Not Found"))
			return
		}
		if r.Method == http.MethodPost {
			s.createRepo(w, seg[1], body)
			return
		}
		s.listRepos(w, r, func(x *repo) bool { return x.owner == seg[1] && !x.hidden })
	case len(seg) == 3 && seg[0] == "users" && seg[2] == "repos":
		s.listRepos(w, r, func(x *repo) bool { return x.owner == seg[1] && !x.private && !x.hidden })
	case len(seg) >= 3 && seg[0] == "repos":
		rp := s.repos[seg[1]+"/"+seg[2]]
		switch {
		case rp == nil:
			writeJSON(w, 404, msg("Not Found"))
		case rp.hidden:
			writeJSON(w, 403, msg("Resource not accessible by personal access token"))
		default:
			s.routeRepo(w, r, rp, seg[3:], body)
		}
	case len(seg) == 5 && seg[0] == "codeload":
		rp := s.repos[seg[1]+"/"+seg[2]]
		if rp == nil || rp.git.commits[seg[4]] == nil {
			writeJSON(w, 404, msg("Not Found"))
			return
		}
		w.Header().Set("Content-Type", "application/x-gzip")
		_, _ = w.Write(rp.git.tarball(rp.owner, rp.name, seg[4]))
	default:
		writeJSON(w, 404, msg("Not Found"))
	}
}

func (s *Server) listRepos(w http.ResponseWriter, r *http.Request, keep func(*repo) bool) {
	var list []*repo
	for _, x := range s.repos {
		if keep(x) {
			list = append(list, x)
		}
	}
	slices.SortFunc(list, func(a, b *repo) int { return strings.Compare(a.owner+"/"+a.name, b.owner+"/"+b.name) })
	lo, hi := paginate(w, r, len(list))
	out := []any{}
	for _, x := range list[lo:hi] {
		out = append(out, s.repoJSON(x))
	}
	writeJSON(w, 200, out)
}

// paginate picks the page asked for and sets GitHub's Link header.
func paginate(w http.ResponseWriter, r *http.Request, n int) (int, int) {
	q := r.URL.Query()
	per, _ := strconv.Atoi(q.Get("per_page"))
	if per <= 0 {
		per = 30
	}
	page, _ := strconv.Atoi(q.Get("page"))
	if page <= 0 {
		page = 1
	}
	lo := min((page-1)*per, n)
	hi := min(lo+per, n)
	last := max((n+per-1)/per, 1)
	var links []string
	link := func(p int, rel string) {
		u := *r.URL
		qq := u.Query()
		qq.Set("page", strconv.Itoa(p))
		qq.Set("per_page", strconv.Itoa(per))
		u.RawQuery = qq.Encode()
		links = append(links, fmt.Sprintf(`<http://%s%s>; rel="%s"`, r.Host, u.RequestURI(), rel))
	}
	if page < last {
		link(page+1, "next")
		link(last, "last")
	}
	if len(links) > 0 {
		w.Header().Set("Link", strings.Join(links, ", "))
	}
	return lo, hi
}

func (s *Server) createRepo(w http.ResponseWriter, owner string, body []byte) {
	var in struct {
		Name        string `json:"name"`
		Description string `json:"description"`
		Private     bool   `json:"private"`
	}
	_ = json.Unmarshal(body, &in)
	if s.repos[owner+"/"+in.Name] != nil {
		writeJSON(w, 422, map[string]any{"message": "Repository creation failed.", "errors": []any{
			map[string]any{"resource": "Repository", "code": "custom", "field": "name", "message": "name already exists on this account"},
		}})
		return
	}
	rp := s.newRepo(owner, in.Name)
	rp.description, rp.private = in.Description, in.Private
	writeJSON(w, 201, s.repoJSON(rp))
}

func (s *Server) repoJSON(r *repo) map[string]any {
	size := 0
	if len(r.refs) > 0 {
		size = 12
	}
	full := r.owner + "/" + r.name
	return map[string]any{
		"id": r.id, "name": r.name, "full_name": full, "owner": map[string]any{"login": r.owner},
		"private": r.private, "description": r.description, "default_branch": r.defaultBranch,
		"clone_url": "https://github.example/" + full + ".git", "html_url": "https://github.example/" + full,
		"size": size, "created_at": r.created.Format(time.RFC3339), "pushed_at": r.created.Add(time.Hour).Format(time.RFC3339),
	}
}

// errNoRepo is the panic of a method given a repository that does not exist.
var errNoRepo = errors.New("fakegithub: no such repository")
