package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/thefold/thefold/pkg/errs"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

func TestWriteFile(t *testing.T) {
	t.Parallel()
	w := newWS(t, Limits{MaxFileBytes: 16})
	r := w.Root()

	created, err := w.WriteFile("a/b/c.txt", []byte("one"), false)
	if err != nil || !created {
		t.Fatalf("first write: created %v, %v", created, err)
	}
	created, err = w.WriteFile("a/b/c.txt", []byte("two"), true)
	if err != nil || created {
		t.Fatalf("second write: created %v, %v", created, err)
	}
	got, err := os.ReadFile(filepath.Join(r, "a/b/c.txt"))
	if err != nil || string(got) != "two" {
		t.Fatalf("content %q, %v", got, err)
	}
	if _, err := w.WriteFile("plain", nil, false); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{"a/b/c.txt": 0o755, "plain": 0o644} {
		fi, err := os.Stat(filepath.Join(r, p))
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v, %v; want %v", p, fi.Mode().Perm(), err, want)
		}
	}
	// Atomic writes leave no temporary file behind, successful or not.
	if _, err := w.WriteFile("a/b/c.txt", []byte(strings.Repeat("x", 17)), false); err == nil {
		t.Fatal("oversized write accepted")
	}
	_ = filepath.WalkDir(r, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), tempPrefix) {
			t.Errorf("temporary file left: %s", p)
		}
		return err
	})
}

func TestWriteFileRefuses(t *testing.T) {
	t.Parallel()
	w, outside := hostile(t)
	if err := syscall.Mknod(filepath.Join(w.Root(), "dev"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Fatalf("mknod (the tests run as root here): %v", err)
	}
	cases := []struct{ rel, errText string }{
		{"../x", "escapes the root"},
		{"/tmp/x", "is absolute"},
		{"", "workspace root"},
		{"dir", "is a directory"},
		{"inlink", "is a symlink"},
		{"in/new.txt", "in is a symlink"},
		{"dir/up/secret", "dir/up is a symlink"},
		{"uplink", "is a symlink"},
		{"null", "is a symlink"},
		{"fifo", "a FIFO"},
		{"dev", "a character device"},
		{"top.txt/x", "top.txt is not a directory"},
		{"big", "over the 10485760-byte limit"},
	}
	for _, c := range cases {
		t.Run(c.rel, func(t *testing.T) {
			t.Parallel()
			content := []byte("pwned")
			if c.rel == "big" {
				content = make([]byte, DefaultMaxFileBytes+1)
			}
			if _, err := w.WriteFile(c.rel, content, false); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), c.errText) {
				t.Fatalf("WriteFile(%q) = %v; want ErrInvalid with %q", c.rel, err, c.errText)
			}
		})
	}
	t.Cleanup(func() {
		if b, _ := os.ReadFile(filepath.Join(outside, "secret")); string(b) != "s3cr3t" {
			t.Errorf("the file outside changed: %q", b)
		}
		if ents, _ := os.ReadDir(outside); len(ents) != 1 {
			t.Errorf("files appeared outside: %v", ents)
		}
	})
}

func TestReadFile(t *testing.T) {
	t.Parallel()
	w, _ := hostile(t)
	if err := syscall.Mknod(filepath.Join(w.Root(), "dev"), syscall.S_IFCHR|0o666, 1<<8|3); err != nil {
		t.Fatalf("mknod (the tests run as root here): %v", err)
	}
	cases := []struct {
		rel      string
		max      int64
		want     string
		sentinel error
		errText  string
	}{
		{rel: "top.txt", want: "top\n"},
		{rel: "in/file.txt", want: "hello\n"},
		{rel: "inlink", want: "hello\n"},
		{rel: "self/dir/file.txt", want: "hello\n"},
		{rel: "dir/file.txt", max: 6, want: "hello\n"},
		{rel: "dir/file.txt", max: 5, sentinel: errs.ErrInvalid, errText: "is 6 bytes, over the 5-byte limit"},
		{rel: "missing", sentinel: errs.ErrNotFound, errText: "no such file"},
		{rel: "dir", sentinel: errs.ErrInvalid, errText: "a directory"},
		{rel: "fifo", sentinel: errs.ErrInvalid, errText: "a FIFO"},
		{rel: "dev", sentinel: errs.ErrInvalid, errText: "a character device"},
		{rel: "null", sentinel: errs.ErrInvalid, errText: "absolute symlink"},
		{rel: "relnull", sentinel: errs.ErrInvalid, errText: "outside the workspace"},
		{rel: "uplink", sentinel: errs.ErrInvalid, errText: "outside the workspace"},
		{rel: "dir/up/secret", sentinel: errs.ErrInvalid, errText: "outside the workspace"},
		{rel: "etc/passwd", sentinel: errs.ErrInvalid, errText: "absolute symlink"},
		{rel: "climb/x", sentinel: errs.ErrInvalid, errText: "outside the workspace"},
		{rel: "top.txt/x", sentinel: errs.ErrInvalid, errText: "not a directory"},
	}
	for _, c := range cases {
		t.Run(c.rel, func(t *testing.T) {
			t.Parallel()
			got, err := w.ReadFile(c.rel, c.max)
			if c.sentinel != nil {
				if !errors.Is(err, c.sentinel) || !strings.Contains(err.Error(), c.errText) {
					t.Fatalf("ReadFile(%q) = %q, %v; want %v with %q", c.rel, got, err, c.sentinel, c.errText)
				}
				return
			}
			if err != nil || string(got) != c.want {
				t.Fatalf("ReadFile(%q) = %q, %v; want %q", c.rel, got, err, c.want)
			}
		})
	}
}

