package backend

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/thefold/thefold/pkg/errs"
)

// Paths inside the bwrap sandbox.
const (
	bwrapWorkspace = "/workspace"
	bwrapState     = "/state"
	bwrapModCache  = "/gomodcache"
	bwrapGoCache   = "/gocache"
	// bwrapUID is "nobody": inside the user namespace the command holds no capability and
	// runs as an unprivileged id, mapped back to the service's own user on the host.
	bwrapUID = "65534"

	wrapperPath = "PATH=/usr/sbin:/usr/bin:/sbin:/bin"
)

// Bwrap runs each command in a fresh bubblewrap sandbox: every namespace unshared (the
// network always: a Spec.Network command reaches its allowlist through an egress proxy, and
// nothing else), /usr and the Go toolchain read-only, the workspace read-write at
// /workspace, a tmpfs /tmp, no other host file visible.
type Bwrap struct {
	cfg   config
	st    *state
	bwrap string
	warm  *warmCache
	// launchers start runs in their cgroups ahead of time (see launcher); nil for none.
	launchers *launchers
}

// NewBwrap checks that bubblewrap can make a sandbox on this machine by running `true` in
// one, and says why not when it cannot (errs.ErrUnavailable).
func NewBwrap(opts ...Option) (*Bwrap, error) {
	cfg := newConfig(opts)
	bin := cfg.bwrap
	if bin == "" {
		bin = "bwrap"
	}
	p, err := exec.LookPath(bin)
	if err != nil {
		return nil, fmt.Errorf("bwrap backend: bubblewrap not installed (%v): %w", err, errs.ErrUnavailable)
	}
	st, err := newState(cfg.stateDir, cfg.logger)
	if err != nil {
		return nil, err
	}
	b := &Bwrap{cfg: cfg, st: st, bwrap: p}
	if err := b.probe(); err != nil {
		_ = st.close()
		return nil, err
	}
	if cfg.warmDir != "" && cfg.goCache == "" {
		b.warm = startWarm(b, cfg.warmDir)
	}
	b.launchers = startLaunchers(st.id, cfg.noCgroup, cfg.logger)
	return b, nil
}

func (b *Bwrap) probe() error {
	ws, err := os.MkdirTemp(b.st.root, "probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(ws)
	sd, err := b.st.dir(ws)
	if err != nil {
		return err
	}
	argv := b.args(ws, "", sd, Spec{Argv: []string{"true"}}, nil, "", "")
	out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("bwrap backend: a sandbox cannot be made here (%v: %s): %w", err, strings.TrimSpace(string(out)), errs.ErrUnavailable)
	}
	return nil
}

// Name is "bwrap".
func (b *Bwrap) Name() string { return "bwrap" }

// Close ends the ready launchers, waits for the removals still going on in the background
// and removes the backend's state directories.
func (b *Bwrap) Close() error {
	b.launchers.close()
	return b.st.close()
}

// Release removes the state (home, build cache) kept for workspace, for when its sandbox is
// destroyed; the workspace itself is the caller's.
func (b *Bwrap) Release(workspace string) error { return releaseWorkspace(b.st, workspace) }

// Run executes s in a new sandbox over workspace.
func (b *Bwrap) Run(ctx context.Context, workspace string, s Spec, l Limits) (*Result, error) {
	ws, dir, err := CheckSpec(workspace, s)
	if err != nil {
		return nil, err
	}
	s, l = s.WithDefaults(), l.WithDefaults()
	sd, err := b.st.dir(ws)
	if err != nil {
		return nil, err
	}
	var eg *egressRun
	if s.Network {
		if eg, err = startEgress(b.st.root, s.Allow, b.cfg.logger); err != nil {
			return nil, err
		}
		defer eg.close()
	}
	shared, prog, err := b.warm.ready(ctx)
	if err != nil {
		return nil, err
	}
	argv := b.args(ws, dir, sd, s, eg, shared, prog)
	// The wrappers outside the sandbox get a minimal environment too, not the service's.
	inv := invocation{argv: argv, env: []string{wrapperPath}, dir: ws, grace: b.cfg.grace, limits: l}
	// A launcher cannot take stdin: it was started before the run was known.
	if len(s.Stdin) == 0 {
		if ln := b.launchers.take(); ln != nil {
			res, err := b.runLaunched(ctx, ln, inv, s)
			if !errors.Is(err, errLauncherGone) {
				return res, err
			}
		}
	}
	cg, warns := newCgroup(b.st.id, l, b.cfg.noCgroup)
	defer b.removeLater(cg)
	inv.argv, inv.cg, inv.bwrapSync = slices.Insert(argv, 1, bwrapSyncArgs...), cg, true
	res, err := execute(ctx, inv, s)
	if res != nil {
		res.Warnings = append(warns, res.Warnings...)
	}
	return res, err
}

