package backend

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"
)

// drainBound is how long Run waits, after the command and its process group are gone, for
// the output pipes to close. Only a process that escaped both the group and the cgroup (the
// local backend without cgroups, after setsid) can hold them open longer.
const drainBound = 2 * time.Second

// invocation is a fully built command line (bwrap's, or the command itself) and how to
// confine it, so that the command is confined before it runs its first instruction:
//
//   - the command itself (the local backend) starts under a /bin/sh gate that joins the
//     cgroups, waits until execute has set the rlimits on it, and then execs argv;
//   - bwrap (bwrapSync) is told to stop before it runs the command (--block-fd 3) and to say
//     which host process will (--info-fd 4, its "child-pid", the sandbox's pid 1, which
//     forks the command): execute moves that process into the cgroups, sets its rlimits and
//     then lets it go on. No shell is started: that saves a process per command.
type invocation struct {
	argv      []string
	env       []string
	dir       string // host directory to start in
	grace     time.Duration
	cg        *cgroup
	limits    Limits
	bwrapSync bool // argv is bwrap's, with --block-fd 3 --info-fd 4
	// launcher, when set, runs argv (bwrap's, without the sync options): its shell is
	// already in cg, and env and dir are its own.
	launcher *launcher
}

// bwrapSyncArgs are the options a bwrapSync invocation's bwrap command line carries: the
// descriptors execute passes it as ExtraFiles (3 and 4).
var bwrapSyncArgs = []string{"--block-fd", "3", "--info-fd", "4"}

// gateScript joins the cgroup directories given first ($1 of them), waits for one line on
// fd 3 (execute writes it once the rlimits are set on this shell; EOF means they could not
// be), closes fd 3 and execs the rest. Arguments are passed as arguments ("$@"), never
// interpolated into the script.
const gateScript = `n=$1; shift; while [ "$n" -gt 0 ]; do echo $$ > "$1/cgroup.procs" || exit 126; shift; n=$((n-1)); done; read -r _ <&3 || exit 126; exec 3<&-; exec "$@"`

// gate is argv under gateScript with the cgroup directories dirs.
func gate(dirs, argv []string) []string {
	out := append([]string{"/bin/sh", "-c", gateScript, "sh", strconv.Itoa(len(dirs))}, dirs...)
	return append(out, argv...)
}

// rlimitNPROC is RLIMIT_NPROC, which package syscall does not name.
const rlimitNPROC = 6

// setRlimits bounds the process pid (the gate's shell, which then execs the command, whose
// children inherit them) with l's rlimits; RLIMIT_DATA stands in for the memory cgroup
// when there is none: it is per process, but unlike RLIMIT_AS it leaves the Go runtime's
// address-space reservations alone.
func setRlimits(pid int, l Limits, noMemoryCgroup bool) error {
	set := [][2]uint64{
		{syscall.RLIMIT_CPU, uint64(l.CPUSeconds)},
		{syscall.RLIMIT_FSIZE, uint64(l.FileSizeBytes)},
		{syscall.RLIMIT_NOFILE, uint64(l.OpenFiles)},
		{rlimitNPROC, uint64(l.Pids)},
	}
	if noMemoryCgroup {
		set = append(set, [2]uint64{syscall.RLIMIT_DATA, uint64(l.MemoryBytes)})
	}
	for _, r := range set {
		lim := syscall.Rlimit{Cur: r[1], Max: r[1]}
		if _, _, e := syscall.RawSyscall6(syscall.SYS_PRLIMIT64, uintptr(pid), uintptr(r[0]), uintptr(unsafe.Pointer(&lim)), 0, 0, 0); e != 0 {
			return fmt.Errorf("set rlimit %d of the command: %w", r[0], e)
		}
	}
	return nil
}

