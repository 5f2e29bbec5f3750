package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/google/go-github/v84/github"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/services/github/internal/forge"
)

// Update waits: GitHub answers an update of a pull request's branch with 202 Accepted and
// moves the head in the background, usually within a second or two. The pull request is
// read again after updatePoll, then at doubling intervals of at most a second, until the
// head moves or updateWait has passed.
const (
	defaultUpdatePoll = 250 * time.Millisecond
	defaultUpdateWait = 5 * time.Second
)

// MergeBaseIntoPullRequest merges a pull request's base into its head with GitHub's "update
// branch". A head that already contains the base (the comparison of base and head finds it
// behind by nothing) is returned as it is, and nothing is sent. The head read is sent as
// expected_head_sha, so GitHub refuses to merge into a head this call did not see: a head
// other than expectedHeadSHA, here or at GitHub, is ErrConflict; changes that conflict and
// a merged or closed pull request are ErrFailedPrecondition. After GitHub accepts, the pull
// request is read again until its head has moved (bounded, see updateWait); a head that has
// not moved by then is ErrUnavailable (the update still happens; a retry finds it done).
func (p *Provider) MergeBaseIntoPullRequest(ctx context.Context, repo string, number int32, expectedHeadSHA string, _ forge.Actor) (*githubv1.PullRequest, bool, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return nil, false, err
	}
	subject := fmt.Sprintf("pull request #%d in %q", number, repo)
	pr, err := p.getPR(ctx, owner, name, repo, number)
	if err != nil {
		return nil, false, err
	}
	switch prState(pr) {
	case githubv1.PullRequestState_PULL_REQUEST_STATE_MERGED:
		return nil, false, fmt.Errorf("%s is merged; there is no branch to update: %w", subject, errs.ErrFailedPrecondition)
	case githubv1.PullRequestState_PULL_REQUEST_STATE_CLOSED:
		return nil, false, fmt.Errorf("%s is closed; reopen it or open another: %w", subject, errs.ErrFailedPrecondition)
	}
	head := pr.GetHead().GetSHA()
	if expectedHeadSHA != "" && expectedHeadSHA != head {
		return nil, false, fmt.Errorf("head of %s is %s, not the expected %s: %w", subject, head, expectedHeadSHA, errs.ErrConflict)
	}
	if behind, err := p.behindBy(ctx, owner, name, pr); err != nil {
		// GitHub answers an up-to-date head itself (422, no new commits): go on.
		p.log.WarnContext(ctx, "github: comparing base and head failed; updating all the same", "repo", repo, "number", number, "err", err)
	} else if behind == 0 {
		return toPR(repo, pr), false, nil
	}
	_, _, err = p.gh.PullRequests.UpdateBranch(ctx, owner, name, int(number), &github.PullRequestBranchUpdateOptions{ExpectedHeadSHA: github.Ptr(head)})
	if _, accepted := errors.AsType[*github.AcceptedError](err); err != nil && !accepted {
		return p.updateRefused(ctx, owner, name, repo, number, err)
	}
	moved, err := p.awaitHead(ctx, owner, name, repo, number, head)
	if err != nil {
		return nil, false, err
	}
	return toPR(repo, moved), true, nil
}

// behindBy is how many commits of the pull request's base branch its head lacks.
func (p *Provider) behindBy(ctx context.Context, owner, name string, pr *github.PullRequest) (int, error) {
	// The branch, not the pull request's base sha: GitHub refreshes that one only when the
	// pull request changes, not when its base branch moves.
	base := pr.GetBase().GetRef()
	if base == "" {
		base = pr.GetBase().GetSHA()
	}
	cmp, err := p.compare(ctx, owner, name, base, pr.GetHead().GetSHA())
	if err != nil {
		return 0, err
	}
	if cmp.BehindBy == nil {
		return 0, errors.New("the comparison names no behind_by")
	}
	return cmp.GetBehindBy(), nil
}

// updateRefused maps GitHub's refusal of an update-branch call. GitHub answers 422 for all
// of: a head other than expected_head_sha, a head that already has the base (it moved
// there since the comparison), and changes that conflict; its message tells them apart.
func (p *Provider) updateRefused(ctx context.Context, owner, name, repo string, number int32, err error) (*githubv1.PullRequest, bool, error) {
	subject := fmt.Sprintf("pull request #%d in %q", number, repo)
	if httpStatus(err) != http.StatusUnprocessableEntity {
		return nil, false, p.mapErr(ctx, err, subject)
	}
	p.log.InfoContext(ctx, "github: branch update refused", "repo", repo, "number", number, "err", err)
	text := errorText(err)
	switch {
	case strings.Contains(text, "expected head sha"), strings.Contains(text, "head ref"):
		return nil, false, fmt.Errorf("head of %s moved; re-read it and retry: %w", subject, errs.ErrConflict)
	case strings.Contains(text, "no new commits"), strings.Contains(text, "up to date"), strings.Contains(text, "up-to-date"):
		pr, err := p.getPR(ctx, owner, name, repo, number)
		if err != nil {
			return nil, false, err
		}
		return toPR(repo, pr), false, nil
	case strings.Contains(text, "conflict"):
		return nil, false, fmt.Errorf("%s does not merge cleanly with its base: both changed the same files (GitHub does not say which; "+
			"GetPullRequestDiff shows the head's side): %w", subject, errs.ErrFailedPrecondition)
	}
	return nil, false, fmt.Errorf("GitHub refused to update the branch of %s (branch protection, a fork it may not push to, or a closed pull request): %w",
		subject, errs.ErrFailedPrecondition)
}

// awaitHead reads a pull request until its head is no longer old, for at most updateWait.
func (p *Provider) awaitHead(ctx context.Context, owner, name, repo string, number int32, old string) (*github.PullRequest, error) {
	deadline := time.Now().Add(p.updateWait)
	delay := p.updatePoll
	for {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
		pr, err := p.getPR(ctx, owner, name, repo, number)
		if err != nil {
			return nil, err
		}
		if pr.GetHead().GetSHA() != old {
			return pr, nil
		}
		left := time.Until(deadline)
		if left <= 0 {
			p.log.WarnContext(ctx, "github: branch update accepted but the head has not moved", "repo", repo, "number", number, "waited", p.updateWait)
			return nil, fmt.Errorf("GitHub accepted the update of pull request #%d in %q but its head had not moved after %s; read the pull request again shortly: %w",
				number, repo, p.updateWait, errs.ErrUnavailable)
		}
		delay = min(delay*2, time.Second, left)
	}
}

// CreateMergeGroup is not offered on GitHub: a repository there checks its pull requests
// with its own CI, on each pull request's head, and has its own merge queue; a group's
// commit would have to be pushed to a branch for its checks to run at all.
func (p *Provider) CreateMergeGroup(_ context.Context, repo, _ string, _ []int32, _ forge.Actor) (*githubv1.CreateMergeGroupResponse, error) {
	return nil, status.Errorf(codes.Unimplemented, "%s is on GitHub: merge groups are made on the local forge only (GitHub checks pull requests with its own CI and merge queue)", repo)
}
