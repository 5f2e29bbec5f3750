package service_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"maps"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// CreateMergeGroup on the local forge: a commit of the base's head with the pull requests
// merged in, in the order asked, each a merge commit (group so far, head) chained down to
// the base; no branch moves and no pull request changes; it stops at the first that
// conflicts, naming it and the file; pull requests not open or into another base are
// refused by their index; the commit is a ref every read takes (GetTree, GetFiles,
// GetArchive as CreateSandbox uses it); and merging the members one after the other
// afterwards leaves the base with the group's tree.
func TestLocalCreateMergeGroup(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	repo := e.repo(t, "group", map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n", "d.txt": "d\n"})
	bare := e.local.Dir(repo)
	commit := func(branch string, files ...*typev1.FileChange) string {
		t.Helper()
		res, err := c.CommitFiles(e.alice, &githubv1.CommitFilesRequest{Repo: repo, Branch: branch, Message: "on " + branch, Files: files})
		if err != nil {
			t.Fatal(err)
		}
		return res.GetCommitSha()
	}
	openInto := func(base, head string, files ...*typev1.FileChange) int32 {
		t.Helper()
		if _, err := c.CreateBranch(e.alice, &githubv1.CreateBranchRequest{Repo: repo, Branch: head, FromRef: base}); err != nil {
			t.Fatal(err)
		}
		commit(head, files...)
		pr, err := c.CreatePullRequest(e.alice, &githubv1.CreatePullRequestRequest{Repo: repo, Head: head, Base: base, Title: head})
		if err != nil {
			t.Fatal(err)
		}
		return pr.GetPullRequest().GetNumber()
	}
	open := func(head string, files ...*typev1.FileChange) int32 {
		t.Helper()
		return openInto("main", head, files...)
	}
	group := func(base string, numbers ...int32) (*githubv1.CreateMergeGroupResponse, error) {
		return c.CreateMergeGroup(e.alice, &githubv1.CreateMergeGroupRequest{Repo: repo, Base: base, Numbers: numbers})
	}
	get := func(n int32) *githubv1.PullRequest {
		t.Helper()
		res, err := c.GetPullRequest(e.alice, &githubv1.GetPullRequestRequest{Repo: repo, Number: n})
		if err != nil {
			t.Fatal(err)
		}
		return res.GetPullRequest()
	}
	// files is a commit's tree as plain git reads it: path → content (every file here is
	// one line, whose newline gitCLI trims).
	files := func(rev string) map[string]string {
		t.Helper()
		out := map[string]string{}
		for _, p := range strings.Fields(gitCLI(t, bare, "ls-tree", "-r", "--name-only", rev)) {
			out[p] = gitCLI(t, bare, "show", rev+":"+p) + "\n"
		}
		return out
	}
	wantFiles := func(what, rev string, want map[string]string) {
		t.Helper()
		got := files(rev)
		paths := slices.Sorted(maps.Keys(got))
		for p := range want {
			if _, ok := got[p]; !ok {
				paths = append(paths, p)
			}
		}
		for _, p := range paths {
			if got[p] != want[p] {
				t.Errorf("%s: %s = %q, want %q", what, p, got[p], want[p])
			}
		}
	}
	parents := func(sha string) []string {
		t.Helper()
		return strings.Fields(gitCLI(t, bare, "log", "-1", "--format=%P", sha))
	}
	// wantChain checks that sha is members merged one by one onto base: each commit's
	// parents are (the group before it, the member's head).
	wantChain := func(sha, base string, members []*githubv1.MergeGroupMember) {
		t.Helper()
		cur := sha
		for i := len(members) - 1; i >= 0; i-- {
			p := parents(cur)
			if len(p) != 2 || p[1] != members[i].GetHeadSha() {
				t.Fatalf("group commit %s for member %d has parents %v, want (group so far, %s)", cur, members[i].GetNumber(), p, members[i].GetHeadSha())
			}
			cur = p[0]
		}
		if cur != base {
			t.Fatalf("the group's chain ends at %s, not at base_sha %s", cur, base)
		}
	}
	wantMembers := func(got *githubv1.CreateMergeGroupResponse, numbers ...int32) {
		t.Helper()
		if len(got.GetMembers()) != len(numbers) {
			t.Fatalf("members %v, want %v", got.GetMembers(), numbers)
		}
		for i, n := range numbers {
			m := got.GetMembers()[i]
			if m.GetNumber() != n || m.GetHeadSha() != get(n).GetHeadSha() {
				t.Fatalf("member %d = %v, want #%d at its head %s", i, m, n, get(n).GetHeadSha())
			}
		}
	}
	objects := func() string { return gitCLI(t, bare, "count-objects") }

	one := open("one", modify("a.txt", "a one\n"))
	two := open("two", create("new.txt", "new\n"), &typev1.FileChange{Path: "d.txt", Action: typev1.FileAction_FILE_ACTION_DELETE})
	three := open("three", modify("c.txt", "c three\n"))
	clash := open("clash", modify("a.txt", "a clash\n")) // conflicts with one
	stale := open("stale", modify("b.txt", "b stale\n")) // conflicts with the base's next commit
	if _, err := c.CreateBranch(e.alice, &githubv1.CreateBranchRequest{Repo: repo, Branch: "release"}); err != nil {
		t.Fatal(err)
	}
	elsewhere := openInto("release", "hotfix", modify("c.txt", "c hotfix\n"))
	closed := open("dropped", create("dropped.txt", "x\n"))
	if _, err := c.ClosePullRequest(e.alice, &githubv1.ClosePullRequestRequest{Repo: repo, Number: closed}); err != nil {
		t.Fatal(err)
	}
	// The base moves on after every branch was cut: the group must carry its change too.
	base := commit("main", modify("b.txt", "b main\n"), create("base.txt", "base\n"))

	all := []int32{one, two, three, clash, stale, elsewhere, closed}
	prsBefore := map[int32]*githubv1.PullRequest{}
	for _, n := range all {
		prsBefore[n] = get(n)
	}
	refs := gitCLI(t, bare, "show-ref")
	untouched := func(what string) {
		t.Helper()
		if got := gitCLI(t, bare, "show-ref"); got != refs {
			t.Fatalf("%s moved a ref:\nbefore\n%s\nafter\n%s", what, refs, got)
		}
		for _, n := range all {
			if got := get(n); !proto.Equal(got, prsBefore[n]) {
				t.Fatalf("%s changed pull request #%d:\nbefore %v\nafter  %v", what, n, prsBefore[n], got)
			}
		}
	}

	// All three, in an order other than their numbers': each merged in, in that order.
	full, err := group("main", three, one, two)
	if err != nil {
		t.Fatal(err)
	}
	untouched("a group")
	if full.GetBaseSha() != base || full.GetConflictNumber() != 0 || full.GetConflict() != "" || full.GetSha() == base {
		t.Fatalf("group = %v, want every member merged onto %s", full, base)
	}
	wantMembers(full, three, one, two)
	wantChain(full.GetSha(), base, full.GetMembers())
	merged := map[string]string{"a.txt": "a one\n", "b.txt": "b main\n", "c.txt": "c three\n", "base.txt": "base\n", "new.txt": "new\n"}
	wantFiles("the group", full.GetSha(), merged)
	if typ := gitCLI(t, bare, "cat-file", "-t", full.GetSha()); typ != "commit" {
		t.Fatalf("the group's sha names a %s", typ)
	}

	// A retry writes the same tree again and still moves nothing.
	again, err := group("main", three, one, two)
	if err != nil || again.GetBaseSha() != base || len(again.GetMembers()) != 3 ||
		gitCLI(t, bare, "rev-parse", again.GetSha()+"^{tree}") != gitCLI(t, bare, "rev-parse", full.GetSha()+"^{tree}") {
		t.Fatalf("the group again = %v %v", again, err)
	}
	untouched("a second group")

	// The group's sha is a ref for every read, as a sandbox or a build takes it.
	tree, err := c.GetTree(e.alice, &githubv1.GetTreeRequest{Repo: repo, Ref: full.GetSha()})
	if err != nil || tree.GetCommitSha() != full.GetSha() {
		t.Fatalf("GetTree at the group: %v %v", tree, err)
	}
	var paths []string
	for _, en := range tree.GetEntries() {
		paths = append(paths, en.GetPath())
	}
	if got := strings.Join(paths, ","); got != "a.txt,b.txt,base.txt,c.txt,new.txt" {
		t.Fatalf("GetTree at the group lists %s", got)
	}
	got, err := c.GetFiles(e.alice, &githubv1.GetFilesRequest{Repo: repo, Ref: full.GetSha(), Paths: []string{"a.txt", "b.txt", "c.txt", "d.txt"}})
	if err != nil || got.GetCommitSha() != full.GetSha() || len(got.GetFiles()) != 3 ||
		got.GetFiles()[0].GetContent() != "a one\n" || got.GetFiles()[1].GetContent() != "b main\n" || got.GetFiles()[2].GetContent() != "c three\n" ||
		!slices.Equal(got.GetMissingPaths(), []string{"d.txt"}) {
		t.Fatalf("GetFiles at the group: %v %v", got, err)
	}
	if arch := archiveFiles(t, e, repo, full.GetSha()); len(arch) != len(merged) || arch["a.txt"] != "a one\n" || arch["new.txt"] != "new\n" || arch["c.txt"] != "c three\n" {
		t.Fatalf("GetArchive at the group: %v", arch)
	}

	// The clashing pull request stops the group: the ones before it are members, it is
	// conflict_number with the file named, and the one after it is not tried.
	part, err := group("main", one, two, clash, three)
	if err != nil {
		t.Fatal(err)
	}
	untouched("a group with a conflict")
	if part.GetConflictNumber() != clash || !strings.Contains(part.GetConflict(), "a.txt") || part.GetBaseSha() != base {
		t.Fatalf("group with a conflict = %v, want #%d conflicting on a.txt", part, clash)
	}
	if strings.Contains(part.GetConflict(), "failed precondition") {
		t.Errorf("conflict %q carries the error sentinel's text", part.GetConflict())
	}
	wantMembers(part, one, two)
	wantChain(part.GetSha(), base, part.GetMembers())
	wantFiles("the group up to the conflict", part.GetSha(),
		map[string]string{"a.txt": "a one\n", "b.txt": "b main\n", "c.txt": "c\n", "base.txt": "base\n", "new.txt": "new\n"})

	// The first conflicts with the base itself: no members, and the group is the base.
	none, err := group("main", stale, one)
	if err != nil {
		t.Fatal(err)
	}
	if len(none.GetMembers()) != 0 || none.GetSha() != base || none.GetBaseSha() != base ||
		none.GetConflictNumber() != stale || !strings.Contains(none.GetConflict(), "b.txt") {
		t.Fatalf("group whose first conflicts = %v, want none merged and the base's head", none)
	}
	untouched("a group of none")

	// Refused, before anything is written: a pull request not open, one into another base,
	// a base that does not exist, a caller who may not write.
	before := objects()
	_, err = group("main", one, closed)
	wantCode(t, err, codes.FailedPrecondition, "numbers[1]")
	wantCode(t, err, codes.FailedPrecondition, "closed")
	_, err = group("main", elsewhere, one)
	wantCode(t, err, codes.FailedPrecondition, "numbers[0]")
	wantCode(t, err, codes.FailedPrecondition, `"release"`)
	_, err = group("nope", one)
	wantCode(t, err, codes.NotFound, "nope")
	_, err = c.CreateMergeGroup(e.bob, &githubv1.CreateMergeGroupRequest{Repo: repo, Base: "main", Numbers: []int32{one}})
	wantCode(t, err, codes.PermissionDenied, "")
	if objects() != before {
		t.Fatal("a refused group wrote to the repository")
	}
	untouched("refused groups")

	// Into another base: the group starts from that base.
	rel, err := group("release", elsewhere)
	if err != nil || rel.GetBaseSha() != gitCLI(t, bare, "rev-parse", "refs/heads/release") || len(rel.GetMembers()) != 1 {
		t.Fatalf("group into release = %v %v", rel, err)
	}
	wantFiles("the group into release", rel.GetSha(), map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c hotfix\n", "d.txt": "d\n"})

	// The doc's promise: merging the members one after the other (squash, the default)
	// leaves main with the group's tree.
	for _, n := range []int32{three, one, two} {
		if _, err := c.MergePullRequest(e.alice, &githubv1.MergePullRequestRequest{Repo: repo, Number: n}); err != nil {
			t.Fatalf("merge #%d after its group: %v", n, err)
		}
	}
	if main, g := gitCLI(t, bare, "rev-parse", "refs/heads/main^{tree}"), gitCLI(t, bare, "rev-parse", full.GetSha()+"^{tree}"); main != g {
		t.Fatalf("main's tree after merging the members is %s, the group's %s", main, g)
	}
	// The group's commit is still readable after main moved past it.
	if _, err := c.GetTree(e.alice, &githubv1.GetTreeRequest{Repo: repo, Ref: full.GetSha()}); err != nil {
		t.Fatal(err)
	}
	// A merged member is no longer open.
	_, err = group("main", one)
	wantCode(t, err, codes.FailedPrecondition, "numbers[0]")
	wantCode(t, err, codes.FailedPrecondition, "merged")
}

// archiveFiles reads the tar GetArchive streams at ref (what CreateSandbox unpacks): path →
// content, after checking the metadata names ref's commit.
func archiveFiles(t *testing.T, e *env, repo, ref string) map[string]string {
	t.Helper()
	stream, err := e.client.GetArchive(e.alice, &githubv1.GetArchiveRequest{Repo: repo, Ref: ref})
	if err != nil {
		t.Fatal(err)
	}
	first, err := stream.Recv()
	if err != nil || first.GetMetadata().GetCommitSha() != ref {
		t.Fatalf("archive metadata %v %v, want commit %s", first, err, ref)
	}
	var tarball bytes.Buffer
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
	out := map[string]string{}
	tr := tar.NewReader(&tarball)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			out[h.Name] = string(b)
		}
	}
}

