package service_test

import (
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// MergeBaseIntoPullRequest on the local forge: a head behind its base gains a merge commit
// (head, base) holding both sides, which plain git reads; a head that has the base is
// returned unchanged and nothing is written; conflicts name the file; a stale
// expected_head_sha is ABORTED; merged and closed pull requests are refused; it needs write
// access.
func TestLocalMergeBaseIntoPullRequest(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	repo := e.repo(t, "behind", map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	commit := func(branch string, files ...*typev1.FileChange) string {
		t.Helper()
		res, err := c.CommitFiles(e.alice, &githubv1.CommitFilesRequest{Repo: repo, Branch: branch, Message: "on " + branch, Files: files})
		if err != nil {
			t.Fatal(err)
		}
		return res.GetCommitSha()
	}
	open := func(head string, files ...*typev1.FileChange) *githubv1.PullRequest {
		t.Helper()
		if _, err := c.CreateBranch(e.alice, &githubv1.CreateBranchRequest{Repo: repo, Branch: head}); err != nil {
			t.Fatal(err)
		}
		commit(head, files...)
		pr, err := c.CreatePullRequest(e.alice, &githubv1.CreatePullRequestRequest{Repo: repo, Head: head, Title: head})
		if err != nil {
			t.Fatal(err)
		}
		return pr.GetPullRequest()
	}
	update := func(number int32, expected string) (*githubv1.MergeBaseIntoPullRequestResponse, error) {
		return c.MergeBaseIntoPullRequest(e.alice, &githubv1.MergeBaseIntoPullRequestRequest{Repo: repo, Number: number, ExpectedHeadSha: expected})
	}
	bare := e.local.Dir(repo)
	objects := func() string { return gitCLI(t, bare, "count-objects") }

	feature := open("feature", modify("a.txt", "a feature\n"))
	clash := open("clash", modify("b.txt", "b clash\n"))

	// Up to date: the pull request as it is, and not one object or ref written.
	before, refs := objects(), gitCLI(t, bare, "show-ref")
	same, err := update(feature.GetNumber(), feature.GetHeadSha())
	if err != nil || same.GetUpdated() || same.GetPullRequest().GetHeadSha() != feature.GetHeadSha() {
		t.Fatalf("up to date: %v %v", same, err)
	}
	if objects() != before || gitCLI(t, bare, "show-ref") != refs {
		t.Fatal("an update of an up-to-date head wrote to the repository")
	}

	// The base moves on: b.txt changes, c.txt appears.
	base := commit("main", modify("b.txt", "b main\n"), create("c.txt", "c\n"))

	_, err = update(feature.GetNumber(), base)
	wantCode(t, err, codes.Aborted, "expected_head_sha")

	got, err := update(feature.GetNumber(), feature.GetHeadSha())
	if err != nil || !got.GetUpdated() {
		t.Fatalf("update: %v %v", got, err)
	}
	pr := got.GetPullRequest()
	head := gitCLI(t, bare, "rev-parse", "refs/heads/feature")
	if pr.GetHeadSha() != head || head == feature.GetHeadSha() || pr.GetBaseSha() != base ||
		pr.GetStats().GetFilesChanged() != 1 || !pr.GetMergeable() || pr.GetState() != githubv1.PullRequestState_PULL_REQUEST_STATE_OPEN {
		t.Fatalf("updated pull request %v, want head %s on base %s with one file changed", pr, head, base)
	}
	if parents := gitCLI(t, bare, "log", "-1", "--format=%P", head); parents != feature.GetHeadSha()+" "+base {
		t.Fatalf("merge commit's parents %q, want head then base", parents)
	}
	if subject := gitCLI(t, bare, "log", "-1", "--format=%s", head); subject != "Merge branch 'main' into feature" {
		t.Fatalf("merge commit's message %q", subject)
	}
	dir := e.clone(t, repo, "--branch", "feature")
	for path, want := range map[string]string{"a.txt": "a feature\n", "b.txt": "b main\n", "c.txt": "c\n"} {
		if got := read(t, filepath.Join(dir, path)); got != want {
			t.Errorf("%s on the updated head = %q, want %q", path, got, want)
		}
	}
	gitCLI(t, dir, "fsck", "--strict")
	stored, err := c.GetPullRequest(e.alice, &githubv1.GetPullRequestRequest{Repo: repo, Number: feature.GetNumber()})
	if err != nil || stored.GetPullRequest().GetHeadSha() != head || stored.GetPullRequest().GetBaseSha() != base {
		t.Fatalf("stored pull request after the update: %v %v", stored, err)
	}

	// Again: up to date now.
	before = objects()
	again, err := update(feature.GetNumber(), "")
	if err != nil || again.GetUpdated() || again.GetPullRequest().GetHeadSha() != head || objects() != before {
		t.Fatalf("second update: %v %v", again, err)
	}

	// Both changed b.txt: refused, naming it, and the head stays.
	_, err = update(clash.GetNumber(), "")
	wantCode(t, err, codes.FailedPrecondition, "b.txt")
	if got := gitCLI(t, bare, "rev-parse", "refs/heads/clash"); got != clash.GetHeadSha() {
		t.Fatalf("a refused update moved the head to %s", got)
	}

	// Someone without write access may not; on a private repository they see nothing.
	_, err = c.MergeBaseIntoPullRequest(e.bob, &githubv1.MergeBaseIntoPullRequestRequest{Repo: repo, Number: feature.GetNumber()})
	wantCode(t, err, codes.PermissionDenied, "")

	// Closed or merged: refused.
	if _, err := c.ClosePullRequest(e.alice, &githubv1.ClosePullRequestRequest{Repo: repo, Number: clash.GetNumber()}); err != nil {
		t.Fatal(err)
	}
	_, err = update(clash.GetNumber(), "")
	wantCode(t, err, codes.FailedPrecondition, "closed")
	if _, err := c.MergePullRequest(e.alice, &githubv1.MergePullRequestRequest{Repo: repo, Number: feature.GetNumber()}); err != nil {
		t.Fatal(err)
	}
	_, err = update(feature.GetNumber(), "")
	wantCode(t, err, codes.FailedPrecondition, "merged")
}

// A pull request whose head the base has caught up with (its commits merged by another
// route) still updates: a merge commit with the base's tree.
func TestLocalUpdateOfAHeadTheBaseContains(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	repo := e.repo(t, "caught", map[string]string{"a.txt": "a\n"})
	if _, err := c.CreateBranch(e.alice, &githubv1.CreateBranchRequest{Repo: repo, Branch: "topic"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CommitFiles(e.alice, &githubv1.CommitFilesRequest{Repo: repo, Branch: "topic", Message: "t",
		Files: []*typev1.FileChange{modify("a.txt", "a topic\n")}}); err != nil {
		t.Fatal(err)
	}
	pr, err := c.CreatePullRequest(e.alice, &githubv1.CreatePullRequestRequest{Repo: repo, Head: "topic", Title: "t"})
	if err != nil {
		t.Fatal(err)
	}
	// main fast-forwards to topic and moves on.
	bare := e.local.Dir(repo)
	gitCLI(t, bare, "update-ref", "refs/heads/main", pr.GetPullRequest().GetHeadSha())
	if _, err := c.CommitFiles(e.alice, &githubv1.CommitFilesRequest{Repo: repo, Branch: "main", Message: "m",
		Files: []*typev1.FileChange{create("m.txt", "m\n")}}); err != nil {
		t.Fatal(err)
	}
	got, err := c.MergeBaseIntoPullRequest(e.alice, &githubv1.MergeBaseIntoPullRequestRequest{Repo: repo, Number: 1})
	if err != nil || !got.GetUpdated() || got.GetPullRequest().GetStats().GetFilesChanged() != 0 {
		t.Fatalf("update: %v %v", got, err)
	}
	head := got.GetPullRequest().GetHeadSha()
	if tree, main := gitCLI(t, bare, "rev-parse", head+"^{tree}"), gitCLI(t, bare, "rev-parse", "main^{tree}"); tree != main {
		t.Fatalf("the merge's tree %s is not main's %s", tree, main)
	}
	if n := len(strings.Fields(gitCLI(t, bare, "log", "-1", "--format=%P", head))); n != 2 {
		t.Fatalf("the update made a commit with %d parents, want a merge", n)
	}
}
