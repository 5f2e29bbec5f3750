package hub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/fakegithub"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/services/github/internal/forge"
)

// prRepo is "octo/app" with a branch "feature" that adds, changes, removes and renames.
func prRepo(t *testing.T) (*fakeGH, *Provider) {
	f := newFake(t)
	f.AddRepo("octo/app", appFiles)
	main := f.Branch("octo/app", "main")
	f.SetBranch("octo/app", "feature", main)
	f.Commit("octo/app", "feature", map[string]string{
		"src/main.go":         "package main\n\nfunc main() { run() }\n",
		"docs/guide.md":       "# Guide\n",
		"scripts/run.sh":      fakegithub.Delete,
		"src/util/s.go":       "package util\n", // same content as strings.go: a rename
		"src/util/strings.go": fakegithub.Delete,
		"img/new.bin":         "\xff\xfe\x00\x01",
	})
	return f, f.provider(t)
}

func TestCreatePullRequest(t *testing.T) {
	t.Parallel()
	f, p := prRepo(t)
	np := forge.NewPullRequest{Repo: "octo/app", Head: "feature", Title: "Feature", Body: "Does things.", Labels: []string{"thefold", "auto"}}
	pr, created, err := p.CreatePullRequest(t.Context(), np)
	if err != nil || !created {
		t.Fatalf("CreatePullRequest = %v %v %v", pr, created, err)
	}
	if pr.Repo != "octo/app" || pr.Number != 1 || pr.Head != "feature" || pr.Base != "main" || pr.Title != "Feature" ||
		pr.Body != "Does things." || pr.State != githubv1.PullRequestState_PULL_REQUEST_STATE_OPEN || pr.Author != "octo" ||
		pr.Url != "https://github.example/octo/app/pull/1" || !slices.Equal(pr.Labels, []string{"thefold", "auto"}) ||
		pr.HeadSha != f.Branch("octo/app", "feature") || pr.MergeCommitSha != "" {
		t.Errorf("pull request = %v", pr)
	}
	// The same head and base again: the open one, not a second.
	again, created, err := p.CreatePullRequest(t.Context(), np)
	if err != nil || created || again.Number != 1 {
		t.Errorf("duplicate = %v %v %v", again, created, err)
	}
	if q := f.requests("GET", "/repos/octo/app/pulls"); len(q) != 1 || !strings.Contains(q[0].Query, "head=octo%3Afeature") {
		t.Errorf("lookup of the open pull request = %v", q)
	}

	_, _, err = p.CreatePullRequest(t.Context(), forge.NewPullRequest{Repo: "octo/app", Head: "nope", Base: "main", Title: "x"})
	wantErr(t, err, errs.ErrNotFound)
	_, _, err = p.CreatePullRequest(t.Context(), forge.NewPullRequest{Repo: "octo/app", Head: "main", Base: "feature", Title: "x"})
	wantErr(t, err, errs.ErrFailedPrecondition)
	wantPublic(t, err, "No commits between")
}

