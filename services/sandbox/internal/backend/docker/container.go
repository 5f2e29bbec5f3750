package docker

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/pkg/stdcopy"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/services/sandbox/internal/backend"
	"github.com/thefold/thefold/services/sandbox/internal/backend/tarsync"
)

// box is one workspace's container. mu serialises the commands of the workspace: each one
// replaces the container's /workspace with the host copy and copies it back afterwards, so
// two at once would overwrite each other's files.
type box struct {
	mu sync.Mutex
	ws string // the host workspace, the box's key
	// who labels the containers made for the workspace (zero: only the dir label is set).
	who      Identity
	id       string
	image    string
	limits   backend.Limits
	oomKills int64
	// restarts counts the restarts of the container by the backend, which empty its
	// /workspace (a tmpfs volume).
	restarts int
	// fresh is set while the container has run no command: there is nothing to reset.
	fresh bool
	// noTar is set once the container's image turned out to have no tar: its commands take
	// the three-step path (reset, copy in through the engine, exec).
	noTar bool
}

const (
	sandboxUser = "65534:65534"
	keeperUser  = "65533:65533"
)

// killAll ends every process of the sandbox user (kill(-1) reaches only the processes the
// caller may signal: not the container's init and keeper, which run as keeperUser). It is how a timed-out command's whole tree dies: exec has no kill of
// its own, and a command may have left its process group (setsid) or double-forked.
// Commands of one workspace never overlap, so nothing else is hit.
var killAll = []string{"/bin/kill", "-9", "-1"}

// resetScript runs before each command: leftovers of the previous one go, and /workspace
// is emptied (made writable first, in case the command chmod'ed it) for the fresh copy.
const resetScript = resetKill + "; " + resetEmpty

// resetKill ends the previous command's leftovers and makes /workspace writable again;
// resetEmpty empties it.
const (
	resetKill  = `kill -9 -1 2>/dev/null; chmod -R u+rwX /workspace 2>/dev/null`
	resetEmpty = `rm -rf /workspace/* /workspace/.[!.]* /workspace/..?*`
)

// ensure creates and starts b's container when it has none, and brings its resource limits
// to l when they changed since the last command.
func (d *Docker) ensure(ctx context.Context, b *box, image string, l backend.Limits) error {
	if b.id != "" {
		if b.limits == l {
			return nil
		}
		_, err := d.cli.ContainerUpdate(ctx, b.id, client.ContainerUpdateOptions{Resources: new(d.resources(l))})
		switch {
		case cerrdefs.IsNotFound(err):
			// Removed behind the backend's back: a new one below, of the same image.
			b.id, image = "", b.image
		case err != nil:
			return fmt.Errorf("update the sandbox container's limits: %w: %w", err, errs.ErrUnavailable)
		default:
			b.limits = l
			return nil
		}
	}
	if id, pl, ok := d.take(image); ok {
		b.id, b.image, b.limits, b.fresh = id, image, pl, true
		if b.who.ID != "" {
			// Its labels name no sandbox (they cannot change): its name does. Best effort:
			// a name still held by a container of a killed process leaves it unnamed.
			_, _ = d.cli.ContainerRename(ctx, id, client.ContainerRenameOptions{NewName: PooledName(b.who.ID)})
		}
		if pl == l {
			return nil
		}
		_, err := d.cli.ContainerUpdate(ctx, b.id, client.ContainerUpdateOptions{Resources: new(d.resources(l))})
		if err == nil {
			b.limits = l
			return nil
		}
		// A pooled container that cannot take the limits goes; a new one below.
		_ = d.remove(context.WithoutCancel(ctx), b)
	}
	return d.create(ctx, b, image, l, d.labels(b))
}

