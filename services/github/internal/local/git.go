package local

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	fdiff "github.com/go-git/go-git/v5/plumbing/format/diff"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/storage"

	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/textedit"

	"github.com/thefold/thefold/services/github/internal/forge"
)

// gitRepo is one bare repository, written with git's own object and ref formats (go-git),
// so that plain git reads, clones and fsck's it.
type gitRepo struct {
	r  *git.Repository
	st storage.Storer
}

// initBare makes a bare repository at dir whose HEAD names branch.
func initBare(dir, branch string) (*gitRepo, error) {
	r, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		Bare:        true,
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(branch)},
	})
	if err != nil {
		return nil, fmt.Errorf("local forge: init %s: %w", dir, err)
	}
	return &gitRepo{r: r, st: r.Storer}, nil
}

// openBare opens the bare repository at dir.
func openBare(dir string) (*gitRepo, error) {
	r, err := git.PlainOpen(dir)
	if err != nil {
		return nil, fmt.Errorf("local forge: open %s: %w", dir, err)
	}
	return &gitRepo{r: r, st: r.Storer}, nil
}

// entry is a tree entry by full path.
type entry struct {
	mode filemode.FileMode
	hash plumbing.Hash
}

var fullSHA = regexp.MustCompile(`^[0-9a-f]{40}$`)

// branchHead returns a branch's head, or the zero hash when the branch does not exist.
func (g *gitRepo) branchHead(branch string) (plumbing.Hash, error) {
	ref, err := g.st.Reference(plumbing.NewBranchReferenceName(branch))
	if errors.Is(err, plumbing.ErrReferenceNotFound) {
		return plumbing.ZeroHash, nil
	}
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("local forge: read branch %s: %w", branch, err)
	}
	return ref.Hash(), nil
}

// empty reports whether the repository has no branch at all.
func (g *gitRepo) empty() (bool, error) {
	it, err := g.st.IterReferences()
	if err != nil {
		return false, fmt.Errorf("local forge: list refs: %w", err)
	}
	defer it.Close()
	empty := true
	err = it.ForEach(func(r *plumbing.Reference) error {
		if r.Name().IsBranch() {
			empty = false
			return storer.ErrStop
		}
		return nil
	})
	return empty, err
}

// resolve returns the commit a ref names: a branch, a tag (peeled), a full ref name or a
// commit sha (full, or an unambiguous prefix of at least 7 hex digits).
func (g *gitRepo) resolve(ref, defaultBranch string) (plumbing.Hash, error) {
	if ref == "" {
		ref = defaultBranch
	}
	names := []plumbing.ReferenceName{plumbing.NewBranchReferenceName(ref), plumbing.NewTagReferenceName(ref)}
	if strings.HasPrefix(ref, "refs/") {
		names = append([]plumbing.ReferenceName{plumbing.ReferenceName(ref)}, names...)
	}
	for _, n := range names {
		r, err := g.st.Reference(n)
		if errors.Is(err, plumbing.ErrReferenceNotFound) {
			continue
		}
		if err != nil {
			return plumbing.ZeroHash, fmt.Errorf("local forge: read ref %s: %w", n, err)
		}
		return g.peel(r.Hash())
	}
	if len(ref) >= 7 && len(ref) <= 40 && isHex(ref) {
		if fullSHA.MatchString(ref) {
			if _, err := object.GetCommit(g.st, plumbing.NewHash(ref)); err == nil {
				return plumbing.NewHash(ref), nil
			}
		} else if h, err := g.r.ResolveRevision(plumbing.Revision(ref)); err == nil {
			return *h, nil
		}
	}
	if ref == defaultBranch {
		if e, err := g.empty(); err == nil && e {
			return plumbing.ZeroHash, forge.ErrEmpty
		}
	}
	return plumbing.ZeroHash, fmt.Errorf("ref %q: %w", ref, errs.ErrNotFound)
}

func isHex(s string) bool {
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdef", c) {
			return false
		}
	}
	return true
}

// peel follows annotated tags to the commit.
func (g *gitRepo) peel(h plumbing.Hash) (plumbing.Hash, error) {
	for range 10 {
		tag, err := object.GetTag(g.st, h)
		if err != nil {
			return h, nil
		}
		h = tag.Target
	}
	return h, nil
}

