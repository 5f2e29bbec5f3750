package hub

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/google/go-github/v84/github"
	"golang.org/x/sync/errgroup"

	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/services/github/internal/forge"
)

// ghIssue is GitHub's issue with the summary of its dependencies, which go-github does not
// decode: with it, an issue that nothing blocks costs no call to the dependencies API.
type ghIssue struct {
	github.Issue
	Deps *struct {
		BlockedBy int `json:"blocked_by"`
	} `json:"issue_dependencies_summary,omitempty"`
}

// ListIssues lists issues newest first. GitHub's issues API lists pull requests too; they
// are left out (a page they leave empty is followed by the next, up to a few).
func (p *Provider) ListIssues(ctx context.Context, q forge.IssueQuery, _ forge.Actor) ([]*githubv1.Issue, string, error) {
	owner, name, err := splitRepo(q.Repo)
	if err != nil {
		return nil, "", err
	}
	lo, err := pageOpts(q.Page)
	if err != nil {
		return nil, "", err
	}
	v := url.Values{"sort": {"created"}, "direction": {"desc"}, "state": {"all"}, "per_page": {strconv.Itoa(lo.PerPage)}}
	switch q.State {
	case githubv1.IssueState_ISSUE_STATE_OPEN:
		v.Set("state", "open")
	case githubv1.IssueState_ISSUE_STATE_CLOSED:
		v.Set("state", "closed")
	}
	if len(q.Labels) > 0 {
		v.Set("labels", strings.Join(q.Labels, ","))
	}
	var issues []*ghIssue
	var resp *github.Response
	page := lo.Page
	for range maxSkippedPages {
		v.Set("page", strconv.Itoa(page))
		var list []*ghIssue
		list, resp, err = read(ctx, p, func(ctx context.Context) ([]*ghIssue, *github.Response, error) {
			var list []*ghIssue
			resp, err := p.getJSON(ctx, fmt.Sprintf("repos/%s/%s/issues?%s", owner, name, v.Encode()), &list)
			return list, resp, err
		})
		if err != nil {
			return nil, "", p.mapErr(ctx, err, fmt.Sprintf("repository %q", q.Repo))
		}
		for _, is := range list {
			if !is.IsPullRequest() {
				issues = append(issues, is)
			}
		}
		if len(issues) > 0 || resp.NextPage == 0 {
			break
		}
		page = resp.NextPage
	}
	out := make([]*githubv1.Issue, len(issues))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallelReads)
	for i, is := range issues {
		g.Go(func() error {
			deps, err := p.dependencies(gctx, owner, name, q.Repo, is)
			if err != nil {
				return err
			}
			out[i] = toIssue(q.Repo, &is.Issue, deps)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, "", err
	}
	return out, nextCursor(resp, lo.PerPage), nil
}

// GetIssue returns one issue; a pull request's number is ErrNotFound.
func (p *Provider) GetIssue(ctx context.Context, repo string, number int32, _ forge.Actor) (*githubv1.Issue, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return nil, err
	}
	is, err := p.getIssue(ctx, owner, name, repo, number)
	if err != nil {
		return nil, err
	}
	deps, err := p.dependencies(ctx, owner, name, repo, is)
	if err != nil {
		return nil, err
	}
	return toIssue(repo, &is.Issue, deps), nil
}

func (p *Provider) getIssue(ctx context.Context, owner, name, repo string, number int32) (*ghIssue, error) {
	subject := fmt.Sprintf("issue #%d in %q", number, repo)
	is, _, err := read(ctx, p, func(ctx context.Context) (*ghIssue, *github.Response, error) {
		is := new(ghIssue)
		resp, err := p.getJSON(ctx, fmt.Sprintf("repos/%s/%s/issues/%d", owner, name, number), is)
		return is, resp, err
	})
	if err != nil {
		return nil, p.mapErr(ctx, err, subject)
	}
	if is.IsPullRequest() {
		return nil, fmt.Errorf("%s: %w", subject, errs.ErrNotFound)
	}
	return is, nil
}

func (p *Provider) getJSON(ctx context.Context, u string, v any) (*github.Response, error) {
	req, err := p.gh.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	return p.gh.Do(ctx, req, v)
}

// CreateIssue opens an issue. Its blockers are written into the body ("Blocked by #a, #b")
// and registered with GitHub's issue dependencies where that API is available; a blocker
// that is not an issue of the repository is ErrInvalid, and nothing is opened.
func (p *Provider) CreateIssue(ctx context.Context, ni forge.NewIssue) (*githubv1.Issue, error) {
	owner, name, err := splitRepo(ni.Repo)
	if err != nil {
		return nil, err
	}
	blockers, err := p.issueIDs(ctx, owner, name, ni.Repo, ni.BlockedBy)
	if err != nil {
		return nil, err
	}
	body := ni.Body
	if len(ni.BlockedBy) > 0 {
		body = forge.WithBlockedBy(body, ni.BlockedBy)
	}
	req := &github.IssueRequest{Title: github.Ptr(ni.Title), Body: github.Ptr(body)}
	if len(ni.Labels) > 0 {
		req.Labels = github.Ptr(slices.Clone(ni.Labels))
	}
	is, _, err := p.gh.Issues.Create(ctx, owner, name, req)
	if err != nil {
		if httpStatus(err) == http.StatusGone {
			return nil, fmt.Errorf("issues of %q are disabled: %w", ni.Repo, errs.ErrFailedPrecondition)
		}
		return nil, p.mapErr(ctx, err, fmt.Sprintf("repository %q", ni.Repo))
	}
	var deps []int32
	for _, b := range blockers {
		ok, err := p.addDependency(ctx, owner, name, ni.Repo, is.GetNumber(), b)
		if err != nil {
			// The issue is open and its body names the blocker: report, do not fail it.
			p.log.WarnContext(ctx, "github: registering issue dependency failed", "repo", ni.Repo, "issue", is.GetNumber(), "blocked_by", b.number, "err", err)
			continue
		}
		if !ok {
			break
		}
		deps = append(deps, b.number)
	}
	return toIssue(ni.Repo, is, deps), nil
}

