package service

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/github/internal/forge"
)

const (
	maxTitle   = 256
	maxBody    = 65536
	maxLabel   = 50
	maxLabels  = 100
	maxBlocked = 50
)

// CreateBranch creates a branch from a ref unless it exists.
func (s *Server) CreateBranch(ctx context.Context, req *githubv1.CreateBranchRequest) (*githubv1.CreateBranchResponse, error) {
	if err := checkBranch("branch", req.GetBranch(), true); err != nil {
		return nil, err
	}
	if err := checkRef("from_ref", req.GetFromRef()); err != nil {
		return nil, err
	}
	ctx, p, from, empty, err := s.resolve(ctx, req.GetRepo(), req.GetFromRef(), forge.RoleWrite)
	if err != nil {
		if isNotFound(err) && req.GetFromRef() != "" && !strings.Contains(err.Error(), "repository") {
			return nil, errs.Invalid("from_ref", "%q names no branch, tag or commit", req.GetFromRef())
		}
		return nil, err
	}
	if empty {
		return nil, errs.Precondition("repository %q is empty: a branch needs a commit to start from (InitRepo makes one)", req.GetRepo())
	}
	a, _ := actor(ctx)
	sha, created, err := p.CreateBranch(ctx, req.GetRepo(), req.GetBranch(), from, a)
	if err != nil {
		return nil, err
	}
	return &githubv1.CreateBranchResponse{Branch: req.GetBranch(), CommitSha: sha, Created: created}, nil
}

// CommitFiles commits file changes to a branch as one commit.
func (s *Server) CommitFiles(ctx context.Context, req *githubv1.CommitFilesRequest) (*githubv1.CommitFilesResponse, error) {
	ctx, p, a, err := s.target(ctx, req.GetRepo(), forge.RoleWrite)
	if err != nil {
		return nil, err
	}
	if err := checkBranch("branch", req.GetBranch(), true); err != nil {
		return nil, err
	}
	if _, err := validate.RequiredText("message", req.GetMessage(), maxMessage); err != nil {
		return nil, err
	}
	if len(req.GetFiles()) == 0 {
		return nil, errs.Invalid("files", "required: at least one file change")
	}
	if err := checkChanges("files", req.GetFiles(), false); err != nil {
		return nil, err
	}
	if err := checkSHA("expected_parent_sha", req.GetExpectedParentSha()); err != nil {
		return nil, err
	}
	if err := validate.RequestID("request_id", req.GetRequestId()); err != nil {
		return nil, err
	}
	author, err := checkAuthor(req.GetAuthorName(), req.GetAuthorEmail())
	if err != nil {
		return nil, err
	}
	out := &githubv1.CommitFilesResponse{}
	replayed, err := s.once(ctx, "CommitFiles", req.GetRequestId(), req, out, func() (proto.Message, error) {
		return p.Commit(ctx, forge.CommitSpec{Repo: req.GetRepo(), Branch: req.GetBranch(), Message: req.GetMessage(),
			Files: req.GetFiles(), ExpectedParent: req.GetExpectedParentSha(), Author: author, Actor: a})
	})
	if err != nil {
		return nil, err
	}
	out.Replayed = replayed
	return out, nil
}

// checkAuthor checks a commit author; both parts or neither.
func checkAuthor(name, email string) (forge.Signature, error) {
	for field, v := range map[string]string{"author_name": name, "author_email": email} {
		if err := validate.MaxLen(field, v, 256); err != nil {
			return forge.Signature{}, err
		}
		if strings.ContainsAny(v, "<>\n\r") {
			return forge.Signature{}, errs.Invalid(field, "must not contain '<', '>' or line breaks")
		}
	}
	if email != "" && !strings.Contains(email, "@") {
		return forge.Signature{}, errs.Invalid("author_email", "%q is not an e-mail address", validate.Truncate(email, 64))
	}
	return forge.Signature{Name: name, Email: email}, nil
}

// targetNumber is target for an issue or pull request number of the repository.
func (s *Server) targetNumber(ctx context.Context, repo string, number int32, need forge.Role) (context.Context, forge.Provider, forge.Actor, error) {
	if err := checkNumber(number); err != nil {
		return ctx, nil, forge.Actor{}, err
	}
	return s.target(ctx, repo, need)
}

