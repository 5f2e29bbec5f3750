package fakegithub

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// The fake as a client sees it over HTTP; the github service's hub package runs go-github
// against it endpoint by endpoint.

func start(t *testing.T, opts Options) *Server {
	t.Helper()
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// call sends a request with the server's token (tok "" sends none) and decodes a JSON answer.
func call(t *testing.T, s *Server, tok, method, path string, body any) (int, any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, s.URL()+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out any
	_ = json.NewDecoder(resp.Body).Decode(&out)
	return resp.StatusCode, out
}

func TestStartTokenAndRecord(t *testing.T) {
	t.Parallel()
	s := start(t, Options{Login: "ada"})
	if s.Token() != DefaultToken || s.Login() != "ada" || !strings.HasPrefix(s.URL(), "http://127.0.0.1:") {
		t.Fatalf("server: token %q login %q url %q", s.Token(), s.Login(), s.URL())
	}
	if code, _ := call(t, s, "", http.MethodGet, "/user", nil); code != http.StatusUnauthorized {
		t.Fatalf("no token: %d", code)
	}
	if code, _ := call(t, s, "wrong", http.MethodGet, "/user", nil); code != http.StatusUnauthorized {
		t.Fatalf("wrong token: %d", code)
	}
	code, got := call(t, s, s.Token(), http.MethodGet, "/api/v3/user?x=1", nil)
	if code != http.StatusOK || got.(map[string]any)["login"] != "ada" {
		t.Fatalf("GET /api/v3/user = %d %v", code, got)
	}
	s.AddRepo("ada/app", nil)
	if code, _ := call(t, s, s.Token(), http.MethodPost, "/api/v3/repos/ada/app/issues", map[string]any{"title": "one"}); code != http.StatusCreated {
		t.Fatalf("create issue: %d", code)
	}
	reqs := s.Requests()
	if len(reqs) != 4 || reqs[2].Path != "/user" || reqs[2].Query != "x=1" || reqs[3].Method != http.MethodPost ||
		!strings.Contains(string(reqs[3].Body), `"title":"one"`) || reqs[3].Header.Get("Authorization") != "Bearer "+s.Token() {
		t.Fatalf("record = %+v", reqs)
	}
	if got := s.RequestsMatching(http.MethodGet, "/user"); len(got) != 3 {
		t.Fatalf("GET /user requests = %d, want 3", len(got))
	}
	s.Close()
	if _, err := s.Client().Get(s.URL() + "/user"); err == nil {
		t.Fatal("a closed server answered")
	}
}

func TestChecksRule(t *testing.T) {
	t.Parallel()
	s := start(t, Options{})
	s.AddRepo("o/r", map[string]string{"go.mod": "module x\n"})
	s.SetBranch("o/r", "feature", s.Branch("o/r", "main"))
	head := s.Commit("o/r", "feature", map[string]string{"a.go": "package a // FAIL\n"})
	var asked []CheckTarget
	s.SetChecksRule(func(c CheckTarget) ([]CheckRun, []Status) {
		asked = append(asked, c)
		if strings.Contains(c.Files["a.go"], "FAIL") {
			return []CheckRun{{Name: "ci", Status: "completed", Conclusion: "failure", Title: "a.go fails"}}, []Status{{Context: "legacy", State: "pending"}}
		}
		return nil, nil
	})
	s.AddStatus("o/r", head, Status{Context: "legacy", State: "success"})
	for range 2 {
		code, got := call(t, s, s.Token(), http.MethodGet, "/repos/o/r/commits/feature/check-runs", nil)
		runs := got.(map[string]any)["check_runs"].([]any)
		if code != http.StatusOK || len(runs) != 1 || runs[0].(map[string]any)["conclusion"] != "failure" {
			t.Fatalf("check runs = %d %v", code, got)
		}
		code, got = call(t, s, s.Token(), http.MethodGet, "/repos/o/r/commits/"+head+"/status", nil)
		if code != http.StatusOK || got.(map[string]any)["state"] != "pending" || got.(map[string]any)["total_count"] != 1.0 {
			t.Fatalf("combined status = %d %v (the rule's pending replaces the success of the same context)", code, got)
		}
	}
	// (CheckRuns takes the server's lock, under which the rule ran: asked is safe to read after.)
	if runs := s.CheckRuns("o/r", head); len(runs) != 1 || runs[0].Title != "a.go fails" {
		t.Fatalf("CheckRuns = %v", runs)
	}
	if len(asked) != 1 || asked[0].SHA != head || asked[0].Repo != "o/r" || !slices.Equal(asked[0].Branches, []string{"feature"}) ||
		asked[0].Files["go.mod"] != "module x\n" {
		t.Fatalf("the rule was asked %+v, want once about %s on feature", asked, head)
	}
}

func TestIssuesAndPullRequests(t *testing.T) {
	t.Parallel()
	s := start(t, Options{})
	s.AddRepo("o/r", map[string]string{"README.md": "hi\n"})
	one := s.AddIssue("o/r", Issue{Title: "one"})
	two := s.AddIssue("o/r", Issue{Title: "two", Body: "after one", Labels: []string{"bug"}, BlockedBy: []int{one}})
	code, got := call(t, s, s.Token(), http.MethodGet, "/repos/o/r/issues/2/dependencies/blocked_by", nil)
	if code != http.StatusOK || len(got.([]any)) != 1 || got.([]any)[0].(map[string]any)["number"] != 1.0 {
		t.Fatalf("blocked_by of #2 = %d %v", code, got)
	}
	_, got = call(t, s, s.Token(), http.MethodGet, "/repos/o/r/issues/2", nil)
	if sum := got.(map[string]any)["issue_dependencies_summary"].(map[string]any); sum["blocked_by"] != 1.0 {
		t.Fatalf("summary = %v", sum)
	}

	main := s.Branch("o/r", "main")
	s.SetBranch("o/r", "fix", main)
	head := s.Commit("o/r", "fix", map[string]string{"fix.txt": "fixed\n", "README.md": Delete})
	code, got = call(t, s, s.Token(), http.MethodPost, "/repos/o/r/pulls", map[string]any{"title": "Fix", "head": "fix", "base": "main", "body": "Closes #2"})
	if code != http.StatusCreated || got.(map[string]any)["number"] != 3.0 {
		t.Fatalf("open = %d %v", code, got)
	}
	if code, _ := call(t, s, s.Token(), http.MethodPut, "/repos/o/r/pulls/3/merge", map[string]any{"sha": main}); code != http.StatusConflict {
		t.Fatalf("merge with a stale sha = %d", code)
	}
	if code, _ := call(t, s, s.Token(), http.MethodPut, "/repos/o/r/pulls/3/merge", map[string]any{"sha": head, "merge_method": "squash"}); code != http.StatusOK {
		t.Fatalf("merge = %d", code)
	}
	call(t, s, s.Token(), http.MethodPost, "/repos/o/r/issues/2/comments", map[string]any{"body": "Fixed by #3"})
	call(t, s, s.Token(), http.MethodPatch, "/repos/o/r/issues/2", map[string]any{"state": "closed"})

	is, ok := s.Issue("o/r", two)
	if !ok || is.State != "closed" || !slices.Equal(is.Comments, []string{"Fixed by #3"}) || !slices.Equal(is.BlockedBy, []int{1}) || is.Pull != nil {
		t.Fatalf("issue #2 = %+v", is)
	}
	pr, _ := s.Issue("o/r", 3)
	if pr.Pull == nil || !pr.Pull.Merged || pr.Pull.HeadSHA != head || pr.Pull.MergeCommitSHA != s.Branch("o/r", "main") || pr.Body != "Closes #2" {
		t.Fatalf("pull request #3 = %+v %+v", pr, pr.Pull)
	}
	files := s.Files("o/r", s.Branch("o/r", "main"))
	if _, ok := files["README.md"]; ok || files["fix.txt"].Content != "fixed\n" || files["fix.txt"].Mode != "100644" {
		t.Fatalf("main after the squash = %v", files)
	}
	if c, _ := s.CommitInfo("o/r", s.Branch("o/r", "main")); !slices.Equal(c.Parents, []string{main}) {
		t.Fatalf("squash commit = %+v", c)
	}
	if n := len(s.Issues("o/r")); n != 3 {
		t.Fatalf("Issues = %d", n)
	}
}

func TestTarballRedirect(t *testing.T) {
	t.Parallel()
	s := start(t, Options{})
	s.AddRepo("o/r", map[string]string{"a.txt": "a\n"})
	resp, err := s.Client().Do(func() *http.Request {
		r, _ := http.NewRequest(http.MethodGet, s.URL()+"/api/v3/repos/o/r/tarball/main", nil)
		r.Header.Set("Authorization", "Bearer "+s.Token())
		return r
	}())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// The client follows the redirect to the archive host (the same server) with the
	// header set on the request.
	zr, err := gzip.NewReader(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("archive: %d %v", resp.StatusCode, err)
	}
	b, _ := io.ReadAll(zr)
	if !bytes.Contains(b, []byte("o-r-")) || !bytes.Contains(b, []byte("a\n")) {
		t.Fatal("archive lacks the file")
	}
	if got := s.RequestsMatching(http.MethodGet, "/codeload/o/r/legacy.tar.gz/"+s.Branch("o/r", "main")); len(got) != 1 {
		t.Fatalf("codeload requests = %v", got)
	}
}

func TestMisuse(t *testing.T) {
	t.Parallel()
	s := New(Options{})
	s.AddRepo("o/r", nil)
	for name, f := range map[string]func(){
		"AddRepo twice":   func() { s.AddRepo("o/r", nil) },
		"AddRepo no name": func() { s.AddRepo("r", nil) },
		"no repository":   func() { s.Commit("o/none", "main", nil) },
		"no blocker":      func() { s.AddIssue("o/r", Issue{Title: "x", BlockedBy: []int{9}}) },
		"no commit":       func() { s.SetBranch("o/r", "b", "0000") },
		"no pull request": func() { s.SetMergeable("o/r", 1, nil) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: no panic", name)
				}
			}()
			f()
		}()
	}
	if s.URL() != "" {
		t.Errorf("a server made by New has URL %q", s.URL())
	}
	s.Close() // nothing to close
}
