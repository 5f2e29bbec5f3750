package hub

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"github.com/google/go-github/v84/github"
	"golang.org/x/sync/errgroup"

	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/services/github/internal/forge"
)

// parallelReads bounds the concurrent calls of one request (tree walks, blob reads):
// GitHub's secondary limits punish bursts.
const parallelReads = 6

var fullSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

// Resolve returns the commit ref names: the default branch for "", else a branch, a tag or
// a commit sha, in that order (a full sha is verified to be a commit; an abbreviated one is
// resolved by GitHub).
func (p *Provider) Resolve(ctx context.Context, repo, ref string, _ forge.Actor) (string, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return "", err
	}
	empty := func() error { return fmt.Errorf("repository %q: %w", repo, forge.ErrEmpty) }
	if ref == "" {
		r, err := p.getRepo(ctx, repo)
		if err != nil {
			return "", err
		}
		sha, err := p.branchHead(ctx, owner, name, r.GetDefaultBranch())
		switch {
		case isEmptyRepo(err):
			return "", empty()
		case err != nil:
			return "", p.mapErr(ctx, err, fmt.Sprintf("default branch %q of %q", r.GetDefaultBranch(), repo))
		}
		return sha, nil
	}
	notFound := fmt.Errorf("ref %q in %q: %w", ref, repo, errs.ErrNotFound)
	if fullSHA.MatchString(ref) {
		_, _, err := read(ctx, p, func(ctx context.Context) (*github.Commit, *github.Response, error) {
			return p.gh.Git.GetCommit(ctx, owner, name, ref)
		})
		switch {
		case err == nil:
			return ref, nil
		case isEmptyRepo(err):
			return "", empty()
		case httpStatus(err) == http.StatusNotFound || httpStatus(err) == http.StatusUnprocessableEntity:
			// Not a commit here: it may still be a branch or tag named like a sha.
		default:
			return "", p.mapErr(ctx, err, fmt.Sprintf("repository %q", repo))
		}
	}
	kinds := []string{"heads/", "tags/"}
	switch {
	case strings.HasPrefix(ref, "refs/heads/"):
		kinds, ref = kinds[:1], strings.TrimPrefix(ref, "refs/heads/")
	case strings.HasPrefix(ref, "refs/tags/"):
		kinds, ref = kinds[1:], strings.TrimPrefix(ref, "refs/tags/")
	}
	for _, kind := range kinds {
		r, _, err := read(ctx, p, func(ctx context.Context) (*github.Reference, *github.Response, error) {
			return p.gh.Git.GetRef(ctx, owner, name, kind+ref)
		})
		switch {
		case err == nil:
			return p.peel(ctx, owner, name, repo, r.GetObject())
		case isEmptyRepo(err):
			return "", empty()
		case httpStatus(err) == http.StatusNotFound || httpStatus(err) == http.StatusUnprocessableEntity:
			continue
		default:
			return "", p.mapErr(ctx, err, fmt.Sprintf("repository %q", repo))
		}
	}
	if len(kinds) == 1 || fullSHA.MatchString(ref) {
		return "", notFound
	}
	// An abbreviated sha (or another name GitHub resolves).
	sha, _, err := read(ctx, p, func(ctx context.Context) (string, *github.Response, error) {
		return p.gh.Repositories.GetCommitSHA1(ctx, owner, name, ref, "")
	})
	switch {
	case err == nil && fullSHA.MatchString(sha):
		return sha, nil
	case err == nil:
		p.log.WarnContext(ctx, "github: unexpected commit sha answer", "repo", repo, "ref", ref)
		return "", notFound
	case isEmptyRepo(err):
		return "", empty()
	case httpStatus(err) == http.StatusNotFound || httpStatus(err) == http.StatusUnprocessableEntity:
		p.log.DebugContext(ctx, "github: ref not found", "repo", repo, "ref", ref, "err", err)
		return "", notFound
	}
	return "", p.mapErr(ctx, err, fmt.Sprintf("repository %q", repo))
}

// peel follows annotated tags to the commit they name.
func (p *Provider) peel(ctx context.Context, owner, name, repo string, obj *github.GitObject) (string, error) {
	for range 5 {
		if obj.GetType() != "tag" {
			return obj.GetSHA(), nil
		}
		tag, _, err := read(ctx, p, func(ctx context.Context) (*github.Tag, *github.Response, error) {
			return p.gh.Git.GetTag(ctx, owner, name, obj.GetSHA())
		})
		if err != nil {
			return "", p.mapErr(ctx, err, fmt.Sprintf("tag in %q", repo))
		}
		obj = tag.GetObject()
	}
	return "", fmt.Errorf("tag chain in %q too long: %w", repo, errs.ErrInvalid)
}

