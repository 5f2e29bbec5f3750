package hub

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-github/v84/github"

	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/services/github/internal/forge"
)

// PullRequestChecks reads the checks on a pull request's head commit: its check runs (the
// latest of each, GitHub's default) and its commit statuses (the latest per context, as
// the combined status lists them), every page of both.
func (p *Provider) PullRequestChecks(ctx context.Context, repo string, number int32, _ forge.Actor) (*githubv1.GetPullRequestChecksResponse, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return nil, err
	}
	pr, err := p.getPR(ctx, owner, name, repo, number)
	if err != nil {
		return nil, err
	}
	sha := pr.GetHead().GetSHA()
	subject := fmt.Sprintf("checks of pull request #%d in %q", number, repo)
	var checks []*githubv1.Check
	runs := &github.ListCheckRunsOptions{ListOptions: github.ListOptions{PerPage: maxPerPage, Page: 1}}
	for {
		res, resp, err := read(ctx, p, func(ctx context.Context) (*github.ListCheckRunsResults, *github.Response, error) {
			return p.gh.Checks.ListCheckRunsForRef(ctx, owner, name, sha, runs)
		})
		if err != nil {
			return nil, p.mapErr(ctx, err, subject)
		}
		for _, r := range res.CheckRuns {
			checks = append(checks, toCheckRun(r))
		}
		if resp.NextPage == 0 {
			break
		}
		runs.Page = resp.NextPage
	}
	statuses := &github.ListOptions{PerPage: maxPerPage, Page: 1}
	for {
		res, resp, err := read(ctx, p, func(ctx context.Context) (*github.CombinedStatus, *github.Response, error) {
			return p.gh.Repositories.GetCombinedStatus(ctx, owner, name, sha, statuses)
		})
		if err != nil {
			return nil, p.mapErr(ctx, err, subject)
		}
		for _, s := range res.Statuses {
			checks = append(checks, toStatusCheck(s))
		}
		if resp.NextPage == 0 {
			break
		}
		statuses.Page = resp.NextPage
	}
	slices.SortStableFunc(checks, func(a, b *githubv1.Check) int { return strings.Compare(a.GetName(), b.GetName()) })
	return &githubv1.GetPullRequestChecksResponse{HeadSha: sha, State: combinedState(checks), Checks: checks}, nil
}

// toCheckRun converts a check run. A completed run with a conclusion this code does not
// know counts as a failure: a caller deciding whether to merge must not take it for a pass.
func toCheckRun(r *github.CheckRun) *githubv1.Check {
	c := &githubv1.Check{Name: r.GetName(), Summary: r.GetOutput().GetTitle(), DetailsUrl: r.GetDetailsURL()}
	if c.DetailsUrl == "" {
		c.DetailsUrl = r.GetHTMLURL()
	}
	if r.GetStatus() != "completed" {
		// queued, in_progress, and the waiting/requested/pending of deployments.
		c.State, c.Conclusion = githubv1.CheckState_CHECK_STATE_PENDING, r.GetStatus()
		return c
	}
	c.Conclusion = r.GetConclusion()
	switch c.Conclusion {
	case "success", "neutral", "skipped":
		c.State = githubv1.CheckState_CHECK_STATE_SUCCESS
	default: // failure, cancelled, timed_out, action_required, stale, startup_failure, …
		c.State = githubv1.CheckState_CHECK_STATE_FAILURE
	}
	return c
}

// toStatusCheck converts a commit status (pending, success, failure or error).
func toStatusCheck(s *github.RepoStatus) *githubv1.Check {
	c := &githubv1.Check{Name: s.GetContext(), Conclusion: s.GetState(), Summary: s.GetDescription(), DetailsUrl: s.GetTargetURL(), Status: true}
	switch s.GetState() {
	case "pending":
		c.State = githubv1.CheckState_CHECK_STATE_PENDING
	case "success":
		c.State = githubv1.CheckState_CHECK_STATE_SUCCESS
	default:
		c.State = githubv1.CheckState_CHECK_STATE_FAILURE
	}
	return c
}

// combinedState is NONE without checks, FAILURE when any failed, else PENDING when any is
// still running, else SUCCESS.
func combinedState(checks []*githubv1.Check) githubv1.CheckState {
	if len(checks) == 0 {
		return githubv1.CheckState_CHECK_STATE_NONE
	}
	has := func(s githubv1.CheckState) bool {
		return slices.ContainsFunc(checks, func(c *githubv1.Check) bool { return c.GetState() == s })
	}
	switch {
	case has(githubv1.CheckState_CHECK_STATE_FAILURE):
		return githubv1.CheckState_CHECK_STATE_FAILURE
	case has(githubv1.CheckState_CHECK_STATE_PENDING):
		return githubv1.CheckState_CHECK_STATE_PENDING
	}
	return githubv1.CheckState_CHECK_STATE_SUCCESS
}
