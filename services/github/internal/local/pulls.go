package local

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"

	"github.com/thefold/thefold/services/github/internal/forge"
	"github.com/thefold/thefold/services/github/internal/store"
)

// Pull requests of the local forge: opened, refreshed from git, diffed, merged, closed.

func (p *Provider) url(repo, kind string, n int32) string {
	return p.baseURL + "/v1/repos/" + repo + "/" + kind + "/" + strconv.Itoa(int(n))
}

// CreatePullRequest opens a pull request, or returns the open one from head to base.
func (p *Provider) CreatePullRequest(ctx context.Context, np forge.NewPullRequest) (*githubv1.PullRequest, bool, error) {
	r, err := p.repo(ctx, np.Repo, np.Actor)
	if err != nil {
		return nil, false, err
	}
	base := np.Base
	if base == "" {
		base = r.DefaultBranch
	}
	if base == np.Head {
		return nil, false, fmt.Errorf("head: %q is also the base; a pull request needs two branches: %w", np.Head, errs.ErrInvalid)
	}
	g, err := p.open(np.Repo)
	if err != nil {
		return nil, false, err
	}
	headSHA, baseSHA, mb, err := p.ends(g, np.Head, base)
	if err != nil {
		return nil, false, err
	}
	if headSHA == mb {
		return nil, false, fmt.Errorf("head: %q has no commits that %q lacks: %w", np.Head, base, errs.ErrFailedPrecondition)
	}
	_, stats, err := g.diff(ctx, mb, headSHA, false)
	if err != nil {
		return nil, false, err
	}
	_ = baseSHA
	pr, created, err := p.store.CreatePullRequest(ctx, &githubv1.PullRequest{
		Repo: np.Repo, Title: np.Title, Body: np.Body, Head: np.Head, Base: base, HeadSha: headSHA.String(),
		BaseSha: mb.String(), Draft: np.Draft, Author: np.Actor.UserID, Labels: np.Labels, Stats: stats,
	})
	if err != nil {
		return nil, false, err
	}
	out, err := p.refresh(ctx, g, pr)
	return out, created, err
}

// ends resolves a pull request's head and base branches and their merge base.
func (p *Provider) ends(g *gitRepo, head, base string) (headSHA, baseSHA, mb plumbing.Hash, err error) {
	if headSHA, err = g.branchHead(head); err != nil {
		return
	}
	if headSHA.IsZero() {
		err = fmt.Errorf("head: branch %q: %w", head, errs.ErrNotFound)
		return
	}
	if baseSHA, err = g.branchHead(base); err != nil {
		return
	}
	if baseSHA.IsZero() {
		err = fmt.Errorf("base: branch %q: %w", base, errs.ErrNotFound)
		return
	}
	if mb, err = g.mergeBase(headSHA, baseSHA); err != nil {
		return
	}
	if mb.IsZero() {
		err = fmt.Errorf("head: %q and %q share no history: %w", head, base, errs.ErrFailedPrecondition)
	}
	return
}

// refresh brings an open pull request up to date with its branches: head, merge base,
// stats (stored when they moved) and whether it merges cleanly.
func (p *Provider) refresh(ctx context.Context, g *gitRepo, pr *githubv1.PullRequest) (*githubv1.PullRequest, error) {
	pr.Url = p.url(pr.GetRepo(), "pulls", pr.GetNumber())
	if pr.GetState() != githubv1.PullRequestState_PULL_REQUEST_STATE_OPEN {
		return pr, nil
	}
	headSHA, baseSHA, mb, err := p.ends(g, pr.GetHead(), pr.GetBase())
	if err != nil {
		// A deleted branch leaves the pull request as last seen, not mergeable.
		if errors.Is(err, errs.ErrNotFound) || errors.Is(err, errs.ErrFailedPrecondition) {
			pr.Mergeable = new(bool)
			return pr, nil
		}
		return nil, err
	}
	if headSHA.String() != pr.GetHeadSha() || mb.String() != pr.GetBaseSha() {
		_, stats, err := g.diff(ctx, mb, headSHA, false)
		if err != nil {
			return nil, err
		}
		up, err := p.store.UpdatePullRequest(ctx, pr.GetRepo(), pr.GetNumber(), store.PullRequestUpdate{
			HeadSHA: headSHA.String(), BaseSHA: mb.String(), Stats: stats})
		if err != nil {
			return nil, err
		}
		up.Url = pr.Url
		pr = up
	}
	_, conflicts, err := p.mergedTree(g, mb, baseSHA, headSHA)
	if err != nil {
		return nil, err
	}
	ok := len(conflicts) == 0
	pr.Mergeable = &ok
	return pr, nil
}

