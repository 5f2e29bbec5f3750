package relevance

import (
	"path"
	"slices"
	"strings"
)

// dirOf returns the directory of a file path, "" for the repository root.
func dirOf(p string) string {
	d := path.Dir(p)
	if d == "." || d == "/" {
		return ""
	}
	return d
}

func joinPath(elem ...string) string {
	p := path.Join(elem...)
	if p == "." {
		return ""
	}
	return p
}

// resolver turns import references into files of the index.
type resolver struct {
	ix *Index

	modByDir  map[string]string   // directory holding a go.mod → module path
	modDirs   map[string][]string // module path → directories declaring it, sorted
	nearest   map[string]string   // directory → directory of its nearest go.mod ("" + ok=false: none)
	hasNearer map[string]bool     // directory → a go.mod exists at or above it
	goDirs    map[string][]int32  // directory → its non-test Go files
	goCache   map[[2]string][]int32
}

// resolveImports fills ix.imports and ix.importedBy.
func (ix *Index) resolveImports(data []fileData) {
	r := &resolver{
		ix:        ix,
		modByDir:  map[string]string{},
		modDirs:   map[string][]string{},
		nearest:   map[string]string{},
		hasNearer: map[string]bool{},
		goDirs:    map[string][]int32{},
		goCache:   map[[2]string][]int32{},
	}
	for i := range ix.docs {
		d := &ix.docs[i]
		switch {
		case path.Base(d.path) == "go.mod":
			if mp := goModulePath(d.content); mp != "" {
				dir := dirOf(d.path)
				r.modByDir[dir] = mp
				r.modDirs[mp] = append(r.modDirs[mp], dir)
			}
		case d.lang == langGo && !strings.HasSuffix(d.path, "_test.go"):
			dir := dirOf(d.path)
			r.goDirs[dir] = append(r.goDirs[dir], int32(i))
		}
	}
	for _, dirs := range r.modDirs {
		slices.Sort(dirs)
	}

	ix.imports = make([][]int32, len(ix.docs))
	ix.importedBy = make([][]int32, len(ix.docs))
	for i := range ix.docs {
		d := &ix.docs[i]
		var out []int32
		for _, ref := range data[i].imports {
			switch d.lang {
			case langGo:
				out = append(out, r.goImport(d.path, ref.spec)...)
			case langJS:
				if j, ok := r.jsImport(d.path, ref.spec); ok {
					out = append(out, j)
				}
			case langPython:
				out = append(out, r.pyImport(d.path, ref)...)
			}
		}
		slices.Sort(out)
		out = slices.Compact(out)
		if k := slices.Index(out, int32(i)); k >= 0 {
			out = slices.Delete(out, k, k+1)
		}
		ix.imports[i] = out
		for _, j := range out {
			ix.importedBy[j] = append(ix.importedBy[j], int32(i))
		}
	}
}

// nearestMod returns the directory of the go.mod nearest to dir (dir itself or an
// ancestor) and whether there is one.
func (r *resolver) nearestMod(dir string) (string, bool) {
	if m, ok := r.nearest[dir]; ok {
		return m, r.hasNearer[dir]
	}
	m, ok := "", false
	for d := dir; ; {
		if _, found := r.modByDir[d]; found {
			m, ok = d, true
			break
		}
		if d == "" {
			break
		}
		d = dirOf(d)
	}
	r.nearest[dir], r.hasNearer[dir] = m, ok
	return m, ok
}

