package workspace

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"sort"
	"strings"

	"github.com/thefold/thefold/pkg/errs"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// FileState is what a snapshot records of one file.
type FileState struct {
	// SHA256 is the hex SHA-256 of the content; for a symlink, of its target.
	SHA256     string `json:"sha256"`
	Size       int64  `json:"size"`
	Executable bool   `json:"executable,omitempty"`
	// Symlink marks a symlink, recorded (not followed) so that a changed link shows.
	Symlink bool `json:"symlink,omitempty"`
}

// Snapshot is the state of a workspace's files at one moment: path → state. Directories,
// special files and Limits.SkipDirs are left out.
type Snapshot struct {
	Files map[string]FileState `json:"files"`
}

// MarshalBinary encodes the snapshot for storage (JSON, sorted keys).
func (s *Snapshot) MarshalBinary() ([]byte, error) { return json.Marshal(s) }

// UnmarshalBinary decodes what MarshalBinary wrote.
func (s *Snapshot) UnmarshalBinary(b []byte) error {
	var v Snapshot
	if err := json.Unmarshal(b, &v); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if v.Files == nil {
		v.Files = map[string]FileState{}
	}
	*s = v
	return nil
}

// TotalBytes is the sum of the files' sizes.
func (s *Snapshot) TotalBytes() int64 {
	var n int64
	for _, f := range s.Files {
		n += f.Size
	}
	return n
}

// Snapshot hashes every file of the workspace.
func (w *Workspace) Snapshot() (*Snapshot, error) {
	s := &Snapshot{Files: map[string]FileState{}}
	fsys := w.fsys.FS()
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == "." {
			return nil
		}
		if d.IsDir() {
			if w.skip[d.Name()] {
				return fs.SkipDir
			}
			return nil
		}
		if strings.HasPrefix(d.Name(), tempPrefix) {
			return nil
		}
		switch t := d.Type(); {
		case t&fs.ModeSymlink != 0:
			target, err := w.fsys.Readlink(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256([]byte(target))
			s.Files[p] = FileState{SHA256: hex.EncodeToString(sum[:]), Size: int64(len(target)), Symlink: true}
			return nil
		case !t.IsRegular():
			return nil // FIFOs, sockets, devices have no content to compare
		}
		st, err := w.hashFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil // removed while walked
		}
		if err != nil {
			return err
		}
		s.Files[p] = st
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return s, nil
}

func (w *Workspace) hashFile(p string) (FileState, error) {
	f, err := w.fsys.Open(p)
	if err != nil {
		return FileState{}, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return FileState{}, err
	}
	h := sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return FileState{}, err
	}
	return FileState{SHA256: hex.EncodeToString(h.Sum(nil)), Size: n, Executable: fi.Mode()&0o111 != 0}, nil
}