// branchHead returns the commit a branch points at; errors unmapped (isEmptyRepo, 404).
func (p *Provider) branchHead(ctx context.Context, owner, name, branch string) (string, error) {
	r, _, err := read(ctx, p, func(ctx context.Context) (*github.Reference, *github.Response, error) {
		return p.gh.Git.GetRef(ctx, owner, name, "heads/"+branch)
	})
	if err != nil {
		return "", err
	}
	return r.GetObject().GetSHA(), nil
}

// Tree lists a commit's tree with one recursive call; when GitHub truncates that listing
// (more than 100,000 entries or 7 MB) it walks the trees one directory at a time instead,
// so the listing is always complete.
func (p *Provider) Tree(ctx context.Context, repo, commit string) ([]*githubv1.TreeEntry, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return nil, err
	}
	t, _, err := read(ctx, p, func(ctx context.Context) (*github.Tree, *github.Response, error) {
		return p.gh.Git.GetTree(ctx, owner, name, commit, true)
	})
	if err != nil {
		return nil, p.treeErr(ctx, err, repo, commit)
	}
	var out []*githubv1.TreeEntry
	if !t.GetTruncated() {
		out = make([]*githubv1.TreeEntry, 0, len(t.Entries))
		for _, e := range t.Entries {
			out = append(out, toTreeEntry(e.GetPath(), e))
		}
	} else {
		p.log.InfoContext(ctx, "github: recursive tree truncated; walking directories", "repo", repo, "commit", commit)
		if out, err = p.walkTree(ctx, owner, name, repo, commit); err != nil {
			return nil, err
		}
	}
	slices.SortFunc(out, func(a, b *githubv1.TreeEntry) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

func (p *Provider) treeErr(ctx context.Context, err error, repo, commit string) error {
	if isEmptyRepo(err) {
		return fmt.Errorf("repository %q: %w", repo, forge.ErrEmpty)
	}
	if httpStatus(err) == http.StatusUnprocessableEntity {
		return fmt.Errorf("commit %q in %q: %w", commit, repo, errs.ErrNotFound)
	}
	return p.mapErr(ctx, err, fmt.Sprintf("commit %q in %q", commit, repo))
}

// walkTree lists a tree without recursive=1: one call per directory, level by level, a few
// at a time.
func (p *Provider) walkTree(ctx context.Context, owner, name, repo, commit string) ([]*githubv1.TreeEntry, error) {
	type dir struct{ sha, prefix string }
	var out []*githubv1.TreeEntry
	for level := []dir{{commit, ""}}; len(level) > 0; {
		lists := make([][]*github.TreeEntry, len(level))
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(parallelReads)
		for i, d := range level {
			g.Go(func() error {
				t, _, err := read(gctx, p, func(ctx context.Context) (*github.Tree, *github.Response, error) {
					return p.gh.Git.GetTree(ctx, owner, name, d.sha, false)
				})
				if err != nil {
					return p.treeErr(gctx, err, repo, commit)
				}
				lists[i] = t.Entries
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			return nil, err
		}
		var next []dir
		for i, d := range level {
			for _, e := range lists[i] {
				path := d.prefix + e.GetPath()
				out = append(out, toTreeEntry(path, e))
				if e.GetType() == "tree" {
					next = append(next, dir{e.GetSHA(), path + "/"})
				}
			}
		}
		level = next
	}
	return out, nil
}

// toTreeEntry maps a git tree entry by its mode.
func toTreeEntry(path string, e *github.TreeEntry) *githubv1.TreeEntry {
	out := &githubv1.TreeEntry{Path: path, Sha: e.GetSHA()}
	switch e.GetMode() {
	case "040000", "40000":
		out.Type = githubv1.TreeEntryType_TREE_ENTRY_TYPE_DIRECTORY
	case "120000":
		out.Type = githubv1.TreeEntryType_TREE_ENTRY_TYPE_SYMLINK
	case "160000":
		out.Type = githubv1.TreeEntryType_TREE_ENTRY_TYPE_SUBMODULE
	case "100644", "100755", "100664":
		out.Type = githubv1.TreeEntryType_TREE_ENTRY_TYPE_FILE
	default:
		switch e.GetType() {
		case "tree":
			out.Type = githubv1.TreeEntryType_TREE_ENTRY_TYPE_DIRECTORY
		case "commit":
			out.Type = githubv1.TreeEntryType_TREE_ENTRY_TYPE_SUBMODULE
		default:
			out.Type = githubv1.TreeEntryType_TREE_ENTRY_TYPE_FILE
		}
	}
	if out.Type == githubv1.TreeEntryType_TREE_ENTRY_TYPE_FILE || out.Type == githubv1.TreeEntryType_TREE_ENTRY_TYPE_SYMLINK {
		out.Size = int64(e.GetSize())
	}
	return out
}
