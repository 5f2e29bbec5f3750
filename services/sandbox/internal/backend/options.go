package backend

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"
)

// Option configures NewLocal, NewBwrap and Auto.
type Option func(*config)

type config struct {
	logger   *slog.Logger
	grace    time.Duration
	stateDir string
	goRoot   string
	modCache string
	bwrap    string
	noCgroup bool
	goCache  string
	warmDir  string
	docker   func() (Backend, error)
}

// WithLogger sets the logger (default: discard; the service always passes its own).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithGrace sets how long a timed-out command has between SIGTERM and SIGKILL (default 500ms).
func WithGrace(d time.Duration) Option { return func(c *config) { c.grace = d } }

// WithStateDir sets where per-workspace state (home, Go build cache) is made (default the
// system temporary directory); the backend makes its own directory there and Close removes it.
func WithStateDir(dir string) Option { return func(c *config) { c.stateDir = dir } }

// WithGoRoot sets the Go toolchain put on the sandbox's PATH (default /usr/local/go).
func WithGoRoot(dir string) Option { return func(c *config) { c.goRoot = dir } }

// WithGoModCache sets the module cache offered read-only to the sandbox, so that modules
// already downloaded build offline (default `go env GOMODCACHE`; "" for none).
func WithGoModCache(dir string) Option { return func(c *config) { c.modCache = dir } }

// WithCgroups turns the per-run cgroups (pids and memory limits, kill of every process of
// the run) on or off (default on, where this process may make them).
func WithCgroups(on bool) Option { return func(c *config) { c.noCgroup = !on } }

// WithGoCache shares one Go build cache, at dir on the host, between every workspace of the
// backend instead of one cache per workspace: builds start warm, but a command in one
// sandbox can plant cache entries that builds in another trust. Use it only across
// sandboxes of one trust domain (one owner, or tests).
func WithGoCache(dir string) Option { return func(c *config) { c.goCache = dir } }

// WithWarmGoCache gives bwrap sandboxes a warm start: under dir (machine-wide, made once
// per toolchain) the backend keeps a Go build cache of the standard library, made by running
// a seed in one of its own sandboxes, and mounts it read-only into every sandbox, whose go
// command writes only a private layer of its own (GOCACHEPROG). Until it is made (a minute
// or so, once) commands wait for it. "" (the default) means none. WithGoCache takes
// precedence.
func WithWarmGoCache(dir string) Option { return func(c *config) { c.warmDir = dir } }

// WithDocker offers Auto a docker backend. It is passed in because the docker backend's
// package builds on this one and cannot be imported from here.
func WithDocker(newDocker func() (Backend, error)) Option {
	return func(c *config) { c.docker = newDocker }
}

// WithBwrapPath sets the bubblewrap binary (default "bwrap" on this process's PATH).
func WithBwrapPath(p string) Option { return func(c *config) { c.bwrap = p } }

func newConfig(opts []Option) config {
	c := config{grace: 500 * time.Millisecond, goRoot: "/usr/local/go", modCache: "-"}
	for _, o := range opts {
		o(&c)
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if c.modCache == "-" {
		c.modCache = hostModCache(c.goRoot)
	}
	if c.modCache != "" {
		if fi, err := os.Stat(c.modCache); err != nil || !fi.IsDir() {
			c.modCache = ""
		}
	}
	return c
}

func hostModCache(goRoot string) string {
	out, err := exec.Command(filepath.Join(goRoot, "bin", "go"), "env", "GOMODCACHE").Output()
	if err != nil {
		return ""
	}
	return string(trimNL(out))
}

func trimNL(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}

// state holds a backend's per-workspace directories: home, tmp and the Go caches, kept
// between runs of one workspace (so `go vet` after `go build` reuses the build cache) and
// never shared between workspaces (one sandbox must not poison another's cache).
type state struct {
	mu   sync.Mutex
	root string
}

func newState(base string) (*state, error) {
	root, err := os.MkdirTemp(base, "thefold-sandbox-state-")
	if err != nil {
		return nil, fmt.Errorf("sandbox state directory: %w", err)
	}
	return &state{root: root}, nil
}

// dir returns (and makes) the state directory of the workspace ws with the subdirectories
// subs. Only what a backend needs before the command starts is made here (bwrap makes
// the home directory itself, and the go command its caches): a sandbox's creation costs
// one directory.
func (s *state) dir(ws string, subs ...string) (string, error) {
	sum := sha256.Sum256([]byte(ws))
	d := filepath.Join(s.root, hex.EncodeToString(sum[:8]))
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("sandbox state directory: %w", err)
	}
	for _, sub := range subs {
		if err := os.Mkdir(filepath.Join(d, sub), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("sandbox state directory: %w", err)
		}
	}
	return d, nil
}

// release removes the state directory of the workspace ws (absolute, symlink-free).
func (s *state) release(ws string) error {
	sum := sha256.Sum256([]byte(ws))
	s.mu.Lock()
	defer s.mu.Unlock()
	return os.RemoveAll(filepath.Join(s.root, hex.EncodeToString(sum[:8])))
}

func (s *state) close() error { return os.RemoveAll(s.root) }

// releaseWorkspace resolves workspace as CheckSpec does and removes its state.
func releaseWorkspace(st *state, workspace string) error {
	ws, err := filepath.Abs(workspace)
	if err == nil {
		if real, err := filepath.EvalSymlinks(ws); err == nil {
			ws = real
		}
	}
	if err != nil {
		return err
	}
	return st.release(ws)
}

func envList(m map[string]string) []string {
	env := make([]string, 0, len(m))
	for k, v := range m {
		env = append(env, k+"="+v)
	}
	return env
}

// DefaultWarmDir is where the machine's warm Go build caches live by default: the user's
// cache directory (~/.cache/thefold/sandbox-gocache), else the temporary directory.
func DefaultWarmDir() string {
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "thefold", "sandbox-gocache")
	}
	return filepath.Join(os.TempDir(), "thefold-sandbox-gocache")
}
