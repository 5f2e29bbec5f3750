package kube

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/services/sandbox/internal/backend"
	"github.com/thefold/thefold/services/sandbox/internal/backend/tarsync"
)

// A command is four execs in the sandbox's pod: the copy in (CopyInScript, the host
// workspace's tar stream on its stdin), the command (CommandScript), the kill of whatever
// it left running (KillArgv), and the copy out (CopyOutScript, a tar stream of /workspace
// back, synchronised into the host workspace). The kill is an exec of its own, never part
// of another script, so that a stand-in for the pod (tests) can tell it apart.
//
// The scripts name the workspace only as Workspace (/workspace).
const (
	// CopyInScript empties /workspace (made writable first, in case a command chmod'ed it)
	// and unpacks the tar stream on its stdin there.
	CopyInScript = `chmod -R u+rwX /workspace 2>/dev/null; rm -rf /workspace/* /workspace/.[!.]* /workspace/..?* && exec tar -x -p -f - -C /workspace`
	// CopyOutScript writes /workspace as a tar stream (readable first: tar runs as the
	// sandbox user, which a command may have locked out of its own files).
	CopyOutScript = `chmod -R u+rwX /workspace 2>/dev/null; exec tar -c -f - -C /workspace .`
	// CommandScript runs a command: $1 is its directory, $2-$4 the CPU seconds, file size
	// (512-byte blocks) and open files of its rlimits, then the command (env and timeout
	// in front of it, see commandArgv), exec'd so its exit status is the command's.
	CommandScript = `cd -- "$1" || exit 126; ulimit -t "$2" && ulimit -f "$3" && ulimit -n "$4" || exit 126; shift 4; exec "$@"`
)

// KillArgv ends every process of the sandbox user but the pod's keeper (PID 1, which the
// kernel spares) and the kill itself: how a timed-out command's whole tree dies, and what a
// command left running goes with. exec has no kill of its own, and closing the stream of an
// exec leaves its process running.
var KillArgv = []string{"/bin/kill", "-9", "-1"}

// inPodGrace is how long after its timeout the pod's own `timeout` kills a command: a
// backstop for when the service cannot (it lost the API server, or died), after the kill
// the service sends at the timeout itself.
const inPodGrace = 10 * time.Second

// Run copies workspace into its pod, runs s there, and copies /workspace back. Bad input is
// backend.CheckSpec's; a command that needs the network is refused (the pods have none, and
// the backend has no egress proxy yet); a command that fails or times out is a Result.
func (k *Kube) Run(ctx context.Context, workspace string, s backend.Spec, l backend.Limits) (*backend.Result, error) {
	ws, dir, err := backend.CheckSpec(workspace, s)
	if err != nil {
		return nil, err
	}
	if s.Network {
		return nil, fmt.Errorf("the kubernetes backend has no egress proxy yet: its sandbox pods have no network (a deny-all NetworkPolicy), so a command that installs packages (NETWORK_POLICY_PACKAGES) cannot run there; vendor the dependencies, or use a docker or bwrap sandbox for this step: %w", errs.ErrFailedPrecondition)
	}
	s, l = s.WithDefaults(), l.WithDefaults()
	b, err := k.box(ws)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	start := time.Now()
	if err := k.ensure(ctx, b, l); err != nil {
		return nil, err
	}
	if err := k.copyIn(ctx, b, ws); err != nil {
		return nil, err
	}
	res, err := k.command(ctx, b, dir, s, l)
	if err != nil {
		return nil, err
	}
	// What the command left running goes before the copy out, so the copy is of a
	// workspace nothing writes to any more.
	if err := k.kill(context.WithoutCancel(ctx), b); err != nil {
		res.Warnings = append(res.Warnings, err.Error())
	}
	if err := ctx.Err(); err != nil && !res.TimedOut {
		// The caller went away: the command was killed, and its changes are not kept.
		return nil, fmt.Errorf("command stopped: %w", err)
	}
	if err := k.copyOut(context.WithoutCancel(ctx), b, ws); err != nil {
		return res, err
	}
	res.Duration = time.Since(start)
	return res, nil
}

