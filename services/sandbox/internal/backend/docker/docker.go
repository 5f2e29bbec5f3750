// Package docker is the sandbox backend that confines commands in a Docker container: one
// container per sandbox workspace (created on first use, exec'd into per command), with no
// network, a read-only root, a tmpfs /tmp, memory/CPU/pids limits, every capability dropped,
// no-new-privileges and an unprivileged user. The workspace is copied in and out through the
// Engine API, never bind-mounted, so it works when the sandbox service runs in a container.
package docker

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/moby/moby/client"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/services/sandbox/internal/backend"
)

// DefaultGoImage is the image of Go workspaces: DefaultImage, which has every toolchain.
const DefaultGoImage = DefaultImage

// Defaults for the container-wide settings.
const (
	DefaultNanoCPUs      = 500_000_000 // half a CPU
	DefaultWorkspaceSize = 1 << 30
	DefaultTmpSize       = 1 << 30
)

// Option configures New.
type Option func(*config)

type config struct {
	cli           *client.Client
	logger        *slog.Logger
	images        map[string]string
	defaultLang   string
	nanoCPUs      int64
	workspaceSize int64
	tmpSize       int64
	poolSize      int
	poolLimits    backend.Limits
	// noToolchainVolumes turns the toolchain volumes off (toolchain.go).
	noToolchainVolumes bool
}

// WithClient uses an existing Engine API client (New then does not close it).
func WithClient(cli *client.Client) Option { return func(c *config) { c.cli = cli } }

// WithLogger sets the logger (default: discard; the service always passes its own).
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// WithImages sets the image per language (merged over DefaultImages()).
func WithImages(m map[string]string) Option {
	return func(c *config) { maps.Copy(c.images, m) }
}

// WithDefaultLanguage sets the language whose image a workspace gets when Run comes before
// Prepare (default "go").
func WithDefaultLanguage(lang string) Option { return func(c *config) { c.defaultLang = lang } }

// WithNanoCPUs sets the CPU share of each container in 1e-9 CPUs (default half a CPU).
func WithNanoCPUs(n int64) Option { return func(c *config) { c.nanoCPUs = n } }

// WithWorkspaceSize bounds the /workspace tmpfs in bytes (default 1 GiB).
func WithWorkspaceSize(n int64) Option { return func(c *config) { c.workspaceSize = n } }

// WithTmpSize bounds the /tmp tmpfs (home, Go caches) in bytes (default 1 GiB).
func WithTmpSize(n int64) Option { return func(c *config) { c.tmpSize = n } }

// Docker runs commands in one container per workspace. Commands in the same workspace run
// one at a time (the workspace is synchronised around each); different workspaces run in
// parallel.
type Docker struct {
	cfg       config
	cli       *client.Client
	ownClient bool

	mu    sync.Mutex
	boxes map[string]*box // by the workspace's absolute path
	pool  *pool           // started containers ready for new sandboxes (WithPool); nil for none
	// dir labels the containers made without an Identity.Dir (a Run without Prepare): the
	// dir of the last Reconcile, so that a later one of the same service finds them.
	dir    string
	closed bool
	tools  toolchains
	// tar is the program that unpacks a workspace in the container ("tar"; a test names
	// one the image lacks).
	tar string
}

// Identity says whose a workspace's container is (see backend.Identity): every container
// carries it in its labels.
type Identity = backend.Identity

// The labels of a sandbox container. The workspace label is the host path of the
// workspace, the key of the backend's state.
const (
	labelSandbox   = "org.thefold.sandbox"
	labelID        = "org.thefold.sandbox.id"
	labelOwner     = "org.thefold.sandbox.owner"
	labelDir       = "org.thefold.sandbox.dir"
	labelWorkspace = "org.thefold.sandbox.workspace"
)

var _ backend.Backend = (*Docker)(nil)

