package hub

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/fakegithub"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/services/github/internal/forge"
)

// appFiles is the content of the seeded "octo/app".
var appFiles = map[string]string{
	"README.md":           "# App\n",
	"src/main.go":         "package main\n\nfunc main() {}\n",
	"src/util/strings.go": "package util\n",
	"scripts/run.sh":      "#!/bin/sh\necho hi\n",
	"logo.png":            "\x89PNG\r\n\x1a\n\xff\xfe\x00",
	"link":                "->README.md",
}

// try(call()).must(t) is call's value, failing the test on its error.
func try[T any](v T, err error) result[T] { return result[T]{v, err} }

type result[T any] struct {
	v   T
	err error
}

func (r result[T]) must(t *testing.T) T {
	t.Helper()
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.v
}

func wantErr(t *testing.T, err, target error) {
	t.Helper()
	if !errors.Is(err, target) {
		t.Fatalf("err = %v, want %v", err, target)
	}
}

// wantPublic checks that err's text carries none of GitHub's own words.
func wantPublic(t *testing.T, err error, github ...string) {
	t.Helper()
	for _, s := range github {
		if strings.Contains(err.Error(), s) {
			t.Errorf("error %q passes GitHub's text %q through", err, s)
		}
	}
}

// Without a token of its own, the provider calls with each call's credential
// (forge.WithCredential) and sends nothing for a call without one.
func TestCallsCarryTheirCredential(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.AddRepo("octo/app", map[string]string{"a.txt": "a\n"})
	p := f.provider(t, func(c *Config) { c.Token = "" })
	if p.Kind() != githubv1.RepoProvider_REPO_PROVIDER_GITHUB {
		t.Errorf("Kind = %v", p.Kind())
	}
	_, err := p.GetRepo(t.Context(), "octo/app", forge.Actor{})
	if !errors.Is(err, errs.ErrPermissionDenied) {
		t.Fatalf("a call without a credential: %v", err)
	}
	if got := f.requests("", ""); len(got) != 0 {
		t.Fatalf("a call without a credential sent %d requests", len(got))
	}
	if _, err := p.GetRepo(forge.WithCredential(t.Context(), "someone-else"), "octo/app", forge.Actor{}); !errors.Is(err, errs.ErrUnavailable) {
		t.Fatalf("a call with a token the fake does not know: %v", err) // 401 Bad credentials
	}
	if _, err := p.GetRepo(forge.WithCredential(t.Context(), fakeToken), "octo/app", forge.Actor{}); err != nil {
		t.Fatal(err)
	}
	for _, r := range f.requests("", "") {
		if a := r.Header.Get("Authorization"); a != "Bearer someone-else" && a != "Bearer "+fakeToken {
			t.Fatalf("%s %s went out with %q", r.Method, r.Path, a)
		}
	}
}

func TestGetRepo(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.AddRepo("octo/app", appFiles)
	f.AddRepo("octo/empty", nil)
	f.SetRepoOptions("octo/app", fakegithub.RepoOptions{Description: "the app", Private: true})
	p := f.provider(t)

	r := try(p.GetRepo(t.Context(), "octo/app", forge.Actor{})).must(t)
	if r.Repo != "octo/app" || r.Owner != "octo" || r.Name != "app" || r.DefaultBranch != "main" ||
		r.Provider != githubv1.RepoProvider_REPO_PROVIDER_GITHUB || !r.Private || r.Description != "the app" ||
		r.CloneUrl != "https://github.example/octo/app.git" || r.HtmlUrl != "https://github.example/octo/app" ||
		r.Empty || r.CreateTime == nil || r.UpdateTime == nil {
		t.Errorf("GetRepo = %v", r)
	}
	e := try(p.GetRepo(t.Context(), "octo/empty", forge.Actor{})).must(t)
	if !e.Empty {
		t.Errorf("empty repository: Empty = false")
	}
	for _, req := range f.requests("", "/repos/") {
		if got := req.Header.Get("Authorization"); got != "Bearer "+fakeToken {
			t.Fatalf("%s %s: Authorization = %q", req.Method, req.Path, got)
		}
	}

	_, err := p.GetRepo(t.Context(), "octo/nope", forge.Actor{})
	wantErr(t, err, errs.ErrNotFound)
	if err.Error() != `repository "octo/nope": not found` {
		t.Errorf("text = %q", err)
	}
	_, err = p.GetRepo(t.Context(), "nope", forge.Actor{})
	wantErr(t, err, errs.ErrInvalid)
}

