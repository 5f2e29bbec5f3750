// Command ai is TheFold's ai service: every LLM call of the platform — provider clients on
// the official SDKs, the model registry and selection, prompts with prompt caching,
// structured-output parsing and repair, the usage ledger and embeddings — over gRPC in its
// own PostgreSQL schema.
package main

import (
	"context"
	"errors"
	"time"

	"github.com/thefold/thefold/pkg/config"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/pkg/platform"

	"github.com/thefold/thefold/services/ai/internal/engine"
	"github.com/thefold/thefold/services/ai/internal/registry"
	"github.com/thefold/thefold/services/ai/internal/service"
	"github.com/thefold/thefold/services/ai/internal/store"
	"github.com/thefold/thefold/services/ai/migrations"
)

func main() { platform.Main(aiService()) }

// aiConfig is the ai service's own configuration, beside platform.Config.
type aiConfig struct {
	Engine engine.Config
	// PruneEvery is how often answers recorded under a request_id are pruned.
	PruneEvery time.Duration `env:"THEFOLD_AI_PRUNE_INTERVAL, default=1h"`
}

// Validate collects every problem.
func (c *aiConfig) Validate() error {
	var problems []error
	if c.PruneEvery <= 0 {
		problems = append(problems, errors.New("THEFOLD_AI_PRUNE_INTERVAL: must be positive"))
	}
	return errors.Join(append(problems, c.Engine.Validate())...)
}

// aiService wires pool → store → registry → engine → handlers.
func aiService() platform.Service {
	return platform.Service{
		Name:       "ai",
		Schema:     "ai",
		Migrations: migrations.FS,
		Register: func(ctx context.Context, d *platform.Deps) error {
			var cfg aiConfig
			if err := config.Load(ctx, &cfg, d.Lookup); err != nil {
				return err
			}
			// api_key_ref "env:NAME" reads only the names THEFOLD_AI_KEY_ENV_ALLOW allows.
			lookup := cfg.Engine.GuardedLookup(func(name string) (string, bool) { return d.Lookup.Lookup(name) })
			st := store.New(d.Pool)
			reg := registry.New(st,
				registry.WithUsable(cfg.Engine.Usable(lookup)),
				registry.WithPreferred(cfg.Engine.Provider),
				registry.WithEnabledProvider(cfg.Engine.Provider),
				registry.WithKeyLookup(lookup))
			var engOpts []engine.Option
			if cfg.Engine.DailySpendLimitMicros > 0 && cfg.Engine.SpendLimitExemptAdmins {
				// The agent and builder call for a job's owner with service tokens, which
				// carry no roles: the gateway says whether that owner is an admin.
				if conn, err := d.Conn(ctx, "gateway"); err == nil {
					engOpts = append(engOpts, engine.WithOwners(engine.CacheOwners(owners{gatewayv1.NewUserServiceClient(conn)}, time.Minute)))
				} else {
					d.Logger.Warn("the gateway is not reachable: admins' jobs are not exempt from the spend limit", "err", err)
				}
			}
			eng := engine.New(cfg.Engine, d.Logger, reg, st, lookup, engOpts...)
			if cfg.Engine.Provider == "" && !anyKey(ctx, reg) {
				d.Logger.Warn("no LLM provider is configured: generating RPCs answer FAILED_PRECONDITION until one is; embeddings use the local embedder",
					"set", "THEFOLD_AI_PROVIDER and its key, or THEFOLD_AI_BASE_URL for an OpenAI-compatible server")
			}
			d.Go("ai answer pruning", func(ctx context.Context) error {
				return st.RunAnswerPruning(ctx, d.Logger, cfg.PruneEvery, cfg.Engine.AnswerRetention)
			})
			aiv1.RegisterAIServiceServer(d.Server.GRPC(), service.NewAIServer(eng, reg))
			aiv1.RegisterModelRegistryServiceServer(d.Server.GRPC(), service.NewRegistryServer(reg, st,
				service.WithKeyAllow(cfg.Engine.KeyAllow()), service.WithBaseURLPolicy(cfg.Engine.BaseURLPolicy())))
			return nil
		},
	}
}

// owners asks the gateway whether a user is an admin, with the caller's (forwarded) token:
// GetUser of the token's own owner is open to every principal.
type owners struct{ users gatewayv1.UserServiceClient }

func (o owners) IsAdmin(ctx context.Context, userID string) (bool, error) {
	resp, err := o.users.GetUser(ctx, &gatewayv1.GetUserRequest{Id: userID})
	if err != nil {
		return false, err
	}
	return resp.GetUser().GetRole() == gatewayv1.Role_ROLE_ADMIN && !resp.GetUser().GetDisabled(), nil
}

// anyKey reports whether some registry provider can be called.
func anyKey(ctx context.Context, reg *registry.Registry) bool {
	c, err := reg.Candidates(ctx)
	return err == nil && len(c) > 0
}
