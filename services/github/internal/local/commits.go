package local

import (
	"context"
	"fmt"
	"io"
	"unicode/utf8"

	"github.com/go-git/go-git/v5/plumbing"

	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"

	"github.com/thefold/thefold/services/github/internal/forge"
)

// Refs, trees, files and commits of the local forge.

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
