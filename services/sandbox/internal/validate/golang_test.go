package validate

import (
	"context"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

const (
	passed  = sandboxv1.StepStatus_STEP_STATUS_PASSED
	failed  = sandboxv1.StepStatus_STEP_STATUS_FAILED
	skipped = sandboxv1.StepStatus_STEP_STATUS_SKIPPED
	errored = sandboxv1.StepStatus_STEP_STATUS_ERROR
)

// brokenModule has, in a module one level down, a type error (broken.go:4), a printf vet
// finding (calc.go:8), an unformatted file and a failing test (calc_test.go:7).
var brokenModule = map[string]string{
	"svc/go.mod": "module example.com/svc\n\ngo 1.22\n",
	"svc/calc/calc.go": `package calc

import "fmt"

func Add(x, y int) int { return x + y }

func Show(s string) {
	fmt.Printf("%d\n", s)
}
`,
	"svc/calc/calc_test.go": `package calc

import "testing"

func TestAdd(t *testing.T) {
	if got := Add(1, 1); got != 3 {
		t.Errorf("Add(1, 1) = %d, want 3", got)
	}
}

func TestFine(t *testing.T) {}
`,
	"svc/calc/ugly.go": "package calc\nfunc  Ugly( ) {}\n",
	"svc/broken/broken.go": `package broken

func F() int {
	var x int = "s"
	return x
}
`,
	// testdata is not part of any package: its syntax error must not count.
	"svc/calc/testdata/bad.go": "package {\n",
}

func TestValidateGoBrokenModule(t *testing.T) {
	t.Parallel()
	requireGo(t)
	root := writeTree(t, brokenModule)
	resp, err := Validate(context.Background(), root, execRunner(root, ""), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Passed {
		t.Errorf("Passed = true for a broken module")
	}
	if resp.Toolchain != "go" {
		t.Errorf("Toolchain = %q, want go", resp.Toolchain)
	}
	cases := []struct {
		command string
		kind    sandboxv1.ValidationStepKind
		status  sandboxv1.StepStatus
		path    string
		line    int32
		substr  string
		tool    string
		rule    string
		sev     typev1.Severity
	}{
		{"go build", sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TYPECHECK, failed, "svc/broken/broken.go", 4, "cannot use \"s\"", "go build", "", typev1.Severity_SEVERITY_ERROR},
		{"go vet", sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_LINT, failed, "svc/calc/calc.go", 8, "format %d has arg s of wrong type string", "go vet", "printf", typev1.Severity_SEVERITY_ERROR},
		{"gofmt", sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_LINT, passed, "svc/calc/ugly.go", 0, "not gofmt-formatted", "gofmt", "gofmt", typev1.Severity_SEVERITY_WARNING},
		{"go test", sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TEST, failed, "svc/calc/calc_test.go", 7, "Add(1, 1) = 2, want 3", "go test", "TestAdd", typev1.Severity_SEVERITY_ERROR},
	}
	for _, c := range cases {
		s := findStep(t, resp.Steps, c.command)
		if s.Kind != c.kind || s.Status != c.status {
			t.Errorf("%s: kind %s status %s, want %s %s (message %q)", c.command, s.Kind, s.Status, c.kind, c.status, s.Message)
		}
		if s.Duration == nil || s.Output == "" && c.command != "gofmt" {
			t.Errorf("%s: duration %v, output %q: want both", c.command, s.Duration, s.Output)
		}
		found := false
		for _, d := range s.Diagnostics {
			if d.Path == c.path && d.Line == c.line && strings.Contains(d.Message, c.substr) {
				found = true
				if d.Tool != c.tool || d.Rule != c.rule || d.Severity != c.sev {
					t.Errorf("%s: %s: want tool %q rule %q severity %s", c.command, diagString(d), c.tool, c.rule, c.sev)
				}
			}
		}
		if !found {
			t.Errorf("%s: no diagnostic %s:%d %q in\n%s", c.command, c.path, c.line, c.substr, strings.Join(diagStrings(s.Diagnostics), "\n"))
		}
		for _, d := range s.Diagnostics {
			if strings.Contains(d.Path, "testdata") || filepath.IsAbs(d.Path) {
				t.Errorf("%s: diagnostic outside the packages or not workspace-relative: %s", c.command, diagString(d))
			}
		}
	}
	// The passing test is no finding.
	for _, d := range findStep(t, resp.Steps, "go test").Diagnostics {
		if d.Rule == "TestFine" {
			t.Errorf("passing test reported: %s", diagString(d))
		}
	}
}

func TestValidateGoCleanModulePasses(t *testing.T) {
	t.Parallel()
	requireGo(t)
	root := writeTree(t, map[string]string{
		"go.mod":        "module example.com/clean\n\ngo 1.22\n",
		"clean.go":      "package clean\n\n// Add adds.\nfunc Add(x, y int) int { return x + y }\n",
		"clean_test.go": "package clean\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal(\"wrong\")\n\t}\n}\n",
	})
	resp, err := Validate(context.Background(), root, execRunner(root, ""), Options{})
	if err != nil {
		t.Fatal(err)
	}
	assertAllPassed(t, resp, 4)
}

// A module that is one main package: validation writes no executable into the workspace
// (it would end up in the diff and the pull request).
func TestValidateGoMainModuleLeavesNoExecutable(t *testing.T) {
	t.Parallel()
	requireGo(t)
	root := writeTree(t, map[string]string{
		"go.mod":  "module example.com/demo\n\ngo 1.22\n",
		"main.go": "package main\n\nfunc main() {}\n",
	})
	resp, err := Validate(context.Background(), root, execRunner(root, ""), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !resp.Passed {
		t.Fatalf("validation failed: %v", resp.Steps)
	}
	inc, err := ValidateIncremental(context.Background(), root, []string{"main.go"}, execRunner(root, ""))
	if err != nil || !inc.Response.Passed {
		t.Fatalf("incremental: %v %v", inc, err)
	}
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if e.Name() != "go.mod" && e.Name() != "main.go" {
			t.Errorf("validation left %s in the workspace", e.Name())
		}
	}
}

// TestValidatePublicModulePasses validates an unmodified public module taken from the module
// cache: real code the pipeline must not find fault with.
func TestValidatePublicModulePasses(t *testing.T) {
	t.Parallel()
	requireGo(t)
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "github.com", "google", "uuid@v1.6.0")
	if _, err := os.Stat(src); err != nil {
		t.Skipf("github.com/google/uuid@v1.6.0 is not in this machine's module cache (%v) and there is no network to fetch it", err)
	}
	root := t.TempDir()
	copyTree(t, src, root)
	resp, err := Validate(context.Background(), root, execRunner(root, ""), Options{})
	if err != nil {
		t.Fatal(err)
	}
	assertAllPassed(t, resp, 4)
	// uuid predates Go 1.19's doc-comment formatting: today's gofmt rewrites dce.go, a
	// true finding that must stay a warning.
	if d := findStep(t, resp.Steps, "gofmt").Diagnostics; !hasDiag(d, "dce.go", 0, "not gofmt-formatted") {
		t.Errorf("gofmt step: want a warning for dce.go, got %v", diagStrings(d))
	}
}

func TestValidateStepsAndFailFast(t *testing.T) {
	t.Parallel()
	requireGo(t)
	root := writeTree(t, brokenModule)
	run := execRunner(root, "")
	resp, err := Validate(context.Background(), root, run, Options{Steps: []sandboxv1.ValidationStepKind{sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TEST}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Steps) != 1 || resp.Steps[0].Kind != sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TEST {
		t.Fatalf("asked for the test step only, got %v", stepSummary(resp.Steps))
	}
	resp, err = Validate(context.Background(), root, run, Options{FailFast: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Steps) != 4 || resp.Steps[0].Status != failed {
		t.Fatalf("steps: %v", stepSummary(resp.Steps))
	}
	for _, s := range resp.Steps[1:] {
		if s.Status != skipped || !strings.Contains(s.Message, "fail_fast") {
			t.Errorf("after a failed build with fail_fast: %s %s %q, want SKIPPED naming fail_fast", s.Kind, s.Status, s.Message)
		}
	}
}

func TestValidateGoMissingToolchainIsError(t *testing.T) {
	t.Parallel()
	root := writeTree(t, map[string]string{"go.mod": "module example.com/x\n\ngo 1.22\n"})
	resp, err := Validate(context.Background(), root, execRunner(root, t.TempDir()), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Passed {
		t.Error("Passed = true without a go command")
	}
	for _, s := range resp.Steps {
		if s.Status != errored || !strings.Contains(s.Message, "go toolchain not available") ||
			!strings.HasPrefix(s.Message, "environment: the sandbox lacks go (the Go toolchain); this is not an error in the code") {
			t.Errorf("%s: %s %q, want ERROR saying the environment lacks the toolchain", s.Kind, s.Status, s.Message)
		}
	}
}

func assertAllPassed(t *testing.T, resp *sandboxv1.ValidateResponse, want int) {
	t.Helper()
	if len(resp.Steps) != want {
		t.Errorf("%d steps, want %d: %v", len(resp.Steps), want, stepSummary(resp.Steps))
	}
	for _, s := range resp.Steps {
		if s.Status != passed || hasErrors(s.Diagnostics) {
			t.Errorf("%q: %s, diagnostics %v, message %q, output:\n%s", strings.Join(s.Command, " "), s.Status, diagStrings(s.Diagnostics), s.Message, s.Output)
		}
	}
	if !resp.Passed {
		t.Error("Passed = false")
	}
}

// copyTree copies src into dst with writable permissions (the module cache is read-only).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestValidateNestedModules checks a workspace with a module inside another: each is
// validated in its own directory and a file is reported once, by its own module.
func TestValidateNestedModules(t *testing.T) {
	t.Parallel()
	requireGo(t)
	root := writeTree(t, map[string]string{
		"go.mod":             "module example.com/outer\n\ngo 1.22\n",
		"outer.go":           "package outer\n",
		"tools/go.mod":       "module example.com/tools\n\ngo 1.22\n",
		"tools/gen/gen.go":   "package gen\nvar  X = 1\n",
		"tools/gen/build.go": "package gen\n\nfunc F() { undefinedCall() }\n",
	})
	resp, err := Validate(context.Background(), root, execRunner(root, ""), Options{})
	if err != nil {
		t.Fatal(err)
	}
	gofmt := findStep(t, resp.Steps, "gofmt")
	if got := diagStrings(gofmt.Diagnostics); len(got) != 1 || !strings.HasPrefix(got[0], "tools/gen/gen.go:0:0 WARNING") {
		t.Errorf("gofmt diagnostics %q: want tools/gen/gen.go once", got)
	}
	build := findStep(t, resp.Steps, "go build")
	if build.Status != failed || !hasDiag(build.Diagnostics, "tools/gen/build.go", 3, "undefined: undefinedCall") {
		t.Errorf("go build: %s %v: want FAILED with tools/gen/build.go:3", build.Status, diagStrings(build.Diagnostics))
	}
	if !strings.Contains(build.Output, "== . ==") || !strings.Contains(build.Output, "== tools ==") {
		t.Errorf("go build output %q: want a section per module", build.Output)
	}
}

// TestValidateTimeoutIsError runs a test that never ends under a deadline: the test step is
// an ERROR (the contract's "timed out"), not a failure of the code, and Passed is false.
func TestValidateTimeoutIsError(t *testing.T) {
	t.Parallel()
	requireGo(t)
	root := writeTree(t, map[string]string{
		"go.mod":       "module example.com/hang\n\ngo 1.22\n",
		"hang.go":      "package hang\n",
		"hang_test.go": "package hang\n\nimport \"testing\"\n\nfunc TestHang(t *testing.T) {\n\tselect {}\n}\n",
	})
	run := execRunner(root, "")
	// Build and vet first without a deadline, so only the test can hit it.
	if _, err := Validate(context.Background(), root, run, Options{Steps: []sandboxv1.ValidationStepKind{sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TYPECHECK}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := Validate(ctx, root, run, Options{Steps: []sandboxv1.ValidationStepKind{sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TEST}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Passed || len(resp.Steps) != 1 {
		t.Fatalf("passed %v steps %v: want one test step, not passed", resp.Passed, stepSummary(resp.Steps))
	}
	s := resp.Steps[0]
	if s.Status != errored || !strings.Contains(s.Message, "did not finish") {
		t.Errorf("test step %s %q: want ERROR saying it did not finish", s.Status, s.Message)
	}
}
