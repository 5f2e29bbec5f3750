package service

import (
	"context"
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"

	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/tasks/internal/store"
)

// maxImport bounds the issues one ImportIssues reads.
const maxImport = 2000

// WithGitHub sets the github service client ImportIssues lists issues with.
func WithGitHub(c githubv1.RepoServiceClient) Option { return func(s *Server) { s.github = c } }

// ImportIssues turns a repository's open issues into tasks (source github): one task per
// issue, keyed by "github:owner/name#N", so a second import updates instead of duplicating;
// blocked-by links between issues become task dependencies.
func (s *Server) ImportIssues(ctx context.Context, req *tasksv1.ImportIssuesRequest) (*tasksv1.ImportIssuesResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := validate.Repo("repo", req.GetRepo(), true); err != nil {
		return nil, err
	}
	labels, err := validate.Labels("labels", req.GetLabels(), maxLabel, maxLabels)
	if err != nil {
		return nil, err
	}
	if s.github == nil {
		return nil, errs.Precondition("the github service is not configured: importing issues needs it (THEFOLD_GITHUB_ADDR)")
	}
	var issues []*githubv1.Issue
	for token := ""; ; {
		page, err := s.github.ListIssues(ctx, &githubv1.ListIssuesRequest{Repo: req.GetRepo(), State: githubv1.IssueState_ISSUE_STATE_OPEN,
			Labels: labels, PageSize: 200, PageToken: token})
		if err != nil {
			return nil, s.githubError(ctx, req.GetRepo(), err)
		}
		issues = append(issues, page.GetIssues()...)
		if len(issues) > maxImport {
			return nil, errs.Precondition("%s has more than %d open issues; import a subset with labels", req.GetRepo(), maxImport)
		}
		if token = page.GetNextPageToken(); token == "" {
			break
		}
	}
	items := make([]store.ImportItem, 0, len(issues))
	for _, is := range issues {
		t := &tasksv1.Task{
			OwnerId: owner, Repo: req.GetRepo(), Title: validate.Truncate(is.GetTitle(), maxTitle), Description: validate.Truncate(is.GetBody(), maxDescription),
			Status: tasksv1.TaskStatus_TASK_STATUS_BACKLOG, Source: tasksv1.TaskSource_TASK_SOURCE_GITHUB,
			Priority: typev1.Priority_PRIORITY_MEDIUM, Labels: importLabels(is.GetLabels()),
			ExternalId: issueKey(req.GetRepo(), is.GetNumber()), ExternalUrl: is.GetUrl(),
		}
		it := store.ImportItem{Task: t}
		for _, b := range is.GetBlockedBy() {
			it.BlockedBy = append(it.BlockedBy, issueKey(req.GetRepo(), b))
		}
		items = append(items, it)
	}
	res, err := s.store.Import(ctx, owner, items)
	if err != nil {
		return nil, err
	}
	return &tasksv1.ImportIssuesResponse{Created: res.Created, Updated: res.Updated, Skipped: int32(res.Skipped)}, nil
}

// issueKey is an imported issue's external id.
func issueKey(repo string, n int32) string { return fmt.Sprintf("github:%s#%d", repo, n) }

// githubError maps a failed ListIssues on purpose: the repository's absence is the
// caller's NOT_FOUND; the rest says the github service could not answer.
func (s *Server) githubError(ctx context.Context, repo string, err error) error {
	var d *errs.Downstream
	if !errors.As(err, &d) {
		return err
	}
	code := d.Status.Code()
	s.log.WarnContext(ctx, "github ListIssues failed", "repo", repo, "code", code.String(), "err", err)
	switch code {
	case codes.NotFound:
		return errs.Public(codes.NotFound, "repository %q not found", repo).Wrap(err)
	case codes.FailedPrecondition:
		return errs.Public(codes.FailedPrecondition, "the github service cannot list the issues of %s: %s", repo, validate.Truncate(d.Status.Message(), 300)).Wrap(err)
	}
	return errs.Public(codes.Unavailable, "the github service could not list the issues of %s (%s); try again later", repo, code).Wrap(err)
}

// importLabels keeps the labels a task can carry: within the length and count limits.
func importLabels(in []string) []string {
	var out []string
	for _, l := range in {
		if l != "" && len([]rune(l)) <= maxLabel && len(out) < maxLabels {
			out = append(out, l)
		}
	}
	return out
}
