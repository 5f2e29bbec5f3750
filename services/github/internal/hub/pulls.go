package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/google/go-github/v84/github"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/services/github/internal/forge"
)

// CreatePullRequest opens a pull request; when GitHub answers that one from head to base is
// already open, that one is returned (created false). Labels are added after opening (on
// the existing one too, so a retry completes a first attempt that failed midway).
func (p *Provider) CreatePullRequest(ctx context.Context, np forge.NewPullRequest) (*githubv1.PullRequest, bool, error) {
	owner, name, err := splitRepo(np.Repo)
	if err != nil {
		return nil, false, err
	}
	base := np.Base
	if base == "" {
		r, err := p.getRepo(ctx, np.Repo)
		if err != nil {
			return nil, false, err
		}
		base = r.GetDefaultBranch()
	}
	pr, _, err := p.gh.PullRequests.Create(ctx, owner, name, &github.NewPullRequest{
		Title: github.Ptr(np.Title),
		Head:  github.Ptr(np.Head),
		Base:  github.Ptr(base),
		Body:  github.Ptr(np.Body),
		Draft: github.Ptr(np.Draft),
	})
	created := err == nil
	switch {
	case err == nil:
	case isStatus(err, http.StatusUnprocessableEntity, "already exists"):
		p.log.DebugContext(ctx, "github: pull request already open", "repo", np.Repo, "head", np.Head, "base", base, "err", err)
		if pr, err = p.openPullRequest(ctx, owner, name, np.Repo, np.Head, base); err != nil {
			return nil, false, err
		}
	case isStatus(err, http.StatusUnprocessableEntity, "no commits between"):
		p.log.DebugContext(ctx, "github: nothing to pull", "repo", np.Repo, "err", err)
		return nil, false, fmt.Errorf("no commits between %q and %q: %w", base, np.Head, errs.ErrFailedPrecondition)
	case httpStatus(err) == http.StatusUnprocessableEntity && invalidField(err) == "head":
		return nil, false, fmt.Errorf("branch %q in %q: %w", np.Head, np.Repo, errs.ErrNotFound)
	case httpStatus(err) == http.StatusUnprocessableEntity && invalidField(err) == "base":
		return nil, false, fmt.Errorf("branch %q in %q: %w", base, np.Repo, errs.ErrNotFound)
	default:
		return nil, false, p.mapErr(ctx, err, fmt.Sprintf("repository %q", np.Repo))
	}
	if err := p.ensureLabels(ctx, owner, name, np.Repo, pr, np.Labels); err != nil {
		return nil, false, err
	}
	return toPR(np.Repo, pr), created, nil
}

// invalidField is the field a 422's first validation error names ("head", "base").
func invalidField(err error) string {
	if er, ok := errors.AsType[*github.ErrorResponse](err); ok {
		for _, e := range er.Errors {
			if e.Field != "" {
				return e.Field
			}
		}
	}
	return ""
}

// openPullRequest finds the open pull request from head to base.
func (p *Provider) openPullRequest(ctx context.Context, owner, name, repo, head, base string) (*github.PullRequest, error) {
	list, _, err := read(ctx, p, func(ctx context.Context) ([]*github.PullRequest, *github.Response, error) {
		return p.gh.PullRequests.List(ctx, owner, name, &github.PullRequestListOptions{
			State: "open", Head: headFilter(owner, head), Base: base, ListOptions: github.ListOptions{PerPage: 10},
		})
	})
	if err != nil {
		return nil, p.mapErr(ctx, err, fmt.Sprintf("repository %q", repo))
	}
	if len(list) == 0 {
		// GitHub said it exists but does not list it: it closed meanwhile. Let the caller retry.
		return nil, fmt.Errorf("pull request from %q to %q changed meanwhile; try again: %w", head, base, errs.ErrConflict)
	}
	return list[0], nil
}

// headFilter is GitHub's head filter, "owner:branch" (a head already naming its owner, a
// fork's, is kept).
func headFilter(owner, head string) string {
	if head == "" || strings.Contains(head, ":") {
		return head
	}
	return owner + ":" + head
}

