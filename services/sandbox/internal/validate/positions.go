package validate

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// sandboxWorkspace is where the docker and bwrap backends mount the workspace: a path under
// it that reaches a diagnostic would name a directory that exists only inside the sandbox.
const sandboxWorkspace = "/workspace"

// ProjectDir locates a project directory (a Go module, a Node or Python project) for the
// parsers, which turn every file name a tool prints into a workspace-relative path:
//
//   - Rel is the directory relative to the workspace root ("." or "services/x"); the
//     tools run there, so a relative file name they print is relative to it.
//   - Abs is the same directory as the tools inside the sandbox see it (e.g.
//     "/workspace/services/x", or the host directory for the local backend); empty when
//     unknown. The go command prints absolute names with -fullpath, in go vet -json and for
//     files outside its working directory.
//   - Root is the workspace root on the host (Validate's root argument): the local backend
//     runs the tools there, so their absolute names start with it. Empty when unknown.
//   - Module is the Go module path go.mod declares, empty for other projects: a "# pkg"
//     header of the go command's output names a package, and the C compiler cgo runs in
//     that package's directory prints file names relative to it.
type ProjectDir struct {
	Rel    string
	Abs    string
	Root   string
	Module string
}

// Path turns a file name printed by a tool running in the project directory into a
// workspace-relative, '/'-separated path: an absolute name under the project directory,
// the workspace root as the sandbox sees it (/workspace) or as the host sees it (Root)
// loses that prefix; a relative one ("./a.go", "b/b.go", "../x/y.go") is resolved against
// the project directory. A name outside the workspace (GOROOT, the module cache) stays
// absolute, so the reader still sees where it is.
func (m ProjectDir) Path(p string) string {
	p = strings.ReplaceAll(p, "\\", "/")
	if path.IsAbs(p) {
		return m.absPath(p)
	}
	j := path.Join(cleanRel(m.Rel), p)
	if j == ".." || strings.HasPrefix(j, "../") {
		// Above the workspace root: say where it is as an absolute name, if known.
		if root := m.sandboxRoot(); root != "" {
			return path.Join(root, j)
		}
	}
	return j
}

// absPath is Path for an absolute name.
func (m ProjectDir) absPath(p string) string {
	p = path.Clean(p)
	if m.Abs != "" {
		if rest, ok := under(p, path.Clean(m.Abs)); ok {
			return path.Join(cleanRel(m.Rel), rest)
		}
	}
	roots := []string{m.sandboxRoot(), sandboxWorkspace}
	if m.Root != "" {
		roots = append(roots, path.Clean(filepath.ToSlash(m.Root)))
	}
	for _, root := range roots {
		if rest, ok := under(p, root); ok {
			return rest
		}
	}
	return p
}

// sandboxRoot is the workspace root as the tools see it: Abs without Rel at its end; empty
// when Abs is unknown or does not end with Rel.
func (m ProjectDir) sandboxRoot() string {
	if m.Abs == "" {
		return ""
	}
	abs, rel := path.Clean(strings.ReplaceAll(m.Abs, "\\", "/")), cleanRel(m.Rel)
	if rel == "." {
		return abs
	}
	if root, ok := strings.CutSuffix(abs, "/"+rel); ok && root != "" {
		return root
	}
	return ""
}

// under returns p relative to the absolute directory dir when p is dir or inside it. The
// file system root is no workspace: nothing is "under" it.
func under(p, dir string) (string, bool) {
	if dir == "" || dir == "/" || !path.IsAbs(dir) {
		return "", false
	}
	if p == dir {
		return ".", true
	}
	rest, ok := strings.CutPrefix(p, dir+"/")
	return rest, ok && rest != ""
}

func cleanRel(rel string) string {
	if rel == "" {
		return "."
	}
	return path.Clean(rel)
}

// pkgPath is Path for a file name printed while the go command built the package in
// pkgDir (relative to the module directory; "" when unknown). cgo runs the C compiler in
// the package directory, so a C or header file it names ("./c.h", "c.c") is relative to
// the package, while the go command itself prints names relative to its own working
// directory ("c/c.go"). A C name that already starts with the package directory is taken
// as the go command's; when the host root is known and only the other reading names an
// existing file, that one wins.
func (m ProjectDir) pkgPath(p, pkgDir string) string {
	p = strings.ReplaceAll(p, "\\", "/")
	if path.IsAbs(p) || pkgDir == "" || pkgDir == "." || !cFamily(p) {
		return m.Path(p)
	}
	clean := path.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return m.Path(p)
	}
	fromCwd, fromPkg := m.Path(clean), m.Path(path.Join(pkgDir, clean))
	primary, alt := fromPkg, fromCwd
	if strings.HasPrefix(clean, pkgDir+"/") {
		primary, alt = fromCwd, fromPkg
	}
	if m.Root != "" && !path.IsAbs(alt) && !existsIn(m.Root, primary) && existsIn(m.Root, alt) {
		return alt
	}
	return primary
}