// create creates and starts a container of image with limits l and labels for b.
func (d *Docker) create(ctx context.Context, b *box, image string, l backend.Limits, labels map[string]string) error {
	// exec: go run and go test execute the binaries they build under /tmp (the engine
	// mounts a tmpfs noexec unless told otherwise).
	tmpOpts := fmt.Sprintf("rw,exec,nosuid,nodev,size=%d,uid=%d,gid=%d", d.cfg.tmpSize, sandboxID, sandboxID)
	created, err := d.cli.ContainerCreate(ctx, client.ContainerCreateOptions{
		Config: &container.Config{
			Image: image,
			// The container's own processes (init and its sleep) run as another user than
			// the commands, so the commands' kill(-1) cannot end the container itself.
			User:            keeperUser,
			WorkingDir:      "/workspace",
			Cmd:             []string{"/bin/sleep", "2147483647"},
			NetworkDisabled: true,
			Labels:          labels,
		},
		HostConfig: &container.HostConfig{
			// An init reaps what the commands orphan: without it a killed command's
			// children stay zombies of a PID 1 that never waits, and hold pids forever.
			Init:           new(true),
			NetworkMode:    "none",
			ReadonlyRootfs: true,
			CapDrop:        []string{"ALL"},
			SecurityOpt:    []string{"no-new-privileges"},
			// This engine ignores a tmpfs mode=; uid/gid make it the sandbox user's.
			Tmpfs:     map[string]string{"/tmp": tmpOpts},
			Resources: d.resources(l),
			// /workspace is a tmpfs-backed anonymous volume rather than a plain tmpfs mount:
			// the engine's archive API (CopyToContainer/CopyFromContainer) sees volumes but
			// not tmpfs mounts. RemoveVolumes on removal deletes it with the container.
			Mounts: append(d.toolchainMounts(ctx, image), mount.Mount{
				Type:   mount.TypeVolume,
				Target: "/workspace",
				VolumeOptions: &mount.VolumeOptions{DriverConfig: &mount.Driver{
					Name: "local",
					Options: map[string]string{
						"type":   "tmpfs",
						"device": "tmpfs",
						"o":      fmt.Sprintf("size=%d,uid=%d,gid=%d,nosuid,nodev", d.cfg.workspaceSize, sandboxID, sandboxID),
					},
				}},
			}),
		},
	})
	if err != nil {
		if cerrdefs.IsNotFound(err) {
			return fmt.Errorf("sandbox image %q is not there (build it with BuildGoImage): %w", image, errs.ErrFailedPrecondition)
		}
		return fmt.Errorf("create the sandbox container: %w: %w", err, errs.ErrUnavailable)
	}
	b.id, b.image, b.limits, b.fresh = created.ID, image, l, true
	if _, err := d.cli.ContainerStart(ctx, b.id, client.ContainerStartOptions{}); err != nil {
		_ = d.remove(context.WithoutCancel(ctx), b)
		return fmt.Errorf("start the sandbox container: %w: %w", err, errs.ErrUnavailable)
	}
	return nil
}

func (d *Docker) resources(l backend.Limits) container.Resources {
	pids := int64(l.Pids)
	cpus := d.cfg.nanoCPUs
	if l.CPUs > 0 {
		cpus = int64(l.CPUs * 1e9) // the sandbox's own share (the service bounds it by the machine's cores)
	}
	return container.Resources{
		Memory:     l.MemoryBytes,
		MemorySwap: l.MemoryBytes, // equal to Memory: no swap on top
		NanoCPUs:   cpus,
		PidsLimit:  &pids,
	}
}

func (d *Docker) remove(ctx context.Context, b *box) error {
	if b.id == "" {
		return nil
	}
	err := forceRemove(ctx, d.cli, b.id)
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("remove the sandbox container %s: %w: %w", short(b.id), err, errs.ErrUnavailable)
	}
	d.forget(b.id)
	b.id = ""
	return nil
}

// removeID force-removes a container that belongs to no box (a pooled one).
func (d *Docker) removeID(id string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = forceRemove(ctx, d.cli, id)
	d.forget(id)
}

