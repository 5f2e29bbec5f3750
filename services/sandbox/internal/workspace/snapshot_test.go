package workspace

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"google.golang.org/protobuf/proto"
)

func TestSnapshotDiff(t *testing.T) {
	t.Parallel()
	w := newWS(t, Limits{})
	r := w.Root()
	put(t, r, map[string]string{
		"keep.txt":     "same\n",
		"edit.go":      "package x\n\nfunc A() {}\n",
		"chmod.sh":     "echo hi\n",
		"gone.txt":     "bye\n",
		"bin.dat":      "\x00\x01\x02",
		".git/HEAD":    "ref: refs/heads/main\n",
		"sub/deep.txt": "deep\n",
	})
	symlink(t, "keep.txt", filepath.Join(r, "link"))
	base, err := w.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := base.Files[".git/HEAD"]; ok {
		t.Error("the snapshot holds .git")
	}
	if got := base.Files["link"]; !got.Symlink {
		t.Errorf("link recorded as %+v", got)
	}
	// The base's content, as the service would keep it next to the snapshot.
	baseContent := map[string][]byte{}
	for p := range base.Files {
		b, err := w.SnapshotContent(p)
		if err != nil {
			t.Fatal(err)
		}
		baseContent[p] = b
	}

	// Round trip through storage.
	enc, err := base.MarshalBinary()
	if err != nil {
		t.Fatal(err)
	}
	var stored Snapshot
	if err := stored.UnmarshalBinary(enc); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(base, &stored) {
		t.Fatalf("snapshot changed in storage: %+v, want %+v", &stored, base)
	}

	mustWrite := func(p, c string, exec bool) {
		if _, err := w.WriteFile(p, []byte(c), exec); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite("edit.go", "package x\n\nfunc A() {}\n\nfunc B() {}\n", false)
	mustWrite("new.txt", "fresh\n", false)
	mustWrite("bin.dat", "\x00\x01\x03", false)
	mustWrite(".git/HEAD", "ref: refs/heads/other\n", false)
	if err := os.Chmod(filepath.Join(r, "chmod.sh"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := w.DeleteFile("gone.txt"); err != nil {
		t.Fatal(err)
	}
	if err := w.DeleteFile("link"); err != nil {
		t.Fatal(err)
	}
	symlink(t, "sub/deep.txt", filepath.Join(r, "link"))

	head, err := w.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	const (
		create = typev1.FileAction_FILE_ACTION_CREATE
		modify = typev1.FileAction_FILE_ACTION_MODIFY
		del    = typev1.FileAction_FILE_ACTION_DELETE
	)
	want := []*typev1.FileDiff{
		{Path: "bin.dat", Action: modify},
		{Path: "chmod.sh", Action: modify}, // the executable bit alone is a change
		{Path: "edit.go", Action: modify},
		{Path: "gone.txt", Action: del},
		{Path: "link", Action: modify}, // a link's target is its content
		{Path: "new.txt", Action: create},
	}
	checkDiffs(t, "Diff", Diff(&stored, head), want)

	files, stats, err := w.DiffWith(&stored, DiffOptions{
		Unified:     true,
		BaseContent: func(p string) ([]byte, bool) { b, ok := baseContent[p]; return b, ok },
	})
	if err != nil {
		t.Fatal(err)
	}
	want = []*typev1.FileDiff{
		{Path: "bin.dat", Action: modify, Binary: true},
		{Path: "chmod.sh", Action: modify},
		{Path: "edit.go", Action: modify, Additions: 2, UnifiedDiff: `--- a/edit.go
+++ b/edit.go
@@ -1,3 +1,5 @@
 package x
 
 func A() {}
+
+func B() {}
`},
		{Path: "gone.txt", Action: del, Deletions: 1, UnifiedDiff: "--- a/gone.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-bye\n"},
		{Path: "link", Action: modify, Additions: 1, Deletions: 1, UnifiedDiff: `--- a/link
+++ b/link
@@ -1 +1 @@
-keep.txt
\ No newline at end of file
+sub/deep.txt
\ No newline at end of file
`},
		{Path: "new.txt", Action: create, Additions: 1, UnifiedDiff: "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+fresh\n"},
	}
	checkHashes(t, w, files)
	checkDiffs(t, "DiffWith", files, want)
	if want := (&typev1.DiffStats{FilesChanged: 6, Additions: 4, Deletions: 2}); !proto.Equal(stats, want) {
		t.Fatalf("stats %v, want %v", stats, want)
	}

	// Counts without the text.
	files, _, err = w.DiffWith(&stored, DiffOptions{BaseContent: func(p string) ([]byte, bool) { b, ok := baseContent[p]; return b, ok }})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f.UnifiedDiff != "" {
			t.Errorf("%s: unified diff without asking", f.Path)
		}
		if f.Path == "edit.go" && f.Additions != 2 {
			t.Errorf("edit.go: %d additions without the text, want 2", f.Additions)
		}
	}
}

func TestDiffWithoutBaseContent(t *testing.T) {
	t.Parallel()
	w := newWS(t, Limits{})
	put(t, w.Root(), map[string]string{"old.txt": "a\n"})
	base, err := w.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	put(t, w.Root(), map[string]string{"old.txt": "b\n", "new.txt": "n\n"})
	files, stats, err := w.DiffWith(base, DiffOptions{Unified: true})
	if err != nil {
		t.Fatal(err)
	}
	want := []*typev1.FileDiff{
		{Path: "new.txt", Action: typev1.FileAction_FILE_ACTION_CREATE, Additions: 1, UnifiedDiff: "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+n\n"},
		{Path: "old.txt", Action: typev1.FileAction_FILE_ACTION_MODIFY}, // nothing to compare with
	}
	checkHashes(t, w, files)
	checkDiffs(t, "DiffWith", files, want)
	if stats.GetFilesChanged() != 2 || stats.GetAdditions() != 1 {
		t.Fatalf("stats %v", stats)
	}
	if _, _, err := w.DiffWith(nil, DiffOptions{}); err == nil {
		t.Fatal("a nil base accepted")
	}
}

func TestUnmarshalBinaryRefusesGarbage(t *testing.T) {
	t.Parallel()
	var s Snapshot
	if err := s.UnmarshalBinary([]byte("{not json")); err == nil {
		t.Fatal("garbage accepted")
	}
	if err := s.UnmarshalBinary([]byte("{}")); err != nil || s.Files == nil {
		t.Fatalf("empty snapshot: %v, files %v", err, s.Files)
	}
}

// checkDiffs compares file diffs one by one, so a failure names the file that differs.
// checkHashes checks that each file DiffWith reports names its content's hash as it is now
// (none for a deleted file), then clears the hashes for checkDiffs.
func checkHashes(t *testing.T, w *Workspace, files []*typev1.FileDiff) {
	t.Helper()
	for _, f := range files {
		want := ""
		if f.Action != typev1.FileAction_FILE_ACTION_DELETE {
			b, err := w.SnapshotContent(f.Path)
			if err != nil {
				t.Fatalf("%s: %v", f.Path, err)
			}
			sum := sha256.Sum256(b)
			want = hex.EncodeToString(sum[:])
		}
		if f.Sha256 != want {
			t.Errorf("%s: sha256 %q, want %q", f.Path, f.Sha256, want)
		}
		f.Sha256 = ""
	}
}

func checkDiffs(t *testing.T, what string, got, want []*typev1.FileDiff) {
	t.Helper()
	var g, w []string
	for _, f := range got {
		g = append(g, f.GetPath())
	}
	for _, f := range want {
		w = append(w, f.GetPath())
	}
	if strings.Join(g, ",") != strings.Join(w, ",") {
		t.Fatalf("%s: paths %q, want %q", what, g, w)
	}
	for i := range got {
		if !proto.Equal(got[i], want[i]) {
			t.Errorf("%s: %s:\n got %v\nwant %v\ngot unified:\n%s", what, got[i].GetPath(), got[i], want[i], got[i].GetUnifiedDiff())
		}
	}
}
