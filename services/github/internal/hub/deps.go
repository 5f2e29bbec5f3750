package hub

import (
	"context"
	"fmt"
	"net/http"
	"slices"

	"github.com/google/go-github/v84/github"
	"golang.org/x/sync/errgroup"

	"github.com/thefold/thefold/pkg/errs"
)

// GitHub's issue dependencies REST API (go-github has no methods for it):
//
//	GET    /repos/{owner}/{repo}/issues/{number}/dependencies/blocked_by
//	POST   /repos/{owner}/{repo}/issues/{number}/dependencies/blocked_by   {"issue_id": <id>}
//	DELETE /repos/{owner}/{repo}/issues/{number}/dependencies/blocked_by/{issue_id}
//
// issue_id is the blocking issue's numeric id, not its number. Where the API is missing
// (GitHub Enterprise before it, answering 404 or 410) the body's "Blocked by #N" line alone
// carries the dependency, and the provider stops asking after the first such answer. A 403
// (the token may not manage dependencies here) skips the API for that call only.

// blocker is an issue that blocks another: its number and its id.
type blocker struct {
	number int32
	id     int64
}

// issueIDs looks up the ids of the blocking issues nums (sorted, without duplicates); one
// that is not an issue of the repository is ErrInvalid.
func (p *Provider) issueIDs(ctx context.Context, owner, name, repo string, nums []int32) ([]blocker, error) {
	nums = slices.Clone(nums)
	slices.Sort(nums)
	nums = slices.Compact(nums)
	out := make([]blocker, len(nums))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallelReads)
	for i, n := range nums {
		g.Go(func() error {
			if n <= 0 {
				return fmt.Errorf("blocked_by: #%d is not an issue number: %w", n, errs.ErrInvalid)
			}
			is, _, err := read(gctx, p, func(ctx context.Context) (*github.Issue, *github.Response, error) {
				return p.gh.Issues.Get(ctx, owner, name, int(n))
			})
			switch st := httpStatus(err); {
			case err == nil && is.IsPullRequest():
				return fmt.Errorf("blocked_by: #%d in %q is a pull request, not an issue: %w", n, repo, errs.ErrInvalid)
			case err == nil:
				out[i] = blocker{number: n, id: is.GetID()}
				return nil
			case st == http.StatusNotFound || st == http.StatusGone:
				return fmt.Errorf("blocked_by: issue #%d does not exist in %q: %w", n, repo, errs.ErrInvalid)
			}
			return p.mapErr(gctx, err, fmt.Sprintf("issue #%d in %q", n, repo))
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return out, nil
}

// dependencies returns the numbers of the issues GitHub records as blocking is, none when
// the API is unavailable or GitHub's summary says nothing blocks it.
func (p *Provider) dependencies(ctx context.Context, owner, name, repo string, is *ghIssue) ([]int32, error) {
	if p.depsOff.Load() || (is.Deps != nil && is.Deps.BlockedBy == 0) {
		return nil, nil
	}
	list, err := p.listDependencies(ctx, owner, name, is.GetNumber())
	if err != nil {
		if p.depsUnavailable(ctx, err) {
			return nil, nil
		}
		return nil, p.mapErr(ctx, err, fmt.Sprintf("issue #%d in %q", is.GetNumber(), repo))
	}
	out := make([]int32, 0, len(list))
	for _, b := range list {
		out = append(out, int32(b.GetNumber()))
	}
	return out, nil
}

func (p *Provider) listDependencies(ctx context.Context, owner, name string, number int) ([]*github.Issue, error) {
	list, _, err := read(ctx, p, func(ctx context.Context) ([]*github.Issue, *github.Response, error) {
		var list []*github.Issue
		resp, err := p.getJSON(ctx, fmt.Sprintf("repos/%s/%s/issues/%d/dependencies/blocked_by?per_page=100", owner, name, number), &list)
		return list, resp, err
	})
	return list, err
}

// depsUnavailable reports whether err says the dependencies API is not there (remembered)
// or not for this token (403, not remembered).
func (p *Provider) depsUnavailable(ctx context.Context, err error) bool {
	switch httpStatus(err) {
	case http.StatusNotFound, http.StatusGone:
		if !p.depsOff.Swap(true) {
			p.log.DebugContext(ctx, "github: issue dependencies API unavailable; blocked-by lines only", "err", err)
		}
		return true
	case http.StatusForbidden:
		p.log.DebugContext(ctx, "github: issue dependencies API forbidden; blocked-by lines only", "err", err)
		return true
	}
	return false
}

// addDependency records that b blocks issue number; false (and no error) when the API is
// unavailable.
func (p *Provider) addDependency(ctx context.Context, owner, name, repo string, number int, b blocker) (bool, error) {
	if p.depsOff.Load() {
		return false, nil
	}
	req, err := p.gh.NewRequest(http.MethodPost, fmt.Sprintf("repos/%s/%s/issues/%d/dependencies/blocked_by", owner, name, number), map[string]int64{"issue_id": b.id})
	if err != nil {
		return false, err
	}
	_, err = p.gh.Do(ctx, req, nil)
	switch {
	case err == nil:
		return true, nil
	case p.depsUnavailable(ctx, err):
		return false, nil
	case isStatus(err, http.StatusUnprocessableEntity, "already"):
		return true, nil
	}
	return false, p.mapErr(ctx, err, fmt.Sprintf("issue #%d in %q", number, repo))
}

// syncDependencies makes GitHub's blockers of issue number exactly want.
func (p *Provider) syncDependencies(ctx context.Context, owner, name, repo string, number int, want []blocker) error {
	if p.depsOff.Load() {
		return nil
	}
	cur, err := p.listDependencies(ctx, owner, name, number)
	if err != nil {
		if p.depsUnavailable(ctx, err) {
			return nil
		}
		return p.mapErr(ctx, err, fmt.Sprintf("issue #%d in %q", number, repo))
	}
	for _, b := range want {
		if slices.ContainsFunc(cur, func(c *github.Issue) bool { return int32(c.GetNumber()) == b.number }) {
			continue
		}
		if ok, err := p.addDependency(ctx, owner, name, repo, number, b); err != nil || !ok {
			return err
		}
	}
	for _, c := range cur {
		if slices.ContainsFunc(want, func(b blocker) bool { return b.number == int32(c.GetNumber()) }) {
			continue
		}
		req, err := p.gh.NewRequest(http.MethodDelete, fmt.Sprintf("repos/%s/%s/issues/%d/dependencies/blocked_by/%d", owner, name, number, c.GetID()), nil)
		if err != nil {
			return err
		}
		if _, err := p.gh.Do(ctx, req, nil); err != nil && httpStatus(err) != http.StatusNotFound {
			return p.mapErr(ctx, err, fmt.Sprintf("issue #%d in %q", number, repo))
		}
	}
	return nil
}
