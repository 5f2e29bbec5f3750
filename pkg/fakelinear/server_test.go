package fakelinear

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The fake as a client sees it over HTTP, with queries written by hand; pkg/linear runs
// its real client against it.

const key = "lin_api_fake_key"

// answer is a decoded GraphQL response.
type answer struct {
	status int
	header http.Header
	Data   map[string]any `json:"data"`
	Errors []struct {
		Message    string         `json:"message"`
		Extensions map[string]any `json:"extensions"`
	} `json:"errors"`
}

// start serves a new fake that accepts key.
func start(t *testing.T) (*Server, *httptest.Server) {
	t.Helper()
	s := New()
	s.AddAPIKey(key, "Grace Hopper")
	srv := httptest.NewServer(s)
	t.Cleanup(srv.Close)
	return s, srv
}

// post sends a GraphQL request with the Authorization header auth ("" sends none).
func post(t *testing.T, srv *httptest.Server, auth, query string, vars map[string]any) answer {
	t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/graphql", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, header: resp.Header}
	if err := json.NewDecoder(resp.Body).Decode(&a); err != nil {
		t.Fatalf("decode answer (HTTP %d): %v", resp.StatusCode, err)
	}
	return a
}

func (a answer) messages() string {
	var m []string
	for _, e := range a.Errors {
		m = append(m, e.Message)
	}
	return strings.Join(m, "; ")
}

func TestSchemaRefusesWhatLinearDoesNotHave(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		query   string
		vars    map[string]any
		wantErr string
	}{
		{name: "unknown field", query: `query { viewer { id shoeSize } }`, wantErr: `Cannot query field "shoeSize" on type "User"`},
		{name: "field of another type", query: `query { issues { nodes { id key } } }`, wantErr: `Cannot query field "key" on type "Issue"`},
		{name: "unknown argument", query: `query { issues(orderBy: updatedAt) { nodes { id } } }`, wantErr: `Unknown argument "orderBy"`},
		{
			name:    "unknown filter field",
			query:   `query Q($f: IssueFilter) { issues(filter: $f) { nodes { id } } }`,
			vars:    map[string]any{"f": map[string]any{"assignee": map[string]any{"id": map[string]any{"eq": "x"}}}},
			wantErr: `Field "assignee" is not defined by type "IssueFilter"`,
		},
		{name: "unknown type", query: `query Q($f: IssueFilterInput) { issues(filter: $f) { nodes { id } } }`, wantErr: `IssueFilterInput`},
		{name: "syntax error", query: `query { viewer { id `, wantErr: "syntax error"},
		{
			name:    "duration instead of a date",
			query:   `query Q($f: IssueFilter) { issues(filter: $f) { nodes { id } } }`,
			vars:    map[string]any{"f": map[string]any{"updatedAt": map[string]any{"gt": "-P2W"}}},
			wantErr: "no durations",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s, srv := start(t)
			got := post(t, srv, key, tc.query, tc.vars)
			if got.status != http.StatusBadRequest || !strings.Contains(got.messages(), tc.wantErr) {
				t.Errorf("HTTP %d %q, want 400 with %q", got.status, got.messages(), tc.wantErr)
			}
			if reqs := s.Requests(); len(reqs) != 1 || reqs[0].Query != tc.query {
				t.Errorf("recorded %+v", reqs)
			}
		})
	}
}

func TestAuthentication(t *testing.T) {
	t.Parallel()
	_, srv := start(t)
	for _, auth := range []string{"", "lin_api_unknown", "Bearer " + key} {
		got := post(t, srv, auth, `query { viewer { id } }`, nil)
		if got.status != http.StatusBadRequest || len(got.Errors) != 1 || got.Errors[0].Extensions["code"] != "AUTHENTICATION_ERROR" || got.Data != nil {
			t.Errorf("Authorization %q: HTTP %d %+v, want 400 AUTHENTICATION_ERROR", auth, got.status, got.Errors)
		}
	}
	got := post(t, srv, key, `query { viewer { name email } }`, nil)
	viewer, _ := got.Data["viewer"].(map[string]any)
	if got.status != http.StatusOK || viewer["name"] != "Grace Hopper" || viewer["email"] != "grace.hopper@example.com" {
		t.Errorf("HTTP %d %v %q", got.status, got.Data, got.messages())
	}
}

func TestFailNext(t *testing.T) {
	t.Parallel()
	s, srv := start(t)
	s.FailNext(2, http.StatusServiceUnavailable)
	for n := range 2 {
		if got := post(t, srv, key, `query { viewer { id } }`, nil); got.status != http.StatusServiceUnavailable {
			t.Errorf("request %d: HTTP %d, want 503", n, got.status)
		}
	}
	if got := post(t, srv, key, `query { viewer { id } }`, nil); got.status != http.StatusOK {
		t.Errorf("after the failures: HTTP %d %q", got.status, got.messages())
	}

	s.FailNext(1, http.StatusTooManyRequests)
	before := time.Now()
	got := post(t, srv, key, `query { viewer { id } }`, nil)
	reset, _ := strconv.ParseInt(got.header.Get("X-RateLimit-Requests-Reset"), 10, 64)
	if got.status != http.StatusTooManyRequests || len(got.Errors) != 1 || got.Errors[0].Extensions["code"] != "RATELIMITED" ||
		time.UnixMilli(reset).Sub(before) < 59*time.Second || got.header.Get("X-RateLimit-Requests-Remaining") != "0" {
		t.Errorf("HTTP %d %+v, headers %v", got.status, got.Errors, got.header)
	}
	if n := len(s.Requests()); n != 4 {
		t.Errorf("recorded %d requests, want 4 (failed ones included)", n)
	}
}