// copyIn replaces the pod's /workspace with the host workspace ws.
func (k *Kube) copyIn(ctx context.Context, b *box, ws string) error {
	pr, pw := io.Pipe()
	werr := make(chan error, 1)
	go func() {
		err := tarsync.Write(ws, pw)
		pw.CloseWithError(err)
		werr <- err
	}()
	var out bytes.Buffer
	w := &capped{w: &out, n: 4 << 10}
	err := k.exec.Exec(ctx, k.cfg.Namespace, b.pod, Container, []string{"/bin/sh", "-c", CopyInScript}, pr, w, w)
	pr.CloseWithError(io.ErrClosedPipe) // ends the tar writer if the exec stopped early
	if herr := <-werr; herr != nil && !errors.Is(herr, io.ErrClosedPipe) {
		return fmt.Errorf("copy the workspace into the sandbox pod: %w: %w", herr, errs.ErrFailedPrecondition)
	}
	if err != nil {
		if code, ok := exitCode(err); ok {
			return fmt.Errorf("copy the workspace into the sandbox pod: exit %d: %s: %w", code, strings.TrimSpace(out.String()), errs.ErrUnavailable)
		}
		return fmt.Errorf("copy the workspace into the sandbox pod: %w: %w", err, errs.ErrUnavailable)
	}
	return nil
}

// copyOut makes the host workspace ws match the pod's /workspace. Nothing is removed from
// ws unless the whole stream came and tar said it was complete.
func (k *Kube) copyOut(ctx context.Context, b *box, ws string) error {
	pr, pw := io.Pipe()
	var errOut bytes.Buffer
	done := make(chan error, 1)
	go func() {
		err := k.exec.Exec(ctx, k.cfg.Namespace, b.pod, Container, []string{"/bin/sh", "-c", CopyOutScript}, nil, pw, &capped{w: &errOut, n: 4 << 10})
		pw.CloseWithError(err)
		done <- err
	}()
	var execErr error
	waited := false
	commit := func() error {
		// tar pads its stream past the end the reader stops at: the rest is read (and
		// dropped) so that the exec can finish writing it.
		_, _ = io.Copy(io.Discard, pr)
		execErr, waited = <-done, true
		return execErr
	}
	err := tarsync.SyncOut(ws, pr, commit)
	pr.CloseWithError(io.ErrClosedPipe) // a sync that stopped early stops the exec's writes
	if !waited {
		execErr = <-done
	}
	if execErr != nil {
		if code, ok := exitCode(execErr); ok {
			return fmt.Errorf("the command ran, but copying the workspace out of the sandbox pod failed (tar exit %d: %s); the workspace keeps what was copied, nothing was removed: %w", code, strings.TrimSpace(errOut.String()), errs.ErrUnavailable)
		}
		return fmt.Errorf("the command ran, but copying the workspace out of the sandbox pod failed (%w); the workspace keeps what was copied, nothing was removed: %w", execErr, errs.ErrUnavailable)
	}
	if err != nil {
		return fmt.Errorf("the command ran, but copying the workspace out failed: %w: %w", err, errs.ErrFailedPrecondition)
	}
	return nil
}

// commandArgv is the exec of s in the directory dir (workspace-relative) under l.
func commandArgv(dir string, s backend.Spec, l backend.Limits) []string {
	wd := Workspace
	if dir != "" && dir != "." {
		wd = path.Join(Workspace, dir)
	}
	argv := []string{"/bin/sh", "-c", CommandScript, "sandbox", wd,
		strconv.Itoa(l.CPUSeconds), strconv.FormatInt((l.FileSizeBytes+511)/512, 10), strconv.Itoa(l.OpenFiles)}
	if len(s.Env) > 0 {
		// env sets them; the command after it is timeout, so an argv[0] holding '=' is
		// never taken for a variable.
		argv = append(argv, "env")
		for _, name := range slices.Sorted(maps.Keys(s.Env)) {
			argv = append(argv, name+"="+s.Env[name])
		}
	}
	secs := int64(math.Ceil((s.Timeout + inPodGrace).Seconds()))
	argv = append(argv, "timeout", "-s", "KILL", strconv.FormatInt(secs, 10))
	return append(argv, s.Argv...)
}

