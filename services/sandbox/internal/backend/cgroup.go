package backend

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// cgroupRoot is where cgroup v1 hierarchies are mounted.
const cgroupRoot = "/sys/fs/cgroup"

// cgroupPrefix begins the name of every group the backends make:
// thefold-sandbox-<owner>-<run>, the owner being the backend's state id (see state). A
// process of the service started after a crash so tells a dead process's groups from those
// of a live one beside them, and removes them (removeOwnerCgroups).
const cgroupPrefix = "thefold-sandbox-"

// cgroup is one run's cgroup v1 "pids" and "memory" groups. They exist because rlimits
// cannot bound these two: RLIMIT_NPROC is never enforced for root (the service runs as root
// in its container, and bwrap's user namespace maps the sandbox user back to root), and
// RLIMIT_AS breaks the Go runtime, which reserves far more address space than it uses. The
// groups are made beneath this process's own groups so any limit set on the service still
// holds for its sandboxes. They also let a timeout kill every process of the run, including
// one that left the process group. A group serves one run and is removed after it: it is
// never used again.
type cgroup struct {
	pids, memory string // directories; "" when that controller is unavailable
}

// newCgroup makes the groups of a run of owner and sets the limits. The returned warnings
// say which limit could not be enforced this way and why; the cgroup is never nil.
func newCgroup(owner string, l Limits, off bool) (*cgroup, []string) {
	cg, warns := makeCgroup(owner, off)
	for _, c := range cg.controllers() {
		if err := setLimits(c.ctrl, *c.dir, l, 0, nil); err != nil {
			_ = os.Remove(*c.dir)
			*c.dir = ""
			warns = append(warns, fmt.Sprintf("%s limit not enforced: %v", c.ctrl, err))
		}
	}
	return cg, warns
}

// controller is one of a cgroup's groups: its controller's name and its directory field.
type controller struct {
	ctrl string
	dir  *string
}

// controllers are the groups c has.
func (c *cgroup) controllers() []controller {
	var out []controller
	for _, x := range []controller{{"pids", &c.pids}, {"memory", &c.memory}} {
		if *x.dir != "" {
			out = append(out, x)
		}
	}
	return out
}

// makeCgroup makes the empty groups of a run of owner, without limits (setLimits sets
// them). The warnings say which controller is missing and why; the cgroup is never nil.
func makeCgroup(owner string, off bool) (*cgroup, []string) {
	if off {
		return &cgroup{}, []string{"pids limit not enforced: cgroups turned off", "memory limit per process only (RLIMIT_DATA): cgroups turned off"}
	}
	own, err := ownCgroups()
	if err != nil {
		return &cgroup{}, []string{"no cgroup limits (pids, memory): " + err.Error()}
	}
	// Both groups take one name; a name already there (another run of this owner drew
	// it) is drawn again: a group is never shared.
	for attempt := 0; ; attempt++ {
		cg := &cgroup{}
		var warns []string
		name := cgroupPrefix + owner + "-" + randomHex(4)
		taken := false
		for _, c := range []controller{{"pids", &cg.pids}, {"memory", &cg.memory}} {
			base, ok := own[c.ctrl]
			if !ok {
				warns = append(warns, fmt.Sprintf("%s limit not enforced: no cgroup v1 %q hierarchy", c.ctrl, c.ctrl))
				continue
			}
			dir := filepath.Join(cgroupRoot, c.ctrl, base, name)
			err := os.Mkdir(dir, 0o755)
			if errors.Is(err, os.ErrExist) && attempt < 3 {
				taken = true
				break
			}
			if err != nil {
				warns = append(warns, fmt.Sprintf("%s limit not enforced: %v", c.ctrl, err))
				continue
			}
			*c.dir = dir
		}
		if !taken {
			return cg, warns
		}
		for _, d := range cg.dirs() {
			_ = os.Remove(d)
		}
	}
}