// forceRemove force-removes the container id with its volumes. The engine's storage driver
// sometimes fails to remove a just-killed container's root file system ("directory not
// empty", moby/moby#30392, with fuse-overlayfs here too) and succeeds when asked again: it
// is asked up to three times.
func forceRemove(ctx context.Context, cli *client.Client, id string) error {
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		if attempt > 0 {
			select {
			case <-ctx.Done():
				return err
			case <-time.After(time.Duration(attempt) * 200 * time.Millisecond):
			}
		}
		_, err = cli.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
		if err == nil || cerrdefs.IsNotFound(err) || !strings.Contains(err.Error(), "failed to remove root filesystem") {
			return err
		}
	}
	return err
}

// run is one command: reset, copy in, exec, copy out. A command with no stdin of its own
// does the first three in one exec (oneExec); one with stdin, or in an image without tar,
// takes three: the reset's exec, the copy in through the engine's archive API, the exec.
func (d *Docker) run(ctx context.Context, b *box, ws, dir string, s backend.Spec, l backend.Limits) (*backend.Result, error) {
	if s.Timeout <= 0 {
		s.Timeout = backend.DefaultTimeout
	}
	if s.MaxOutput <= 0 {
		s.MaxOutput = backend.DefaultMaxOutput
	}
	start := time.Now()
	// A container that is not running (its init died with an OOM kill, say) takes the
	// three-step path: its reset restarts it.
	started, err := d.startedAt(ctx, b.id)
	running := err == nil
	restarts := b.restarts
	var res *backend.Result
	if running && len(s.Stdin) == 0 && !b.noTar {
		res, err = d.oneExec(ctx, b, ws, dir, s, l)
		if errors.Is(err, errWrapperNotRun) && ctx.Err() != nil {
			return nil, fmt.Errorf("command stopped: %w", ctx.Err())
		}
		if errors.Is(err, errWrapperNotRun) {
			// Nothing ran (the exec could not start: a pid-starved container, say): the
			// three steps below reset it, restarting it when they must.
			b.fresh = false
			res, err = nil, nil
		} else if err != nil {
			return nil, err
		}
	}
	if res == nil {
		if !b.fresh || !running {
			if err := d.reset(ctx, b); err != nil {
				return nil, err
			}
		}
		if started, err = d.startedAt(ctx, b.id); err != nil {
			return nil, err
		}
		restarts = b.restarts
		b.fresh = false
		pr, pw := io.Pipe()
		go func() { pw.CloseWithError(tarsync.Write(ws, pw)) }()
		_, err = d.cli.CopyToContainer(ctx, b.id, client.CopyToContainerOptions{DestinationPath: "/workspace", Content: pr, AllowOverwriteDirWithFile: true})
		pr.CloseWithError(io.ErrClosedPipe) // ends the tar writer if the copy stopped early
		if err != nil {
			return nil, fmt.Errorf("copy the workspace into the container: %w: %w", err, errs.ErrUnavailable)
		}
		res, err = d.execCommand(ctx, b, dir, s, l, nil)
		if err != nil {
			return nil, err
		}
	}
	b.fresh = false
	if s.Discard {
		// Nothing to copy back: the next command empties /workspace and copies the host's
		// workspace in, as always. The copy out is most of a short command's time here
		// (the engine's archive of a running container: 160–200 ms against an exec's 120).
		res.Duration = time.Since(start)
		return res, nil
	}

	// The copy out must come from the container the command ran in, still running: a
	// restart or a stop empties /workspace (a tmpfs volume), and an empty copy would delete
	// the host workspace.
	if b.restarts != restarts {
		res.Warnings = append(res.Warnings, "the container was restarted to kill the command (it held every pid): the command's changes to the workspace are lost")
		res.Duration = time.Since(start)
		return res, nil
	}
	out, err := d.cli.CopyFromContainer(context.WithoutCancel(ctx), b.id, client.CopyFromContainerOptions{SourcePath: "/workspace/."})
	if err != nil {
		return res, fmt.Errorf("the command ran, but copying the workspace out failed: %w: %w", err, errs.ErrUnavailable)
	}
	defer out.Content.Close()
	same := func() error {
		now, err := d.startedAt(context.WithoutCancel(ctx), b.id)
		if err == nil && now != started {
			err = errors.New("it was restarted")
		}
		if err != nil {
			return fmt.Errorf("%w (%v); the workspace keeps its files from before the command: %w", errContainerStopped, err, errs.ErrUnavailable)
		}
		return nil
	}
	if err := tarsync.SyncOut(ws, out.Content, same); err != nil {
		if errors.Is(err, errContainerStopped) {
			// The command ended with its container (a memory hog whose OOM kill took the
			// container's init, say): its result stands, its changes are lost, and the
			// next command restarts the container.
			res.Warnings = append(res.Warnings, "the sandbox container stopped during the command: its changes to the workspace are lost; the next command restarts the container")
			res.Duration = time.Since(start)
			return res, nil
		}
		if errors.Is(err, errs.ErrUnavailable) {
			return res, err
		}
		return res, fmt.Errorf("the command ran, but copying the workspace out failed: %w: %w", err, errs.ErrFailedPrecondition)
	}
	res.Duration = time.Since(start)
	return res, nil
}

