package hub

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-github/v84/github"

	"github.com/thefold/thefold/pkg/fakegithub"
	"github.com/thefold/thefold/services/github/internal/forge"
)

// The provider's tests run the real go-github client against pkg/fakegithub, GitHub's REST
// API in memory; this file adapts it to them.

const fakeToken = "ghp-test-token"

// fakeGH is a started fakegithub server with the login "octo" and the organisation "acme".
type fakeGH struct{ *fakegithub.Server }

func newFake(t *testing.T, opts ...func(*fakegithub.Options)) *fakeGH {
	t.Helper()
	o := fakegithub.Options{Token: fakeToken, Login: "octo", Orgs: []string{"acme"}}
	for _, m := range opts {
		m(&o)
	}
	s, err := fakegithub.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return &fakeGH{s}
}

// provider is a Provider talking to the fake.
func (f *fakeGH) provider(t *testing.T, mod ...func(*Config)) *Provider {
	t.Helper()
	cfg := Config{Token: f.Token(), BaseURL: f.URL(), HTTPClient: f.Client(), MaxRetryWait: 5 * time.Second}
	for _, m := range mod {
		m(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// requests returns the recorded requests with method whose path contains part.
func (f *fakeGH) requests(method, part string) []fakegithub.Request {
	return f.RequestsMatching(method, part)
}

func msg(m string) map[string]any { return map[string]any{"message": m} }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// counter counts a hook's answers; the hook runs on the server's goroutines.
type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) add() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.n
}

func (c *counter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// rateLimited answers the first n requests to a path containing part with answer.
func rateLimited(f *fakeGH, part string, n int, answer func(w http.ResponseWriter)) *counter {
	count := &counter{}
	f.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.Contains(r.URL.Path, part) {
			return false
		}
		if count.add() > n {
			return false
		}
		answer(w)
		return true
	})
	return count
}

// The fake serves what crew-mode tests drive through go-github: merging a pull request,
// closing it through the issues API (its last head kept), and posting and listing comments.
func TestFakeServesMergesClosesAndComments(t *testing.T) {
	t.Parallel()
	f, p := prRepo(t)
	ctx := forge.WithCredential(t.Context(), fakeToken)
	for _, head := range []string{"one", "two"} {
		f.SetBranch("octo/app", head, f.Branch("octo/app", "main"))
		f.Commit("octo/app", head, map[string]string{head + ".txt": head + "\n"})
		if _, _, err := p.gh.PullRequests.Create(ctx, "octo", "app", &github.NewPullRequest{Title: github.Ptr(head), Head: github.Ptr(head), Base: github.Ptr("main")}); err != nil {
			t.Fatal(err)
		}
	}
	res, _, err := p.gh.PullRequests.Merge(ctx, "octo", "app", 1, "", &github.PullRequestOptions{MergeMethod: "merge"})
	if err != nil || !res.GetMerged() || f.Branch("octo/app", "main") != res.GetSHA() {
		t.Fatalf("merge = %v %v", res, err)
	}
	twoHead := f.Commit("octo/app", "two", map[string]string{"before.txt": "pushed after opening\n"})
	is, _, err := p.gh.Issues.Edit(ctx, "octo", "app", 2, &github.IssueRequest{State: github.Ptr("closed")})
	if err != nil || is.GetState() != "closed" {
		t.Fatalf("close through the issues API = %v %v", is, err)
	}
	f.Commit("octo/app", "two", map[string]string{"after.txt": "after close\n"})
	closed, _, err := p.gh.PullRequests.Get(ctx, "octo", "app", 2)
	if err != nil || closed.GetState() != "closed" || closed.GetMerged() || closed.GetHead().GetSHA() != twoHead {
		t.Fatalf("closed pull request = %v %v, want head %s", closed, err, twoHead)
	}
	for _, body := range []string{"first", "second"} {
		if _, _, err := p.gh.Issues.CreateComment(ctx, "octo", "app", 2, &github.IssueComment{Body: github.Ptr(body)}); err != nil {
			t.Fatal(err)
		}
	}
	list, _, err := p.gh.Issues.ListComments(ctx, "octo", "app", 2, nil)
	if err != nil || len(list) != 2 || list[0].GetBody() != "first" || list[1].GetBody() != "second" {
		t.Fatalf("comments = %v %v", list, err)
	}
	if got, _ := f.Issue("octo/app", 2); got.State != "closed" || got.Pull == nil || got.Pull.HeadSHA != twoHead || len(got.Comments) != 2 {
		t.Fatalf("the fake's pull request #2 = %+v", got)
	}
}
