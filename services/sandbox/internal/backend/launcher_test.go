package backend

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// whileRunning runs a command (a shell whose $0 is a unique marker) through b and calls
// look with its host pid while it runs; the command ends once look has returned. look runs
// on another goroutine than the test's: it reports with t.Error, never t.Fatal.
func whileRunning(t *testing.T, b Backend, ws string, l Limits, look func(pid int)) *Result {
	t.Helper()
	marker := "marker-" + randomHex(8)
	looked := make(chan struct{})
	s := Spec{Argv: []string{"sh", "-c", `echo running; while [ ! -e looked ]; do sleep 0.01; done; rm looked`, marker}, Timeout: time.Minute,
		Output: func(stream int, p []byte) {
			if stream != 1 || !strings.Contains(string(p), "running") {
				return
			}
			defer close(looked)
			defer os.WriteFile(filepath.Join(ws, "looked"), nil, 0o644)
			for _, p := range processesWith(marker) {
				if filepath.Base(p.argv[0]) == "sh" {
					look(p.pid)
					return
				}
			}
			t.Errorf("the command's shell (%s) is not among the host's processes", marker)
		}}
	res, err := b.Run(t.Context(), ws, s, l)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-looked:
	default:
		t.Fatalf("the command did not run: %+v", res)
	}
	return res
}

// hostGroup is the directory of the controller ctrl's group of the process pid, as the
// host sees it ("" and an error reported when there is none).
func hostGroup(t *testing.T, pid int, ctrl string) string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
	for _, line := range strings.Split(string(b), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && parts[1] == ctrl {
			return filepath.Join(cgroupRoot, ctrl, parts[2])
		}
	}
	t.Errorf("pid %d has no %s group (%v):\n%s", pid, ctrl, err, b)
	return ""
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Error(err)
	}
	return strings.TrimSpace(string(b))
}

// A run through a launcher runs in that launcher's groups, made for it, with the run's
// limits on them; the groups go after the run, and the next run has others.
func TestLauncherServesOneRun(t *testing.T) {
	t.Parallel()
	b := newBwrap(t)
	// The ready launchers, looked at and put back (only a run wakes the refill).
	var pooled []*launcher
	for len(b.launchers.ready) > 0 {
		pooled = append(pooled, <-b.launchers.ready)
	}
	for _, l := range pooled {
		b.launchers.ready <- l
	}
	if pooled[0].cg.pids == "" || pooled[0].cg.memory == "" {
		t.Skipf("this machine gives no cgroup v1 pids and memory groups: %q", pooled[0].warns)
	}
	isPooled := func(dir string) bool {
		for _, l := range pooled {
			if l.cg.pids == dir || l.cg.memory == dir {
				return true
			}
		}
		return false
	}
	ws := workspace(t)
	l := Limits{Pids: 33, MemoryBytes: 200 << 20}
	var first string
	whileRunning(t, b, ws, l, func(pid int) {
		first = hostGroup(t, pid, "pids")
		mem := hostGroup(t, pid, "memory")
		if !isPooled(first) || !isPooled(mem) {
			t.Errorf("the run is in %s and %s, not in a ready launcher's groups", first, mem)
		}
		// bwrap's own process is in the group too: the command keeps its 33.
		if got := readTrim(t, filepath.Join(first, "pids.max")); got != "34" {
			t.Errorf("pids.max %s during the run, want 34", got)
		}
		if got, want := readTrim(t, filepath.Join(mem, "memory.limit_in_bytes")), strconv.Itoa(200<<20); got != want {
			t.Errorf("memory.limit_in_bytes %s during the run, want %s", got, want)
		}
	})
	b.st.settle()
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Errorf("the run's group %s is still there after it: %v", first, err)
	}
	// The next runs have other groups, with their limits whatever the groups were given
	// ahead of time (the defaults, the last run's): the same, lower or higher.
	for _, l := range []Limits{l, {Pids: 500, MemoryBytes: 900 << 20}, {Pids: 20, MemoryBytes: 100 << 20}} {
		launchersReady(t, b)
		whileRunning(t, b, ws, l, func(pid int) {
			g, mem := hostGroup(t, pid, "pids"), hostGroup(t, pid, "memory")
			if g == first {
				t.Errorf("a later run is in the first one's group %s", g)
			}
			if got, want := readTrim(t, filepath.Join(g, "pids.max")), strconv.Itoa(l.Pids+1); got != want {
				t.Errorf("pids.max %s during a run with Pids %d, want %s", got, l.Pids, want)
			}
			want := strconv.FormatInt(l.MemoryBytes, 10)
			for _, f := range []string{"memory.limit_in_bytes", "memory.memsw.limit_in_bytes"} {
				if _, err := os.Stat(filepath.Join(mem, f)); err == nil {
					if got := readTrim(t, filepath.Join(mem, f)); got != want {
						t.Errorf("%s %s during a run with MemoryBytes %d, want %s", f, got, l.MemoryBytes, want)
					}
				}
			}
		})
	}
}