// errContainerStopped is the copy-out's refusal when the container the command ran in
// stopped or restarted meanwhile.
var errContainerStopped = errors.New("the sandbox container stopped or went during the command")

// startedAt is when the running container id last started: it changes with a restart, and
// a container that is not running has none (an error).
func (d *Docker) startedAt(ctx context.Context, id string) (string, error) {
	in, err := d.cli.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return "", fmt.Errorf("inspect the sandbox container: %w: %w", err, errs.ErrUnavailable)
	}
	if in.Container.State == nil || !in.Container.State.Running {
		return "", fmt.Errorf("the sandbox container is not running: %w", errs.ErrUnavailable)
	}
	return in.Container.State.StartedAt, nil
}

// errWrapperNotRun is oneExec's answer when its exec never ran the shell that would reset the
// container and run the command: nothing ran, and the three-step path may run it.
var errWrapperNotRun = errors.New("the command's exec did not start")

// oneExec resets the container, unpacks the host workspace into /workspace from the exec's
// stdin and runs the command, in one exec: one round trip of the engine where the
// three-step path takes three. The shell (oneExecScript) marks that it ran with a line of
// the run's nonce, first on stderr, which is taken out of the command's output; without it
// nothing ran (errWrapperNotRun). A failed unpack is reported with the nonce and exit 125
// before the command runs: an image without tar (the box takes the three-step path from
// then on: errWrapperNotRun), or a workspace too large for the container's (an error, as a
// failed copy through the engine is).
func (d *Docker) oneExec(ctx context.Context, b *box, ws, dir string, s backend.Spec, l backend.Limits) (*backend.Result, error) {
	nonce := rand.Text()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(tarsync.Write(ws, pw)) }()
	defer pr.CloseWithError(io.ErrClosedPipe) // ends the tar writer if the exec stopped early
	res, err := d.execCommand(ctx, b, dir, s, l, &wrapper{nonce: nonce, in: pr})
	if err != nil {
		return nil, err
	}
	if res.ExitCode == copyInFailed && bytes.HasPrefix(res.Stderr, []byte(nonce+" reset: ")) {
		// What the last command left could not be cleared (its reset failed before the
		// command ran): the three steps' reset restarts the container.
		return nil, errWrapperNotRun
	}
	if res.ExitCode == copyInFailed {
		if msg, ok := bytes.CutPrefix(res.Stderr, []byte(nonce+" copy-in ")); ok {
			code, msg, _ := bytes.Cut(bytes.TrimSpace(msg), []byte(": "))
			if string(code) == "127" { // the shell found no tar
				b.noTar = true
				return nil, errWrapperNotRun
			}
			return nil, fmt.Errorf("copy the workspace into the container: tar exit %s: %s: %w", code, msg, errs.ErrUnavailable)
		}
	}
	return res, nil
}

