package tarsync

import (
	"archive/tar"
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

type entry struct {
	name, body, link string
	dir              bool
}

func archive(t *testing.T, entries ...entry) *bytes.Buffer {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: 0o644, Typeflag: tar.TypeReg, Size: int64(len(e.body))}
		switch {
		case e.dir:
			h.Typeflag, h.Mode, h.Size = tar.TypeDir, 0o755, 0
		case e.link != "":
			h.Typeflag, h.Linkname, h.Size = tar.TypeSymlink, e.link, 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(e.body)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return &buf
}

// The stream comes from the sandbox: a name climbing out is skipped, and a write through a
// symlink that leads out of the workspace is refused, whatever the stream says.
func TestSyncOutStaysInTheWorkspace(t *testing.T) {
	t.Parallel()
	outside := t.TempDir()
	ws := t.TempDir()
	err := SyncOut(ws, archive(t, entry{name: "../escaped", body: "x"}, entry{name: "./ok.txt", body: "ok"}), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(filepath.Dir(ws), "escaped")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("../escaped was written outside the workspace (%v)", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "ok.txt")); string(b) != "ok" {
		t.Errorf("ok.txt %q", b)
	}
	err = SyncOut(ws, archive(t, entry{name: "out", link: outside}, entry{name: "out/planted", body: "x"}), nil)
	if err == nil {
		t.Error("a write through a symlink out of the workspace was accepted")
	}
	if _, err := os.Stat(filepath.Join(outside, "planted")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a file was planted outside the workspace (%v)", err)
	}
}

// What the stream does not hold is removed only once commit agrees: an empty or cut stream
// from a sandbox that went must not empty the workspace.
func TestSyncOutRemovesOnlyAfterCommit(t *testing.T) {
	t.Parallel()
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "keep.txt"), []byte("k"), 0o644); err != nil {
		t.Fatal(err)
	}
	refuse := errors.New("the sandbox went")
	if err := SyncOut(ws, archive(t), func() error { return refuse }); !errors.Is(err, refuse) {
		t.Fatalf("SyncOut: %v, want the commit's error", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "keep.txt")); err != nil {
		t.Fatalf("keep.txt removed without a commit: %v", err)
	}
	if err := SyncOut(ws, archive(t, entry{name: "d", dir: true}, entry{name: "d/new.txt", body: "n"}), func() error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(ws, "keep.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("keep.txt, gone from the stream, is still there (%v)", err)
	}
	// Write and SyncOut round-trip a tree.
	var buf bytes.Buffer
	if err := Write(ws, &buf); err != nil {
		t.Fatal(err)
	}
	other := t.TempDir()
	if err := SyncOut(other, &buf, nil); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(other, "d", "new.txt")); err != nil || string(b) != "n" {
		t.Errorf("round trip: %q, %v", b, err)
	}
}
