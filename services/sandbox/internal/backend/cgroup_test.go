package backend

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
)

func TestCgroupLimitsAndRemoval(t *testing.T) {
	t.Parallel()
	l := Limits{Pids: 17, MemoryBytes: 96 << 20}.WithDefaults()
	cg, warns := newCgroup(testOwner(t), l, false)
	if cg.pids == "" || cg.memory == "" {
		cg.remove()
		t.Skipf("this machine gives no cgroup v1 pids and memory groups: %q", warns)
	}
	read := func(dir, f string) string {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	if got := read(cg.pids, "pids.max"); got != "17" {
		t.Errorf("pids.max %s, want 17", got)
	}
	want := strconv.FormatInt(96<<20, 10)
	if got := read(cg.memory, "memory.limit_in_bytes"); got != want {
		t.Errorf("memory.limit_in_bytes %s, want %s", got, want)
	}
	if _, err := os.Stat(filepath.Join(cg.memory, "memory.memsw.limit_in_bytes")); err == nil {
		if got := read(cg.memory, "memory.memsw.limit_in_bytes"); got != want {
			t.Errorf("memory.memsw.limit_in_bytes %s, want %s (swap would lift the limit)", got, want)
		}
	}
	cg.remove()
	for _, d := range []string{cg.pids, cg.memory} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s left behind: %v", d, err)
		}
	}
}

// TestCommandRunsInItsCgroups checks that the command itself (bwrap's sandboxed process,
// not only the wrapper) is in the run's pids and memory groups from its first instruction.
// It looks from the host, in /proc/<pid>/cgroup of the command's process: inside a bwrap
// sandbox started through a launcher, the sandbox's cgroup namespace is rooted at its own
// group, which it sees as "/".
func TestCommandRunsInItsCgroups(t *testing.T) {
	t.Parallel()
	if cg, warns := newCgroup(testOwner(t), Limits{}.WithDefaults(), false); cg.pids == "" || cg.memory == "" {
		cg.remove()
		t.Skipf("this machine gives no cgroup v1 pids and memory groups: %q", warns)
	} else {
		cg.remove()
	}
	each(t, func(t *testing.T, b Backend) {
		whileRunning(t, b, workspace(t), Limits{}, func(pid int) {
			for _, ctrl := range []string{"pids", "memory"} {
				if g := hostGroup(t, pid, ctrl); !regexp.MustCompile(`/thefold-sandbox-[0-9a-f]{8}-[0-9a-f]{8}$`).MatchString(g) {
					t.Errorf("the command is in the %s group %s, not its own", ctrl, g)
				}
			}
		})
	})
}

// testOwner is the id of a backend state made for t (and closed after it): the owner of
// the cgroups a test makes directly.
func testOwner(t *testing.T) string {
	t.Helper()
	st, err := newState(t.TempDir(), quiet())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.close() })
	return st.id
}

// kill returns once every process of the group is gone, and keeps no descriptor of them.
// Not parallel: it counts this process's descriptors.
func TestCgroupKillEmptiesTheGroup(t *testing.T) {
	cg, warns := makeCgroup(testOwner(t), false)
	defer cg.remove()
	if cg.pids == "" {
		t.Skipf("no cgroup v1 pids group here: %q", warns)
	}
	fds := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := fds()
	var procs []*exec.Cmd
	for range 20 {
		p := exec.Command("sleep", "60")
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		defer p.Process.Kill()
		if err := cg.join(p.Process.Pid); err != nil {
			t.Fatal(err)
		}
		procs = append(procs, p)
	}
	// Reaped as they die, as a sandbox's processes are (by bwrap, or the host's init).
	var reaped sync.WaitGroup
	for _, p := range procs {
		reaped.Go(func() { p.Wait() })
	}
	cg.kill()
	if left := readTrim(t, filepath.Join(cg.pids, "cgroup.procs")); left != "" {
		t.Errorf("kill returned with processes in the group: %s", left)
	}
	for _, p := range procs {
		if alive(p.Process.Pid) {
			t.Errorf("pid %d alive after kill", p.Process.Pid)
		}
	}
	reaped.Wait()
	if after := fds(); after > before {
		t.Errorf("%d descriptors open after kill, %d before", after, before)
	}
}
