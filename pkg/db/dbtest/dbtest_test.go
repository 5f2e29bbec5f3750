package dbtest_test

import (
	"context"
	"testing"
	"testing/fstest"

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

func adminConn(t *testing.T) *pgx.Conn {
	t.Helper()
	cfg, err := pgx.ParseConfig(dbtest.DefaultURL)
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
