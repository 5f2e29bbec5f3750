// Command github is TheFold's github service: repositories on the local forge (bare git
// repositories under the data directory, pull requests and issues in its schema) and on
// GitHub (REST API), with trees, files, archives, relevant-file selection within a token
// budget, branches, commits, pull requests and issues over gRPC.
package main

import (
	"context"

	"github.com/thefold/thefold/pkg/config"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/pkg/platform"
	"github.com/thefold/thefold/pkg/seal"

	"github.com/thefold/thefold/services/github/internal/hub"
	"github.com/thefold/thefold/services/github/internal/local"
	"github.com/thefold/thefold/services/github/internal/service"
	"github.com/thefold/thefold/services/github/internal/store"
	"github.com/thefold/thefold/services/github/migrations"
)

func main() { platform.Main(githubService()) }

// githubService wires pool → store → providers → service.
func githubService() platform.Service {
	return platform.Service{
		Name:       "github",
		Schema:     "github",
		Migrations: migrations.FS,
		Register: func(ctx context.Context, d *platform.Deps) error {
			var cfg service.Config
			if err := config.Load(ctx, &cfg, d.Lookup); err != nil {
				return err
			}
			st := store.New(d.Pool)
			lp, err := local.New(cfg.RepoDirectory(), st, cfg.PublicURL)
			if err != nil {
				return err
			}
			opts := []service.Option{service.WithProvider(lp), service.WithLogger(d.Logger)}
			if path := cfg.SecretKeyPath(); path != "" {
				key, err := seal.LoadKeyFile(path, cfg.SecretKeyFile == "")
				if err != nil {
					return err
				}
				box, err := seal.New(key)
				if err != nil {
					return err
				}
				opts = append(opts, service.WithSecrets(box))
			}
			if cfg.Token != "" || len(cfg.GitHubOwners) > 0 {
				// No token here: every GitHub call carries the caller's own credential or,
				// through an allow-list grant, the server's (service.authorize).
				hp, err := hub.New(hub.Config{BaseURL: cfg.APIURL, Logger: d.Logger})
				if err != nil {
					return err
				}
				opts = append(opts, service.WithProvider(hp))
			}
			svc, err := service.New(cfg, st, opts...)
			if err != nil {
				return err
			}
			d.Logger.InfoContext(ctx, "github forges", "default", cfg.Forge, "local_dir", cfg.RepoDirectory(),
				"github", cfg.Token != "", "github_owners", cfg.GitHubOwners)
			githubv1.RegisterRepoServiceServer(d.Server.GRPC(), svc)
			return nil
		},
	}
}