// setLimits writes l's bound into dir, a group of controller ctrl ("pids" or "memory"):
// pids.max is l.Pids raised by extraPids (processes of the run's machinery in the group).
// Memory is bounded with swap (memsw) too when the kernel accounts swap (only RAM is bounded
// otherwise, and the memsw file is not required). from is what the group was last given
// (nil: nothing, it is new): a bound it holds already is not written again, and memsw, which
// may never be below the memory limit, is written first when the bound goes up.
func setLimits(ctrl, dir string, l Limits, extraPids int, from *Limits) error {
	type file struct {
		name, value string
		required    bool
	}
	var files []file
	switch ctrl {
	case "pids":
		if from != nil && from.Pids == l.Pids {
			return nil
		}
		files = []file{{"pids.max", strconv.Itoa(l.Pids + extraPids), true}}
	case "memory":
		if from != nil && from.MemoryBytes == l.MemoryBytes {
			return nil
		}
		mem := strconv.FormatInt(l.MemoryBytes, 10)
		files = []file{{"memory.limit_in_bytes", mem, true}, {"memory.memsw.limit_in_bytes", mem, false}}
		if from != nil && l.MemoryBytes > from.MemoryBytes {
			files[0], files[1] = files[1], files[0]
		}
	}
	for _, f := range files {
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(f.value), 0o644); err != nil && f.required {
			return err
		}
	}
	return nil
}

// join moves the process pid into the groups. The first move after a quiet spell waits for
// an RCU grace period in the kernel: milliseconds (see launcher).
func (c *cgroup) join(pid int) error {
	for _, d := range c.dirs() {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
			return fmt.Errorf("move into the cgroup %s: %w", d, err)
		}
	}
	return nil
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
// while the first are killed), for at most a few seconds. It waits for the killed ones on
// pidfds, woken as they exit, rather than looking again and again: after a run, the one
// left is usually the sandbox's pid 1 tearing its namespaces down.
func (c *cgroup) kill() {
	d := c.dirs()
	if len(d) == 0 {
		return
	}
	procs := filepath.Join(d[0], "cgroup.procs")
	deadline := time.Now().Add(5 * time.Second)
	for pause := 20 * time.Microsecond; time.Now().Before(deadline); pause = min(2*pause, 5*time.Millisecond) {
		b, err := os.ReadFile(procs)
		if err != nil || len(strings.TrimSpace(string(b))) == 0 {
			return
		}
		var fds []unix.PollFd
		for _, f := range strings.Fields(string(b)) {
			pid, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
			if len(fds) < 64 {
				if fd, err := unix.PidfdOpen(pid, 0); err == nil {
					fds = append(fds, unix.PollFd{Fd: int32(fd), Events: unix.POLLIN})
				}
			}
		}
		if len(fds) == 0 {
			time.Sleep(pause) // gone already (or no pidfds here): look again shortly
			continue
		}
		awaitExits(fds, 5*time.Millisecond)
	}
}

// awaitExits waits until every pidfd of fds says its process has exited, at most bound,
// and closes them.
func awaitExits(fds []unix.PollFd, bound time.Duration) {
	end := time.Now().Add(bound)
	for left := slices.Clone(fds); len(left) > 0; {
		ms := int(time.Until(end)/time.Millisecond) + 1
		if ms <= 0 {
			break
		}
		n, err := unix.Poll(left, ms)
		if n <= 0 && !errors.Is(err, unix.EINTR) {
			break // the bound passed
		}
		live := left[:0]
		for _, p := range left {
			if p.Revents == 0 {
				live = append(live, p)
			}
		}
		left = live
	}
	for _, p := range fds {
		_ = unix.Close(int(p.Fd))
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

// remove kills what is left and removes the groups. It waits (a second at most per group)
// while a killed process is leaving: run it after the run, off the command's time.
func (c *cgroup) remove() {
	c.kill()
	for _, d := range c.dirs() {
		removeGroup(d)
	}
}

// removeGroup removes the group dir, killing what is left in it first. rmdir fails while a
// process remains, and an emptied group can stay busy for a moment while the kernel
// finishes with its last processes: it is tried again for a second.
func removeGroup(dir string) bool {
	(&cgroup{pids: dir}).kill()
	for i := 0; i < 200; i++ {
		if err := os.Remove(dir); err == nil || errors.Is(err, os.ErrNotExist) {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
	return false
}

// removeOwnerCgroups removes the groups of owner (a process of the service that is gone)
// beneath this process's own, and what still runs in them; it returns how many it removed.
func removeOwnerCgroups(owner string) (n int) {
	own, err := ownCgroups()
	if err != nil {
		return 0
	}
	for _, ctrl := range []string{"pids", "memory"} {
		base, ok := own[ctrl]
		if !ok {
			continue
		}
		parent := filepath.Join(cgroupRoot, ctrl, base)
		ents, err := os.ReadDir(parent)
		if err != nil {
			continue
		}
		for _, e := range ents {
			if e.IsDir() && strings.HasPrefix(e.Name(), cgroupPrefix+owner+"-") && removeGroup(filepath.Join(parent, e.Name())) {
				n++
			}
		}
	}
	return n
}
