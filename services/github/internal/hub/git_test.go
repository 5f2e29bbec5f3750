package hub

import (
	"archive/tar"
	"bytes"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/fakegithub"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/services/github/internal/forge"
)

func TestResolve(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.AddRepo("octo/app", appFiles)
	f.AddRepo("octo/empty", nil)
	first := f.Branch("octo/app", "main")
	head := f.Commit("octo/app", "main", map[string]string{"b.txt": "b"})
	f.SetBranch("octo/app", "dev", first)
	f.Tag("octo/app", "v1", first, false)
	f.Tag("octo/app", "v2", first, true)
	p := f.provider(t)

	cases := []struct {
		ref, want string
		err       error
	}{
		{"", head, nil},
		{"main", head, nil},
		{"dev", first, nil},
		{"refs/heads/dev", first, nil},
		{"v1", first, nil},
		{"v2", first, nil}, // annotated: peeled to the commit
		{first, first, nil},
		{first[:10], first, nil},
		{"nope", "", errs.ErrNotFound},
		{"refs/tags/main", "", errs.ErrNotFound},
		{strings.Repeat("ab", 20), "", errs.ErrNotFound},
	}
	for _, c := range cases {
		got, err := p.Resolve(t.Context(), "octo/app", c.ref, forge.Actor{})
		if c.err != nil {
			if !errorsIs(err, c.err) {
				t.Errorf("Resolve(%q) = %q, %v; want %v", c.ref, got, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Resolve(%q) = %q, %v; want %q", c.ref, got, err, c.want)
		}
	}
	for _, ref := range []string{"", "main", first} {
		_, err := p.Resolve(t.Context(), "octo/empty", ref, forge.Actor{})
		wantErr(t, err, forge.ErrEmpty)
	}
	_, err := p.Resolve(t.Context(), "octo/ghost", "main", forge.Actor{})
	wantErr(t, err, errs.ErrNotFound)
}

var wantTree = []struct {
	path string
	typ  githubv1.TreeEntryType
	size int64
}{
	{"README.md", githubv1.TreeEntryType_TREE_ENTRY_TYPE_FILE, 6},
	{"link", githubv1.TreeEntryType_TREE_ENTRY_TYPE_SYMLINK, 9},
	{"logo.png", githubv1.TreeEntryType_TREE_ENTRY_TYPE_FILE, 11},
	{"scripts", githubv1.TreeEntryType_TREE_ENTRY_TYPE_DIRECTORY, 0},
	{"scripts/run.sh", githubv1.TreeEntryType_TREE_ENTRY_TYPE_FILE, 18},
	{"src", githubv1.TreeEntryType_TREE_ENTRY_TYPE_DIRECTORY, 0},
	{"src/main.go", githubv1.TreeEntryType_TREE_ENTRY_TYPE_FILE, 29},
	{"src/util", githubv1.TreeEntryType_TREE_ENTRY_TYPE_DIRECTORY, 0},
	{"src/util/strings.go", githubv1.TreeEntryType_TREE_ENTRY_TYPE_FILE, 13},
	{"vendor", githubv1.TreeEntryType_TREE_ENTRY_TYPE_DIRECTORY, 0},
	{"vendor/lib", githubv1.TreeEntryType_TREE_ENTRY_TYPE_SUBMODULE, 0},
}

// addSubmodule puts a submodule entry into main's commit.
func addSubmodule(f *fakeGH, full string) string {
	return f.Commit(full, "main", map[string]string{"vendor/lib": fakegithub.Submodule(strings.Repeat("5", 40))})
}

func TestTree(t *testing.T) {
	t.Parallel()
	for _, truncated := range []bool{false, true} {
		t.Run(map[bool]string{false: "recursive", true: "truncated"}[truncated], func(t *testing.T) {
			t.Parallel()
			f := newFake(t, func(o *fakegithub.Options) { o.TruncateTrees = truncated })
			f.AddRepo("octo/app", appFiles)
			commit := addSubmodule(f, "octo/app")
			entries := try(f.provider(t).Tree(t.Context(), "octo/app", commit)).must(t)
			if len(entries) != len(wantTree) {
				t.Fatalf("Tree = %d entries, want %d: %v", len(entries), len(wantTree), entries)
			}
			for i, w := range wantTree {
				e := entries[i]
				if e.Path != w.path || e.Type != w.typ || e.Size != w.size || e.Sha == "" {
					t.Errorf("entry %d = %v, want %+v", i, e, w)
				}
			}
			walked := 0
			for _, r := range f.requests("GET", "/git/trees/") {
				if !strings.Contains(r.Query, "recursive") {
					walked++
				}
			}
			if want := map[bool]int{false: 0, true: 5}[truncated]; walked != want {
				t.Errorf("non-recursive tree calls = %d, want %d", walked, want)
			}
		})
	}
	f := newFake(t)
	f.AddRepo("octo/app", appFiles)
	_, err := f.provider(t).Tree(t.Context(), "octo/app", strings.Repeat("0", 40))
	wantErr(t, err, errs.ErrNotFound)
}

func TestFiles(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.AddRepo("octo/app", appFiles)
	commit := f.Branch("octo/app", "main")
	p := f.provider(t)
	paths := []string{"src/util/strings.go", "logo.png", "nope.txt", "src", "link", "src/main.go", "src/nope/x.go", "README.md/x"}
	files, missing, err := p.Files(t.Context(), "octo/app", commit, paths)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("files = %v", files)
	}
	if f0 := files[0]; f0.Path != "src/util/strings.go" || f0.Content != "package util\n" || f0.Binary || f0.Size != 13 || f0.Sha == "" {
		t.Errorf("text file = %v", f0)
	}
	if f1 := files[1]; f1.Path != "logo.png" || f1.Content != "" || !f1.Binary || f1.Size != 11 {
		t.Errorf("binary file = %v", f1)
	}
	if files[2].Path != "src/main.go" {
		t.Errorf("order: %v", files[2])
	}
	if want := []string{"nope.txt", "src", "link", "src/nope/x.go", "README.md/x"}; !slices.Equal(missing, want) {
		t.Errorf("missing = %v, want %v", missing, want)
	}
	// The root and src/ listed once each, although several paths pass through them.
	if n := len(f.requests("GET", "/git/trees/")); n != 3 {
		t.Errorf("tree calls = %d, want 3 (root, src, src/util)", n)
	}
}

func TestArchive(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.AddRepo("octo/app", appFiles)
	commit := f.Branch("octo/app", "main")
	p := f.provider(t)
	var buf bytes.Buffer
	if err := p.Archive(t.Context(), "octo/app", commit, &buf); err != nil {
		t.Fatal(err)
	}
	if bytes.HasPrefix(buf.Bytes(), []byte{0x1f, 0x8b}) {
		t.Fatal("archive is gzipped")
	}
	type ent struct {
		name string
		typ  byte
		mode int64
		body string
		link string
	}
	var got []ent
	tr := tar.NewReader(&buf)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(tr)
		got = append(got, ent{h.Name, h.Typeflag, h.Mode, string(body), h.Linkname})
	}
	want := []ent{
		{"README.md", tar.TypeReg, 0o664, "# App\n", ""},
		{"link", tar.TypeSymlink, 0o777, "", "README.md"},
		{"logo.png", tar.TypeReg, 0o664, appFiles["logo.png"], ""},
		{"scripts/", tar.TypeDir, 0o775, "", ""},
		{"scripts/run.sh", tar.TypeReg, 0o775, appFiles["scripts/run.sh"], ""},
		{"src/", tar.TypeDir, 0o775, "", ""},
		{"src/main.go", tar.TypeReg, 0o664, appFiles["src/main.go"], ""},
		{"src/util/", tar.TypeDir, 0o775, "", ""},
		{"src/util/strings.go", tar.TypeReg, 0o664, appFiles["src/util/strings.go"], ""},
	}
	if !slices.Equal(got, want) {
		t.Errorf("archive =\n%v\nwant\n%v", got, want)
	}
	dl := f.requests("GET", "/codeload/")
	if len(dl) != 1 || dl[0].Header.Get("Authorization") != "Bearer "+fakeToken {
		t.Errorf("download requests = %v (want one, authenticated)", dl)
	}
	err := p.Archive(t.Context(), "octo/app", strings.Repeat("0", 40), io.Discard)
	wantErr(t, err, errs.ErrNotFound)
}

