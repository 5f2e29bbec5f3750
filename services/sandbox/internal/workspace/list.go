package workspace

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/thefold/thefold/pkg/errs"
)

// FileInfo is one entry of List.
type FileInfo struct {
	// Path is relative to the workspace root, '/'-separated.
	Path string
	// Size in bytes; 0 for directories.
	Size int64
	// Mode is the entry's mode, not following a symlink (fs.ModeSymlink set for one).
	Mode       fs.FileMode
	Executable bool
	IsDir      bool
	ModTime    time.Time
}

// ListOptions shape a List.
type ListOptions struct {
	// Recursive descends into subdirectories (never through a symlink).
	Recursive bool
	// Limit caps the entries returned; ≤ 0 means no cap. Ask for one more than a page to
	// know whether another page follows.
	Limit int
	// After skips the entries sorted at or before it: the last path of the previous page.
	After string
	// IncludeSkipped lists the directories in Limits.SkipDirs (.git) and their contents.
	IncludeSkipped bool
}

// List returns the entries under prefix (a directory, or one file), sorted by path. The
// prefix directory itself is not listed. Temporary files of writes in progress are left
// out. A missing prefix is errs.ErrNotFound; a prefix through a symlink is refused.
func (w *Workspace) List(prefix string, opts ListOptions) ([]FileInfo, error) {
	clean, err := CleanPath(prefix)
	if err != nil {
		return nil, err
	}
	// Listing never follows a link, so the prefix is checked the way writes are.
	if clean != "." {
		if err := w.noLinksOnPath(clean); err != nil {
			return nil, fmt.Errorf("path %q: %w", prefix, err)
		}
	}
	fi, err := w.fsys.Lstat(clean)
	if err != nil {
		return nil, w.openError(prefix, err)
	}
	if !fi.IsDir() {
		return []FileInfo{toInfo(clean, fi)}, nil
	}
	var out []FileInfo
	err = fs.WalkDir(w.fsys.FS(), clean, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == clean {
			return nil
		}
		if strings.HasPrefix(d.Name(), tempPrefix) {
			return nil
		}
		if d.IsDir() && !opts.IncludeSkipped && w.skip[d.Name()] {
			return fs.SkipDir
		}
		info, err := d.Info()
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while listed
		}
		if err != nil {
			return err
		}
		if opts.After == "" || p > opts.After {
			out = append(out, toInfo(p, info))
		}
		if d.IsDir() && !opts.Recursive {
			return fs.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing %q: %w", prefix, err)
	}
	// WalkDir's order is per directory ("a" before "a.txt" before "a/b" is not path order).
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	if opts.Limit > 0 && len(out) > opts.Limit {
		out = out[:opts.Limit]
	}
	return out, nil
}

func toInfo(p string, fi fs.FileInfo) FileInfo {
	info := FileInfo{Path: p, Mode: fi.Mode(), IsDir: fi.IsDir(), ModTime: fi.ModTime()}
	if !fi.IsDir() {
		info.Size = fi.Size()
		info.Executable = fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
	}
	return info
}

// noLinksOnPath refuses a symlink on any component of the clean path rel; missing
// components end the check.
func (w *Workspace) noLinksOnPath(rel string) error {
	if rel == "." {
		return nil
	}
	parts := strings.Split(rel, "/")
	for i := range parts {
		p := path.Join(parts[:i+1]...)
		fi, err := w.fsys.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%s is a symlink: %w", p, errs.ErrInvalid)
		}
	}
	return nil
}
