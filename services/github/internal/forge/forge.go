// Package forge is what the github service asks of a repository provider: the local forge
// (bare git repositories on disk, pull requests and issues in the service's schema) and
// GitHub (REST API). The service validates requests, keeps idempotency records, caches trees
// and ranks files; a Provider only talks to its forge.
//
// Errors: a Provider returns the sentinels of package errs, wrapped with public text
// ("repository \"a/b\": not found"): errs.ErrNotFound for what does not exist (or the caller
// may not see), errs.ErrAlreadyExists for a taken name, errs.ErrFailedPrecondition for the
// wrong state (merging a closed pull request, an edit whose old text is gone),
// errs.ErrConflict (ABORTED) for a stale expected sha, errs.ErrInvalid for input only the
// forge can judge, errs.ErrUnavailable when the forge cannot be reached or rate-limits.
// Anything else is internal and masked by the server.
package forge

import (
	"context"
	"errors"
	"io"

	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// ErrEmpty is returned by Resolve for a repository without commits.
var ErrEmpty = errors.New("repository is empty")

// Actor is who a call is made for: the authenticated user, and whether they are an admin.
// The service has checked the actor's Role on the repository before a provider sees it.
type Actor struct {
	UserID string
	Admin  bool
}

type credentialKey struct{}

// WithCredential returns ctx carrying the token a provider calls its forge with for this
// request: the caller's own GitHub token, or the server's when an allow-list grant let
// the caller through. The service sets it after checking the caller's access.
func WithCredential(ctx context.Context, token string) context.Context {
	return context.WithValue(ctx, credentialKey{}, token)
}

// Credential is the token WithCredential put in ctx, "" when none.
func Credential(ctx context.Context) string {
	t, _ := ctx.Value(credentialKey{}).(string)
	return t
}

// Page asks for one page of a list; Cursor is the provider's own continuation ("" first).
type Page struct {
	Size   int
	Cursor string
}

// NewRepo describes a repository to create.
type NewRepo struct {
	Owner, Name string
	Description string
	Private     bool
	Actor       Actor
}

// InitSpec is the initial commit of an empty repository.
type InitSpec struct {
	Repo    string
	Branch  string // "" = the repository's default branch
	Message string
	Files   []*typev1.FileChange // all CREATE, at least one
	Actor   Actor
	Author  Signature
}

// Signature is a commit author.
type Signature struct{ Name, Email string }

// CommitSpec is one commit on an existing branch.
type CommitSpec struct {
	Repo, Branch, Message string
	Files                 []*typev1.FileChange
	// ExpectedParent, when set, must be the branch head (else errs.ErrConflict).
	ExpectedParent string
	Author         Signature
	Actor          Actor
}

// NewPullRequest describes a pull request to open.
type NewPullRequest struct {
	Repo, Head, Base, Title, Body string
	Draft                         bool
	Labels                        []string
	Actor                         Actor
}

// PullRequestQuery filters a repository's pull requests.
type PullRequestQuery struct {
	Repo       string
	State      githubv1.PullRequestState
	Head, Base string
	Page       Page
}

// DiffPin fixes the commits a paged diff is computed between.
type DiffPin struct{ BaseSHA, HeadSHA string }

// Diff is how a pull request's head differs from the merge base.
type Diff struct {
	BaseSHA, HeadSHA string
	// Every changed file in path order, with its unified diff.
	Files []*typev1.FileDiff
	Stats *typev1.DiffStats
}

// MergeSpec merges a pull request.
type MergeSpec struct {
	Repo                       string
	Number                     int32
	Method                     githubv1.MergeMethod
	CommitTitle, CommitMessage string
	ExpectedHeadSHA            string
	DeleteBranch               bool
	Actor                      Actor
}

// IssueQuery filters a repository's issues.
type IssueQuery struct {
	Repo   string
	State  githubv1.IssueState
	Labels []string
	Page   Page
}

// NewIssue describes an issue to open.
type NewIssue struct {
	Repo, Title, Body string
	Labels            []string
	BlockedBy         []int32
	Actor             Actor
}

// IssueUpdate changes the fields of an issue that are set.
type IssueUpdate struct {
	Repo      string
	Number    int32
	State     *githubv1.IssueState
	Labels    *[]string
	Title     *string
	Body      *string
	BlockedBy *[]int32
	Actor     Actor
}

// Provider is one forge.
type Provider interface {
	Kind() githubv1.RepoProvider

	ListRepos(ctx context.Context, owner string, a Actor, p Page) ([]*githubv1.Repo, string, error)
	GetRepo(ctx context.Context, repo string, a Actor) (*githubv1.Repo, error)
	CreateRepo(ctx context.Context, r NewRepo) (*githubv1.Repo, error)
	// Init makes the initial commit of an empty repository; already is true (and nothing is
	// written) when it has commits.
	Init(ctx context.Context, s InitSpec) (sha, branch string, already bool, err error)

	// Resolve returns the commit a ref names ("" = the default branch): a branch, a tag or a
	// commit sha. ErrEmpty when the repository has no commits.
	Resolve(ctx context.Context, repo, ref string, a Actor) (string, error)
	// Tree lists every entry of a commit's tree, recursively, in path order.
	Tree(ctx context.Context, repo, commit string) ([]*githubv1.TreeEntry, error)
	// Files reads files at a commit, in the order asked, and names the missing ones.
	Files(ctx context.Context, repo, commit string, paths []string) ([]*githubv1.File, []string, error)
	// Archive writes an uncompressed tar of a commit (paths relative to the root).
	Archive(ctx context.Context, repo, commit string, w io.Writer) error

	CreateBranch(ctx context.Context, repo, branch, fromCommit string, a Actor) (sha string, created bool, err error)
	Commit(ctx context.Context, s CommitSpec) (*githubv1.CommitFilesResponse, error)

	CreatePullRequest(ctx context.Context, p NewPullRequest) (*githubv1.PullRequest, bool, error)
	GetPullRequest(ctx context.Context, repo string, number int32, a Actor) (*githubv1.PullRequest, error)
	ListPullRequests(ctx context.Context, q PullRequestQuery, a Actor) ([]*githubv1.PullRequest, string, error)
	PullRequestDiff(ctx context.Context, repo string, number int32, pin *DiffPin, a Actor) (*Diff, error)
	// PullRequestChecks returns the checks on a pull request's head commit, by name, and
	// their combined state (CHECK_STATE_NONE when there are none).
	PullRequestChecks(ctx context.Context, repo string, number int32, a Actor) (*githubv1.GetPullRequestChecksResponse, error)
	MergePullRequest(ctx context.Context, m MergeSpec) (*githubv1.PullRequest, error)
	// MergeBaseIntoPullRequest merges an open pull request's base into its head and returns
	// the pull request with its new head; updated is false (and nothing is written) when the
	// head already contains the base. A head other than expectedHeadSHA (when set) is
	// errs.ErrConflict; conflicting changes and a merged or closed pull request are
	// errs.ErrFailedPrecondition.
	MergeBaseIntoPullRequest(ctx context.Context, repo string, number int32, expectedHeadSHA string, a Actor) (pr *githubv1.PullRequest, updated bool, err error)
	// CreateMergeGroup writes a commit of base's head with the open pull requests numbers
	// merged in, in order, up to the first that conflicts, and moves no branch (see the
	// RPC). A pull request not open or into another base is errs.ErrFailedPrecondition.
	CreateMergeGroup(ctx context.Context, repo, base string, numbers []int32, a Actor) (*githubv1.CreateMergeGroupResponse, error)
	ClosePullRequest(ctx context.Context, repo string, number int32, deleteBranch bool, a Actor) (*githubv1.PullRequest, error)

	ListIssues(ctx context.Context, q IssueQuery, a Actor) ([]*githubv1.Issue, string, error)
	GetIssue(ctx context.Context, repo string, number int32, a Actor) (*githubv1.Issue, error)
	CreateIssue(ctx context.Context, i NewIssue) (*githubv1.Issue, error)
	UpdateIssue(ctx context.Context, u IssueUpdate) (*githubv1.Issue, error)
	Comment(ctx context.Context, repo string, number int32, body string, a Actor) (*githubv1.IssueComment, error)
}

// Role is what a person may do with a repository; each includes those before it.
type Role int

// Roles, in order.
const (
	RoleNone Role = iota
	RoleRead
	RoleWrite
	RoleAdmin
)

// String is the role's name ("read").
func (r Role) String() string {
	switch r {
	case RoleRead:
		return "read"
	case RoleWrite:
		return "write"
	case RoleAdmin:
		return "admin"
	}
	return "none"
}

// ParseRole reads a role's name; anything else is RoleNone.
func ParseRole(s string) Role {
	switch s {
	case "read":
		return RoleRead
	case "write":
		return RoleWrite
	case "admin":
		return RoleAdmin
	}
	return RoleNone
}

// Proto is the role's enum value.
func (r Role) Proto() githubv1.RepoRole {
	switch r {
	case RoleRead:
		return githubv1.RepoRole_REPO_ROLE_READ
	case RoleWrite:
		return githubv1.RepoRole_REPO_ROLE_WRITE
	case RoleAdmin:
		return githubv1.RepoRole_REPO_ROLE_ADMIN
	}
	return githubv1.RepoRole_REPO_ROLE_NONE
}
