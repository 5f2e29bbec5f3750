package hub

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"unicode/utf8"

	"github.com/google/go-github/v84/github"

	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/textedit"
	"github.com/thefold/thefold/services/github/internal/forge"
)

// CreateBranch creates a branch at fromCommit; an existing branch is returned as it is
// (created false), never moved.
func (p *Provider) CreateBranch(ctx context.Context, repo, branch, fromCommit string, _ forge.Actor) (string, bool, error) {
	owner, name, err := splitRepo(repo)
	if err != nil {
		return "", false, err
	}
	subject := fmt.Sprintf("branch %q in %q", branch, repo)
	sha, err := p.branchHead(ctx, owner, name, branch)
	switch {
	case err == nil:
		return sha, false, nil
	case isEmptyRepo(err):
		return "", false, fmt.Errorf("repository %q is empty: %w", repo, errs.ErrFailedPrecondition)
	case httpStatus(err) != http.StatusNotFound:
		return "", false, p.mapErr(ctx, err, subject)
	}
	ref, _, err := p.gh.Git.CreateRef(ctx, owner, name, github.CreateRef{Ref: "refs/heads/" + branch, SHA: fromCommit})
	switch {
	case err == nil:
		return ref.GetObject().GetSHA(), true, nil
	case isStatus(err, http.StatusUnprocessableEntity, "already exists"):
		// Created concurrently: return it as it is.
		sha, err := p.branchHead(ctx, owner, name, branch)
		if err != nil {
			return "", false, p.mapErr(ctx, err, subject)
		}
		return sha, false, nil
	case isStatus(err, http.StatusUnprocessableEntity, "object does not exist"):
		p.log.DebugContext(ctx, "github: branch start not found", "repo", repo, "commit", fromCommit, "err", err)
		return "", false, fmt.Errorf("commit %q in %q: %w", fromCommit, repo, errs.ErrNotFound)
	case httpStatus(err) == http.StatusUnprocessableEntity:
		p.log.DebugContext(ctx, "github: branch refused", "repo", repo, "branch", branch, "err", err)
		return "", false, fmt.Errorf("branch name %q: refused by GitHub: %w", branch, errs.ErrInvalid)
	}
	return "", false, p.mapErr(ctx, err, subject)
}

// Commit makes one commit of all files on a branch with the git data API: blobs, a tree on
// the parent's tree, a commit, and a ref update that is not forced, so a branch that moved
// after it was read is ABORTED rather than overwritten.
func (p *Provider) Commit(ctx context.Context, s forge.CommitSpec) (*githubv1.CommitFilesResponse, error) {
	owner, name, err := splitRepo(s.Repo)
	if err != nil {
		return nil, err
	}
	if len(s.Files) == 0 {
		return nil, fmt.Errorf("commit: no files: %w", errs.ErrInvalid)
	}
	subject := fmt.Sprintf("branch %q in %q", s.Branch, s.Repo)
	parent, err := p.branchHead(ctx, owner, name, s.Branch)
	switch {
	case isEmptyRepo(err):
		return nil, fmt.Errorf("%s: %w", subject, errs.ErrNotFound)
	case err != nil:
		return nil, p.mapErr(ctx, err, subject)
	}
	if s.ExpectedParent != "" && s.ExpectedParent != parent {
		return nil, fmt.Errorf("branch %q is at %s, not at the expected parent %s: %w", s.Branch, parent, s.ExpectedParent, errs.ErrConflict)
	}
	sha, err := p.commitOnto(ctx, commitJob{
		repo: s.Repo, owner: owner, name: name, branch: s.Branch, parent: parent,
		message: s.Message, author: commitAuthor(s.Author), files: s.Files,
	})
	if err != nil {
		return nil, err
	}
	return &githubv1.CommitFilesResponse{
		CommitSha: sha,
		ParentSha: parent,
		Branch:    s.Branch,
		Stats:     p.commitStats(ctx, owner, name, sha),
	}, nil
}

// commitJob is one commit on top of parent, which branch points at.
type commitJob struct {
	repo, owner, name, branch string
	parent                    string
	parentTree                string // the parent's tree when known, else read
	message                   string
	author                    *github.CommitAuthor
	files                     []*typev1.FileChange
}

// commitOnto writes j's files as one commit on j.parent and moves j.branch to it (not
// forced). It returns the new commit.
func (p *Provider) commitOnto(ctx context.Context, j commitJob) (string, error) {
	subject := fmt.Sprintf("branch %q in %q", j.branch, j.repo)
	if j.parentTree == "" {
		pc, _, err := read(ctx, p, func(ctx context.Context) (*github.Commit, *github.Response, error) {
			return p.gh.Git.GetCommit(ctx, j.owner, j.name, j.parent)
		})
		if err != nil {
			return "", p.mapErr(ctx, err, fmt.Sprintf("commit %q in %q", j.parent, j.repo))
		}
		j.parentTree = pc.GetTree().GetSHA()
	}
	ix := p.newTreeIndex(j.owner, j.name, j.repo, j.parent)
	entries := make([]*github.TreeEntry, 0, len(j.files))
	for _, f := range j.files {
		e, err := p.treeEntry(ctx, j, ix, f)
		if err != nil {
			return "", err
		}
		entries = append(entries, e)
	}
	tree, _, err := p.gh.Git.CreateTree(ctx, j.owner, j.name, j.parentTree, entries)
	if err != nil {
		return "", p.mapErr(ctx, err, subject)
	}
	c, _, err := p.gh.Git.CreateCommit(ctx, j.owner, j.name, github.Commit{
		Message: github.Ptr(j.message),
		Tree:    &github.Tree{SHA: tree.SHA},
		Parents: []*github.Commit{{SHA: github.Ptr(j.parent)}},
		Author:  j.author,
	}, nil)
	if err != nil {
		return "", p.mapErr(ctx, err, subject)
	}
	_, _, err = p.gh.Git.UpdateRef(ctx, j.owner, j.name, "heads/"+j.branch, github.UpdateRef{SHA: c.GetSHA(), Force: github.Ptr(false)})
	switch {
	case err == nil:
		return c.GetSHA(), nil
	case isStatus(err, http.StatusUnprocessableEntity, "fast forward"), httpStatus(err) == http.StatusConflict:
		p.log.InfoContext(ctx, "github: branch moved during commit", "repo", j.repo, "branch", j.branch, "err", err)
		return "", fmt.Errorf("branch %q moved while committing; re-read it and retry: %w", j.branch, errs.ErrConflict)
	case isStatus(err, http.StatusUnprocessableEntity, "does not exist"):
		return "", fmt.Errorf("%s: %w", subject, errs.ErrNotFound)
	}
	return "", p.mapErr(ctx, err, subject)
}

