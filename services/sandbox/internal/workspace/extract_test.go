package workspace

import (
	"archive/tar"
	"archive/zip"
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/thefold/thefold/pkg/errs"
)

// member is one archive entry to build.
type member struct {
	name string
	typ  byte // tar type flag; 0 means a regular file
	body string
	link string
	mode int64
	size int64 // bytes of zeros instead of body, for bombs
}

func tarball(t *testing.T, gz bool, ms ...member) []byte {
	t.Helper()
	var buf bytes.Buffer
	var out io.Writer = &buf
	var zw *gzip.Writer
	if gz {
		zw = gzip.NewWriter(&buf)
		out = zw
	}
	tw := tar.NewWriter(out)
	for _, m := range ms {
		h := &tar.Header{Name: m.name, Typeflag: m.typ, Linkname: m.link, Mode: m.mode, Size: int64(len(m.body))}
		if h.Typeflag == 0 {
			h.Typeflag = tar.TypeReg
		}
		if h.Mode == 0 {
			h.Mode = 0o644
		}
		if m.size > 0 {
			h.Size = m.size
		}
		if h.Typeflag != tar.TypeReg {
			h.Size = 0
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		var err error
		if m.size > 0 {
			_, err = io.Copy(tw, io.LimitReader(zeros{}, m.size))
		} else {
			_, err = tw.Write([]byte(m.body))
		}
		if err != nil && h.Typeflag == tar.TypeReg {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return buf.Bytes()
}

func zipball(t *testing.T, ms ...member) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	for _, m := range ms {
		fh := &zip.FileHeader{Name: m.name, Method: zip.Deflate}
		mode := fs.FileMode(m.mode)
		if mode == 0 {
			mode = 0o644
		}
		switch {
		case m.link != "":
			mode |= fs.ModeSymlink
		case strings.HasSuffix(m.name, "/"):
			mode |= fs.ModeDir
		}
		fh.SetMode(mode)
		f, err := zw.CreateHeader(fh)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case m.link != "":
			_, err = f.Write([]byte(m.link))
		case m.size > 0:
			_, err = io.Copy(f, io.LimitReader(zeros{}, m.size))
		default:
			_, err = f.Write([]byte(m.body))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type zeros struct{}

func (zeros) Read(p []byte) (int, error) { clear(p); return len(p), nil }

// tree lists a directory's entries (path → content, "dir/" for a directory, "-> target"
// for a link, " +x" appended for an executable).
func tree(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[rel] = "-> " + l
		case fi.IsDir():
			out[rel] = "dir/"
		default:
			b, _ := os.ReadFile(p)
			out[rel] = string(b)
			if fi.Mode()&0o111 != 0 {
				out[rel] += " +x"
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, got, want map[string]string) {
	t.Helper()
	var keys []string
	for k := range got {
		keys = append(keys, k)
	}
	for k := range want {
		if _, ok := got[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if got[k] != want[k] {
			t.Errorf("%s: got %q, want %q", k, got[k], want[k])
		}
	}
}

func TestExtract(t *testing.T) {
	t.Parallel()
	repo := []member{
		{name: "repo-abc123/", typ: tar.TypeDir},
		{name: "repo-abc123/README.md", body: "# hi\n"},
		{name: "repo-abc123/bin/run.sh", body: "#!/bin/sh\n", mode: 0o755},
		{name: "repo-abc123/src/", typ: tar.TypeDir},
		{name: "repo-abc123/src/main.go", body: "package main\n"},
		{name: "repo-abc123/latest", typ: tar.TypeSymlink, link: "src/main.go"},
		{name: "repo-abc123/src/up", typ: tar.TypeSymlink, link: "../README.md"},
	}
	stripped := map[string]string{
		"README.md": "# hi\n", "bin": "dir/", "bin/run.sh": "#!/bin/sh\n +x", "src": "dir/",
		"src/main.go": "package main\n", "latest": "-> src/main.go", "src/up": "-> ../README.md",
	}
	zipRepo := []member{
		{name: "repo-abc123/"},
		{name: "repo-abc123/README.md", body: "# hi\n"},
		{name: "repo-abc123/bin/run.sh", body: "#!/bin/sh\n", mode: 0o755},
		{name: "repo-abc123/src/main.go", body: "package main\n"},
		{name: "repo-abc123/latest", link: "src/main.go"},
		{name: "repo-abc123/src/up", link: "../README.md"},
	}
	cases := []struct {
		name    string
		format  string
		archive func(t *testing.T) []byte
		strip   bool
		want    map[string]string
	}{
		{name: "tar.gz stripped", format: FormatTarGz, strip: true, want: stripped,
			archive: func(t *testing.T) []byte { return tarball(t, true, repo...) }},
		{name: "tar stripped", format: FormatTar, strip: true, want: stripped,
			archive: func(t *testing.T) []byte { return tarball(t, false, repo...) }},
		{name: "zip stripped", format: FormatZip, strip: true, want: stripped,
			archive: func(t *testing.T) []byte { return zipball(t, zipRepo...) }},
		{name: "not stripped", format: FormatTarGz, want: map[string]string{"repo-abc123": "dir/", "repo-abc123/README.md": "# hi\n"},
			archive: func(t *testing.T) []byte { return tarball(t, true, repo[:2]...) }},
		{name: "no common top directory", format: FormatTarGz, strip: true,
			want: map[string]string{"a": "dir/", "a/x": "x", "b": "b"},
			archive: func(t *testing.T) []byte {
				return tarball(t, true, member{name: "a/x", body: "x"}, member{name: "./b", body: "b"})
			}},
		{name: "a lone file is not a top directory", format: FormatTar, strip: true,
			want:    map[string]string{"only.txt": "o"},
			archive: func(t *testing.T) []byte { return tarball(t, false, member{name: "only.txt", body: "o"}) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newWS(t, Limits{})
			if err := Extract(w, bytes.NewReader(c.archive(t)), ExtractOptions{Format: c.format, StripTopDir: c.strip}); err != nil {
				t.Fatal(err)
			}
			sameTree(t, tree(t, w.Root()), c.want)
		})
	}
}

func TestExtractRefuses(t *testing.T) {
	t.Parallel()
	small := Limits{MaxFileBytes: 1 << 20, MaxTotalBytes: 2 << 20, MaxFiles: 3}
	cases := []struct {
		name    string
		format  string
		archive func(t *testing.T) []byte
		errText string
	}{
		{name: "dot-dot", format: FormatTarGz, errText: `"../evil": escapes the root`,
			archive: func(t *testing.T) []byte {
				return tarball(t, true, member{name: "ok.txt", body: "fine"}, member{name: "../evil", body: "x"})
			}},
		{name: "dot-dot inside", format: FormatTar, errText: "escapes the root",
			archive: func(t *testing.T) []byte { return tarball(t, false, member{name: "a/../../evil", body: "x"}) }},
		{name: "absolute", format: FormatTarGz, errText: "is absolute",
			archive: func(t *testing.T) []byte { return tarball(t, true, member{name: "/etc/cron.d/evil", body: "x"}) }},
		{name: "symlink outside", format: FormatTarGz, errText: "leads outside the workspace",
			archive: func(t *testing.T) []byte {
				return tarball(t, true, member{name: "sub/l", typ: tar.TypeSymlink, link: "../../etc"})
			}},
		{name: "absolute symlink", format: FormatTarGz, errText: "targets must be relative",
			archive: func(t *testing.T) []byte {
				return tarball(t, true, member{name: "l", typ: tar.TypeSymlink, link: "/etc/passwd"})
			}},
		{name: "symlink chain climbing out", format: FormatTarGz, errText: "outside the workspace",
			archive: func(t *testing.T) []byte {
				return tarball(t, true, member{name: "self", typ: tar.TypeSymlink, link: "."},
					member{name: "climb", typ: tar.TypeSymlink, link: "self/.."})
			}},
		{name: "write through an archive's symlink", format: FormatTar, errText: "archive entry",
			archive: func(t *testing.T) []byte {
				return tarball(t, false, member{name: "l", typ: tar.TypeSymlink, link: "sub"},
					member{name: "sub/", typ: tar.TypeDir}, member{name: "l/x", body: "x"})
			}},
		{name: "hardlink", format: FormatTarGz, errText: "hardlinks are not accepted",
			archive: func(t *testing.T) []byte {
				return tarball(t, true, member{name: "a", body: "a"}, member{name: "h", typ: tar.TypeLink, link: "a"})
			}},
		{name: "device", format: FormatTarGz, errText: "special file",
			archive: func(t *testing.T) []byte { return tarball(t, true, member{name: "null", typ: tar.TypeChar}) }},
		{name: "fifo", format: FormatTar, errText: "special file",
			archive: func(t *testing.T) []byte { return tarball(t, false, member{name: "p", typ: tar.TypeFifo}) }},
		{name: "gzip bomb: one huge file", format: FormatTarGz, errText: "over the 1048576-byte file limit",
			archive: func(t *testing.T) []byte { return tarball(t, true, member{name: "zeros", size: 16 << 20}) }},
		{name: "gzip bomb: the total", format: FormatTarGz, errText: "unpacks to more than 2097152 bytes",
			archive: func(t *testing.T) []byte {
				return tarball(t, true, member{name: "z1", size: 1 << 20}, member{name: "z2", size: 1 << 20}, member{name: "z3", size: 1 << 20})
			}},
		{name: "zip bomb", format: FormatZip, errText: "over the 1048576-byte file limit",
			archive: func(t *testing.T) []byte { return zipball(t, member{name: "zeros", size: 16 << 20}) }},
		{name: "too many files", format: FormatZip, errText: "more than 3 files",
			archive: func(t *testing.T) []byte {
				return zipball(t, member{name: "1"}, member{name: "2"}, member{name: "3"}, member{name: "4"})
			}},
		{name: "zip dot-dot", format: FormatZip, errText: "escapes the root",
			archive: func(t *testing.T) []byte { return zipball(t, member{name: "../evil", body: "x"}) }},
		{name: "zip symlink outside", format: FormatZip, errText: "leads outside the workspace",
			archive: func(t *testing.T) []byte { return zipball(t, member{name: "l", link: "../x"}) }},
		{name: "not gzip", format: FormatTarGz, errText: "not gzip",
			archive: func(t *testing.T) []byte { return []byte("plain text") }},
		{name: "not a zip", format: FormatZip, errText: "not a zip",
			archive: func(t *testing.T) []byte { return []byte("plain text") }},
		{name: "unknown format", format: "rar", errText: `format "rar"`,
			archive: func(t *testing.T) []byte { return nil }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			w := newWS(t, small)
			err := Extract(w, bytes.NewReader(c.archive(t)), ExtractOptions{Format: c.format})
			if !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), c.errText) {
				t.Fatalf("Extract = %v; want ErrInvalid with %q", err, c.errText)
			}
			// Nothing escaped: the workspace's parent holds only the workspace.
			if ents, _ := os.ReadDir(filepath.Dir(w.Root())); len(ents) != 1 {
				t.Errorf("entries next to the workspace: %v", ents)
			}
			// Refused in the check pass (all but the link cases): nothing written.
			if !strings.Contains(c.name, "symlink") && c.name != "write through an archive's symlink" {
				if got := tree(t, w.Root()); len(got) != 0 {
					t.Errorf("a refused archive left files: %v", got)
				}
			}
			// No link the archive carried stays behind.
			for p, v := range tree(t, w.Root()) {
				if strings.HasPrefix(v, "-> ") {
					t.Errorf("link %s %s left", p, v)
				}
			}
		})
	}
}
