package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/thefold/thefold/pkg/errs"
)

// newWS opens a workspace on a fresh temporary directory.
func newWS(t testing.TB, l Limits) *Workspace {
	t.Helper()
	w, err := Open(t.TempDir(), l)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = w.Close() })
	return w
}

// put writes files (path → content) under dir with the os package, bypassing Workspace.
func put(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for p, c := range files {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func symlink(t testing.TB, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// hostile builds a workspace with links that lead out of it in every way the tests need,
// next to a directory outside holding a secret.
func hostile(t testing.TB) (w *Workspace, outside string) {
	t.Helper()
	w = newWS(t, Limits{})
	outside = t.TempDir()
	put(t, outside, map[string]string{"secret": "s3cr3t"})
	put(t, w.Root(), map[string]string{"dir/file.txt": "hello\n", "top.txt": "top\n"})
	rel, err := filepath.Rel(w.Root(), outside)
	if err != nil {
		t.Fatal(err)
	}
	r := w.Root()
	symlink(t, "/etc", filepath.Join(r, "etc"))                          // absolute, to a directory outside
	symlink(t, filepath.Join("..", rel), filepath.Join(r, "dir", "up"))  // relative, to a directory outside
	symlink(t, filepath.Join(rel, "secret"), filepath.Join(r, "uplink")) // relative, to a file outside
	symlink(t, "dir", filepath.Join(r, "in"))                            // inside
	symlink(t, "dir/file.txt", filepath.Join(r, "inlink"))               // inside, to a file
	symlink(t, "/dev/null", filepath.Join(r, "null"))
	symlink(t, strings.Repeat("../", 20)+"dev/null", filepath.Join(r, "relnull"))
	symlink(t, ".", filepath.Join(r, "self"))
	symlink(t, "self/..", filepath.Join(r, "climb")) // lexically ".", really the parent
	symlink(t, "loop", filepath.Join(r, "loop"))
	if err := syscall.Mkfifo(filepath.Join(r, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	return w, outside
}

func TestOpen(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	put(t, dir, map[string]string{"file": "x"})
	if _, err := Open(filepath.Join(dir, "missing"), Limits{}); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("Open(missing) = %v, want ErrNotFound", err)
	}
	if _, err := Open(filepath.Join(dir, "file"), Limits{}); !errors.Is(err, errs.ErrInvalid) {
		t.Errorf("Open(file) = %v, want ErrInvalid", err)
	}
	// Opened through a symlink, the root is the real directory, so that links in it are
	// compared with the path the kernel sees.
	alias := filepath.Join(t.TempDir(), "alias")
	symlink(t, dir, alias)
	w, err := Open(alias, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	real, _ := filepath.EvalSymlinks(dir)
	if w.Root() != real {
		t.Errorf("Root() = %q, want %q", w.Root(), real)
	}
	if l := w.Limits(); l.MaxFileBytes != DefaultMaxFileBytes || l.MaxFiles != DefaultMaxFiles || l.MaxTotalBytes != DefaultMaxTotalBytes || len(l.SkipDirs) != 1 {
		t.Errorf("defaults not applied: %+v", l)
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	w, _ := hostile(t)
	root := w.Root()
	cases := []struct {
		rel     string
		want    string // host path relative to root, when accepted
		errText string // substring of the error, when refused
	}{
		{rel: "", want: "."},
		{rel: ".", want: "."},
		{rel: "top.txt", want: "top.txt"},
		{rel: "new/deeper/file.go", want: "new/deeper/file.go"},
		{rel: "in/file.txt", want: "in/file.txt"},
		{rel: "inlink", want: "inlink"},
		{rel: "self/top.txt", want: "self/top.txt"},
		{rel: "/etc/passwd", errText: "is absolute"},
		{rel: "../x", errText: "escapes the root"},
		{rel: "a/../../x", errText: "escapes the root"},
		{rel: "a/..", errText: "escapes the root"},
		{rel: "a\x00b", errText: "NUL"},
		{rel: `a\b`, errText: "backslash"},
		{rel: "a//b", errText: "not clean"},
		{rel: "a/./b", errText: "not clean"},
		{rel: "a/", errText: "not clean"},
		{rel: "etc/passwd", errText: "absolute symlink"},
		{rel: "null", errText: "absolute symlink"},
		{rel: "relnull", errText: "outside the workspace"},
		{rel: "dir/up/secret", errText: "outside the workspace"},
		{rel: "dir/up/new-file", errText: "outside the workspace"},
		{rel: "uplink", errText: "outside the workspace"},
		{rel: "climb/x", errText: "outside the workspace"},
		{rel: "loop", errText: "more than 40 symlinks"},
	}
	for _, c := range cases {
		t.Run(c.rel, func(t *testing.T) {
			t.Parallel()
			got, err := w.Resolve(c.rel)
			if c.errText != "" {
				if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), c.errText) {
					t.Fatalf("Resolve(%q) = %q, %v; want ErrInvalid with %q", c.rel, got, err, c.errText)
				}
				return
			}
			if err != nil {
				t.Fatalf("Resolve(%q): %v", c.rel, err)
			}
			if want := filepath.Join(root, c.want); got != want {
				t.Fatalf("Resolve(%q) = %q, want %q", c.rel, got, want)
			}
		})
	}
}

// FuzzResolve checks that an accepted path never leads outside the workspace, whatever
// links lie on it.
func FuzzResolve(f *testing.F) {
	for _, s := range []string{"", "top.txt", "in/file.txt", "dir/up/secret", "climb/x", "self/self/in/../x",
		"../x", "/etc", "a/../../b", "uplink", "null", "a\x00", `a\..\b`, "self/climb", "in/up/secret"} {
		f.Add(s)
	}
	w, _ := hostile(f)
	symlink(f, "../in/up", filepath.Join(w.Root(), "dir", "deep"))
	f.Fuzz(func(t *testing.T, rel string) {
		got, err := w.Resolve(rel)
		if err != nil {
			if !errors.Is(err, errs.ErrInvalid) {
				t.Fatalf("Resolve(%q): %v is not ErrInvalid", rel, err)
			}
			return
		}
		if got != w.Root() && !strings.HasPrefix(got, w.Root()+"/") {
			t.Fatalf("Resolve(%q) = %q, outside %q", rel, got, w.Root())
		}
		// Independently of follow: the existing part of the path, with the kernel's view
		// of its links, is inside too.
		p := got
		for {
			real, err := filepath.EvalSymlinks(p)
			if err == nil {
				if real != w.Root() && !strings.HasPrefix(real, w.Root()+"/") {
					t.Fatalf("Resolve(%q) = %q, which really is %q, outside", rel, got, real)
				}
				break
			}
			if p == w.Root() {
				break
			}
			p = filepath.Dir(p)
		}
	})
}
