// Package db connects a service to its own PostgreSQL schema and migrates it.
//
// Every service owns exactly one schema. Open returns a pool whose sessions
// resolve unqualified names in that schema first (then public, where shared
// extensions such as pgvector live). Migrate creates the schema and applies
// the platform migrations (the events outbox) and the service's own goose
// migrations into it, serialized across processes by an advisory lock.
package db

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// DefaultURL is THEFOLD_DATABASE_URL's default (repeated in Config's tag): the local
// server and administrator that scripts/setup.sh creates.
const DefaultURL = "postgres://thefold:thefold@127.0.0.1:5432/thefold?sslmode=disable"

// Config is the database part of a service's configuration. In a deployment each service's
// URL names its own role (see roles.go); the default, the administrator, suits tests.
type Config struct {
	// URL is the service's PostgreSQL connection string, naming its own role.
	URL string `env:"THEFOLD_DATABASE_URL, default=postgres://thefold:thefold@127.0.0.1:5432/thefold?sslmode=disable"`
	// MaxConns bounds the service's connection pool.
	MaxConns int32 `env:"THEFOLD_DATABASE_MAX_CONNS, default=10"`
}

// maxSchemaLen keeps names derived from a schema (the notification channel
// "thefold_events_<schema>", test template databases
// "thefold_tpl_<schema>_<hash>") within PostgreSQL's 63-byte identifier limit.
const maxSchemaLen = 40

var schemaPattern = regexp.MustCompile(`^[a-z][a-z0-9_]*$`)

// ValidateSchema reports whether name is acceptable as a service schema: a
// lower-case snake_case identifier of at most 40 bytes, not starting with the
// reserved "pg_" prefix. Validated names never need quoting in SQL.
func ValidateSchema(name string) error {
	switch {
	case !schemaPattern.MatchString(name):
		return fmt.Errorf("invalid schema name %q: want a lower-case snake_case identifier", name)
	case len(name) > maxSchemaLen:
		return fmt.Errorf("invalid schema name %q: longer than %d bytes", name, maxSchemaLen)
	case strings.HasPrefix(name, "pg_"):
		return fmt.Errorf("invalid schema name %q: the pg_ prefix is reserved", name)
	}
	return nil
}

// Option configures the pool Open makes.
type Option func(*pgxpool.Config)

// AfterConnect runs fn on every new connection before the pool hands it out: for a
// service's own types (pgvector's, registered for their binary format).
func AfterConnect(fn func(context.Context, *pgx.Conn) error) Option {
	return func(c *pgxpool.Config) {
		prev := c.AfterConnect
		c.AfterConnect = func(ctx context.Context, conn *pgx.Conn) error {
			if prev != nil {
				if err := prev(ctx, conn); err != nil {
					return err
				}
			}
			return fn(ctx, conn)
		}
	}
}

// Open returns a pinged pool for url whose connections use
// search_path = <schema>, public. maxConns <= 0 keeps pgxpool's default.
func Open(ctx context.Context, url, schema string, maxConns int32, opts ...Option) (*pgxpool.Pool, error) {
	if err := ValidateSchema(schema); err != nil {
		return nil, fmt.Errorf("db: open: %w", err)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("db: open schema %s: %w", schema, err) // pgx redacts the password
	}
	setSessionParams(cfg.ConnConfig, schema)
	if maxConns > 0 {
		cfg.MaxConns = maxConns
	}
	for _, o := range opts {
		o(cfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("db: open schema %s: %w", schema, err)
	}
	if err := pool.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("db: open schema %s: ping %s@%s:%d/%s: %w",
			schema, cfg.ConnConfig.User, cfg.ConnConfig.Host, cfg.ConnConfig.Port, cfg.ConnConfig.Database, err)
	}
	return pool, nil
}

// setSessionParams makes the schema the session's default and turns JIT off; they are sent
// in the startup message, so they hold for every connection without an extra round trip.
// The schema must have been validated (it is not quoted).
func setSessionParams(cfg *pgx.ConnConfig, schema string) {
	cfg.RuntimeParams["search_path"] = schema + ", public"
	// No JIT compilation: every query of the services is a short one, and JIT only costs
	// them. It kicked in wherever the planner's estimate passed jit_above_cost — a memory
	// search with no HNSW index to walk yet (the disabled sort's penalty) spent ~260 ms
	// compiling a query that then ran in 0.05 ms; GetStats over 100k memories ~100 ms.
	cfg.RuntimeParams["jit"] = "off"
}
