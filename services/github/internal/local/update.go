package local

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"

	"github.com/thefold/thefold/services/github/internal/forge"
)

// MergeBaseIntoPullRequest merges an open pull request's base into its head, as git merge
// would on the head branch: a merge commit whose tree is the three-way merge of the merge
// base, the head and the base, with parents head then base. A head that already contains
// the base is returned refreshed, and nothing is written.
func (p *Provider) MergeBaseIntoPullRequest(ctx context.Context, repo string, number int32, expectedHeadSHA string, a forge.Actor) (*githubv1.PullRequest, bool, error) {
	if _, err := p.repo(ctx, repo, a); err != nil {
		return nil, false, err
	}
	defer p.lock(repo)()
	pr, err := p.store.GetPullRequest(ctx, repo, number)
	if err != nil {
		return nil, false, err
	}
	pr.Url = p.url(repo, "pulls", number)
	switch pr.GetState() {
	case githubv1.PullRequestState_PULL_REQUEST_STATE_MERGED:
		return nil, false, fmt.Errorf("pull request %s#%d is merged; there is no branch to update: %w", repo, number, errs.ErrFailedPrecondition)
	case githubv1.PullRequestState_PULL_REQUEST_STATE_CLOSED:
		return nil, false, fmt.Errorf("pull request %s#%d is closed; reopen it or open another: %w", repo, number, errs.ErrFailedPrecondition)
	}
	g, err := p.open(repo)
	if err != nil {
		return nil, false, err
	}
	headSHA, baseSHA, mb, err := p.ends(g, pr.GetHead(), pr.GetBase())
	if err != nil {
		if errors.Is(err, errs.ErrNotFound) {
			return nil, false, fmt.Errorf("pull request %s#%d cannot be updated: %s: %w", repo, number, strings.TrimSuffix(err.Error(), ": "+errs.ErrNotFound.Error()), errs.ErrFailedPrecondition)
		}
		return nil, false, err
	}
	if expectedHeadSHA != "" && headSHA.String() != expectedHeadSHA {
		return nil, false, fmt.Errorf("head %q is at %s, not at expected_head_sha %s: %w", pr.GetHead(), short(headSHA), expectedHeadSHA, errs.ErrConflict)
	}
	if mb == baseSHA {
		out, err := p.refresh(ctx, g, pr)
		return out, false, err
	}
	// Head is "ours" and base "theirs": when the head has no commits of its own the merge is
	// the base's tree, still recorded as a merge commit (GitHub never fast-forwards here).
	files, conflicts, err := p.mergedTree(g, mb, headSHA, baseSHA)
	if err != nil {
		return nil, false, err
	}
	if len(conflicts) > 0 {
		return nil, false, conflictError(pr, conflicts)
	}
	tree, err := g.writeTree(files)
	if err != nil {
		return nil, false, err
	}
	msg := fmt.Sprintf("Merge branch '%s' into %s", pr.GetBase(), pr.GetHead())
	merged, err := g.writeCommit(tree, []plumbing.Hash{headSHA, baseSHA}, author(forge.Signature{}), msg, p.now())
	if err != nil {
		return nil, false, err
	}
	if err := g.moveBranch(pr.GetHead(), merged, headSHA); err != nil {
		return nil, false, err
	}
	owner, name, _ := strings.Cut(repo, "/")
	_ = p.store.TouchRepo(ctx, owner, name)
	out, err := p.refresh(ctx, g, pr)
	if err != nil {
		return nil, false, err
	}
	return out, true, nil
}
