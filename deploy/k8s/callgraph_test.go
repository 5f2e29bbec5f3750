package k8s

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// sourceCallGraph derives who calls whom from the services' code and returns, for each
// service, its callers:
//   - service S calls P when a non-test Go file under services/S builds a client of P's
//     contract (a New…Client function of pkg/gen/thefold/P/v1) or dials P by name
//     (d.Conn(ctx, "P"));
//   - every service calls the names pkg/platform dials for all of them (followIdentity:
//     the gateway, for token revocations and API-key exchange);
//   - the gateway calls every service: its REST edge dials each service of pkg/contracts.All
//     through edge.Services() (services/gateway/main.go), not by name.
func sourceCallGraph(t *testing.T) map[string][]string {
	t.Helper()
	g := callGraphOnce()
	if g.skip != "" {
		t.Skip(g.skip)
	}
	if g.err != "" {
		t.Fatal(g.err)
	}
	for _, line := range g.log {
		t.Log(line)
	}
	return g.callers
}

type callGraph struct {
	callers   map[string][]string
	log       []string
	skip, err string
}

// callGraphOnce scans the source once per test binary.
var callGraphOnce = sync.OnceValue(func() (g callGraph) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.work")); err != nil {
		return callGraph{skip: fmt.Sprintf("not in the source tree (no go.work at %s): the caller graph comes from the services' code", root)}
	}
	calls := map[string]map[string]bool{} // caller -> callees
	add := func(from, to string) {
		if from == to || !isService(to) {
			return
		}
		if calls[from] == nil {
			calls[from] = map[string]bool{}
		}
		calls[from][to] = true
	}
	for _, svc := range Services {
		callees, err := dialled(filepath.Join(root, "services", svc))
		if err != nil {
			return callGraph{err: err.Error()}
		}
		for _, callee := range callees {
			add(svc, callee)
		}
	}
	platform, err := dialled(filepath.Join(root, "pkg", "platform"))
	if err != nil {
		return callGraph{err: err.Error()}
	}
	if !slices.Contains(platform, "gateway") {
		return callGraph{err: "pkg/platform no longer dials the gateway by name (followIdentity): check the graph's rule for it"}
	}
	for _, svc := range Services {
		for _, callee := range platform {
			add(svc, callee)
		}
		add("gateway", svc)
	}
	callers := map[string][]string{}
	edges := 0
	for from, to := range calls {
		for callee := range to {
			callers[callee] = append(callers[callee], from)
			edges++
		}
	}
	for _, svc := range slices.Sorted(maps.Keys(calls)) {
		g.log = append(g.log, fmt.Sprintf("%s -> %v", svc, slices.Sorted(maps.Keys(calls[svc]))))
	}
	// The agent's calls are the heart of the task loop; their absence means the scan broke.
	if !calls["agent"]["tasks"] || !calls["agent"]["builder"] || edges < 20 {
		return callGraph{err: fmt.Sprintf("the scan of services/ found %d calls, without agent -> tasks and builder: it is broken", edges)}
	}
	g.callers = callers
	return g
})

// dialled are the services the non-test Go files under dir call: the contracts whose
// clients they build, and the names they dial through platform.Deps.Conn.
func dialled(dir string) ([]string, error) {
	const gen = "github.com/thefold/thefold/pkg/gen/thefold/"
	found := map[string]bool{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "testdata" || strings.HasPrefix(d.Name(), ".")) {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		contracts := map[string]string{} // local package name -> service
		for _, imp := range f.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			rest, ok := strings.CutPrefix(p, gen)
			svc, version, _ := strings.Cut(rest, "/")
			if !ok || version != "v1" {
				continue
			}
			name := svc + "v1"
			if imp.Name != nil {
				name = imp.Name.Name
			}
			contracts[name] = svc
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); ok && contracts[pkg.Name] != "" &&
				strings.HasPrefix(sel.Sel.Name, "New") && strings.HasSuffix(sel.Sel.Name, "Client") {
				found[contracts[pkg.Name]] = true
			}
			if sel.Sel.Name == "Conn" && len(call.Args) >= 2 {
				if lit, ok := call.Args[1].(*ast.BasicLit); ok && lit.Kind == token.STRING {
					name, _ := strconv.Unquote(lit.Value)
					found[name] = true
				}
			}
			return true
		})
		return nil
	})
	return slices.Sorted(maps.Keys(found)), err
}