// New connects to the engine named by the environment (DOCKER_HOST, default the local
// socket) and checks that it answers; the error says why when it does not.
func New(ctx context.Context, opts ...Option) (*Docker, error) {
	cfg := config{
		logger:        slog.New(slog.DiscardHandler),
		images:        DefaultImages(),
		defaultLang:   "go",
		nanoCPUs:      DefaultNanoCPUs,
		workspaceSize: DefaultWorkspaceSize,
		tmpSize:       DefaultTmpSize,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if _, ok := cfg.images[cfg.defaultLang]; !ok {
		return nil, fmt.Errorf("default language %q: no image configured: %w", cfg.defaultLang, errs.ErrInvalid)
	}
	d := &Docker{cfg: cfg, cli: cfg.cli, boxes: map[string]*box{}, tar: "tar"}
	if cfg.poolSize > 0 {
		d.pool = newPool(cfg.poolSize, cfg.poolLimits)
	}
	if d.cli == nil {
		cli, err := client.New(client.FromEnv, client.WithAPIVersionNegotiation())
		if err != nil {
			return nil, fmt.Errorf("docker client: %w: %w", err, errs.ErrUnavailable)
		}
		d.cli, d.ownClient = cli, true
	}
	pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if _, err := d.cli.Ping(pctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		d.closeClient()
		return nil, fmt.Errorf("docker engine does not answer: %w: %w", err, errs.ErrUnavailable)
	}
	return d, nil
}

// Client is the Engine API client, for BuildGoImage and checks.
func (d *Docker) Client() *client.Client { return d.cli }

// Name is "docker".
func (d *Docker) Name() string { return "docker" }

// Prepare creates the container for workspace with the image of language, labelled with
// who, so a later Run uses it. A workspace that already has a container keeps it (and its
// labels); who still labels the containers made for it later.
func (d *Docker) Prepare(ctx context.Context, workspace string, who Identity, language string, l backend.Limits) error {
	img, ok := d.cfg.images[language]
	if !ok {
		return fmt.Errorf("language %q: no image configured (have %s): %w", language, strings.Join(sortedKeys(d.cfg.images), ", "), errs.ErrInvalid)
	}
	ws, err := backend.Workspace(workspace)
	if err != nil {
		return err
	}
	b, err := d.box(ws)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if who != (Identity{}) {
		who.Dir = backend.CleanDir(who.Dir)
		b.who = who
	}
	return d.ensure(ctx, b, img, l.WithDefaults())
}

// Identify records whose workspace is, when the backend does not know yet (a service
// restarted since Prepare): the container its next command makes carries who in its labels,
// or, pooled, in its name.
func (d *Docker) Identify(workspace string, who Identity) {
	ws, err := backend.Workspace(workspace)
	if err != nil || who == (Identity{}) {
		return
	}
	b, err := d.box(ws)
	if err != nil || !b.mu.TryLock() {
		return // busy: a command or Prepare holds it, which knows
	}
	if b.who == (Identity{}) {
		who.Dir = backend.CleanDir(who.Dir)
		b.who = who
	}
	b.mu.Unlock()
}

// Run copies workspace into its container, runs s there, and copies /workspace back.
func (d *Docker) Run(ctx context.Context, workspace string, s backend.Spec, l backend.Limits) (*backend.Result, error) {
	if len(s.Allow) > 0 && !s.Network {
		return nil, fmt.Errorf("allow: only with network: %w", errs.ErrInvalid)
	}
	ws, dir, err := checkSpec(workspace, s)
	if err != nil {
		return nil, err
	}
	b, err := d.box(ws)
	if err != nil {
		return nil, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := d.ensure(ctx, b, d.cfg.images[d.cfg.defaultLang], l.WithDefaults()); err != nil {
		return nil, err
	}
	if s.Network {
		// The container keeps its loopback-only namespace; the run gets an egress proxy
		// to s.Allow inside it, and its clients are pointed there.
		eg, err := d.startEgress(ctx, b, s.Allow)
		if err != nil {
			return nil, err
		}
		defer eg.close()
		env := maps.Clone(s.Env)
		if env == nil {
			env = map[string]string{}
		}
		maps.Copy(env, eg.env())
		s.Env = env
	}
	return d.run(ctx, b, ws, dir, s, l.WithDefaults())
}

// Destroy removes the container of workspace (and its /workspace volume); the host
// workspace is left alone. A workspace without a container is not an error.
func (d *Docker) Destroy(ctx context.Context, workspace string) error {
	ws, err := backend.Workspace(workspace)
	if err != nil {
		return err
	}
	d.mu.Lock()
	b := d.boxes[ws]
	delete(d.boxes, ws)
	d.mu.Unlock()
	if b == nil {
		return nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return d.remove(ctx, b)
}

// Close removes every container the backend made and closes the client it opened.
func (d *Docker) Close() error {
	d.mu.Lock()
	boxes := d.boxes
	d.boxes, d.closed = map[string]*box{}, true
	d.mu.Unlock()
	d.closePool()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var firstErr error
	for _, b := range boxes {
		b.mu.Lock()
		if err := d.remove(ctx, b); err != nil && firstErr == nil {
			firstErr = err
		}
		b.mu.Unlock()
	}
	d.closeClient()
	return firstErr
}

func (d *Docker) closeClient() {
	if d.ownClient {
		_ = d.cli.Close()
	}
}

func (d *Docker) box(ws string) (*box, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return nil, fmt.Errorf("docker backend is closed: %w", errs.ErrFailedPrecondition)
	}
	b := d.boxes[ws]
	if b == nil {
		b = &box{ws: ws}
		d.boxes[ws] = b
	}
	return b, nil
}

// labels are the labels of b's next container. A workspace prepared without an identity
// (tests) still gets the dir of the service that reconciles this backend.
func (d *Docker) labels(b *box) map[string]string {
	who := b.who
	if who.Dir == "" {
		d.mu.Lock()
		who.Dir = d.dir
		d.mu.Unlock()
	}
	return map[string]string{
		labelSandbox:   "1",
		labelID:        who.ID,
		labelOwner:     who.Owner,
		labelDir:       who.Dir,
		labelWorkspace: b.ws,
	}
}

// checkSpec validates s against workspace and returns the workspace's absolute path and
// the cleaned, workspace-relative Dir.
func checkSpec(workspace string, s backend.Spec) (ws, dir string, err error) {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return "", "", fmt.Errorf("argv: empty command: %w", errs.ErrInvalid)
	}
	for i, a := range s.Argv {
		if strings.IndexByte(a, 0) >= 0 {
			return "", "", fmt.Errorf("argv[%d]: contains a NUL byte: %w", i, errs.ErrInvalid)
		}
	}
	for k, v := range s.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") || strings.IndexByte(v, 0) >= 0 {
			return "", "", fmt.Errorf("env %q: name must be non-empty without '=' or NUL, value without NUL: %w", k, errs.ErrInvalid)
		}
	}
	if ws, err = backend.Workspace(workspace); err != nil {
		return "", "", err
	}
	dir = filepath.ToSlash(filepath.Clean(s.Dir))
	if filepath.IsAbs(s.Dir) || dir == ".." || strings.HasPrefix(dir, "../") {
		return "", "", fmt.Errorf("dir %q: escapes the workspace: %w", s.Dir, errs.ErrInvalid)
	}
	// Dir is resolved inside the container, where a symlink pointing outside /workspace
	// would lead into the image: resolve it on the host copy and refuse that.
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
	return ws, filepath.ToSlash(strings.TrimPrefix(real[len(ws):], "/")), nil
}

func sortedKeys(m map[string]string) []string {
	return slices.Sorted(maps.Keys(m))
}