// mergedTree merges head into base (with merge base mb) file by file.
func (p *Provider) mergedTree(g *gitRepo, mb, base, head plumbing.Hash) (map[string]entry, []string, error) {
	fh, err := g.flatten(head)
	if err != nil {
		return nil, nil, err
	}
	if mb == base {
		return fh, nil, nil
	}
	fm, err := g.flatten(mb)
	if err != nil {
		return nil, nil, err
	}
	fb, err := g.flatten(base)
	if err != nil {
		return nil, nil, err
	}
	out, conflicts := merge3(fm, fb, fh)
	return out, conflicts, nil
}

// GetPullRequest returns a pull request, refreshed.
func (p *Provider) GetPullRequest(ctx context.Context, repo string, number int32, a forge.Actor) (*githubv1.PullRequest, error) {
	if _, err := p.repo(ctx, repo, a); err != nil {
		return nil, err
	}
	pr, err := p.store.GetPullRequest(ctx, repo, number)
	if err != nil {
		return nil, err
	}
	g, err := p.open(repo)
	if err != nil {
		return nil, err
	}
	return p.refresh(ctx, g, pr)
}

// ListPullRequests lists pull requests, newest first (as last refreshed).
func (p *Provider) ListPullRequests(ctx context.Context, q forge.PullRequestQuery, a forge.Actor) ([]*githubv1.PullRequest, string, error) {
	if _, err := p.repo(ctx, q.Repo, a); err != nil {
		return nil, "", err
	}
	before, err := cursorNumber(q.Page.Cursor)
	if err != nil {
		return nil, "", err
	}
	rows, err := p.store.ListPullRequests(ctx, store.PullRequestFilter{Repo: q.Repo, State: q.State, Head: q.Head,
		Base: q.Base, Before: before, Limit: q.Page.Size + 1})
	if err != nil {
		return nil, "", err
	}
	rows, next := page(rows, q.Page.Size, (*githubv1.PullRequest).GetNumber)
	for _, pr := range rows {
		pr.Url = p.url(pr.GetRepo(), "pulls", pr.GetNumber())
	}
	return rows, next, nil
}

// page cuts rows, read with one row more than size, to size and returns the cursor of the
// next page (the last number shown; "" on the last page).
func page[T any](rows []T, size int, number func(T) int32) ([]T, string) {
	if len(rows) <= size {
		return rows, ""
	}
	rows = rows[:size]
	return rows, strconv.Itoa(int(number(rows[len(rows)-1])))
}

func cursorNumber(c string) (int32, error) {
	if c == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(c, 10, 32)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("page_token: malformed: %w", errs.ErrInvalid)
	}
	return int32(n), nil
}

// PullRequestDiff diffs a pull request's head against its merge base (or the pinned pair).
func (p *Provider) PullRequestDiff(ctx context.Context, repo string, number int32, pin *forge.DiffPin, a forge.Actor) (*forge.Diff, error) {
	pr, err := p.GetPullRequest(ctx, repo, number, a)
	if err != nil {
		return nil, err
	}
	base, head := pr.GetBaseSha(), pr.GetHeadSha()
	if pin != nil {
		base, head = pin.BaseSHA, pin.HeadSHA
	}
	g, err := p.open(repo)
	if err != nil {
		return nil, err
	}
	files, stats, err := g.diff(ctx, plumbing.NewHash(base), plumbing.NewHash(head), true)
	if err != nil {
		return nil, err
	}
	return &forge.Diff{BaseSHA: base, HeadSHA: head, Files: files, Stats: stats}, nil
}

