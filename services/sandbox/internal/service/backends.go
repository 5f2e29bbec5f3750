package service

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"

	"github.com/thefold/thefold/services/sandbox/internal/backend"
	"github.com/thefold/thefold/services/sandbox/internal/backend/docker"
	"github.com/thefold/thefold/services/sandbox/internal/backend/kube"
)

// Backends are the backends a server offers, its default, and why the others are missing.
type Backends struct {
	Options []Option
	// Images is the docker image per language (the configured ones over the built-in
	// image), for Config.Images.
	Images map[string]string
	// KubeImage is the kubernetes backend's image, when it is offered.
	KubeImage string
	Default   sandboxv1.SandboxBackend
	// Available names the backends offered, most isolating first.
	Available []string
	// Missing says, per backend name, why it is not offered.
	Missing map[string]string
	// Reasons say why backends more isolating than the default are missing (reported in
	// CreateSandbox's warnings).
	Reasons []string
	Close   func()
}

// isolation orders the backends: a caller may ask only for one at least as isolated as
// the server's default.
// kubernetes and docker are one level: a container with the same protections (a
// RuntimeClass such as gVisor makes the pod stronger still, but the service cannot tell).
var isolation = map[sandboxv1.SandboxBackend]int{
	sandboxv1.SandboxBackend_SANDBOX_BACKEND_LOCAL:      1,
	sandboxv1.SandboxBackend_SANDBOX_BACKEND_BWRAP:      2,
	sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER:     3,
	sandboxv1.SandboxBackend_SANDBOX_BACKEND_KUBERNETES: 3,
}

// byIsolation is every backend, most isolating first.
var byIsolation = []sandboxv1.SandboxBackend{sandboxv1.SandboxBackend_SANDBOX_BACKEND_KUBERNETES,
	sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER, sandboxv1.SandboxBackend_SANDBOX_BACKEND_BWRAP,
	sandboxv1.SandboxBackend_SANDBOX_BACKEND_LOCAL}

// localOff is why the local backend is not offered when the operator did not enable it.
const localOff = "off: it runs commands on this host without isolation; THEFOLD_SANDBOX_ALLOW_LOCAL=true offers it (development only)"

