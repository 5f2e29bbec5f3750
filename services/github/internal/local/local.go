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
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

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

// Resolve returns the commit a ref names.
func (p *Provider) Resolve(ctx context.Context, repo, ref string, a forge.Actor) (string, error) {
	r, err := p.repo(ctx, repo, a)
	if err != nil {
		return "", err
	}
	g, err := p.open(repo)
	if err != nil {
		return "", err
	}
	h, err := g.resolve(ref, r.DefaultBranch)
	if err != nil {
		return "", err
	}
	return h.String(), nil
}

// Tree lists a commit's tree.
func (p *Provider) Tree(_ context.Context, repo, commit string) ([]*githubv1.TreeEntry, error) {
	g, err := p.open(repo)
	if err != nil {
		return nil, err
	}
	return g.tree(plumbing.NewHash(commit))
}

// Files reads files at a commit.
func (p *Provider) Files(_ context.Context, repo, commit string, paths []string) ([]*githubv1.File, []string, error) {
	g, err := p.open(repo)
	if err != nil {
		return nil, nil, err
	}
	all, err := g.flatten(plumbing.NewHash(commit))
	if err != nil {
		return nil, nil, err
	}
	var (
		files   []*githubv1.File
		missing []string
	)
	for _, path := range paths {
		e, ok := all[path]
		if !ok || !e.mode.IsFile() {
			missing = append(missing, path)
			continue
		}
		data, err := g.blob(e.hash)
		if err != nil {
			return nil, nil, err
		}
		f := &githubv1.File{Path: path, Size: int64(len(data)), Sha: e.hash.String()}
		if utf8.Valid(data) {
			f.Content = string(data)
		} else {
			f.Binary = true
		}
		files = append(files, f)
	}
	return files, missing, nil
}

// Archive writes a tar of a commit.
func (p *Provider) Archive(ctx context.Context, repo, commit string, w io.Writer) error {
	g, err := p.open(repo)
	if err != nil {
		return err
	}
	return g.archive(ctx, plumbing.NewHash(commit), w)
}

// CreateBranch creates a branch at a commit unless it exists.
func (p *Provider) CreateBranch(ctx context.Context, repo, branch, from string, a forge.Actor) (string, bool, error) {
	if _, err := p.repo(ctx, repo, a); err != nil {
		return "", false, err
	}
	defer p.lock(repo)()
	g, err := p.open(repo)
	if err != nil {
		return "", false, err
	}
	head, err := g.branchHead(branch)
	if err != nil {
		return "", false, err
	}
	if !head.IsZero() {
		return head.String(), false, nil
	}
	if err := g.moveBranch(branch, plumbing.NewHash(from), plumbing.ZeroHash); err != nil {
		return "", false, err
	}
	return from, true, nil
}

// Commit makes one commit on a branch.
func (p *Provider) Commit(ctx context.Context, s forge.CommitSpec) (*githubv1.CommitFilesResponse, error) {
	r, err := p.repo(ctx, s.Repo, s.Actor)
	if err != nil {
		return nil, err
	}
	defer p.lock(s.Repo)()
	g, err := p.open(s.Repo)
	if err != nil {
		return nil, err
	}
	head, err := g.branchHead(s.Branch)
	if err != nil {
		return nil, err
	}
	if head.IsZero() {
		return nil, fmt.Errorf("branch %q: %w", s.Branch, errs.ErrNotFound)
	}
	if s.ExpectedParent != "" && head.String() != s.ExpectedParent {
		return nil, fmt.Errorf("branch %q is at %s, not at expected_parent_sha %s: %w",
			s.Branch, short(head), s.ExpectedParent, errs.ErrConflict)
	}
	files, err := g.flatten(head)
	if err != nil {
		return nil, err
	}
	if err := g.apply(files, s.Files); err != nil {
		return nil, err
	}
	tree, err := g.writeTree(files)
	if err != nil {
		return nil, err
	}
	parent, err := g.commit(head)
	if err != nil {
		return nil, err
	}
	if tree == parent.TreeHash {
		return nil, fmt.Errorf("files: the changes leave branch %q as it is; nothing to commit: %w", s.Branch, errs.ErrFailedPrecondition)
	}
	sha, err := g.writeCommit(tree, []plumbing.Hash{head}, author(s.Author), s.Message, p.now())
	if err != nil {
		return nil, err
	}
	if err := g.moveBranch(s.Branch, sha, head); err != nil {
		return nil, err
	}
	_ = p.store.TouchRepo(ctx, r.Owner, r.Name)
	_, stats, err := g.diff(ctx, head, sha, false)
	if err != nil {
		return nil, err
	}
	return &githubv1.CommitFilesResponse{CommitSha: sha.String(), ParentSha: head.String(), Branch: s.Branch, Stats: stats}, nil
}