// Close ends the ready launchers' shells and removes their groups.
func TestBwrapCloseEndsLaunchers(t *testing.T) {
	t.Parallel()
	b := newBwrap(t)
	var pooled []*launcher
	for len(b.launchers.ready) > 0 {
		pooled = append(pooled, <-b.launchers.ready)
	}
	for _, l := range pooled {
		b.launchers.ready <- l
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	for _, l := range pooled {
		if alive(l.cmd.Process.Pid) {
			t.Errorf("launcher pid %d alive after Close", l.cmd.Process.Pid)
		}
		for _, d := range l.cg.dirs() {
			if _, err := os.Stat(d); !os.IsNotExist(err) {
				t.Errorf("launcher group %s left after Close: %v", d, err)
			}
		}
	}
}

// launchOnce gives a new launcher (without groups) the script and returns its output
// and exit error.
func launchOnce(t *testing.T, script string) (string, error) {
	t.Helper()
	l, err := startLauncher("test", true)
	if err != nil {
		t.Fatal(err)
	}
	defer l.outR.Close()
	defer l.errR.Close()
	if _, err := l.script.WriteString(script); err != nil {
		t.Fatal(err)
	}
	l.script.Close()
	go io.Copy(io.Discard, l.errR)
	out, _ := io.ReadAll(l.outR)
	return string(out), l.cmd.Wait()
}

// Every argument reaches the launched command as it was, whatever bytes it holds: none
// is shell syntax.
func TestLaunchScriptKeepsEveryArgument(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	pwned := filepath.Join(dir, "pwned")
	args := []string{"", " ", "'", "''", `'\''`, `"`, `\`, `\'`, "a b\tc\nd", "$HOME", "${PATH}", "$(touch " + pwned + ")",
		"`touch " + pwned + "`", "'; touch " + pwned + "; '", "*", "~", "-n", "--", "#", "{", "}", "3<&-", "; }", "é\xff\xfe",
		strings.Repeat("x'", 5000)}
	script, err := launchScript(append([]string{"/usr/bin/printf", `%s\0`}, args...))
	if err != nil {
		t.Fatal(err)
	}
	out, err := launchOnce(t, script)
	if err != nil {
		t.Fatalf("launcher: %v (out %q)", err, out)
	}
	got := strings.Split(strings.TrimSuffix(out, "\x00"), "\x00")
	if len(got) != len(args) {
		t.Fatalf("%d arguments came out, want %d: %q", len(got), len(args), got)
	}
	for i := range args {
		if got[i] != args[i] {
			t.Errorf("argument %d: %q, want %q", i, got[i], args[i])
		}
	}
	if _, err := os.Stat(pwned); err == nil {
		t.Error("an argument ran as shell code")
	}
	if _, err := launchScript([]string{"printf", "a\x00b"}); err == nil {
		t.Error("an argument with a NUL byte was accepted")
	}
}

// A script cut short (the service killed while writing it) runs nothing: the command runs
// only once the whole script is there.
func TestLaunchScriptCutShortRunsNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	target := filepath.Join(dir, "ran")
	script, err := launchScript([]string{"/usr/bin/touch", target, filepath.Join(dir, "ran too")})
	if err != nil {
		t.Fatal(err)
	}
	whole := strings.LastIndexByte(script, '}') + 1
	for n := 0; n <= len(script); n++ {
		_, _ = launchOnce(t, script[:n])
		_, err1 := os.Stat(target)
		_, err2 := os.Stat(filepath.Join(dir, "ran too"))
		switch {
		case n < whole && (err1 == nil || err2 == nil):
			t.Fatalf("the first %d bytes of the script %q ran a command", n, script)
		case n >= whole && (err1 != nil || err2 != nil):
			t.Fatalf("the whole script %q did not run: %v %v", script[:n], err1, err2)
		}
		os.Remove(target)
		os.Remove(filepath.Join(dir, "ran too"))
	}
}

// A launcher whose shell is gone is not used: the run starts bwrap itself.
func TestRunWithoutAGoneLauncher(t *testing.T) {
	t.Parallel()
	b := newBwrap(t)
	for range len(b.launchers.ready) {
		l := <-b.launchers.ready
		_ = l.cmd.Process.Kill()
		waitUntil(t, "the launcher's shell to die", func() bool { return !alive(l.cmd.Process.Pid) })
		b.launchers.ready <- l
	}
	res, err := b.Run(t.Context(), workspace(t), Spec{Argv: []string{"echo", "ran"}}, Limits{})
	if err != nil || res.ExitCode != 0 || !bytes.Equal(res.Stdout, []byte("ran\n")) {
		t.Fatalf("%v %+v", err, res)
	}
}

// A launcher whose pipe closes without a script (its service exited without Close, or was
// killed) removes its own groups.
func TestUnusedLauncherRemovesItsGroups(t *testing.T) {
	t.Parallel()
	l, err := startLauncher(testOwner(t), false)
	if err != nil {
		t.Fatal(err)
	}
	defer l.outR.Close()
	defer l.errR.Close()
	if len(l.cg.dirs()) == 0 {
		l.discard()
		t.Skipf("no cgroup here: %q", l.warns)
	}
	if err := l.cg.join(l.cmd.Process.Pid); err != nil {
		l.discard()
		t.Fatal(err)
	}
	l.script.Close()
	if err := l.cmd.Wait(); err != nil {
		t.Errorf("the launcher's shell: %v", err)
	}
	for _, d := range l.cg.dirs() {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("group %s left: %v", d, err)
			removeGroup(d)
		}
	}
}