// Stacked pull requests (one's branch cut from another's) group as the squash merges that
// follow will land them: each member is merged onto the group from where its branch left
// the base, not from the earlier member's head. So a stack over different files groups
// whole and lands with the group's tree, and a stack that changes one file twice stops at
// the upper pull request, as its squash merge after the lower one's is refused.
func TestLocalCreateMergeGroupOfStackedPullRequests(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	repo := e.repo(t, "stacked", map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"})
	bare := e.local.Dir(repo)
	open := func(from, head string, f *typev1.FileChange) int32 {
		t.Helper()
		if _, err := c.CreateBranch(e.alice, &githubv1.CreateBranchRequest{Repo: repo, Branch: head, FromRef: from}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.CommitFiles(e.alice, &githubv1.CommitFilesRequest{Repo: repo, Branch: head, Message: head, Files: []*typev1.FileChange{f}}); err != nil {
			t.Fatal(err)
		}
		pr, err := c.CreatePullRequest(e.alice, &githubv1.CreatePullRequestRequest{Repo: repo, Head: head, Title: head})
		if err != nil {
			t.Fatal(err)
		}
		return pr.GetPullRequest().GetNumber()
	}
	group := func(numbers ...int32) *githubv1.CreateMergeGroupResponse {
		t.Helper()
		res, err := c.CreateMergeGroup(e.alice, &githubv1.CreateMergeGroupRequest{Repo: repo, Base: "main", Numbers: numbers})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	squash := func(n int32) error {
		_, err := c.MergePullRequest(e.alice, &githubv1.MergePullRequestRequest{Repo: repo, Number: n})
		return err
	}
	treeOf := func(rev string) string { t.Helper(); return gitCLI(t, bare, "rev-parse", rev+"^{tree}") }

	mid := open("main", "mid", modify("b.txt", "b mid\n"))
	top := open("mid", "top", modify("c.txt", "c top\n"))
	lower := open("main", "lower", modify("a.txt", "a lower\n"))
	upper := open("lower", "upper", modify("a.txt", "a upper\n"))

	// Different files: the whole stack, and the merges land the group's tree.
	whole := group(mid, top)
	if len(whole.GetMembers()) != 2 || whole.GetConflictNumber() != 0 {
		t.Fatalf("group of a stack over different files = %v", whole)
	}
	// The other way round (the upper first brings the lower in): the same tree.
	if rev := group(top, mid); len(rev.GetMembers()) != 2 || rev.GetConflictNumber() != 0 || treeOf(rev.GetSha()) != treeOf(whole.GetSha()) {
		t.Fatalf("group of the stack upper first = %v, want the same tree as lower first", rev)
	}
	for _, n := range []int32{mid, top} {
		if err := squash(n); err != nil {
			t.Fatalf("squash #%d: %v", n, err)
		}
	}
	if got, want := treeOf("refs/heads/main"), treeOf(whole.GetSha()); got != want {
		t.Fatalf("main's tree after the stack's merges %s, the group's %s", got, want)
	}

	// One file changed by both: the upper one conflicts, as its squash merge will.
	split := group(lower, upper)
	if len(split.GetMembers()) != 1 || split.GetMembers()[0].GetNumber() != lower ||
		split.GetConflictNumber() != upper || !strings.Contains(split.GetConflict(), "a.txt") {
		t.Fatalf("group of a stack changing a.txt twice = %v, want #%d alone and #%d conflicting on a.txt", split, lower, upper)
	}
	if err := squash(lower); err != nil {
		t.Fatal(err)
	}
	if got, want := treeOf("refs/heads/main"), treeOf(split.GetSha()); got != want {
		t.Fatalf("main's tree after the member's merge %s, the group's %s", got, want)
	}
	wantCode(t, squash(upper), codes.FailedPrecondition, "a.txt")
}