// PullRequestChecks answers no checks on the pull request's head: the local forge runs
// none of its own.
func (p *Provider) PullRequestChecks(ctx context.Context, repo string, number int32, a forge.Actor) (*githubv1.GetPullRequestChecksResponse, error) {
	pr, err := p.GetPullRequest(ctx, repo, number, a)
	if err != nil {
		return nil, err
	}
	return &githubv1.GetPullRequestChecksResponse{HeadSha: pr.GetHeadSha(), State: githubv1.CheckState_CHECK_STATE_NONE}, nil
}

// MergePullRequest merges an open pull request into its base.
func (p *Provider) MergePullRequest(ctx context.Context, m forge.MergeSpec) (*githubv1.PullRequest, error) {
	if _, err := p.repo(ctx, m.Repo, m.Actor); err != nil {
		return nil, err
	}
	defer p.lock(m.Repo)()
	pr, err := p.store.GetPullRequest(ctx, m.Repo, m.Number)
	if err != nil {
		return nil, err
	}
	pr.Url = p.url(m.Repo, "pulls", m.Number)
	switch pr.GetState() {
	case githubv1.PullRequestState_PULL_REQUEST_STATE_MERGED:
		return pr, nil
	case githubv1.PullRequestState_PULL_REQUEST_STATE_CLOSED:
		return nil, fmt.Errorf("pull request %s#%d is closed; reopen it or open another: %w", m.Repo, m.Number, errs.ErrFailedPrecondition)
	}
	g, err := p.open(m.Repo)
	if err != nil {
		return nil, err
	}
	headSHA, baseSHA, mb, err := p.ends(g, pr.GetHead(), pr.GetBase())
	if err != nil {
		if errors.Is(err, errs.ErrNotFound) {
			return nil, fmt.Errorf("pull request %s#%d cannot merge: %s: %w", m.Repo, m.Number, strings.TrimSuffix(err.Error(), ": "+errs.ErrNotFound.Error()), errs.ErrFailedPrecondition)
		}
		return nil, err
	}
	if m.ExpectedHeadSHA != "" && headSHA.String() != m.ExpectedHeadSHA {
		return nil, fmt.Errorf("head %q is at %s, not at expected_head_sha %s: %w", pr.GetHead(), short(headSHA), m.ExpectedHeadSHA, errs.ErrConflict)
	}
	merged, err := p.merge(g, m, pr, mb, baseSHA, headSHA)
	if err != nil {
		return nil, err
	}
	if err := g.moveBranch(pr.GetBase(), merged, baseSHA); err != nil {
		return nil, err
	}
	_, stats, err := g.diff(ctx, mb, headSHA, false)
	if err != nil {
		return nil, err
	}
	out, err := p.store.UpdatePullRequest(ctx, m.Repo, m.Number, store.PullRequestUpdate{HeadSHA: headSHA.String(),
		BaseSHA: mb.String(), Stats: stats, State: githubv1.PullRequestState_PULL_REQUEST_STATE_MERGED,
		MergeCommitSHA: merged.String(), FromState: githubv1.PullRequestState_PULL_REQUEST_STATE_OPEN})
	if err != nil {
		return nil, err
	}
	owner, name, _ := strings.Cut(m.Repo, "/")
	_ = p.store.TouchRepo(ctx, owner, name)
	if m.DeleteBranch {
		if err := g.deleteBranch(pr.GetHead()); err != nil {
			return nil, err
		}
	}
	out.Url = pr.Url
	return out, nil
}

