package kube_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/services/sandbox/internal/backend"
	"github.com/thefold/thefold/services/sandbox/internal/backend/kube"
	"github.com/thefold/thefold/services/sandbox/internal/backend/kube/kubetest"
)

// TestInTheSandboxImage runs the backend's scripts in the real sandbox image (a container
// made like the pod, on the local docker engine: the pod's command, user, read-only root,
// no capabilities, no network, no init): the copies, a command, its timeout, the kill that
// must spare the keeper, and the reaping of what commands orphan. Skipped where docker or
// the image (make images) is missing. The cluster itself stays fake: no pod runs here.
func TestInTheSandboxImage(t *testing.T) {
	t.Parallel()
	c := kubetest.NewCluster(t)
	ex := kubetest.NewDockerExecutor(t, c, kube.DefaultImage)
	k, err := kube.New(t.Context(), c.Core, c.Net, ex, kube.Config{Namespace: kubetest.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	ws := t.TempDir()
	if err := os.MkdirAll(filepath.Join(ws, "pkg"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "pkg", "in.txt"), []byte("in"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "gone.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := k.Prepare(t.Context(), ws, backend.Identity{ID: "img", Owner: "alice", Dir: filepath.Dir(ws)}, "go", backend.Limits{}); err != nil {
		t.Fatal(err)
	}
	pod := c.Pods(t)[0].Name
	run := func(s backend.Spec) *backend.Result {
		t.Helper()
		res, err := k.Run(t.Context(), ws, s, backend.Limits{})
		if err != nil {
			t.Fatalf("%q: %v", s.Argv, err)
		}
		return res
	}
	res := run(backend.Spec{Argv: []string{"sh", "-c", `id -u; pwd; cat in.txt; printf out > out.txt; rm ../gone.txt; chmod 000 out.txt; echo "$GREETING"`},
		Dir: "pkg", Env: map[string]string{"GREETING": "hi there"}})
	if got, want := string(res.Stdout), "65534\n/workspace/pkg\nin"+"hi there\n"; got != want || res.ExitCode != 0 {
		t.Errorf("stdout %q stderr %q exit %d; want %q", got, res.Stderr, res.ExitCode, want)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "pkg", "out.txt")); err != nil || string(b) != "out" {
		t.Errorf("out.txt on the host: %q, %v (a file the command locked itself out of still comes back)", b, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "gone.txt")); !os.IsNotExist(err) {
		t.Errorf("gone.txt: %v, want it deleted", err)
	}
	if res := run(backend.Spec{Argv: []string{"sh", "-c", "exit 7"}}); res.ExitCode != 7 {
		t.Errorf("exit %d, want 7", res.ExitCode)
	}
	// The root is read-only and the network is not there.
	if res := run(backend.Spec{Argv: []string{"sh", "-c", "touch /etc/x"}}); res.ExitCode == 0 {
		t.Error("wrote to the root file system")
	}
	// A timed-out command dies with everything it started, including a process that left
	// its session; the keeper (PID 1) lives on and the next command runs.
	start := time.Now()
	res = run(backend.Spec{Argv: []string{"sh", "-c", "setsid sleep 300 & sleep 300"}, Timeout: 2 * time.Second})
	if !res.TimedOut || res.Signal != "killed" {
		t.Errorf("result %+v: want timed out and killed", res)
	}
	if took := time.Since(start); took > 9*time.Second { // the pod's own timeout would take 12 s
		t.Errorf("the timed-out command took %s to end", took)
	}
	// Orphans are reaped: a command that leaves a child behind, killed after it.
	run(backend.Spec{Argv: []string{"sh", "-c", "sleep 0.2 & exit 0"}})
	time.Sleep(500 * time.Millisecond)
	out, err := exec.Command("docker", "exec", ex.Container(pod), "sh", "-c",
		`for p in /proc/[0-9]*; do read -r s < $p/stat; echo "$s"; done`).CombinedOutput()
	if err != nil {
		t.Fatalf("list the container's processes: %v: %s", err, out)
	}
	var keeper bool
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		if f[0] == "1" && f[1] == "(sh)" {
			keeper = true
		}
		if f[2] == "Z" {
			t.Errorf("zombie left: %s", line)
		}
		if strings.Contains(f[1], "sleep") && f[3] != "1" {
			t.Errorf("a command's process outlived it: %s", line)
		}
	}
	if !keeper {
		t.Errorf("the keeper is not PID 1 any more:\n%s", out)
	}
	if res := run(backend.Spec{Argv: []string{"cat", "pkg/in.txt"}}); string(res.Stdout) != "in" {
		t.Errorf("after the kill: %q %q", res.Stdout, res.Stderr)
	}
}
