package depgraph

import (
	"go/parser"
	"go/token"
	"path"
	"sort"
	"strconv"
	"strings"
)

// goSkipped reports whether a Go path lies under a testdata or vendor
// directory, which the go command ignores.
func goSkipped(p string) bool {
	for _, seg := range strings.Split(path.Dir(p), "/") {
		if seg == "testdata" || seg == "vendor" {
			return true
		}
	}
	return false
}

// dirOf returns the directory of p, "" for the repository root.
func dirOf(p string) string {
	d := path.Dir(p)
	if d == "." {
		return ""
	}
	return d
}

// LocalImportDirs returns the directories of the packages of module modPath (rooted at
// root, a directory relative to the repository root) that the Go source src imports, in
// import order, each path.Join(root, the package's path below the module). A parse error
// still yields the imports parsed before it. Whether a directory belongs to a nested module
// is the caller's to check.
func LocalImportDirs(fset *token.FileSet, filename, src, root, modPath string) []string {
	if fset == nil {
		fset = token.NewFileSet()
	}
	af, _ := parser.ParseFile(fset, filename, src, parser.ImportsOnly)
	if af == nil || modPath == "" {
		return nil
	}
	var out []string
	for _, spec := range af.Imports {
		ip, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			continue
		}
		switch {
		case ip == modPath:
			out = append(out, root)
		case strings.HasPrefix(ip, modPath+"/"):
			out = append(out, path.Join(root, strings.TrimPrefix(ip, modPath+"/")))
		}
	}
	return out
}

// ModulePath extracts the module path from go.mod content, or "".
func ModulePath(gomod string) string {
	for _, line := range strings.Split(gomod, "\n") {
		line = strings.TrimSpace(line)
		if i := strings.Index(line, "//"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		rest, ok := strings.CutPrefix(line, "module")
		if !ok || (rest != "" && rest[0] != ' ' && rest[0] != '\t' && rest[0] != '"') {
			continue
		}
		rest = strings.TrimSpace(rest)
		if u, err := strconv.Unquote(rest); err == nil {
			return u
		}
		return rest
	}
	return ""
}

// goModules maps module root directories to module paths and finds the
// module root of a directory.
type goModules map[string]string

// rootOf returns the nearest directory at or above dir holding a go.mod.
func (m goModules) rootOf(dir string) (string, bool) {
	for {
		if _, ok := m[dir]; ok {
			return dir, true
		}
		if dir == "" {
			return "", false
		}
		dir = dirOf(dir)
	}
}

// goEdges adds the edges of the Go files: a file depends on every non-test
// .go file (existing or planned) of each same-module package it imports.
func goEdges(files []File, plannedOnly map[string]bool, es *edgeSet) {
	mods := goModules{}
	for _, f := range files {
		if path.Base(f.Path) == "go.mod" && !goSkipped(f.Path) {
			if mp := ModulePath(f.Content); mp != "" {
				mods[dirOf(f.Path)] = mp
			}
		}
	}
	if len(mods) == 0 {
		return
	}
	// pkgFiles: directory → its non-test .go files.
	pkgFiles := map[string][]string{}
	addPkgFile := func(p string) {
		if language(p) == "go" && !goSkipped(p) && !strings.HasSuffix(p, "_test.go") {
			pkgFiles[dirOf(p)] = append(pkgFiles[dirOf(p)], p)
		}
	}
	for _, f := range files {
		addPkgFile(f.Path)
	}
	planned := make([]string, 0, len(plannedOnly))
	for p := range plannedOnly {
		planned = append(planned, p)
	}
	sort.Strings(planned)
	for _, p := range planned {
		addPkgFile(p)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if language(f.Path) != "go" || goSkipped(f.Path) {
			continue
		}
		root, ok := mods.rootOf(dirOf(f.Path))
		if !ok {
			continue
		}
		modPath := mods[root]
		dir := dirOf(f.Path)
		for _, rel := range LocalImportDirs(fset, f.Path, f.Content, root, modPath) {
			if r, ok := mods.rootOf(rel); !ok || r != root {
				continue // the directory belongs to a nested module
			}
			if rel == dir && !strings.HasSuffix(f.Path, "_test.go") {
				continue // same package
			}
			for _, dep := range pkgFiles[rel] {
				es.add(f.Path, dep)
			}
		}
	}
}
