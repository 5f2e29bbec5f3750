// Command memory is TheFold's memory service: long-term memories with pgvector embeddings
// (through the ai service's Embed) and full-text vectors, found again by hybrid search with
// temporal decay, usage boost and integrity checks, over gRPC in its own PostgreSQL schema.
package main

import (
	"context"
	"fmt"

	"github.com/thefold/thefold/pkg/config"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	"github.com/thefold/thefold/pkg/platform"

	"github.com/thefold/thefold/services/memory/internal/service"
	"github.com/thefold/thefold/services/memory/internal/store"
	"github.com/thefold/thefold/services/memory/migrations"
)

func main() { platform.Main(memoryService()) }

// memoryService wires pool → store → service (with a client of the ai service, which
// embeds).
func memoryService() platform.Service {
	return platform.Service{
		Name:       "memory",
		Schema:     "memory",
		Migrations: migrations.FS,
		DBOptions:  store.DBOptions(),
		Register: func(ctx context.Context, d *platform.Deps) error {
			var cfg service.Config
			if err := config.Load(ctx, &cfg, d.Lookup); err != nil {
				return err
			}
			if addr, _ := d.Lookup.Lookup(platform.AddrEnv("ai")); addr == "" {
				return fmt.Errorf("memory embeds through the ai service: set %s", platform.AddrEnv("ai"))
			}
			conn, err := d.Conn(ctx, "ai")
			if err != nil {
				return err
			}
			svc := service.New(cfg, store.New(d.Pool), aiv1.NewAIServiceClient(conn),
				service.WithLogger(d.Logger), service.WithMetrics(d.Server.Registry()), service.WithServiceSigner(d.ServiceSigner))
			if cfg.ConsolidateInterval > 0 {
				d.Go("memory consolidation", func(ctx context.Context) error { return svc.RunConsolidation(ctx, cfg.ConsolidateInterval) })
			}
			d.Go("memory re-embedding", func(ctx context.Context) error { return svc.RunReembed(ctx, cfg.ReembedInterval) })
			memoryv1.RegisterMemoryServiceServer(d.Server.GRPC(), svc)
			return nil
		},
	}
}