// ensureLabels adds the labels pr lacks.
func (p *Provider) ensureLabels(ctx context.Context, owner, name, repo string, pr *github.PullRequest, labels []string) error {
	var missing []string
	for _, l := range labels {
		if !slices.ContainsFunc(pr.Labels, func(x *github.Label) bool { return strings.EqualFold(x.GetName(), l) }) {
			missing = append(missing, l)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	got, _, err := p.gh.Issues.AddLabelsToIssue(ctx, owner, name, pr.GetNumber(), missing)
	if err != nil {
		return p.mapErr(ctx, err, fmt.Sprintf("pull request #%d in %q", pr.GetNumber(), repo))
	}
	pr.Labels = got
	return nil
}

// GetPullRequest returns one pull request.
func (p *Provider) GetPullRequest(ctx context.Context, repo string, number int32, _ forge.Actor) (*githubv1.PullRequest, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return nil, err
	}
	pr, err := p.getPR(ctx, owner, name, repo, number)
	if err != nil {
		return nil, err
	}
	return toPR(repo, pr), nil
}

func (p *Provider) getPR(ctx context.Context, owner, name, repo string, number int32) (*github.PullRequest, error) {
	pr, _, err := read(ctx, p, func(ctx context.Context) (*github.PullRequest, *github.Response, error) {
		return p.gh.PullRequests.Get(ctx, owner, name, int(number))
	})
	if err != nil {
		return nil, p.mapErr(ctx, err, fmt.Sprintf("pull request #%d in %q", number, repo))
	}
	return pr, nil
}

// ListPullRequests lists pull requests newest first. GitHub knows open and closed only: a
// MERGED or CLOSED filter asks for closed ones and keeps those merged or not; a page that
// the filter leaves empty is followed by the next (up to a few), so an empty page means
// the end.
func (p *Provider) ListPullRequests(ctx context.Context, q forge.PullRequestQuery, _ forge.Actor) ([]*githubv1.PullRequest, string, error) {
	owner, name, err := splitRepo(q.Repo)
	if err != nil {
		return nil, "", err
	}
	lo, err := pageOpts(q.Page)
	if err != nil {
		return nil, "", err
	}
	opts := &github.PullRequestListOptions{
		State: "all", Head: headFilter(owner, q.Head), Base: q.Base, Sort: "created", Direction: "desc", ListOptions: lo,
	}
	switch q.State {
	case githubv1.PullRequestState_PULL_REQUEST_STATE_OPEN:
		opts.State = "open"
	case githubv1.PullRequestState_PULL_REQUEST_STATE_CLOSED, githubv1.PullRequestState_PULL_REQUEST_STATE_MERGED:
		opts.State = "closed"
	}
	var out []*githubv1.PullRequest
	var resp *github.Response
	for range maxSkippedPages {
		var list []*github.PullRequest
		list, resp, err = read(ctx, p, func(ctx context.Context) ([]*github.PullRequest, *github.Response, error) {
			return p.gh.PullRequests.List(ctx, owner, name, opts)
		})
		if err != nil {
			return nil, "", p.mapErr(ctx, err, fmt.Sprintf("repository %q", q.Repo))
		}
		for _, pr := range list {
			c := toPR(q.Repo, pr)
			if q.State == githubv1.PullRequestState_PULL_REQUEST_STATE_UNSPECIFIED || c.State == q.State {
				out = append(out, c)
			}
		}
		if len(out) > 0 || resp.NextPage == 0 {
			break
		}
		opts.Page = resp.NextPage
	}
	return out, nextCursor(resp, lo.PerPage), nil
}

// PullRequestDiff lists every file a pull request changes, with its patch. Unpinned (or
// pinned to the current head) it reads GitHub's file list of the pull request, all pages,
// and the merge base from the comparison of base and head. Pinned to a head the pull
// request has moved from, it compares the pinned commits (base...head, three dots: from
// their merge base), which GitHub limits to 300 files.
func (p *Provider) PullRequestDiff(ctx context.Context, repo string, number int32, pin *forge.DiffPin, _ forge.Actor) (*forge.Diff, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return nil, err
	}
	pr, err := p.getPR(ctx, owner, name, repo, number)
	if err != nil {
		return nil, err
	}
	subject := fmt.Sprintf("pull request #%d in %q", number, repo)
	d := &forge.Diff{HeadSHA: pr.GetHead().GetSHA()}
	var files []*github.CommitFile
	if pin != nil && pin.HeadSHA != "" && pin.HeadSHA != d.HeadSHA {
		d.BaseSHA, d.HeadSHA = pin.BaseSHA, pin.HeadSHA
		cmp, err := p.compare(ctx, owner, name, pin.BaseSHA, pin.HeadSHA)
		if err != nil {
			return nil, p.mapErr(ctx, err, subject)
		}
		if len(cmp.Files) >= 300 {
			p.log.WarnContext(ctx, "github: pinned diff may be cut at GitHub's 300 files", "repo", repo, "number", number)
		}
		files = cmp.Files
	} else {
		if files, err = p.prFiles(ctx, owner, name, int(number)); err != nil {
			return nil, p.mapErr(ctx, err, subject)
		}
		if pin != nil {
			d.BaseSHA = pin.BaseSHA
		} else {
			d.BaseSHA = p.mergeBase(ctx, owner, name, pr)
		}
	}
	d.Files = make([]*typev1.FileDiff, 0, len(files))
	d.Stats = &typev1.DiffStats{}
	for _, f := range files {
		fd := toFileDiff(f)
		d.Files = append(d.Files, fd)
		d.Stats.Additions += fd.Additions
		d.Stats.Deletions += fd.Deletions
	}
	d.Stats.FilesChanged = int32(len(d.Files))
	slices.SortFunc(d.Files, func(a, b *typev1.FileDiff) int { return strings.Compare(a.Path, b.Path) })
	return d, nil
}

