package stacktest

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/thefold/thefold/pkg/platform"
	"github.com/thefold/thefold/pkg/stack"
)

// fakeSource is a source tree with what stack.Build builds — a main package per service and
// cmd/thefold — each a program that prints its name.
func fakeSource(t *testing.T) string {
	t.Helper()
	src := t.TempDir()
	write := func(rel, content string) {
		t.Helper()
		p := filepath.Join(src, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/fake\n\ngo 1.22\n")
	for _, dir := range append(append([]string{}, platform.ServiceNames...), "../cmd/thefold") {
		write(filepath.Join("services", dir, "main.go"), "package main\n\nfunc main() { println(\""+filepath.Base(dir)+"\") }\n")
	}
	return src
}

func inode(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// Prebuild leaves binaries that Build finds up to date (it replaces none of them); a binary
// whose source changed is relinked by Build, and the shared one is left as it was.
func TestPrebuildLeavesNothingForBuildToLink(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go command")
	}
	shared := t.TempDir()
	old := sharedRoot
	sharedRoot = func() string { return shared }
	t.Cleanup(func() { sharedRoot = old })
	src := fakeSource(t)

	a := &stack.Stack{DataDir: t.TempDir()}
	if err := Prebuild(t.Context(), a, src); err != nil {
		t.Fatal(err)
	}
	sharedTasks := filepath.Join(shared, "bin", "tasks")
	if inode(t, filepath.Join(a.BinDir(), "tasks")) != inode(t, sharedTasks) {
		t.Fatal("tasks was not linked from the shared directory")
	}
	if err := a.Build(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	for _, name := range append(append([]string{}, platform.ServiceNames...), stack.SupervisorExe) {
		if inode(t, filepath.Join(a.BinDir(), name)) != inode(t, filepath.Join(shared, "bin", name)) {
			t.Errorf("Build relinked %s, which Prebuild had left up to date", name)
		}
	}

	// A change to tasks: Build relinks it (a new file), the shared binary stays as it was.
	before := inode(t, sharedTasks)
	if err := os.WriteFile(filepath.Join(src, "services", "tasks", "main.go"), []byte("package main\n\nfunc main() { println(\"tasks 2\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := a.Build(t.Context(), src); err != nil {
		t.Fatal(err)
	}
	if inode(t, filepath.Join(a.BinDir(), "tasks")) == before {
		t.Error("Build did not relink tasks after its source changed")
	}
	if inode(t, sharedTasks) != before {
		t.Error("Build in a test's directory replaced the shared binary")
	}
	out, err := exec.Command(sharedTasks).CombinedOutput()
	if err != nil || string(out) != "tasks\n" {
		t.Errorf("the shared tasks prints %q (%v), want the old program's \"tasks\"", out, err)
	}

	// The next test's Prebuild brings the shared directory up to date first.
	b := &stack.Stack{DataDir: t.TempDir()}
	if err := Prebuild(t.Context(), b, src); err != nil {
		t.Fatal(err)
	}
	out, err = exec.Command(filepath.Join(b.BinDir(), "tasks")).CombinedOutput()
	if err != nil || string(out) != "tasks 2\n" {
		t.Errorf("tasks after the change prints %q (%v), want \"tasks 2\"", out, err)
	}
}