// CreatePullRequest opens a pull request.
func (s *Server) CreatePullRequest(ctx context.Context, req *githubv1.CreatePullRequestRequest) (*githubv1.CreatePullRequestResponse, error) {
	ctx, p, a, err := s.target(ctx, req.GetRepo(), forge.RoleWrite)
	if err != nil {
		return nil, err
	}
	if err := checkBranch("head", req.GetHead(), true); err != nil {
		return nil, err
	}
	if err := checkBranch("base", req.GetBase(), false); err != nil {
		return nil, err
	}
	if _, err := validate.RequiredText("title", req.GetTitle(), maxTitle); err != nil {
		return nil, err
	}
	if err := validate.MaxLen("body", req.GetBody(), maxBody); err != nil {
		return nil, err
	}
	labels, err := validate.Labels("labels", req.GetLabels(), maxLabel, maxLabels)
	if err != nil {
		return nil, err
	}
	if err := validate.RequestID("request_id", req.GetRequestId()); err != nil {
		return nil, err
	}
	out := &githubv1.CreatePullRequestResponse{}
	_, err = s.once(ctx, "CreatePullRequest", req.GetRequestId(), req, out, func() (proto.Message, error) {
		pr, created, err := p.CreatePullRequest(ctx, forge.NewPullRequest{Repo: req.GetRepo(), Head: req.GetHead(), Base: req.GetBase(),
			Title: req.GetTitle(), Body: req.GetBody(), Draft: req.GetDraft(), Labels: labels, Actor: a})
		if err != nil {
			return nil, err
		}
		return &githubv1.CreatePullRequestResponse{PullRequest: pr, Created: created}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetPullRequest returns one pull request.
func (s *Server) GetPullRequest(ctx context.Context, req *githubv1.GetPullRequestRequest) (*githubv1.GetPullRequestResponse, error) {
	ctx, p, a, err := s.targetNumber(ctx, req.GetRepo(), req.GetNumber(), forge.RoleRead)
	if err != nil {
		return nil, err
	}
	pr, err := p.GetPullRequest(ctx, req.GetRepo(), req.GetNumber(), a)
	if err != nil {
		return nil, err
	}
	return &githubv1.GetPullRequestResponse{PullRequest: pr}, nil
}

// GetPullRequestChecks returns the checks on a pull request's head commit.
func (s *Server) GetPullRequestChecks(ctx context.Context, req *githubv1.GetPullRequestChecksRequest) (*githubv1.GetPullRequestChecksResponse, error) {
	ctx, p, a, err := s.targetNumber(ctx, req.GetRepo(), req.GetNumber(), forge.RoleRead)
	if err != nil {
		return nil, err
	}
	return p.PullRequestChecks(ctx, req.GetRepo(), req.GetNumber(), a)
}

// ListPullRequests lists a repository's pull requests, newest first.
func (s *Server) ListPullRequests(ctx context.Context, req *githubv1.ListPullRequestsRequest) (*githubv1.ListPullRequestsResponse, error) {
	ctx, p, a, err := s.target(ctx, req.GetRepo(), forge.RoleRead)
	if err != nil {
		return nil, err
	}
	if err := validate.Enum("state", req.GetState(), true); err != nil {
		return nil, err
	}
	if err := checkBranch("head", req.GetHead(), false); err != nil {
		return nil, err
	}
	if err := checkBranch("base", req.GetBase(), false); err != nil {
		return nil, err
	}
	size, err := validate.PageSize(req.GetPageSize(), 50, 200)
	if err != nil {
		return nil, err
	}
	cursor, err := decodeCursor(req.GetPageToken(), "p1", req.GetRepo(), "ListPullRequests")
	if err != nil {
		return nil, err
	}
	prs, next, err := p.ListPullRequests(ctx, forge.PullRequestQuery{Repo: req.GetRepo(), State: req.GetState(), Head: req.GetHead(),
		Base: req.GetBase(), Page: forge.Page{Size: size, Cursor: cursor}}, a)
	if err != nil {
		return nil, err
	}
	resp := &githubv1.ListPullRequestsResponse{PullRequests: prs}
	if next != "" {
		resp.NextPageToken = validate.EncodePageToken("p1", prefixKey(req.GetRepo(), ""), encodePart(next))
	}
	return resp, nil
}

// decodeCursor reads a provider cursor from a page token bound to repo.
func decodeCursor(tok, version, repo, method string) (string, error) {
	if tok == "" {
		return "", nil
	}
	parts, err := validate.DecodePageToken(tok, version, 2, method)
	if err != nil {
		return "", err
	}
	if parts[0] != prefixKey(repo, "") {
		return "", validate.BadPageToken(method)
	}
	return decodePart(parts[1]), nil
}

// encodePart keeps a provider's cursor free of ':' for a page token.
func encodePart(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "%", "%25"), ":", "%3A")
}
func decodePart(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "%3A", ":"), "%25", "%")
}