func TestGetAndListPullRequests(t *testing.T) {
	t.Parallel()
	f, p := prRepo(t)
	pr1, _ := try2(p.CreatePullRequest(t.Context(), forge.NewPullRequest{Repo: "octo/app", Head: "feature", Base: "main", Title: "one"}))
	main := f.Branch("octo/app", "main")
	f.SetBranch("octo/app", "other", main)
	f.Commit("octo/app", "other", map[string]string{"o.txt": "o\n"})
	pr2, _ := try2(p.CreatePullRequest(t.Context(), forge.NewPullRequest{Repo: "octo/app", Head: "other", Base: "main", Title: "two"}))
	f.SetBranch("octo/app", "third", main)
	f.Commit("octo/app", "third", map[string]string{"t.txt": "t\n"})
	pr3, _ := try2(p.CreatePullRequest(t.Context(), forge.NewPullRequest{Repo: "octo/app", Head: "third", Base: "main", Title: "three"}))

	got := try(p.GetPullRequest(t.Context(), "octo/app", pr1.Number, forge.Actor{})).must(t)
	if got.Mergeable == nil || !*got.Mergeable || got.Stats == nil || got.Stats.FilesChanged != 5 {
		t.Errorf("GetPullRequest = %v", got)
	}
	_, err := p.GetPullRequest(t.Context(), "octo/app", 99, forge.Actor{})
	wantErr(t, err, errs.ErrNotFound)

	try(p.MergePullRequest(t.Context(), forge.MergeSpec{Repo: "octo/app", Number: pr2.Number})).must(t)
	try(p.ClosePullRequest(t.Context(), "octo/app", pr3.Number, false, forge.Actor{})).must(t)

	numbers := func(prs []*githubv1.PullRequest) []int32 {
		var n []int32
		for _, pr := range prs {
			n = append(n, pr.Number)
		}
		return n
	}
	cases := []struct {
		q    forge.PullRequestQuery
		want []int32
	}{
		{forge.PullRequestQuery{}, []int32{3, 2, 1}},
		{forge.PullRequestQuery{State: githubv1.PullRequestState_PULL_REQUEST_STATE_OPEN}, []int32{1}},
		{forge.PullRequestQuery{State: githubv1.PullRequestState_PULL_REQUEST_STATE_MERGED}, []int32{2}},
		{forge.PullRequestQuery{State: githubv1.PullRequestState_PULL_REQUEST_STATE_CLOSED}, []int32{3}},
		{forge.PullRequestQuery{Head: "other"}, []int32{2}},
		{forge.PullRequestQuery{Base: "feature"}, nil},
	}
	for _, c := range cases {
		c.q.Repo = "octo/app"
		list, next, err := p.ListPullRequests(t.Context(), c.q, forge.Actor{})
		if err != nil || !slices.Equal(numbers(list), c.want) || next != "" {
			t.Errorf("ListPullRequests(%+v) = %v %q %v, want %v", c.q, numbers(list), next, err, c.want)
		}
	}
	// Merged pull requests skip a page of closed-but-not-merged ones.
	list, next, err := p.ListPullRequests(t.Context(), forge.PullRequestQuery{Repo: "octo/app",
		State: githubv1.PullRequestState_PULL_REQUEST_STATE_MERGED, Page: forge.Page{Size: 1}}, forge.Actor{})
	if err != nil || !slices.Equal(numbers(list), []int32{2}) || next != "" {
		t.Errorf("merged, one per page = %v %q %v", numbers(list), next, err)
	}
	page1, next, err := p.ListPullRequests(t.Context(), forge.PullRequestQuery{Repo: "octo/app", Page: forge.Page{Size: 2}}, forge.Actor{})
	if err != nil || len(page1) != 2 || next == "" {
		t.Fatalf("page 1 = %v %q %v", numbers(page1), next, err)
	}
	page2, next, err := p.ListPullRequests(t.Context(), forge.PullRequestQuery{Repo: "octo/app", Page: forge.Page{Size: 2, Cursor: next}}, forge.Actor{})
	if err != nil || !slices.Equal(numbers(page2), []int32{1}) || next != "" {
		t.Errorf("page 2 = %v %q %v", numbers(page2), next, err)
	}
}

func try2[A, B any](a A, b B, err error) (A, B) {
	if err != nil {
		panic(err)
	}
	return a, b
}

