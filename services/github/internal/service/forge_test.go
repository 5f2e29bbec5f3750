package service_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// The local forge end to end with real git: commits made through the RPCs are what plain
// git clones — content, branch and history — and pull requests open, diff, merge and close.
func TestLocalForgeRoundTripsThroughGit(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client

	created, err := c.CreateRepo(e.alice, &githubv1.CreateRepoRequest{Repo: "demo", Description: "a demo"})
	if err != nil {
		t.Fatal(err)
	}
	if r := created.GetRepo(); r.GetRepo() != "local/demo" || !r.GetEmpty() || r.GetProvider() != githubv1.RepoProvider_REPO_PROVIDER_LOCAL || r.GetDefaultBranch() != "main" {
		t.Fatalf("created %v", r)
	}
	if _, err := c.CreateRepo(e.alice, &githubv1.CreateRepoRequest{Repo: "local/demo"}); err == nil {
		t.Fatal("a second local/demo was created")
	} else {
		wantCode(t, err, codes.AlreadyExists, "")
	}
	tree, err := c.GetTree(e.alice, &githubv1.GetTreeRequest{Repo: "local/demo"})
	if err != nil || !tree.GetEmpty() {
		t.Fatalf("tree of an empty repository: %v %v", tree, err)
	}

	// InitRepo scaffolds a Go module; a second InitRepo changes nothing.
	ini, err := c.InitRepo(e.alice, &githubv1.InitRepoRequest{Repo: "local/demo", Language: "go"})
	if err != nil {
		t.Fatal(err)
	}
	again, err := c.InitRepo(e.alice, &githubv1.InitRepoRequest{Repo: "local/demo", Language: "go"})
	if err != nil || !again.GetAlreadyInitialized() || again.GetCommitSha() != ini.GetCommitSha() {
		t.Fatalf("second InitRepo: %v %v", again, err)
	}

	// A branch, and two commits on it through the RPCs (the second by edits).
	br, err := c.CreateBranch(e.alice, &githubv1.CreateBranchRequest{Repo: "local/demo", Branch: "thefold/task-1"})
	if err != nil || !br.GetCreated() || br.GetCommitSha() != ini.GetCommitSha() {
		t.Fatalf("CreateBranch: %v %v", br, err)
	}
	if br2, err := c.CreateBranch(e.alice, &githubv1.CreateBranchRequest{Repo: "local/demo", Branch: "thefold/task-1"}); err != nil || br2.GetCreated() {
		t.Fatalf("CreateBranch again: %v %v", br2, err)
	}
	c1, err := c.CommitFiles(e.alice, &githubv1.CommitFilesRequest{Repo: "local/demo", Branch: "thefold/task-1",
		Message: "Add the health handler", AuthorName: "Alice", AuthorEmail: "alice@example.com",
		Files: []*typev1.FileChange{
			create("health.go", "package demo\n\n// Health says the service is up.\nfunc Health() string { return \"ok\" }\n"),
			{Path: "scripts/run.sh", Action: typev1.FileAction_FILE_ACTION_CREATE, Content: "#!/bin/sh\necho run\n", Executable: true},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if s := c1.GetStats(); s.GetFilesChanged() != 2 || s.GetAdditions() != 6 || s.GetDeletions() != 0 {
		t.Fatalf("commit stats %v", s)
	}
	c2, err := c.CommitFiles(e.alice, &githubv1.CommitFilesRequest{Repo: "local/demo", Branch: "thefold/task-1",
		Message: "Say healthy", ExpectedParentSha: c1.GetCommitSha(), Files: []*typev1.FileChange{{
			Path: "health.go", Action: typev1.FileAction_FILE_ACTION_MODIFY,
			Edits: []*typev1.Edit{{OldText: `return "ok"`, NewText: `return "healthy"`}},
		}}})
	if err != nil {
		t.Fatal(err)
	}
	if c2.GetParentSha() != c1.GetCommitSha() {
		t.Fatalf("parent %s, want %s", c2.GetParentSha(), c1.GetCommitSha())
	}

	// A commit on the stale base is ABORTED and loses nothing.
	_, err = c.CommitFiles(e.alice, &githubv1.CommitFilesRequest{Repo: "local/demo", Branch: "thefold/task-1",
		Message: "stale", ExpectedParentSha: c1.GetCommitSha(), Files: []*typev1.FileChange{create("stale.txt", "x\n")}})
	wantCode(t, err, codes.Aborted, "expected_parent_sha")

	// Plain git sees exactly that: the branch, its history, the content, the executable bit.
	dir := e.clone(t, "local/demo", "--branch", "thefold/task-1")
	if got := gitCLI(t, dir, "log", "--format=%s|%an", "thefold/task-1"); got != "Say healthy|TheFold\nAdd the health handler|Alice\nInitial commit|TheFold" {
		t.Fatalf("git log:\n%s", got)
	}
	if got := read(t, filepath.Join(dir, "health.go")); !strings.Contains(got, `return "healthy"`) {
		t.Fatalf("health.go:\n%s", got)
	}
	if got := read(t, filepath.Join(dir, "go.mod")); !strings.HasPrefix(got, "module demo\n") {
		t.Fatalf("go.mod:\n%s", got)
	}
	if got := gitCLI(t, dir, "ls-files", "-s", "scripts/run.sh"); !strings.HasPrefix(got, "100755 ") {
		t.Fatalf("run.sh mode: %s", got)
	}
	if got := gitCLI(t, dir, "rev-parse", "HEAD"); got != c2.GetCommitSha() {
		t.Fatalf("HEAD %s, want %s", got, c2.GetCommitSha())
	}
	gitCLI(t, dir, "fsck", "--strict")

	// Tree and files read back; the tree is paged with a token that pins the commit.
	page, err := c.GetTree(e.alice, &githubv1.GetTreeRequest{Repo: "local/demo", Ref: "thefold/task-1", PageSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for {
		for _, en := range page.GetEntries() {
			paths = append(paths, en.GetPath())
		}
		if page.GetNextPageToken() == "" {
			break
		}
		if page, err = c.GetTree(e.alice, &githubv1.GetTreeRequest{Repo: "local/demo", PageSize: 2, PageToken: page.GetNextPageToken()}); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(paths, ","); got != ".gitignore,README.md,go.mod,health.go,scripts,scripts/run.sh" {
		t.Fatalf("tree %s", got)
	}
	files, err := c.GetFiles(e.alice, &githubv1.GetFilesRequest{Repo: "local/demo", Ref: "thefold/task-1", Paths: []string{"health.go", "nope.go"}})
	if err != nil || len(files.GetFiles()) != 1 || files.GetMissingPaths()[0] != "nope.go" || files.GetCommitSha() != c2.GetCommitSha() {
		t.Fatalf("GetFiles: %v %v", files, err)
	}

	// The archive holds the same files, relative to the root.
	stream, err := c.GetArchive(e.alice, &githubv1.GetArchiveRequest{Repo: "local/demo", Ref: c1.GetCommitSha()})
	if err != nil {
		t.Fatal(err)
	}
	var tarball bytes.Buffer
	first, err := stream.Recv()
	if err != nil || first.GetMetadata().GetCommitSha() != c1.GetCommitSha() {
		t.Fatalf("archive metadata %v %v", first, err)
	}
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		tarball.Write(m.GetChunk())
	}
	tr := tar.NewReader(&tarball)
	got := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(tr)
		got[h.Name] = string(b)
	}
	if !strings.Contains(got["health.go"], `return "ok"`) || got["scripts/run.sh"] == "" {
		t.Fatalf("archive of c1: %v", got)
	}

	// A pull request: opened once (a second open returns it), its diff, merged.
	pr, err := c.CreatePullRequest(e.alice, &githubv1.CreatePullRequestRequest{Repo: "local/demo", Head: "thefold/task-1",
		Title: "Health handler", Body: "Adds /health.", Labels: []string{"thefold"}})
	if err != nil {
		t.Fatal(err)
	}
	p := pr.GetPullRequest()
	if !pr.GetCreated() || p.GetNumber() != 1 || p.GetBase() != "main" || p.GetState() != githubv1.PullRequestState_PULL_REQUEST_STATE_OPEN ||
		!p.GetMergeable() || p.GetStats().GetFilesChanged() != 2 || p.GetUrl() != "http://gateway.test/v1/repos/local/demo/pulls/1" {
		t.Fatalf("pull request %v", p)
	}
	dup, err := c.CreatePullRequest(e.alice, &githubv1.CreatePullRequestRequest{Repo: "local/demo", Head: "thefold/task-1", Title: "again"})
	if err != nil || dup.GetCreated() || dup.GetPullRequest().GetNumber() != 1 {
		t.Fatalf("second open: %v %v", dup, err)
	}
	diff, err := c.GetPullRequestDiff(e.alice, &githubv1.GetPullRequestDiffRequest{Repo: "local/demo", Number: 1})
	if err != nil {
		t.Fatal(err)
	}
	if s := diff.GetStats(); s.GetFilesChanged() != 2 || s.GetAdditions() != 6 || len(diff.GetFiles()) != 2 {
		t.Fatalf("diff stats %v files %d", s, len(diff.GetFiles()))
	}
	if d := diff.GetFiles()[0]; d.GetPath() != "health.go" || d.GetAction() != typev1.FileAction_FILE_ACTION_CREATE ||
		!strings.Contains(d.GetUnifiedDiff(), "+func Health() string { return \"healthy\" }") || !strings.Contains(d.GetUnifiedDiff(), "+++ b/health.go") {
		t.Fatalf("health.go diff %v", d)
	}
	merged, err := c.MergePullRequest(e.alice, &githubv1.MergePullRequestRequest{Repo: "local/demo", Number: 1,
		ExpectedHeadSha: c2.GetCommitSha(), DeleteBranch: true})
	if err != nil {
		t.Fatal(err)
	}
	if merged.GetPullRequest().GetState() != githubv1.PullRequestState_PULL_REQUEST_STATE_MERGED || merged.GetMergeCommitSha() == "" {
		t.Fatalf("merged %v", merged)
	}
	if again, err := c.MergePullRequest(e.alice, &githubv1.MergePullRequestRequest{Repo: "local/demo", Number: 1}); err != nil || again.GetMergeCommitSha() != merged.GetMergeCommitSha() {
		t.Fatalf("merging again: %v %v", again, err)
	}
	_, err = c.ClosePullRequest(e.alice, &githubv1.ClosePullRequestRequest{Repo: "local/demo", Number: 1})
	wantCode(t, err, codes.FailedPrecondition, "merged")

	// A fresh clone of main has the squashed merge on top, with the files.
	main := e.clone(t, "local/demo")
	if got := gitCLI(t, main, "log", "--format=%s", "-1"); got != "Health handler (#1)" {
		t.Fatalf("merge commit %q", got)
	}
	if got := gitCLI(t, main, "rev-parse", "HEAD"); got != merged.GetMergeCommitSha() {
		t.Fatalf("main at %s, want %s", got, merged.GetMergeCommitSha())
	}
	if got := read(t, filepath.Join(main, "health.go")); !strings.Contains(got, "healthy") {
		t.Fatalf("merged health.go:\n%s", got)
	}
	if out := gitCLI(t, main, "branch", "-r"); strings.Contains(out, "task-1") {
		t.Fatalf("the head branch was not deleted: %s", out)
	}

	// A second pull request is closed without merging; closing again is harmless.
	if _, err := c.CreateBranch(e.alice, &githubv1.CreateBranchRequest{Repo: "local/demo", Branch: "wip"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CommitFiles(e.alice, &githubv1.CommitFilesRequest{Repo: "local/demo", Branch: "wip", Message: "wip",
		Files: []*typev1.FileChange{{Path: "README.md", Action: typev1.FileAction_FILE_ACTION_DELETE}}}); err != nil {
		t.Fatal(err)
	}
	pr2, err := c.CreatePullRequest(e.alice, &githubv1.CreatePullRequestRequest{Repo: "local/demo", Head: "wip", Title: "WIP"})
	if err != nil || pr2.GetPullRequest().GetNumber() != 2 {
		t.Fatalf("second pull request: %v %v", pr2, err)
	}
	for range 2 {
		closed, err := c.ClosePullRequest(e.alice, &githubv1.ClosePullRequestRequest{Repo: "local/demo", Number: 2})
		if err != nil || closed.GetPullRequest().GetState() != githubv1.PullRequestState_PULL_REQUEST_STATE_CLOSED {
			t.Fatalf("close: %v %v", closed, err)
		}
	}
	_, err = c.MergePullRequest(e.alice, &githubv1.MergePullRequestRequest{Repo: "local/demo", Number: 2})
	wantCode(t, err, codes.FailedPrecondition, "closed")
	list, err := c.ListPullRequests(e.alice, &githubv1.ListPullRequestsRequest{Repo: "local/demo", PageSize: 1})
	if err != nil || len(list.GetPullRequests()) != 1 || list.GetPullRequests()[0].GetNumber() != 2 || list.GetNextPageToken() == "" {
		t.Fatalf("list page 1: %v %v", list, err)
	}
	list, err = c.ListPullRequests(e.alice, &githubv1.ListPullRequestsRequest{Repo: "local/demo", PageSize: 1, PageToken: list.GetNextPageToken()})
	if err != nil || len(list.GetPullRequests()) != 1 || list.GetPullRequests()[0].GetNumber() != 1 || list.GetNextPageToken() != "" {
		t.Fatalf("list page 2: %v %v", list, err)
	}
}

// A pull request whose base moved merges when the two sides changed different files, and
// is refused (not mergeable, FAILED_PRECONDITION naming the file) when both changed one.
func TestMergeAfterTheBaseMoved(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	repo := e.repo(t, "moving", map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	branch := func(name, path, content string) {
		t.Helper()
		if _, err := c.CreateBranch(e.alice, &githubv1.CreateBranchRequest{Repo: repo, Branch: name}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CommitFiles(e.alice, &githubv1.CommitFilesRequest{Repo: repo, Branch: name, Message: name,
			Files: []*typev1.FileChange{modify(path, content)}}); err != nil {
			t.Fatal(err)
		}
	}
	branch("one", "a.txt", "a1\n")
	branch("two", "b.txt", "b2\n")
	branch("three", "a.txt", "a3\n")
	open := func(head string) int32 {
		pr, err := c.CreatePullRequest(e.alice, &githubv1.CreatePullRequestRequest{Repo: repo, Head: head, Title: head})
		if err != nil {
			t.Fatal(err)
		}
		return pr.GetPullRequest().GetNumber()
	}
	one, two, three := open("one"), open("two"), open("three")
	if _, err := c.MergePullRequest(e.alice, &githubv1.MergePullRequestRequest{Repo: repo, Number: one, Method: githubv1.MergeMethod_MERGE_METHOD_MERGE}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.MergePullRequest(e.alice, &githubv1.MergePullRequestRequest{Repo: repo, Number: two, Method: githubv1.MergeMethod_MERGE_METHOD_REBASE}); err != nil {
		t.Fatalf("two changed another file: %v", err)
	}
	got, err := c.GetPullRequest(e.alice, &githubv1.GetPullRequestRequest{Repo: repo, Number: three})
	if err != nil || got.GetPullRequest().Mergeable == nil || got.GetPullRequest().GetMergeable() {
		t.Fatalf("three should not be mergeable: %v %v", got, err)
	}
	_, err = c.MergePullRequest(e.alice, &githubv1.MergePullRequestRequest{Repo: repo, Number: three})
	wantCode(t, err, codes.FailedPrecondition, "a.txt")

	dir := e.clone(t, repo)
	if read(t, filepath.Join(dir, "a.txt")) != "a1\n" || read(t, filepath.Join(dir, "b.txt")) != "b2\n" {
		t.Fatalf("main: a=%q b=%q", read(t, filepath.Join(dir, "a.txt")), read(t, filepath.Join(dir, "b.txt")))
	}
	if parents := gitCLI(t, dir, "log", "--format=%p", "--merges"); parents == "" {
		t.Fatal("the MERGE method made no merge commit")
	}
	gitCLI(t, dir, "fsck", "--strict")
}

// Concurrent commits on one branch, each with the head it read as expected_parent_sha:
// exactly one wins, the others are ABORTED, and the branch has exactly the winner's commit.
func TestConcurrentCommitsLoseNothing(t *testing.T) {
	t.Parallel()
	e := start(t)
	repo := e.repo(t, "race", map[string]string{"n.txt": "0\n"})
	tree, err := e.client.GetTree(e.alice, &githubv1.GetTreeRequest{Repo: repo})
	if err != nil {
		t.Fatal(err)
	}
	head := tree.GetCommitSha()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		wins     []string
		conflict int
	)
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := e.client.CommitFiles(e.alice, &githubv1.CommitFilesRequest{Repo: repo, Branch: "main", Message: "bump",
				ExpectedParentSha: head, Files: []*typev1.FileChange{modify("n.txt", strings.Repeat("x", i+1)+"\n")}})
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins = append(wins, resp.GetCommitSha())
			case codes.Aborted == statusCode(err):
				conflict++
			default:
				t.Errorf("commit %d: %v", i, err)
			}
		}()
	}
	wg.Wait()
	if len(wins) != 1 || conflict != 7 {
		t.Fatalf("%d commits won, %d aborted; want 1 and 7", len(wins), conflict)
	}
	dir := e.clone(t, repo)
	if got := gitCLI(t, dir, "rev-list", "--count", "HEAD"); got != "2" {
		t.Fatalf("%s commits on main, want 2", got)
	}
}

// request_id makes commits, pull requests, issues and comments idempotent; the same key for
// another request is refused.
func TestRequestIDReplays(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	repo := e.repo(t, "idem", map[string]string{"a.txt": "a\n"})
	req := &githubv1.CommitFilesRequest{Repo: repo, Branch: "main", Message: "once", RequestId: "r-1",
		Files: []*typev1.FileChange{modify("a.txt", "b\n")}}
	first, err := c.CommitFiles(e.alice, req)
	if err != nil || first.GetReplayed() {
		t.Fatalf("first: %v %v", first, err)
	}
	second, err := c.CommitFiles(e.alice, req)
	if err != nil || !second.GetReplayed() || second.GetCommitSha() != first.GetCommitSha() {
		t.Fatalf("retry: %v %v", second, err)
	}
	req.Message = "other"
	_, err = c.CommitFiles(e.alice, req)
	wantCode(t, err, codes.InvalidArgument, "request_id")

	is := &githubv1.CreateIssueRequest{Repo: repo, Title: "Bug", RequestId: "i-1"}
	i1, err := c.CreateIssue(e.alice, is)
	if err != nil {
		t.Fatal(err)
	}
	i2, err := c.CreateIssue(e.alice, is)
	if err != nil || i2.GetIssue().GetNumber() != i1.GetIssue().GetNumber() {
		t.Fatalf("issue retry: %v %v", i2, err)
	}
	cm := &githubv1.CommentOnIssueRequest{Repo: repo, Number: i1.GetIssue().GetNumber(), Body: "seen", RequestId: "c-1"}
	c1, err := c.CommentOnIssue(e.alice, cm)
	if err != nil {
		t.Fatal(err)
	}
	c2, err := c.CommentOnIssue(e.alice, cm)
	if err != nil || c2.GetComment().GetId() != c1.GetComment().GetId() {
		t.Fatalf("comment retry: %v %v", c2, err)
	}
	got, err := c.GetIssue(e.alice, &githubv1.GetIssueRequest{Repo: repo, Number: i1.GetIssue().GetNumber()})
	if err != nil || got.GetIssue().GetCommentCount() != 1 {
		t.Fatalf("issue after two comment calls: %v %v", got, err)
	}
	// Bob's key space is his own (once he may write to alice's repository).
	if _, err := c.SetCollaborator(e.alice, &githubv1.SetCollaboratorRequest{Repo: repo, UserId: "bob", Role: githubv1.RepoRole_REPO_ROLE_WRITE}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateIssue(e.bob, is); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListIssues(e.alice, &githubv1.ListIssuesRequest{Repo: repo})
	if err != nil || len(list.GetIssues()) != 2 {
		t.Fatalf("issues: %v %v", list, err)
	}
}

// Issues carry labels and blocked-by links (from the field and from "Blocked by #n" lines),
// and UpdateIssue closes, relabels and relinks them.
func TestIssuesWithBlockedBy(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	repo := e.repo(t, "issues", nil)
	mk := func(title, body string, blocked ...int32) *githubv1.Issue {
		t.Helper()
		resp, err := c.CreateIssue(e.alice, &githubv1.CreateIssueRequest{Repo: repo, Title: title, Body: body, Labels: []string{"bug"}, BlockedBy: blocked})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetIssue()
	}
	a := mk("A", "")
	b := mk("B", "needs A\n\nBlocked by #1")
	cc := mk("C", "", a.GetNumber(), b.GetNumber())
	if got := b.GetBlockedBy(); len(got) != 1 || got[0] != 1 {
		t.Fatalf("B blocked by %v", got)
	}
	if got := cc.GetBlockedBy(); len(got) != 2 || !strings.Contains(cc.GetBody(), "Blocked by #1, #2") {
		t.Fatalf("C blocked by %v, body %q", got, cc.GetBody())
	}
	_, err := c.CreateIssue(e.alice, &githubv1.CreateIssueRequest{Repo: repo, Title: "D", BlockedBy: []int32{99}})
	wantCode(t, err, codes.InvalidArgument, "blocked_by")

	up, err := c.UpdateIssue(e.alice, &githubv1.UpdateIssueRequest{Repo: repo, Number: cc.GetNumber(),
		Issue:      &githubv1.Issue{State: githubv1.IssueState_ISSUE_STATE_CLOSED, Labels: []string{"done"}, BlockedBy: []int32{2}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"state", "labels", "blocked_by"}}})
	if err != nil {
		t.Fatal(err)
	}
	i := up.GetIssue()
	if i.GetState() != githubv1.IssueState_ISSUE_STATE_CLOSED || i.GetCloseTime() == nil || len(i.GetLabels()) != 1 ||
		len(i.GetBlockedBy()) != 1 || i.GetBlockedBy()[0] != 2 || strings.Contains(i.GetBody(), "#1") {
		t.Fatalf("updated %v", i)
	}
	open, err := c.ListIssues(e.alice, &githubv1.ListIssuesRequest{Repo: repo, State: githubv1.IssueState_ISSUE_STATE_OPEN, Labels: []string{"bug"}})
	if err != nil || len(open.GetIssues()) != 2 || open.GetIssues()[0].GetNumber() != 2 {
		t.Fatalf("open bugs: %v %v", open, err)
	}
	_, err = c.UpdateIssue(e.alice, &githubv1.UpdateIssueRequest{Repo: repo, Number: 1, Issue: &githubv1.Issue{},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"author"}}})
	wantCode(t, err, codes.InvalidArgument, "update_mask")
}

// A private repository is NOT_FOUND to another user (never PERMISSION_DENIED), and visible
// to an admin.
func TestPrivateRepositories(t *testing.T) {
	t.Parallel()
	e := start(t)
	if _, err := e.client.CreateRepo(e.alice, &githubv1.CreateRepoRequest{Repo: "local/secret", Private: true, AutoInit: true}); err != nil {
		t.Fatal(err)
	}
	_, err := e.client.GetTree(e.bob, &githubv1.GetTreeRequest{Repo: "local/secret"})
	wantCode(t, err, codes.NotFound, "")
	if _, err := e.client.GetRepo(e.admin, &githubv1.GetRepoRequest{Repo: "local/secret"}); err != nil {
		t.Fatalf("admin: %v", err)
	}
	list, err := e.client.ListRepos(e.bob, &githubv1.ListReposRequest{})
	if err != nil || len(list.GetRepos()) != 0 {
		t.Fatalf("bob lists %v %v", list, err)
	}
	list, err = e.client.ListRepos(e.alice, &githubv1.ListReposRequest{})
	if err != nil || len(list.GetRepos()) != 1 || list.GetRepos()[0].GetEmpty() {
		t.Fatalf("alice lists %v %v", list, err)
	}
}

// The local forge runs no checks: a pull request's checks are CHECK_STATE_NONE on its
// current head, readable by whoever may read the repository and no one else.
func TestLocalPullRequestChecks(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	repo := e.repo(t, "checks", map[string]string{"a.txt": "a\n"})
	if _, err := c.CreateBranch(e.alice, &githubv1.CreateBranchRequest{Repo: repo, Branch: "work"}); err != nil {
		t.Fatal(err)
	}
	commit := func(content string) string {
		t.Helper()
		res, err := c.CommitFiles(e.alice, &githubv1.CommitFilesRequest{Repo: repo, Branch: "work", Message: "m",
			Files: []*typev1.FileChange{modify("a.txt", content)}})
		if err != nil {
			t.Fatal(err)
		}
		return res.GetCommitSha()
	}
	first := commit("a1\n")
	pr, err := c.CreatePullRequest(e.alice, &githubv1.CreatePullRequestRequest{Repo: repo, Head: "work", Title: "work"})
	if err != nil {
		t.Fatal(err)
	}
	n := pr.GetPullRequest().GetNumber()
	got, err := c.GetPullRequestChecks(e.alice, &githubv1.GetPullRequestChecksRequest{Repo: repo, Number: n})
	if err != nil || got.GetHeadSha() != first || got.GetState() != githubv1.CheckState_CHECK_STATE_NONE || len(got.GetChecks()) != 0 {
		t.Fatalf("checks = %v %v, want NONE on %s", got, err, first)
	}
	// After a push the checks are those of the new head.
	second := commit("a2\n")
	got, err = c.GetPullRequestChecks(e.alice, &githubv1.GetPullRequestChecksRequest{Repo: repo, Number: n})
	if err != nil || got.GetHeadSha() != second || got.GetState() != githubv1.CheckState_CHECK_STATE_NONE {
		t.Fatalf("checks after a push = %v %v, want NONE on %s", got, err, second)
	}

	// A private repository's pull request is NOT_FOUND to someone without a role on it.
	if _, err := c.CreateRepo(e.alice, &githubv1.CreateRepoRequest{Repo: "local/hidden", Private: true, AutoInit: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateBranch(e.alice, &githubv1.CreateBranchRequest{Repo: "local/hidden", Branch: "work"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CommitFiles(e.alice, &githubv1.CommitFilesRequest{Repo: "local/hidden", Branch: "work", Message: "m",
		Files: []*typev1.FileChange{create("b.txt", "b\n")}}); err != nil {
		t.Fatal(err)
	}
	hidden, err := c.CreatePullRequest(e.alice, &githubv1.CreatePullRequestRequest{Repo: "local/hidden", Head: "work", Title: "work"})
	if err != nil {
		t.Fatal(err)
	}
	req := &githubv1.GetPullRequestChecksRequest{Repo: "local/hidden", Number: hidden.GetPullRequest().GetNumber()}
	if got, err := c.GetPullRequestChecks(e.alice, req); err != nil || got.GetState() != githubv1.CheckState_CHECK_STATE_NONE {
		t.Fatalf("alice's own private pull request: %v %v", got, err)
	}
	_, err = c.GetPullRequestChecks(e.bob, req)
	wantCode(t, err, codes.NotFound, "")
}

// A repository whose name is registered but whose directory is not made yet (CreateRepo
// between its two steps, as another caller's ListRepos can see it) is left out of the list
// instead of failing it.
func TestListReposSkipsARepositoryBeingCreated(t *testing.T) {
	t.Parallel()
	e := start(t)
	e.repo(t, "ready", map[string]string{"a.txt": "a\n"})
	half := e.repo(t, "half", map[string]string{"a.txt": "a\n"})
	if err := os.RemoveAll(e.local.Dir(half)); err != nil {
		t.Fatal(err)
	}
	resp, err := e.client.ListRepos(e.alice, &githubv1.ListReposRequest{PageSize: 100})
	if err != nil {
		t.Fatalf("ListRepos with a repository half made: %v", err)
	}
	for _, r := range resp.GetRepos() {
		if r.GetRepo() == half {
			t.Fatalf("the half-made %s is listed", half)
		}
	}
	if len(resp.GetRepos()) != 1 {
		t.Fatalf("repos %v, want the ready one", resp.GetRepos())
	}
}