// url is the gateway URL of a pull request or issue.
func (p *Provider) url(repo, kind string, n int32) string {
	return p.baseURL + "/v1/repos/" + repo + "/" + kind + "/" + strconv.Itoa(int(n))
}

// CreatePullRequest opens a pull request, or returns the open one from head to base.
func (p *Provider) CreatePullRequest(ctx context.Context, np forge.NewPullRequest) (*githubv1.PullRequest, bool, error) {
	r, err := p.repo(ctx, np.Repo, np.Actor)
	if err != nil {
		return nil, false, err
	}
	base := np.Base
	if base == "" {
		base = r.DefaultBranch
	}
	if base == np.Head {
		return nil, false, fmt.Errorf("head: %q is also the base; a pull request needs two branches: %w", np.Head, errs.ErrInvalid)
	}
	g, err := p.open(np.Repo)
	if err != nil {
		return nil, false, err
	}
	headSHA, baseSHA, mb, err := p.ends(g, np.Head, base)
	if err != nil {
		return nil, false, err
	}
	if headSHA == mb {
		return nil, false, fmt.Errorf("head: %q has no commits that %q lacks: %w", np.Head, base, errs.ErrFailedPrecondition)
	}
	_, stats, err := g.diff(ctx, mb, headSHA, false)
	if err != nil {
		return nil, false, err
	}
	_ = baseSHA
	pr, created, err := p.store.CreatePullRequest(ctx, &githubv1.PullRequest{
		Repo: np.Repo, Title: np.Title, Body: np.Body, Head: np.Head, Base: base, HeadSha: headSHA.String(),
		BaseSha: mb.String(), Draft: np.Draft, Author: np.Actor.UserID, Labels: np.Labels, Stats: stats,
	})
	if err != nil {
		return nil, false, err
	}
	out, err := p.refresh(ctx, g, pr)
	return out, created, err
}

// ends resolves a pull request's head and base branches and their merge base.
func (p *Provider) ends(g *gitRepo, head, base string) (headSHA, baseSHA, mb plumbing.Hash, err error) {
	if headSHA, err = g.branchHead(head); err != nil {
		return
	}
	if headSHA.IsZero() {
		err = fmt.Errorf("head: branch %q: %w", head, errs.ErrNotFound)
		return
	}
	if baseSHA, err = g.branchHead(base); err != nil {
		return
	}
	if baseSHA.IsZero() {
		err = fmt.Errorf("base: branch %q: %w", base, errs.ErrNotFound)
		return
	}
	if mb, err = g.mergeBase(headSHA, baseSHA); err != nil {
		return
	}
	if mb.IsZero() {
		err = fmt.Errorf("head: %q and %q share no history: %w", head, base, errs.ErrFailedPrecondition)
	}
	return
}

