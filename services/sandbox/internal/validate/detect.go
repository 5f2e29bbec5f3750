package validate

import (
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
)

// Language is a toolchain the pipeline knows.
type Language string

const (
	Go         Language = "go"
	TypeScript Language = "typescript"
	JavaScript Language = "javascript"
	Python     Language = "python"
)

// maxProjectDepth bounds how deep Detect looks for project files: deep enough for a
// monorepo's services/x/go.mod, shallow enough not to crawl a large tree.
const maxProjectDepth = 3

// maxPythonFiles bounds the files compiled in one Validate.
const maxPythonFiles = 5000

// skippedDir reports directories no project file is looked for in: dependencies, VCS data,
// build output, and testdata (which holds deliberately broken inputs).
func skippedDir(name string) bool {
	switch name {
	case "node_modules", "vendor", "testdata", "__pycache__", "venv", "dist", "build":
		return true
	}
	return strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")
}

// Detect lists the languages of the projects under root, in the order Go, TypeScript,
// JavaScript, Python: Go for a go.mod, TypeScript for a tsconfig.json, JavaScript for a
// package.json without one, Python for pyproject.toml, setup.py, requirements.txt or any
// .py file, looked for up to a few directory levels deep.
func Detect(root string) []Language {
	var langs []Language
	if len(goModules(root)) > 0 {
		langs = append(langs, Go)
	}
	ts, js := false, false
	for _, p := range nodeProjects(root) {
		if exists(filepath.Join(root, p.Rel, "tsconfig.json")) {
			ts = true
		} else {
			js = true
		}
	}
	if ts {
		langs = append(langs, TypeScript)
	}
	if js {
		langs = append(langs, JavaScript)
	}
	if len(pythonFiles(root, 1)) > 0 || len(findFiles(root, "pyproject.toml", "setup.py", "requirements.txt")) > 0 {
		langs = append(langs, Python)
	}
	return langs
}

// goModules lists the directories (relative, '/'-separated, "." for root) holding a go.mod,
// with the module path each declares.
func goModules(root string) []ProjectDir {
	var dirs []ProjectDir
	for _, f := range findFiles(root, "go.mod") {
		rel := path.Dir(f)
		dirs = append(dirs, ProjectDir{Rel: rel, Root: root, Module: goModulePath(filepath.Join(root, filepath.FromSlash(rel)))})
	}
	return dirs
}

// nodeProjects lists the directories holding a package.json or a tsconfig.json.
func nodeProjects(root string) []ProjectDir {
	var dirs []ProjectDir
	for _, f := range findFiles(root, "package.json", "tsconfig.json") {
		d := ProjectDir{Rel: path.Dir(f), Root: root}
		if !slices.Contains(dirs, d) {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// findFiles returns the workspace-relative paths of files with one of names, up to
// maxProjectDepth levels below root, sorted.
func findFiles(root string, names ...string) []string {
	var found []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // an unreadable directory holds no project we can validate
		}
		rel, _ := filepath.Rel(root, p)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel != "." && (skippedDir(d.Name()) || strings.Count(rel, "/") >= maxProjectDepth) {
				return filepath.SkipDir
			}
			return nil
		}
		if slices.Contains(names, d.Name()) && d.Type().IsRegular() {
			found = append(found, rel)
		}
		return nil
	})
	slices.Sort(found)
	return found
}

// pythonFiles lists up to limit .py files under root (any depth), workspace-relative.
func pythonFiles(root string, limit int) []string {
	var found []string
	_ = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if len(found) >= limit {
			return filepath.SkipAll
		}
		if d.IsDir() {
			if p != root && (skippedDir(d.Name()) || exists(filepath.Join(p, "pyvenv.cfg"))) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(d.Name(), ".py") && d.Type().IsRegular() {
			rel, _ := filepath.Rel(root, p)
			found = append(found, filepath.ToSlash(rel))
		}
		return nil
	})
	return found
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