func TestDeleteFile(t *testing.T) {
	t.Parallel()
	w, outside := hostile(t)
	cases := []struct {
		rel      string
		sentinel error
		errText  string
	}{
		{rel: "top.txt"},
		{rel: "inlink"}, // the link goes, its target stays
		{rel: "missing", sentinel: errs.ErrNotFound, errText: "no such file"},
		{rel: "dir", sentinel: errs.ErrInvalid, errText: "is a directory"},
		{rel: "dir/up/secret", sentinel: errs.ErrInvalid, errText: "dir/up is a symlink"},
		{rel: "in/file.txt", sentinel: errs.ErrInvalid, errText: "in is a symlink"},
		{rel: "../x", sentinel: errs.ErrInvalid, errText: "escapes"},
	}
	for _, c := range cases {
		err := w.DeleteFile(c.rel)
		if c.sentinel != nil {
			if !errors.Is(err, c.sentinel) || !strings.Contains(err.Error(), c.errText) {
				t.Errorf("DeleteFile(%q) = %v; want %v with %q", c.rel, err, c.sentinel, c.errText)
			}
			continue
		}
		if err != nil {
			t.Errorf("DeleteFile(%q): %v", c.rel, err)
		}
		if _, err := os.Lstat(filepath.Join(w.Root(), c.rel)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there: %v", c.rel, err)
		}
	}
	if _, err := os.Stat(filepath.Join(w.Root(), "dir/file.txt")); err != nil {
		t.Errorf("deleting a link removed its target: %v", err)
	}
	if _, err := os.Stat(filepath.Join(outside, "secret")); err != nil {
		t.Errorf("the file outside is gone: %v", err)
	}
}