func (p *Provider) compare(ctx context.Context, owner, name, base, head string) (*github.CommitsComparison, error) {
	cmp, _, err := read(ctx, p, func(ctx context.Context) (*github.CommitsComparison, *github.Response, error) {
		return p.gh.Repositories.CompareCommits(ctx, owner, name, base, head, &github.ListOptions{PerPage: 1})
	})
	return cmp, err
}

// mergeBase is the merge base of a pull request's base and head. GitHub's pull request
// only names the base branch's commit; the comparison names the merge base. When the
// comparison fails, the base commit stands in (a three-dot comparison from it is the same
// diff) and the failure is logged.
func (p *Provider) mergeBase(ctx context.Context, owner, name string, pr *github.PullRequest) string {
	base := pr.GetBase().GetSHA()
	cmp, err := p.compare(ctx, owner, name, base, pr.GetHead().GetSHA())
	if err != nil || cmp.GetMergeBaseCommit().GetSHA() == "" {
		p.log.WarnContext(ctx, "github: merge base unknown; using the base commit", "repo", owner+"/"+name, "number", pr.GetNumber(), "err", err)
		return base
	}
	return cmp.GetMergeBaseCommit().GetSHA()
}

// prFiles reads every page of a pull request's files.
func (p *Provider) prFiles(ctx context.Context, owner, name string, number int) ([]*github.CommitFile, error) {
	var all []*github.CommitFile
	opts := &github.ListOptions{PerPage: maxPerPage, Page: 1}
	for {
		list, resp, err := read(ctx, p, func(ctx context.Context) ([]*github.CommitFile, *github.Response, error) {
			return p.gh.PullRequests.ListFiles(ctx, owner, name, number, opts)
		})
		if err != nil {
			return nil, err
		}
		all = append(all, list...)
		if resp.NextPage == 0 {
			return all, nil
		}
		opts.Page = resp.NextPage
	}
}

// toFileDiff converts one of GitHub's changed files. GitHub gives a file's patch without
// the ---/+++ header lines, which are added. A file without a patch is binary when GitHub
// counted no changed lines (that is how it reports binary files); with lines counted, its
// diff was too large for GitHub to show, and unified_diff stays empty with the counts kept.
func toFileDiff(f *github.CommitFile) *typev1.FileDiff {
	fd := &typev1.FileDiff{
		Path:      f.GetFilename(),
		Action:    typev1.FileAction_FILE_ACTION_MODIFY,
		Additions: int32(f.GetAdditions()),
		Deletions: int32(f.GetDeletions()),
	}
	from, to := "a/"+fd.Path, "b/"+fd.Path
	switch f.GetStatus() {
	case "added":
		fd.Action, from = typev1.FileAction_FILE_ACTION_CREATE, "/dev/null"
	case "removed":
		fd.Action, to = typev1.FileAction_FILE_ACTION_DELETE, "/dev/null"
	case "renamed":
		fd.PreviousPath = f.GetPreviousFilename()
		from = "a/" + fd.PreviousPath
	}
	patch := f.GetPatch()
	switch {
	case patch != "":
		fd.UnifiedDiff = "--- " + from + "\n+++ " + to + "\n" + patch
		if !strings.HasSuffix(patch, "\n") {
			fd.UnifiedDiff += "\n"
		}
	case f.GetChanges() == 0 && f.GetStatus() != "renamed":
		fd.Binary = true
	}
	return fd
}