// command runs s in b's pod, streams and caps its output, and kills it at its timeout or
// when ctx ends.
func (k *Kube) command(ctx context.Context, b *box, dir string, s backend.Spec, l backend.Limits) (*backend.Result, error) {
	o := backend.NewOutput(s.MaxOutput, s.Output)
	// The streams may still deliver after an abandoned exec: nothing reaches o after Run.
	g := &gate{}
	stdout, stderr := g.writer(o.Writer(1)), g.writer(o.Writer(2))
	var stdin io.Reader
	if len(s.Stdin) > 0 {
		stdin = bytes.NewReader(s.Stdin)
	}
	ectx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- k.exec.Exec(ectx, k.cfg.Namespace, b.pod, Container, commandArgv(dir, s, l), stdin, stdout, stderr)
	}()
	res := &backend.Result{}
	timer := time.NewTimer(s.Timeout)
	defer timer.Stop()
	var err error
	select {
	case err = <-done:
	case <-timer.C:
		res.TimedOut = true
	case <-ctx.Done():
	}
	if res.TimedOut || ctx.Err() != nil {
		if kerr := k.kill(context.WithoutCancel(ctx), b); kerr != nil {
			res.Warnings = append(res.Warnings, kerr.Error())
		}
		select {
		case err = <-done:
		case <-time.After(10 * time.Second):
			// The kill did not end the stream (the API server or the node is stuck):
			// stop reading; the pod's own timeout is the backstop.
			cancel()
			err = <-done
		}
	}
	g.close()
	o.Finish(res)
	code, exited := exitCode(err)
	switch {
	case err == nil:
	case exited:
		res.ExitCode = code
	case res.TimedOut || ctx.Err() != nil:
		res.ExitCode = 128 + int(syscall.SIGKILL)
	default:
		return nil, fmt.Errorf("run the command in the sandbox pod: %w: %w", err, errs.ErrUnavailable)
	}
	if c := res.ExitCode; c > 128 && c < 128+65 {
		sig := syscall.Signal(c - 128)
		res.Signal = sig.String()
		if sig == syscall.SIGKILL && !res.TimedOut && ctx.Err() == nil {
			res.OOMKilled = k.newOOMKill(context.WithoutCancel(ctx), b)
		}
	}
	return res, nil
}

// kill runs KillArgv in b's pod. Exit 1 (nothing was left to kill) is success too.
func (k *Kube) kill(ctx context.Context, b *box) error {
	kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	w := &capped{w: &out, n: 1 << 10}
	err := k.exec.Exec(kctx, k.cfg.Namespace, b.pod, Container, KillArgv, nil, w, w)
	if code, ok := exitCode(err); err == nil || (ok && code == 1) {
		return nil
	}
	return fmt.Errorf("killing what the command left running in the sandbox pod failed: %v %s", err, strings.TrimSpace(out.String()))
}

// newOOMKill reports whether the pod's memory cgroup counted an OOM kill since the last
// look. Best effort: a runtime that does not show the counter (gVisor) says no.
func (k *Kube) newOOMKill(ctx context.Context, b *box) bool {
	kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var out bytes.Buffer
	err := k.exec.Exec(kctx, k.cfg.Namespace, b.pod, Container,
		backend.OOMKillCommand,
		nil, &capped{w: &out, n: 4 << 10}, io.Discard)
	if err != nil && out.Len() == 0 {
		return false
	}
	return backend.NewOOMKill(out.Bytes(), &b.oomKills)
}

// capped keeps the first n bytes written to it and drops the rest without failing.
type capped struct {
	mu sync.Mutex
	w  io.Writer
	n  int
}

func (c *capped) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.n; room > 0 {
		_, _ = c.w.Write(p[:min(len(p), room)])
		c.n -= min(len(p), room)
	}
	return len(p), nil
}

// gate drops every write once closed.
type gate struct{ closed atomic.Bool }

func (g *gate) close() { g.closed.Store(true) }

func (g *gate) writer(w io.Writer) io.Writer {
	return writerFunc(func(p []byte) (int, error) {
		if g.closed.Load() {
			return len(p), nil
		}
		return w.Write(p)
	})
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
