package e2e

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/stack"
	"github.com/thefold/thefold/pkg/stack/stacktest"
)

// TestCLIDemoOnAFreshDataDirectory: `thefold demo`, the binary, on a data directory and a
// database of its own (not the suite's mesh) with no provider key: it starts the nine
// services with the scripted model, runs "Add a health endpoint" live to the review gate,
// approves, merges the pull request and stops the stack — every screen labelled as the
// scripted model. The clone it prints holds the merged change.
func TestCLIDemoOnAFreshDataDirectory(t *testing.T) {
	parallel(t)
	src, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ports, err := stack.FreePorts()
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"THEFOLD_LOG_LEVEL=warn", "THEFOLD_SANDBOX_GOPROXY=off"}
	// The sandbox backend the suite's mesh uses (THEFOLD_E2E_SANDBOX_BACKEND; bwrap in
	// scripts/test-e2e.sh): on a docker engine storing images with fuse-overlayfs the demo
	// took 338 s in docker sandboxes (2026-12-02, CI). The demo in a docker sandbox is the
	// compose stack's test.
	if b := os.Getenv("THEFOLD_E2E_SANDBOX_BACKEND"); b != "" {
		env = append(env, "THEFOLD_SANDBOX_BACKEND="+b)
	}
	st := &stack.Stack{DataDir: dir, Ports: ports, Env: env}
	if err := st.Save(); err != nil {
		t.Fatal(err)
	}
	// The binaries the suite's mesh was linked from, so that up does not link its own.
	if err := stacktest.Prebuild(t.Context(), st, src); err != nil {
		t.Logf("no prebuilt binaries: %v", err)
	}
	t.Cleanup(func() { _ = st.Stop(20 * time.Second) })

	cmd := exec.CommandContext(t.Context(), cliBinary(t), "demo", "-data-dir", dir, "-src", src, "-timeout", "4m")
	cmd.Env = append(os.Environ(), "THEFOLD_DATABASE_URL="+dbtest.NewEmptyDatabase(t))
	for _, k := range []string{"THEFOLD_AI_PROVIDER", "THEFOLD_AI_API_KEY", "THEFOLD_AI_BASE_URL", "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "GEMINI_API_KEY", "MOONSHOT_API_KEY"} {
		cmd.Env = append(cmd.Env, k+"=")
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	began := time.Now()
	err = cmd.Run()
	t.Logf("thefold demo took %s:\n%s", time.Since(began).Round(time.Second), out.String())
	if err != nil {
		t.Fatalf("thefold demo: %v", err)
	}
	text := out.String()
	for _, want := range []string{
		"*** SCRIPTED MODEL ***",
		"[SCRIPTED MODEL] TheFold task",
		"[SCRIPTED MODEL] Ready for review:",
		"approving it as the stack's admin",
		"[SCRIPTED MODEL] Pull request:",
		"stopping the stack",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the demo's output lacks %q", want)
		}
	}
	// Every phase is shown as it happens, each line labelled.
	for _, phase := range []string{"planning", "building", "reviewing"} {
		if !regexp.MustCompile(`\[SCRIPTED MODEL\] ▸ ` + phase).MatchString(text) {
			t.Errorf("the demo did not show the phase %s", phase)
		}
	}
	m := regexp.MustCompile(`pull request #(\d+) merged into main of (local/demo-\S+) \(commit [0-9a-f]{12}\)`).FindStringSubmatch(text)
	if m == nil {
		t.Fatal("the demo did not say it merged the pull request")
	}
	clone := regexp.MustCompile(`git clone (\S+) `).FindStringSubmatch(text)
	if clone == nil {
		t.Fatal("the demo did not say where to clone from")
	}
	work := filepath.Join(t.TempDir(), "demo")
	if b, err := exec.Command("git", "clone", "-q", clone[1], work).CombinedOutput(); err != nil {
		t.Fatalf("git clone %s: %v\n%s", clone[1], err, b)
	}
	log, err := exec.Command("git", "-C", work, "log", "--oneline").CombinedOutput()
	if err != nil || strings.Count(strings.TrimSpace(string(log)), "\n") < 1 {
		t.Fatalf("the clone's main: %v\n%s", err, log)
	}
	files, _ := filepath.Glob(filepath.Join(work, "*.go"))
	if len(files) < 2 {
		t.Errorf("the merged main has %v: want the health endpoint besides main.go", files)
	}
	if n := st.Running(); n != 0 || st.SupervisorRunning() {
		t.Errorf("after a scripted demo: %d services running, supervisor %v", n, st.SupervisorRunning())
	}
}