// GetPullRequestDiff returns a page of a pull request's changed files with their diffs.
func (s *Server) GetPullRequestDiff(ctx context.Context, req *githubv1.GetPullRequestDiffRequest) (*githubv1.GetPullRequestDiffResponse, error) {
	ctx, p, a, err := s.targetNumber(ctx, req.GetRepo(), req.GetNumber(), forge.RoleRead)
	if err != nil {
		return nil, err
	}
	if len(req.GetPaths()) > 300 {
		return nil, errs.Invalid("paths", "at most 300 paths")
	}
	for i, path := range req.GetPaths() {
		if err := validate.Path(fmt.Sprintf("paths[%d]", i), path); err != nil {
			return nil, err
		}
	}
	size, err := validate.PageSize(req.GetPageSize(), 100, 300)
	if err != nil {
		return nil, err
	}
	var (
		pin    *forge.DiffPin
		offset int
	)
	if t := req.GetPageToken(); t != "" {
		parts, err := validate.DecodePageToken(t, "d1", 4, "GetPullRequestDiff")
		if err != nil {
			return nil, err
		}
		if !hexSHA.MatchString(parts[0]) || !hexSHA.MatchString(parts[1]) || parts[3] != prefixKey(req.GetRepo(), fmt.Sprint(req.GetNumber())) {
			return nil, validate.BadPageToken("GetPullRequestDiff")
		}
		if _, err := fmt.Sscan(parts[2], &offset); err != nil || offset < 0 {
			return nil, validate.BadPageToken("GetPullRequestDiff")
		}
		pin = &forge.DiffPin{BaseSHA: parts[0], HeadSHA: parts[1]}
	}
	d, err := p.PullRequestDiff(ctx, req.GetRepo(), req.GetNumber(), pin, a)
	if err != nil {
		return nil, err
	}
	files := d.Files
	if len(req.GetPaths()) > 0 {
		files = slices.DeleteFunc(slices.Clone(files), func(f *typev1.FileDiff) bool {
			return !slices.Contains(req.GetPaths(), f.GetPath())
		})
	}
	if offset > len(files) {
		return nil, validate.BadPageToken("GetPullRequestDiff")
	}
	end := min(offset+size, len(files))
	page := make([]*typev1.FileDiff, 0, end-offset)
	for _, f := range files[offset:end] {
		f = proto.CloneOf(f)
		if req.GetStatsOnly() || len(f.GetUnifiedDiff()) > maxFileDiff {
			f.UnifiedDiff = ""
		}
		page = append(page, f)
	}
	resp := &githubv1.GetPullRequestDiffResponse{BaseSha: d.BaseSHA, HeadSha: d.HeadSHA, Files: page, Stats: d.Stats}
	if end < len(files) {
		resp.NextPageToken = validate.EncodePageToken("d1", d.BaseSHA, d.HeadSHA, fmt.Sprint(end), prefixKey(req.GetRepo(), fmt.Sprint(req.GetNumber())))
	}
	return resp, nil
}

// maxFileDiff is the largest unified diff of one file that is returned.
const maxFileDiff = 1 << 20

