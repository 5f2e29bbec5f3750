// Package backend runs one command at a time inside a sandbox workspace: the local backend
// (a process group with rlimits and a scrubbed environment, no isolation) and the bwrap
// backend (bubblewrap namespaces, the toolchains read-only, no network). Both cap output,
// stream it, and kill everything the command started when it times out. The sandbox service
// owns workspaces and chooses the backend (service.OpenBackends, never a silent fallback to
// local); this package only executes.
package backend

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/thefold/thefold/pkg/errs"

	"github.com/thefold/thefold/services/sandbox/internal/egress"
)

// Spec is one command to run in a sandbox.
type Spec struct {
	// Argv is the command; argv[0] is resolved through the sandbox's PATH. Never a shell string.
	Argv []string
	// Dir is relative to the workspace root ("" is the root).
	Dir string
	// Env is added to the scrubbed base environment (and may override its entries).
	Env map[string]string
	// Timeout bounds the run (DefaultTimeout when zero).
	Timeout time.Duration
	Stdin   []byte
	// MaxOutput is how many bytes of stdout+stderr are kept (DefaultMaxOutput when zero);
	// the rest is dropped, Result.Truncated is set and a marker says how much was dropped.
	MaxOutput int64
	// Network lets the command reach the hosts of Allow: only for a dependencies step. The
	// bwrap backend gives the command no route out of its network namespace, only an HTTP
	// proxy to Allow (HTTP_PROXY, HTTPS_PROXY and the like point at it; a direct connection
	// to an allowed loopback address is tunnelled through it too). The local backend points
	// the same variables at the same proxy but cannot block the network, and says so in
	// Result.Warnings.
	Network bool
	// Allow lists what a Network command may reach: "host:port", or a package source's URL
	// (the port from its scheme). A name is dialled only when it resolves to public
	// addresses; an entry naming an IP or localhost may be local. Empty: nothing.
	Allow []string
	// Output, when set, receives the kept output as it arrives (stream 1 stdout, 2 stderr),
	// in order per stream, from one goroutine at a time, and never after Run returns.
	Output func(stream int, p []byte)
	// Discard says the caller does not want the command's changes to the workspace (a
	// check: validation's build, vet and tests). A backend that copies the workspace back
	// after a command (docker) skips that copy, and the next command starts from the
	// workspace as it was; one that runs the command in the workspace itself (bwrap, local)
	// leaves the changes where the command made them.
	Discard bool
}

// Result is what a command did.
type Result struct {
	ExitCode int
	// Signal names the signal that ended the command ("killed"), empty when it exited.
	Signal   string
	TimedOut bool
	// OOMKilled is best effort: set when a memory cgroup reports an OOM kill during the run.
	OOMKilled      bool
	Stdout, Stderr []byte
	Truncated      bool
	Duration       time.Duration
	// Warnings say which protections did not apply to this run and why.
	Warnings []string
}

// Limits bound the resources of one command. Zero fields take the defaults below.
type Limits struct {
	MemoryBytes int64
	// CPUs is the sandbox's CPU share in cores (1.5 = one and a half); 0 is the backend's
	// default. The docker backend applies it to the container; bwrap and local have no
	// CPU quota (CPUSeconds bounds a command there).
	CPUs          float64
	CPUSeconds    int
	Pids          int
	FileSizeBytes int64
	OpenFiles     int
}

// Defaults for Spec and Limits.
const (
	DefaultTimeout       = 5 * time.Minute
	DefaultMaxOutput     = 1 << 20
	DefaultMemoryBytes   = 512 << 20
	DefaultCPUSeconds    = 600
	DefaultPids          = 256
	DefaultFileSizeBytes = 256 << 20
	DefaultOpenFiles     = 1024
)

// Backend executes commands in a workspace directory.
type Backend interface {
	// Name is "local" or "bwrap".
	Name() string
	// Run executes one command in workspace (an existing directory on the host). Bad input
	// (empty argv, a Dir escaping the workspace, a malformed env name) wraps errs.ErrInvalid;
	// a command that fails or times out is a Result, not an error.
	Run(ctx context.Context, workspace string, s Spec, l Limits) (*Result, error)
	// Close removes the per-workspace state (caches, home directories) the backend made.
	Close() error
}

