package validate

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// execRunner runs commands directly on this machine in root/dir: the same contract the
// service's sandbox-backed Runner keeps, with real processes. The go command is kept
// offline and on the installed toolchain; path, when set, replaces PATH (to take a tool
// away).
func execRunner(root string, path string) Runner {
	return func(ctx context.Context, dir string, argv []string) (int, []byte, []byte, error) {
		cmd := exec.CommandContext(ctx, argv[0], argv[1:]...)
		if path != "" {
			// exec.Command looked the program up on the test's PATH; look again on ours.
			lp, err := lookPathIn(argv[0], path)
			if err != nil {
				return 0, nil, nil, err
			}
			cmd.Path = lp
		}
		// Kill the whole process group at the deadline: go test's test binary is a child
		// of the go command and would outlive it, holding the output pipes open.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = 5 * time.Second
		cmd.Dir = filepath.Join(root, filepath.FromSlash(dir))
		env := append(os.Environ(), "GOPROXY=off", "GOTOOLCHAIN=local", "GOFLAGS=", "GOWORK=off")
		if path != "" {
			env = append(env, "PATH="+path)
		}
		cmd.Env = env
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			return exitErr.ExitCode(), []byte(stdout.String()), []byte(stderr.String()), nil
		}
		if err != nil {
			return 0, nil, nil, err
		}
		return 0, []byte(stdout.String()), []byte(stderr.String()), nil
	}
}

func lookPathIn(prog, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, prog)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: %w", prog, exec.ErrNotFound)
}

// writeTree writes files (path → content) under a new temporary directory.
func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for p, content := range files {
		full := filepath.Join(root, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// diagString renders a diagnostic compactly for comparisons and failure messages.
func diagString(d *typev1.Diagnostic) string {
	return fmt.Sprintf("%s:%d:%d %s [%s/%s] %s", d.Path, d.Line, d.Column,
		strings.TrimPrefix(d.Severity.String(), "SEVERITY_"), d.Tool, d.Rule, d.Message)
}

func diagStrings(diags []*typev1.Diagnostic) []string {
	out := make([]string, 0, len(diags))
	for _, d := range diags {
		out = append(out, diagString(d))
	}
	return out
}

// findStep returns the step that ran command (argv joined by spaces, prefix match).
func findStep(t *testing.T, steps []*sandboxv1.StepResult, command string) *sandboxv1.StepResult {
	t.Helper()
	for _, s := range steps {
		if strings.HasPrefix(strings.Join(s.Command, " "), command) {
			return s
		}
	}
	t.Fatalf("no step ran %q; steps: %v", command, stepSummary(steps))
	return nil
}

func stepSummary(steps []*sandboxv1.StepResult) []string {
	var out []string
	for _, s := range steps {
		out = append(out, fmt.Sprintf("%s %s %q: %s", s.Kind, s.Status, strings.Join(s.Command, " "), s.Message))
	}
	return out
}

// hasDiag reports whether diags hold one at path:line whose message contains substr.
func hasDiag(diags []*typev1.Diagnostic, path string, line int32, substr string) bool {
	return slices.ContainsFunc(diags, func(d *typev1.Diagnostic) bool {
		return d.Path == path && d.Line == line && strings.Contains(d.Message, substr)
	})
}

func requireGo(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not installed on this machine")
	}
}

func requirePython(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 is not installed on this machine")
	}
}
