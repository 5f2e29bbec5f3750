package validate

import (
	"context"
	"strings"

	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// compileScript checks Python files the way py_compile does, printing each syntax error in
// the same format, but without writing __pycache__ into the workspace (which would show
// up in its diff) and without stopping at the first bad file.
const compileScript = `import sys, traceback
bad = 0
for f in sys.argv[1:]:
    try:
        with open(f, "rb") as fh:
            compile(fh.read(), f, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as e:
        bad = 1
        sys.stderr.write("".join(traceback.format_exception_only(type(e), e)))
sys.exit(bad)
`

// pythonProbe prints the working directory and, on a second line, "pytest" when pytest is
// installed (found, not imported: the import is slow, and a broken install shows in the
// pytest step's own output).
const pythonProbe = `import importlib.util, os, sys
sys.stdout.write(os.getcwd() + "\n" + ("pytest" if importlib.util.find_spec("pytest") else "") + "\n")
`

// pytestNoTests is pytest's exit code when it collected no tests: nothing failed.
const pytestNoTests = 5

// pythonSteps plans the Python pipeline: files compiled (typecheck), pytest (test) when it
// is importable.
func pythonSteps(ctx context.Context, run Runner, files []string) []step {
	dir := ProjectDir{Rel: "."}
	missing := ""
	// One probe for the workspace's path and whether pytest is installed: every command in a
	// sandbox costs its backend's round trip, and importing pytest alone takes a third of a
	// second, so the probe only looks pytest up.
	exit, stdout, _, err := run(ctx, ".", []string{"python3", "-c", pythonProbe})
	cwd, pytest, _ := strings.Cut(string(stdout), "\n")
	if err != nil || exit == exitNotFound {
		missing = "python3 not installed"
	} else {
		dir.Abs = strings.TrimSpace(cwd)
	}
	noPytest := missing
	if missing == "" && (exit != 0 || strings.TrimSpace(pytest) != "pytest") {
		noPytest = "pytest is not installed"
	}
	parse := func(d ProjectDir, _ int, stdout, stderr []byte) []*typev1.Diagnostic {
		return ParsePython(concat(stdout, stderr), d)
	}
	return []step{
		{
			kind: sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TYPECHECK,
			name: "python compile", dirs: []ProjectDir{dir},
			skip: firstNonEmpty(missing, emptyReason(nonEmpty(files), "no Python files")),
			argv: func(ProjectDir) []string {
				return append([]string{"python3", "-B", "-c", compileScript}, files...)
			},
			parse: parse,
		},
		{
			kind: sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TEST,
			name: "pytest", dirs: []ProjectDir{dir}, skip: noPytest,
			// -B and no cacheprovider: the run leaves no __pycache__ or .pytest_cache in the
			// workspace; --tb=line gives one "file:line: error" per failure.
			argv: func(ProjectDir) []string {
				return []string{"python3", "-B", "-m", "pytest", "-q", "--tb=line", "-p", "no:cacheprovider"}
			},
			parse: parse,
			failed: func(exit int, diags []*typev1.Diagnostic) bool {
				return (exit != 0 && exit != pytestNoTests) || hasErrors(diags)
			},
		},
	}
}

// nonEmpty turns a file list into the dirs-shaped argument emptyReason takes.
func nonEmpty(files []string) []ProjectDir {
	if len(files) == 0 {
		return nil
	}
	return []ProjectDir{{}}
}
