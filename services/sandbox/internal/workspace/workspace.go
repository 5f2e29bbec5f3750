// Package workspace holds one sandbox's files in a directory on the host and does every
// file operation the sandbox service offers on it — write, read, delete, list, search/replace
// edits, snapshots and diffs, archive extraction — confined to that directory. The backends
// bind or copy the directory into their isolation; this package never runs anything.
//
// Confinement. A path from a caller is relative, '/'-separated and clean (no "..", no
// backslash, no NUL). Reads may follow a symlink only when its target stays inside the
// workspace; writes, deletes of directories and extraction never go through a symlink at
// all. Every operation goes through an os.Root opened on the workspace, so the kernel walks
// each component with openat and O_NOFOLLOW semantics: even when a component is swapped for
// a symlink between the check and the use, nothing outside the workspace is touched. The
// residual race is inside the workspace only: a process running in the sandbox at the same
// time could swap a directory for a symlink to another directory of the same workspace and
// redirect a write there. A service that wants to exclude even that does file operations
// only while no command of the sandbox runs; the confinement holds either way.
//
// Errors wrap the pkg/errs sentinels: a bad or escaping path, a special file or an oversized
// file is errs.ErrInvalid, a missing file errs.ErrNotFound.
package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/validate"
)

// Defaults for the zero fields of Limits.
const (
	DefaultMaxFileBytes  = 10 << 20
	DefaultMaxFiles      = 20000
	DefaultMaxTotalBytes = 512 << 20
)

// maxLinks bounds the symlinks followed while resolving one path, as the kernel's ELOOP does.
const maxLinks = 40

// Limits bound what a workspace accepts. Zero fields take the defaults.
type Limits struct {
	// MaxFileBytes caps one file written, read for edits, or extracted.
	MaxFileBytes int64
	// MaxFiles caps the files (not directories) an archive may hold.
	MaxFiles int
	// MaxTotalBytes caps the bytes an archive may unpack to, so a decompression bomb stops.
	MaxTotalBytes int64
	// SkipDirs are directory names List and Snapshot leave out, at any depth. Nil means
	// [".git"]; an empty non-nil slice skips nothing.
	SkipDirs []string
}

func (l Limits) withDefaults() Limits {
	if l.MaxFileBytes <= 0 {
		l.MaxFileBytes = DefaultMaxFileBytes
	}
	if l.MaxFiles <= 0 {
		l.MaxFiles = DefaultMaxFiles
	}
	if l.MaxTotalBytes <= 0 {
		l.MaxTotalBytes = DefaultMaxTotalBytes
	}
	if l.SkipDirs == nil {
		l.SkipDirs = []string{".git"}
	}
	return l
}

// Workspace is one sandbox's directory. It is safe for concurrent use, but concurrent writes
// of the same path race as two renames do: one of them wins whole.
type Workspace struct {
	root   string // absolute, symlinks resolved
	fsys   *os.Root
	limits Limits
	skip   map[string]bool
}

// Open opens the workspace at root, which must exist and be a directory. Close releases it.
func Open(root string, l Limits) (*Workspace, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", root, err)
	}
	// The real path, so that a symlink's target can be compared with it.
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("workspace %q does not exist: %w", root, errs.ErrNotFound)
		}
		return nil, fmt.Errorf("workspace %q: %w", root, err)
	}
	fi, err := os.Stat(real)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", root, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("workspace %q is not a directory: %w", root, errs.ErrInvalid)
	}
	r, err := os.OpenRoot(real)
	if err != nil {
		return nil, fmt.Errorf("workspace %q: %w", root, err)
	}
	l = l.withDefaults()
	skip := make(map[string]bool, len(l.SkipDirs))
	for _, d := range l.SkipDirs {
		skip[d] = true
	}
	return &Workspace{root: real, fsys: r, limits: l, skip: skip}, nil
}

// Close releases the workspace's directory handle; the files stay.
func (w *Workspace) Close() error { return w.fsys.Close() }

// Root is the workspace's absolute host path, symlinks resolved.
func (w *Workspace) Root() string { return w.root }

// Limits are the workspace's limits, defaults filled in.
func (w *Workspace) Limits() Limits { return w.limits }

// CleanPath checks that rel is a path the workspace accepts and returns it in the form the
// package uses: "." for the root (given as "" or "."), else rel itself. It does not look at
// the disk.
func CleanPath(rel string) (string, error) {
	if rel == "" || rel == "." {
		return ".", nil
	}
	if err := validate.RelPath(rel); err != nil {
		return "", err
	}
	return rel, nil
}

// Resolve returns the host path of rel after checking that it is a clean relative path and
// that, following the symlinks that exist on it, it stays inside the workspace. The part of
// the path that does not exist yet is appended as given. A backend uses the result to point
// its isolation at a file; this package's own operations go through the os.Root instead,
// which repeats the confinement at the time of use.
func (w *Workspace) Resolve(rel string) (string, error) {
	clean, err := CleanPath(rel)
	if err != nil {
		return "", err
	}
	real, err := w.follow(clean)
	if err != nil {
		return "", fmt.Errorf("path %q: %w", rel, err)
	}
	if !w.inside(real) {
		return "", fmt.Errorf("path %q: a symlink on it leads outside the workspace: %w", rel, errs.ErrInvalid)
	}
	return filepath.Join(w.root, filepath.FromSlash(clean)), nil
}

// follow resolves rel under the root the way the kernel would, one component at a time,
// and returns the real path; the first missing component and the rest are appended
// lexically. Absolute symlinks are refused: os.Root refuses them too, and a workspace copied
// into a container would see them point elsewhere.
func (w *Workspace) follow(rel string) (string, error) {
	cur := w.root
	todo := strings.Split(rel, "/")
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case "", ".":
			continue
		case "..":
			cur = filepath.Dir(cur)
			continue
		}
		next := filepath.Join(cur, c)
		fi, err := os.Lstat(next)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			// Nothing more to follow; the operation itself says what is missing.
			return filepath.Join(append([]string{next}, todo...)...), nil
		}
		if err != nil {
			return "", err
		}
		if fi.Mode()&fs.ModeSymlink == 0 {
			cur = next
			continue
		}
		if links++; links > maxLinks {
			return "", fmt.Errorf("more than %d symlinks: %w", maxLinks, errs.ErrInvalid)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if filepath.IsAbs(target) {
			return "", fmt.Errorf("%s is an absolute symlink (to %q): %w", w.rel(next), target, errs.ErrInvalid)
		}
		todo = append(strings.Split(filepath.ToSlash(target), "/"), todo...)
	}
	return cur, nil
}

// inside reports whether the real path p is the root or below it.
func (w *Workspace) inside(p string) bool {
	return p == w.root || strings.HasPrefix(p, w.root+string(filepath.Separator))
}

// rel turns a host path under the root back into a workspace path, for messages.
func (w *Workspace) rel(p string) string {
	r, err := filepath.Rel(w.root, p)
	if err != nil {
		return p
	}
	return filepath.ToSlash(r)
}