func TestListRepos(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	for _, r := range []string{"octo/b", "octo/a", "acme/lib", "someone/pub"} {
		f.AddRepo(r, map[string]string{"f": "x"})
	}
	p := f.provider(t)

	names := func(rs []*githubv1.Repo) string {
		var s []string
		for _, r := range rs {
			s = append(s, r.Repo)
		}
		return strings.Join(s, ",")
	}
	all, next, err := p.ListRepos(t.Context(), "", forge.Actor{}, forge.Page{Size: 50})
	if err != nil || names(all) != "acme/lib,octo/a,octo/b" || next != "" {
		t.Fatalf("ListRepos all = %s, %q, %v", names(all), next, err)
	}
	// Paged one at a time.
	var paged []*githubv1.Repo
	cur := ""
	for range 5 {
		page, next, err := p.ListRepos(t.Context(), "", forge.Actor{}, forge.Page{Size: 1, Cursor: cur})
		if err != nil {
			t.Fatal(err)
		}
		paged = append(paged, page...)
		if cur = next; cur == "" {
			break
		}
	}
	if names(paged) != "acme/lib,octo/a,octo/b" {
		t.Errorf("paged = %s", names(paged))
	}
	cases := []struct{ owner, want, path string }{
		{"octo", "octo/a,octo/b", "/user/repos"},
		{"acme", "acme/lib", "/orgs/acme/repos"},
		{"someone", "someone/pub", "/users/someone/repos"},
	}
	for _, c := range cases {
		got, _, err := p.ListRepos(t.Context(), c.owner, forge.Actor{}, forge.Page{})
		if err != nil || names(got) != c.want {
			t.Errorf("ListRepos(%s) = %s, %v", c.owner, names(got), err)
		}
		if len(f.requests("GET", c.path)) == 0 {
			t.Errorf("ListRepos(%s): no call to %s", c.owner, c.path)
		}
	}
	_, _, err = p.ListRepos(t.Context(), "", forge.Actor{}, forge.Page{Cursor: "garbage"})
	wantErr(t, err, errs.ErrInvalid)
}

func TestCreateRepo(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.AddRepo("octo/taken", nil)
	p := f.provider(t)

	r := try(p.CreateRepo(t.Context(), forge.NewRepo{Owner: "octo", Name: "fresh", Description: "d", Private: true})).must(t)
	if r.Repo != "octo/fresh" || !r.Private || !r.Empty {
		t.Errorf("CreateRepo = %v", r)
	}
	if len(f.requests("POST", "/user/repos")) != 1 {
		t.Error("the user's repository was not created through POST /user/repos")
	}
	r = try(p.CreateRepo(t.Context(), forge.NewRepo{Owner: "acme", Name: "svc"})).must(t)
	if r.Repo != "acme/svc" || len(f.requests("POST", "/orgs/acme/repos")) != 1 {
		t.Errorf("org repository: %v", r)
	}
	r = try(p.CreateRepo(t.Context(), forge.NewRepo{Name: "bare"})).must(t)
	if r.Repo != "octo/bare" {
		t.Errorf("no owner: %v", r)
	}
	_, err := p.CreateRepo(t.Context(), forge.NewRepo{Owner: "octo", Name: "taken"})
	wantErr(t, err, errs.ErrAlreadyExists)
	wantPublic(t, err, "name already exists on this account")
	_, err = p.CreateRepo(t.Context(), forge.NewRepo{Owner: "ghost-org", Name: "x"})
	wantErr(t, err, errs.ErrNotFound)
}

