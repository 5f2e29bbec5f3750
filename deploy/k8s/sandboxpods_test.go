package k8s

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// TestSandboxPodNamesMatchTheBackend: the names the manifests use for the sandbox pods (their
// label, managed-by, the deny-all policy's name) are the kubernetes backend's, read from its
// source: a rename there that the manifests miss would leave the sandbox pods unselected by
// their NetworkPolicy, and the service would refuse to start.
func TestSandboxPodNamesMatchTheBackend(t *testing.T) {
	t.Parallel()
	dir := filepath.Join("..", "..", "services", "sandbox", "internal", "backend", "kube")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("not in the source tree (%v): the names come from the backend's code", err)
	}
	consts := map[string]string{}
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return filepath.Ext(fi.Name()) == ".go" }, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pkgs {
		for _, f := range p.Files {
			for _, d := range f.Decls {
				g, ok := d.(*ast.GenDecl)
				if !ok || g.Tok != token.CONST {
					continue
				}
				for _, s := range g.Specs {
					vs := s.(*ast.ValueSpec)
					for i, n := range vs.Names {
						if i < len(vs.Values) {
							if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
								consts[n.Name], _ = strconv.Unquote(lit.Value)
							}
						}
					}
				}
			}
		}
	}
	for name, want := range map[string]string{"LabelSandbox": SandboxPodLabel, "ManagedBy": SandboxManagedBy, "DefaultNetworkPolicy": SandboxNetworkPolicy} {
		if got, ok := consts[name]; !ok || got != want {
			t.Errorf("kube.%s = %q (found %v), the manifests use %q", name, got, ok, want)
		}
	}
}
