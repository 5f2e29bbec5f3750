// Package local is the local forge: bare git repositories under a data directory
// (<dir>/<owner>/<name>.git, written with go-git in git's own formats, so plain git clones
// them and sees exactly what TheFold committed), with the repository registry, pull
// requests, issues and comments in the github schema. It needs no network.
//
// Access is checked by the service (who may read, write, administer: see the repo_role
// function of the schema); a repository the caller has no role on is NOT_FOUND here too.
// Writes to one repository are serialised in this process; a branch moves only by
// compare-and-swap, so a commit on a stale base is ABORTED, never a lost update.
package local

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/services/github/internal/forge"
	"github.com/thefold/thefold/services/github/internal/store"
)

// DefaultBranch is the branch of a new repository.
const DefaultBranch = "main"

// DefaultAuthor signs commits that name no author.
var DefaultAuthor = forge.Signature{Name: "TheFold", Email: "thefold@localhost"}

// Provider is the local forge.
type Provider struct {
	dir     string
	store   *store.Store
	baseURL string
	now     func() time.Time

	mu    sync.Mutex
	locks map[string]*sync.Mutex
}

var _ forge.Provider = (*Provider)(nil)

// New returns the local forge keeping repositories under dir. baseURL is the gateway's
// URL, used for the url of pull requests and issues ("" leaves them relative).
func New(dir string, st *store.Store, baseURL string) (*Provider, error) {
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("local forge: %w", err)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("local forge: %w", err)
	}
	return &Provider{dir: abs, store: st, baseURL: strings.TrimRight(baseURL, "/"), now: time.Now, locks: map[string]*sync.Mutex{}}, nil
}

// Kind is LOCAL.
func (p *Provider) Kind() githubv1.RepoProvider { return githubv1.RepoProvider_REPO_PROVIDER_LOCAL }

// Dir is where a repository's bare git directory is.
func (p *Provider) Dir(repo string) string {
	owner, name, _ := strings.Cut(repo, "/")
	return filepath.Join(p.dir, owner, name+".git")
}