// commit reads a commit object.
func (g *gitRepo) commit(h plumbing.Hash) (*object.Commit, error) {
	c, err := object.GetCommit(g.st, h)
	if err != nil {
		return nil, fmt.Errorf("local forge: commit %s: %w", h, err)
	}
	return c, nil
}

// flatten lists a commit's files (blobs, symlinks, submodules) by full path.
func (g *gitRepo) flatten(commit plumbing.Hash) (map[string]entry, error) {
	out := map[string]entry{}
	if commit.IsZero() {
		return out, nil
	}
	c, err := g.commit(commit)
	if err != nil {
		return nil, err
	}
	t, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("local forge: tree of %s: %w", commit, err)
	}
	w := object.NewTreeWalker(t, true, nil)
	defer w.Close()
	for {
		name, e, err := w.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("local forge: walk %s: %w", commit, err)
		}
		if e.Mode != filemode.Dir {
			out[name] = entry{mode: e.Mode, hash: e.Hash}
		}
	}
}

// tree lists every entry of a commit's tree, directories included, in path order.
func (g *gitRepo) tree(commit plumbing.Hash) ([]*githubv1.TreeEntry, error) {
	c, err := g.commit(commit)
	if err != nil {
		return nil, err
	}
	t, err := c.Tree()
	if err != nil {
		return nil, fmt.Errorf("local forge: tree of %s: %w", commit, err)
	}
	var out []*githubv1.TreeEntry
	w := object.NewTreeWalker(t, true, nil)
	defer w.Close()
	for {
		name, e, err := w.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("local forge: walk %s: %w", commit, err)
		}
		te := &githubv1.TreeEntry{Path: name, Sha: e.Hash.String(), Type: entryType(e.Mode)}
		if e.Mode.IsFile() {
			if te.Size, err = g.st.EncodedObjectSize(e.Hash); err != nil {
				return nil, fmt.Errorf("local forge: size of %s: %w", name, err)
			}
		}
		out = append(out, te)
	}
	slices.SortFunc(out, func(a, b *githubv1.TreeEntry) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

func entryType(m filemode.FileMode) githubv1.TreeEntryType {
	switch m {
	case filemode.Dir:
		return githubv1.TreeEntryType_TREE_ENTRY_TYPE_DIRECTORY
	case filemode.Symlink:
		return githubv1.TreeEntryType_TREE_ENTRY_TYPE_SYMLINK
	case filemode.Submodule:
		return githubv1.TreeEntryType_TREE_ENTRY_TYPE_SUBMODULE
	default:
		return githubv1.TreeEntryType_TREE_ENTRY_TYPE_FILE
	}
}

// blob reads a blob's bytes.
func (g *gitRepo) blob(h plumbing.Hash) ([]byte, error) {
	b, err := object.GetBlob(g.st, h)
	if err != nil {
		return nil, fmt.Errorf("local forge: blob %s: %w", h, err)
	}
	r, err := b.Reader()
	if err != nil {
		return nil, fmt.Errorf("local forge: blob %s: %w", h, err)
	}
	defer r.Close()
	return io.ReadAll(r)
}

// writeObject stores an object unless it is there already.
func (g *gitRepo) writeObject(o *plumbing.MemoryObject) (plumbing.Hash, error) {
	h := o.Hash()
	if g.st.HasEncodedObject(h) == nil {
		return h, nil
	}
	if _, err := g.st.SetEncodedObject(o); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("local forge: write object: %w", err)
	}
	return h, nil
}

// writeBlob stores content as a blob.
func (g *gitRepo) writeBlob(content []byte) (plumbing.Hash, error) {
	o := &plumbing.MemoryObject{}
	o.SetType(plumbing.BlobObject)
	if _, err := o.Write(content); err != nil {
		return plumbing.ZeroHash, err
	}
	return g.writeObject(o)
}