// goImport resolves a Go import path to the non-test Go files of the package's directory.
// The module is found by the longest module path that prefixes the import path; the
// directory must belong to that module (its nearest go.mod is the module's), so a nested
// module's packages are not taken for its parent's. A module named "std" (GOROOT/src)
// serves import paths without a dot in their first element, and the importer's module's
// vendor directory is tried last.
func (r *resolver) goImport(importer, spec string) []int32 {
	ownDir, hasOwn := r.nearestMod(dirOf(importer))
	key := [2]string{ownDir, spec}
	if v, ok := r.goCache[key]; ok {
		return v
	}
	var out []int32
	found := false
	for mp := spec; mp != "" && !found; mp = dirOf(mp) {
		dirs := r.modDirs[mp]
		if len(dirs) == 0 {
			continue
		}
		rest := strings.TrimPrefix(strings.TrimPrefix(spec, mp), "/")
		// The importer's own module first when several directories declare the same path.
		ordered := dirs
		if hasOwn && slices.Contains(dirs, ownDir) {
			ordered = append([]string{ownDir}, dirs...)
		}
		for _, md := range ordered {
			dir := joinPath(md, rest)
			if near, _ := r.nearestMod(dir); near != md {
				continue
			}
			if files := r.goDirs[dir]; len(files) > 0 {
				out, found = files, true
				break
			}
		}
	}
	if first, _, _ := strings.Cut(spec, "/"); !found && !strings.Contains(first, ".") {
		for _, md := range r.modDirs["std"] {
			dir := joinPath(md, spec)
			if near, _ := r.nearestMod(dir); near != md {
				continue
			}
			if files := r.goDirs[dir]; len(files) > 0 {
				out, found = files, true
				break
			}
		}
	}
	if !found && hasOwn {
		out = r.goDirs[joinPath(ownDir, "vendor", spec)]
	}
	r.goCache[key] = out
	return out
}

var jsExts = []string{".ts", ".tsx", ".js", ".jsx", ".mjs", ".cjs", ".mts", ".cts", ".d.ts"}

// jsImport resolves a relative specifier: the file itself, with each extension, or the
// index file of the directory; "./x.js" also finds x.ts (TypeScript's ESM convention).
func (r *resolver) jsImport(importer, spec string) (int32, bool) {
	base := joinPath(dirOf(importer), spec)
	if base == ".." || strings.HasPrefix(base, "../") {
		return 0, false
	}
	try := func(p string) (int32, bool) {
		j, ok := r.ix.byPath[p]
		return j, ok
	}
	if j, ok := try(base); ok && path.Ext(base) != "" {
		return j, true
	}
	switch ext := path.Ext(base); ext {
	case ".js", ".jsx", ".mjs", ".cjs":
		stem := strings.TrimSuffix(base, ext)
		for _, e := range []string{".ts", ".tsx", ".mts", ".cts"} {
			if j, ok := try(stem + e); ok {
				return j, true
			}
		}
	}
	for _, e := range jsExts {
		if j, ok := try(base + e); ok {
			return j, true
		}
	}
	for _, e := range jsExts {
		if j, ok := try(joinPath(base, "index"+e)); ok {
			return j, true
		}
	}
	return 0, false
}

// pyModule returns the file of the Python module at dir/mod (mod '/'-separated):
// mod.py, mod.pyi or mod/__init__.py.
func (r *resolver) pyModule(p string) (int32, bool) {
	for _, c := range []string{p + ".py", p + ".pyi", joinPath(p, "__init__.py")} {
		if j, ok := r.ix.byPath[c]; ok {
			return j, true
		}
	}
	return 0, false
}

// pyImport resolves "from .x import y" relative to the importer's package and "import
// a.b" / "from a.b import c" against the importer's directory and each of its ancestors
// (the first that has the module wins), which covers both a repository-root package and
// a src/ layout. Imported names that are submodules resolve to their files too.
func (r *resolver) pyImport(importer string, ref importRef) []int32 {
	var out []int32
	mod := strings.ReplaceAll(ref.spec, ".", "/")
	resolveAt := func(base string) bool {
		found := false
		modPath := joinPath(base, mod)
		if mod != "" {
			if j, ok := r.pyModule(modPath); ok {
				out = append(out, j)
				found = true
			}
		}
		for _, n := range ref.names {
			if j, ok := r.pyModule(joinPath(modPath, n)); ok {
				out = append(out, j)
				found = true
			}
		}
		return found
	}
	if ref.level > 0 {
		base := dirOf(importer)
		for k := 1; k < ref.level; k++ {
			if base == "" {
				return nil
			}
			base = dirOf(base)
		}
		resolveAt(base)
		return out
	}
	for base := dirOf(importer); ; base = dirOf(base) {
		if resolveAt(base) || base == "" {
			break
		}
	}
	return out
}
