package service

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"path/filepath"

	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"

	"github.com/thefold/thefold/services/sandbox/internal/backend"
	"github.com/thefold/thefold/services/sandbox/internal/backend/docker"
)

// Backends are the backends a server offers, its default, and why better ones are missing.
type Backends struct {
	Options []Option
	// Images is the docker image per language (the configured ones over the built-in Go
	// image), for Config.Images.
	Images  map[string]string
	Default sandboxv1.SandboxBackend
	Reasons []string
	Close   func()
}

// OpenBackends starts every backend that works on this machine: local always, bwrap when a
// probe sandbox runs, docker when an engine answers (building the Go image when it is
// missing and cfg allows). cfg.Backend chooses the default; a backend named there that does
// not work is an error, auto takes the most isolating one that does.
func OpenBackends(ctx context.Context, cfg Config, log *slog.Logger) (*Backends, error) {
	cfg = cfg.withDefaults()
	state := filepath.Join(cfg.Dir, ".state")
	hostOpts := []backend.Option{backend.WithLogger(log), backend.WithStateDir(state), backend.WithGoRoot(cfg.GoRoot)}
	out := &Backends{Images: map[string]string{"go": docker.DefaultGoImage}}
	maps.Copy(out.Images, cfg.Images)
	var closers []func() error
	offer := func(kind sandboxv1.SandboxBackend, b backend.Backend) {
		out.Options = append(out.Options, WithBackend(kind, b))
		closers = append(closers, b.Close)
	}
	reasons := map[sandboxv1.SandboxBackend]string{}

	if cfg.Backend == "auto" || cfg.Backend == "docker" {
		if d, err := openDocker(ctx, cfg, out.Images, log); err != nil {
			reasons[sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER] = "docker: " + err.Error()
		} else {
			offer(sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER, d)
		}
	}
	if b, err := backend.NewBwrap(hostOpts...); err != nil {
		reasons[sandboxv1.SandboxBackend_SANDBOX_BACKEND_BWRAP] = "bwrap: " + err.Error()
	} else {
		offer(sandboxv1.SandboxBackend_SANDBOX_BACKEND_BWRAP, b)
	}
	offer(sandboxv1.SandboxBackend_SANDBOX_BACKEND_LOCAL, backend.NewLocal(hostOpts...))
	out.Close = func() {
		for _, c := range closers {
			if err := c(); err != nil {
				log.Warn("sandbox backend close", "err", err)
			}
		}
	}

	order := []sandboxv1.SandboxBackend{sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER, sandboxv1.SandboxBackend_SANDBOX_BACKEND_BWRAP, sandboxv1.SandboxBackend_SANDBOX_BACKEND_LOCAL}
	switch cfg.Backend {
	case "docker":
		order = order[:1]
	case "bwrap":
		order = order[1:2]
	case "local":
		order = order[2:]
	}
	for _, k := range order {
		if r, broken := reasons[k]; broken {
			out.Reasons = append(out.Reasons, r)
			continue
		}
		out.Default = k
		break
	}
	if out.Default == sandboxv1.SandboxBackend_SANDBOX_BACKEND_UNSPECIFIED {
		out.Close()
		return nil, fmt.Errorf("THEFOLD_SANDBOX_BACKEND=%s does not work here: %v", cfg.Backend, out.Reasons)
	}
	out.Options = append(out.Options, WithDefault(out.Default, out.Reasons))
	return out, nil
}

// openDocker connects to the engine and makes sure the Go image is there.
func openDocker(ctx context.Context, cfg Config, images map[string]string, log *slog.Logger) (*docker.Docker, error) {
	d, err := docker.New(ctx, docker.WithLogger(log), docker.WithImages(images), docker.WithNanoCPUs(int64(cfg.CPUs*1e9)))
	if err != nil {
		return nil, err
	}
	img := images["go"]
	if _, err := d.Client().ImageInspect(ctx, img); err != nil {
		if !cfg.DockerBuildImage || img != docker.DefaultGoImage {
			d.Close()
			return nil, fmt.Errorf("image %s is not there (build it, or set THEFOLD_SANDBOX_DOCKER_BUILD_IMAGE=true for the built-in one)", img)
		}
		log.Info("building the Go sandbox image (busybox + the host's Go toolchain)", "image", img)
		if err := docker.BuildGoImage(ctx, d.Client(), img, docker.GoImageSource{GoRoot: cfg.GoRoot}); err != nil {
			d.Close()
			return nil, fmt.Errorf("building %s: %w", img, err)
		}
	}
	return d, nil
}
