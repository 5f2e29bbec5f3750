package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/google/go-github/v84/github"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/services/github/internal/forge"
)

// ListRepos lists the repositories the token reaches (owner "") or those of one owner, by
// full name. For another owner than the token's user it asks the organization first (that
// lists the private repositories the token may see) and the user second.
func (p *Provider) ListRepos(ctx context.Context, owner string, _ forge.Actor, pg forge.Page) ([]*githubv1.Repo, string, error) {
	lo, err := pageOpts(pg)
	if err != nil {
		return nil, "", err
	}
	var login string
	if owner != "" {
		if login, err = p.authLogin(ctx); err != nil {
			return nil, "", err
		}
	}
	var list []*github.Repository
	var resp *github.Response
	switch {
	case owner == "" || strings.EqualFold(owner, login):
		opts := &github.RepositoryListByAuthenticatedUserOptions{Sort: "full_name", Direction: "asc", ListOptions: lo}
		if owner != "" {
			opts.Affiliation = "owner"
		}
		list, resp, err = read(ctx, p, func(ctx context.Context) ([]*github.Repository, *github.Response, error) {
			return p.gh.Repositories.ListByAuthenticatedUser(ctx, opts)
		})
	default:
		list, resp, err = read(ctx, p, func(ctx context.Context) ([]*github.Repository, *github.Response, error) {
			return p.gh.Repositories.ListByOrg(ctx, owner, &github.RepositoryListByOrgOptions{Sort: "full_name", Direction: "asc", ListOptions: lo})
		})
		if httpStatus(err) == http.StatusNotFound {
			list, resp, err = read(ctx, p, func(ctx context.Context) ([]*github.Repository, *github.Response, error) {
				return p.gh.Repositories.ListByUser(ctx, owner, &github.RepositoryListByUserOptions{Sort: "full_name", Direction: "asc", ListOptions: lo})
			})
		}
	}
	if err != nil {
		return nil, "", p.mapErr(ctx, err, fmt.Sprintf("owner %q", owner))
	}
	out := make([]*githubv1.Repo, 0, len(list))
	for _, r := range list {
		pr, err := p.toRepo(ctx, r)
		if err != nil {
			return nil, "", err
		}
		out = append(out, pr)
	}
	return out, nextCursor(resp, lo.PerPage), nil
}

// GetRepo returns one repository.
func (p *Provider) GetRepo(ctx context.Context, repo string, _ forge.Actor) (*githubv1.Repo, error) {
	r, err := p.getRepo(ctx, repo)
	if err != nil {
		return nil, err
	}
	return p.toRepo(ctx, r)
}

func (p *Provider) getRepo(ctx context.Context, repo string) (*github.Repository, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return nil, err
	}
	r, _, err := read(ctx, p, func(ctx context.Context) (*github.Repository, *github.Response, error) {
		return p.gh.Repositories.Get(ctx, owner, name)
	})
	if err != nil {
		return nil, p.mapErr(ctx, err, fmt.Sprintf("repository %q", repo))
	}
	return r, nil
}

// CreateRepo creates a repository for the token's user when the owner is that user (or
// empty), else in the organization named by the owner. A taken name is ErrAlreadyExists.
func (p *Provider) CreateRepo(ctx context.Context, nr forge.NewRepo) (*githubv1.Repo, error) {
	login, err := p.authLogin(ctx)
	if err != nil {
		return nil, err
	}
	owner := nr.Owner
	if owner == "" {
		owner = login
	}
	full := owner + "/" + nr.Name
	if _, _, err := splitRepo(full); err != nil {
		return nil, err
	}
	org := ""
	if !strings.EqualFold(owner, login) {
		org = owner
	}
	r, _, err := p.gh.Repositories.Create(ctx, org, &github.Repository{
		Name:        github.Ptr(nr.Name),
		Description: github.Ptr(nr.Description),
		Private:     github.Ptr(nr.Private),
	})
	switch {
	case err == nil:
	case isStatus(err, http.StatusUnprocessableEntity, "already exists"):
		p.log.DebugContext(ctx, "github: repository name taken", "repo", full, "err", err)
		return nil, fmt.Errorf("repository %q: %w", full, errs.ErrAlreadyExists)
	case httpStatus(err) == http.StatusNotFound || httpStatus(err) == http.StatusForbidden:
		return nil, p.mapErr(ctx, err, fmt.Sprintf("owner %q", owner))
	default:
		return nil, p.mapErr(ctx, err, fmt.Sprintf("repository %q", full))
	}
	return p.toRepo(ctx, r)
}

// toRepo converts a repository. Whether it is empty: GitHub's size (KiB) is 0 for an empty
// repository, but also for a tiny one, so a 0 is checked against the default branch, whose
// ref GitHub answers with 409 "Git Repository is empty" while there are no commits.
func (p *Provider) toRepo(ctx context.Context, r *github.Repository) (*githubv1.Repo, error) {
	out := &githubv1.Repo{
		Repo:          r.GetFullName(),
		Owner:         r.GetOwner().GetLogin(),
		Name:          r.GetName(),
		DefaultBranch: r.GetDefaultBranch(),
		Provider:      githubv1.RepoProvider_REPO_PROVIDER_GITHUB,
		Private:       r.GetPrivate(),
		CloneUrl:      r.GetCloneURL(),
		Description:   r.GetDescription(),
		HtmlUrl:       r.GetHTMLURL(),
	}
	if t := r.GetCreatedAt(); !t.IsZero() {
		out.CreateTime = timestamppb.New(t.Time)
	}
	if t := r.GetPushedAt(); !t.IsZero() {
		out.UpdateTime = timestamppb.New(t.Time)
	}
	if r.GetSize() == 0 {
		empty, err := p.isEmpty(ctx, out.Owner, out.Name, out.DefaultBranch)
		if err != nil {
			return nil, p.mapErr(ctx, err, fmt.Sprintf("repository %q", out.Repo))
		}
		out.Empty = empty
	}
	return out, nil
}