// Diff lists the files added (CREATE), changed in content, executable bit or kind (MODIFY)
// and removed (DELETE) from base to head, sorted by path, without line counts.
func Diff(base, head *Snapshot) []*typev1.FileDiff {
	var out []*typev1.FileDiff
	for p, h := range head.Files {
		b, ok := base.Files[p]
		switch {
		case !ok:
			out = append(out, &typev1.FileDiff{Path: p, Action: typev1.FileAction_FILE_ACTION_CREATE})
		case b != h:
			out = append(out, &typev1.FileDiff{Path: p, Action: typev1.FileAction_FILE_ACTION_MODIFY})
		}
	}
	for p := range base.Files {
		if _, ok := head.Files[p]; !ok {
			out = append(out, &typev1.FileDiff{Path: p, Action: typev1.FileAction_FILE_ACTION_DELETE})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// DiffOptions shape DiffWith.
type DiffOptions struct {
	// Unified fills FileDiff.UnifiedDiff; without it only the line counts are computed.
	Unified bool
	// Context lines around a change; ≤ 0 means 3.
	Context int
	// BaseContent returns a base file's content, e.g. from the service's snapshot store.
	// Without it, or when it answers false, the file's lines are not counted and it has
	// no unified diff (a created file still has one).
	BaseContent func(path string) ([]byte, bool)
	// MaxBytes caps a side of a text diff; larger files get counts from a whole-file
	// replacement and no unified diff. ≤ 0 means 1 MiB.
	MaxBytes int64
}

// DiffWith compares base with the workspace as it is now and returns the changes with line
// counts (and unified diffs when asked) and their sum. A file with a NUL byte in its first
// 8000 bytes on either side is binary: Binary is set and it has no lines.
func (w *Workspace) DiffWith(base *Snapshot, opts DiffOptions) ([]*typev1.FileDiff, *typev1.DiffStats, error) {
	if base == nil {
		return nil, nil, fmt.Errorf("diff: no base snapshot: %w", errs.ErrInvalid)
	}
	head, err := w.Snapshot()
	if err != nil {
		return nil, nil, err
	}
	if opts.Context <= 0 {
		opts.Context = 3
	}
	if opts.MaxBytes <= 0 {
		opts.MaxBytes = 1 << 20
	}
	files := Diff(base, head)
	stats := &typev1.DiffStats{FilesChanged: int32(len(files))}
	for _, fd := range files {
		var old, cur []byte
		haveOld, haveCur := true, true
		if fd.Action != typev1.FileAction_FILE_ACTION_CREATE {
			old, haveOld = baseContent(opts, fd.Path)
		}
		if fd.Action != typev1.FileAction_FILE_ACTION_DELETE {
			fd.Sha256 = head.Files[fd.Path].SHA256
			cur, haveCur = w.headContent(fd.Path, head.Files[fd.Path], opts.MaxBytes)
		}
		if !haveOld || !haveCur {
			continue
		}
		if isBinary(old) || isBinary(cur) {
			fd.Binary = true
			continue
		}
		a, b := splitLinesKeep(string(old)), splitLinesKeep(string(cur))
		var ops []op
		if int64(len(old)) > opts.MaxBytes || int64(len(cur)) > opts.MaxBytes {
			ops = replaceAll(a, b)
		} else {
			ops = lineDiff(a, b)
		}
		for _, o := range ops {
			switch o.kind {
			case opInsert:
				fd.Additions++
			case opDelete:
				fd.Deletions++
			}
		}
		if opts.Unified && int64(len(old)) <= opts.MaxBytes && int64(len(cur)) <= opts.MaxBytes {
			oldName, newName := "a/"+fd.Path, "b/"+fd.Path
			switch fd.Action {
			case typev1.FileAction_FILE_ACTION_CREATE:
				oldName = "/dev/null"
			case typev1.FileAction_FILE_ACTION_DELETE:
				newName = "/dev/null"
			}
			fd.UnifiedDiff = unified(oldName, newName, ops, opts.Context)
		}
		stats.Additions += fd.Additions
		stats.Deletions += fd.Deletions
	}
	return files, stats, nil
}

func baseContent(opts DiffOptions, p string) ([]byte, bool) {
	if opts.BaseContent == nil {
		return nil, false
	}
	return opts.BaseContent(p)
}

// headContent reads a current file (a symlink's target text). Over maxBytes the caller
// counts lines of a whole-file replacement, so the file is still read, but past a
// generous bound it is left uncounted so that a giant file cannot exhaust memory.
func (w *Workspace) headContent(p string, st FileState, maxBytes int64) ([]byte, bool) {
	if st.Symlink {
		t, err := w.fsys.Readlink(p)
		return []byte(t), err == nil
	}
	if st.Size > 16*maxBytes {
		return nil, false
	}
	b, err := w.fsys.ReadFile(p)
	return b, err == nil
}

// SnapshotContent returns the bytes Snapshot hashes for rel without following a link: a
// regular file's content, a symlink's target. It is what the service keeps of a base to
// diff against later (DiffOptions.BaseContent). Over MaxFileBytes is errs.ErrInvalid.
func (w *Workspace) SnapshotContent(rel string) ([]byte, error) {
	clean, err := CleanPath(rel)
	if err != nil {
		return nil, err
	}
	if err := w.noLinksOnPath(dirOf(clean)); err != nil {
		return nil, fmt.Errorf("path %q: %w", rel, err)
	}
	fi, err := w.fsys.Lstat(clean)
	if err != nil {
		return nil, w.openError(rel, err)
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		t, err := w.fsys.Readlink(clean)
		if err != nil {
			return nil, w.openError(rel, err)
		}
		return []byte(t), nil
	}
	return w.ReadFile(rel, 0)
}

func dirOf(clean string) string {
	if i := strings.LastIndexByte(clean, '/'); i >= 0 {
		return clean[:i]
	}
	return "."
}

// isBinary is git's test: a NUL byte in the first 8000 bytes.
func isBinary(b []byte) bool {
	return bytes.IndexByte(b[:min(len(b), 8000)], 0) >= 0
}