// copyInFailed is oneExecScript's exit when the workspace could not be unpacked.
const copyInFailed = 125

// oneExecScript is oneExec's shell, with tar the unpacking program: $1 is the run's nonce,
// then the rlimits, then the command. It says it runs (the nonce on stderr); resets what the
// previous command left as resetScript does, in this shell, since kill -9 -1 spares only its
// caller (a failure is "<nonce> reset: <its output>" and exit 125); unpacks the workspace
// from stdin (a failure is "<nonce> copy-in <tar's exit>: <its output>" and exit 125); and
// execs the command under the rlimits.
func oneExecScript(tar string) string {
	return `n=$1; shift; printf '%s\n' "$n" >&2
` + resetKill + `
e=$(` + resetEmpty + ` 2>&1) || { printf '%s reset: %s\n' "$n" "$e" >&2; exit 125; }
e=$(` + tar + ` -x -p -f - -C /workspace 2>&1); c=$?
if [ "$c" -ne 0 ]; then printf '%s copy-in %s: %s\n' "$n" "$c" "$e" >&2; exit 125; fi
ulimit -t "$1" && ulimit -f "$2" && ulimit -n "$3" || exit 126; shift 3; exec "$@"`
}

// wrapper is what oneExec adds to execCommand: the nonce its shell prints first on stderr,
// and the stdin to give it (the workspace's tar stream).
type wrapper struct {
	nonce string
	in    io.Reader
}

// execCommand runs s under a shell that applies the per-process rlimits and then execs the
// command itself, so the exit status is the command's; with w, under oneExecScript, which
// resets the container and unpacks w.in first (errWrapperNotRun when that shell never ran).
func (d *Docker) execCommand(ctx context.Context, b *box, dir string, s backend.Spec, l backend.Limits, w *wrapper) (*backend.Result, error) {
	script := fmt.Sprintf(`ulimit -t %d && ulimit -f %d && ulimit -n %d || exit 126; exec "$@"`,
		l.CPUSeconds, (l.FileSizeBytes+511)/512, l.OpenFiles)
	cmd := append([]string{"/bin/sh", "-c", script, "sandbox"}, s.Argv...)
	if w != nil {
		cmd = append([]string{"/bin/sh", "-c", oneExecScript(d.tar), "sandbox", w.nonce,
			fmt.Sprint(l.CPUSeconds), fmt.Sprint((l.FileSizeBytes + 511) / 512), fmt.Sprint(l.OpenFiles)}, s.Argv...)
	}
	env := make([]string, 0, len(s.Env))
	for _, k := range sortedKeys(s.Env) {
		env = append(env, k+"="+s.Env[k])
	}
	wd := "/workspace"
	if dir != "." && dir != "" {
		wd += "/" + dir
	}
	ex, err := d.cli.ExecCreate(ctx, b.id, client.ExecCreateOptions{
		User: sandboxUser, AttachStdin: true, AttachStdout: true, AttachStderr: true,
		Env: env, WorkingDir: wd, Cmd: cmd,
	})
	if err != nil {
		return nil, fmt.Errorf("create the command in the container: %w: %w", err, errs.ErrUnavailable)
	}
	att, err := d.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		if w != nil {
			return nil, fmt.Errorf("%w: %w", errWrapperNotRun, err)
		}
		return nil, fmt.Errorf("start the command in the container: %w: %w", err, errs.ErrUnavailable)
	}
	defer att.Close()
	go func() {
		if w != nil {
			_, _ = io.Copy(att.Conn, w.in)
		} else if len(s.Stdin) > 0 {
			_, _ = att.Conn.Write(s.Stdin)
		}
		_ = att.CloseWrite() // EOF on stdin: a command reading it does not wait forever
	}()
	o := backend.NewOutput(s.MaxOutput, s.Output)
	stderr := o.Writer(2)
	var mark *markLine
	if w != nil {
		mark = &markLine{line: []byte(w.nonce + "\n"), next: stderr}
		stderr = mark
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = stdcopy.StdCopy(o.Writer(1), stderr, att.Reader)
		if mark != nil {
			mark.flush()
		}
	}()

	res := &backend.Result{}
	timer := time.NewTimer(s.Timeout)
	defer timer.Stop()
	select {
	case <-done:
	case <-timer.C:
		res.TimedOut = true
	case <-ctx.Done():
	}
	if res.TimedOut || ctx.Err() != nil {
		if err := d.killCommand(context.WithoutCancel(ctx), b); err != nil {
			res.Warnings = append(res.Warnings, err.Error())
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			// Everything is dead or the engine is stuck: stop reading either way.
			att.Close()
			<-done
		}
	}
	o.Finish(res)
	if mark != nil && !mark.seen {
		return nil, errWrapperNotRun
	}

	code, err := d.exitCode(context.WithoutCancel(ctx), ex.ID)
	if err != nil {
		return nil, err
	}
	res.ExitCode = code
	if code > 128 && code < 128+65 {
		sig := syscall.Signal(code - 128)
		res.Signal = sig.String()
		if sig == syscall.SIGKILL && !res.TimedOut {
			res.OOMKilled = d.newOOMKill(context.WithoutCancel(ctx), b)
		}
	}
	if err := ctx.Err(); err != nil && !res.TimedOut {
		return res, fmt.Errorf("command stopped: %w", err)
	}
	return res, nil
}