func TestPullRequestDiff(t *testing.T) {
	t.Parallel()
	f, p := prRepo(t)
	pr, _ := try2(p.CreatePullRequest(t.Context(), forge.NewPullRequest{Repo: "octo/app", Head: "feature", Base: "main", Title: "x"}))
	main := f.Branch("octo/app", "main")
	// main moves on: the merge base stays the fork point.
	f.Commit("octo/app", "main", map[string]string{"later.txt": "later\n"})

	d := try(p.PullRequestDiff(t.Context(), "octo/app", pr.Number, nil, forge.Actor{})).must(t)
	if d.BaseSHA != main || d.HeadSHA != f.Branch("octo/app", "feature") {
		t.Errorf("diff between %s and %s, want merge base %s", d.BaseSHA, d.HeadSHA, main)
	}
	type row struct {
		path   string
		action typev1.FileAction
		prev   string
		add    int32
		dels   int32
		binary bool
	}
	var got []row
	byPath := map[string]*typev1.FileDiff{}
	for _, fd := range d.Files {
		got = append(got, row{fd.Path, fd.Action, fd.PreviousPath, fd.Additions, fd.Deletions, fd.Binary})
		byPath[fd.Path] = fd
	}
	want := []row{
		{"docs/guide.md", create, "", 1, 0, false},
		{"img/new.bin", create, "", 0, 0, true},
		{"scripts/run.sh", del, "", 0, 2, false},
		{"src/main.go", modify, "", 1, 1, false},
		{"src/util/s.go", modify, "src/util/strings.go", 0, 0, false},
	}
	if !slices.Equal(got, want) {
		t.Errorf("files =\n%v\nwant\n%v", got, want)
	}
	if s := d.Stats; s.FilesChanged != 5 || s.Additions != 2 || s.Deletions != 3 {
		t.Errorf("stats = %v", s)
	}
	if u := byPath["src/main.go"].UnifiedDiff; !strings.HasPrefix(u, "--- a/src/main.go\n+++ b/src/main.go\n@@ -1,3 +1,3 @@\n") || !strings.HasSuffix(u, "\n") {
		t.Errorf("unified diff = %q", u)
	}
	if u := byPath["docs/guide.md"].UnifiedDiff; !strings.HasPrefix(u, "--- /dev/null\n+++ b/docs/guide.md\n") {
		t.Errorf("added file's diff = %q", u)
	}
	if u := byPath["scripts/run.sh"].UnifiedDiff; !strings.HasPrefix(u, "--- a/scripts/run.sh\n+++ /dev/null\n") {
		t.Errorf("removed file's diff = %q", u)
	}
	if byPath["img/new.bin"].UnifiedDiff != "" {
		t.Error("binary file has a diff")
	}

	// Pinned: the pull request moves on, the pinned pages still describe the first diff.
	f.Commit("octo/app", "feature", map[string]string{"more.txt": "more\n"})
	pin := &forge.DiffPin{BaseSHA: d.BaseSHA, HeadSHA: d.HeadSHA}
	pinned := try(p.PullRequestDiff(t.Context(), "octo/app", pr.Number, pin, forge.Actor{})).must(t)
	if pinned.BaseSHA != d.BaseSHA || pinned.HeadSHA != d.HeadSHA || len(pinned.Files) != 5 {
		t.Errorf("pinned diff = %s..%s %d files", pinned.BaseSHA, pinned.HeadSHA, len(pinned.Files))
	}
	if cmp := f.requests("GET", "/compare/"+d.BaseSHA+"..."+d.HeadSHA); len(cmp) != 1 {
		t.Errorf("pinned diff did not compare the pinned commits: %v", cmp)
	}
	fresh := try(p.PullRequestDiff(t.Context(), "octo/app", pr.Number, nil, forge.Actor{})).must(t)
	if len(fresh.Files) != 6 || fresh.HeadSHA == d.HeadSHA {
		t.Errorf("unpinned diff after the push = %d files at %s", len(fresh.Files), fresh.HeadSHA)
	}
}

func TestPullRequestDiffPages(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.AddRepo("octo/big", map[string]string{"a": "a"})
	main := f.Branch("octo/big", "main")
	f.SetBranch("octo/big", "many", main)
	files := map[string]string{}
	for i := range 250 {
		files[fmt.Sprintf("f/%03d.txt", i)] = "line\n"
	}
	f.Commit("octo/big", "many", files)
	p := f.provider(t)
	pr, _ := try2(p.CreatePullRequest(t.Context(), forge.NewPullRequest{Repo: "octo/big", Head: "many", Base: "main", Title: "x"}))
	d := try(p.PullRequestDiff(t.Context(), "octo/big", pr.Number, nil, forge.Actor{})).must(t)
	if len(d.Files) != len(files) || d.Stats.Additions != int32(len(files)) {
		t.Errorf("diff = %d files, want %d", len(d.Files), len(files))
	}
	if !slices.IsSortedFunc(d.Files, func(a, b *typev1.FileDiff) int { return strings.Compare(a.Path, b.Path) }) {
		t.Error("files not in path order")
	}
	if n := len(f.requests("GET", "/files")); n != 3 {
		t.Errorf("file list pages read = %d, want 3", n)
	}
}

