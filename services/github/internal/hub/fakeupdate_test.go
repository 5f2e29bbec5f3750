package hub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-github/v84/github"

	"github.com/thefold/thefold/services/github/internal/forge"
)

// The update-branch endpoint of the fake GitHub (see fakeGH): PUT
// /repos/{o}/{r}/pulls/{n}/update-branch merges the base into the head and answers 202
// Accepted. As on GitHub, the head moves in the background: the next updateLag reads of
// the pull request still show the old head.

// fUpdate is an accepted branch update whose head move is not visible yet.
type fUpdate struct {
	ref, sha string
	reads    int // reads of the pull request still to show the old head
}

// settle makes a pending branch update of is visible once its reads are used up.
func (f *fakeGH) settle(repo *fRepo, is *fIssue) {
	u := repo.pending[is.number]
	if u == nil {
		return
	}
	if u.reads > 0 {
		u.reads--
		return
	}
	repo.refs[u.ref] = u.sha
	delete(repo.pending, is.number)
}

func (f *fakeGH) updateBranch(w http.ResponseWriter, repo *fRepo, is *fIssue, body []byte) {
	var in struct {
		ExpectedHeadSHA string `json:"expected_head_sha"`
	}
	_ = json.Unmarshal(body, &in)
	g := repo.git
	head, base := f.headOf(repo, is), repo.refs["refs/heads/"+is.pull.base]
	switch {
	case is.state != "open":
		writeJSON(w, 422, msg("Pull request is closed."))
		return
	case in.ExpectedHeadSHA != "" && in.ExpectedHeadSHA != head:
		writeJSON(w, 422, msg("expected head sha didn't match current head ref."))
		return
	case g.ancestors(head)[base]:
		writeJSON(w, 422, msg("There are no new commits on the base branch."))
		return
	}
	mb := g.mergeBase(head, base)
	flat, ok := merge3(g.flatten(g.commits[mb].tree), g.flatten(g.commits[head].tree), g.flatten(g.commits[base].tree))
	if !ok {
		writeJSON(w, 422, msg("merge conflict between base and head"))
		return
	}
	sha := g.putCommit(g.build(flat), []string{head, base}, fmt.Sprintf("Merge branch '%s' into %s", is.pull.base, is.pull.head), fSig{f.login, ""})
	u := &fUpdate{ref: "refs/heads/" + is.pull.head, sha: sha, reads: f.updateLag}
	repo.pending[is.number] = u
	if u.reads == 0 {
		f.settle(repo, is)
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"message": "Updating pull request branch.",
		"url": fmt.Sprintf("https://github.example/%s/%s/pull/%d", repo.owner, repo.name, is.number)})
}

// The fake serves what crew-mode tests drive through go-github: merging a pull request,
// closing it through the issues API (its last head kept), and posting and listing comments.
func TestFakeServesMergesClosesAndComments(t *testing.T) {
	t.Parallel()
	f, p := prRepo(t)
	ctx := forge.WithCredential(t.Context(), fakeToken)
	for _, head := range []string{"one", "two"} {
		main := f.repo("octo/app").refs["refs/heads/main"]
		f.with(func() { f.repos["octo/app"].refs["refs/heads/"+head] = main })
		f.commitTo("octo/app", head, map[string]string{head + ".txt": head + "\n"})
		if _, _, err := p.gh.PullRequests.Create(ctx, "octo", "app", &github.NewPullRequest{Title: github.Ptr(head), Head: github.Ptr(head), Base: github.Ptr("main")}); err != nil {
			t.Fatal(err)
		}
	}
	res, _, err := p.gh.PullRequests.Merge(ctx, "octo", "app", 1, "", &github.PullRequestOptions{MergeMethod: "merge"})
	if err != nil || !res.GetMerged() || f.repo("octo/app").refs["refs/heads/main"] != res.GetSHA() {
		t.Fatalf("merge = %v %v", res, err)
	}
	twoHead := f.commitTo("octo/app", "two", map[string]string{"before.txt": "pushed after opening\n"})
	is, _, err := p.gh.Issues.Edit(ctx, "octo", "app", 2, &github.IssueRequest{State: github.Ptr("closed")})
	if err != nil || is.GetState() != "closed" {
		t.Fatalf("close through the issues API = %v %v", is, err)
	}
	f.commitTo("octo/app", "two", map[string]string{"after.txt": "after close\n"})
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
}
