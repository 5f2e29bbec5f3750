package backend

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Moving a process into a cgroup (writing cgroup.procs) makes the kernel wait for an RCU
// grace period whenever no other move happened in the last few milliseconds: 3 to 8 ms
// here, more than the whole sandbox takes otherwise, and every run paid it. A process that
// a process already in the group forks starts in it at no cost. So the bwrap backend keeps
// a few launchers ready: each a shell, started ahead of time in fresh, empty groups of its
// own and moved there in the background, waiting for one script on a pipe. A run takes one,
// sets its limits on the groups and its rlimits on the shell, and writes it the script
// that execs bwrap: bwrap, the sandbox and the command all start inside the run's groups,
// under its limits, and no move is left on the run's time. (The sandbox's cgroup namespace,
// which bwrap unshares, is then rooted at the run's own group: the command sees "/" there,
// not the host's group paths.) A launcher serves one run; its groups are removed after it
// and never used again. When none is ready (a burst of runs), or the run has stdin, the run
// starts bwrap itself as before.

// launcherPool is how many launchers the bwrap backend keeps ready.
const launcherPool = 2

// launcherShell is what a launcher runs: it reads its script from fd 3 and runs it; the
// script execs bwrap. The script is written at once and closed. If the pipe closes with no
// script (the service exited or was killed without ending its launchers), the shell
// leaves its groups for their parents and removes them, so that no empty group is left
// behind. Its arguments are pairs of those directories, passed as arguments, never
// interpolated into the script.
const launcherShell = `. /proc/self/fd/3; while [ $# -gt 1 ]; do echo $$ > "$1/cgroup.procs" && rmdir "$2"; shift 2; done`

// launcher is a started shell waiting for its script, in its own groups.
type launcher struct {
	cmd        *exec.Cmd
	script     *os.File // the write end of the shell's fd 3
	outR, errR *os.File // the read ends of its stdout and stderr
	cg         *cgroup
	warns      []string // which limits the groups cannot enforce, for the run's result
	// limits are what the groups were given ahead of time (nil: nothing yet): the limits
	// runs asked for last, so that a run asking the same writes nothing.
	limits *Limits
}

// errLauncherGone says a launcher's shell was gone when its script came: the run is made
// without it.
var errLauncherGone = errors.New("sandbox launcher gone")

// startLauncher starts a launcher's shell in new, empty groups of owner (not yet joined).
func startLauncher(owner string, noCgroup bool) (_ *launcher, err error) {
	cg, warns := makeCgroup(owner, noCgroup)
	var ours, theirs []*os.File // our ends (kept on success), the shell's (always closed)
	defer func() {
		closeAll(theirs)
		if err != nil {
			closeAll(ours)
			cg.remove()
		}
	}()
	pipe := func(ourEnd int) (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err == nil {
			pair := []*os.File{r, w}
			ours, theirs = append(ours, pair[ourEnd]), append(theirs, pair[1-ourEnd])
		}
		return r, w, err
	}
	scriptR, scriptW, err := pipe(1)
	if err != nil {
		return nil, err
	}
	outR, outW, err := pipe(0)
	if err != nil {
		return nil, err
	}
	errR, errW, err := pipe(0)
	if err != nil {
		return nil, err
	}
	// The shell's (and so bwrap's) own environment is minimal too; bwrap sets the
	// sandbox's. Its directory is the root: bwrap always changes to the sandbox's.
	argv := []string{"/bin/sh", "-c", launcherShell, "sh"}
	for _, d := range cg.dirs() {
		argv = append(argv, filepath.Dir(d), d)
	}
	cmd := &exec.Cmd{Path: argv[0], Args: argv, Env: []string{wrapperPath}, Dir: "/"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.ExtraFiles = []*os.File{scriptR}
	cmd.Stdout, cmd.Stderr = outW, errW
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start a sandbox launcher: %w", err)
	}
	return &launcher{cmd: cmd, script: scriptW, outR: outR, errR: errR, cg: cg, warns: warns}, nil
}

func closeAll(files []*os.File) {
	for _, f := range files {
		f.Close()
	}
}

// confine sets the run's limits on the launcher's groups and its rlimits on the shell;
// bwrap, which the shell becomes, and every process it makes inherit them. pids.max counts
// bwrap's own process, which runs no code of the command's: the command keeps l.Pids.
func (l *launcher) confine(lim Limits) error {
	if err := l.limit(lim); err != nil {
		return err
	}
	return setRlimits(l.cmd.Process.Pid, lim, l.cg.memory == "")
}

// limit sets lim on the launcher's groups (what they hold already is not written again).
func (l *launcher) limit(lim Limits) error {
	for _, c := range l.cg.controllers() {
		if err := setLimits(c.ctrl, *c.dir, lim, 1, l.limits); err != nil {
			l.limits = nil // partly written: nothing is known of them any more
			return fmt.Errorf("%s limit: %w", c.ctrl, err)
		}
	}
	l.limits = &lim
	return nil
}

