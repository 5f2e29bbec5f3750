package db

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/pressly/goose/v3"
)

//go:embed migrations/*.sql
var platformFS embed.FS

// Goose version tables. The platform's and the service's migrations are
// versioned separately, so a service numbers its files from 00001 without
// colliding with the platform's.
const (
	platformVersionTable = "platform_db_version"
	serviceVersionTable  = "goose_db_version"
)

// PlatformMigrations returns the goose migrations every service schema gets
// (the events outbox). Test helpers hash them to key template databases.
func PlatformMigrations() fs.FS {
	sub, err := fs.Sub(platformFS, "migrations")
	if err != nil {
		panic(err) // unreachable: the directory is embedded at build time
	}
	return sub
}

// Migrate creates schema if it is missing and applies, in order, the platform
// migrations and then the service's migrations (goose SQL files at the root
// of migrations; nil means the service has none). Concurrent calls for the
// same database and schema, from any number of processes, serialize on a
// session advisory lock, so every replica may call Migrate at start.
//
// The tables events and platform_db_version are reserved in every schema.
func Migrate(ctx context.Context, url, schema string, migrations fs.FS) error {
	if err := ValidateSchema(schema); err != nil {
		return fmt.Errorf("db: migrate: %w", err)
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		return fmt.Errorf("db: migrate schema %s: %w", schema, err)
	}
	setSessionParams(cfg, schema)

	unlock, err := lockSchema(ctx, cfg, schema)
	if err != nil {
		return err
	}
	defer unlock()

	sqlDB := stdlib.OpenDB(*cfg)
	defer sqlDB.Close()
	sqlDB.SetMaxOpenConns(2)

	if err := apply(ctx, sqlDB, schema, "platform", platformVersionTable, PlatformMigrations()); err != nil {
		return err
	}
	if migrations == nil {
		return nil
	}
	return apply(ctx, sqlDB, schema, "service", serviceVersionTable, migrations)
}

// lockSchema takes the schema's migration lock on a dedicated session and
// creates the schema under it (CREATE SCHEMA IF NOT EXISTS alone races:
// two sessions can both pass the existence check and one then fails on
// the catalog's unique index). We hold a blocking pg_advisory_lock rather
// than goose's SessionLocker, which polls pg_try_advisory_lock every 5s and
// would make every waiting replica sleep that long.
func lockSchema(ctx context.Context, cfg *pgx.ConnConfig, schema string) (unlock func(), err error) {
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("db: migrate schema %s: connect: %w", schema, err)
	}
	closeConn := func() {
		// Closing the session releases the advisory lock even if the
		// explicit unlock failed.
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}
	key := migrationLockKey(schema)
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		closeConn()
		return nil, fmt.Errorf("db: migrate schema %s: take migration lock: %w", schema, err)
	}
	// A service's own role owns its schema but may not create schemas (see roles.go), and
	// PostgreSQL checks that right before IF NOT EXISTS: look first, create only if missing.
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)", schema).Scan(&exists); err != nil {
		closeConn()
		return nil, fmt.Errorf("db: migrate schema %s: look up schema: %w", schema, err)
	}
	if !exists {
		if _, err := conn.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
			closeConn()
			return nil, fmt.Errorf("db: migrate schema %s: create schema (as role %s; the service roles are created by scripts/setup.sh or thefold up): %w",
				schema, cfg.User, err)
		}
	}
	return func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_, _ = conn.Exec(cctx, "SELECT pg_advisory_unlock($1)", key)
		closeConn()
	}, nil
}

// migrationLockKey derives the advisory lock id from the schema name, so
// services sharing a database migrate independently. Advisory locks are
// scoped to the current database already.
func migrationLockKey(schema string) int64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte("thefold/db.Migrate/" + schema))
	return int64(h.Sum64())
}

// apply runs one set of goose migrations, versioned in <schema>.<table>.
func apply(ctx context.Context, sqlDB *sql.DB, schema, kind, table string, migrations fs.FS) error {
	p, err := goose.NewProvider(goose.DialectPostgres, sqlDB, migrations,
		goose.WithTableName(schema+"."+table),
		goose.WithDisableGlobalRegistry(true),
	)
	if errors.Is(err, goose.ErrNoMigrations) {
		return fmt.Errorf("db: migrate schema %s: no %s migrations at the root of the FS (embed.FS needs fs.Sub to the migrations directory): %w",
			schema, kind, err)
	}
	if err != nil {
		return fmt.Errorf("db: migrate schema %s: load %s migrations: %w", schema, kind, err)
	}
	if _, err := p.Up(ctx); err != nil {
		if pe, ok := errors.AsType[*goose.PartialError](err); ok && pe.Failed != nil && pe.Failed.Source != nil {
			return fmt.Errorf("db: migrate schema %s: %s migration %s failed: %w",
				schema, kind, pe.Failed.Source.Path, pe.Err)
		}
		return fmt.Errorf("db: migrate schema %s: %s migrations: %w", schema, kind, err)
	}
	return nil
}
