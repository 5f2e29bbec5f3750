// Package dbtest gives each test its own real, migrated PostgreSQL database.
//
// Migrating for every test is slow, so a template database is migrated once
// per (schema, migrations content) and kept across runs; each test then gets
// a cheap CREATE DATABASE … TEMPLATE copy that is dropped when it ends. The
// server comes from THEFOLD_TEST_DATABASE_URL (a postgres:// URL), by default
// the local server that scripts/setup.sh prepares.
package dbtest

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"net/url"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/thefold/thefold/pkg/db"
)

// EnvURL names the variable holding the test server's URL.
const EnvURL = "THEFOLD_TEST_DATABASE_URL"

// DefaultURL is used when EnvURL is unset.
const DefaultURL = "postgres://thefold:thefold@127.0.0.1:5432/thefold?sslmode=disable"

// PoolMaxConns caps the pool NewDatabase returns. Test connections add up across the
// whole run: `go test ./...` runs up to GOMAXPROCS test binaries at once (-p), each up to
// GOMAXPROCS parallel tests (-parallel), and pgxpool's own default is max(4, NumCPU) per
// pool, so on a 64-core runner uncapped pools could ask for 64×64×64 connections. A test
// rarely needs more than a few at once; with this cap the worst case is -p × -parallel × 4
// (plus one admin session per test while it creates its database), so keep
// -p × -parallel × 5 under the server's max_connections (100 by default) — on a big
// runner, raise max_connections (it takes a server restart) or lower -p/-parallel. A test that really needs more opens its own
// pool with db.Open on the URL NewDatabase returns.
const PoolMaxConns = 4

// templateVersion is mixed into the template hash; bump it when the way
// templates are prepared changes, so stale templates are not reused.
const templateVersion = "dbtest/v1 vector"

// NewDatabase returns a pool on a fresh database holding schema migrated with
// the platform migrations and migrations (nil for none), and the database's
// URL (connect with db.Open to get the schema's search_path). The database
// is dropped when the test ends. It fails the test if PostgreSQL is
// unreachable; nothing is skipped.
func NewDatabase(tb testing.TB, schema string, migrations fs.FS, opts ...db.Option) (pool *pgxpool.Pool, dbURL string) {
	tb.Helper()
	if err := db.ValidateSchema(schema); err != nil {
		tb.Fatalf("dbtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	s := newServer(tb)
	hash, err := migrationsHash(migrations)
	if err != nil {
		tb.Fatalf("dbtest: hash migrations: %v", err)
	}
	admin := s.connectAdmin(ctx, tb)
	defer admin.Close(context.Background())
	tpl := "thefold_tpl_" + schema + "_" + hash
	if err := s.ensureTemplate(ctx, admin, tpl, schema, migrations); err != nil {
		tb.Fatalf("dbtest: template %s: %v", tpl, err)
	}
	dbURL = s.createDatabase(ctx, tb, admin, tpl)
	pool, err = db.Open(ctx, dbURL, schema, PoolMaxConns, opts...)
	if err != nil {
		tb.Fatalf("dbtest: %v", err)
	}
	// Registered after createDatabase's drop, so it runs first: the pool
	// must be closed before the database is dropped.
	tb.Cleanup(pool.Close)
	return pool, dbURL
}

// NewEmptyDatabase returns the URL of a fresh database with nothing in it
// (no schema, no extension), dropped when the test ends. It is for testing
// migrations themselves.
func NewEmptyDatabase(tb testing.TB) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := newServer(tb)
	admin := s.connectAdmin(ctx, tb)
	defer admin.Close(context.Background())
	return s.createDatabase(ctx, tb, admin, "template0")
}

// server is the test PostgreSQL server, reached through its postgres
// database for administrative commands.
type server struct {
	base  *url.URL
	admin *pgx.ConnConfig
}

func newServer(tb testing.TB) *server {
	tb.Helper()
	raw := os.Getenv(EnvURL)
	if raw == "" {
		raw = DefaultURL
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		tb.Fatalf("dbtest: %s must be a postgres:// URL", EnvURL)
	}
	admin, err := pgx.ParseConfig(raw)
	if err != nil {
		tb.Fatalf("dbtest: parse %s: %v", EnvURL, err)
	}
	admin.Database = "postgres"
	return &server{base: u, admin: admin}
}

// connectAdmin fails the test with the fix when the server is unreachable.
func (s *server) connectAdmin(ctx context.Context, tb testing.TB) *pgx.Conn {
	tb.Helper()
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	conn, err := pgx.ConnectConfig(cctx, s.admin)
	if err != nil {
		tb.Fatalf("dbtest: cannot reach PostgreSQL at %s (run scripts/setup.sh, or set %s): %v",
			s.base.Redacted(), EnvURL, err)
	}
	return conn
}

// urlFor is the server URL pointing at database name.
func (s *server) urlFor(name string) string {
	u := *s.base
	u.Path = "/" + name
	u.RawPath = ""
	return u.String()
}

// createDatabase copies tpl into a randomly named database dropped at cleanup.
func (s *server) createDatabase(ctx context.Context, tb testing.TB, admin *pgx.Conn, tpl string) string {
	tb.Helper()
	sweep(ctx, admin)
	name := fmt.Sprintf("%s%d_%s", testPrefix, time.Now().Unix(), randomHex(tb, 4))

	sql := "CREATE DATABASE " + ident(name) + " TEMPLATE " + ident(tpl)
	if err := retryInUse(ctx, func() error { _, err := admin.Exec(ctx, sql); return err }); err != nil {
		tb.Fatalf("dbtest: create database from %s: %v", tpl, err)
	}
	tb.Cleanup(func() {
		cctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		conn, err := pgx.ConnectConfig(cctx, s.admin)
		if err != nil {
			tb.Errorf("dbtest: drop database %s: %v", name, err)
			return
		}
		defer conn.Close(cctx)
		if _, err := conn.Exec(cctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)"); err != nil {
			tb.Errorf("dbtest: drop database %s: %v", name, err)
		}
	})
	return s.urlFor(name)
}