// runLaunched runs inv through the launcher ln. errLauncherGone means nothing ran: ln
// could not take the run's limits, or its shell was gone.
func (b *Bwrap) runLaunched(ctx context.Context, ln *launcher, inv invocation, s Spec) (*Result, error) {
	// Another launcher is made once this run is done, not while it runs, with the limits
	// it had.
	defer b.launchers.refill()
	b.launchers.expect(inv.limits)
	if err := ln.confine(inv.limits); err != nil {
		b.cfg.logger.Warn("sandbox: a launcher could not take a run's limits; the run starts bwrap itself", "err", err)
		ln.discard()
		return nil, errLauncherGone
	}
	defer b.removeLater(ln.cg)
	inv.cg, inv.launcher = ln.cg, ln
	res, err := execute(ctx, inv, s)
	if res != nil {
		res.Warnings = append(slices.Clone(ln.warns), res.Warnings...)
	}
	return res, err
}

// removeLater removes a run's groups in the background: execute has killed everything in
// them already (it returns once they are empty), and nothing joins them again.
func (b *Bwrap) removeLater(cg *cgroup) { b.st.later(cg.remove) }

// systemDirArgs are the bwrap options that make /bin, /lib… as the host has them, looked
// at once per process. On merged-/usr systems they are symlinks into /usr: the link is
// recreated, since binding a symlink would bind its target a second time.
var systemDirArgs = sync.OnceValue(func() []string {
	var a []string
	for _, p := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if t, err := os.Readlink(p); err == nil {
				a = append(a, "--symlink", t, p)
			}
		case fi.IsDir():
			a = append(a, "--ro-bind", p, p)
		}
	}
	return a
})

// args builds the bwrap command line for s, run in the workspace ws (host path) at dir, with
// the egress proxy eg when s.Network, and the warm Go build cache shared (read-only, served
// by the helper prog) when there is one.
func (b *Bwrap) args(ws, dir, stateDir string, s Spec, eg *egressRun, shared, prog string) []string {
	// --unshare-all makes a network namespace holding only loopback, and there is never a
	// --share-net: the host's namespace would open every service listening on its loopback.
	a := append([]string{b.bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--unshare-user", "--uid", bwrapUID, "--gid", bwrapUID,
		"--ro-bind", "/usr", "/usr"}, systemDirArgs()...)
	// Certificates only (no passwords, no host configuration, no resolver: the egress proxy
	// resolves names). /etc/ssl/certs holds the bundle, its other entries link into /usr.
	a = append(a, "--ro-bind-try", "/etc/ssl", "/etc/ssl")
	argv := s.Argv
	if eg != nil {
		a = append(a, eg.bwrapArgs()...)
		argv = eg.wrap(argv)
	}
	if gr := filepath.Clean(b.cfg.goRoot); gr != "/usr" && !strings.HasPrefix(gr, "/usr/") {
		a = append(a, "--ro-bind-try", gr, gr)
	}
	env := map[string]string{
		"PATH":        filepath.Join(b.cfg.goRoot, "bin") + ":/usr/local/bin:/usr/bin:/bin",
		"HOME":        bwrapState + "/home",
		"TMPDIR":      "/tmp",
		"GOCACHE":     bwrapState + "/gocache",
		"GOPATH":      bwrapState + "/gopath",
		"GOTOOLCHAIN": "local",
		"GOTELEMETRY": "off",
		"LANG":        "C.UTF-8",
		// Debian's Node modules (typescript, eslint), where only Debian's own node looks by
		// default, as the docker image has them: without it validation found no tsc and
		// skipped the type check, passing code with type errors.
		"NODE_PATH": "/usr/share/nodejs:/usr/lib/nodejs",
	}
	switch {
	case b.cfg.goCache != "":
		a = append(a, "--bind", b.cfg.goCache, bwrapGoCache)
		env["GOCACHE"] = bwrapGoCache
	case shared != "":
		a = append(a, "--ro-bind", shared, bwrapSharedGoCache, "--ro-bind", prog, bwrapGoCacheProg)
		env["GOCACHEPROG"] = GoCacheProgEnv(bwrapGoCacheProg, bwrapSharedGoCache, bwrapState+"/gocache/layer")
	}
	// Modules go into the workspace's own, writable module cache (GOPATH/pkg/mod under
	// the state): a dependencies run downloads into it and later runs build from it. The
	// host's module cache is offered read-only as a file:// proxy, so modules it holds
	// build offline too (its contents were verified when the host downloaded them, hence
	// no checksum database offline).
	if !s.Network {
		env["GOPROXY"] = "off"
		if b.cfg.modCache != "" {
			env["GOPROXY"] = "file://" + bwrapModCache + "/cache/download"
			env["GOSUMDB"] = "off"
		}
	}
	if b.cfg.modCache != "" {
		a = append(a, "--ro-bind", b.cfg.modCache, bwrapModCache)
	}
	maps.Copy(env, s.Env)
	a = append(a, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp",
		"--bind", stateDir, bwrapState,
		// HOME exists before the command (the state directory starts empty).
		"--dir", bwrapState+"/home",
		"--bind", ws, bwrapWorkspace,
		"--chdir", path.Join(bwrapWorkspace, filepath.ToSlash(dir)),
		// The root is bwrap's own tmpfs: read-only, so nothing lands in /etc or at the top.
		"--remount-ro", "/",
		"--clearenv")
	for _, k := range slices.Sorted(maps.Keys(env)) {
		a = append(a, "--setenv", k, env[k])
	}
	a = append(a, "--")
	return append(a, argv...)
}