func TestInit(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.AddRepo("octo/empty", nil)
	f.AddRepo("octo/app", appFiles)
	p := f.provider(t)

	spec := forge.InitSpec{Repo: "octo/empty", Message: "scaffold", Files: []*typev1.FileChange{
		{Path: "run.sh", Action: typev1.FileAction_FILE_ACTION_CREATE, Content: "#!/bin/sh\n", Executable: true},
		{Path: "README.md", Action: typev1.FileAction_FILE_ACTION_CREATE, Content: "# Empty\n"},
		{Path: "docs/a.md", Action: typev1.FileAction_FILE_ACTION_CREATE, Content: "a\n"},
	}}
	sha, branch, already, err := p.Init(t.Context(), spec)
	if err != nil || already || branch != "main" {
		t.Fatalf("Init = %s %s %v %v", sha, branch, already, err)
	}
	puts := f.requests("PUT", "/contents/")
	if len(puts) != 1 || puts[0].Path != "/repos/octo/empty/contents/README.md" {
		t.Fatalf("contents API calls = %v (want one, for the non-executable README.md)", puts)
	}
	if main := f.Branch("octo/empty", "main"); main != sha {
		t.Errorf("main = %s, Init returned %s", main, sha)
	}
	if flat := f.Files("octo/empty", sha); len(flat) != 3 || flat["run.sh"].Mode != "100755" || flat["README.md"].Mode != "100644" {
		t.Errorf("initial tree = %v", flat)
	}
	if c, _ := f.CommitInfo("octo/empty", sha); c.Message != "scaffold" || c.Author != (fakegithub.Signature{Name: "TheFold", Email: "thefold@users.noreply.github.com"}) {
		t.Errorf("commit = %+v", c)
	}
	// A second Init writes nothing.
	sha2, _, already, err := p.Init(t.Context(), spec)
	if err != nil || !already || sha2 != sha {
		t.Errorf("second Init = %s %v %v", sha2, already, err)
	}
	head := f.Branch("octo/app", "main")
	sha3, branch, already, err := p.Init(t.Context(), forge.InitSpec{Repo: "octo/app", Files: spec.Files})
	if err != nil || !already || sha3 != head || branch != "main" {
		t.Errorf("Init of a repository with commits = %s %s %v %v", sha3, branch, already, err)
	}
	// One file: the contents API alone.
	f.AddRepo("octo/one", nil)
	sha4, _, _, err := p.Init(t.Context(), forge.InitSpec{Repo: "octo/one", Branch: "trunk", Files: spec.Files[1:2]})
	if err != nil || f.Branch("octo/one", "trunk") != sha4 {
		t.Errorf("one-file Init = %s, %v", sha4, err)
	}
}

func TestErrorMapping(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		status int
		body   string
		want   error
		text   string
	}{
		{"401", 401, `{"message":"Bad credentials"}`, errs.ErrUnavailable, "THEFOLD_GITHUB_TOKEN"},
		{"403", 403, `{"message":"Resource not accessible by personal access token"}`, errs.ErrNotFound, `repository "octo/app": not found`},
		{"404", 404, `{"message":"Not Found"}`, errs.ErrNotFound, `repository "octo/app": not found`},
		{"500", 500, `{"message":"Server Error at 10.0.0.7"}`, errs.ErrUnavailable, "GitHub is unavailable"},
		{"502", 502, `<html>bad gateway</html>`, errs.ErrUnavailable, "GitHub is unavailable"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(t)
			f.AddRepo("octo/app", appFiles)
			f.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(c.status)
				_, _ = w.Write([]byte(c.body))
				return true
			})
			_, err := f.provider(t).GetRepo(t.Context(), "octo/app", forge.Actor{})
			wantErr(t, err, c.want)
			if !strings.Contains(err.Error(), c.text) {
				t.Errorf("text = %q, want it to contain %q", err, c.text)
			}
			wantPublic(t, err, "Bad credentials", "Resource not accessible", "10.0.0.7", "html")
		})
	}
	t.Run("wrong token", func(t *testing.T) {
		t.Parallel()
		f := newFake(t)
		f.AddRepo("octo/app", appFiles)
		p := f.provider(t, func(c *Config) { c.Token = "stale" })
		_, err := p.GetRepo(t.Context(), "octo/app", forge.Actor{})
		wantErr(t, err, errs.ErrUnavailable)
	})
	t.Run("unreachable", func(t *testing.T) {
		t.Parallel()
		f := newFake(t)
		p := f.provider(t)
		f.Close()
		_, err := p.GetRepo(t.Context(), "octo/app", forge.Actor{})
		wantErr(t, err, errs.ErrUnavailable)
		wantPublic(t, err, "127.0.0.1", "dial")
	})
	t.Run("hidden repository", func(t *testing.T) {
		t.Parallel()
		f := newFake(t)
		f.AddRepo("octo/secret", appFiles)
		f.SetRepoOptions("octo/secret", fakegithub.RepoOptions{Hidden: true})
		_, err := f.provider(t).GetRepo(t.Context(), "octo/secret", forge.Actor{})
		wantErr(t, err, errs.ErrNotFound)
	})
}

