package hub

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/fakegithub"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/services/github/internal/forge"
)

func TestIssues(t *testing.T) {
	t.Parallel()
	f, p := prRepo(t)
	ctx := t.Context()
	one := try(p.CreateIssue(ctx, forge.NewIssue{Repo: "octo/app", Title: "base work", Labels: []string{"bug"}})).must(t)
	pr, _ := try2(p.CreatePullRequest(ctx, forge.NewPullRequest{Repo: "octo/app", Head: "feature", Base: "main", Title: "a pull request"}))
	two := try(p.CreateIssue(ctx, forge.NewIssue{Repo: "octo/app", Title: "later", Body: "Needs the base.", BlockedBy: []int32{one.Number}, Labels: []string{"bug", "p1"}})).must(t)

	if one.Number != 1 || pr.Number != 2 || two.Number != 3 {
		t.Fatalf("numbers = %d %d %d: issues and pull requests share one sequence", one.Number, pr.Number, two.Number)
	}
	if two.Body != "Needs the base.\n\nBlocked by #1" || !slices.Equal(two.BlockedBy, []int32{1}) ||
		two.State != githubv1.IssueState_ISSUE_STATE_OPEN || !slices.Equal(two.Labels, []string{"bug", "p1"}) ||
		two.Author != "octo" || two.Url != "https://github.example/octo/app/issues/3" || two.CreateTime == nil {
		t.Errorf("created = %v", two)
	}
	// Registered with the dependencies API by the blocker's id, not its number.
	posts := f.requests("POST", "/issues/3/dependencies/blocked_by")
	var body map[string]int64
	if len(posts) != 1 || json.Unmarshal(posts[0].Body, &body) != nil || body["issue_id"] != 90001 {
		t.Errorf("dependency requests = %v", posts)
	}
	if got := f.BlockedBy("octo/app", 3); !slices.Equal(got, []int{1}) {
		t.Errorf("fake's dependencies of #3 = %v", got)
	}

	// Blocked by a body line and by a dependency only GitHub knows: the union.
	four := try(p.CreateIssue(ctx, forge.NewIssue{Repo: "octo/app", Title: "four", Body: "Depends on #1"})).must(t)
	f.SetBlockedBy("octo/app", 4, 3)
	got := try(p.GetIssue(ctx, "octo/app", four.Number, forge.Actor{})).must(t)
	if !slices.Equal(got.BlockedBy, []int32{1, 3}) {
		t.Errorf("blocked_by = %v, want [1 3]", got.BlockedBy)
	}

	// A pull request's number is not an issue.
	_, err := p.GetIssue(ctx, "octo/app", pr.Number, forge.Actor{})
	wantErr(t, err, errs.ErrNotFound)
	_, err = p.GetIssue(ctx, "octo/app", 77, forge.Actor{})
	wantErr(t, err, errs.ErrNotFound)
	_, err = p.UpdateIssue(ctx, forge.IssueUpdate{Repo: "octo/app", Number: pr.Number, Title: new("x")})
	wantErr(t, err, errs.ErrNotFound)
	_, err = p.CreateIssue(ctx, forge.NewIssue{Repo: "octo/app", Title: "x", BlockedBy: []int32{77}})
	wantErr(t, err, errs.ErrInvalid)
	_, err = p.CreateIssue(ctx, forge.NewIssue{Repo: "octo/app", Title: "x", BlockedBy: []int32{pr.Number}})
	wantErr(t, err, errs.ErrInvalid)

	list, next, err := p.ListIssues(ctx, forge.IssueQuery{Repo: "octo/app"}, forge.Actor{})
	if err != nil || next != "" {
		t.Fatal(err, next)
	}
	var nums []int32
	for _, is := range list {
		nums = append(nums, is.Number)
	}
	if !slices.Equal(nums, []int32{4, 3, 1}) {
		t.Errorf("ListIssues = %v, want [4 3 1] (newest first, no pull request)", nums)
	}
	if !slices.Equal(list[0].BlockedBy, []int32{1, 3}) || !slices.Equal(list[1].BlockedBy, []int32{1}) || len(list[2].BlockedBy) != 0 {
		t.Errorf("blocked_by in the list = %v %v %v", list[0].BlockedBy, list[1].BlockedBy, list[2].BlockedBy)
	}
	// GitHub's summary says #1 has no blockers: its dependencies were not asked for.
	if n := len(f.requests("GET", "/issues/1/dependencies")); n != 0 {
		t.Errorf("dependencies of #1 read %d times", n)
	}
	labelled, _, err := p.ListIssues(ctx, forge.IssueQuery{Repo: "octo/app", Labels: []string{"bug", "p1"}}, forge.Actor{})
	if err != nil || len(labelled) != 1 || labelled[0].Number != 3 {
		t.Errorf("labels bug+p1 = %v, %v", labelled, err)
	}
	// Pull requests fill the first page: the next one is read.
	page, _, err := p.ListIssues(ctx, forge.IssueQuery{Repo: "octo/app", State: githubv1.IssueState_ISSUE_STATE_OPEN, Page: forge.Page{Size: 1, Cursor: "3.1"}}, forge.Actor{})
	if err != nil || len(page) != 1 || page[0].Number != 1 {
		t.Errorf("page past the pull request = %v, %v", page, err)
	}

	// Update: close, relabel, retitle, and move the blocker from #1 to #4.
	closed := githubv1.IssueState_ISSUE_STATE_CLOSED
	up, err := p.UpdateIssue(ctx, forge.IssueUpdate{Repo: "octo/app", Number: 3, State: &closed,
		Labels: &[]string{"wontfix"}, Title: new("later, maybe"), BlockedBy: &[]int32{4}})
	if err != nil {
		t.Fatal(err)
	}
	if up.State != githubv1.IssueState_ISSUE_STATE_CLOSED || up.CloseTime == nil || !slices.Equal(up.Labels, []string{"wontfix"}) ||
		up.Title != "later, maybe" || up.Body != "Needs the base.\n\nBlocked by #4" || !slices.Equal(up.BlockedBy, []int32{4}) {
		t.Errorf("updated = %v", up)
	}
	if got := f.BlockedBy("octo/app", 3); !slices.Equal(got, []int{4}) {
		t.Errorf("fake's dependencies of #3 = %v, want [4]", got)
	}
	if n := len(f.requests("DELETE", "/issues/3/dependencies/blocked_by/90001")); n != 1 {
		t.Errorf("removal of #1 = %d requests", n)
	}
	// Clear the labels, reopen, clear the blockers.
	open := githubv1.IssueState_ISSUE_STATE_OPEN
	up, err = p.UpdateIssue(ctx, forge.IssueUpdate{Repo: "octo/app", Number: 3, State: &open, Labels: &[]string{}, BlockedBy: &[]int32{}})
	if err != nil || up.State != githubv1.IssueState_ISSUE_STATE_OPEN || len(up.Labels) != 0 || len(up.BlockedBy) != 0 || up.Body != "Needs the base." {
		t.Errorf("cleared = %v, %v", up, err)
	}
	_, err = p.UpdateIssue(ctx, forge.IssueUpdate{Repo: "octo/app", Number: 3, BlockedBy: &[]int32{3}})
	wantErr(t, err, errs.ErrInvalid)
	// The body alone: blocked-by lines in it count.
	up, err = p.UpdateIssue(ctx, forge.IssueUpdate{Repo: "octo/app", Number: 3, Body: new("New text.\nBlocked by #1")})
	if err != nil || !slices.Equal(up.BlockedBy, []int32{1}) {
		t.Errorf("body update = %v, %v", up, err)
	}
}