func TestOnlyPostGraphQL(t *testing.T) {
	t.Parallel()
	_, srv := start(t)
	cases := []struct {
		method, path string
		want         int
	}{
		{http.MethodGet, "/graphql", http.StatusMethodNotAllowed},
		{http.MethodPost, "/v1/graphql", http.StatusNotFound},
		{http.MethodPost, "/graphql", http.StatusBadRequest}, // not a JSON body
	}
	for _, tc := range cases {
		req, err := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader("query { viewer { id } }"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", key)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("%s %s: HTTP %d, want %d", tc.method, tc.path, resp.StatusCode, tc.want)
		}
	}
}

// filterWorkspace has ENG-1 (started, project), ENG-2 (backlog), ENG-3 (done, project),
// OPS-1 (started); it returns the fake, the server and the project's ID.
func filterWorkspace(t *testing.T) (*Server, *httptest.Server, map[string]string) {
	t.Helper()
	s, srv := start(t)
	ids := map[string]string{}
	eng := s.AddTeam("ENG", "Engineering")
	ids["started"] = s.AddState(eng, "In Progress", "started")
	backlog := s.AddState(eng, "Backlog", "backlog")
	done := s.AddState(eng, "Done", "completed")
	ops := s.AddTeam("OPS", "Operations")
	s.AddState(ops, "Doing", "started")
	ids["project"] = s.AddProject("Sync")
	ids["ENG-1"] = s.AddIssue(eng, NewIssue{Title: "a", StateID: ids["started"], ProjectID: ids["project"]}).ID
	ids["ENG-2"] = s.AddIssue(eng, NewIssue{Title: "b", StateID: backlog}).ID
	ids["ENG-3"] = s.AddIssue(eng, NewIssue{Title: "c", StateID: done, ProjectID: ids["project"]}).ID
	ids["OPS-1"] = s.AddIssue(ops, NewIssue{Title: "d"}).ID
	return s, srv, ids
}

const issuesQuery = `query Q($f: IssueFilter, $first: Int, $after: String) {
  issues(filter: $f, first: $first, after: $after) { nodes { identifier } pageInfo { hasNextPage endCursor } }
}`

// issuesPage runs issuesQuery and returns the identifiers and the end cursor.
func issuesPage(t *testing.T, srv *httptest.Server, vars map[string]any) ([]string, string) {
	t.Helper()
	got := post(t, srv, key, issuesQuery, vars)
	if got.status != http.StatusOK || len(got.Errors) > 0 {
		t.Fatalf("HTTP %d %q", got.status, got.messages())
	}
	issues := got.Data["issues"].(map[string]any)
	var out []string
	for _, n := range issues["nodes"].([]any) {
		out = append(out, n.(map[string]any)["identifier"].(string))
	}
	end, _ := issues["pageInfo"].(map[string]any)["endCursor"].(string)
	return out, end
}

