package validate

import (
	"context"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/thefold/thefold/pkg/errs"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// goListFormat prints one package per line: import path, directory, and every import
// (the test files' too, so a package whose tests use the changed one counts as a
// dependent).
const goListFormat = `{{.ImportPath}}{{"\t"}}{{.Dir}}{{"\t"}}{{join .Imports " "}} {{join .TestImports " "}} {{join .XTestImports " "}}`

type goPackage struct {
	importPath string
	dir        string // workspace-relative
	imports    []string
}

// goIncrementalSteps plans the checks for files (workspace-relative) of the module in
// modRel: gofmt on the files, go vet of their packages, go build of their packages and of
// every package of the module that imports them, directly or through others. It returns
// the dependents' import paths too.
func goIncrementalSteps(ctx context.Context, run Runner, modRel string, files []string) ([]step, []string, error) {
	abs, err := goModuleAbs(ctx, run, modRel)
	if err != nil {
		return nil, nil, fmt.Errorf("module %s: %v: %w", modRel, err, errs.ErrFailedPrecondition)
	}
	mod := ProjectDir{Rel: modRel, Abs: abs}
	pkgs, err := goListPackages(ctx, run, mod)
	if err != nil {
		return nil, nil, err
	}
	mod.Module = modulePathOf(pkgs, modRel)
	var targets []string // import paths of the files' packages
	for _, f := range files {
		dir := path.Dir(f)
		for _, p := range pkgs {
			if p.dir == dir && !slices.Contains(targets, p.importPath) {
				targets = append(targets, p.importPath)
			}
		}
	}
	dependents := reverseDeps(pkgs, targets)
	pattern := func(importPaths []string) []string {
		var out []string
		for _, p := range pkgs {
			if slices.Contains(importPaths, p.importPath) {
				rel := relTo(p.dir, modRel)
				if rel == "" || rel == "." {
					out = append(out, ".")
				} else {
					out = append(out, "./"+rel)
				}
			}
		}
		return out
	}
	var relFiles []string
	for _, f := range files {
		relFiles = append(relFiles, relTo(f, modRel))
	}
	own := pattern(targets)
	if len(own) == 0 {
		// A file in a directory go list does not see as a package (e.g. build-constrained
		// away): vet and build its directory anyway so the toolchain says why.
		for _, f := range relFiles {
			if d := "./" + path.Dir(f); !slices.Contains(own, d) {
				own = append(own, d)
			}
		}
	}
	build := append(slices.Clone(own), pattern(dependents)...)
	dirs := []ProjectDir{mod}
	steps := []step{
		{
			kind: sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_LINT,
			name: "gofmt", dirs: dirs,
			argv: func(ProjectDir) []string { return append([]string{"gofmt", "-l"}, relFiles...) },
			parse: func(d ProjectDir, _ int, stdout, stderr []byte) []*typev1.Diagnostic {
				return append(ParseGofmtList(stdout, d), ParseGoBuild(stderr, "gofmt", d)...)
			},
			// As in Validate: unformatted is a WARNING and does not fail the step.
			failed: func(exit int, diags []*typev1.Diagnostic) bool { return exit != 0 || hasErrors(diags) },
		},
		{
			kind: sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TYPECHECK,
			name: "go build", dirs: dirs,
			argv: func(ProjectDir) []string { return append([]string{"go", "build", "-o", os.DevNull}, build...) },
			parse: func(d ProjectDir, _ int, stdout, stderr []byte) []*typev1.Diagnostic {
				return ParseGoBuild(concat(stdout, stderr), "go build", d)
			},
		},
		{
			// vet also type-checks the packages' test files, which go build leaves out.
			kind: sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_LINT,
			name: "go vet", dirs: dirs,
			argv: func(ProjectDir) []string { return append([]string{"go", "vet", "-json"}, own...) },
			parse: func(d ProjectDir, _ int, stdout, stderr []byte) []*typev1.Diagnostic {
				return ParseGoVetJSON(concat(stdout, stderr), d)
			},
		},
	}
	return steps, dependents, nil
}

// goListPackages lists the module's packages with their imports; -e keeps broken packages
// (the ones being fixed) in the list.
func goListPackages(ctx context.Context, run Runner, mod ProjectDir) ([]goPackage, error) {
	argv := []string{"go", "list", "-e", "-f", goListFormat, "./..."}
	exit, stdout, stderr, err := run(ctx, mod.Rel, argv)
	if err != nil {
		return nil, fmt.Errorf("go list in %s: %w", mod.Rel, err)
	}
	if exit != 0 && len(stdout) == 0 {
		return nil, fmt.Errorf("go list in %s exited with %d: %s: %w", mod.Rel, exit, strings.TrimSpace(string(stderr)), errs.ErrFailedPrecondition)
	}
	var pkgs []goPackage
	for _, line := range strings.Split(string(stdout), "\n") {
		parts := strings.SplitN(line, "\t", 3)
		if len(parts) != 3 {
			continue
		}
		pkgs = append(pkgs, goPackage{
			importPath: parts[0],
			dir:        mod.Path(parts[1]),
			imports:    strings.Fields(parts[2]),
		})
	}
	return pkgs, nil
}

// modulePathOf infers the module path from its packages: a package in directory d of the
// module (relative to it) has the import path module + "/" + d. "" when no package tells.
func modulePathOf(pkgs []goPackage, modRel string) string {
	for _, p := range pkgs {
		rel := relTo(p.dir, modRel)
		if rel == "" && p.dir == cleanRel(modRel) {
			rel = "."
		}
		switch {
		case rel == ".":
			return p.importPath
		case rel != "":
			if m, ok := strings.CutSuffix(p.importPath, "/"+rel); ok {
				return m
			}
		}
	}
	return ""
}

// reverseDeps returns, sorted, the packages that import one of targets directly or through
// other packages of the list; targets themselves are left out.
func reverseDeps(pkgs []goPackage, targets []string) []string {
	importers := map[string][]string{}
	for _, p := range pkgs {
		for _, imp := range p.imports {
			importers[imp] = append(importers[imp], p.importPath)
		}
	}
	seen := map[string]bool{}
	for _, t := range targets {
		seen[t] = true
	}
	queue := slices.Clone(targets)
	var deps []string
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		for _, imp := range importers[cur] {
			if !seen[imp] {
				seen[imp] = true
				deps = append(deps, imp)
				queue = append(queue, imp)
			}
		}
	}
	slices.Sort(deps)
	return deps
}
