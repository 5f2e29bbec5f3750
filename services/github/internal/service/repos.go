package service

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/github/internal/forge"
)

const (
	maxDescription = 1000
	maxMessage     = 64 << 10
	maxFiles       = 1000
)

// ListRepos lists the repositories the caller can reach.
func (s *Server) ListRepos(ctx context.Context, req *githubv1.ListReposRequest) (*githubv1.ListReposResponse, error) {
	a, err := actor(ctx)
	if err != nil {
		return nil, err
	}
	if err := validate.Enum("provider", req.GetProvider(), true); err != nil {
		return nil, err
	}
	if o := req.GetOwner(); o != "" && !ownerPattern.MatchString(o) {
		return nil, errs.Invalid("owner", "%q is not an owner name", validate.Truncate(o, 64))
	}
	size, err := validate.PageSize(req.GetPageSize(), 50, 200)
	if err != nil {
		return nil, err
	}
	kind := req.GetProvider()
	if kind == githubv1.RepoProvider_REPO_PROVIDER_UNSPECIFIED {
		kind = githubv1.RepoProvider_REPO_PROVIDER_LOCAL
		if req.GetOwner() != "" {
			kind = s.kindOf(req.GetOwner())
		}
	}
	cursor := ""
	if t := req.GetPageToken(); t != "" {
		parts, err := validate.DecodePageToken(t, "r1", 2, "ListRepos")
		if err != nil {
			return nil, err
		}
		if parts[0] != providerName(kind) {
			return nil, validate.BadPageToken("ListRepos")
		}
		cursor = parts[1]
	}
	p, err := s.providerFor(kind)
	if err != nil {
		return nil, err
	}
	if kind == githubv1.RepoProvider_REPO_PROVIDER_GITHUB {
		// Listing reaches beyond any one grant: it needs the caller's own token (or an admin).
		if ctx, err = s.githubCredential(ctx, a, "", forge.RoleRead); err != nil {
			return nil, err
		}
	}
	repos, next, err := p.ListRepos(ctx, req.GetOwner(), a, forge.Page{Size: size, Cursor: cursor})
	if err != nil {
		return nil, err
	}
	resp := &githubv1.ListReposResponse{Repos: repos}
	if next != "" {
		resp.NextPageToken = validate.EncodePageToken("r1", providerName(kind), next)
	}
	return resp, nil
}

// GetRepo returns one repository.
func (s *Server) GetRepo(ctx context.Context, req *githubv1.GetRepoRequest) (*githubv1.GetRepoResponse, error) {
	ctx, p, a, err := s.target(ctx, req.GetRepo(), forge.RoleRead)
	if err != nil {
		return nil, err
	}
	r, err := p.GetRepo(ctx, req.GetRepo(), a)
	if err != nil {
		return nil, err
	}
	return &githubv1.GetRepoResponse{Repo: r}, nil
}

// CreateRepo creates a repository on the provider that serves its owner.
func (s *Server) CreateRepo(ctx context.Context, req *githubv1.CreateRepoRequest) (*githubv1.CreateRepoResponse, error) {
	a, err := actor(ctx)
	if err != nil {
		return nil, err
	}
	if err := validate.Enum("provider", req.GetProvider(), true); err != nil {
		return nil, err
	}
	if err := validate.MaxLen("description", req.GetDescription(), maxDescription); err != nil {
		return nil, err
	}
	kind := req.GetProvider()
	owner, name, hasOwner := strings.Cut(req.GetRepo(), "/")
	if !hasOwner {
		owner, name = "", req.GetRepo()
		if kind == githubv1.RepoProvider_REPO_PROVIDER_UNSPECIFIED {
			kind = s.def
		}
		if kind == githubv1.RepoProvider_REPO_PROVIDER_LOCAL {
			owner = "local"
		}
	}
	full := owner + "/" + name
	if owner == "" {
		full = "x/" + name // the provider picks the owner; check the name alone
	}
	if err := validate.Repo("repo", full, true); err != nil {
		return nil, err
	}
	if strings.HasSuffix(strings.ToLower(name), ".git") {
		return nil, errs.Invalid("repo", "the name must not end in .git")
	}
	if owner != "" {
		served := s.kindOf(owner)
		if kind != githubv1.RepoProvider_REPO_PROVIDER_UNSPECIFIED && kind != served {
			return nil, errs.Invalid("provider", "owner %q is served by the %s provider (THEFOLD_GITHUB_OWNERS, THEFOLD_GITHUB_LOCAL_OWNERS, THEFOLD_GITHUB_FORGE)", owner, providerName(served))
		}
		kind = served
	}
	p, err := s.providerFor(kind)
	if err != nil {
		return nil, err
	}
	switch {
	case kind == githubv1.RepoProvider_REPO_PROVIDER_GITHUB:
		// Creating on GitHub needs the caller's own token, or an admin grant on "owner/*".
		if ctx, err = s.githubCredential(ctx, a, owner+"/*", forge.RoleAdmin); err != nil {
			return nil, err
		}
	default:
		if err := s.checkCreate(ctx, a, owner); err != nil {
			return nil, err
		}
	}
	r, err := p.CreateRepo(ctx, forge.NewRepo{Owner: owner, Name: name, Description: req.GetDescription(), Private: req.GetPrivate(), Actor: a})
	if err != nil {
		return nil, err
	}
	if req.GetAutoInit() {
		if _, _, _, err := p.Init(ctx, forge.InitSpec{Repo: r.GetRepo(), Message: "Initial commit", Files: scaffold(r.GetName(), ""), Actor: a}); err != nil {
			return nil, err
		}
		if r, err = p.GetRepo(ctx, r.GetRepo(), a); err != nil {
			return nil, err
		}
	}
	return &githubv1.CreateRepoResponse{Repo: r}, nil
}

