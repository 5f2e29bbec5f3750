package backend

import (
	"context"
	"maps"
	"net"
	"path/filepath"

	"github.com/thefold/thefold/services/sandbox/internal/egress"
)

// Local runs commands directly on the host, in the workspace directory, in their own process
// group, with rlimits, cgroup limits when it can make them, and a scrubbed environment. It
// does not isolate: the command sees the host's files and network.
type Local struct {
	cfg   config
	st    *state
	stErr error
	// warmShared and warmProg are the machine's warm Go build cache (WithWarmGoCache),
	// when a bwrap backend has made it: a development speed-up only (a local command can
	// write anywhere the service can, so it adds no exposure).
	warmShared, warmProg string
}

// NewLocal returns the local backend and logs, loudly, that it does not isolate.
func NewLocal(opts ...Option) *Local {
	cfg := newConfig(opts)
	st, err := newState(cfg.stateDir, cfg.logger)
	cfg.logger.Warn("local backend does not isolate: sandboxed commands can read and write the host's files and reach its network; use bwrap or docker for code you do not trust")
	b := &Local{cfg: cfg, st: st, stErr: err}
	if cfg.warmDir != "" && cfg.goCache == "" {
		b.warmShared, b.warmProg = readyWarm(cfg.goRoot, cfg.warmDir)
	}
	return b
}

// Name is "local".
func (b *Local) Name() string { return "local" }

// Close removes the backend's state directories.
func (b *Local) Close() error {
	if b.st == nil {
		return nil
	}
	return b.st.close()
}

// Release removes the state (home, build cache) kept for workspace, for when its sandbox is
// destroyed; the workspace itself is the caller's.
func (b *Local) Release(workspace string) error {
	if b.st == nil {
		return nil
	}
	return releaseWorkspace(b.st, workspace)
}

// Run executes s in workspace on the host.
func (b *Local) Run(ctx context.Context, workspace string, s Spec, l Limits) (*Result, error) {
	if b.stErr != nil {
		return nil, b.stErr
	}
	ws, dir, err := CheckSpec(workspace, s)
	if err != nil {
		return nil, err
	}
	s, l = s.WithDefaults(), l.WithDefaults()
	sd, err := b.st.dir(ws, "home", "tmp", "gocache", "gopath")
	if err != nil {
		return nil, err
	}
	env := map[string]string{
		"PATH":        filepath.Join(b.cfg.goRoot, "bin") + ":/usr/local/bin:/usr/bin:/bin",
		"HOME":        filepath.Join(sd, "home"),
		"TMPDIR":      filepath.Join(sd, "tmp"),
		"GOCACHE":     filepath.Join(sd, "gocache"),
		"GOPATH":      filepath.Join(sd, "gopath"),
		"GOTOOLCHAIN": "local",
		"GOTELEMETRY": "off",
		"LANG":        "C.UTF-8",
	}
	switch {
	case b.cfg.goCache != "":
		env["GOCACHE"] = b.cfg.goCache
	case b.warmShared != "":
		env["GOCACHEPROG"] = GoCacheProgEnv(b.warmProg, b.warmShared, filepath.Join(sd, "gocache", "layer"))
	}
	if b.cfg.modCache != "" {
		env["GOMODCACHE"] = b.cfg.modCache
	}
	if !s.Network {
		env["GOPROXY"] = "off"
	}
	maps.Copy(env, s.Env)
	if s.Network {
		// Cooperative clients go through the egress proxy, held to s.Allow; nothing stops a
		// command from dialling past it.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		list, err := egress.ParseAllowlist(s.Allow)
		if err != nil {
			ln.Close()
			return nil, err
		}
		p := egress.New(egress.Config{Allow: list, Logger: b.cfg.logger.With("component", "egress")})
		go func() { _ = p.Serve(ln) }()
		defer p.Close()
		maps.Copy(env, egress.ProxyVars("http://"+ln.Addr().String()))
	}

	warns := []string{"local backend does not isolate: the command can read and write host files outside the workspace", "network not blocked: the local backend cannot block the network"}
	cg, cgWarns := newCgroup(b.st.id, l, b.cfg.noCgroup)
	// Removed in the background: execute returns once the groups are empty.
	defer b.st.later(cg.remove)
	warns = append(warns, cgWarns...)
	res, err := execute(ctx, invocation{
		argv: s.Argv, env: envList(env), dir: filepath.Join(ws, dir), grace: b.cfg.grace, cg: cg, limits: l,
	}, s)
	if res != nil {
		res.Warnings = append(warns, res.Warnings...)
	}
	return res, err
}