func TestRateLimitPrimaryRetried(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.AddRepo("octo/app", appFiles)
	reset := time.Now().Add(time.Second)
	count := rateLimited(f, "/repos/octo/app", 1, func(w http.ResponseWriter) {
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
		writeJSON(w, 403, msg("API rate limit exceeded for user ID 1."))
	})
	p := f.provider(t)
	start := time.Now()
	r, err := p.GetRepo(t.Context(), "octo/app", forge.Actor{})
	if err != nil || r.Repo != "octo/app" {
		t.Fatalf("GetRepo after a short rate limit = %v, %v", r, err)
	}
	if n := count.get(); n != 2 {
		t.Errorf("calls = %d, want 2 (one refused, one retried)", n)
	}
	if !time.Now().After(time.Unix(reset.Unix(), 0)) {
		t.Errorf("retried after %v, before the reset", time.Since(start))
	}
}

func TestRateLimitSecondaryRetried(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.AddRepo("octo/app", appFiles)
	count := rateLimited(f, "/repos/octo/app", 1, func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, 429, map[string]any{"message": "You have exceeded a secondary rate limit.",
			"documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-secondary-rate-limits"})
	})
	start := time.Now()
	try(f.provider(t).GetRepo(t.Context(), "octo/app", forge.Actor{})).must(t)
	if d := time.Since(start); d < time.Second {
		t.Errorf("retried after %v, before Retry-After", d)
	}
	if n := count.get(); n != 2 {
		t.Errorf("calls = %d, want 2", n)
	}
}

func TestRateLimitFarResetFails(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.AddRepo("octo/app", appFiles)
	reset := time.Now().Add(time.Hour)
	count := rateLimited(f, "/repos/octo/app", 100, func(w http.ResponseWriter) {
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(reset.Unix(), 10))
		writeJSON(w, 403, msg("API rate limit exceeded for user ID 1."))
	})
	p := f.provider(t)
	_, err := p.GetRepo(t.Context(), "octo/app", forge.Actor{})
	wantErr(t, err, errs.ErrUnavailable)
	want := "GitHub rate limit exhausted; resets at " + time.Unix(reset.Unix(), 0).UTC().Format("15:04:05") + " UTC"
	if !strings.HasPrefix(err.Error(), want) {
		t.Errorf("text = %q, want %q…", err, want)
	}
	wantPublic(t, err, "user ID")
	// go-github now refuses locally until the reset: no second request reaches GitHub.
	_, err = p.Resolve(t.Context(), "octo/app", "main", forge.Actor{})
	wantErr(t, err, errs.ErrUnavailable)
	if n := count.get(); n != 1 {
		t.Errorf("calls = %d, want 1", n)
	}
}

func TestRateLimitWaitRespectsContext(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.AddRepo("octo/app", appFiles)
	rateLimited(f, "/repos/octo/app", 100, func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", "30")
		writeJSON(w, 403, map[string]any{"message": "secondary", "documentation_url": "https://docs.github.com/rest#secondary-rate-limits"})
	})
	p := f.provider(t, func(c *Config) { c.MaxRetryWait = time.Minute })
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := p.GetRepo(ctx, "octo/app", forge.Actor{})
	if err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("GetRepo = %v after %v, want the context's error promptly", err, time.Since(start))
	}
}