// treeEntry is the tree entry of one file change: a new blob, or a deletion (nil sha).
func (p *Provider) treeEntry(ctx context.Context, j commitJob, ix *treeIndex, f *typev1.FileChange) (*github.TreeEntry, error) {
	path := f.GetPath()
	mode := "100644"
	if f.GetExecutable() {
		mode = "100755"
	}
	content := f.GetContent()
	switch f.GetAction() {
	case typev1.FileAction_FILE_ACTION_DELETE:
		e, err := ix.lookup(ctx, path)
		if err != nil {
			return nil, err
		}
		if e == nil || e.GetType() == "tree" {
			return nil, fmt.Errorf("file %q does not exist on branch %q: %w", path, j.branch, errs.ErrFailedPrecondition)
		}
		return &github.TreeEntry{Path: github.Ptr(path), Mode: github.Ptr(e.GetMode()), Type: github.Ptr("blob")}, nil
	case typev1.FileAction_FILE_ACTION_MODIFY:
		if len(f.GetEdits()) == 0 {
			break
		}
		e, err := ix.lookup(ctx, path)
		if err != nil {
			return nil, err
		}
		if e == nil || !isRegular(e) {
			return nil, fmt.Errorf("file %q does not exist on branch %q: %w", path, j.branch, errs.ErrFailedPrecondition)
		}
		data, err := p.blob(ctx, j.owner, j.name, j.repo, e.GetSHA())
		if err != nil {
			return nil, err
		}
		if !utf8.Valid(data) {
			return nil, fmt.Errorf("file %q is binary; edits apply to text: %w", path, errs.ErrFailedPrecondition)
		}
		content, err = textedit.Apply(string(data), f.GetEdits())
		if err != nil {
			var ee *textedit.EditError
			if errors.As(err, &ee) {
				return nil, fmt.Errorf("file %q: %s: %w", path, ee.Error(), errs.ErrFailedPrecondition)
			}
			return nil, fmt.Errorf("file %q: %w", path, err)
		}
	case typev1.FileAction_FILE_ACTION_CREATE:
	default:
		return nil, fmt.Errorf("file %q: action %s: %w", path, f.GetAction(), errs.ErrInvalid)
	}
	b, _, err := p.gh.Git.CreateBlob(ctx, j.owner, j.name, github.Blob{
		Content:  github.Ptr(base64.StdEncoding.EncodeToString([]byte(content))),
		Encoding: github.Ptr("base64"),
	})
	if err != nil {
		return nil, p.mapErr(ctx, err, fmt.Sprintf("repository %q", j.repo))
	}
	return &github.TreeEntry{Path: github.Ptr(path), Mode: github.Ptr(mode), Type: github.Ptr("blob"), SHA: b.SHA}, nil
}

// commitStats is what a commit changed against its parent, from GitHub's commit (whose
// file list GitHub pages: a commit of more files than one page also reads the last page).
// A failure is logged, not returned: the commit is made, and an error would make the
// caller believe otherwise.
func (p *Provider) commitStats(ctx context.Context, owner, name, sha string) *typev1.DiffStats {
	get := func(page int) (*github.RepositoryCommit, *github.Response, error) {
		return read(ctx, p, func(ctx context.Context) (*github.RepositoryCommit, *github.Response, error) {
			return p.gh.Repositories.GetCommit(ctx, owner, name, sha, &github.ListOptions{Page: page, PerPage: maxPerPage})
		})
	}
	rc, resp, err := get(1)
	var files int
	if err == nil {
		files = len(rc.Files)
	}
	if err == nil && resp.LastPage > 1 {
		var last *github.RepositoryCommit
		if last, _, err = get(resp.LastPage); err == nil {
			files = (resp.LastPage-1)*maxPerPage + len(last.Files)
		}
	}
	if err != nil {
		p.log.WarnContext(ctx, "github: commit stats unavailable", "repo", owner+"/"+name, "commit", sha, "err", err)
		return nil
	}
	return &typev1.DiffStats{
		FilesChanged: int32(files),
		Additions:    int32(rc.GetStats().GetAdditions()),
		Deletions:    int32(rc.GetStats().GetDeletions()),
	}
}

// commitAuthor is the author of a commit: the signature asked for, else TheFold's.
func commitAuthor(s forge.Signature) *github.CommitAuthor {
	if s.Name == "" && s.Email == "" {
		s = DefaultAuthor
	}
	if s.Name == "" {
		s.Name = DefaultAuthor.Name
	}
	if s.Email == "" {
		s.Email = DefaultAuthor.Email
	}
	return &github.CommitAuthor{Name: github.Ptr(s.Name), Email: github.Ptr(s.Email)}
}
