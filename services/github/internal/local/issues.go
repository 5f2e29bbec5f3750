package local

import (
	"context"
	"errors"
	"fmt"

	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"

	"github.com/thefold/thefold/services/github/internal/forge"
	"github.com/thefold/thefold/services/github/internal/store"
)

// Issues and comments of the local forge.

// ListIssues lists issues, newest first.
func (p *Provider) ListIssues(ctx context.Context, q forge.IssueQuery, a forge.Actor) ([]*githubv1.Issue, string, error) {
	if _, err := p.repo(ctx, q.Repo, a); err != nil {
		return nil, "", err
	}
	before, err := cursorNumber(q.Page.Cursor)
	if err != nil {
		return nil, "", err
	}
	rows, err := p.store.ListIssues(ctx, store.IssueFilter{Repo: q.Repo, State: q.State, Labels: q.Labels, Before: before, Limit: q.Page.Size + 1})
	if err != nil {
		return nil, "", err
	}
	rows, next := page(rows, q.Page.Size, (*githubv1.Issue).GetNumber)
	for _, i := range rows {
		i.Url = p.url(i.GetRepo(), "issues", i.GetNumber())
	}
	return rows, next, nil
}

// GetIssue returns an issue.
func (p *Provider) GetIssue(ctx context.Context, repo string, number int32, a forge.Actor) (*githubv1.Issue, error) {
	if _, err := p.repo(ctx, repo, a); err != nil {
		return nil, err
	}
	i, err := p.store.GetIssue(ctx, repo, number)
	if err != nil {
		return nil, err
	}
	i.Url = p.url(repo, "issues", number)
	return i, nil
}

// blockers checks that every blocker is another issue of the repository.
func (p *Provider) blockers(ctx context.Context, repo string, self int32, nums []int32) error {
	for _, n := range nums {
		if n == self {
			return fmt.Errorf("blocked_by: an issue cannot block itself (#%d): %w", n, errs.ErrInvalid)
		}
		if _, err := p.store.GetIssue(ctx, repo, n); errors.Is(err, errs.ErrNotFound) {
			return fmt.Errorf("blocked_by: #%d is not an issue of %s: %w", n, repo, errs.ErrInvalid)
		} else if err != nil {
			return err
		}
	}
	return nil
}

// CreateIssue opens an issue. Its blockers are those asked for and those its body names;
// the body's "Blocked by" line is rewritten to name them all.
func (p *Provider) CreateIssue(ctx context.Context, ni forge.NewIssue) (*githubv1.Issue, error) {
	if _, err := p.repo(ctx, ni.Repo, ni.Actor); err != nil {
		return nil, err
	}
	blocked := append(forge.ParseBlockedBy(ni.Body), ni.BlockedBy...)
	if err := p.blockers(ctx, ni.Repo, 0, blocked); err != nil {
		return nil, err
	}
	body := ni.Body
	if len(blocked) > 0 {
		body = forge.WithBlockedBy(body, blocked)
	}
	i, err := p.store.CreateIssue(ctx, &githubv1.Issue{Repo: ni.Repo, Title: ni.Title, Body: body, Labels: ni.Labels,
		BlockedBy: forge.ParseBlockedBy(body), Author: ni.Actor.UserID})
	if err != nil {
		return nil, err
	}
	i.Url = p.url(ni.Repo, "issues", i.GetNumber())
	return i, nil
}

// UpdateIssue changes an issue's fields.
func (p *Provider) UpdateIssue(ctx context.Context, u forge.IssueUpdate) (*githubv1.Issue, error) {
	cur, err := p.GetIssue(ctx, u.Repo, u.Number, u.Actor)
	if err != nil {
		return nil, err
	}
	su := store.IssueUpdate{State: u.State, Labels: u.Labels, Title: u.Title, Body: u.Body}
	body := cur.GetBody()
	if u.Body != nil {
		body = *u.Body
	}
	blocked := forge.ParseBlockedBy(body)
	if u.BlockedBy != nil {
		blocked = *u.BlockedBy
	}
	if u.Body != nil || u.BlockedBy != nil {
		if err := p.blockers(ctx, u.Repo, u.Number, blocked); err != nil {
			return nil, err
		}
		body = forge.WithBlockedBy(body, blocked)
		blocked = forge.ParseBlockedBy(body)
		su.Body, su.BlockedBy = &body, &blocked
	}
	i, err := p.store.UpdateIssue(ctx, u.Repo, u.Number, su)
	if err != nil {
		return nil, err
	}
	i.Url = p.url(u.Repo, "issues", u.Number)
	return i, nil
}

// Comment adds a comment to an issue or pull request.
func (p *Provider) Comment(ctx context.Context, repo string, number int32, body string, a forge.Actor) (*githubv1.IssueComment, error) {
	if _, err := p.repo(ctx, repo, a); err != nil {
		return nil, err
	}
	c, err := p.store.AddComment(ctx, repo, number, body, a.UserID)
	if err != nil {
		return nil, err
	}
	c.Url = p.url(repo, "issues", number) + "#comment-" + c.GetId()
	return c, nil
}