func TestRateLimitWriteNotRetried(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.AddRepo("octo/app", appFiles)
	count := rateLimited(f, "/git/blobs", 100, func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", "1")
		writeJSON(w, 403, map[string]any{"message": "secondary", "documentation_url": "https://docs.github.com/rest#secondary-rate-limits"})
	})
	_, err := f.provider(t).Commit(t.Context(), forge.CommitSpec{Repo: "octo/app", Branch: "main", Message: "m",
		Files: []*typev1.FileChange{{Path: "x", Action: typev1.FileAction_FILE_ACTION_CREATE, Content: "x"}}})
	wantErr(t, err, errs.ErrUnavailable)
	if !strings.Contains(err.Error(), "secondary rate limit") {
		t.Errorf("text = %q", err)
	}
	if n := count.get(); n != 1 {
		t.Errorf("blob calls = %d, want 1 (writes are not retried)", n)
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

// CollaboratorRole reads GitHub's collaborator permission: the repository's own user is
// admin, a collaborator what was granted, anyone else none.
func TestCollaboratorRole(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.AddRepo("octo/app", appFiles)
	f.SetPermission("octo/app", "writer", "write")
	f.SetPermission("octo/app", "reader", "read")
	p := f.provider(t)
	for login, want := range map[string]forge.Role{"octo": forge.RoleAdmin, "writer": forge.RoleWrite, "reader": forge.RoleRead, "stranger": forge.RoleNone} {
		got, err := p.CollaboratorRole(t.Context(), "octo/app", login)
		if err != nil || got != want {
			t.Errorf("%s: %v %v, want %v", login, got, err, want)
		}
	}
	if reqs := f.requests("GET", "/repos/octo/app/collaborators/writer/permission"); len(reqs) != 1 {
		t.Errorf("%d permission requests for writer, want 1", len(reqs))
	}
	if _, err := p.CollaboratorRole(t.Context(), "octo/nope", "writer"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("unknown repository: %v, want not found", err)
	}
}

// RepoEvents reads the feed newest first as webhook deliveries of its types, with the
// repository in each payload; a read with the last ETag is not modified; a new event
// changes it; the poll interval is GitHub's.
func TestRepoEvents(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.AddRepo("octo/app", appFiles)
	first := f.AddEvent("octo/app", "IssuesEvent", map[string]any{"action": "opened", "issue": map[string]any{"number": 3}})
	second := f.AddEvent("octo/app", "PullRequestReviewEvent", map[string]any{"action": "created", "review": map[string]any{"id": 9, "state": "changes_requested"}})
	p := f.provider(t)
	got, err := p.RepoEvents(t.Context(), "octo/app", "")
	if err != nil {
		t.Fatal(err)
	}
	if got.NotModified || got.Etag == "" || got.PollInterval.AsDuration() != time.Minute || len(got.Events) != 2 {
		t.Fatalf("first read: %v", got)
	}
	if e := got.Events[0]; e.Id != second || e.Type != "pull_request_review" || e.Action != "created" || !strings.Contains(string(e.Payload), `"full_name":"octo/app"`) {
		t.Fatalf("newest: %v", e)
	}
	if e := got.Events[1]; e.Id != first || e.Type != "issues" || !strings.Contains(string(e.Payload), `"number":3`) || e.CreateTime == nil {
		t.Fatalf("oldest: %v", e)
	}
	again, err := p.RepoEvents(t.Context(), "octo/app", got.Etag)
	if err != nil || !again.NotModified || len(again.Events) != 0 || again.Etag != got.Etag {
		t.Fatalf("conditional read: %v %v", again, err)
	}
	if reqs := f.requests("GET", "/repos/octo/app/events"); len(reqs) != 2 || reqs[1].Header.Get("If-None-Match") != got.Etag {
		t.Fatalf("requests %v", reqs)
	}
	f.AddEvent("octo/app", "PushEvent", map[string]any{"ref": "refs/heads/main"})
	third, err := p.RepoEvents(t.Context(), "octo/app", got.Etag)
	if err != nil || third.NotModified || len(third.Events) != 3 || third.Events[0].Type != "push" || third.Etag == got.Etag {
		t.Fatalf("after a new event: %v %v", third, err)
	}
	if _, err := p.RepoEvents(t.Context(), "octo/nope", ""); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("unknown repository: %v", err)
	}
}
