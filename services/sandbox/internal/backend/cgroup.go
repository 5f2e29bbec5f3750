package backend

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// cgroupRoot is where cgroup v1 hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroup is one run's cgroup v1 "pids" and "memory" groups. They exist because rlimits
// cannot bound these two: RLIMIT_NPROC is never enforced for root (the service runs as root
// in its container, and bwrap's user namespace maps the sandbox user back to root), and
// RLIMIT_AS breaks the Go runtime, which reserves far more address space than it uses. The
// groups are made beneath this process's own groups so any limit set on the service still
// holds for its sandboxes. They also let a timeout kill every process of the run, including
// one that left the process group.
type cgroup struct {
	pids, memory string // directories; "" when that controller is unavailable
}

// newCgroup makes the groups and sets the limits. The returned warnings say which limit
// could not be enforced this way and why; the cgroup is never nil.
func newCgroup(l Limits, off bool) (*cgroup, []string) {
	if off {
		return &cgroup{}, []string{"pids limit not enforced: cgroups turned off", "memory limit per process only (RLIMIT_DATA): cgroups turned off"}
	}
	own, err := ownCgroups()
	if err != nil {
		return &cgroup{}, []string{"no cgroup limits (pids, memory): " + err.Error()}
	}
	var rnd [8]byte
	_, _ = rand.Read(rnd[:])
	name := "thefold-sandbox-" + hex.EncodeToString(rnd[:])
	cg := &cgroup{}
	var warns []string
	// files are written in order: memory+swap may not be set below the memory limit.
	make1 := func(ctrl string, files [][2]string, required string) string {
		base, ok := own[ctrl]
		if !ok {
			warns = append(warns, fmt.Sprintf("%s limit not enforced: no cgroup v1 %q hierarchy", ctrl, ctrl))
			return ""
		}
		dir := filepath.Join(cgroupRoot, ctrl, base, name)
		if err := os.Mkdir(dir, 0o755); err != nil {
			warns = append(warns, fmt.Sprintf("%s limit not enforced: %v", ctrl, err))
			return ""
		}
		for _, fv := range files {
			f := fv[0]
			err := os.WriteFile(filepath.Join(dir, f), []byte(fv[1]), 0o644)
			if err != nil && f == required {
				_ = os.Remove(dir)
				warns = append(warns, fmt.Sprintf("%s limit not enforced: %v", ctrl, err))
				return ""
			}
		}
		return dir
	}
	cg.pids = make1("pids", [][2]string{{"pids.max", strconv.Itoa(l.Pids)}}, "pids.max")
	mem := strconv.FormatInt(l.MemoryBytes, 10)
	// memsw (memory+swap) may be absent when swap accounting is off; then only RAM is bounded.
	cg.memory = make1("memory", [][2]string{{"memory.limit_in_bytes", mem}, {"memory.memsw.limit_in_bytes", mem}}, "memory.limit_in_bytes")
	return cg, warns
}

// ownCgroups maps each v1 controller to this process's group path, from /proc/self/cgroup,
// read once: a process's own groups do not change under it.
var ownCgroups = sync.OnceValues(readOwnCgroups)

func readOwnCgroups() (map[string]string, error) {
	f, err := os.Open("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	own := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 || parts[1] == "" {
			continue
		}
		for _, c := range strings.Split(parts[1], ",") {
			if _, err := os.Stat(filepath.Join(cgroupRoot, c, parts[2], "cgroup.procs")); err == nil {
				own[c] = parts[2]
			}
		}
	}
	if len(own) == 0 {
		return nil, errors.New("no cgroup v1 hierarchy mounted under " + cgroupRoot)
	}
	return own, nil
}

func (c *cgroup) dirs() []string {
	var d []string
	for _, x := range []string{c.pids, c.memory} {
		if x != "" {
			d = append(d, x)
		}
	}
	return d
}

// kill SIGKILLs every process in the groups until they are empty (new ones may be forked
// while the first are killed), for at most a few seconds.
func (c *cgroup) kill() {
	d := c.dirs()
	if len(d) == 0 {
		return
	}
	deadline := time.Now().Add(5 * time.Second)
	// A group whose processes just exited usually empties within a millisecond: poll
	// quickly first.
	for pause := 20 * time.Microsecond; time.Now().Before(deadline); pause = min(2*pause, 5*time.Millisecond) {
		b, err := os.ReadFile(filepath.Join(d[0], "cgroup.procs"))
		if err != nil || len(strings.TrimSpace(string(b))) == 0 {
			return
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(pause)
	}
}

// oomKilled reports whether the memory group's OOM killer killed a process.
func (c *cgroup) oomKilled() bool {
	if c.memory == "" {
		return false
	}
	b, err := os.ReadFile(filepath.Join(c.memory, "memory.oom_control"))
	if err != nil {
		return false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "oom_kill "); ok {
			n, _ := strconv.Atoi(strings.TrimSpace(v))
			return n > 0
		}
	}
	return false
}

// remove kills what is left and removes the groups (rmdir fails while a process remains,
// and a killed process leaves its group a moment after the signal).
func (c *cgroup) remove() {
	c.kill()
	var busy []string
	for _, d := range c.dirs() {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			busy = append(busy, d)
		}
	}
	if len(busy) == 0 {
		return
	}
	// An emptied group can stay busy for a moment while the kernel finishes with its last
	// processes: its removal goes on in the background rather than in the command's time.
	go func() {
		for _, d := range busy {
			for i := 0; i < 200; i++ {
				if err := os.Remove(d); err == nil || errors.Is(err, os.ErrNotExist) {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
	}()
}