func TestFilters(t *testing.T) {
	t.Parallel()
	s, srv, ids := filterWorkspace(t)
	eng3 := s.Issue("ENG-3").UpdatedAt.Format(time.RFC3339Nano)
	m := func(kv ...any) map[string]any {
		out := map[string]any{}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i].(string)] = kv[i+1]
		}
		return out
	}
	cases := []struct {
		name   string
		filter map[string]any
		want   []string
	}{
		{"no filter", nil, []string{"ENG-1", "ENG-2", "ENG-3", "OPS-1"}},
		{"team key eq", m("team", m("key", m("eq", "OPS"))), []string{"OPS-1"}},
		{"state type nin", m("state", m("type", m("nin", []string{"started"}))), []string{"ENG-2", "ENG-3"}},
		{"state id neq", m("state", m("id", m("neq", ids["started"]))), []string{"ENG-2", "ENG-3", "OPS-1"}},
		{"state name in", m("state", m("name", m("in", []string{"Backlog", "Doing"}))), []string{"ENG-2", "OPS-1"}},
		{"project id in", m("project", m("id", m("in", []string{ids["project"]}))), []string{"ENG-1", "ENG-3"}},
		{"no project", m("project", m("null", true)), []string{"ENG-2", "OPS-1"}},
		{"some project", m("project", m("null", false)), []string{"ENG-1", "ENG-3"}},
		{"updated at or after", m("updatedAt", m("gte", eng3)), []string{"ENG-3", "OPS-1"}},
		{"updated before", m("updatedAt", m("lt", eng3)), []string{"ENG-1", "ENG-2"}},
		{"updated exactly", m("updatedAt", m("eq", eng3)), []string{"ENG-3"}},
		{"fields combine with AND", m("team", m("key", m("eq", "ENG")), "state", m("type", m("eq", "started"))), []string{"ENG-1"}},
	}
	for _, tc := range cases {
		got, _ := issuesPage(t, srv, map[string]any{"f": tc.filter})
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestCursorSurvivesAChange(t *testing.T) {
	t.Parallel()
	s, srv, ids := filterWorkspace(t)
	eng4 := s.AddIssue(s.Issue("ENG-1").TeamID, NewIssue{Title: "e", StateID: ids["started"]})
	started := map[string]any{"state": map[string]any{"type": map[string]any{"eq": "started"}}}

	first, cursor := issuesPage(t, srv, map[string]any{"f": started, "first": 2})
	if !slices.Equal(first, []string{"ENG-1", "OPS-1"}) {
		t.Fatalf("first page %v", first)
	}
	// The last issue of the page leaves the filter; its cursor still says where page 2 starts.
	opsDone := s.AddState(s.Issue("OPS-1").TeamID, "Done", "completed")
	s.SetIssueState("OPS-1", opsDone)
	second, _ := issuesPage(t, srv, map[string]any{"f": started, "first": 2, "after": cursor})
	if !slices.Equal(second, []string{eng4.Identifier}) {
		t.Errorf("second page %v, want [%s]", second, eng4.Identifier)
	}

	got := post(t, srv, key, issuesQuery, map[string]any{"after": "not-a-cursor"})
	if !strings.Contains(got.messages(), "invalid cursor") {
		t.Errorf("bad cursor: HTTP %d %q", got.status, got.messages())
	}
	got = post(t, srv, key, issuesQuery, map[string]any{"first": -1})
	if !strings.Contains(got.messages(), "non-negative") {
		t.Errorf("negative first: HTTP %d %q", got.status, got.messages())
	}
}

func TestResolverErrors(t *testing.T) {
	t.Parallel()
	_, srv, ids := filterWorkspace(t)
	cases := []struct {
		name, query string
		vars        map[string]any
		wantErr     string
	}{
		{name: "unknown issue", query: `query { issue(id: "ENG-99") { id } }`, wantErr: "Entity not found: Issue"},
		{
			name:    "state of another team",
			query:   `mutation M($id: String!) { issueUpdate(id: $id, input: {stateId: "nope"}) { success } }`,
			vars:    map[string]any{"id": ids["ENG-1"]},
			wantErr: "is not a state of the issue's team",
		},
		{
			name:    "comment without body",
			query:   `mutation M($id: String) { commentCreate(input: {issueId: $id}) { success } }`,
			vars:    map[string]any{"id": ids["ENG-1"]},
			wantErr: "needs an issueId and a body",
		},
		{
			name:    "comment on an unknown issue",
			query:   `mutation { commentCreate(input: {issueId: "ENG-99", body: "hi"}) { success } }`,
			wantErr: "Entity not found: Issue",
		},
	}
	for _, tc := range cases {
		got := post(t, srv, key, tc.query, tc.vars)
		if got.status != http.StatusOK || !strings.Contains(got.messages(), tc.wantErr) {
			t.Errorf("%s: HTTP %d %q, want 200 with %q", tc.name, got.status, got.messages(), tc.wantErr)
		}
	}
}

func TestIssueFieldsAndRelations(t *testing.T) {
	t.Parallel()
	s, srv, ids := filterWorkspace(t)
	rel := s.AddRelation(ids["ENG-1"], ids["ENG-2"], "duplicate")
	got := post(t, srv, key, `query Q($id: String!) {
  issue(id: $id) {
    identifier description url priority project { name } team { key states(first: 1) { nodes { name } pageInfo { hasNextPage } } }
    inverseRelations { nodes { id type issue { identifier } relatedIssue { identifier } } }
  }
}`, map[string]any{"id": "ENG-2"})
	want := map[string]any{"issue": map[string]any{
		"identifier": "ENG-2", "description": nil, "url": "https://linear.app/thefold-fake/issue/ENG-2", "priority": float64(0),
		"project": nil,
		"team": map[string]any{"key": "ENG", "states": map[string]any{
			"nodes": []any{map[string]any{"name": "In Progress"}}, "pageInfo": map[string]any{"hasNextPage": true},
		}},
		"inverseRelations": map[string]any{"nodes": []any{map[string]any{
			"id": rel, "type": "duplicate",
			"issue": map[string]any{"identifier": "ENG-1"}, "relatedIssue": map[string]any{"identifier": "ENG-2"},
		}}},
	}}
	gotJSON, _ := json.Marshal(got.Data)
	wantJSON, _ := json.Marshal(want)
	if got.status != http.StatusOK || !bytes.Equal(gotJSON, wantJSON) {
		t.Errorf("HTTP %d %q\n got %s\nwant %s", got.status, got.messages(), gotJSON, wantJSON)
	}
}