func existsIn(root, rel string) bool {
	if path.IsAbs(rel) {
		return false
	}
	_, err := os.Stat(filepath.Join(root, filepath.FromSlash(rel)))
	return err == nil
}

// cFamily reports whether name is a file the C toolchain compiles for cgo (C, C++,
// Objective-C, Fortran, headers, and .S assembly, which gcc preprocesses; Go's own .s
// assembly is not).
func cFamily(name string) bool {
	switch path.Ext(name) {
	case ".c", ".h", ".cc", ".cpp", ".cxx", ".hh", ".hpp", ".hxx", ".m", ".mm", ".S", ".sx", ".f", ".F", ".for", ".f90", ".swig", ".swigcxx":
		return true
	}
	return false
}

// posLine is a located message in the form the Go toolchain, gcc, clang, pytest and most
// compilers share: "path:line:col: msg" or "path:line: msg", for any file type (.go, .s,
// .c, .h, .py, .ts, go.mod…), with the "vet: " prefix go vet puts on type errors. The
// path has no spaces or colons, which keeps log lines ("2026/01/02 15:04:05 …") and
// addresses ("127.0.0.1:8080: …") out; looksLikeFile filters the rest.
var posLine = regexp.MustCompile(`^(?:vet: )?([^\s:]+):(\d+)(?::(\d+))?: (.*)$`)

// position is one located line of a tool's output.
type position struct {
	path      string // as printed
	line, col int32
	msg       string
}

// parsePosition splits a "path:line[:col]: msg" line; ok is false for any other line.
func parsePosition(line string) (position, bool) {
	m := posLine.FindStringSubmatch(line)
	if m == nil || !looksLikeFile(m[1]) {
		return position{}, false
	}
	return position{path: m[1], line: atoi32(m[2]), col: atoi32(m[3]), msg: strings.TrimSpace(m[4])}, true
}

// extensionless are the file names without an extension a toolchain reports positions in.
var extensionless = map[string]bool{
	"Makefile": true, "GNUmakefile": true, "makefile": true, "Dockerfile": true,
	"Containerfile": true, "Jenkinsfile": true, "Rakefile": true, "Gemfile": true,
}

// looksLikeFile reports whether p names a file: its base has an extension starting with a
// letter (".go", ".s", ".mod", ".tsx") or is a known extensionless file name.
func looksLikeFile(p string) bool {
	base := path.Base(strings.ReplaceAll(p, "\\", "/"))
	if extensionless[base] {
		return true
	}
	ext := path.Ext(base)
	if len(ext) < 2 || len(ext) == len(base) {
		return false
	}
	c := ext[1]
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// cSeverity reads the severity gcc and clang put at the start of a message ("error: ",
// "fatal error: ", "warning: ", "note: ") and returns the message without the word:
// a cgo warning must not fail a build that succeeded. Other messages are errors.
func cSeverity(msg string) (typev1.Severity, string) {
	switch {
	case strings.HasPrefix(msg, "error: "):
		return typev1.Severity_SEVERITY_ERROR, strings.TrimPrefix(msg, "error: ")
	case strings.HasPrefix(msg, "fatal error: "):
		return typev1.Severity_SEVERITY_ERROR, msg
	case strings.HasPrefix(msg, "warning: "):
		return typev1.Severity_SEVERITY_WARNING, strings.TrimPrefix(msg, "warning: ")
	case strings.HasPrefix(msg, "note: "):
		return typev1.Severity_SEVERITY_INFO, strings.TrimPrefix(msg, "note: ")
	}
	return typev1.Severity_SEVERITY_ERROR, msg
}

// goHeader is the go command's "# pkg" line before a package's errors; go test adds the
// test binary in brackets ("# example.com/m/b [example.com/m/b.test]").
var goHeader = regexp.MustCompile(`^# (\S+)(?: \[[^\]]*\])?$`)

// headerPkgDir returns the directory (relative to the module) of the package a "# pkg"
// header names, "" when the package is not in module m or the line is no header.
func headerPkgDir(line string, m ProjectDir) (string, bool) {
	h := goHeader.FindStringSubmatch(line)
	if h == nil {
		return "", false
	}
	return pkgDirOf(h[1], m.Module), true
}

// pkgDirOf maps an import path to its directory relative to the module whose path is
// module, or "" when it is not one of the module's packages. An external test package
// ("x_test") lives in its package's directory.
func pkgDirOf(importPath, module string) string {
	if module == "" {
		return ""
	}
	importPath = strings.TrimSuffix(importPath, "_test")
	if importPath == module {
		return "."
	}
	if rest, ok := strings.CutPrefix(importPath, module+"/"); ok {
		return rest
	}
	return ""
}

// goModulePath reads the module path from the go.mod in dir (host path); "" when there is
// none or it is unreadable.
func goModulePath(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "go.mod"))
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		line, _, _ = strings.Cut(line, "//")
		fields := strings.Fields(line)
		if len(fields) == 2 && fields[0] == "module" {
			return strings.Trim(fields[1], "\"`")
		}
	}
	return ""
}
