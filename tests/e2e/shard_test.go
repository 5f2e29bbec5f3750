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

// The suite may run as several processes at once, each with its own mesh and database
// (THEFOLD_E2E_SHARD, scripts/test-e2e.sh): "serial" runs the tests that need the mesh to
// themselves, one after the other, or half of them each as "serial-1" and "serial-2";
// "parallel" runs the rest, side by side. The serial ones mostly wait (for a lease to
// expire, a service to come back), so the shards overlap well. Unset, one process runs
// every test, the serial ones first.
var shard = os.Getenv("THEFOLD_E2E_SHARD")

// secondSerial are the tests of the "serial-2" shard; the other alone tests run in
// "serial-1". The two halves take about as long (2026-11-30: 64 + 25 + 21 + 11 + 5 s and
// the GetTask benchmark against 44 + 31 + 22 + 19 + 15 s and eleven short ones).
var secondSerial = map[string]bool{
	"TestReplicasShareTheWorkAndSurviveKills":        true,
	"TestBuildResumesAfterTheBuilderIsKilled":        true,
	"TestAgentResumesAfterTheAgentIsKilled":          true,
	"TestChatReplyResumesAfterTheAgentIsKilled":      true,
	"TestEventSourceReconnectsAcrossAGatewayRestart": true,
}

// parallel marks a test that shares the mesh with others: it runs in parallel with them.
func parallel(t *testing.T) {
	t.Helper()
	if strings.HasPrefix(shard, "serial") {
		t.Skip("runs in the parallel shard")
	}
	t.Parallel()
}

// alone marks a test that needs the mesh to itself: it stops or restarts a service, or
// counts what the whole mesh did. Such tests run one after the other, before the parallel
// ones start.
func alone(t *testing.T) {
	t.Helper()
	switch {
	case shard == "parallel":
		t.Skip("runs in the serial shard")
	case shard == "serial-1" && secondSerial[t.Name()]:
		t.Skip("runs in the serial-2 shard")
	case shard == "serial-2" && !secondSerial[t.Name()]:
		t.Skip("runs in the serial-1 shard")
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
	alones := map[string]bool{}
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
			call := shardCall(fn)
			if call == "" {
				t.Errorf("%s (%s): its first statement must be parallel(t) or alone(t)", fn.Name.Name, fset.Position(fn.Pos()))
			}
			alones[fn.Name.Name] = call == "alone"
		}
	}
	if checked < 50 {
		t.Fatalf("checked %d tests: the sources were not found", checked)
	}
	// A renamed or moved test would otherwise drop out of both serial halves' split silently.
	for name := range secondSerial {
		if !alones[name] {
			t.Errorf("secondSerial names %s, which is not a test that calls alone(t)", name)
		}
	}
}

// shardCall is "parallel" or "alone" when fn's first statement is that call, else "".
func shardCall(fn *ast.FuncDecl) string {
	if fn.Body == nil || len(fn.Body.List) == 0 {
		return ""
	}
	es, ok := fn.Body.List[0].(*ast.ExprStmt)
	if !ok {
		return ""
	}
	call, ok := es.X.(*ast.CallExpr)
	if !ok {
		return ""
	}
	if id, ok := call.Fun.(*ast.Ident); ok && (id.Name == "parallel" || id.Name == "alone") {
		return id.Name
	}
	return ""
}