// refresh brings an open pull request up to date with its branches: head, merge base,
// stats (stored when they moved) and whether it merges cleanly.
func (p *Provider) refresh(ctx context.Context, g *gitRepo, pr *githubv1.PullRequest) (*githubv1.PullRequest, error) {
	pr.Url = p.url(pr.GetRepo(), "pulls", pr.GetNumber())
	if pr.GetState() != githubv1.PullRequestState_PULL_REQUEST_STATE_OPEN {
		return pr, nil
	}
	headSHA, baseSHA, mb, err := p.ends(g, pr.GetHead(), pr.GetBase())
	if err != nil {
		// A deleted branch leaves the pull request as last seen, not mergeable.
		if errors.Is(err, errs.ErrNotFound) || errors.Is(err, errs.ErrFailedPrecondition) {
			pr.Mergeable = new(bool)
			return pr, nil
		}
		return nil, err
	}
	if headSHA.String() != pr.GetHeadSha() || mb.String() != pr.GetBaseSha() {
		_, stats, err := g.diff(ctx, mb, headSHA, false)
		if err != nil {
			return nil, err
		}
		up, err := p.store.UpdatePullRequest(ctx, pr.GetRepo(), pr.GetNumber(), store.PullRequestUpdate{
			HeadSHA: headSHA.String(), BaseSHA: mb.String(), Stats: stats})
		if err != nil {
			return nil, err
		}
		up.Url = pr.Url
		pr = up
	}
	_, conflicts, err := p.mergedTree(g, mb, baseSHA, headSHA)
	if err != nil {
		return nil, err
	}
	ok := len(conflicts) == 0
	pr.Mergeable = &ok
	return pr, nil
}

// mergedTree merges head into base (with merge base mb) file by file.
func (p *Provider) mergedTree(g *gitRepo, mb, base, head plumbing.Hash) (map[string]entry, []string, error) {
	fh, err := g.flatten(head)
	if err != nil {
		return nil, nil, err
	}
	if mb == base {
		return fh, nil, nil
	}
	fm, err := g.flatten(mb)
	if err != nil {
		return nil, nil, err
	}
	fb, err := g.flatten(base)
	if err != nil {
		return nil, nil, err
	}
	out, conflicts := merge3(fm, fb, fh)
	return out, conflicts, nil
}

// GetPullRequest returns a pull request, refreshed.
func (p *Provider) GetPullRequest(ctx context.Context, repo string, number int32, a forge.Actor) (*githubv1.PullRequest, error) {
	if _, err := p.repo(ctx, repo, a); err != nil {
		return nil, err
	}
	pr, err := p.store.GetPullRequest(ctx, repo, number)
	if err != nil {
		return nil, err
	}
	g, err := p.open(repo)
	if err != nil {
		return nil, err
	}
	return p.refresh(ctx, g, pr)
}

// ListPullRequests lists pull requests, newest first (as last refreshed).
func (p *Provider) ListPullRequests(ctx context.Context, q forge.PullRequestQuery, a forge.Actor) ([]*githubv1.PullRequest, string, error) {
	if _, err := p.repo(ctx, q.Repo, a); err != nil {
		return nil, "", err
	}
	before, err := cursorNumber(q.Page.Cursor)
	if err != nil {
		return nil, "", err
	}
	rows, err := p.store.ListPullRequests(ctx, store.PullRequestFilter{Repo: q.Repo, State: q.State, Head: q.Head,
		Base: q.Base, Before: before, Limit: q.Page.Size + 1})
	if err != nil {
		return nil, "", err
	}
	rows, next := page(rows, q.Page.Size, (*githubv1.PullRequest).GetNumber)
	for _, pr := range rows {
		pr.Url = p.url(pr.GetRepo(), "pulls", pr.GetNumber())
	}
	return rows, next, nil
}

// page cuts rows, read with one row more than size, to size and returns the cursor of the
// next page (the last number shown; "" on the last page).
func page[T any](rows []T, size int, number func(T) int32) ([]T, string) {
	if len(rows) <= size {
		return rows, ""
	}
	rows = rows[:size]
	return rows, strconv.Itoa(int(number(rows[len(rows)-1])))
}

func cursorNumber(c string) (int32, error) {
	if c == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(c, 10, 32)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("page_token: malformed: %w", errs.ErrInvalid)
	}
	return int32(n), nil
}