// OpenBackends starts every isolating backend that works on this machine, side by side:
// kubernetes when THEFOLD_SANDBOX_BACKENDS names it (it must work: the operator asked for
// it), docker when an engine answers (building the sandbox image when it is missing and cfg
// allows), bwrap when a probe sandbox runs; and local only when cfg.AllowLocal. cfg.Backend
// chooses the default: a backend named there that does not work is an error; auto takes
// the most isolating one that works, and never falls back to local unless it is allowed.
func OpenBackends(ctx context.Context, cfg Config, log *slog.Logger) (*Backends, error) {
	cfg = cfg.withDefaults()
	hostOpts, err := hostOptions(cfg, log)
	if err != nil {
		return nil, err
	}
	out := &Backends{Images: docker.DefaultImages(), Missing: map[string]string{}}
	maps.Copy(out.Images, cfg.Images)
	var closers []func() error
	offered := map[sandboxv1.SandboxBackend]bool{}
	offer := func(kind sandboxv1.SandboxBackend, b backend.Backend) {
		out.Options = append(out.Options, WithBackend(kind, b))
		closers = append(closers, b.Close)
		offered[kind] = true
	}

	const notOffered = "not offered: not in THEFOLD_SANDBOX_BACKENDS"
	if !slices.Contains(cfg.Offer, "kubernetes") {
		out.Missing["kubernetes"] = notOffered
	} else if k, err := openKube(ctx, cfg, log); err != nil {
		return nil, fmt.Errorf("THEFOLD_SANDBOX_BACKENDS names kubernetes, but it does not work here: %w (THEFOLD_SANDBOX_KUBECONFIG, THEFOLD_SANDBOX_KUBE_NAMESPACE; see docs/kubernetes.md)", err)
	} else {
		offer(sandboxv1.SandboxBackend_SANDBOX_BACKEND_KUBERNETES, k)
		out.KubeImage = k.Image()
	}
	if !slices.Contains(cfg.Offer, "docker") {
		out.Missing["docker"] = notOffered
	} else if d, err := openDocker(ctx, cfg, out.Images, log); err != nil {
		out.Missing["docker"] = err.Error()
	} else {
		offer(sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER, d)
	}
	if !slices.Contains(cfg.Offer, "bwrap") {
		out.Missing["bwrap"] = notOffered
	} else if b, err := backend.NewBwrap(bwrapOptions(cfg, hostOpts)...); err != nil {
		out.Missing["bwrap"] = err.Error()
	} else {
		offer(sandboxv1.SandboxBackend_SANDBOX_BACKEND_BWRAP, b)
	}
	if cfg.AllowLocal {
		offer(sandboxv1.SandboxBackend_SANDBOX_BACKEND_LOCAL, backend.NewLocal(hostOpts...))
	} else {
		out.Missing["local"] = localOff
	}
	out.Close = func() {
		for _, c := range closers {
			if err := c(); err != nil {
				log.Warn("sandbox backend close", "err", err)
			}
		}
	}
	for _, k := range byIsolation {
		if offered[k] {
			out.Available = append(out.Available, backendName(k))
		}
	}

	// kubernetes is a candidate only when offered, which only the operator does.
	candidates := []sandboxv1.SandboxBackend{sandboxv1.SandboxBackend_SANDBOX_BACKEND_KUBERNETES,
		sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER, sandboxv1.SandboxBackend_SANDBOX_BACKEND_BWRAP}
	switch cfg.Backend {
	case "kubernetes":
		candidates = candidates[:1]
	case "docker":
		candidates = candidates[1:2]
	case "bwrap":
		candidates = candidates[2:]
	case "local":
		candidates = []sandboxv1.SandboxBackend{sandboxv1.SandboxBackend_SANDBOX_BACKEND_LOCAL}
	}
	for _, k := range candidates {
		if offered[k] {
			out.Default = k
			break
		}
	}
	for _, k := range byIsolation {
		// kubernetes is opt-in (and fatal when it fails): not offered is no reason.
		if isolation[k] > isolation[out.Default] && !offered[k] && k != sandboxv1.SandboxBackend_SANDBOX_BACKEND_KUBERNETES {
			out.Reasons = append(out.Reasons, backendName(k)+": "+out.Missing[backendName(k)])
		}
	}
	if out.Default == sandboxv1.SandboxBackend_SANDBOX_BACKEND_UNSPECIFIED {
		out.Close()
		var why []string
		for _, k := range candidates {
			why = append(why, backendName(k)+": "+out.Missing[backendName(k)])
		}
		return nil, fmt.Errorf("THEFOLD_SANDBOX_BACKEND=%s: no isolating backend works here (%v); install docker or bubblewrap, or offer kubernetes in THEFOLD_SANDBOX_BACKENDS (THEFOLD_SANDBOX_BACKEND=local with THEFOLD_SANDBOX_ALLOW_LOCAL=true runs code unisolated, for development only)", cfg.Backend, why)
	}
	out.Options = append(out.Options, WithDefault(out.Default, out.Reasons))
	return out, nil
}

// WarmBwrapCache makes the bwrap backend's shared Go build cache for cfg's toolchain where
// cfg's service would look for it, when the machine has none yet, and returns its
// directory ("" when cfg turns the cache off). It fails when bubblewrap cannot make a
// sandbox here or the cache cannot be made. Nothing else of the service starts.
func WarmBwrapCache(ctx context.Context, cfg Config, log *slog.Logger) (string, error) {
	cfg = cfg.withDefaults()
	dir := warmDir(cfg.WarmCacheDir)
	if dir == "" {
		return "", nil
	}
	hostOpts, err := hostOptions(cfg, log)
	if err != nil {
		return "", err
	}
	b, err := backend.NewBwrap(bwrapOptions(cfg, hostOpts)...)
	if err != nil {
		return "", err
	}
	defer func() { _ = b.Close() }()
	return b.WarmGoCache(ctx)
}

// hostOptions are what every backend on this host (bwrap, local) is given: the logger,
// the state directory, made here (it must exist before a backend is probed: on a first
// start it did not, and bwrap's probe failed on it, so bwrap was never offered), and the
// Go toolchain.
func hostOptions(cfg Config, log *slog.Logger) ([]backend.Option, error) {
	state := filepath.Join(cfg.Dir, ".state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		return nil, fmt.Errorf("sandbox state directory: %w", err)
	}
	return []backend.Option{backend.WithLogger(log), backend.WithStateDir(state), backend.WithGoRoot(cfg.GoRoot)}, nil
}