// reset clears what the previous command left. When that cannot even start (a fork bomb
// left running holds every pid), the container is restarted and the reset tried again. A
// container that is gone (removed by hand, by the reconciliation of another process of
// the service, or with the engine's state) is made anew: the host workspace, copied in
// next, is the source of truth; only /tmp and its caches are lost.
func (d *Docker) reset(ctx context.Context, b *box) error {
	if _, err := d.execOutput(ctx, b.id, []string{"/bin/sh", "-c", resetScript}); err == nil {
		return nil
	}
	if _, err := d.cli.ContainerInspect(ctx, b.id, client.ContainerInspectOptions{}); cerrdefs.IsNotFound(err) {
		d.cfg.logger.WarnContext(ctx, "docker: the sandbox container is gone; making a new one", "container", short(b.id), "sandbox", b.who.ID)
		b.id = ""
		if err := d.ensure(ctx, b, b.image, b.limits); err != nil {
			return err
		}
	} else if err := d.restart(ctx, b); err != nil {
		return err
	}
	if _, err := d.execOutput(ctx, b.id, []string{"/bin/sh", "-c", resetScript}); err != nil {
		return fmt.Errorf("reset the sandbox container: %w", err)
	}
	return nil
}

func (d *Docker) restart(ctx context.Context, b *box) error {
	zero := 0
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := d.cli.ContainerRestart(rctx, b.id, client.ContainerRestartOptions{Signal: "SIGKILL", Timeout: &zero}); err != nil {
		return fmt.Errorf("restart the sandbox container: %w: %w", err, errs.ErrUnavailable)
	}
	b.restarts++
	return nil
}

// killCommand kills every process the command started. The kill itself is an exec, which
// needs a free pid: when a fork bomb has taken them all, the exec cannot start, and the
// container is restarted instead (its init killed takes every process with it; /workspace
// is a volume and survives, /tmp and its caches do not).
func (d *Docker) killCommand(ctx context.Context, b *box) error {
	kctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// kill exits 1 when nothing was left to kill: that is success too.
	_, err := d.execOutput(kctx, b.id, killAll, 1)
	if err == nil {
		return nil
	}
	if rerr := d.restart(ctx, b); rerr != nil {
		return fmt.Errorf("killing the command failed (%v), and so did restarting its container: %w", err, rerr)
	}
	return nil
}