// PullRequestDiff diffs a pull request's head against its merge base (or the pinned pair).
func (p *Provider) PullRequestDiff(ctx context.Context, repo string, number int32, pin *forge.DiffPin, a forge.Actor) (*forge.Diff, error) {
	pr, err := p.GetPullRequest(ctx, repo, number, a)
	if err != nil {
		return nil, err
	}
	base, head := pr.GetBaseSha(), pr.GetHeadSha()
	if pin != nil {
		base, head = pin.BaseSHA, pin.HeadSHA
	}
	g, err := p.open(repo)
	if err != nil {
		return nil, err
	}
	files, stats, err := g.diff(ctx, plumbing.NewHash(base), plumbing.NewHash(head), true)
	if err != nil {
		return nil, err
	}
	return &forge.Diff{BaseSHA: base, HeadSHA: head, Files: files, Stats: stats}, nil
}

// MergePullRequest merges an open pull request into its base.
func (p *Provider) MergePullRequest(ctx context.Context, m forge.MergeSpec) (*githubv1.PullRequest, error) {
	if _, err := p.repo(ctx, m.Repo, m.Actor); err != nil {
		return nil, err
	}
	defer p.lock(m.Repo)()
	pr, err := p.store.GetPullRequest(ctx, m.Repo, m.Number)
	if err != nil {
		return nil, err
	}
	pr.Url = p.url(m.Repo, "pulls", m.Number)
	switch pr.GetState() {
	case githubv1.PullRequestState_PULL_REQUEST_STATE_MERGED:
		return pr, nil
	case githubv1.PullRequestState_PULL_REQUEST_STATE_CLOSED:
		return nil, fmt.Errorf("pull request %s#%d is closed; reopen it or open another: %w", m.Repo, m.Number, errs.ErrFailedPrecondition)
	}
	g, err := p.open(m.Repo)
	if err != nil {
		return nil, err
	}
	headSHA, baseSHA, mb, err := p.ends(g, pr.GetHead(), pr.GetBase())
	if err != nil {
		if errors.Is(err, errs.ErrNotFound) {
			return nil, fmt.Errorf("pull request %s#%d cannot merge: %s: %w", m.Repo, m.Number, strings.TrimSuffix(err.Error(), ": "+errs.ErrNotFound.Error()), errs.ErrFailedPrecondition)
		}
		return nil, err
	}
	if m.ExpectedHeadSHA != "" && headSHA.String() != m.ExpectedHeadSHA {
		return nil, fmt.Errorf("head %q is at %s, not at expected_head_sha %s: %w", pr.GetHead(), short(headSHA), m.ExpectedHeadSHA, errs.ErrConflict)
	}
	merged, err := p.merge(g, m, pr, mb, baseSHA, headSHA)
	if err != nil {
		return nil, err
	}
	if err := g.moveBranch(pr.GetBase(), merged, baseSHA); err != nil {
		return nil, err
	}
	_, stats, err := g.diff(ctx, mb, headSHA, false)
	if err != nil {
		return nil, err
	}
	out, err := p.store.UpdatePullRequest(ctx, m.Repo, m.Number, store.PullRequestUpdate{HeadSHA: headSHA.String(),
		BaseSHA: mb.String(), Stats: stats, State: githubv1.PullRequestState_PULL_REQUEST_STATE_MERGED,
		MergeCommitSHA: merged.String(), FromState: githubv1.PullRequestState_PULL_REQUEST_STATE_OPEN})
	if err != nil {
		return nil, err
	}
	owner, name, _ := strings.Cut(m.Repo, "/")
	_ = p.store.TouchRepo(ctx, owner, name)
	if m.DeleteBranch {
		if err := g.deleteBranch(pr.GetHead()); err != nil {
			return nil, err
		}
	}
	out.Url = pr.Url
	return out, nil
}

// merge writes the commit that lands head on base by the chosen method and returns it.
func (p *Provider) merge(g *gitRepo, m forge.MergeSpec, pr *githubv1.PullRequest, mb, base, head plumbing.Hash) (plumbing.Hash, error) {
	now := p.now()
	title := m.CommitTitle
	if title == "" {
		title = fmt.Sprintf("%s (#%d)", pr.GetTitle(), pr.GetNumber())
	}
	msg := m.CommitMessage
	if msg == "" {
		msg = pr.GetBody()
	}
	if msg != "" {
		title += "\n\n" + msg
	}
	if m.Method == githubv1.MergeMethod_MERGE_METHOD_REBASE {
		return p.rebase(g, mb, base, head)
	}
	files, conflicts, err := p.mergedTree(g, mb, base, head)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if len(conflicts) > 0 {
		return plumbing.ZeroHash, conflictError(pr, conflicts)
	}
	tree, err := g.writeTree(files)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	parents := []plumbing.Hash{base}
	if m.Method == githubv1.MergeMethod_MERGE_METHOD_MERGE {
		parents = append(parents, head)
	}
	return g.writeCommit(tree, parents, author(forge.Signature{}), title, now)
}