// WithDefaults fills the zero fields with the defaults.
func (l Limits) WithDefaults() Limits {
	if l.MemoryBytes <= 0 {
		l.MemoryBytes = DefaultMemoryBytes
	}
	if l.CPUSeconds <= 0 {
		l.CPUSeconds = DefaultCPUSeconds
	}
	if l.Pids <= 0 {
		l.Pids = DefaultPids
	}
	if l.FileSizeBytes <= 0 {
		l.FileSizeBytes = DefaultFileSizeBytes
	}
	if l.OpenFiles <= 0 {
		l.OpenFiles = DefaultOpenFiles
	}
	return l
}

// WithDefaults fills a zero Timeout and MaxOutput with the defaults.
func (s Spec) WithDefaults() Spec {
	if s.Timeout <= 0 {
		s.Timeout = DefaultTimeout
	}
	if s.MaxOutput <= 0 {
		s.MaxOutput = DefaultMaxOutput
	}
	return s
}

// Workspace is workspace's absolute, symlink-free path; one that is not a directory is
// errs.ErrFailedPrecondition.
func Workspace(workspace string) (string, error) {
	ws, err := filepath.Abs(workspace)
	if err == nil {
		ws, err = filepath.EvalSymlinks(ws)
	}
	if err != nil {
		return "", fmt.Errorf("workspace %q: %w: %w", workspace, err, errs.ErrFailedPrecondition)
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return "", fmt.Errorf("workspace %q: not a directory: %w", workspace, errs.ErrFailedPrecondition)
	}
	return ws, nil
}

// CleanDir is the form of a service's workspace root in the labels of what a backend makes
// (containers, pods): two spellings of one directory are one service.
func CleanDir(dir string) string {
	if dir == "" {
		return ""
	}
	return filepath.Clean(dir)
}

// OOMKillCommand prints a container's memory cgroup counters (v2, then v1) for NewOOMKill.
var OOMKillCommand = []string{"/bin/sh", "-c", "cat /sys/fs/cgroup/memory.events /sys/fs/cgroup/memory/memory.oom_control 2>/dev/null"}

// NewOOMKill reads OOMKillCommand's output and reports whether its oom_kill count rose above
// *seen, recording the new count.
func NewOOMKill(out []byte, seen *int64) bool {
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 2 && f[0] == "oom_kill" {
			n, _ := strconv.ParseInt(f[1], 10, 64)
			if n > *seen {
				*seen = n
				return true
			}
		}
	}
	return false
}

// CheckSpec validates the workspace and the spec, for every backend alike, and returns the
// workspace's absolute, symlink-free path and Dir cleaned and resolved inside it. Bad input
// wraps errs.ErrInvalid; a workspace that is not a directory errs.ErrFailedPrecondition.
func CheckSpec(workspace string, s Spec) (ws, dir string, err error) {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return "", "", fmt.Errorf("argv: empty command: %w", errs.ErrInvalid)
	}
	for i, a := range s.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return "", "", fmt.Errorf("argv[%d]: contains a NUL byte: %w", i, errs.ErrInvalid)
		}
	}
	if len(s.Allow) > 0 && !s.Network {
		return "", "", fmt.Errorf("allow: only for a Network command: %w", errs.ErrInvalid)
	}
	if _, err := egress.ParseAllowlist(s.Allow); err != nil {
		return "", "", fmt.Errorf("allow: %w: %w", err, errs.ErrInvalid)
	}
	for k, v := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return "", "", fmt.Errorf("env %q: name must be non-empty without '=' or NUL, value without NUL: %w", k, errs.ErrInvalid)
		}
	}
	if ws, err = Workspace(workspace); err != nil {
		return "", "", err
	}
	dir = filepath.Clean(s.Dir)
	if filepath.IsAbs(s.Dir) || dir == ".." || strings.HasPrefix(dir, "../") {
		return "", "", fmt.Errorf("dir %q: escapes the workspace: %w", s.Dir, errs.ErrInvalid)
	}
	// A symlink inside the workspace may point outside it: resolve and check.
	real, err := filepath.EvalSymlinks(filepath.Join(ws, dir))
	if err != nil {
		return "", "", fmt.Errorf("dir %q: %w: %w", s.Dir, err, errs.ErrInvalid)
	}
	if real != ws && !strings.HasPrefix(real, ws+string(filepath.Separator)) {
		return "", "", fmt.Errorf("dir %q: escapes the workspace: %w", s.Dir, errs.ErrInvalid)
	}
	if fi, err := os.Stat(real); err != nil || !fi.IsDir() {
		return "", "", fmt.Errorf("dir %q: not a directory: %w", s.Dir, errs.ErrInvalid)
	}
	return ws, strings.TrimPrefix(real[len(ws):], "/"), nil
}