// MergePullRequest merges an open pull request. An already merged one is returned as it is;
// a closed or unmergeable one is ErrFailedPrecondition; a head other than ExpectedHeadSHA is
// ErrConflict (checked here and, against a race, by GitHub through the sha it is sent).
func (p *Provider) MergePullRequest(ctx context.Context, m forge.MergeSpec) (*githubv1.PullRequest, error) {
	owner, name, err := splitRepo(m.Repo)
	if err != nil {
		return nil, err
	}
	subject := fmt.Sprintf("pull request #%d in %q", m.Number, m.Repo)
	pr, err := p.getPR(ctx, owner, name, m.Repo, m.Number)
	if err != nil {
		return nil, err
	}
	switch prState(pr) {
	case githubv1.PullRequestState_PULL_REQUEST_STATE_MERGED:
		return p.afterClose(ctx, owner, name, m.Repo, pr, m.DeleteBranch)
	case githubv1.PullRequestState_PULL_REQUEST_STATE_CLOSED:
		return nil, fmt.Errorf("%s is closed: %w", subject, errs.ErrFailedPrecondition)
	}
	if m.ExpectedHeadSHA != "" && m.ExpectedHeadSHA != pr.GetHead().GetSHA() {
		return nil, fmt.Errorf("head of %s is %s, not the expected %s: %w", subject, pr.GetHead().GetSHA(), m.ExpectedHeadSHA, errs.ErrConflict)
	}
	method := "squash"
	switch m.Method {
	case githubv1.MergeMethod_MERGE_METHOD_MERGE:
		method = "merge"
	case githubv1.MergeMethod_MERGE_METHOD_REBASE:
		method = "rebase"
	}
	title, msg := m.CommitTitle, m.CommitMessage
	if title == "" {
		title = fmt.Sprintf("%s (#%d)", pr.GetTitle(), m.Number)
	}
	if msg == "" {
		msg = pr.GetBody()
	}
	res, _, err := p.gh.PullRequests.Merge(ctx, owner, name, int(m.Number), msg, &github.PullRequestOptions{
		CommitTitle: title, SHA: m.ExpectedHeadSHA, MergeMethod: method, DontDefaultIfBlank: true,
	})
	switch {
	case err == nil:
	case httpStatus(err) == http.StatusMethodNotAllowed:
		p.log.InfoContext(ctx, "github: pull request not mergeable", "repo", m.Repo, "number", m.Number, "err", err)
		if again, gerr := p.getPR(ctx, owner, name, m.Repo, m.Number); gerr == nil && again.GetMerged() {
			return p.afterClose(ctx, owner, name, m.Repo, again, m.DeleteBranch)
		}
		return nil, fmt.Errorf("%s cannot be merged (conflicts, failing checks, branch protection or a disabled merge method): %w", subject, errs.ErrFailedPrecondition)
	case httpStatus(err) == http.StatusConflict:
		p.log.InfoContext(ctx, "github: pull request head moved", "repo", m.Repo, "number", m.Number, "err", err)
		return nil, fmt.Errorf("head of %s moved; re-read it and retry: %w", subject, errs.ErrConflict)
	default:
		return nil, p.mapErr(ctx, err, subject)
	}
	merged, err := p.getPR(ctx, owner, name, m.Repo, m.Number)
	if err != nil {
		// Merged all the same: answer with what the merge said.
		p.log.WarnContext(ctx, "github: re-reading merged pull request failed", "repo", m.Repo, "number", m.Number, "err", err)
		merged = pr
		merged.State, merged.Merged = github.Ptr("closed"), github.Ptr(true)
		merged.MergeCommitSHA = res.SHA
		merged.MergedAt = &github.Timestamp{Time: time.Now()}
	}
	return p.afterClose(ctx, owner, name, m.Repo, merged, m.DeleteBranch)
}

