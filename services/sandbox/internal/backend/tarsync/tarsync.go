// Package tarsync moves a sandbox's workspace between the host, where the service keeps it
// (the source of truth), and a sandbox that has its own copy (a docker container, a
// kubernetes pod) as tar streams: in as a whole, and back with only what changed written and
// what the command deleted removed. The stream coming back is untrusted.
package tarsync

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// Owner owns every file copied into a sandbox (the sandbox user, 65534), so commands may
// change them.
const Owner = 65534

// Write writes the host workspace ws as a tar stream: directories, regular files and
// symlinks (other file types are not workspace content and are left out).
func Write(ws string, w io.Writer) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == ws {
			return nil
		}
		rel, err := filepath.Rel(ws, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		h := &tar.Header{Name: name, Mode: int64(info.Mode().Perm()), Uid: Owner, Gid: Owner, ModTime: info.ModTime()}
		switch {
		case d.IsDir():
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
			return tw.WriteHeader(h)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			h.Typeflag, h.Linkname = tar.TypeSymlink, target
			return tw.WriteHeader(h)
		case d.Type().IsRegular():
			f, err := os.Open(p)
			if err != nil {
				return err
			}
			defer f.Close()
			h.Typeflag, h.Size = tar.TypeReg, info.Size()
			if err := tw.WriteHeader(h); err != nil {
				return err
			}
			_, err = io.CopyN(tw, f, info.Size())
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("archive workspace %q: %w", ws, err)
	}
	return tw.Close()
}

// SyncOut makes the host workspace ws match the tar stream r of the sandbox's /workspace:
// it writes what is new or changed (a file whose bytes did not change is left alone, so its
// modification time stays), and removes what the command deleted. The stream comes from the
// sandbox, so it is untrusted: every write goes through an os.Root, which refuses names and
// symlinks that lead out of the workspace, and only directories, regular files and symlinks
// are taken.
//
// commit, when not nil, is asked once the stream is read and before anything is removed; its
// error stops the sync there. An empty stream is what a container that lost its /workspace
// (stopped, restarted or removed during the command) gives, and must not empty the host
// workspace.
func SyncOut(ws string, r io.Reader, commit func() error) error {
	root, err := os.OpenRoot(ws)
	if err != nil {
		return err
	}
	defer root.Close()
	seen := map[string]bool{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read the sandbox's workspace: %w", err)
		}
		name, ok := entryName(h.Name)
		if !ok {
			continue
		}
		if err := syncEntry(root, name, h, tr); err != nil {
			return fmt.Errorf("copy %q out of the sandbox: %w", name, err)
		}
		seen[name] = true
	}
	if commit != nil {
		if err := commit(); err != nil {
			return err
		}
	}
	var gone []string
	err = filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(ws, p)
		rel = filepath.ToSlash(rel)
		if rel != "." && !seen[rel] {
			gone = append(gone, rel)
			if d.IsDir() {
				return fs.SkipDir
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("list the host workspace: %w", err)
	}
	for _, rel := range gone {
		if err := root.RemoveAll(rel); err != nil {
			return fmt.Errorf("remove %q (deleted in the sandbox): %w", rel, err)
		}
	}
	return nil
}

// entryName turns a tar name ("./a/b" from CopyFromContainer of "/workspace/." or tar -C
// /workspace -c .) into a clean
// workspace-relative name; the root entry itself and anything climbing out are skipped.
func entryName(raw string) (string, bool) {
	n := path.Clean(strings.TrimPrefix(raw, "/"))
	if n == "." || n == ".." || strings.HasPrefix(n, "../") {
		return "", false
	}
	return n, true
}

func syncEntry(root *os.Root, name string, h *tar.Header, body io.Reader) error {
	cur, statErr := root.Lstat(name)
	exists := statErr == nil
	// Owner write on directories keeps the host side writable whatever the command chmod'ed.
	mode := fs.FileMode(h.Mode).Perm()
	switch h.Typeflag {
	case tar.TypeDir:
		if exists && !cur.IsDir() {
			if err := root.Remove(name); err != nil {
				return err
			}
			exists = false
		}
		if !exists {
			if err := root.Mkdir(name, mode|0o700); err != nil {
				return err
			}
		}
		return root.Chmod(name, mode|0o700)
	case tar.TypeReg:
		data, err := io.ReadAll(body)
		if err != nil {
			return err
		}
		if exists && cur.Mode().IsRegular() {
			if old, err := root.ReadFile(name); err == nil && bytes.Equal(old, data) {
				if cur.Mode().Perm() == mode {
					return nil
				}
				return root.Chmod(name, mode)
			}
		}
		if exists && !cur.Mode().IsRegular() {
			if err := root.RemoveAll(name); err != nil {
				return err
			}
		}
		if err := root.WriteFile(name, data, mode); err != nil {
			return err
		}
		return root.Chmod(name, mode)
	case tar.TypeSymlink:
		if exists && cur.Mode()&fs.ModeSymlink != 0 {
			if old, err := root.Readlink(name); err == nil && old == h.Linkname {
				return nil
			}
		}
		if exists {
			if err := root.RemoveAll(name); err != nil {
				return err
			}
		}
		return root.Symlink(h.Linkname, name)
	}
	return nil
}