// merge writes the commit that lands head on base by the chosen method and returns it.
func (p *Provider) merge(g *gitRepo, m forge.MergeSpec, pr *githubv1.PullRequest, mb, base, head plumbing.Hash) (plumbing.Hash, error) {
	now := p.now()
	title := m.CommitTitle
	if title == "" {
		title = fmt.Sprintf("%s (#%d)", pr.GetTitle(), pr.GetNumber())
	}
	msg := m.CommitMessage
	if msg == "" {
		msg = pr.GetBody()
	}
	if msg != "" {
		title += "\n\n" + msg
	}
	if m.Method == githubv1.MergeMethod_MERGE_METHOD_REBASE {
		return p.rebase(g, mb, base, head)
	}
	files, conflicts, err := p.mergedTree(g, mb, base, head)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if len(conflicts) > 0 {
		return plumbing.ZeroHash, conflictError(pr, conflicts)
	}
	tree, err := g.writeTree(files)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	parents := []plumbing.Hash{base}
	if m.Method == githubv1.MergeMethod_MERGE_METHOD_MERGE {
		parents = append(parents, head)
	}
	return g.writeCommit(tree, parents, author(forge.Signature{}), title, now)
}

// rebase replays head's commits since mb on base, one by one; when base has not moved it
// is a fast-forward to head.
func (p *Provider) rebase(g *gitRepo, mb, base, head plumbing.Hash) (plumbing.Hash, error) {
	if mb == base {
		return head, nil
	}
	var chain []plumbing.Hash
	for h := head; h != mb; {
		c, err := g.commit(h)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if len(c.ParentHashes) == 0 {
			break
		}
		chain = append(chain, h)
		h = c.ParentHashes[0]
	}
	cur := base
	for i := len(chain) - 1; i >= 0; i-- {
		c, err := g.commit(chain[i])
		if err != nil {
			return plumbing.ZeroHash, err
		}
		files, conflicts, err := p.mergedTree(g, c.ParentHashes[0], cur, chain[i])
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if len(conflicts) > 0 {
			return plumbing.ZeroHash, fmt.Errorf("rebasing %s conflicts in %s: %w", short(chain[i]), strings.Join(conflicts, ", "), errs.ErrFailedPrecondition)
		}
		tree, err := g.writeTree(files)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		sig := forge.Signature{Name: c.Author.Name, Email: c.Author.Email}
		if cur, err = g.writeCommit(tree, []plumbing.Hash{cur}, sig, c.Message, c.Author.When); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	return cur, nil
}

func conflictError(pr *githubv1.PullRequest, conflicts []string) error {
	shown := conflicts
	if len(shown) > 10 {
		shown = shown[:10]
	}
	return fmt.Errorf("pull request %s#%d does not merge cleanly: %s changed on both %q and %q (%d files): %w",
		pr.GetRepo(), pr.GetNumber(), strings.Join(shown, ", "), pr.GetHead(), pr.GetBase(), len(conflicts), errs.ErrFailedPrecondition)
}

// ClosePullRequest closes an open pull request.
func (p *Provider) ClosePullRequest(ctx context.Context, repo string, number int32, deleteBranch bool, a forge.Actor) (*githubv1.PullRequest, error) {
	if _, err := p.repo(ctx, repo, a); err != nil {
		return nil, err
	}
	defer p.lock(repo)()
	pr, err := p.store.GetPullRequest(ctx, repo, number)
	if err != nil {
		return nil, err
	}
	pr.Url = p.url(repo, "pulls", number)
	switch pr.GetState() {
	case githubv1.PullRequestState_PULL_REQUEST_STATE_CLOSED:
		return pr, nil
	case githubv1.PullRequestState_PULL_REQUEST_STATE_MERGED:
		return nil, fmt.Errorf("pull request %s#%d is merged: %w", repo, number, errs.ErrFailedPrecondition)
	}
	out, err := p.store.UpdatePullRequest(ctx, repo, number, store.PullRequestUpdate{HeadSHA: pr.GetHeadSha(),
		BaseSHA: pr.GetBaseSha(), Stats: pr.GetStats(), State: githubv1.PullRequestState_PULL_REQUEST_STATE_CLOSED,
		FromState: githubv1.PullRequestState_PULL_REQUEST_STATE_OPEN})
	if err != nil {
		return nil, err
	}
	if deleteBranch {
		g, err := p.open(repo)
		if err != nil {
			return nil, err
		}
		if err := g.deleteBranch(pr.GetHead()); err != nil {
			return nil, err
		}
	}
	out.Url = pr.Url
	return out, nil
}