// writeTree stores the trees of a flat file map and returns the root tree. A path that is
// both a file and a directory is a conflict.
func (g *gitRepo) writeTree(files map[string]entry) (plumbing.Hash, error) {
	type dir struct {
		files map[string]entry
		dirs  map[string]*dir
	}
	root := &dir{files: map[string]entry{}, dirs: map[string]*dir{}}
	for p, e := range files {
		d := root
		parts := strings.Split(p, "/")
		for _, part := range parts[:len(parts)-1] {
			if _, clash := d.files[part]; clash {
				return plumbing.ZeroHash, fmt.Errorf("path %q: a parent is a file: %w", p, errs.ErrFailedPrecondition)
			}
			sub, ok := d.dirs[part]
			if !ok {
				sub = &dir{files: map[string]entry{}, dirs: map[string]*dir{}}
				d.dirs[part] = sub
			}
			d = sub
		}
		name := parts[len(parts)-1]
		if _, clash := d.dirs[name]; clash {
			return plumbing.ZeroHash, fmt.Errorf("path %q: is a directory: %w", p, errs.ErrFailedPrecondition)
		}
		d.files[name] = e
	}
	var write func(d *dir) (plumbing.Hash, error)
	write = func(d *dir) (plumbing.Hash, error) {
		t := &object.Tree{}
		for name, e := range d.files {
			t.Entries = append(t.Entries, object.TreeEntry{Name: name, Mode: e.mode, Hash: e.hash})
		}
		for name, sub := range d.dirs {
			h, err := write(sub)
			if err != nil {
				return plumbing.ZeroHash, err
			}
			t.Entries = append(t.Entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
		}
		// Git orders entries by name, a directory's name as if it ended in '/'.
		key := func(e object.TreeEntry) string {
			if e.Mode == filemode.Dir {
				return e.Name + "/"
			}
			return e.Name
		}
		slices.SortFunc(t.Entries, func(a, b object.TreeEntry) int { return strings.Compare(key(a), key(b)) })
		o := &plumbing.MemoryObject{}
		if err := t.Encode(o); err != nil {
			return plumbing.ZeroHash, fmt.Errorf("local forge: encode tree: %w", err)
		}
		return g.writeObject(o)
	}
	return write(root)
}

// writeCommit stores a commit.
func (g *gitRepo) writeCommit(tree plumbing.Hash, parents []plumbing.Hash, author forge.Signature, message string, when time.Time) (plumbing.Hash, error) {
	sig := object.Signature{Name: author.Name, Email: author.Email, When: when}
	c := &object.Commit{Author: sig, Committer: committer(when), Message: message, TreeHash: tree, ParentHashes: parents}
	o := &plumbing.MemoryObject{}
	if err := c.Encode(o); err != nil {
		return plumbing.ZeroHash, fmt.Errorf("local forge: encode commit: %w", err)
	}
	return g.writeObject(o)
}

// committer is the forge itself.
func committer(when time.Time) object.Signature {
	return object.Signature{Name: "TheFold", Email: "thefold@localhost", When: when}
}

// moveBranch points branch at next if it is still at prev (zero: the branch must not
// exist). Anything else is a lost update: errs.ErrConflict.
func (g *gitRepo) moveBranch(branch string, next, prev plumbing.Hash) error {
	name := plumbing.NewBranchReferenceName(branch)
	ref := plumbing.NewHashReference(name, next)
	cur, err := g.branchHead(branch)
	if err != nil {
		return err
	}
	if cur != prev {
		return fmt.Errorf("branch %q moved to %s (expected %s): %w", branch, short(cur), short(prev), errs.ErrConflict)
	}
	var old *plumbing.Reference
	if !prev.IsZero() {
		old = plumbing.NewHashReference(name, prev)
	}
	if err := g.st.CheckAndSetReference(ref, old); err != nil {
		if errors.Is(err, storage.ErrReferenceHasChanged) {
			return fmt.Errorf("branch %q moved meanwhile: %w", branch, errs.ErrConflict)
		}
		return fmt.Errorf("local forge: update %s: %w", branch, err)
	}
	return nil
}

// deleteBranch removes a branch.
func (g *gitRepo) deleteBranch(branch string) error {
	if err := g.st.RemoveReference(plumbing.NewBranchReferenceName(branch)); err != nil {
		return fmt.Errorf("local forge: delete branch %s: %w", branch, err)
	}
	return nil
}

func short(h plumbing.Hash) string {
	if h.IsZero() {
		return "nothing"
	}
	return h.String()[:12]
}

// apply applies file changes to a flat file map, all or nothing. The rules are strict so a
// plan's mistake shows: CREATE of an existing file, MODIFY or DELETE of a missing one and an
// edit that does not apply are errs.ErrFailedPrecondition naming the path.
func (g *gitRepo) apply(files map[string]entry, changes []*typev1.FileChange) error {
	for _, c := range changes {
		p := c.GetPath()
		cur, exists := files[p]
		switch c.GetAction() {
		case typev1.FileAction_FILE_ACTION_DELETE:
			if !exists {
				return fmt.Errorf("files: %q: DELETE of a file that does not exist: %w", p, errs.ErrFailedPrecondition)
			}
			delete(files, p)
			continue
		case typev1.FileAction_FILE_ACTION_CREATE:
			if exists {
				return fmt.Errorf("files: %q: CREATE of a file that exists; use MODIFY: %w", p, errs.ErrFailedPrecondition)
			}
		case typev1.FileAction_FILE_ACTION_MODIFY:
			if !exists {
				return fmt.Errorf("files: %q: MODIFY of a file that does not exist; use CREATE: %w", p, errs.ErrFailedPrecondition)
			}
		}
		content := []byte(c.GetContent())
		if len(c.GetEdits()) > 0 {
			old, err := g.blob(cur.hash)
			if err != nil {
				return err
			}
			if !utf8.Valid(old) {
				return fmt.Errorf("files: %q: edits on a binary file: %w", p, errs.ErrFailedPrecondition)
			}
			out, err := textedit.Apply(string(old), c.GetEdits())
			if err != nil {
				return fmt.Errorf("files: %q: %s: %w", p, err.Error(), errs.ErrFailedPrecondition)
			}
			content = []byte(out)
		}
		h, err := g.writeBlob(content)
		if err != nil {
			return err
		}
		mode := filemode.Regular
		if c.GetExecutable() {
			mode = filemode.Executable
		}
		files[p] = entry{mode: mode, hash: h}
	}
	return nil
}

// archive writes an uncompressed tar of a commit.
func (g *gitRepo) archive(ctx context.Context, commit plumbing.Hash, w io.Writer) error {
	c, err := g.commit(commit)
	if err != nil {
		return err
	}
	t, err := c.Tree()
	if err != nil {
		return fmt.Errorf("local forge: tree of %s: %w", commit, err)
	}
	tw := tar.NewWriter(w)
	mtime := c.Committer.When
	walker := object.NewTreeWalker(t, true, nil)
	defer walker.Close()
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		name, e, err := walker.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("local forge: walk %s: %w", commit, err)
		}
		hdr := &tar.Header{Name: name, ModTime: mtime, Mode: 0o644, Format: tar.FormatPAX}
		switch e.Mode {
		case filemode.Dir:
			hdr.Typeflag, hdr.Name, hdr.Mode = tar.TypeDir, name+"/", 0o755
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			continue
		case filemode.Submodule:
			continue
		case filemode.Symlink:
			target, err := g.blob(e.Hash)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Linkname, hdr.Mode = tar.TypeSymlink, string(target), 0o777
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			continue
		case filemode.Executable:
			hdr.Mode = 0o755
		}
		data, err := g.blob(e.Hash)
		if err != nil {
			return err
		}
		hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(data))
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(data); err != nil {
			return err
		}
	}
	return tw.Close()
}