// launch writes the script that execs argv and closes the pipe. The script is one brace
// group, which the shell runs only once it has read all of it: a script cut short (the
// service killed while writing it) is a syntax error, never a shorter command line. Every
// argument is a single-quoted word (a quote inside is closed, escaped and reopened), so
// no byte of it is shell syntax; NUL, which a word cannot hold, is refused.
func (l *launcher) launch(argv []string) error {
	script, err := launchScript(argv)
	if err == nil {
		_, err = l.script.WriteString(script)
	}
	if cerr := l.script.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, syscall.EPIPE) {
		return errLauncherGone
	}
	return err
}

// launchScript is the launcher's script for argv (see launch). fd 3 (the script's pipe)
// does not go on to bwrap.
func launchScript(argv []string) (string, error) {
	var b strings.Builder
	b.WriteString("{ exec")
	for _, a := range argv {
		if strings.IndexByte(a, 0) >= 0 {
			return "", errors.New("an argument holds a NUL byte")
		}
		b.WriteString(" '")
		b.WriteString(strings.ReplaceAll(a, "'", `'\''`))
		b.WriteByte('\'')
	}
	b.WriteString(" 3<&-; }\n")
	return b.String(), nil
}

// discard ends an unused launcher: its shell killed, its files closed, its groups removed.
func (l *launcher) discard() {
	_ = l.cmd.Process.Kill()
	_ = l.cmd.Wait()
	closeAll([]*os.File{l.script, l.outR, l.errR})
	l.cg.remove()
}

// launchers is the bwrap backend's pool of ready launchers, refilled in the background
// after each take.
type launchers struct {
	owner    string
	noCgroup bool
	logger   *slog.Logger
	// expected are the limits the last run asked for: new launchers' groups get them
	// ahead of time.
	expected atomic.Pointer[Limits]
	ready    chan *launcher
	wake     chan struct{}
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

func startLaunchers(owner string, noCgroup bool, logger *slog.Logger) *launchers {
	p := &launchers{owner: owner, noCgroup: noCgroup, logger: logger,
		ready: make(chan *launcher, launcherPool), wake: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	p.expect(Limits{}.WithDefaults())
	p.wake <- struct{}{}
	go p.fill()
	return p
}

// take returns a ready launcher, or nil when none is (or p is nil).
func (p *launchers) take() *launcher {
	if p == nil {
		return nil
	}
	select {
	case l := <-p.ready:
		return l
	default:
		p.refill()
		return nil
	}
}

// expect records the limits a run asked for: the next launchers' groups get them ahead.
func (p *launchers) expect(l Limits) {
	if p != nil {
		p.expected.Store(&l)
	}
}

// refill has the pool filled up in the background. A run that took a launcher calls it
// once it is done: the next launcher's shell is not started on the run's time.
func (p *launchers) refill() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// fill makes launchers whenever the pool is short of them, until close. Launchers are made
// in batches: their shells are started first, then all moved into their groups, so one
// grace period covers the batch. A failure backs off (runs start bwrap themselves
// meanwhile).
func (p *launchers) fill() {
	defer close(p.done)
	backoff := 100 * time.Millisecond
	for {
		select {
		case <-p.stop:
			return
		case <-p.wake:
		}
		for n := cap(p.ready) - len(p.ready); n > 0; n = cap(p.ready) - len(p.ready) {
			batch, err := p.make(n)
			// Only fill sends, and only into room it saw: the sends never block.
			for _, l := range batch {
				p.ready <- l
			}
			if err == nil {
				backoff = 100 * time.Millisecond
				continue
			}
			p.logger.Warn("sandbox: a launcher could not be made; runs start bwrap themselves meanwhile", "retry_in", backoff, "err", err)
			select {
			case <-p.stop:
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, time.Minute)
		}
	}
}

// make starts n launchers and moves each into its groups.
func (p *launchers) make(n int) ([]*launcher, error) {
	var batch []*launcher
	var problems []error
	for range n {
		l, err := startLauncher(p.owner, p.noCgroup)
		if err != nil {
			problems = append(problems, err)
			break
		}
		batch = append(batch, l)
	}
	joined := batch[:0]
	for _, l := range batch {
		if err := l.cg.join(l.cmd.Process.Pid); err != nil {
			problems = append(problems, err)
			l.discard()
			continue
		}
		if lim := p.expected.Load(); lim != nil {
			_ = l.limit(*lim) // failing, the run sets them
		}
		joined = append(joined, l)
	}
	return joined, errors.Join(problems...)
}

// close stops the refill and discards the ready launchers.
func (p *launchers) close() {
	if p == nil {
		return
	}
	p.stopOnce.Do(func() { close(p.stop) })
	<-p.done
	for {
		select {
		case l := <-p.ready:
			l.discard()
		default:
			return
		}
	}
}