func TestArchiveBroken(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.AddRepo("octo/app", appFiles)
	f.AddRepo("octo/empty", nil)
	commit := f.Branch("octo/app", "main")
	p := f.provider(t)
	err := p.Archive(t.Context(), "octo/empty", commit, io.Discard)
	wantErr(t, err, errs.ErrNotFound)

	// A download cut short: unavailable, not internal, and none of the gzip text.
	f.SetHook(func(w http.ResponseWriter, r *http.Request) bool {
		if !strings.HasPrefix(r.URL.Path, "/codeload/") {
			return false
		}
		data := f.Tarball("octo/app", commit)
		_, _ = w.Write(data[:len(data)/2])
		return true
	})
	err = p.Archive(t.Context(), "octo/app", commit, io.Discard)
	wantErr(t, err, errs.ErrUnavailable)
	wantPublic(t, err, "gzip", "EOF")
}

func TestThrottled429Retried(t *testing.T) {
	t.Parallel()
	f := newFake(t)
	f.AddRepo("octo/app", appFiles)
	count := rateLimited(f, "/git/trees/", 1, func(w http.ResponseWriter) {
		w.Header().Set("Retry-After", "0")
		writeJSON(w, 429, msg("Too Many Requests"))
	})
	commit := f.Branch("octo/app", "main")
	try(f.provider(t).Tree(t.Context(), "octo/app", commit)).must(t)
	if n := count.get(); n != 2 {
		t.Errorf("calls = %d, want 2", n)
	}
}

func TestStripTop(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"o-r-abc/":          "",
		"o-r-abc/a.txt":     "a.txt",
		"o-r-abc/dir/":      "dir",
		"o-r-abc/../x":      "",
		"o-r-abc/a/../../x": "",
		"pax_global_header": "",
	}
	for in, want := range cases {
		got, ok := stripTop(in)
		if got != want || ok != (want != "") {
			t.Errorf("stripTop(%q) = %q, %v", in, got, ok)
		}
	}
}
