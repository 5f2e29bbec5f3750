package main

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/platform"
	"github.com/thefold/thefold/pkg/stack"
	"github.com/thefold/thefold/pkg/stack/stacktest"
)

// startTime reads field 22 of /proc/<pid>/stat, as the launcher records it.
func startTime(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Fields(string(b)[strings.LastIndexByte(string(b), ')')+1:])[19]
}

func TestStatusNamesTheDownServices(t *testing.T) {
	t.Parallel()
	sleepPath, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	sleep, err := os.ReadFile(sleepPath)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, d := range []string{"bin", "run"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// Eight "services" run (copies of sleep in bin/, recorded as the launcher records them);
	// memory is down.
	for _, svc := range platform.ServiceNames {
		if svc == "memory" {
			continue
		}
		exe := filepath.Join(dir, "bin", svc)
		if err := os.WriteFile(exe, sleep, 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(exe, "300")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		pid := cmd.Process.Pid
		if err := os.WriteFile(filepath.Join(dir, "run", svc+".pid"), []byte(fmt.Sprintf("%d %s\n", pid, startTime(t, pid))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	var out bytes.Buffer
	err = run(context.Background(), []string{"status", "-data-dir", dir, "-src", dir}, &out)
	if err == nil || !strings.Contains(err.Error(), "1 of 9 processes down: memory") {
		t.Errorf("status err = %v, want it to name memory", err)
	}
	for _, want := range []string{"memory     :9102  down", "tasks      :9101  running (pid ", "supervisor        not running"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("status output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestUpKeepsTheRealStackUp runs the nine real services as a user would: up, up again
// (quick, nothing rebuilt), kill -9 of a service (the supervisor brings it back), a dead
// supervisor and a service down (status names it; up starts just that one), down.
func TestUpKeepsTheRealStackUp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and starts the nine services")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	ports, err := stack.FreePorts()
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv("THEFOLD_DATABASE_URL", dbtest.NewEmptyDatabase(t))
	if err := (&stack.Stack{DataDir: dir, Ports: ports, Env: []string{"THEFOLD_LOG_LEVEL=warn"}}).Save(); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	thefold := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := run(ctx, append(args, "-data-dir", dir, "-src", root), &out)
		return out.String(), err
	}
	t.Cleanup(func() { _, _ = thefold("down") })
	st, err := stack.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Binaries up finds up to date, linked once for every stack test (stacktest); without
	// them up links its own.
	if err := stacktest.Prebuild(ctx, st, root); err != nil {
		t.Logf("no prebuilt binaries: %v", err)
	}
	out, err := thefold("up", "-timeout", "3m")
	if err != nil {
		t.Fatalf("up: %v\n%s", err, out)
	}
	// The newcomer's way in: the console's address, who signs in, and where the code goes.
	if want := "web console      " + st.GatewayURL() + "/   (sign in as " + cmp.Or(os.Getenv("THEFOLD_ADMIN_EMAIL"), "admin@localhost") + ";"; !strings.Contains(out, want) || !strings.Contains(out, st.MailSinkPath()) {
		t.Fatalf("up does not print %q and the mail sink:\n%s", want, out)
	}

	began := time.Now()
	out, err = thefold("up")
	if err != nil || !strings.Contains(out, "already running") || strings.Contains(out, "building") {
		t.Fatalf("second up: %v\n%s", err, out)
	}
	t.Logf("up of a running stack took %s", time.Since(began))

	// kill -9 of tasks: running again, /readyz answering, within a deadline.
	old := st.Status()["tasks"]
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		pid := st.Status()["tasks"]
		if pid != 0 && pid != old {
			resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", ports.Admin["tasks"]))
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("tasks not back within 30s of kill -9")
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The supervisor and memory die: status names memory, up starts just memory.
	sup, err := os.ReadFile(filepath.Join(dir, "run", "supervisor.pid"))
	if err != nil {
		t.Fatal(err)
	}
	var supPID int
	fmt.Sscan(string(sup), &supPID)
	_ = syscall.Kill(supPID, syscall.SIGKILL)
	_ = syscall.Kill(st.Status()["memory"], syscall.SIGKILL)
	for time.Now().Before(deadline.Add(30*time.Second)) && (st.SupervisorRunning() || st.Running() != 8) {
		time.Sleep(50 * time.Millisecond)
	}
	out, err = thefold("status")
	if err == nil || !strings.Contains(err.Error(), "down: memory") || !strings.Contains(out, "memory     :") {
		t.Fatalf("status with memory down: %v\n%s", err, out)
	}
	before := st.Status()
	out, err = thefold("up")
	if err != nil || !strings.Contains(out, "starting memory") {
		t.Fatalf("up with memory down: %v\n%s", err, out)
	}
	for svc, pid := range st.Status() {
		if svc != "memory" && pid != before[svc] {
			t.Errorf("%s restarted by up (pid %d → %d); only memory was down", svc, before[svc], pid)
		}
	}

	if out, err := thefold("down"); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	if n := st.Running(); n != 0 || st.SupervisorRunning() {
		t.Fatalf("after down: %d services, supervisor %v", n, st.SupervisorRunning())
	}

	// Replicas: up -replicas starts them (saved for later ups), status lists them, each
	// gateway answers on its own port, another count is refused while the stack runs, and
	// down stops every process.
	out, err = thefold("up", "-replicas", "agent=2,gateway=2", "-timeout", "3m")
	if err != nil || !strings.Contains(out, "replicas: agent=2, gateway=2 (11 processes)") {
		t.Fatalf("up -replicas: %v\n%s", err, out)
	}
	if st, err = stack.Load(dir); err != nil {
		t.Fatal(err)
	}
	gws := st.GatewayURLs()
	if len(gws) != 2 || !strings.Contains(out, "another gateway  "+gws[1]) {
		t.Fatalf("gateways %v not printed:\n%s", gws, out)
	}
	for _, u := range gws {
		resp, err := http.Get(u + "/openapi.json")
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s/openapi.json: %v %v", u, resp, err)
		}
		resp.Body.Close()
	}
	out, err = thefold("status")
	if err != nil || !strings.Contains(out, "agent-2    :") || !strings.Contains(out, "gateway-2  :") {
		t.Fatalf("status with replicas: %v\n%s", err, out)
	}
	if _, err := thefold("up", "-replicas", "agent=3"); err == nil || !strings.Contains(err.Error(), "stop it first") {
		t.Fatalf("up -replicas agent=3 on a running stack: %v", err)
	}
	if out, err := thefold("down"); err != nil {
		t.Fatalf("down: %v\n%s", err, out)
	}
	if n := st.Running(); n != 0 || st.SupervisorRunning() {
		t.Fatalf("after down: %d processes, supervisor %v", n, st.SupervisorRunning())
	}
}