func TestMergePullRequest(t *testing.T) {
	t.Parallel()
	f, p := prRepo(t)
	pr, _ := try2(p.CreatePullRequest(t.Context(), forge.NewPullRequest{Repo: "octo/app", Head: "feature", Base: "main", Title: "Feature", Body: "Body."}))

	_, err := p.MergePullRequest(t.Context(), forge.MergeSpec{Repo: "octo/app", Number: pr.Number, ExpectedHeadSHA: strings.Repeat("2", 40)})
	wantErr(t, err, errs.ErrConflict)

	// The head moves between our read and GitHub's merge: GitHub's 409 is ABORTED.
	var once sync.Once
	f.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPut && strings.HasSuffix(r.URL.Path, "/merge") {
			once.Do(func() { f.Commit("octo/app", "feature", map[string]string{"late.txt": "late\n"}) })
		}
		return false
	})
	_, err = p.MergePullRequest(t.Context(), forge.MergeSpec{Repo: "octo/app", Number: pr.Number, ExpectedHeadSHA: pr.HeadSha})
	wantErr(t, err, errs.ErrConflict)
	wantPublic(t, err, "Head branch was modified")
	f.SetHook(nil)

	// Not mergeable: 405.
	f.SetMergeable("octo/app", 1, new(bool))
	_, err = p.MergePullRequest(t.Context(), forge.MergeSpec{Repo: "octo/app", Number: pr.Number})
	wantErr(t, err, errs.ErrFailedPrecondition)
	wantPublic(t, err, "Pull Request is not mergeable")
	f.SetMergeable("octo/app", 1, nil)

	head := f.Branch("octo/app", "feature")
	merged, err := p.MergePullRequest(t.Context(), forge.MergeSpec{Repo: "octo/app", Number: pr.Number,
		Method: githubv1.MergeMethod_MERGE_METHOD_MERGE, ExpectedHeadSHA: head, DeleteBranch: true})
	if err != nil {
		t.Fatal(err)
	}
	if merged.State != githubv1.PullRequestState_PULL_REQUEST_STATE_MERGED || merged.MergeCommitSha == "" ||
		merged.MergeCommitSha != f.Branch("octo/app", "main") || merged.MergeTime == nil || merged.CloseTime == nil {
		t.Errorf("merged = %v", merged)
	}
	if f.Branch("octo/app", "feature") != "" {
		t.Error("head branch not deleted")
	}
	put := f.requests("PUT", "/pulls/1/merge")
	var body map[string]any
	_ = json.Unmarshal(put[len(put)-1].Body, &body)
	if body["merge_method"] != "merge" || body["sha"] != head || body["commit_title"] != "Feature (#1)" || body["commit_message"] != "Body." {
		t.Errorf("merge request = %v", body)
	}

	// Merged already: returned as is, nothing sent.
	puts := len(f.requests("PUT", "/merge"))
	again := try(p.MergePullRequest(t.Context(), forge.MergeSpec{Repo: "octo/app", Number: pr.Number})).must(t)
	if again.State != githubv1.PullRequestState_PULL_REQUEST_STATE_MERGED || len(f.requests("PUT", "/merge")) != puts {
		t.Errorf("second merge = %v", again)
	}
	_, err = p.ClosePullRequest(t.Context(), "octo/app", pr.Number, false, forge.Actor{})
	wantErr(t, err, errs.ErrFailedPrecondition)
}

func TestClosePullRequest(t *testing.T) {
	t.Parallel()
	f, p := prRepo(t)
	pr, _ := try2(p.CreatePullRequest(t.Context(), forge.NewPullRequest{Repo: "octo/app", Head: "feature", Base: "main", Title: "x"}))
	closed := try(p.ClosePullRequest(t.Context(), "octo/app", pr.Number, true, forge.Actor{})).must(t)
	if closed.State != githubv1.PullRequestState_PULL_REQUEST_STATE_CLOSED || closed.CloseTime == nil || closed.MergeCommitSha != "" {
		t.Errorf("closed = %v", closed)
	}
	if f.Branch("octo/app", "feature") != "" {
		t.Error("head branch not deleted")
	}
	again := try(p.ClosePullRequest(t.Context(), "octo/app", pr.Number, true, forge.Actor{})).must(t)
	if again.State != githubv1.PullRequestState_PULL_REQUEST_STATE_CLOSED {
		t.Errorf("closed again = %v", again)
	}
	if n := len(f.requests("PATCH", "/pulls/")); n != 1 {
		t.Errorf("close requests = %d, want 1", n)
	}
	_, err := p.MergePullRequest(t.Context(), forge.MergeSpec{Repo: "octo/app", Number: pr.Number})
	wantErr(t, err, errs.ErrFailedPrecondition)
	_, err = p.ClosePullRequest(t.Context(), "octo/app", 42, false, forge.Actor{})
	wantErr(t, err, errs.ErrNotFound)
}