// ClosePullRequest closes an open pull request; an already closed one is returned as it
// is, a merged one is ErrFailedPrecondition.
func (p *Provider) ClosePullRequest(ctx context.Context, repo string, number int32, deleteBranch bool, _ forge.Actor) (*githubv1.PullRequest, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return nil, err
	}
	subject := fmt.Sprintf("pull request #%d in %q", number, repo)
	pr, err := p.getPR(ctx, owner, name, repo, number)
	if err != nil {
		return nil, err
	}
	switch prState(pr) {
	case githubv1.PullRequestState_PULL_REQUEST_STATE_MERGED:
		return nil, fmt.Errorf("%s is merged: %w", subject, errs.ErrFailedPrecondition)
	case githubv1.PullRequestState_PULL_REQUEST_STATE_OPEN:
		if pr, _, err = p.gh.PullRequests.Edit(ctx, owner, name, int(number), &github.PullRequest{State: github.Ptr("closed")}); err != nil {
			return nil, p.mapErr(ctx, err, subject)
		}
	}
	return p.afterClose(ctx, owner, name, repo, pr, deleteBranch)
}

// afterClose deletes a closed or merged pull request's head branch when asked (a branch of
// the same repository; one already gone is fine) and converts it.
func (p *Provider) afterClose(ctx context.Context, owner, name, repo string, pr *github.PullRequest, deleteBranch bool) (*githubv1.PullRequest, error) {
	head := pr.GetHead()
	if deleteBranch && head.GetRef() != "" && (head.GetRepo() == nil || strings.EqualFold(head.GetRepo().GetFullName(), repo)) {
		_, err := p.gh.Git.DeleteRef(ctx, owner, name, "heads/"+head.GetRef())
		switch {
		case err == nil, httpStatus(err) == http.StatusUnprocessableEntity, httpStatus(err) == http.StatusNotFound:
			p.log.DebugContext(ctx, "github: head branch deleted", "repo", repo, "branch", head.GetRef(), "err", err)
		default:
			return nil, p.mapErr(ctx, err, fmt.Sprintf("branch %q in %q", head.GetRef(), repo))
		}
	}
	return toPR(repo, pr), nil
}

func prState(pr *github.PullRequest) githubv1.PullRequestState {
	switch {
	case pr.GetMerged() || pr.MergedAt != nil:
		return githubv1.PullRequestState_PULL_REQUEST_STATE_MERGED
	case pr.GetState() == "closed":
		return githubv1.PullRequestState_PULL_REQUEST_STATE_CLOSED
	}
	return githubv1.PullRequestState_PULL_REQUEST_STATE_OPEN
}

func toPR(repo string, pr *github.PullRequest) *githubv1.PullRequest {
	out := &githubv1.PullRequest{
		Repo:      repo,
		Number:    int32(pr.GetNumber()),
		Url:       pr.GetHTMLURL(),
		Title:     pr.GetTitle(),
		Body:      pr.GetBody(),
		Head:      pr.GetHead().GetRef(),
		Base:      pr.GetBase().GetRef(),
		HeadSha:   pr.GetHead().GetSHA(),
		BaseSha:   pr.GetBase().GetSHA(),
		State:     prState(pr),
		Draft:     pr.GetDraft(),
		Author:    pr.GetUser().GetLogin(),
		Mergeable: pr.Mergeable,
	}
	for _, l := range pr.Labels {
		out.Labels = append(out.Labels, l.GetName())
	}
	if pr.ChangedFiles != nil {
		out.Stats = &typev1.DiffStats{
			FilesChanged: int32(pr.GetChangedFiles()),
			Additions:    int32(pr.GetAdditions()),
			Deletions:    int32(pr.GetDeletions()),
		}
	}
	if out.State == githubv1.PullRequestState_PULL_REQUEST_STATE_MERGED {
		// For an open pull request GitHub's merge_commit_sha is a test merge, not a merge.
		out.MergeCommitSha = pr.GetMergeCommitSHA()
		out.MergeTime = ts(pr.MergedAt)
	}
	out.CreateTime, out.UpdateTime = ts(pr.CreatedAt), ts(pr.UpdatedAt)
	if out.State != githubv1.PullRequestState_PULL_REQUEST_STATE_OPEN {
		out.CloseTime = ts(pr.ClosedAt)
	}
	return out
}

func ts(t *github.Timestamp) *timestamppb.Timestamp {
	if t == nil || t.IsZero() {
		return nil
	}
	return timestamppb.New(t.Time)
}