// rebase replays head's commits since mb on base, one by one; when base has not moved it
// is a fast-forward to head.
func (p *Provider) rebase(g *gitRepo, mb, base, head plumbing.Hash) (plumbing.Hash, error) {
	if mb == base {
		return head, nil
	}
	var chain []plumbing.Hash
	for h := head; h != mb; {
		c, err := g.commit(h)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if len(c.ParentHashes) == 0 {
			break
		}
		chain = append(chain, h)
		h = c.ParentHashes[0]
	}
	cur := base
	for i := len(chain) - 1; i >= 0; i-- {
		c, err := g.commit(chain[i])
		if err != nil {
			return plumbing.ZeroHash, err
		}
		files, conflicts, err := p.mergedTree(g, c.ParentHashes[0], cur, chain[i])
		if err != nil {
			return plumbing.ZeroHash, err
		}
		if len(conflicts) > 0 {
			return plumbing.ZeroHash, fmt.Errorf("rebasing %s conflicts in %s: %w", short(chain[i]), strings.Join(conflicts, ", "), errs.ErrFailedPrecondition)
		}
		tree, err := g.writeTree(files)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		sig := forge.Signature{Name: c.Author.Name, Email: c.Author.Email}
		if cur, err = g.writeCommit(tree, []plumbing.Hash{cur}, sig, c.Message, c.Author.When); err != nil {
			return plumbing.ZeroHash, err
		}
	}
	return cur, nil
}

func conflictError(pr *githubv1.PullRequest, conflicts []string) error {
	shown := conflicts
	if len(shown) > 10 {
		shown = shown[:10]
	}
	return fmt.Errorf("pull request %s#%d does not merge cleanly: %s changed on both %q and %q (%d files): %w",
		pr.GetRepo(), pr.GetNumber(), strings.Join(shown, ", "), pr.GetHead(), pr.GetBase(), len(conflicts), errs.ErrFailedPrecondition)
}

// ClosePullRequest closes an open pull request.
func (p *Provider) ClosePullRequest(ctx context.Context, repo string, number int32, deleteBranch bool, a forge.Actor) (*githubv1.PullRequest, error) {
	if _, err := p.repo(ctx, repo, a); err != nil {
		return nil, err
	}
	defer p.lock(repo)()
	pr, err := p.store.GetPullRequest(ctx, repo, number)
	if err != nil {
		return nil, err
	}
	pr.Url = p.url(repo, "pulls", number)
	switch pr.GetState() {
	case githubv1.PullRequestState_PULL_REQUEST_STATE_CLOSED:
		return pr, nil
	case githubv1.PullRequestState_PULL_REQUEST_STATE_MERGED:
		return nil, fmt.Errorf("pull request %s#%d is merged: %w", repo, number, errs.ErrFailedPrecondition)
	}
	out, err := p.store.UpdatePullRequest(ctx, repo, number, store.PullRequestUpdate{HeadSHA: pr.GetHeadSha(),
		BaseSHA: pr.GetBaseSha(), Stats: pr.GetStats(), State: githubv1.PullRequestState_PULL_REQUEST_STATE_CLOSED,
		FromState: githubv1.PullRequestState_PULL_REQUEST_STATE_OPEN})
	if err != nil {
		return nil, err
	}
	if deleteBranch {
		g, err := p.open(repo)
		if err != nil {
			return nil, err
		}
		if err := g.deleteBranch(pr.GetHead()); err != nil {
			return nil, err
		}
	}
	out.Url = pr.Url
	return out, nil
}

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
