package stack

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// A pid file holds "<pid> <start time>": the start time is field 22 of /proc/<pid>/stat
// (clock ticks after boot). Together with the executable it identifies the process we
// started: after a reboot or a crash the pid may belong to anything, and signalling it
// would kill an unrelated process.
type pidFile struct {
	pid   int
	start uint64 // 0 in pid files written before start times were recorded
}

func readPIDFile(path string) (pidFile, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return pidFile{}, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return pidFile{}, fmt.Errorf("%s: empty", path)
	}
	var p pidFile
	if p.pid, err = strconv.Atoi(f[0]); err != nil || p.pid <= 0 {
		return pidFile{}, fmt.Errorf("%s: bad pid %q", path, f[0])
	}
	if len(f) > 1 {
		if p.start, err = strconv.ParseUint(f[1], 10, 64); err != nil {
			return pidFile{}, fmt.Errorf("%s: bad start time %q", path, f[1])
		}
	}
	return p, nil
}

// writePIDFile records pid with its start time.
func writePIDFile(path string, pid int) error {
	start, _, err := procStat(pid)
	if err != nil {
		return err
	}
	return os.WriteFile(path, []byte(fmt.Sprintf("%d %d\n", pid, start)), 0o644)
}

// procStat returns a process's start time and state ('R', 'S', 'Z', …) from /proc.
func procStat(pid int) (start uint64, state byte, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces or ')': fields are
	// counted from the last ')'. After it come field 3 (state) … field 22 (starttime).
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, errors.New("malformed /proc stat")
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 20 {
		return 0, 0, errors.New("short /proc stat")
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	return start, f[0][0], err
}

// liveProcess reports whether the process in pf is alive (not a zombie), still the one that
// was recorded (same start time) and runs exe. A process we cannot inspect is not ours.
func liveProcess(pf pidFile, exe string) bool {
	start, state, err := procStat(pf.pid)
	if err != nil || state == 'Z' || state == 'X' {
		return false
	}
	if pf.start != 0 && start != pf.start {
		return false
	}
	got, ok := exeOf(pf.pid)
	return ok && got == exe
}

// exeOf is the executable process pid runs, false when its exe link cannot be read (gone, or
// exiting: the link goes before the process does).
func exeOf(pid int) (string, bool) {
	got, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return "", false
	}
	// A binary rebuilt while its process runs shows as "<path> (deleted)".
	return strings.TrimSuffix(got, " (deleted)"), true
}

// exited reports whether the process in pf has finished exiting: its pid is gone, a zombie,
// or (pid reuse) another process. It differs from !liveProcess while a process exits: its
// /proc/<pid>/exe link goes away before it becomes a zombie, so it is no longer provably
// ours but still holds its ports and files. Without a recorded start time the process
// cannot be told from a successor and liveProcess decides.
func exited(pf pidFile, exe string) bool {
	if pf.start == 0 {
		return !liveProcess(pf, exe)
	}
	start, state, err := procStat(pf.pid)
	if err != nil || state == 'Z' || state == 'X' || start != pf.start {
		return true
	}
	// The same pid and start time, and an exe link that names another program: a stale pid
	// file's process, which was never ours and is not exiting (waiting for it only spent
	// Stop's whole kill wait).
	got, ok := exeOf(pf.pid)
	return ok && got != exe
}

// signalOwn sends sig to the process in pf after checking it is still ours.
func signalOwn(pf pidFile, exe string, sig syscall.Signal) error {
	if !liveProcess(pf, exe) {
		return nil
	}
	if err := syscall.Kill(pf.pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
