package dbtest_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"testing/fstest"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/db/dbtest"
)

var notes = fstest.MapFS{
	"00001_notes.sql": {Data: []byte(`-- +goose Up
CREATE TABLE notes (id BIGSERIAL PRIMARY KEY, body TEXT NOT NULL);
`)},
}

// TestDatabasesAreIsolated runs tests in parallel that write the same table
// and each see only their own row.
func TestDatabasesAreIsolated(t *testing.T) {
	urls := make(chan string, 4)
	t.Run("group", func(t *testing.T) {
		for _, body := range []string{"a", "b", "c", "d"} {
			t.Run(body, func(t *testing.T) {
				t.Parallel()
				pool, url := dbtest.NewDatabase(t, "dbtest_notes", notes)
				urls <- url
				ctx := t.Context()
				if _, err := pool.Exec(ctx, "INSERT INTO notes (body) VALUES ($1)", body); err != nil {
					t.Fatalf("insert: %v", err)
				}
				rows, err := pool.Query(ctx, "SELECT body FROM notes")
				if err != nil {
					t.Fatalf("select: %v", err)
				}
				got, err := pgx.CollectRows(rows, pgx.RowTo[string])
				if err != nil {
					t.Fatalf("select: %v", err)
				}
				if len(got) != 1 || got[0] != body {
					t.Errorf("notes = %v, want [%s]", got, body)
				}
			})
		}
	})
	close(urls)

	// Every database was distinct, and dropped when its test ended.
	admin := adminConn(t)
	seen := map[string]bool{}
	for u := range urls {
		if seen[u] {
			t.Errorf("database %s handed out twice", u)
		}
		seen[u] = true
		cfg, err := pgx.ParseConfig(u)
		if err != nil {
			t.Fatalf("parse %s: %v", u, err)
		}
		var exists bool
		if err := admin.QueryRow(t.Context(), "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)",
			cfg.Database).Scan(&exists); err != nil {
			t.Fatalf("query: %v", err)
		}
		if exists {
			t.Errorf("database %s still exists after its test", cfg.Database)
		}
	}
}

func TestDatabaseHasVectorAndPlatformTables(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDatabase(t, "dbtest_bare", nil)
	var ext, events bool
	err := pool.QueryRow(t.Context(), `SELECT
		EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'vector'),
		to_regclass('dbtest_bare.events') IS NOT NULL`).Scan(&ext, &events)
	if err != nil {
		t.Fatalf("query: %v", err)
	}
	if !ext || !events {
		t.Errorf("vector extension = %v, events table = %v; want both", ext, events)
	}
	if _, err := pool.Exec(t.Context(), "SELECT '[1,2,3]'::vector <=> '[1,2,4]'::vector"); err != nil {
		t.Errorf("vector query: %v", err)
	}
}

func TestSweepDropsLeakedDatabases(t *testing.T) {
	t.Parallel()
	admin := adminConn(t)
	ctx := t.Context()
	stale := fmt.Sprintf("thefold_test_%d_deadbeef", time.Now().Add(-48*time.Hour).Unix())
	fresh := fmt.Sprintf("thefold_test_%d_cafef00d", time.Now().Unix())
	for _, name := range []string{stale, fresh} {
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+name+" TEMPLATE template0"); err != nil {
			t.Fatalf("create %s: %v", name, err)
		}
	}
	t.Cleanup(func() { admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+fresh) }) //nolint:errcheck

	dbtest.NewEmptyDatabase(t)

	for name, want := range map[string]bool{stale: false, fresh: true} {
		var exists bool
		if err := admin.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", name).
			Scan(&exists); err != nil {
			t.Fatalf("query: %v", err)
		}
		if exists != want {
			t.Errorf("%s exists = %v, want %v", name, exists, want)
		}
	}
}

func adminConn(t *testing.T) *pgx.Conn {
	t.Helper()
	url := os.Getenv(dbtest.EnvURL)
	if url == "" {
		url = dbtest.DefaultURL
	}
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Database = "postgres"
	conn, err := pgx.ConnectConfig(t.Context(), cfg)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

// TestTemplateBuiltOnceUnderContention gives parallel tests migrations no
// run has seen before, so they race to build the same template.
func TestTemplateBuiltOnceUnderContention(t *testing.T) {
	admin := adminConn(t)
	unique := fstest.MapFS{
		"00001_notes.sql": notes["00001_notes.sql"],
		"00002_unique.sql": {Data: []byte(fmt.Sprintf("-- +goose Up\n-- run %d\nCREATE TABLE marks (id int);\n",
			time.Now().UnixNano()))},
	}
	t.Cleanup(func() {
		// This template is never reused; do not leave it behind.
		rows, err := admin.Query(context.Background(),
			"SELECT datname FROM pg_database WHERE datname LIKE 'thefold\\_tpl\\_dbtest\\_race\\_%'")
		if err != nil {
			t.Fatalf("list templates: %v", err)
		}
		names, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			t.Fatalf("list templates: %v", err)
		}
		if len(names) != 1 {
			t.Errorf("templates = %v, want exactly one", names)
		}
		for _, n := range names {
			if _, err := admin.Exec(context.Background(), "DROP DATABASE "+n); err != nil {
				t.Errorf("drop %s: %v", n, err)
			}
		}
	})
	t.Run("group", func(t *testing.T) {
		for i := range 6 {
			t.Run(fmt.Sprint(i), func(t *testing.T) {
				t.Parallel()
				pool, _ := dbtest.NewDatabase(t, "dbtest_race", unique)
				if _, err := pool.Exec(t.Context(), "INSERT INTO marks VALUES (1)"); err != nil {
					t.Errorf("insert: %v", err)
				}
			})
		}
	})
	var scratch int
	if err := admin.QueryRow(t.Context(),
		"SELECT count(*) FROM pg_database WHERE datname LIKE 'thefold\\_new\\_dbtest\\_race\\_%'").Scan(&scratch); err != nil {
		t.Fatalf("query: %v", err)
	}
	if scratch != 0 {
		t.Errorf("%d scratch databases left", scratch)
	}
}

// TestPoolIsCapped: a test's pool stays small whatever the core count, so a many-core
// runner's parallel tests do not exhaust max_connections (see PoolMaxConns).
func TestPoolIsCapped(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDatabase(t, "dbtest_bare", nil)
	if got := pool.Config().MaxConns; got != dbtest.PoolMaxConns || got > 4 {
		t.Errorf("pool MaxConns = %d, want %d (at most 4)", got, dbtest.PoolMaxConns)
	}
}
