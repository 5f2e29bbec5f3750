package workspace

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"
	"syscall"

	"github.com/thefold/thefold/pkg/errs"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/textedit"
)

// tempPrefix names the temporary files of atomic writes; List and Snapshot never show
// them, and a crash's leftovers are recognisable.
const tempPrefix = ".thefold-tmp-"

// WriteFile replaces rel's content atomically (a temporary file in the same directory,
// renamed over it), creating the parent directories, with mode 0755 when executable, else
// 0644. It reports whether the file was created. It refuses content over MaxFileBytes, a
// path with a symlink anywhere on it, and a target that is not a regular file.
func (w *Workspace) WriteFile(rel string, content []byte, executable bool) (created bool, err error) {
	if int64(len(content)) > w.limits.MaxFileBytes {
		return false, fmt.Errorf("path %q: content is %d bytes, over the %d-byte limit: %w", rel, len(content), w.limits.MaxFileBytes, errs.ErrInvalid)
	}
	return w.writeFrom(rel, bytes.NewReader(content), executable)
}

// writeFrom is WriteFile reading the content from r, which the caller bounds.
func (w *Workspace) writeFrom(rel string, r io.Reader, executable bool) (created bool, err error) {
	clean, err := CleanPath(rel)
	if err != nil {
		return false, err
	}
	if clean == "." {
		return false, fmt.Errorf("path %q: is the workspace root, not a file: %w", rel, errs.ErrInvalid)
	}
	if err := w.mkdirNoLinks(path.Dir(clean)); err != nil {
		return false, fmt.Errorf("path %q: %w", rel, err)
	}
	switch fi, err := w.fsys.Lstat(clean); {
	case errors.Is(err, fs.ErrNotExist):
		created = true
	case err != nil:
		return false, fmt.Errorf("path %q: %w", rel, err)
	default:
		if err := regularForWrite(fi); err != nil {
			return false, fmt.Errorf("path %q: %w", rel, err)
		}
	}

	mode := fs.FileMode(0o644)
	if executable {
		mode = 0o755
	}
	tmp := path.Join(path.Dir(clean), tempPrefix+randomSuffix())
	// O_EXCL|O_NOFOLLOW: the temporary name is never a file or link someone planted.
	f, err := w.fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode)
	if err != nil {
		return false, fmt.Errorf("path %q: %w", rel, err)
	}
	done := false
	defer func() {
		if !done {
			_ = f.Close()
			_ = w.fsys.Remove(tmp)
		}
	}()
	if _, err := io.Copy(f, r); err != nil {
		return false, fmt.Errorf("path %q: %w", rel, err)
	}
	// Chmod on the open file: the umask must not decide the executable bit.
	if err := f.Chmod(mode); err != nil {
		return false, fmt.Errorf("path %q: %w", rel, err)
	}
	if err := f.Close(); err != nil {
		return false, fmt.Errorf("path %q: %w", rel, err)
	}
	// rename replaces a link that appeared meanwhile instead of writing through it.
	if err := w.fsys.Rename(tmp, clean); err != nil {
		_ = w.fsys.Remove(tmp)
		done = true
		return false, fmt.Errorf("path %q: %w", rel, err)
	}
	done = true
	return created, nil
}

// regularForWrite refuses replacing anything but a regular file.
func regularForWrite(fi fs.FileInfo) error {
	switch m := fi.Mode(); {
	case m&fs.ModeSymlink != 0:
		return fmt.Errorf("is a symlink; writes do not go through symlinks: %w", errs.ErrInvalid)
	case m.IsDir():
		return fmt.Errorf("is a directory: %w", errs.ErrInvalid)
	case !m.IsRegular():
		return fmt.Errorf("is a special file (%s): %w", kind(m), errs.ErrInvalid)
	}
	return nil
}

// mkdirNoLinks creates dir and its parents, refusing a symlink or a non-directory on the
// way; dir is clean.
func (w *Workspace) mkdirNoLinks(dir string) error {
	if dir == "." {
		return nil
	}
	parts := strings.Split(dir, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		fi, err := w.fsys.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			if err := w.fsys.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
			continue
		}
		if err != nil {
			return err
		}
		switch m := fi.Mode(); {
		case m&fs.ModeSymlink != 0:
			return fmt.Errorf("%s is a symlink; writes do not go through symlinks: %w", p, errs.ErrInvalid)
		case !m.IsDir():
			return fmt.Errorf("%s is not a directory: %w", p, errs.ErrInvalid)
		}
	}
	return nil
}

func randomSuffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on Linux
	return hex.EncodeToString(b[:])
}

// kind names a special file's type for messages.
func kind(m fs.FileMode) string {
	switch {
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m&fs.ModeCharDevice != 0:
		return "a character device"
	case m&fs.ModeDevice != 0:
		return "a device"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeSymlink != 0:
		return "a symlink"
	}
	return "not a regular file"
}

// ReadFile returns rel's content. A symlink is followed when it stays inside the workspace.
// It refuses directories, devices, FIFOs and sockets, and a file over maxBytes (≤ 0 means
// MaxFileBytes); a missing file is errs.ErrNotFound.
func (w *Workspace) ReadFile(rel string, maxBytes int64) ([]byte, error) {
	b, _, err := w.readFile(rel, maxBytes)
	return b, err
}

