package hub

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/google/go-github/v84/github"
	"golang.org/x/sync/errgroup"

	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
)

// Files reads files at a commit: each path is looked up in the commit's trees (one
// directory listing per directory on the way, shared between paths) and its blob read raw.
// A path that does not exist or is not a regular file (a directory, symlink or submodule)
// is missing. Content that is not valid UTF-8 is binary and not returned.
func (p *Provider) Files(ctx context.Context, repo, commit string, paths []string) ([]*githubv1.File, []string, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return nil, nil, err
	}
	ix := p.newTreeIndex(owner, name, repo, commit)
	found := make([]*githubv1.File, len(paths))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallelReads)
	for i, path := range paths {
		g.Go(func() error {
			e, err := ix.lookup(gctx, path)
			if err != nil || e == nil || !isRegular(e) {
				return err
			}
			data, err := p.blob(gctx, owner, name, repo, e.GetSHA())
			if err != nil {
				return err
			}
			f := &githubv1.File{Path: path, Size: int64(len(data)), Sha: e.GetSHA()}
			if utf8.Valid(data) {
				f.Content = string(data)
			} else {
				f.Binary = true
			}
			found[i] = f
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, nil, err
	}
	var files []*githubv1.File
	var missing []string
	for i, f := range found {
		if f == nil {
			missing = append(missing, paths[i])
			continue
		}
		files = append(files, f)
	}
	return files, missing, nil
}

func isRegular(e *github.TreeEntry) bool {
	return e.GetType() == "blob" && e.GetMode() != "120000"
}

// blob reads a blob's bytes.
func (p *Provider) blob(ctx context.Context, owner, name, repo, sha string) ([]byte, error) {
	data, _, err := read(ctx, p, func(ctx context.Context) ([]byte, *github.Response, error) {
		return p.gh.Git.GetBlobRaw(ctx, owner, name, sha)
	})
	if err != nil {
		return nil, p.mapErr(ctx, err, fmt.Sprintf("blob %q in %q", sha, repo))
	}
	return data, nil
}

// treeIndex finds paths in a commit's tree by listing the directories on their way, each
// directory once, also when lookups run concurrently.
type treeIndex struct {
	p                 *Provider
	owner, name, repo string
	commit            string
	mu                sync.Mutex
	dirs              map[string]*dirListing // directory path ("" = root, else "a/b/") → listing
}

// dirListing is one directory's entries by name, ready once done is closed.
type dirListing struct {
	done    chan struct{}
	entries map[string]*github.TreeEntry
	err     error
}

func (p *Provider) newTreeIndex(owner, name, repo, commit string) *treeIndex {
	return &treeIndex{p: p, owner: owner, name: name, repo: repo, commit: commit, dirs: map[string]*dirListing{}}
}

// lookup returns the entry at path, nil when there is none.
func (ix *treeIndex) lookup(ctx context.Context, path string) (*github.TreeEntry, error) {
	parts := strings.Split(path, "/")
	dir, treeSHA := "", ix.commit
	for i, part := range parts {
		if part == "" {
			return nil, nil
		}
		entries, err := ix.list(ctx, dir, treeSHA)
		if err != nil {
			return nil, err
		}
		e := entries[part]
		switch {
		case e == nil:
			return nil, nil
		case i == len(parts)-1:
			return e, nil
		case e.GetType() != "tree":
			return nil, nil
		}
		dir, treeSHA = dir+part+"/", e.GetSHA()
	}
	return nil, nil
}

func (ix *treeIndex) list(ctx context.Context, dir, sha string) (map[string]*github.TreeEntry, error) {
	ix.mu.Lock()
	l, ok := ix.dirs[dir]
	if !ok {
		l = &dirListing{done: make(chan struct{})}
		ix.dirs[dir] = l
	}
	ix.mu.Unlock()
	if ok {
		select {
		case <-l.done:
			return l.entries, l.err
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	defer close(l.done)
	p := ix.p
	t, _, err := read(ctx, p, func(ctx context.Context) (*github.Tree, *github.Response, error) {
		return p.gh.Git.GetTree(ctx, ix.owner, ix.name, sha, false)
	})
	if err != nil {
		l.err = p.treeErr(ctx, err, ix.repo, ix.commit)
		return nil, l.err
	}
	l.entries = make(map[string]*github.TreeEntry, len(t.Entries))
	for _, e := range t.Entries {
		l.entries[e.GetPath()] = e
	}
	return l.entries, nil
}
