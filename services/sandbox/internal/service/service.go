// Package service implements SandboxService: it keeps each sandbox's workspace in a host
// directory (package workspace), runs commands and the validation pipeline in it through a
// backend (kubernetes, docker, bwrap or local: packages kube, docker, backend), and records sandboxes, snapshots and
// the command log in the service's schema (package store). Every RPC is scoped by owner:
// someone else's sandbox is NOT_FOUND.
package service

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/thefold/thefold/pkg/auth"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"

	"github.com/thefold/thefold/services/sandbox/internal/backend"
	"github.com/thefold/thefold/services/sandbox/internal/store"
)

// Backend is what the service needs of an execution backend.
type Backend = backend.Backend

// preparer is a backend that makes per-sandbox resources ahead of the first command (the
// docker backend's container, the kubernetes backend's pod), labelled with whose they are.
type preparer interface {
	Prepare(ctx context.Context, workspace string, who backend.Identity, language string, l backend.Limits) error
}

// identifier tells a backend whose a workspace is, for the resources it makes later.
type identifier interface {
	Identify(workspace string, who backend.Identity)
}

// destroyer frees a sandbox's backend resources (a container, a pod).
type destroyer interface {
	Destroy(ctx context.Context, workspace string) error
}

// releaser frees the per-workspace state a host backend keeps (home, build cache).
type releaser interface {
	Release(workspace string) error
}

// Server implements sandboxv1.SandboxServiceServer.
type Server struct {
	sandboxv1.UnimplementedSandboxServiceServer

	cfg      Config
	store    *store.Store
	log      *slog.Logger
	backends map[sandboxv1.SandboxBackend]Backend
	// def is the backend of a sandbox that asks for none; reasons say why better ones
	// were not available.
	def     sandboxv1.SandboxBackend
	reasons []string
	github  githubv1.RepoServiceClient

	mu    sync.Mutex
	locks map[string]*sync.Mutex
	// running are the RunCommand request keys (sandbox id, request_id) running now: a retry
	// that arrives while its first call runs is ALREADY_EXISTS, not a second run (a sandbox's
	// workspace lives on one server).
	running map[string]bool
	// gomod keeps the go command's answers to go env GOMOD (gomod.go).
	gomod gomodMemo
}

var _ sandboxv1.SandboxServiceServer = (*Server)(nil)

// Option configures a Server.
type Option func(*Server)

// WithBackend offers a backend under its kind. The first one offered is the default unless
// WithDefault says otherwise.
func WithBackend(kind sandboxv1.SandboxBackend, b Backend) Option {
	return func(s *Server) {
		if len(s.backends) == 0 {
			s.def = kind
		}
		s.backends[kind] = b
	}
}

// WithDefault sets the backend of sandboxes that ask for none, and why better backends
// were not chosen (reported in CreateSandbox's warnings).
func WithDefault(kind sandboxv1.SandboxBackend, reasons []string) Option {
	return func(s *Server) { s.def, s.reasons = kind, reasons }
}

// WithGitHub lets CreateSandbox check out repositories through the github service.
func WithGitHub(c githubv1.RepoServiceClient) Option { return func(s *Server) { s.github = c } }

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(s *Server) { s.log = l } }

// New returns a server over st; workspaces live under cfg.Dir.
func New(cfg Config, st *store.Store, opts ...Option) (*Server, error) {
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, store: st, log: slog.New(slog.DiscardHandler),
		backends: map[sandboxv1.SandboxBackend]Backend{}, locks: map[string]*sync.Mutex{}}
	for _, o := range opts {
		o(s)
	}
	if len(s.backends) == 0 {
		return nil, fmt.Errorf("sandbox service: no backend")
	}
	if _, ok := s.backends[s.def]; !ok {
		return nil, fmt.Errorf("sandbox service: default backend %s not offered", backendName(s.def))
	}
	if err := os.MkdirAll(cfg.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox service: workspace directory: %w", err)
	}
	return s, nil
}

// caller is the authenticated owner of the request.
func caller(ctx context.Context) (string, error) {
	p, err := auth.MustFromContext(ctx)
	if err != nil {
		return "", err
	}
	return p.UserID, nil
}

// lock serialises the operations on one sandbox: a command, a file operation, a snapshot or
// its destruction. The docker and kubernetes backends copy the workspace in and out around
// a command, so a write during a command would be lost; host backends share the directory,
// where a snapshot taken while a command writes would be torn.
func (s *Server) lock(id string) func() {
	s.mu.Lock()
	m, ok := s.locks[id]
	if !ok {
		m = &sync.Mutex{}
		s.locks[id] = m
	}
	s.mu.Unlock()
	m.Lock()
	return m.Unlock
}

// forget drops a destroyed sandbox's lock.
func (s *Server) forget(id string) {
	s.mu.Lock()
	delete(s.locks, id)
	s.mu.Unlock()
}

// sandboxDir is where one sandbox keeps its files: ws/ (the workspace), blobs/ (contents of
// the base and of snapshots, by SHA-256) and base.json (the base snapshot).
func sandboxDir(sb *store.Sandbox) string { return filepath.Dir(sb.Workspace) }

func backendName(b sandboxv1.SandboxBackend) string {
	switch b {
	case sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER:
		return "docker"
	case sandboxv1.SandboxBackend_SANDBOX_BACKEND_BWRAP:
		return "bwrap"
	case sandboxv1.SandboxBackend_SANDBOX_BACKEND_LOCAL:
		return "local"
	case sandboxv1.SandboxBackend_SANDBOX_BACKEND_KUBERNETES:
		return "kubernetes"
	}
	return "unspecified"
}

// limitsOf turns a sandbox's effective limits into one command's.
func limitsOf(l *sandboxv1.ResourceLimits) backend.Limits {
	return backend.Limits{MemoryBytes: l.GetMemoryBytes(), CPUs: l.GetCpus(), Pids: int(l.GetPids())}
}

func timeoutOf(l *sandboxv1.ResourceLimits, def time.Duration) time.Duration {
	if d := l.GetTimeout().AsDuration(); d > 0 {
		return d
	}
	return def
}
