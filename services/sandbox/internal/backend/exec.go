package backend

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// drainBound is how long Run waits, after the command and its process group are gone, for
// the output pipes to close. Only a process that escaped both the group and the cgroup (the
// local backend without cgroups, after setsid) can hold them open longer.
const drainBound = 2 * time.Second

// invocation is a fully built command line: wrappers (cgroup join, prlimit, bwrap) then argv.
type invocation struct {
	argv  []string
	env   []string
	dir   string // host directory to start in
	grace time.Duration
	cg    *cgroup
}

// execute runs inv under s's timeout, output cap and streaming, and kills what it started.
func execute(ctx context.Context, inv invocation, s Spec) (*Result, error) {
	res := &Result{}
	out := NewOutput(s.MaxOutput, s.Output)
	runCtx, cancel := context.WithTimeout(ctx, s.Timeout)
	defer cancel()

	path, err := lookPath(inv.argv[0], inv.env)
	if err != nil {
		// The same answer a shell gives: the command is the caller's mistake, not ours.
		out.Write(2, []byte(err.Error()+"\n"))
		res.ExitCode = 127
		out.Finish(res)
		return res, nil
	}
	cmd := &exec.Cmd{Path: path, Args: inv.argv, Env: inv.env, Dir: inv.dir}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
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
	errR, errW, err := os.Pipe()
	if err != nil {
		outR.Close()
		outW.Close()
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	drained := make(chan struct{}, 2)
	go func() { out.Drain(1, outR); drained <- struct{}{} }()
	go func() { out.Drain(2, errR); drained <- struct{}{} }()

	start := time.Now()
	err = cmd.Start()
	outW.Close()
	errW.Close()
	if err != nil {
		outR.Close()
		errR.Close()
		<-drained
		<-drained
		return nil, err
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
			outR.Close()
			errR.Close()
		}
	}
	bound.Stop()
	outR.Close()
	errR.Close()

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