// execute runs inv under s's timeout, output cap and streaming, and kills what it started.
func execute(ctx context.Context, inv invocation, s Spec) (*Result, error) {
	res := &Result{}
	out := NewOutput(s.MaxOutput, s.Output)
	runCtx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()

	start := time.Now()
	var p *started
	if inv.launcher != nil {
		l := inv.launcher
		p = &started{cmd: l.cmd, outR: l.outR, errR: l.errR, goOn: func() error { return l.launch(inv.argv) }}
	} else {
		if _, err := lookPath(inv.argv[0], inv.env); err != nil {
			// The same answer a shell gives: the command is the caller's mistake, not ours.
			out.Write(2, []byte(err.Error()+"\n"))
			res.ExitCode = 127
			out.Finish(res)
			return res, nil
		}
		var err error
		if p, err = startDirect(inv, s); err != nil {
			return nil, err
		}
	}
	cmd := p.cmd
	drained := make(chan struct{}, 2)
	go func() { out.Drain(1, p.outR); drained <- struct{}{} }()
	go func() { out.Drain(2, p.errR); drained <- struct{}{} }()

	if err := p.goOn(); err != nil {
		_ = cmd.Process.Kill()
		if inv.launcher != nil {
			// The launcher's shell is gone or got no script: nothing ran; the run is
			// made without it.
			inv.cg.kill()
			_ = cmd.Wait()
			p.outR.Close()
			p.errR.Close()
			<-drained
			<-drained
			return nil, err
		}
	}
	pgid := cmd.Process.Pid

	exited := make(chan struct{})
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		select {
		case <-exited:
			return
		case <-runCtx.Done():
		}
		_ = syscall.Kill(-pgid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(inv.grace):
		}
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		inv.cg.kill()
	}()

	waitErr := cmd.Wait()
	res.Duration = time.Since(start)
	close(exited)
	<-killed
	// The command is done: nothing it left running in its group or cgroup may outlive Run.
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	if len(inv.cg.dirs()) > 0 {
		inv.cg.kill() // returns once the cgroup is empty
	} else {
		awaitGroupGone(pgid, drainBound) // a signal is delivered asynchronously
	}
	bound := time.NewTimer(drainBound)
	for n := 0; n < 2; {
		select {
		case <-drained:
			n++
		case <-bound.C:
			p.outR.Close()
			p.errR.Close()
		}
	}
	bound.Stop()
	p.outR.Close()
	p.errR.Close()

	if ctx.Err() == nil && errors.Is(runCtx.Err(), context.DeadlineExceeded) {
		res.TimedOut = true
	}
	res.OOMKilled = inv.cg.oomKilled()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = ws.Signal().String()
		res.ExitCode = 128 + int(ws.Signal())
	} else {
		res.ExitCode = cmd.ProcessState.ExitCode()
	}
	var ee *exec.ExitError
	if waitErr != nil && !errors.As(waitErr, &ee) && !errors.Is(waitErr, exec.ErrWaitDelay) {
		return nil, waitErr
	}
	out.Finish(res)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	return res, nil
}

// started is an invocation's process, started and confined, whose command has not run yet.
type started struct {
	cmd        *exec.Cmd
	outR, errR *os.File // the read ends of its stdout and stderr
	// goOn lets the command run: the gate's line, bwrap's block pipe, the launcher's
	// script. An error means it will not.
	goOn func() error
}

