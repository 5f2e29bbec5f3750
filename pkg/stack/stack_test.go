package stack

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/platform"
)

// The test binary doubles as the stack's programs, so the launcher logic runs against real
// processes without building the services: copied to bin/thefold it is the supervisor, and
// with fakeEnv set it is a service that answers /readyz until SIGTERM.
const fakeEnv = "STACK_TEST_FAKE_SERVICE"

func TestMain(m *testing.M) {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	switch {
	case filepath.Base(os.Args[0]) == SupervisorExe && len(os.Args) > 3 && os.Args[1] == "supervise":
		s, err := Load(os.Args[3])
		if err == nil {
			wake := make(chan os.Signal, 1)
			signal.Notify(wake, syscall.SIGHUP)
			err = s.Supervise(ctx, slog.New(slog.NewTextHandler(os.Stderr, nil)), wake)
		}
		if err != nil {
			os.Exit(2)
		}
		os.Exit(0)
	case os.Getenv(fakeEnv) == "1":
		os.Exit(fakeService(ctx))
	case os.Getenv(heavyEnv) == "1":
		heavyProcess()
	}
	os.Exit(m.Run())
}

func fakeService(ctx context.Context) int {
	name := filepath.Base(os.Args[0])
	if _, err := os.Stat(filepath.Join(os.Getenv("THEFOLD_DATA_DIR"), "crash-"+name)); err == nil {
		os.Stderr.WriteString("fake failure: cannot start " + name + "\n")
		return 3
	}
	l, err := net.Listen("tcp", os.Getenv("THEFOLD_ADMIN_ADDR"))
	if err != nil {
		return 1
	}
	go func() {
		_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) }))
	}()
	<-ctx.Done()
	return 0
}

// heavyEnv makes the test binary a process that ignores SIGTERM and holds two gibibytes of
// resident memory, which the kernel takes a while to free after SIGKILL.
const heavyEnv = "STACK_TEST_HEAVY_PROCESS"

func heavyProcess() {
	signal.Ignore(syscall.SIGTERM)
	// MAP_POPULATE: the kernel faults every page in at once. Touching them from Go instead
	// costs a minute of CPU in the race detector's build (a shadow write per page), which
	// the unit phase pays while everything else waits for the cores.
	mem, err := syscall.Mmap(-1, 0, 2<<30, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE|syscall.MAP_POPULATE)
	if err != nil {
		os.Stderr.WriteString("mmap: " + err.Error() + "\n")
		os.Exit(1)
	}
	os.Stdout.WriteString("ready\n")
	for {
		time.Sleep(time.Hour)
		_ = mem
	}
}

// fakeStack is a stack on free ports whose binaries are copies of the test binary.
func fakeStack(t *testing.T) *Stack {
	t.Helper()
	ports, err := FreePorts()
	if err != nil {
		t.Fatal(err)
	}
	// The fakes ignore the database, but the launcher prepares it for every start.
	s := &Stack{DataDir: t.TempDir(), DatabaseURL: dbtest.NewEmptyDatabase(t), Ports: ports, Env: []string{fakeEnv + "=1"}}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range append([]string{SupervisorExe}, platform.ServiceNames...) {
		copyFile(t, self, s.exePath(name))
	}
	return s
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	in, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(out, in); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
}

// eventually polls cond every 50ms until it holds or the deadline passes.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %s: %s", within, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func alive(pid int) bool {
	_, state, err := procStat(pid)
	return err == nil && state != 'Z' && state != 'X'
}

func kill9(t *testing.T, pid int) {
	t.Helper()
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
}

func supervisorLog(s *Stack) string {
	b, _ := os.ReadFile(s.SupervisorLogPath())
	return string(b)
}