// readFile is ReadFile that also returns the file's mode.
func (w *Workspace) readFile(rel string, maxBytes int64) ([]byte, fs.FileMode, error) {
	if maxBytes <= 0 {
		maxBytes = w.limits.MaxFileBytes
	}
	if _, err := w.Resolve(rel); err != nil {
		return nil, 0, err
	}
	clean, _ := CleanPath(rel)
	// O_NONBLOCK: opening a FIFO (swapped in after any check) must not hang the service.
	f, err := w.fsys.OpenFile(clean, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, 0, w.openError(rel, err)
	}
	defer f.Close()
	// Checked on the open file, so what is read is what was checked.
	fi, err := f.Stat()
	if err != nil {
		return nil, 0, fmt.Errorf("path %q: %w", rel, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, 0, fmt.Errorf("path %q: is %s, not a regular file: %w", rel, kind(fi.Mode()), errs.ErrInvalid)
	}
	if fi.Size() > maxBytes {
		return nil, 0, fmt.Errorf("path %q: is %d bytes, over the %d-byte limit: %w", rel, fi.Size(), maxBytes, errs.ErrInvalid)
	}
	// The file may grow while it is read: read one byte more than allowed to notice.
	b, err := io.ReadAll(io.LimitReader(f, maxBytes+1))
	if err != nil {
		return nil, 0, fmt.Errorf("path %q: %w", rel, err)
	}
	if int64(len(b)) > maxBytes {
		return nil, 0, fmt.Errorf("path %q: grew over the %d-byte limit while read: %w", rel, maxBytes, errs.ErrInvalid)
	}
	return b, fi.Mode(), nil
}

// openError maps a failed open to the package's errors.
func (w *Workspace) openError(rel string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("path %q: no such file: %w", rel, errs.ErrNotFound)
	case errors.Is(err, syscall.ENOTDIR):
		return fmt.Errorf("path %q: a component is not a directory: %w", rel, errs.ErrInvalid)
	case errors.Is(err, syscall.ELOOP):
		return fmt.Errorf("path %q: too many symlinks: %w", rel, errs.ErrInvalid)
	}
	// os.Root refuses an escape found only at the time of use (a link swapped in).
	return fmt.Errorf("path %q: %v: %w", rel, err, errs.ErrInvalid)
}

// DeleteFile removes the file (or symlink, not its target) at rel; a missing file is
// errs.ErrNotFound and a directory errs.ErrInvalid.
func (w *Workspace) DeleteFile(rel string) error {
	clean, fi, err := w.toDelete(rel)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return fmt.Errorf("path %q: is a directory: %w", rel, errs.ErrInvalid)
	}
	if err := w.fsys.Remove(clean); err != nil {
		return w.openError(rel, err)
	}
	return nil
}

// ApplyEdits applies search/replace edits to rel (pkg/textedit: exact match, all or
// nothing) and writes the result atomically, keeping the executable bit. It returns the new
// content. An edit that does not apply is errs.ErrInvalid with textedit's message, which
// names the edit ("edit 2: old_text matches nothing; …"); the file is then unchanged.
func (w *Workspace) ApplyEdits(rel string, edits []*typev1.Edit) (string, error) {
	if len(edits) == 0 {
		return "", fmt.Errorf("path %q: no edits: %w", rel, errs.ErrInvalid)
	}
	b, mode, err := w.readFile(rel, w.limits.MaxFileBytes)
	if err != nil {
		return "", err
	}
	out, err := textedit.Apply(string(b), edits)
	if err != nil {
		var ee *textedit.EditError
		if errors.As(err, &ee) {
			return "", fmt.Errorf("path %q: %s: %w", rel, ee.Error(), errs.ErrInvalid)
		}
		return "", fmt.Errorf("path %q: %w", rel, err)
	}
	if _, err := w.WriteFile(rel, []byte(out), mode&0o111 != 0); err != nil {
		return "", err
	}
	return out, nil
}

// DeleteDir removes the directory at rel: an empty one, or with recursive everything under
// it. Like DeleteFile it never goes through a symlink, and os.Root confines the removal to
// the workspace. A missing directory is errs.ErrNotFound, a file errs.ErrInvalid, and a
// non-empty directory without recursive errs.ErrFailedPrecondition.
func (w *Workspace) DeleteDir(rel string, recursive bool) error {
	clean, fi, err := w.toDelete(rel)
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("path %q: is not a directory: %w", rel, errs.ErrInvalid)
	}
	if !recursive {
		if err := w.fsys.Remove(clean); err != nil {
			return fmt.Errorf("path %q: directory is not empty (set recursive to delete it with its contents): %w", rel, errs.ErrFailedPrecondition)
		}
		return nil
	}
	if err := w.fsys.RemoveAll(clean); err != nil {
		return w.openError(rel, err)
	}
	return nil
}

// toDelete checks rel for a delete and returns it cleaned with its entry. Like writes,
// deletes never go through a symlink: the entry removed is the one the path names.
func (w *Workspace) toDelete(rel string) (string, fs.FileInfo, error) {
	clean, err := CleanPath(rel)
	if err != nil {
		return "", nil, err
	}
	if clean == "." {
		return "", nil, fmt.Errorf("path %q: is the workspace root: %w", rel, errs.ErrInvalid)
	}
	if err := w.noLinksOnPath(path.Dir(clean)); err != nil {
		return "", nil, fmt.Errorf("path %q: %w", rel, err)
	}
	fi, err := w.fsys.Lstat(clean)
	if err != nil {
		return "", nil, w.openError(rel, err)
	}
	return clean, fi, nil
}