// exitCode waits (briefly: the streams have closed, so the process is gone or going) for the
// engine to record the exec's exit.
func (d *Docker) exitCode(ctx context.Context, execID string) (int, error) {
	deadline := time.Now().Add(5 * time.Second)
	for {
		in, err := d.cli.ExecInspect(ctx, execID, client.ExecInspectOptions{})
		if err != nil {
			return 0, fmt.Errorf("inspect the command: %w: %w", err, errs.ErrUnavailable)
		}
		if !in.Running {
			return in.ExitCode, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the command's output ended but the engine still reports it running: %w", errs.ErrUnavailable)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// newOOMKill reports whether the container's memory cgroup counted an OOM kill since the
// last look. Best effort: an engine or kernel that does not expose the counter says no.
func (d *Docker) newOOMKill(ctx context.Context, b *box) bool {
	out, err := d.execOutput(ctx, b.id, backend.OOMKillCommand)
	if err != nil {
		return false
	}
	return backend.NewOOMKill(out, &b.oomKills)
}

// execOutput runs a housekeeping command in the container and returns its stdout; an exit
// other than 0 and okCodes is an error carrying its stderr.
func (d *Docker) execOutput(ctx context.Context, id string, cmd []string, okCodes ...int) ([]byte, error) {
	ex, err := d.cli.ExecCreate(ctx, id, client.ExecCreateOptions{User: sandboxUser, AttachStdout: true, AttachStderr: true, Cmd: cmd})
	if err != nil {
		return nil, fmt.Errorf("exec %q: %w: %w", cmd[0], err, errs.ErrUnavailable)
	}
	att, err := d.cli.ExecAttach(ctx, ex.ID, client.ExecAttachOptions{})
	if err != nil {
		return nil, fmt.Errorf("exec %q: %w: %w", cmd[0], err, errs.ErrUnavailable)
	}
	defer att.Close()
	var stdout, stderr bytes.Buffer
	if _, err := stdcopy.StdCopy(&stdout, &stderr, att.Reader); err != nil {
		return nil, fmt.Errorf("exec %q: %w: %w", cmd[0], err, errs.ErrUnavailable)
	}
	code, err := d.exitCode(ctx, ex.ID)
	if err != nil {
		return nil, err
	}
	if code != 0 && !slices.Contains(okCodes, code) {
		return nil, fmt.Errorf("exec %q: exit %d: %s: %w", cmd[0], code, strings.TrimSpace(stderr.String()), errs.ErrUnavailable)
	}
	return stdout.Bytes(), nil
}

// markLine passes a stream on to next without its first line when that line is exactly
// line (oneExecScript's nonce), and says whether it was; a stream that starts otherwise
// goes on whole.
type markLine struct {
	line    []byte
	next    io.Writer
	buf     []byte
	decided bool
	seen    bool
}

func (m *markLine) Write(p []byte) (int, error) {
	if m.decided {
		return m.next.Write(p)
	}
	m.buf = append(m.buf, p...)
	switch {
	case len(m.buf) >= len(m.line) && bytes.Equal(m.buf[:len(m.line)], m.line):
		m.decided, m.seen = true, true
		rest := m.buf[len(m.line):]
		m.buf = nil
		if len(rest) > 0 {
			_, _ = m.next.Write(rest)
		}
	case !bytes.HasPrefix(m.line, m.buf) && !bytes.HasPrefix(m.buf, m.line):
		m.flush()
	}
	return len(p), nil
}

// flush ends the wait for the first line: what is held goes on.
func (m *markLine) flush() {
	if m.decided {
		return
	}
	m.decided = true
	if len(m.buf) > 0 {
		_, _ = m.next.Write(m.buf)
	}
	m.buf = nil
}