// testPrefix starts every per-test database name, followed by its creation
// time in Unix seconds, so databases leaked by a killed test binary can be
// recognized and dropped later.
const testPrefix = "thefold_test_"

// staleAfter is far beyond any test's run time.
const staleAfter = 24 * time.Hour

// sweep drops per-test databases that a crashed or killed test binary left
// behind. It is best effort: failures only leave the litter for next time.
func sweep(ctx context.Context, admin *pgx.Conn) {
	rows, err := admin.Query(ctx, "SELECT datname FROM pg_database WHERE starts_with(datname, $1)", testPrefix)
	if err != nil {
		return
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return
	}
	for _, name := range names {
		created, _, ok := strings.Cut(strings.TrimPrefix(name, testPrefix), "_")
		sec, err := strconv.ParseInt(created, 10, 64)
		if !ok || err != nil || time.Since(time.Unix(sec, 0)) < staleAfter {
			continue
		}
		_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(name)+" WITH (FORCE)")
	}
}

// ensureTemplate creates the template database tpl unless it exists. Test
// binaries run in parallel, so creation is serialized by an advisory lock
// (keyed by the template name, in the shared postgres database) and built
// under a scratch name that is renamed only once fully migrated: a template
// that exists is always complete.
func (s *server) ensureTemplate(ctx context.Context, admin *pgx.Conn, tpl, schema string, migrations fs.FS) error {
	exists := func() (bool, error) {
		var ok bool
		if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", tpl).Scan(&ok); err != nil {
			return false, fmt.Errorf("look up: %w", err)
		}
		return ok, nil
	}
	if ok, err := exists(); err != nil || ok {
		return err
	}

	key := lockKey(tpl)
	if _, err := admin.Exec(ctx, "SELECT pg_advisory_lock($1)", key); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	defer admin.Exec(context.Background(), "SELECT pg_advisory_unlock($1)", key) //nolint:errcheck // closing the session unlocks too
	if ok, err := exists(); err != nil || ok {
		return err // another process built it while we waited
	}

	// A scratch database left by a process killed mid-build is ours to drop:
	// we hold the lock its builder held.
	scratch := "thefold_new_" + tpl[len("thefold_tpl_"):]
	if _, err := admin.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(scratch)+" WITH (FORCE)"); err != nil {
		return fmt.Errorf("drop stale %s: %w", scratch, err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+ident(scratch)+" TEMPLATE template0"); err != nil {
		return fmt.Errorf("create %s: %w", scratch, err)
	}
	if err := s.prepare(ctx, scratch, schema, migrations); err != nil {
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+ident(scratch)+" WITH (FORCE)")
		return err
	}
	// Nobody connected to a template means CREATE DATABASE … TEMPLATE never
	// finds it "being accessed by other users" (an open psql, say).
	if _, err := admin.Exec(ctx, "ALTER DATABASE "+ident(scratch)+" WITH ALLOW_CONNECTIONS false"); err != nil {
		return fmt.Errorf("seal %s: %w", scratch, err)
	}
	// The sessions used to migrate may still be exiting on the server side.
	rename := "ALTER DATABASE " + ident(scratch) + " RENAME TO " + ident(tpl)
	if err := retryInUse(ctx, func() error { _, err := admin.Exec(ctx, rename); return err }); err != nil {
		return fmt.Errorf("rename %s: %w", scratch, err)
	}
	return nil
}

