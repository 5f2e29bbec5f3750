package depgraph

import (
	"path"
	"regexp"
	"sort"
	"strings"
)

// pyImport is one import statement: the leading dots of a relative import,
// the module name and, for "from" imports, the imported names.
type pyImport struct {
	level  int
	module string
	names  []string
	from   bool
}

var (
	pyImportRe = regexp.MustCompile(`^import\s+(.+)$`)
	pyFromRe   = regexp.MustCompile(`^from\s+(\.*)\s*([A-Za-z_][\w.]*)?\s+import\s*(.+)$`)
	pyNameRe   = regexp.MustCompile(`^[A-Za-z_][\w.]*$`)
)

// pyStatements splits Python source into logical statements: comments and
// string literals are dropped, backslash continuations and bracketed
// continuation lines are joined, and ';' separates statements.
func pyStatements(src string) []string {
	var stmts []string
	var cur strings.Builder
	depth := 0
	flush := func() {
		if s := strings.TrimSpace(cur.String()); s != "" {
			stmts = append(stmts, s)
		}
		cur.Reset()
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		switch {
		case c == '#':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			i-- // let the newline be handled
		case c == '\'' || c == '"':
			triple := strings.HasPrefix(src[i:], strings.Repeat(string(c), 3))
			q := string(c)
			if triple {
				q = strings.Repeat(q, 3)
			}
			j := i + len(q)
			for j < len(src) {
				if src[j] == '\\' {
					j += 2
					continue
				}
				if strings.HasPrefix(src[j:], q) {
					j += len(q)
					break
				}
				if !triple && src[j] == '\n' {
					break
				}
				j++
			}
			cur.WriteString(`""`) // a placeholder keeps statements non-import
			i = j - 1
		case c == '\\' && i+1 < len(src) && src[i+1] == '\n':
			cur.WriteByte(' ')
			i++
		case c == '\\' && i+2 < len(src) && src[i+1] == '\r' && src[i+2] == '\n':
			cur.WriteByte(' ')
			i += 2
		case c == '(' || c == '[' || c == '{':
			depth++
			cur.WriteByte(c)
		case c == ')' || c == ']' || c == '}':
			if depth > 0 {
				depth--
			}
			cur.WriteByte(c)
		case c == '\n':
			if depth > 0 {
				cur.WriteByte(' ')
			} else {
				flush()
			}
		case c == ';' && depth == 0:
			flush()
		default:
			cur.WriteByte(c)
		}
	}
	flush()
	return stmts
}

// pyParseImports returns the import statements of Python source.
func pyParseImports(src string) []pyImport {
	var out []pyImport
	for _, s := range pyStatements(src) {
		s = strings.TrimSpace(s)
		if m := pyImportRe.FindStringSubmatch(s); m != nil {
			for _, part := range strings.Split(m[1], ",") {
				name := strings.Fields(part)
				if len(name) > 0 && pyNameRe.MatchString(name[0]) {
					out = append(out, pyImport{module: name[0]})
				}
			}
			continue
		}
		if m := pyFromRe.FindStringSubmatch(s); m != nil {
			imp := pyImport{level: len(m[1]), module: m[2], from: true}
			list := strings.NewReplacer("(", " ", ")", " ").Replace(m[3])
			for _, part := range strings.Split(list, ",") {
				name := strings.Fields(part)
				if len(name) > 0 && (name[0] == "*" || pyNameRe.MatchString(name[0])) {
					imp.names = append(imp.names, name[0])
				}
			}
			if imp.level > 0 || imp.module != "" {
				out = append(out, imp)
			}
		}
	}
	return out
}

// pyModuleFile finds the file of a dotted module under a root directory.
func pyModuleFile(root, module string, known map[string]bool) (string, bool) {
	rel := strings.ReplaceAll(module, ".", "/")
	for _, c := range []string{path.Join(root, rel+".py"), path.Join(root, rel, "__init__.py")} {
		if known[c] {
			return c, true
		}
	}
	return "", false
}

// pyEdges adds the edges of the Python files. Absolute imports are resolved
// against the importing file's directory when it is not a package, the
// repository root, every directory named src and every directory holding a
// top-level package.
func pyEdges(files []File, plannedOnly map[string]bool, es *edgeSet) {
	known := map[string]bool{}
	for _, f := range files {
		if language(f.Path) == "python" {
			known[f.Path] = true
		}
	}
	for p := range plannedOnly {
		if language(p) == "python" {
			known[p] = true
		}
	}
	rootSet := map[string]bool{}
	for p := range known {
		d := dirOf(p)
		for x := d; x != ""; x = dirOf(x) {
			if path.Base(x) == "src" {
				rootSet[x] = true
			}
		}
		if path.Base(p) == "__init__.py" && d != "" {
			parent := dirOf(d)
			if !known[path.Join(parent, "__init__.py")] {
				rootSet[parent] = true
			}
		}
	}
	delete(rootSet, "")
	roots := []string{""}
	var extra []string
	for r := range rootSet {
		extra = append(extra, r)
	}
	sort.Strings(extra)
	roots = append(roots, extra...)

	for _, f := range files {
		if language(f.Path) != "python" {
			continue
		}
		dir := dirOf(f.Path)
		searchRoots := roots
		if dir != "" && !known[path.Join(dir, "__init__.py")] {
			searchRoots = append([]string{dir}, roots...)
		}
		for _, imp := range pyParseImports(f.Content) {
			if imp.level > 0 {
				base := dir
				for i := 1; i < imp.level; i++ {
					if base == "" {
						base = "\x00" // above the repository: unresolvable
						break
					}
					base = dirOf(base)
				}
				if base == "\x00" {
					continue
				}
				pyResolveFrom(f.Path, base, imp, known, es)
				continue
			}
			for _, r := range searchRoots {
				if pyResolveFrom(f.Path, r, imp, known, es) {
					break
				}
			}
		}
	}
}

// pyResolveFrom resolves imp relative to directory base and adds its edges;
// it reports whether anything resolved.
func pyResolveFrom(from, base string, imp pyImport, known map[string]bool, es *edgeSet) bool {
	found := false
	var modFile string
	var modOK bool
	if imp.module == "" {
		modFile, modOK = path.Join(base, "__init__.py"), known[path.Join(base, "__init__.py")]
	} else {
		modFile, modOK = pyModuleFile(base, imp.module, known)
	}
	if imp.from {
		usedModule := false
		for _, n := range imp.names {
			if n == "*" {
				usedModule = true
				continue
			}
			sub := n
			if imp.module != "" {
				sub = imp.module + "." + n
			}
			if p, ok := pyModuleFile(base, sub, known); ok {
				es.add(from, p)
				found = true
			} else {
				usedModule = true
			}
		}
		if usedModule && modOK {
			es.add(from, modFile)
			found = true
		}
		return found || modOK
	}
	if modOK {
		es.add(from, modFile)
	}
	return modOK
}