// startDirect starts inv's command line (the gate's shell, or bwrap) and confines it.
func startDirect(inv invocation, s Spec) (_ *started, err error) {
	argv := inv.argv
	if !inv.bwrapSync {
		argv = gate(inv.cg.dirs(), inv.argv)
	}
	cmd := &exec.Cmd{Path: argv[0], Args: argv, Env: inv.env, Dir: inv.dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	var ours, theirs []*os.File // our ends (kept on success), the command's (always closed)
	defer func() {
		closeAll(theirs)
		if err != nil {
			closeAll(ours)
		}
	}()
	// The gate's (or bwrap's block) pipe: the command waits on it until it is confined.
	gateR, gateW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ours, theirs = append(ours, gateW), append(theirs, gateR)
	cmd.ExtraFiles = []*os.File{gateR}
	var infoR *os.File
	if inv.bwrapSync {
		// bwrap's info pipe: EOF once bwrap is gone.
		var infoW *os.File
		if infoR, infoW, err = os.Pipe(); err != nil {
			return nil, err
		}
		defer infoR.Close()
		theirs = append(theirs, infoW)
		cmd.ExtraFiles = append(cmd.ExtraFiles, infoW)
	}
	if len(s.Stdin) > 0 {
		cmd.Stdin = bytes.NewReader(s.Stdin)
		// Wait also waits for stdin to be copied; a process left holding the pipe unread
		// must not keep Run waiting once the command has exited.
		cmd.WaitDelay = drainBound
	}
	// Our own pipes instead of io.Writers: Wait then returns when the command exits rather
	// than when every process holding the pipes has, so leftovers can be killed.
	outR, outW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ours, theirs = append(ours, outR), append(theirs, outW)
	errR, errW, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	ours, theirs = append(ours, errR), append(theirs, errW)
	cmd.Stdout, cmd.Stderr = outW, errW
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	closeAll(theirs) // the command has them
	theirs = nil
	if err = confine(cmd.Process.Pid, infoR, inv); errors.Is(err, errBwrapNoChild) {
		err = nil // bwrap is exiting: its status and message are the result
	} else if err != nil {
		// The gate, or bwrap's child, reads EOF and exits without running the command.
		gateW.Close()
		_ = cmd.Process.Kill()
		inv.cg.kill()
		_ = cmd.Wait()
		return nil, err
	}
	goOn := func() error {
		defer gateW.Close()
		_, err := gateW.Write([]byte("\n"))
		return err
	}
	return &started{cmd: cmd, outR: outR, errR: errR, goOn: goOn}, nil
}

// confine puts the started invocation's command process under inv's cgroups and rlimits:
// the gate's shell (pid), or the process bwrap names on infoR, which it made and which has
// not yet run the command.
func confine(pid int, infoR *os.File, inv invocation) error {
	if !inv.bwrapSync {
		return setRlimits(pid, inv.limits, inv.cg.memory == "")
	}
	var info struct {
		ChildPid int `json:"child-pid"`
	}
	if err := json.NewDecoder(infoR).Decode(&info); err != nil || info.ChildPid <= 0 {
		// bwrap exited before making the sandbox (its stderr says why) or said nothing.
		return errBwrapNoChild
	}
	err := func() error {
		for _, d := range inv.cg.dirs() {
			if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(info.ChildPid)), 0o644); err != nil {
				return fmt.Errorf("move the sandbox into its cgroup: %w", err)
			}
		}
		return setRlimits(info.ChildPid, inv.limits, inv.cg.memory == "")
	}()
	if errors.Is(err, syscall.ESRCH) {
		// The child is already gone: bwrap failed after making it (a mount it could not
		// make), and says so.
		return errBwrapNoChild
	}
	return err
}

// errBwrapNoChild is confine's answer when bwrap exits without making a sandbox: the run
// goes on to report bwrap's own exit status and message.
var errBwrapNoChild = errors.New("bwrap made no sandbox")

// lookPath resolves name through the PATH in env (the sandbox's), not this process's.
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	var pathVar string
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			pathVar = v
		}
	}
	for _, d := range filepath.SplitList(pathVar) {
		if d == "" || !filepath.IsAbs(d) {
			continue // a relative PATH entry would resolve against the workspace
		}
		p := filepath.Join(d, name)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New(name + ": command not found in PATH " + pathVar)
}

// awaitGroupGone waits, at most bound, until no live (non-zombie) process is left in the
// process group pgid, so that "killed" means gone when Run returns.
func awaitGroupGone(pgid int, bound time.Duration) {
	deadline := time.Now().Add(bound)
	for time.Now().Before(deadline) && groupAlive(pgid) {
		time.Sleep(2 * time.Millisecond)
	}
}

func groupAlive(pgid int) bool {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return false
	}
	for _, e := range ents {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		// After the parenthesised command name (which may hold spaces): state ppid pgrp …
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) > 2 && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}
