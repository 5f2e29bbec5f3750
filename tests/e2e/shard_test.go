package e2e

import (
	"go/ast"
	"go/parser"
	gotoken "go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The suite may run as two processes at once, each with its own mesh and database
// (THEFOLD_E2E_SHARD, scripts/test-e2e.sh): "serial" runs the tests that need the mesh to
// themselves, one after the other; "parallel" runs the rest, side by side. The serial ones
// mostly wait (for a lease to expire, a service to come back), so the two overlap well.
// Unset, one process runs every test, the serial ones first.
var shard = os.Getenv("THEFOLD_E2E_SHARD")

// parallel marks a test that shares the mesh with others: it runs in parallel with them.
func parallel(t *testing.T) {
	t.Helper()
	if shard == "serial" {
		t.Skip("runs in the parallel shard")
	}
	t.Parallel()
}

// alone marks a test that needs the mesh to itself: it stops or restarts a service, or
// counts what the whole mesh did. Such tests run one after the other, before the parallel
// ones start.
func alone(t *testing.T) {
	t.Helper()
	if shard == "parallel" {
		t.Skip("runs in the serial shard")
	}
}

// TestEveryTestChoosesItsShard: each test's first statement is parallel(t) or alone(t),
// so that the two shards together run every test exactly once.
func TestEveryTestChoosesItsShard(t *testing.T) {
	t.Parallel() // (in both shards: it only reads the sources)
	files, err := filepath.Glob("*_test.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := gotoken.NewFileSet()
	checked := 0
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Recv != nil || !strings.HasPrefix(fn.Name.Name, "Test") || fn.Name.Name == "TestMain" ||
				fn.Name.Name == "TestEveryTestChoosesItsShard" {
				continue
			}
			checked++
			if !startsWithShardCall(fn) {
				t.Errorf("%s (%s): its first statement must be parallel(t) or alone(t)", fn.Name.Name, fset.Position(fn.Pos()))
			}
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d tests: the sources were not found", checked)
	}
}

func startsWithShardCall(fn *ast.FuncDecl) bool {
	if fn.Body == nil || len(fn.Body.List) == 0 {
		return false
	}
	es, ok := fn.Body.List[0].(*ast.ExprStmt)
	if !ok {
		return false
	}
	call, ok := es.X.(*ast.CallExpr)
	if !ok {
		return false
	}
	id, ok := call.Fun.(*ast.Ident)
	return ok && (id.Name == "parallel" || id.Name == "alone")
}