func TestIssueDependenciesUnavailable(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(o *fakegithub.Options) { o.NoDependencies = true })
	f.AddRepo("octo/app", appFiles)
	p := f.provider(t)
	ctx := t.Context()
	one := try(p.CreateIssue(ctx, forge.NewIssue{Repo: "octo/app", Title: "one"})).must(t)
	two := try(p.CreateIssue(ctx, forge.NewIssue{Repo: "octo/app", Title: "two", BlockedBy: []int32{one.Number}})).must(t)
	if two.Body != "Blocked by #1" || !slices.Equal(two.BlockedBy, []int32{1}) {
		t.Errorf("created without the API = %v", two)
	}
	for range 3 {
		got := try(p.GetIssue(ctx, "octo/app", two.Number, forge.Actor{})).must(t)
		if !slices.Equal(got.BlockedBy, []int32{1}) {
			t.Errorf("blocked_by = %v", got.BlockedBy)
		}
	}
	try2(p.ListIssues(ctx, forge.IssueQuery{Repo: "octo/app"}, forge.Actor{}))
	up := try(p.UpdateIssue(ctx, forge.IssueUpdate{Repo: "octo/app", Number: two.Number, BlockedBy: &[]int32{}})).must(t)
	if up.Body != "" || len(up.BlockedBy) != 0 {
		t.Errorf("updated without the API = %v", up)
	}
	if n := len(f.requests("", "/dependencies/")); n != 1 {
		t.Errorf("dependencies API called %d times, want once (then remembered as unavailable)", n)
	}
}

func TestIssueDependenciesWithoutSummary(t *testing.T) {
	t.Parallel()
	f := newFake(t, func(o *fakegithub.Options) { o.NoDependencySummary = true })
	f.AddRepo("octo/app", appFiles)
	p := f.provider(t)
	one := try(p.CreateIssue(t.Context(), forge.NewIssue{Repo: "octo/app", Title: "one"})).must(t)
	two := try(p.CreateIssue(t.Context(), forge.NewIssue{Repo: "octo/app", Title: "two"})).must(t)
	f.SetBlockedBy("octo/app", int(two.Number), int(one.Number))
	got := try(p.GetIssue(t.Context(), "octo/app", two.Number, forge.Actor{})).must(t)
	if !slices.Equal(got.BlockedBy, []int32{1}) || got.Body != "" {
		t.Errorf("blocked_by from the API alone = %v", got)
	}
}

func TestComment(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.AddRepo("octo/app", appFiles)
	p := f.provider(t)
	is := try(p.CreateIssue(t.Context(), forge.NewIssue{Repo: "octo/app", Title: "one"})).must(t)
	c := try(p.Comment(t.Context(), "octo/app", is.Number, "Looks good.", forge.Actor{})).must(t)
	if c.Id != "501" || c.Body != "Looks good." || c.Author != "octo" || !strings.HasSuffix(c.Url, "#issuecomment-501") || c.CreateTime == nil {
		t.Errorf("comment = %v", c)
	}
	if got := try(p.GetIssue(t.Context(), "octo/app", is.Number, forge.Actor{})).must(t); got.CommentCount != 1 {
		t.Errorf("comment_count = %d", got.CommentCount)
	}
	_, err := p.Comment(t.Context(), "octo/app", 99, "x", forge.Actor{})
	wantErr(t, err, errs.ErrNotFound)
}