// isEmpty asks for a branch ref: 409 means the repository has no commits. A missing
// branch (404) does not make a repository with other refs empty.
func (p *Provider) isEmpty(ctx context.Context, owner, name, branch string) (bool, error) {
	if branch == "" {
		branch = "main"
	}
	_, _, err := read(ctx, p, func(ctx context.Context) (*github.Reference, *github.Response, error) {
		return p.gh.Git.GetRef(ctx, owner, name, "heads/"+branch)
	})
	switch {
	case err == nil:
		return false, nil
	case isEmptyRepo(err):
		return true, nil
	case httpStatus(err) == http.StatusNotFound:
		return false, nil
	}
	return false, err
}

// Init makes the initial commit of an empty repository.
//
// The git data API refuses repositories without commits, so the first file goes through
// the contents API (PUT /contents/{path} with the branch), which creates the branch with
// the first commit. The remaining files (and the first one again, when it is executable:
// the contents API cannot set modes) follow in one more commit made with the git data API
// on top of it, with a non-forced ref update. An initial scaffold of n > 1 files is so two
// commits, both with the requested message; the commit returned is the last.
func (p *Provider) Init(ctx context.Context, s forge.InitSpec) (string, string, bool, error) {
	if len(s.Files) == 0 {
		return "", "", false, fmt.Errorf("initial commit: no files: %w", errs.ErrInvalid)
	}
	r, err := p.getRepo(ctx, s.Repo)
	if err != nil {
		return "", "", false, err
	}
	owner, name := r.GetOwner().GetLogin(), r.GetName()
	branch := s.Branch
	if branch == "" {
		branch = r.GetDefaultBranch()
	}
	if branch == "" {
		branch = "main"
	}
	sha, err := p.branchHead(ctx, owner, name, branch)
	switch {
	case err == nil:
		return sha, branch, true, nil
	case isEmptyRepo(err):
	case httpStatus(err) == http.StatusNotFound:
		// Commits, but not on this branch: the repository is not empty.
		def := r.GetDefaultBranch()
		sha, err := p.branchHead(ctx, owner, name, def)
		if err != nil {
			return "", "", false, p.mapErr(ctx, err, fmt.Sprintf("branch %q in %q", def, s.Repo))
		}
		return sha, def, true, nil
	default:
		return "", "", false, p.mapErr(ctx, err, fmt.Sprintf("repository %q", s.Repo))
	}
	msg := s.Message
	if msg == "" {
		msg = "Initial commit"
	}
	author := commitAuthor(s.Author)

	// The first file to go through the contents API: a non-executable one when there is one.
	first := 0
	for i, f := range s.Files {
		if !f.GetExecutable() {
			first = i
			break
		}
	}
	f0 := s.Files[first]
	res, _, err := p.gh.Repositories.CreateFile(ctx, owner, name, f0.GetPath(), &github.RepositoryContentFileOptions{
		Message: github.Ptr(msg),
		Content: []byte(f0.GetContent()),
		Branch:  github.Ptr(branch),
		Author:  author,
	})
	if err != nil {
		if isStatus(err, http.StatusUnprocessableEntity, "") || isStatus(err, http.StatusConflict, "") {
			// Someone initialized it meanwhile: report that, as for a repository with commits.
			if sha, herr := p.branchHead(ctx, owner, name, branch); herr == nil {
				p.log.DebugContext(ctx, "github: repository initialized concurrently", "repo", s.Repo, "err", err)
				return sha, branch, true, nil
			}
		}
		return "", "", false, p.mapErr(ctx, err, fmt.Sprintf("repository %q", s.Repo))
	}
	head := res.Commit.GetSHA()
	rest := make([]*typev1.FileChange, 0, len(s.Files))
	for i, f := range s.Files {
		if i != first || f.GetExecutable() {
			rest = append(rest, f)
		}
	}
	if len(rest) == 0 {
		return head, branch, false, nil
	}
	c, err := p.commitOnto(ctx, commitJob{
		repo: s.Repo, owner: owner, name: name, branch: branch, parent: head,
		parentTree: res.Commit.GetTree().GetSHA(), message: msg, author: author, files: rest,
	})
	if err != nil {
		return "", "", false, err
	}
	return c, branch, false, nil
}

// CollaboratorRole is login's permission on repo, as GitHub's collaborator permission API
// says it (admin, write, read, none); a login GitHub does not know is RoleNone.
func (p *Provider) CollaboratorRole(ctx context.Context, repo, login string) (forge.Role, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return forge.RoleNone, err
	}
	level, _, err := read(ctx, p, func(ctx context.Context) (*github.RepositoryPermissionLevel, *github.Response, error) {
		return p.gh.Repositories.GetPermissionLevel(ctx, owner, name, login)
	})
	if err != nil {
		var er *github.ErrorResponse
		if errors.As(err, &er) && er.Response != nil && er.Response.StatusCode == http.StatusNotFound {
			// GitHub answers 404 for a login that is not a user as for a repository it
			// does not show: the repository says which.
			if _, rerr := p.getRepo(ctx, repo); rerr != nil {
				return forge.RoleNone, rerr
			}
			return forge.RoleNone, nil
		}
		return forge.RoleNone, p.mapErr(ctx, err, fmt.Sprintf("the permission of %q on %q", login, repo))
	}
	return forge.ParseRole(level.GetPermission()), nil
}
