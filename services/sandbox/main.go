// Command sandbox is TheFold's sandbox service: isolated workspaces (kubernetes, docker,
// bwrap or local backends), their files, commands, the validation pipeline, snapshots and
// diffs, over gRPC in its own PostgreSQL schema.
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"syscall"

	"github.com/thefold/thefold/pkg/config"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	"github.com/thefold/thefold/pkg/platform"

	"github.com/thefold/thefold/services/sandbox/internal/backend/docker"
	"github.com/thefold/thefold/services/sandbox/internal/egress"
	"github.com/thefold/thefold/services/sandbox/internal/service"
	"github.com/thefold/thefold/services/sandbox/internal/store"
	"github.com/thefold/thefold/services/sandbox/migrations"
)

func main() {
	egress.MaybeRunForwarder()
	if len(os.Args) == 2 && os.Args[1] == "build-image" {
		os.Exit(buildImage())
	}
	if len(os.Args) == 2 && os.Args[1] == "warm-cache" {
		os.Exit(warmCache())
	}
	platform.Main(sandboxService())
}

// buildImage is `sandbox build-image`: it builds (or brings up to date) the built-in
// sandbox image on this machine, for a sandbox service that runs where the host's
// toolchains are not (docker-compose runs `make images`, which calls this).
func buildImage() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	goRoot := os.Getenv("THEFOLD_SANDBOX_GOROOT")
	if goRoot == "" {
		goRoot = "/usr/local/go"
	}
	d, err := docker.New(ctx)
	if err == nil {
		defer d.Close()
		err = docker.BuildImage(ctx, d.Client(), docker.DefaultImage, docker.ImageSource{GoRoot: goRoot})
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox build-image:", err)
		return 1
	}
	fmt.Println(docker.DefaultImage)
	return 0
}

// warmCache is `sandbox warm-cache`: it makes the bwrap sandboxes' shared Go build cache
// on this machine (the standard library built once, then mounted read-only into every
// bwrap sandbox), configured as the service is (THEFOLD_SANDBOX_GOROOT,
// THEFOLD_SANDBOX_WARM_CACHE_DIR), and prints its directory. A service makes it on its
// first start otherwise, and its first sandboxes wait for it; `make setup` runs this
// instead, once, before anything waits.
func warmCache() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var cfg service.Config
	if err := config.Load(ctx, &cfg, config.Env(nil)); err != nil {
		fmt.Fprintln(os.Stderr, "sandbox warm-cache:", err)
		return 1
	}
	dir, err := service.WarmBwrapCache(ctx, cfg, slog.New(slog.NewTextHandler(os.Stderr, nil)))
	if err != nil {
		fmt.Fprintln(os.Stderr, "sandbox warm-cache:", err)
		return 1
	}
	if dir == "" {
		fmt.Fprintln(os.Stderr, "sandbox warm-cache: THEFOLD_SANDBOX_WARM_CACHE_DIR=off: no shared cache")
		return 0
	}
	fmt.Println(dir)
	return 0
}

// sandboxService wires pool → store → backends → service, and the reaper of expired
// sandboxes.
func sandboxService() platform.Service {
	return platform.Service{
		Name:       "sandbox",
		Schema:     "sandbox",
		Migrations: migrations.FS,
		Register: func(ctx context.Context, d *platform.Deps) error {
			var cfg service.Config
			if err := config.Load(ctx, &cfg, d.Lookup); err != nil {
				return err
			}
			bs, err := service.OpenBackends(ctx, cfg, d.Logger)
			if err != nil {
				return err
			}
			d.OnClose(bs.Close)
			cfg.Images = bs.Images
			opts := append(bs.Options, service.WithLogger(d.Logger))
			// CreateSandbox from a repository calls the github service; without its address
			// sandboxes are created empty or from an archive only.
			if addr, _ := d.Lookup.Lookup(platform.AddrEnv("github")); addr != "" {
				conn, err := d.Conn(ctx, "github")
				if err != nil {
					return err
				}
				opts = append(opts, service.WithGitHub(githubv1.NewRepoServiceClient(conn)))
			}
			svc, err := service.New(cfg, store.New(d.Pool), opts...)
			if err != nil {
				return err
			}
			d.Logger.InfoContext(ctx, "sandbox backends", "default", bs.Default.String(), "available", bs.Available, "missing", bs.Missing)
			if bs.Default == sandboxv1.SandboxBackend_SANDBOX_BACKEND_LOCAL {
				d.Logger.WarnContext(ctx, "SANDBOXES ARE NOT ISOLATED: the default backend is local (THEFOLD_SANDBOX_ALLOW_LOCAL; commands run on this host as this user, with network); for development only", "why", bs.Reasons)
			} else if slices.Contains(bs.Available, "local") {
				d.Logger.WarnContext(ctx, "the local backend is offered to admins (THEFOLD_SANDBOX_ALLOW_LOCAL): sandboxes that ask for it run without isolation")
			}
			d.Go("sandbox reaper", svc.RunReaper)
			sandboxv1.RegisterSandboxServiceServer(d.Server.GRPC(), svc)
			return nil
		},
	}
}