// MergePullRequest merges an open pull request.
func (s *Server) MergePullRequest(ctx context.Context, req *githubv1.MergePullRequestRequest) (*githubv1.MergePullRequestResponse, error) {
	ctx, p, a, err := s.targetNumber(ctx, req.GetRepo(), req.GetNumber(), forge.RoleAdmin)
	if err != nil {
		return nil, err
	}
	if err := validate.Enum("method", req.GetMethod(), true); err != nil {
		return nil, err
	}
	if err := validate.MaxLen("commit_title", req.GetCommitTitle(), maxTitle); err != nil {
		return nil, err
	}
	if err := validate.MaxLen("commit_message", req.GetCommitMessage(), maxMessage); err != nil {
		return nil, err
	}
	if err := checkSHA("expected_head_sha", req.GetExpectedHeadSha()); err != nil {
		return nil, err
	}
	method := req.GetMethod()
	if method == githubv1.MergeMethod_MERGE_METHOD_UNSPECIFIED {
		method = githubv1.MergeMethod_MERGE_METHOD_SQUASH
	}
	pr, err := p.MergePullRequest(ctx, forge.MergeSpec{Repo: req.GetRepo(), Number: req.GetNumber(), Method: method,
		CommitTitle: req.GetCommitTitle(), CommitMessage: req.GetCommitMessage(), ExpectedHeadSHA: req.GetExpectedHeadSha(),
		DeleteBranch: req.GetDeleteBranch(), Actor: a})
	if err != nil {
		return nil, err
	}
	return &githubv1.MergePullRequestResponse{PullRequest: pr, MergeCommitSha: pr.GetMergeCommitSha()}, nil
}

// MergeBaseIntoPullRequest merges an open pull request's base into its head. It needs
// WRITE, not ADMIN as merging does: it only adds a commit to the head branch, which a
// writer may push anyway (CommitFiles), and never touches the base.
func (s *Server) MergeBaseIntoPullRequest(ctx context.Context, req *githubv1.MergeBaseIntoPullRequestRequest) (*githubv1.MergeBaseIntoPullRequestResponse, error) {
	ctx, p, a, err := s.targetNumber(ctx, req.GetRepo(), req.GetNumber(), forge.RoleWrite)
	if err != nil {
		return nil, err
	}
	if err := checkSHA("expected_head_sha", req.GetExpectedHeadSha()); err != nil {
		return nil, err
	}
	pr, updated, err := p.MergeBaseIntoPullRequest(ctx, req.GetRepo(), req.GetNumber(), req.GetExpectedHeadSha(), a)
	if err != nil {
		return nil, err
	}
	return &githubv1.MergeBaseIntoPullRequestResponse{PullRequest: pr, Updated: updated}, nil
}

// maxGroup bounds CreateMergeGroup's pull requests.
const maxGroup = 20

// CreateMergeGroup writes a commit of a base with open pull requests merged in, for a merge
// queue to check them together. It needs WRITE: it writes objects and moves no branch.
func (s *Server) CreateMergeGroup(ctx context.Context, req *githubv1.CreateMergeGroupRequest) (*githubv1.CreateMergeGroupResponse, error) {
	ctx, p, a, err := s.target(ctx, req.GetRepo(), forge.RoleWrite)
	if err != nil {
		return nil, err
	}
	if err := checkBranch("base", req.GetBase(), true); err != nil {
		return nil, err
	}
	ns := req.GetNumbers()
	switch {
	case len(ns) == 0:
		return nil, errs.Invalid("numbers", "required: 1–%d pull request numbers", maxGroup)
	case len(ns) > maxGroup:
		return nil, errs.Invalid("numbers", "at most %d pull requests, not %d", maxGroup, len(ns))
	}
	seen := map[int32]bool{}
	for i, n := range ns {
		if n <= 0 {
			return nil, errs.Invalid(fmt.Sprintf("numbers[%d]", i), "a positive pull request number, not %d", n)
		}
		if seen[n] {
			return nil, errs.Invalid(fmt.Sprintf("numbers[%d]", i), "pull request %d is named twice", n)
		}
		seen[n] = true
	}
	return p.CreateMergeGroup(ctx, req.GetRepo(), req.GetBase(), ns, a)
}

