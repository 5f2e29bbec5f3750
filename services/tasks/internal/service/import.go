package service

import (
	"context"
	"errors"
	"fmt"
	"slices"

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
	numbers, err := issueNumbers(req.GetNumbers())
	if err != nil {
		return nil, err
	}
	if s.github == nil {
		return nil, errs.Precondition("the github service is not configured: importing issues needs it (THEFOLD_GITHUB_ADDR)")
	}
	if len(numbers) > 0 {
		return s.importSome(ctx, owner, req.GetRepo(), labels, numbers)
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
		items = append(items, importItem(owner, req.GetRepo(), is))
	}
	return s.importItems(ctx, owner, items, 0)
}

// maxNumbers bounds the issues one ImportIssues names.
const maxNumbers = 100

// issueNumbers checks the numbers of ImportIssuesRequest and drops repeats.
func issueNumbers(in []int32) ([]int32, error) {
	if len(in) > maxNumbers {
		return nil, errs.Invalid("numbers", "at most %d issues, got %d", maxNumbers, len(in))
	}
	var out []int32
	for i, n := range in {
		if n < 1 {
			return nil, errs.Invalid(fmt.Sprintf("numbers[%d]", i), "an issue number is 1 or more, got %d", n)
		}
		if !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// importSome imports the issues numbers names, read one by one in whatever state they are
// (ImportIssuesRequest.numbers): an issue that no longer exists is skipped.
func (s *Server) importSome(ctx context.Context, owner, repo string, labels []string, numbers []int32) (*tasksv1.ImportIssuesResponse, error) {
	items := make([]store.ImportItem, 0, len(numbers))
	gone := 0
	for _, n := range numbers {
		resp, err := s.github.GetIssue(ctx, &githubv1.GetIssueRequest{Repo: repo, Number: n})
		if err != nil {
			var d *errs.Downstream
			if errors.As(err, &d) && d.Status.Code() == codes.NotFound {
				// The issue or the repository is gone (deleted, transferred): a repository
				// the caller cannot read any more is NOT_FOUND on the first issue too.
				if _, rerr := s.github.GetRepo(ctx, &githubv1.GetRepoRequest{Repo: repo}); rerr != nil {
					return nil, s.githubError(ctx, repo, rerr)
				}
				gone++
				continue
			}
			return nil, s.githubError(ctx, repo, err)
		}
		is := resp.GetIssue()
		it := importItem(owner, repo, is)
		it.Closed = is.GetState() == githubv1.IssueState_ISSUE_STATE_CLOSED
		it.Existing = it.Closed || !hasLabels(is.GetLabels(), labels)
		items = append(items, it)
	}
	return s.importItems(ctx, owner, items, gone)
}

// importItem is the task issue is imported as.
func importItem(owner, repo string, is *githubv1.Issue) store.ImportItem {
	t := &tasksv1.Task{
		OwnerId: owner, Repo: repo, Title: validate.Truncate(is.GetTitle(), maxTitle), Description: validate.Truncate(is.GetBody(), maxDescription),
		Status: tasksv1.TaskStatus_TASK_STATUS_BACKLOG, Source: tasksv1.TaskSource_TASK_SOURCE_GITHUB,
		Priority: typev1.Priority_PRIORITY_MEDIUM, Labels: importLabels(is.GetLabels()),
		ExternalId: issueKey(repo, is.GetNumber()), ExternalUrl: is.GetUrl(),
	}
	it := store.ImportItem{Task: t}
	for _, b := range is.GetBlockedBy() {
		it.BlockedBy = append(it.BlockedBy, issueKey(repo, b))
	}
	return it
}

// importItems stores items and says what changed; skipped counts issues already passed over.
func (s *Server) importItems(ctx context.Context, owner string, items []store.ImportItem, skipped int) (*tasksv1.ImportIssuesResponse, error) {
	res, err := s.store.Import(ctx, owner, items)
	if err != nil {
		return nil, err
	}
	return &tasksv1.ImportIssuesResponse{Created: res.Created, Updated: res.Updated, Skipped: int32(res.Skipped + skipped)}, nil
}

// hasLabels reports whether have carries every label of want.
func hasLabels(have, want []string) bool {
	for _, l := range want {
		if !slices.Contains(have, l) {
			return false
		}
	}
	return true
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