// TestSupervisorKeepsTheStackUp: a service killed with -9 is running and ready again within
// a deadline; one that fails to start is retried with the reason logged; with the
// supervisor gone and a service down, starting the supervisor again (thefold up) starts
// just that service; Stop stops the supervisor, then the services.
func TestSupervisorKeepsTheStackUp(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	s := fakeStack(t)
	t.Cleanup(func() { _ = s.Stop(5 * time.Second) })
	if err := s.StartSupervisor(); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitReady(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}

	// kill -9 of a service: back, ready, and the supervisor says why it restarted it.
	old := s.Status()["tasks"]
	kill9(t, old)
	eventually(t, 15*time.Second, "tasks restarted", func() bool {
		pid := s.Status()["tasks"]
		return pid != 0 && pid != old
	})
	if err := s.WaitReady(ctx, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	if log := supervisorLog(s); !strings.Contains(log, "signal: killed") {
		t.Errorf("supervisor log does not say tasks was killed:\n%s", log)
	}

	// A service that fails at start is retried, its exit status and last log lines logged.
	crash := filepath.Join(s.DataDir, "crash-memory")
	if err := os.WriteFile(crash, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	kill9(t, s.Status()["memory"])
	eventually(t, 15*time.Second, "memory's failed restarts logged", func() bool {
		log := supervisorLog(s)
		return strings.Contains(log, "exit status 3") && strings.Contains(log, "fake failure: cannot start memory")
	})
	if err := os.Remove(crash); err != nil {
		t.Fatal(err)
	}
	if err := s.StartSupervisor(); err != nil { // wakes it: no waiting out the backoff
		t.Fatal(err)
	}
	if err := s.WaitReady(ctx, 5*time.Second); err != nil {
		t.Fatalf("woken supervisor did not start memory at once: %v", err)
	}

	// The supervisor dies and a service with it down: starting a supervisor again starts
	// that one service and adopts the other eight.
	sup, err := readPIDFile(s.supervisorPIDPath())
	if err != nil {
		t.Fatal(err)
	}
	kill9(t, sup.pid)
	eventually(t, 5*time.Second, "supervisor gone", func() bool { return !s.SupervisorRunning() })
	kill9(t, s.Status()["skills"])
	eventually(t, 5*time.Second, "skills down", func() bool { return s.Running() == 8 })
	before := s.Status()
	if err := s.WaitReady(ctx, 5*time.Second); err == nil || !strings.Contains(err.Error(), "skills exited") {
		t.Fatalf("WaitReady without a supervisor and skills down = %v, want it to name skills", err)
	}
	if err := s.StartSupervisor(); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitReady(ctx, 15*time.Second); err != nil {
		t.Fatal(err)
	}
	after := s.Status()
	for _, svc := range platform.ServiceNames {
		if svc != "skills" && after[svc] != before[svc] {
			t.Errorf("%s restarted (pid %d → %d); only skills was down", svc, before[svc], after[svc])
		}
	}
	// An adopted service (not the new supervisor's child) that dies is restarted too.
	old = after["builder"]
	kill9(t, old)
	eventually(t, 15*time.Second, "adopted builder restarted", func() bool {
		pid := s.Status()["builder"]
		return pid != 0 && pid != old
	})

	// Stop: the supervisor first (nothing is restarted), then every service.
	pids := s.Status()
	sup, _ = readPIDFile(s.supervisorPIDPath())
	if err := s.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if alive(sup.pid) {
		t.Error("supervisor still running after Stop")
	}
	for svc, pid := range pids {
		if alive(pid) {
			t.Errorf("%s (pid %d) still running after Stop", svc, pid)
		}
	}
	if n := s.Running(); n != 0 {
		t.Errorf("%d services running after Stop", n)
	}
}

// TestStopSignalsOnlyItsOwnProcesses: a pid file whose pid now belongs to another program, or
// to our program started at another time (pid reuse after a reboot), is stale: Stop removes
// it and signals nothing.
func TestStopSignalsOnlyItsOwnProcesses(t *testing.T) {
	t.Parallel()
	s := &Stack{DataDir: t.TempDir(), Ports: DefaultPorts()}
	sleepPath, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	start := func(exe string) *exec.Cmd {
		// A copy just written can be "text file busy" for a moment: a parallel test's fork
		// holds its write descriptor until that child execs (golang/go#22315).
		var cmd *exec.Cmd
		for try := 0; ; try++ {
			cmd = exec.Command(exe, "300")
			err := cmd.Start()
			if err == nil {
				break
			}
			if !errors.Is(err, syscall.ETXTBSY) || try == 100 {
				t.Fatal(err)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd
	}
	// Our "gateway" is a copy of sleep in bin/: the one process Stop may signal.
	copyFile(t, sleepPath, s.exePath("gateway"))
	copyFile(t, sleepPath, s.exePath("memory"))
	ours := start(s.exePath("gateway"))
	unrelated := start(sleepPath)
	reused := start(s.exePath("memory"))
	if err := os.MkdirAll(filepath.Join(s.DataDir, "run"), 0o755); err != nil {
		t.Fatal(err)
	}
	write := func(name string, pid int, startOffset uint64) {
		st, _, err := procStat(pid)
		if err != nil {
			t.Fatal(err)
		}
		line := strconv.Itoa(pid) + " " + strconv.FormatUint(st+startOffset, 10) + "\n"
		if err := os.WriteFile(filepath.Join(s.DataDir, "run", name+".pid"), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("gateway", ours.Process.Pid, 0)
	write("tasks", unrelated.Process.Pid, 0)      // another program under a recorded pid
	write("memory", reused.Process.Pid, 1)        // our binary, but not the process we started
	write("supervisor", unrelated.Process.Pid, 0) // a stale supervisor pid file too

	if got := s.Status(); got["gateway"] != ours.Process.Pid || got["tasks"] != 0 || got["memory"] != 0 {
		t.Fatalf("Status = %v: only gateway is ours", got)
	}
	if s.SupervisorRunning() {
		t.Fatal("a sleep counted as the supervisor")
	}
	if err := s.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() { waited <- ours.Wait() }()
	select {
	case err := <-waited:
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGTERM {
			t.Errorf("our process ended with %v, want SIGTERM", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("our process was not stopped")
	}
	for name, cmd := range map[string]*exec.Cmd{"unrelated": unrelated, "reused pid": reused} {
		if !alive(cmd.Process.Pid) {
			t.Errorf("%s process was signalled", name)
		}
	}
	for _, name := range []string{"gateway", "tasks", "memory", "supervisor"} {
		if _, err := os.Stat(filepath.Join(s.DataDir, "run", name+".pid")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s.pid not removed: %v", name, err)
		}
	}
}

func TestProcStatCountsFieldsAfterTheCommandName(t *testing.T) {
	t.Parallel()
	// The command name may hold spaces and parentheses; the start time is still field 22.
	dir := t.TempDir()
	exe := filepath.Join(dir, "a) b (c")
	sleepPath, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	copyFile(t, sleepPath, exe)
	cmd := exec.Command(exe, "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	start, state, err := procStat(cmd.Process.Pid)
	self, _, err2 := procStat(os.Getpid())
	if err != nil || err2 != nil || state == 0 || start < self {
		t.Fatalf("procStat = %d %q %v (ours %d %v)", start, state, err, self, err2)
	}
	if !liveProcess(pidFile{pid: cmd.Process.Pid, start: start}, exe) {
		t.Fatal("liveProcess does not recognise the process by executable and start time")
	}
}

// TestStopWaitsUntilTheProcessIsGone: a process that ignores SIGTERM is killed, and Stop's
// stopProcess and Kill return only when it has finished exiting — not when its
// /proc/<pid>/exe link has gone, which happens before a process with much memory has freed
// it and become a zombie (it still holds its ports then).
func TestStopWaitsUntilTheProcessIsGone(t *testing.T) {
	t.Parallel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	s := &Stack{DataDir: t.TempDir()}
	exe := s.exePath("heavy")
	copyFile(t, self, exe)
	if err := os.MkdirAll(filepath.Dir(s.pidPath("heavy")), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, how := range []string{"stop", "kill"} {
		cmd := exec.Command(exe)
		cmd.Env = append(os.Environ(), heavyEnv+"=1")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		if _, err := bufio.NewReader(out).ReadString('\n'); err != nil {
			t.Fatalf("heavy process did not start: %v", err)
		}
		if err := writePIDFile(s.pidPath("heavy"), cmd.Process.Pid); err != nil {
			t.Fatal(err)
		}
		if how == "kill" {
			err = s.Kill("heavy")
		} else {
			err = stopProcess(s.pidPath("heavy"), exe, time.Now().Add(200*time.Millisecond))
		}
		if err != nil {
			t.Fatal(err)
		}
		if alive(cmd.Process.Pid) {
			t.Errorf("%s: pid %d still exiting when it returned", how, cmd.Process.Pid)
		}
	}
}