// prepare installs pgvector and migrates schema in database name.
func (s *server) prepare(ctx context.Context, name, schema string, migrations fs.FS) error {
	dbURL := s.urlFor(name)
	cfg := s.admin.Copy()
	cfg.Database = name
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("connect %s: %w", name, err)
	}
	_, err = conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS vector")
	conn.Close(context.Background())
	if err != nil {
		return fmt.Errorf("create extension vector in %s (scripts/setup.sh installs pgvector): %w", name, err)
	}
	if err := db.Migrate(ctx, dbURL, schema, migrations); err != nil {
		return err
	}
	return nil
}

// retryInUse retries fn while PostgreSQL reports that the database is being
// accessed by other users (SQLSTATE 55006): a session that just disconnected
// from it can take a moment to exit on the server.
func retryInUse(ctx context.Context, fn func() error) error {
	const attempts = 20
	var err error
	for i := range attempts {
		if err = fn(); err == nil {
			return nil
		}
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) || pgErr.Code != "55006" {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (gave up: %w)", err, ctx.Err())
		case <-time.After(time.Duration(i+1) * 50 * time.Millisecond):
		}
	}
	return fmt.Errorf("after %d attempts: %w", attempts, err)
}

// migrationsHash is the first 8 hex digits of a SHA-256 over the platform and
// service migrations (names and contents) and templateVersion.
func migrationsHash(migrations fs.FS) (string, error) {
	h := sha256.New()
	_, _ = io.WriteString(h, templateVersion+"\x00")
	for _, fsys := range []fs.FS{db.PlatformMigrations(), migrations} {
		_, _ = io.WriteString(h, "--\x00")
		if fsys == nil {
			continue
		}
		err := fs.WalkDir(fsys, ".", func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			b, err := fs.ReadFile(fsys, path)
			if err != nil {
				return err
			}
			_, _ = fmt.Fprintf(h, "%s\x00%d\x00", path, len(b))
			_, _ = h.Write(b)
			return nil
		})
		if err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:8], nil
}

func lockKey(name string) int64 {
	h := fnv.New64a()
	_, _ = io.WriteString(h, "thefold/dbtest/"+name)
	return int64(h.Sum64())
}

func ident(name string) string { return pgx.Identifier{name}.Sanitize() }

func randomHex(tb testing.TB, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		tb.Fatalf("dbtest: random name: %v", err)
	}
	return hex.EncodeToString(b)
}