// bwrapOptions are the bwrap backend's: the host's, and the shared read-only Go build cache
// (THEFOLD_SANDBOX_WARM_CACHE_DIR), so that `sandbox warm-cache` fills the very directory
// the service's sandboxes read.
func bwrapOptions(cfg Config, hostOpts []backend.Option) []backend.Option {
	return append(slices.Clone(hostOpts), backend.WithWarmGoCache(warmDir(cfg.WarmCacheDir)))
}

// warmDir is THEFOLD_SANDBOX_WARM_CACHE_DIR as a directory, "" for none.
func warmDir(v string) string {
	switch v {
	case "off":
		return ""
	case "":
		return backend.DefaultWarmDir()
	}
	return v
}

// openDocker connects to the engine and makes sure the sandbox images are there: the
// built-in one (every language's toolchain) is built, or rebuilt when the host's
// toolchains changed, when cfg allows; a configured image that is missing takes its
// language out of images (logged), so those sandboxes go to bwrap, saying so, or fail.
func openDocker(ctx context.Context, cfg Config, images map[string]string, log *slog.Logger) (*docker.Docker, error) {
	d, err := docker.New(ctx, docker.WithLogger(log), docker.WithImages(images), docker.WithNanoCPUs(int64(cfg.CPUs*1e9)),
		docker.WithToolchainVolumes(cfg.ToolchainVolumes),
		// The pool's containers have the limits a sandbox gets by default (limitsOf of the
		// defaults), so handing one out needs no update.
		docker.WithPool(cfg.Pool, backend.Limits{MemoryBytes: cfg.Memory, CPUs: cfg.CPUs, Pids: int(cfg.Pids)}))
	if err != nil {
		return nil, err
	}
	present := map[string]error{}
	for _, img := range images {
		if _, done := present[img]; done {
			continue
		}
		switch {
		case img == docker.DefaultImage && cfg.DockerBuildImage:
			start := time.Now()
			err := docker.BuildImage(ctx, d.Client(), img, docker.ImageSource{GoRoot: cfg.GoRoot})
			if err != nil {
				err = fmt.Errorf("building %s: %w", img, err)
			}
			present[img] = err
			log.Info("sandbox image ready", "image", img, "took", time.Since(start).Round(time.Millisecond), "err", err)
		default:
			if _, err := d.Client().ImageInspect(ctx, img); err != nil {
				present[img] = fmt.Errorf("image %s is not there (build it: `make images` or `sandbox build-image` on the engine's host for the built-in %s, or set THEFOLD_SANDBOX_DOCKER_BUILD_IMAGE=true where the host's toolchains are)", img, docker.DefaultImage)
			} else {
				present[img] = nil
			}
		}
	}
	var problems []string
	for _, lang := range slices.Sorted(maps.Keys(images)) {
		if err := present[images[lang]]; err != nil {
			log.Warn("sandbox image missing: this language gets no docker sandbox", "language", lang, "err", err)
			problems = append(problems, err.Error())
			delete(images, lang)
		}
	}
	if len(images) == 0 {
		d.Close()
		return nil, fmt.Errorf("no sandbox image: %s", strings.Join(slices.Compact(problems), "; "))
	}
	return d, nil
}

// openKube connects the kubernetes backend to the cluster of cfg (its kubeconfig, else the
// one the service runs in) and checks its namespace's deny-all NetworkPolicy.
func openKube(ctx context.Context, cfg Config, log *slog.Logger) (*kube.Kube, error) {
	rc, err := kube.RESTConfig(cfg.Kubeconfig)
	if err != nil {
		return nil, err
	}
	return kube.Open(ctx, rc, kube.Config{
		Namespace: cfg.KubeNamespace, Image: cfg.KubeImage, RuntimeClass: cfg.KubeRuntimeClass,
		StartTimeout: cfg.KubeStartTimeout, MaxLifetime: cfg.MaxTTL, CPUs: cfg.CPUs, Logger: log,
	})
}