func TestApplyEdits(t *testing.T) {
	t.Parallel()
	w := newWS(t, Limits{})
	const orig = "package main\n\nfunc a() int { return 1 }\nfunc b() int { return 1 }\n"
	if _, err := w.WriteFile("main.go", []byte(orig), true); err != nil {
		t.Fatal(err)
	}
	edit := func(old, new string, n int32) *typev1.Edit {
		return &typev1.Edit{OldText: old, NewText: new, ExpectedCount: n}
	}
	cases := []struct {
		name    string
		edits   []*typev1.Edit
		errText string
	}{
		{"second edit matches nothing", []*typev1.Edit{edit("func a", "func x", 0), edit("func zzz", "y", 0)},
			`path "main.go": edit 2: old_text matches nothing`},
		{"second edit matches twice", []*typev1.Edit{edit("package main", "package lib", 0), edit("return 1", "return 2", 0)},
			`path "main.go": edit 2: old_text matches 2 times, expected 1`},
		{"empty old text", []*typev1.Edit{edit("", "x", 0)}, "edit 1: old_text is empty"},
		{"no edits", nil, "no edits"},
	}
	for _, c := range cases {
		_, err := w.ApplyEdits("main.go", c.edits)
		if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), c.errText) {
			t.Errorf("%s: %v; want ErrInvalid with %q", c.name, err, c.errText)
		}
		if b, _ := os.ReadFile(filepath.Join(w.Root(), "main.go")); string(b) != orig {
			t.Errorf("%s: the file changed: %q", c.name, b)
		}
	}

	got, err := w.ApplyEdits("main.go", []*typev1.Edit{edit("return 1", "return 2", 2), edit("func a", "func x", 0)})
	want := "package main\n\nfunc x() int { return 2 }\nfunc b() int { return 2 }\n"
	if err != nil || got != want {
		t.Fatalf("ApplyEdits = %q, %v; want %q", got, err, want)
	}
	b, err := os.ReadFile(filepath.Join(w.Root(), "main.go"))
	if err != nil || string(b) != want {
		t.Fatalf("on disk %q, %v", b, err)
	}
	if fi, _ := os.Stat(filepath.Join(w.Root(), "main.go")); fi.Mode().Perm() != 0o755 {
		t.Errorf("executable bit lost: %v", fi.Mode())
	}
	if _, err := w.ApplyEdits("missing.go", []*typev1.Edit{edit("a", "b", 0)}); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("missing file: %v, want ErrNotFound", err)
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	w := newWS(t, Limits{})
	put(t, w.Root(), map[string]string{"b.txt": "bb", "a.txt": "a", "a/x": "", "a/y/z": "zzz", ".git/config": "[core]"})
	if err := os.Chmod(filepath.Join(w.Root(), "a/x"), 0o755); err != nil {
		t.Fatal(err)
	}
	symlink(t, "a.txt", filepath.Join(w.Root(), "link"))
	symlink(t, "a", filepath.Join(w.Root(), "dirlink"))
	cases := []struct {
		name, prefix string
		opts         ListOptions
		want         []string
		errText      string
	}{
		{name: "root", want: []string{"a", "a.txt", "b.txt", "dirlink", "link"}},
		{name: "recursive", opts: ListOptions{Recursive: true},
			want: []string{"a", "a.txt", "a/x", "a/y", "a/y/z", "b.txt", "dirlink", "link"}},
		{name: "limit", opts: ListOptions{Recursive: true, Limit: 3}, want: []string{"a", "a.txt", "a/x"}},
		{name: "page after", opts: ListOptions{Recursive: true, Limit: 2, After: "a/x"}, want: []string{"a/y", "a/y/z"}},
		{name: "include skipped", opts: ListOptions{Recursive: true, IncludeSkipped: true, Limit: 3},
			want: []string{".git", ".git/config", "a"}},
		{name: "subdirectory", prefix: "a", want: []string{"a/x", "a/y"}},
		{name: "one file", prefix: "a/y/z", want: []string{"a/y/z"}},
		{name: "missing", prefix: "nope", errText: "no such file"},
		{name: "through a link", prefix: "dirlink", errText: "dirlink is a symlink"},
		{name: "escape", prefix: "../", errText: "escapes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			got, err := w.List(c.prefix, c.opts)
			if c.errText != "" {
				if err == nil || !strings.Contains(err.Error(), c.errText) {
					t.Fatalf("List = %v, %v; want an error with %q", got, err, c.errText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var paths []string
			for _, f := range got {
				paths = append(paths, f.Path)
			}
			if !slices.Equal(paths, c.want) {
				t.Fatalf("List = %q, want %q", paths, c.want)
			}
		})
	}
	all, err := w.List("", ListOptions{Recursive: true})
	if err != nil {
		t.Fatal(err)
	}
	byPath := map[string]FileInfo{}
	for _, f := range all {
		byPath[f.Path] = f
	}
	if f := byPath["a/x"]; !f.Executable || f.IsDir {
		t.Errorf("a/x: %+v, want an executable file", f)
	}
	if f := byPath["a/y/z"]; f.Size != 3 || f.Executable || f.ModTime.IsZero() {
		t.Errorf("a/y/z: %+v", f)
	}
	if f := byPath["a"]; !f.IsDir || f.Size != 0 {
		t.Errorf("a: %+v, want a directory", f)
	}
	if f := byPath["link"]; f.Mode&os.ModeSymlink == 0 {
		t.Errorf("link: %+v, want a symlink", f)
	}
}

// TestWriteFileConcurrent: writers racing on one path leave one writer's whole content and
// no temporary file.
func TestWriteFileConcurrent(t *testing.T) {
	t.Parallel()
	w := newWS(t, Limits{})
	const writers = 16
	contents := map[string]bool{}
	var wg sync.WaitGroup
	for i := range writers {
		c := strings.Repeat(string(rune('a'+i)), 64<<10)
		contents[c] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := w.WriteFile("shared/f", []byte(c), false); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	b, err := w.ReadFile("shared/f", 0)
	if err != nil || !contents[string(b)] {
		t.Fatalf("content is no writer's whole content (%d bytes), %v", len(b), err)
	}
	ents, err := os.ReadDir(filepath.Join(w.Root(), "shared"))
	if err != nil || len(ents) != 1 {
		t.Fatalf("entries %v, %v; want only f", ents, err)
	}
}
