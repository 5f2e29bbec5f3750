package validate

import (
	"context"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"github.com/thefold/thefold/pkg/errs"
)

func TestDetect(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		files map[string]string
		want  []Language
	}{
		{"go at the root", map[string]string{"go.mod": "module x\n"}, []Language{Go}},
		{"go two levels down", map[string]string{"services/api/go.mod": "module x\n"}, []Language{Go}},
		{"go.mod in testdata does not count", map[string]string{"testdata/go.mod": "module x\n"}, nil},
		{"go.mod in node_modules does not count", map[string]string{"node_modules/x/go.mod": "module x\n"}, nil},
		{"typescript", map[string]string{"package.json": "{}", "tsconfig.json": "{}"}, []Language{TypeScript}},
		{"javascript", map[string]string{"web/package.json": "{}"}, []Language{JavaScript}},
		{"python by file", map[string]string{"tool/run.py": "print(1)\n"}, []Language{Python}},
		{"python by pyproject", map[string]string{"pyproject.toml": ""}, []Language{Python}},
		{"python in a venv does not count", map[string]string{".venv/lib/x.py": ""}, nil},
		{"everything", map[string]string{"go.mod": "", "web/package.json": "{}", "web/tsconfig.json": "{}", "x.py": ""}, []Language{Go, TypeScript, Python}},
		{"nothing", map[string]string{"README.md": "hi"}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := Detect(writeTree(t, c.files)); !slices.Equal(got, c.want) {
				t.Errorf("Detect = %v, want %v", got, c.want)
			}
		})
	}
}

func TestValidateNothingToValidate(t *testing.T) {
	t.Parallel()
	root := writeTree(t, map[string]string{"README.md": "hi"})
	_, err := Validate(context.Background(), root, execRunner(root, ""), Options{})
	if !errors.Is(err, errs.ErrFailedPrecondition) {
		t.Errorf("error %v, want ErrFailedPrecondition", err)
	}
}

func TestValidateNode(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("npm"); err != nil {
		t.Skip("node and npm are not installed on this machine")
	}
	root := writeTree(t, map[string]string{
		"tsconfig.json": `{"compilerOptions": {"strict": true}}`,
		"package.json":  `{"name": "x", "version": "1.0.0", "scripts": {"test": "node -e \"process.exit(3)\""}}`,
		"src/a.ts":      "export const a: number = 1;\n",
	})
	resp, err := Validate(context.Background(), root, execRunner(root, ""), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Toolchain != "node" || resp.Passed {
		t.Errorf("toolchain %q passed %v: want node, not passed (the test script fails)", resp.Toolchain, resp.Passed)
	}
	want := map[string]struct {
		status  string
		message string
	}{
		"npx --no-install tsc":    {"STEP_STATUS_SKIPPED", "typescript is not installed in node_modules"},
		"npx --no-install eslint": {"STEP_STATUS_SKIPPED", "eslint is not installed in node_modules"},
		"npm test":                {"STEP_STATUS_FAILED", ""},
	}
	if len(resp.Steps) != len(want) {
		t.Fatalf("steps %v", stepSummary(resp.Steps))
	}
	for cmd, w := range want {
		s := findStep(t, resp.Steps, cmd)
		if s.Status.String() != w.status || !strings.Contains(s.Message, w.message) {
			t.Errorf("%s: %s %q, want %s %q", cmd, s.Status, s.Message, w.status, w.message)
		}
	}
	if s := findStep(t, resp.Steps, "npm test"); s.ExitCode == 0 || !strings.Contains(s.Output, "process.exit(3)") {
		t.Errorf("npm test: exit %d output %q: want the script's failure", s.ExitCode, s.Output)
	}
}

func TestValidateNodeMissingIsSkipped(t *testing.T) {
	t.Parallel()
	root := writeTree(t, map[string]string{
		"tsconfig.json": "{}",
		"package.json":  `{"scripts": {"test": "exit 1"}}`,
	})
	// A PATH with nothing on it: node is not installed, as in a sandbox image without it.
	resp, err := Validate(context.Background(), root, execRunner(root, t.TempDir()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Passed {
		t.Errorf("Passed = false: a missing node must skip, never fail")
	}
	for _, s := range resp.Steps {
		if s.Status != skipped {
			t.Errorf("%q: %s %q, want SKIPPED", strings.Join(s.Command, " "), s.Status, s.Message)
		}
	}
	if s := findStep(t, resp.Steps, "npm test"); s.Message != "node not installed" {
		t.Errorf("npm test message %q, want %q", s.Message, "node not installed")
	}
}

func TestValidatePython(t *testing.T) {
	t.Parallel()
	requirePython(t)
	root := writeTree(t, map[string]string{
		"ok.py":      "x = 1\n",
		"pkg/bad.py": "def f(:\n    pass\n",
	})
	resp, err := Validate(context.Background(), root, execRunner(root, ""), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Passed || resp.Toolchain != "python" {
		t.Errorf("passed %v toolchain %q: want not passed, python", resp.Passed, resp.Toolchain)
	}
	compile := findStep(t, resp.Steps, "python3 -B -c")
	if compile.Status != failed || !hasDiag(compile.Diagnostics, "pkg/bad.py", 1, "SyntaxError: invalid syntax") {
		t.Errorf("compile: %s %v: want FAILED with pkg/bad.py:1", compile.Status, diagStrings(compile.Diagnostics))
	}
	pytest := findStep(t, resp.Steps, "python3 -B -m pytest")
	if exec.Command("python3", "-c", "import pytest").Run() != nil {
		if pytest.Status != skipped || pytest.Message != "pytest is not installed" {
			t.Errorf("pytest: %s %q, want SKIPPED: pytest is not installed", pytest.Status, pytest.Message)
		}
	} else if pytest.Status == skipped {
		t.Errorf("pytest is importable here but the step was skipped: %q", pytest.Message)
	}

	noPython := writeTree(t, map[string]string{"a.py": "x = 1\n"})
	resp, err = Validate(context.Background(), noPython, execRunner(noPython, t.TempDir()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range resp.Steps {
		if s.Status != skipped || s.Message != "python3 not installed" {
			t.Errorf("without python3: %s %q, want SKIPPED: python3 not installed", s.Status, s.Message)
		}
	}
}