// InitRepo makes the initial commit of an empty repository.
func (s *Server) InitRepo(ctx context.Context, req *githubv1.InitRepoRequest) (*githubv1.InitRepoResponse, error) {
	ctx, p, a, err := s.target(ctx, req.GetRepo(), forge.RoleWrite)
	if err != nil {
		return nil, err
	}
	if err := checkBranch("branch", req.GetBranch(), false); err != nil {
		return nil, err
	}
	if err := validate.MaxLen("message", req.GetMessage(), maxMessage); err != nil {
		return nil, err
	}
	if err := checkChanges("files", req.GetFiles(), true); err != nil {
		return nil, err
	}
	if l := req.GetLanguage(); l != "" && !slices.Contains(scaffoldLanguages, l) {
		return nil, errs.Invalid("language", "%q: want one of %v, or empty", validate.Truncate(l, 40), scaffoldLanguages)
	}
	files := req.GetFiles()
	_, name, _ := strings.Cut(req.GetRepo(), "/")
	if len(files) == 0 {
		files = scaffold(name, req.GetLanguage())
	}
	msg := req.GetMessage()
	if msg == "" {
		msg = "Initial commit"
	}
	sha, branch, already, err := p.Init(ctx, forge.InitSpec{Repo: req.GetRepo(), Branch: req.GetBranch(), Message: msg, Files: files, Actor: a})
	if err != nil {
		return nil, err
	}
	r, err := p.GetRepo(ctx, req.GetRepo(), a)
	if err != nil {
		return nil, err
	}
	return &githubv1.InitRepoResponse{Repo: r, CommitSha: sha, Branch: branch, AlreadyInitialized: already}, nil
}

// checkChanges checks a list of file changes. createOnly: every change must be a CREATE.
func checkChanges(field string, files []*typev1.FileChange, createOnly bool) error {
	if len(files) > maxFiles {
		return errs.Invalid(field, "at most %d files in one commit", maxFiles)
	}
	seen := map[string]bool{}
	for i, f := range files {
		fld := field + "[" + itoa(i) + "]"
		if f == nil {
			return errs.Invalid(fld, "missing")
		}
		if err := validate.Path(fld+".path", f.GetPath()); err != nil {
			return err
		}
		if seen[f.GetPath()] {
			return errs.Invalid(fld+".path", "%q appears twice; one change per path", f.GetPath())
		}
		seen[f.GetPath()] = true
		if err := validate.Enum(fld+".action", f.GetAction(), false); err != nil {
			return err
		}
		switch f.GetAction() {
		case typev1.FileAction_FILE_ACTION_CREATE:
			if len(f.GetEdits()) > 0 {
				return errs.Invalid(fld+".edits", "a CREATE gives the whole content, not edits")
			}
		case typev1.FileAction_FILE_ACTION_MODIFY:
			if createOnly {
				return errs.Invalid(fld+".action", "the initial commit only creates files")
			}
			if len(f.GetEdits()) > 0 && f.GetContent() != "" {
				return errs.Invalid(fld, "set content or edits, not both")
			}
			for j, e := range f.GetEdits() {
				if e.GetOldText() == "" {
					return errs.Invalid(fld+".edits["+itoa(j)+"].old_text", "required")
				}
				if e.GetExpectedCount() < 0 {
					return errs.Invalid(fld+".edits["+itoa(j)+"].expected_count", "must not be negative")
				}
			}
		case typev1.FileAction_FILE_ACTION_DELETE:
			if createOnly {
				return errs.Invalid(fld+".action", "the initial commit only creates files")
			}
			if f.GetContent() != "" || len(f.GetEdits()) > 0 {
				return errs.Invalid(fld, "a DELETE has no content or edits")
			}
		}
	}
	return nil
}

func itoa(i int) string {
	const digits = "0123456789"
	if i < 10 {
		return digits[i : i+1]
	}
	return itoa(i/10) + digits[i%10:i%10+1]
}

var scaffoldLanguages = []string{"go", "typescript", "javascript", "python"}

// scaffold is the initial commit of a new repository: a README and a .gitignore, and for
// a language its manifest (go.mod, package.json, pyproject.toml).
func scaffold(name, language string) []*typev1.FileChange {
	create := func(p, c string) *typev1.FileChange {
		return &typev1.FileChange{Path: p, Action: typev1.FileAction_FILE_ACTION_CREATE, Content: c}
	}
	files := []*typev1.FileChange{create("README.md", "# "+name+"\n")}
	ignore := ".DS_Store\n*.log\n.env\n"
	switch language {
	case "go":
		files = append(files, create("go.mod", "module "+name+"\n\ngo 1.26\n"))
		ignore += "/bin/\n*.test\n*.out\n"
	case "typescript", "javascript":
		files = append(files, create("package.json", `{
  "name": "`+strings.ToLower(name)+`",
  "version": "0.1.0",
  "private": true,
  "type": "module",
  "scripts": {
    "test": "node --test"
  }
}
`))
		ignore += "node_modules/\ndist/\n"
	case "python":
		files = append(files, create("pyproject.toml", "[project]\nname = \""+strings.ToLower(name)+"\"\nversion = \"0.1.0\"\nrequires-python = \">=3.11\"\n"))
		ignore += "__pycache__/\n*.pyc\n.venv/\n"
	}
	return append(files, create(".gitignore", ignore))
}

// isNotFound reports whether err is a provider's not-found.
func isNotFound(err error) bool { return errors.Is(err, errs.ErrNotFound) }
