package validate

import (
	"context"
	"fmt"
	"os"
	"path"
	"slices"
	"strings"

	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// exitNotFound is the shell's and the container runtimes' "command not found".
const exitNotFound = 127

// goSteps plans the Go pipeline for every module under root: go build (typecheck), go vet
// and gofmt (lint), go test (test).
func goSteps(ctx context.Context, root string, run Runner) []step {
	mods := goModules(root)
	var unavailable string
	for i := range mods {
		abs, err := goModuleAbs(ctx, run, mods[i].Rel)
		if err != nil {
			unavailable = err.Error()
			break
		}
		mods[i].Abs = abs
	}
	steps := []step{
		{
			kind: sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TYPECHECK,
			name: "go build", dirs: mods,
			// -o /dev/null: a module whose packages are one main package would otherwise get
			// its executable written into the workspace (and into the diff and the PR).
			argv: func(ProjectDir) []string { return []string{"go", "build", "-o", os.DevNull, "./..."} },
			parse: func(d ProjectDir, _ int, stdout, stderr []byte) []*typev1.Diagnostic {
				return ParseGoBuild(concat(stdout, stderr), "go build", d)
			},
		},
		{
			kind: sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_LINT,
			name: "go vet", dirs: mods,
			argv: func(ProjectDir) []string { return []string{"go", "vet", "-json", "./..."} },
			parse: func(d ProjectDir, _ int, stdout, stderr []byte) []*typev1.Diagnostic {
				return ParseGoVetJSON(concat(stdout, stderr), d)
			},
		},
		{
			// The contract has no FORMAT kind yet: formatting is reported as a lint step whose
			// command (gofmt) and tool say what it is.
			kind: sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_LINT,
			name: "gofmt", dirs: mods,
			argv: func(ProjectDir) []string { return []string{"gofmt", "-l", "."} },
			parse: func(d ProjectDir, _ int, stdout, stderr []byte) []*typev1.Diagnostic {
				diags := append(ParseGofmtList(stdout, d), ParseGoBuild(stderr, "gofmt", d)...)
				return ownFiles(diags, d, mods)
			},
			// An unformatted file is a WARNING, which by the contract's Severity blocks
			// nothing: the step passes and lists the files (gofmt -w fixes them without
			// review). A syntax error gofmt reports is an ERROR and fails it. gofmt exits 2
			// for a syntax error in testdata too, which the go command ignores, so the
			// status comes from what is left after ownFiles, not from the exit code, except
			// the shell's "command not found": a gofmt that did not run checked nothing.
			failed: func(exit int, diags []*typev1.Diagnostic) bool { return hasErrors(diags) || exit == exitNotFound },
		},
		{
			kind: sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TEST,
			name: "go test", dirs: mods,
			// Run even when go build failed: go test builds each package on its own, runs
			// the ones that compile and reports the others as build failures, so one
			// round gives the fix loop every finding. -fullpath: test log lines carry the
			// whole file name, so they resolve to a workspace path; -vet=off: the lint
			// step already ran vet.
			argv: func(ProjectDir) []string { return []string{"go", "test", "-json", "-fullpath", "-vet=off", "./..."} },
			parse: func(d ProjectDir, _ int, stdout, stderr []byte) []*typev1.Diagnostic {
				return ParseGoTestJSON(concat(stdout, stderr), d)
			},
		},
	}
	if unavailable != "" {
		for i := range steps {
			steps[i].unavailable = unavailable
		}
	}
	return steps
}

// GoModuleQuery is the command goModuleAbs runs: a Runner may answer it from a memo (the
// answer depends only on the go.mod and go.work files, and the sandbox's environment).
var GoModuleQuery = []string{"go", "env", "GOMOD"}

// goModuleAbs asks the go command where the module in rel is, as the sandbox sees it.
func goModuleAbs(ctx context.Context, run Runner, rel string) (string, error) {
	exit, stdout, stderr, err := run(ctx, rel, slices.Clone(GoModuleQuery))
	noGo := envLack{what: "go", why: programWhy("go")}.message()
	if err != nil {
		return "", fmt.Errorf("%s (go toolchain not available: %w)", noGo, err)
	}
	if exit == exitNotFound {
		return "", fmt.Errorf("%s (go toolchain not available: %s)", noGo, strings.TrimSpace(string(stderr)))
	}
	gomod := strings.TrimSpace(string(stdout))
	if exit != 0 || !strings.HasSuffix(gomod, "/go.mod") {
		return "", fmt.Errorf("go env GOMOD in %s answered %q (exit %d): %s", rel, gomod, exit, strings.TrimSpace(string(stderr)))
	}
	return path.Dir(gomod), nil
}

// ownFiles keeps the diagnostics of files the go command builds in module d: not in a
// nested module (validated on its own), testdata, vendor, or a directory starting with
// "." or "_".
func ownFiles(diags []*typev1.Diagnostic, d ProjectDir, mods []ProjectDir) []*typev1.Diagnostic {
	out := diags[:0]
	for _, diag := range diags {
		if inModule(diag.Path, d, mods) {
			out = append(out, diag)
		}
	}
	return out
}

func inModule(p string, d ProjectDir, mods []ProjectDir) bool {
	rel := relTo(p, d.Rel)
	if rel == "" {
		return false
	}
	parts := strings.Split(rel, "/")
	for _, part := range parts[:len(parts)-1] {
		if skippedDir(part) {
			return false
		}
	}
	for _, m := range mods {
		if m.Rel != d.Rel && relTo(m.Rel, d.Rel) != "" && relTo(p, m.Rel) != "" {
			return false // in a module nested inside d
		}
	}
	return true
}

// relTo returns p relative to dir when p is inside dir, else "".
func relTo(p, dir string) string {
	dir = cleanRel(dir)
	if dir == "." {
		if path.IsAbs(p) || p == ".." || strings.HasPrefix(p, "../") {
			return ""
		}
		return p
	}
	rest, ok := strings.CutPrefix(p, dir+"/")
	if !ok {
		return ""
	}
	return rest
}

func concat(a, b []byte) []byte {
	out := make([]byte, 0, len(a)+len(b)+1)
	out = append(out, a...)
	if len(a) > 0 && a[len(a)-1] != '\n' && len(b) > 0 {
		out = append(out, '\n')
	}
	return append(out, b...)
}
