package platform_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// globalLogFuncs are the package-level functions of the standard loggers that write to or
// change the process-wide logger. Services get a *slog.Logger passed in instead: a global
// one is shared state that tests running side by side overwrite, and a record written
// through it lacks the service name and request ids.
var globalLogFuncs = map[string]map[string]bool{
	"log/slog": set("SetDefault", "Default", "SetLogLoggerLevel", "Debug", "DebugContext", "Info",
		"InfoContext", "Warn", "WarnContext", "Error", "ErrorContext", "Log", "LogAttrs"),
	"log": set("SetOutput", "SetFlags", "SetPrefix", "Default", "Print", "Printf", "Println",
		"Fatal", "Fatalf", "Fatalln", "Panic", "Panicf", "Panicln", "Output", "Writer"),
	"google.golang.org/grpc/grpclog": set("SetLoggerV2", "SetLogger"),
	"go.opentelemetry.io/otel":       set("SetLogger"),
}

func set(names ...string) map[string]bool {
	m := map[string]bool{}
	for _, n := range names {
		m[n] = true
	}
	return m
}

// TestNoGlobalLoggers parses every non-test, non-generated Go file of the source tree and
// fails on a use of a global logger.
func TestNoGlobalLoggers(t *testing.T) {
	t.Parallel()
	root := sourceRoot(t)
	fset := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir(root, func(path string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if e.IsDir() {
			if rel == filepath.Join("pkg", "gen") || strings.HasPrefix(e.Name(), ".") || e.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		imports := map[string]string{} // local name → import path
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			name := p[strings.LastIndex(p, "/")+1:]
			if imp.Name != nil {
				name = imp.Name.Name
			}
			imports[name] = p
		}
		ast.Inspect(f, func(n ast.Node) bool {
			sel, ok := n.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			pkg, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			if funcs := globalLogFuncs[imports[pkg.Name]]; funcs[sel.Sel.Name] {
				t.Errorf("%s: %s.%s uses a global logger; pass a *slog.Logger instead",
					fset.Position(sel.Pos()), imports[pkg.Name], sel.Sel.Name)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 20 {
		t.Fatalf("only %d files checked under %s; is the tree there?", checked, root)
	}
}

// sourceRoot is the directory holding go.work above the test's directory.
func sourceRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skip("no go.work above the package: not in a source tree")
		}
		dir = parent
	}
}