// UpdateIssue changes the fields of u that are set. A new blocked-by set rewrites the
// body's blocked-by lines and, where available, GitHub's dependencies (added and removed).
func (p *Provider) UpdateIssue(ctx context.Context, u forge.IssueUpdate) (*githubv1.Issue, error) {
	owner, name, err := splitRepo(u.Repo)
	if err != nil {
		return nil, err
	}
	subject := fmt.Sprintf("issue #%d in %q", u.Number, u.Repo)
	cur, err := p.getIssue(ctx, owner, name, u.Repo, u.Number)
	if err != nil {
		return nil, err
	}
	req := &github.IssueRequest{Title: u.Title}
	edit := u.Title != nil
	if u.State != nil {
		switch *u.State {
		case githubv1.IssueState_ISSUE_STATE_OPEN:
			req.State = github.Ptr("open")
		case githubv1.IssueState_ISSUE_STATE_CLOSED:
			req.State = github.Ptr("closed")
		default:
			return nil, fmt.Errorf("state %s: %w", *u.State, errs.ErrInvalid)
		}
		edit = true
	}
	if u.Labels != nil {
		req.Labels = github.Ptr(append([]string{}, (*u.Labels)...))
		edit = true
	}
	body := cur.GetBody()
	if u.Body != nil {
		body = *u.Body
	}
	var blockers []blocker
	if u.BlockedBy != nil {
		if slices.Contains(*u.BlockedBy, u.Number) {
			return nil, fmt.Errorf("issue #%d cannot block itself: %w", u.Number, errs.ErrInvalid)
		}
		if blockers, err = p.issueIDs(ctx, owner, name, u.Repo, *u.BlockedBy); err != nil {
			return nil, err
		}
		body = forge.WithBlockedBy(body, *u.BlockedBy)
	}
	if u.Body != nil || body != cur.GetBody() {
		req.Body = github.Ptr(body)
		edit = true
	}
	is := &cur.Issue
	if edit {
		if is, _, err = p.gh.Issues.Edit(ctx, owner, name, int(u.Number), req); err != nil {
			return nil, p.mapErr(ctx, err, subject)
		}
	}
	if u.BlockedBy != nil {
		if err := p.syncDependencies(ctx, owner, name, u.Repo, int(u.Number), blockers); err != nil {
			return nil, err
		}
	}
	deps, err := p.dependencies(ctx, owner, name, u.Repo, &ghIssue{Issue: *is})
	if err != nil {
		return nil, err
	}
	return toIssue(u.Repo, is, deps), nil
}

// Comment adds a comment to an issue or pull request.
func (p *Provider) Comment(ctx context.Context, repo string, number int32, body string, _ forge.Actor) (*githubv1.IssueComment, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return nil, err
	}
	c, _, err := p.gh.Issues.CreateComment(ctx, owner, name, int(number), &github.IssueComment{Body: github.Ptr(body)})
	if err != nil {
		return nil, p.mapErr(ctx, err, fmt.Sprintf("issue #%d in %q", number, repo))
	}
	return &githubv1.IssueComment{
		Id:         strconv.FormatInt(c.GetID(), 10),
		Body:       c.GetBody(),
		Author:     c.GetUser().GetLogin(),
		Url:        c.GetHTMLURL(),
		CreateTime: ts(c.CreatedAt),
	}, nil
}

// toIssue converts an issue; blocked_by is the union of the body's blocked-by lines and
// deps (GitHub's dependencies).
func toIssue(repo string, is *github.Issue, deps []int32) *githubv1.Issue {
	out := &githubv1.Issue{
		Repo:         repo,
		Number:       int32(is.GetNumber()),
		Title:        is.GetTitle(),
		Body:         is.GetBody(),
		State:        githubv1.IssueState_ISSUE_STATE_OPEN,
		Url:          is.GetHTMLURL(),
		Author:       is.GetUser().GetLogin(),
		CommentCount: int32(is.GetComments()),
		CreateTime:   ts(is.CreatedAt),
		UpdateTime:   ts(is.UpdatedAt),
	}
	if is.GetState() == "closed" {
		out.State = githubv1.IssueState_ISSUE_STATE_CLOSED
		out.CloseTime = ts(is.ClosedAt)
	}
	for _, l := range is.Labels {
		out.Labels = append(out.Labels, l.GetName())
	}
	for _, a := range is.Assignees {
		out.Assignees = append(out.Assignees, a.GetLogin())
	}
	bb := append(forge.ParseBlockedBy(is.GetBody()), deps...)
	slices.Sort(bb)
	out.BlockedBy = slices.Compact(bb)
	return out
}