// ClosePullRequest closes an open pull request without merging it.
func (s *Server) ClosePullRequest(ctx context.Context, req *githubv1.ClosePullRequestRequest) (*githubv1.ClosePullRequestResponse, error) {
	ctx, p, a, err := s.targetNumber(ctx, req.GetRepo(), req.GetNumber(), forge.RoleWrite)
	if err != nil {
		return nil, err
	}
	pr, err := p.ClosePullRequest(ctx, req.GetRepo(), req.GetNumber(), req.GetDeleteBranch(), a)
	if err != nil {
		return nil, err
	}
	return &githubv1.ClosePullRequestResponse{PullRequest: pr}, nil
}

// ListIssues lists a repository's issues, newest first.
func (s *Server) ListIssues(ctx context.Context, req *githubv1.ListIssuesRequest) (*githubv1.ListIssuesResponse, error) {
	ctx, p, a, err := s.target(ctx, req.GetRepo(), forge.RoleRead)
	if err != nil {
		return nil, err
	}
	if err := validate.Enum("state", req.GetState(), true); err != nil {
		return nil, err
	}
	labels, err := validate.Labels("labels", req.GetLabels(), maxLabel, maxLabels)
	if err != nil {
		return nil, err
	}
	size, err := validate.PageSize(req.GetPageSize(), 50, 200)
	if err != nil {
		return nil, err
	}
	cursor, err := decodeCursor(req.GetPageToken(), "i1", req.GetRepo(), "ListIssues")
	if err != nil {
		return nil, err
	}
	issues, next, err := p.ListIssues(ctx, forge.IssueQuery{Repo: req.GetRepo(), State: req.GetState(), Labels: labels,
		Page: forge.Page{Size: size, Cursor: cursor}}, a)
	if err != nil {
		return nil, err
	}
	resp := &githubv1.ListIssuesResponse{Issues: issues}
	if next != "" {
		resp.NextPageToken = validate.EncodePageToken("i1", prefixKey(req.GetRepo(), ""), encodePart(next))
	}
	return resp, nil
}

// GetIssue returns one issue.
func (s *Server) GetIssue(ctx context.Context, req *githubv1.GetIssueRequest) (*githubv1.GetIssueResponse, error) {
	ctx, p, a, err := s.targetNumber(ctx, req.GetRepo(), req.GetNumber(), forge.RoleRead)
	if err != nil {
		return nil, err
	}
	i, err := p.GetIssue(ctx, req.GetRepo(), req.GetNumber(), a)
	if err != nil {
		return nil, err
	}
	return &githubv1.GetIssueResponse{Issue: i}, nil
}

// checkBlocked checks a blocked-by list.
func checkBlocked(field string, nums []int32) error {
	if len(nums) > maxBlocked {
		return errs.Invalid(field, "at most %d issues", maxBlocked)
	}
	for i, n := range nums {
		if n <= 0 {
			return errs.Invalid(fmt.Sprintf("%s[%d]", field, i), "want a positive issue number")
		}
	}
	return nil
}