// diff computes how head's tree differs from base's, file by file, in path order.
func (g *gitRepo) diff(ctx context.Context, base, head plumbing.Hash, withPatches bool) ([]*typev1.FileDiff, *typev1.DiffStats, error) {
	trees := make([]*object.Tree, 2)
	for i, h := range []plumbing.Hash{base, head} {
		if h.IsZero() {
			trees[i] = &object.Tree{}
			continue
		}
		c, err := g.commit(h)
		if err != nil {
			return nil, nil, err
		}
		if trees[i], err = c.Tree(); err != nil {
			return nil, nil, fmt.Errorf("local forge: tree of %s: %w", h, err)
		}
	}
	changes, err := object.DiffTreeWithOptions(ctx, trees[0], trees[1], &object.DiffTreeOptions{DetectRenames: true, RenameScore: 60, RenameLimit: 200})
	if err != nil {
		return nil, nil, fmt.Errorf("local forge: diff: %w", err)
	}
	patch, err := changes.PatchContext(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("local forge: patch: %w", err)
	}
	stats := &typev1.DiffStats{}
	var out []*typev1.FileDiff
	for _, fp := range patch.FilePatches() {
		from, to := fp.Files()
		fd := &typev1.FileDiff{Binary: fp.IsBinary()}
		switch {
		case from == nil:
			fd.Path, fd.Action = to.Path(), typev1.FileAction_FILE_ACTION_CREATE
		case to == nil:
			fd.Path, fd.Action = from.Path(), typev1.FileAction_FILE_ACTION_DELETE
		default:
			fd.Path, fd.Action = to.Path(), typev1.FileAction_FILE_ACTION_MODIFY
			if from.Path() != to.Path() {
				fd.PreviousPath = from.Path()
			}
		}
		for _, ch := range fp.Chunks() {
			switch ch.Type() {
			case fdiff.Add:
				fd.Additions += int32(lines(ch.Content()))
			case fdiff.Delete:
				fd.Deletions += int32(lines(ch.Content()))
			}
		}
		if withPatches && !fd.Binary {
			var buf bytes.Buffer
			if err := fdiff.NewUnifiedEncoder(&buf, fdiff.DefaultContextLines).Encode(onePatch{fp}); err != nil {
				return nil, nil, fmt.Errorf("local forge: encode diff of %s: %w", fd.Path, err)
			}
			fd.UnifiedDiff = buf.String()
		}
		stats.FilesChanged++
		stats.Additions += fd.Additions
		stats.Deletions += fd.Deletions
		out = append(out, fd)
	}
	slices.SortFunc(out, func(a, b *typev1.FileDiff) int { return strings.Compare(a.Path, b.Path) })
	return out, stats, nil
}

