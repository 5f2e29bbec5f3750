package backend

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
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

	"golang.org/x/sys/unix"
)

// Option configures NewLocal and NewBwrap.
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
//
// Its root, thefold-sandbox-state-<id> in the base directory, holds a lock file (.lock) that
// this process keeps locked (flock) while the backend lives: a root whose lock another
// process can take was left by a process that is gone (killed, crashed), and newState
// removes it with that owner's cgroups (named after the id). What the backend removes after
// a run or a Release (cgroups, a released workspace's state) it removes in the background,
// off the caller's time; close waits for it.
type state struct {
	mu     sync.Mutex
	root   string
	id     string   // 8 hex digits: names the root and the owner of the backend's cgroups
	lock   *os.File // root/.lock, flocked until close
	logger *slog.Logger

	bgMu   sync.Mutex
	bg     sync.WaitGroup
	closed bool

	// fresh are new, empty state directories (each holding home) made ahead in the
	// background: a workspace's first run renames one into place instead of making it on
	// the run's time. Each is handed out once.
	fresh     chan string
	refilling atomic.Bool
	noFresh   atomic.Bool // the file system cannot rename without replacing: none made
}

// freshDirs is how many fresh state directories a state keeps ready.
const freshDirs = 2

// stateRootPrefix begins the name of a backend's state root in its base directory.
const stateRootPrefix = "thefold-sandbox-state-"

// ownerLock is the lock file of a state root (see state).
const ownerLock = ".lock"

func newState(base string, logger *slog.Logger) (*state, error) {
	if base == "" {
		base = os.TempDir()
	}
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	reapStates(base, logger)
	for attempt := 0; ; attempt++ {
		id := randomHex(4)
		root := filepath.Join(base, stateRootPrefix+id)
		err := os.Mkdir(root, 0o700)
		if errors.Is(err, os.ErrExist) && attempt < 3 {
			continue // another backend's id
		}
		if err != nil {
			return nil, fmt.Errorf("sandbox state directory: %w", err)
		}
		lock, err := lockOwner(root)
		if err != nil {
			_ = os.RemoveAll(root)
			return nil, fmt.Errorf("sandbox state directory: %w", err)
		}
		st := &state{root: root, id: id, lock: lock, logger: logger, fresh: make(chan string, freshDirs)}
		st.refillFresh()
		return st, nil
	}
}

// lockOwner makes root's lock file and locks it. The file is locked before it takes its
// name, so a root whose lock file is there and can be locked is never one being made.
func lockOwner(root string) (*os.File, error) {
	tmp := filepath.Join(root, ownerLock+".new")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", tmp, err)
	}
	if err := os.Rename(tmp, filepath.Join(root, ownerLock)); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// reapStates removes the state roots under base whose owner is gone, and the cgroups that
// owner made: what a killed process of the service left behind. A root without a lock file
// (being made, or made by an older version) is left alone.
func reapStates(base string, logger *slog.Logger) {
	roots, err := filepath.Glob(filepath.Join(base, stateRootPrefix+"*"))
	if err != nil {
		return
	}
	for _, root := range roots {
		id := strings.TrimPrefix(filepath.Base(root), stateRootPrefix)
		if len(id) != 8 || strings.Trim(id, "0123456789abcdef") != "" {
			continue // not a backend's root
		}
		f, err := os.Open(filepath.Join(root, ownerLock))
		if err != nil {
			continue
		}
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
			f.Close() // its owner lives
			continue
		}
		// Held until the root is gone: another process starting now skips it.
		groups := removeOwnerCgroups(id)
		err = os.RemoveAll(root)
		f.Close()
		logger.Info("sandbox: removed the state of a backend whose process is gone", "dir", root, "cgroups", groups, "err", err)
	}
}

// dir returns (and makes) the state directory of the workspace ws with the subdirectories
// subs. Only what a backend needs before the command starts is made here (bwrap makes
// the home directory itself, and the go command its caches): a sandbox's creation costs
// one directory.
func (s *state) dir(ws string, subs ...string) (string, error) {
	d := s.path(ws)
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := os.Lstat(d)
	switch {
	case err == nil: // an earlier run's
	case errors.Is(err, os.ErrNotExist) && s.takeFresh(d):
	default:
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("sandbox state directory: %w", err)
		}
	}
	for _, sub := range subs {
		if err := os.Mkdir(filepath.Join(d, sub), 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("sandbox state directory: %w", err)
		}
	}
	return d, nil
}

// takeFresh renames a fresh directory into place as d, where there is none (s.mu held),
// and has another made. False when none is ready.
func (s *state) takeFresh(d string) bool {
	defer s.refillFresh()
	var f string
	select {
	case f = <-s.fresh:
	default:
		return false
	}
	err := unix.Renameat2(unix.AT_FDCWD, f, unix.AT_FDCWD, d, unix.RENAME_NOREPLACE)
	if err != nil {
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
			s.noFresh.Store(true)
		}
		s.later(func() { _ = os.RemoveAll(f) })
		return false
	}
	return true
}

// refillFresh makes fresh directories in the background until freshDirs are ready (one
// refill at a time).
func (s *state) refillFresh() {
	if s.noFresh.Load() || len(s.fresh) == cap(s.fresh) || !s.refilling.CompareAndSwap(false, true) {
		return
	}
	s.later(func() {
		defer s.refilling.Store(false)
		for len(s.fresh) < cap(s.fresh) {
			f := filepath.Join(s.root, "fresh-"+randomHex(8))
			if err := os.Mkdir(f, 0o755); err != nil {
				return
			}
			if err := os.Mkdir(filepath.Join(f, "home"), 0o755); err != nil {
				_ = os.RemoveAll(f)
				return
			}
			s.fresh <- f // only this refill sends, into room it saw
		}
	})
}

// path is the state directory of the workspace ws (absolute, symlink-free).
func (s *state) path(ws string) string {
	sum := sha256.Sum256([]byte(ws))
	return filepath.Join(s.root, hex.EncodeToString(sum[:8]))
}

// release takes the state directory of the workspace ws away at once (renamed, so a later
// run of a workspace at the same path starts afresh) and removes it in the background.
func (s *state) release(ws string) error {
	trash := filepath.Join(s.root, "released-"+randomHex(8))
	s.mu.Lock()
	err := os.Rename(s.path(ws), trash)
	s.mu.Unlock()
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sandbox state directory: %w", err)
	}
	s.later(func() {
		if err := os.RemoveAll(trash); err != nil {
			s.logger.Warn("sandbox: remove a released state directory (close removes it)", "dir", trash, "err", err)
		}
	})
	return nil
}

// later runs f in the background; close waits for it. Once closed, f runs at once.
func (s *state) later(f func()) {
	s.bgMu.Lock()
	if s.closed {
		s.bgMu.Unlock()
		f()
		return
	}
	s.bg.Add(1)
	s.bgMu.Unlock()
	go func() {
		defer s.bg.Done()
		f()
	}()
}

// settle waits for what later started.
func (s *state) settle() { s.bg.Wait() }

// close waits for the background removals, then removes the root and lets its lock go.
func (s *state) close() error {
	s.bgMu.Lock()
	s.closed = true
	s.bgMu.Unlock()
	s.bg.Wait()
	err := os.RemoveAll(s.root)
	s.lock.Close()
	return err
}

// randomHex is n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

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