// CreateIssue opens an issue.
func (s *Server) CreateIssue(ctx context.Context, req *githubv1.CreateIssueRequest) (*githubv1.CreateIssueResponse, error) {
	ctx, p, a, err := s.target(ctx, req.GetRepo(), forge.RoleWrite)
	if err != nil {
		return nil, err
	}
	if _, err := validate.RequiredText("title", req.GetTitle(), maxTitle); err != nil {
		return nil, err
	}
	if err := validate.MaxLen("body", req.GetBody(), maxBody); err != nil {
		return nil, err
	}
	labels, err := validate.Labels("labels", req.GetLabels(), maxLabel, maxLabels)
	if err != nil {
		return nil, err
	}
	if err := checkBlocked("blocked_by", req.GetBlockedBy()); err != nil {
		return nil, err
	}
	if err := validate.RequestID("request_id", req.GetRequestId()); err != nil {
		return nil, err
	}
	out := &githubv1.CreateIssueResponse{}
	_, err = s.once(ctx, "CreateIssue", req.GetRequestId(), req, out, func() (proto.Message, error) {
		i, err := p.CreateIssue(ctx, forge.NewIssue{Repo: req.GetRepo(), Title: req.GetTitle(), Body: req.GetBody(),
			Labels: labels, BlockedBy: req.GetBlockedBy(), Actor: a})
		if err != nil {
			return nil, err
		}
		return &githubv1.CreateIssueResponse{Issue: i}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// UpdateIssue changes the fields of an issue named in update_mask.
func (s *Server) UpdateIssue(ctx context.Context, req *githubv1.UpdateIssueRequest) (*githubv1.UpdateIssueResponse, error) {
	ctx, p, a, err := s.targetNumber(ctx, req.GetRepo(), req.GetNumber(), forge.RoleWrite)
	if err != nil {
		return nil, err
	}
	in := req.GetIssue()
	if in == nil {
		in = &githubv1.Issue{}
	}
	if in.GetRepo() != "" && in.GetRepo() != req.GetRepo() {
		return nil, errs.Invalid("issue.repo", "must equal repo or be empty")
	}
	if in.GetNumber() != 0 && in.GetNumber() != req.GetNumber() {
		return nil, errs.Invalid("issue.number", "must equal number or be 0")
	}
	paths, err := validate.UpdatePaths(req.GetUpdateMask(), in, []string{"state", "labels", "title", "body", "blocked_by"})
	if err != nil {
		return nil, err
	}
	u := forge.IssueUpdate{Repo: req.GetRepo(), Number: req.GetNumber(), Actor: a}
	for _, path := range paths {
		switch path {
		case "state":
			st := in.GetState()
			if st != githubv1.IssueState_ISSUE_STATE_OPEN && st != githubv1.IssueState_ISSUE_STATE_CLOSED {
				return nil, errs.Invalid("issue.state", "want ISSUE_STATE_OPEN or ISSUE_STATE_CLOSED")
			}
			u.State = &st
		case "labels":
			labels, err := validate.Labels("issue.labels", in.GetLabels(), maxLabel, maxLabels)
			if err != nil {
				return nil, err
			}
			if labels == nil {
				labels = []string{}
			}
			u.Labels = &labels
		case "title":
			t, err := validate.RequiredText("issue.title", in.GetTitle(), maxTitle)
			if err != nil {
				return nil, err
			}
			u.Title = &t
		case "body":
			if err := validate.MaxLen("issue.body", in.GetBody(), maxBody); err != nil {
				return nil, err
			}
			b := in.GetBody()
			u.Body = &b
		case "blocked_by":
			if err := checkBlocked("issue.blocked_by", in.GetBlockedBy()); err != nil {
				return nil, err
			}
			b := slices.Clone(in.GetBlockedBy())
			u.BlockedBy = &b
		default:
			return nil, errs.Invalid("update_mask", "%q cannot be updated; want state, labels, title, body or blocked_by", validate.Truncate(path, 64))
		}
	}
	i, err := p.UpdateIssue(ctx, u)
	if err != nil {
		return nil, err
	}
	return &githubv1.UpdateIssueResponse{Issue: i}, nil
}

// CommentOnIssue adds a comment to an issue or pull request.
func (s *Server) CommentOnIssue(ctx context.Context, req *githubv1.CommentOnIssueRequest) (*githubv1.CommentOnIssueResponse, error) {
	ctx, p, a, err := s.targetNumber(ctx, req.GetRepo(), req.GetNumber(), forge.RoleWrite)
	if err != nil {
		return nil, err
	}
	if _, err := validate.RequiredText("body", req.GetBody(), maxBody); err != nil {
		return nil, err
	}
	if err := validate.RequestID("request_id", req.GetRequestId()); err != nil {
		return nil, err
	}
	out := &githubv1.CommentOnIssueResponse{}
	_, err = s.once(ctx, "CommentOnIssue", req.GetRequestId(), req, out, func() (proto.Message, error) {
		c, err := p.Comment(ctx, req.GetRepo(), req.GetNumber(), req.GetBody(), a)
		if err != nil {
			return nil, err
		}
		return &githubv1.CommentOnIssueResponse{Comment: c}, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}