// lock serialises the writes to one repository.
func (p *Provider) lock(repo string) func() {
	p.mu.Lock()
	m, ok := p.locks[repo]
	if !ok {
		m = &sync.Mutex{}
		p.locks[repo] = m
	}
	p.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// repo reads a repository the actor can reach.
func (p *Provider) repo(ctx context.Context, repo string, a forge.Actor) (*store.Repo, error) {
	owner, name, _ := strings.Cut(repo, "/")
	r, role, err := p.store.RepoRole(ctx, owner, name, a.UserID)
	if err != nil {
		return nil, err
	}
	if a.Admin {
		role = int(forge.RoleAdmin)
	}
	// The service checked the caller's role for the call; this keeps a private repository
	// invisible even to a caller that skipped it.
	if role == 0 {
		return nil, fmt.Errorf("repository %q: %w", repo, errs.ErrNotFound)
	}
	r.Role = role
	return r, nil
}

// open opens a repository's git directory. Each operation opens its own handle: go-git's
// storage is not meant to be shared between goroutines.
func (p *Provider) open(repo string) (*gitRepo, error) { return openBare(p.Dir(repo)) }

func (p *Provider) message(r *store.Repo) *githubv1.Repo {
	return &githubv1.Repo{
		Repo: r.FullName(), Owner: r.Owner, Name: r.Name, DefaultBranch: r.DefaultBranch,
		Provider: githubv1.RepoProvider_REPO_PROVIDER_LOCAL, Private: r.Private,
		CloneUrl: "file://" + p.Dir(r.FullName()), Description: r.Description,
		CreateTime: timestamppb.New(r.CreateTime), UpdateTime: timestamppb.New(r.UpdateTime),
		Permission: forge.Role(r.Role).Proto(),
	}
}

// describe is the message of a repository with its emptiness read from git.
func (p *Provider) describe(r *store.Repo) (*githubv1.Repo, error) {
	m := p.message(r)
	g, err := p.open(r.FullName())
	if err != nil {
		return nil, err
	}
	if m.Empty, err = g.empty(); err != nil {
		return nil, err
	}
	return m, nil
}

// ListRepos lists the repositories the actor can reach, by full name.
func (p *Provider) ListRepos(ctx context.Context, owner string, a forge.Actor, pg forge.Page) ([]*githubv1.Repo, string, error) {
	rows, err := p.store.ListRepos(ctx, owner, a.UserID, a.Admin, pg.Cursor, pg.Size+1)
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(rows) > pg.Size {
		rows = rows[:pg.Size]
		next = rows[len(rows)-1].FullName()
	}
	out := make([]*githubv1.Repo, 0, len(rows))
	for _, r := range rows {
		if !exists(p.Dir(r.FullName())) {
			// Being created: CreateRepo registers the name before it makes the directory (or
			// its creation failed and the row is being removed). Listing it would fail the
			// whole list for everyone while it lasts.
			continue
		}
		m, err := p.describe(r)
		if err != nil {
			return nil, "", err
		}
		out = append(out, m)
	}
	return out, next, nil
}

// GetRepo returns one repository.
func (p *Provider) GetRepo(ctx context.Context, repo string, a forge.Actor) (*githubv1.Repo, error) {
	r, err := p.repo(ctx, repo, a)
	if err != nil {
		return nil, err
	}
	return p.describe(r)
}

// CreateRepo registers a repository and makes its bare git directory. A directory left by
// an earlier registry (a wiped database) is adopted, not overwritten.
func (p *Provider) CreateRepo(ctx context.Context, nr forge.NewRepo) (*githubv1.Repo, error) {
	r, err := p.store.CreateRepo(ctx, &store.Repo{Owner: nr.Owner, Name: nr.Name, Description: nr.Description,
		Private: nr.Private, DefaultBranch: DefaultBranch, CreatedBy: nr.Actor.UserID})
	if err != nil {
		return nil, err
	}
	dir := p.Dir(r.FullName())
	if !exists(dir) {
		if _, err := initBare(dir, DefaultBranch); err != nil {
			// Undo the registration so the name can be created again; use a fresh context
			// so a cancelled request does not leave the row behind.
			_ = p.store.DeleteRepo(context.WithoutCancel(ctx), r.Owner, r.Name)
			return nil, err
		}
	}
	return p.describe(r)
}

// Init makes the initial commit of an empty repository.
func (p *Provider) Init(ctx context.Context, s forge.InitSpec) (string, string, bool, error) {
	r, err := p.repo(ctx, s.Repo, s.Actor)
	if err != nil {
		return "", "", false, err
	}
	branch := s.Branch
	if branch == "" {
		branch = r.DefaultBranch
	}
	defer p.lock(s.Repo)()
	g, err := p.open(s.Repo)
	if err != nil {
		return "", "", false, err
	}
	empty, err := g.empty()
	if err != nil {
		return "", "", false, err
	}
	if !empty {
		head, err := g.resolve("", r.DefaultBranch)
		if err != nil && !errors.Is(err, errs.ErrNotFound) {
			return "", "", false, err
		}
		if head.IsZero() {
			return "", r.DefaultBranch, true, nil
		}
		return head.String(), r.DefaultBranch, true, nil
	}
	files := map[string]entry{}
	if err := g.apply(files, s.Files); err != nil {
		return "", "", false, err
	}
	tree, err := g.writeTree(files)
	if err != nil {
		return "", "", false, err
	}
	sha, err := g.writeCommit(tree, nil, author(s.Author), s.Message, p.now())
	if err != nil {
		return "", "", false, err
	}
	if err := g.moveBranch(branch, sha, plumbing.ZeroHash); err != nil {
		return "", "", false, err
	}
	_ = p.store.TouchRepo(ctx, r.Owner, r.Name)
	return sha.String(), branch, false, nil
}

func author(s forge.Signature) forge.Signature {
	if s.Name == "" {
		s.Name = DefaultAuthor.Name
	}
	if s.Email == "" {
		s.Email = DefaultAuthor.Email
	}
	return s
}