// onePatch is one file's patch, for the unified encoder.
type onePatch struct{ fp fdiff.FilePatch }

func (p onePatch) FilePatches() []fdiff.FilePatch { return []fdiff.FilePatch{p.fp} }
func (p onePatch) Message() string                { return "" }

// lines counts the lines of a chunk's content (the last may lack its newline).
func lines(s string) int {
	n := strings.Count(s, "\n")
	if s != "" && !strings.HasSuffix(s, "\n") {
		n++
	}
	return n
}

// mergeBase returns the best common ancestor of a and b (zero when they share none).
func (g *gitRepo) mergeBase(a, b plumbing.Hash) (plumbing.Hash, error) {
	ca, err := g.commit(a)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	cb, err := g.commit(b)
	if err != nil {
		return plumbing.ZeroHash, err
	}
	bases, err := ca.MergeBase(cb)
	if err != nil {
		return plumbing.ZeroHash, fmt.Errorf("local forge: merge base: %w", err)
	}
	if len(bases) == 0 {
		return plumbing.ZeroHash, nil
	}
	return bases[0].Hash, nil
}

// merge3 merges two sides of a common ancestor file by file: a path changed on one side
// takes that side; changed the same way on both, either; changed differently on both, it
// is a conflict (this forge does not merge inside a file, so it never merges text wrongly).
func merge3(base, ours, theirs map[string]entry) (map[string]entry, []string) {
	out := map[string]entry{}
	var conflicts []string
	paths := map[string]bool{}
	for _, m := range []map[string]entry{base, ours, theirs} {
		for p := range m {
			paths[p] = true
		}
	}
	for p := range paths {
		b, inB := base[p]
		o, inO := ours[p]
		t, inT := theirs[p]
		same := func(x entry, inX bool, y entry, inY bool) bool { return inX == inY && (!inX || x == y) }
		switch {
		case same(o, inO, t, inT):
			if inO {
				out[p] = o
			}
		case same(b, inB, o, inO):
			if inT {
				out[p] = t
			}
		case same(b, inB, t, inT):
			if inO {
				out[p] = o
			}
		default:
			conflicts = append(conflicts, p)
		}
	}
	slices.Sort(conflicts)
	return out, conflicts
}

// exists reports whether a bare repository is at dir.
func exists(dir string) bool {
	_, err := os.Stat(dir + "/HEAD")
	return err == nil
}
