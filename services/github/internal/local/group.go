package local

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"

	"github.com/thefold/thefold/services/github/internal/forge"
)

// CreateMergeGroup writes a commit whose tree is base's head with the pull requests' heads
// merged in, in order, recorded as merge commits with parents group then head. No branch
// moves. It stops at the first pull request that does not merge cleanly onto the ones
// before it.
//
// Each head is merged as it will be once the ones before it have merged by squash (the
// default, and what a crew does after bringing each up to date): three ways, file by file,
// with the group so far as "ours" and the merge base taken with base's head, not with the
// group. Squash merges move the base by commits no head contains, so that is the merge base
// they see, and merging the members one by one then gives the group's tree. The merge base
// with the group differs for a head cut from an earlier member's branch (stacked pull
// requests): it would be that member's head, and the group would merge cleanly what the
// squash merges then refuse.
func (p *Provider) CreateMergeGroup(ctx context.Context, repo, base string, numbers []int32, a forge.Actor) (*githubv1.CreateMergeGroupResponse, error) {
	if _, err := p.repo(ctx, repo, a); err != nil {
		return nil, err
	}
	defer p.lock(repo)()
	g, err := p.open(repo)
	if err != nil {
		return nil, err
	}
	baseSHA, err := g.branchHead(base)
	if err != nil {
		return nil, err
	}
	if baseSHA.IsZero() {
		return nil, fmt.Errorf("base: branch %q: %w", base, errs.ErrNotFound)
	}
	// Every pull request is checked before anything is written.
	prs := make([]*githubv1.PullRequest, len(numbers))
	heads := make([]plumbing.Hash, len(numbers))
	mbs := make([]plumbing.Hash, len(numbers))
	for i, n := range numbers {
		pr, err := p.store.GetPullRequest(ctx, repo, n)
		if err != nil {
			return nil, err
		}
		if pr.GetState() != githubv1.PullRequestState_PULL_REQUEST_STATE_OPEN {
			return nil, fmt.Errorf("numbers[%d]: pull request %s#%d is %s, not open: %w", i, repo, n,
				strings.ToLower(strings.TrimPrefix(pr.GetState().String(), "PULL_REQUEST_STATE_")), errs.ErrFailedPrecondition)
		}
		if pr.GetBase() != base {
			return nil, fmt.Errorf("numbers[%d]: pull request %s#%d targets %q, not %q: %w", i, repo, n, pr.GetBase(), base, errs.ErrFailedPrecondition)
		}
		h, err := g.branchHead(pr.GetHead())
		if err != nil {
			return nil, err
		}
		if h.IsZero() {
			return nil, fmt.Errorf("numbers[%d]: pull request %s#%d: its head branch %q is gone: %w", i, repo, n, pr.GetHead(), errs.ErrFailedPrecondition)
		}
		mb, err := g.mergeBase(baseSHA, h)
		if err != nil {
			return nil, err
		}
		if mb.IsZero() {
			return nil, fmt.Errorf("numbers[%d]: pull request %s#%d shares no history with %q: %w", i, repo, n, base, errs.ErrFailedPrecondition)
		}
		prs[i], heads[i], mbs[i] = pr, h, mb
	}
	out := &githubv1.CreateMergeGroupResponse{Sha: baseSHA.String(), BaseSha: baseSHA.String()}
	group := baseSHA
	for i, pr := range prs {
		mb := mbs[i]
		if mb == heads[i] {
			// Its head is in the base already (nothing of its own to merge).
			out.Members = append(out.Members, &githubv1.MergeGroupMember{Number: pr.GetNumber(), HeadSha: heads[i].String()})
			continue
		}
		files, conflicts, err := p.mergedTree(g, mb, group, heads[i])
		if err != nil {
			return nil, err
		}
		if len(conflicts) > 0 {
			out.ConflictNumber = pr.GetNumber()
			out.Conflict = strings.TrimSuffix(conflictError(pr, conflicts).Error(), ": "+errs.ErrFailedPrecondition.Error())
			break
		}
		tree, err := g.writeTree(files)
		if err != nil {
			return nil, err
		}
		msg := fmt.Sprintf("Merge pull request #%d (%s) into the merge group of %s", pr.GetNumber(), pr.GetHead(), base)
		if group, err = g.writeCommit(tree, []plumbing.Hash{group, heads[i]}, author(forge.Signature{}), msg, p.now()); err != nil {
			return nil, err
		}
		out.Members = append(out.Members, &githubv1.MergeGroupMember{Number: pr.GetNumber(), HeadSha: heads[i].String()})
	}
	out.Sha = group.String()
	return out, nil
}
