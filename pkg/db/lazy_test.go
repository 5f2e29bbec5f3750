package db_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/db/dbtest"
)

// TestLazyWrites: the write commits (its row is there), its own transaction ran without
// waiting for the WAL flush, and the setting does not outlive it on the connection.
func TestLazyWrites(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDatabase(t, "db_lazy", gadgets)
	ctx := t.Context()
	// One connection, so the session the next statements see is the one the write used.
	cfg := pool.Config().Copy()
	cfg.MaxConns = 1
	one, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()

	// The session commits synchronously (a test cluster may be set otherwise as a whole).
	if _, err := one.Exec(ctx, "SET synchronous_commit = on"); err != nil {
		t.Fatal(err)
	}
	if err := db.LazyExec(ctx, one, "INSERT INTO gadgets (name, serial) VALUES ($1, $2)", "a", "1"); err != nil {
		t.Fatalf("LazyExec: %v", err)
	}
	if n := count(t, one); n != 1 {
		t.Fatalf("after LazyExec: %d rows, want 1", n)
	}
	var during, after string
	err = db.LazyQueryRow(ctx, one, func(r pgx.Row) error { return r.Scan(&during) },
		"UPDATE gadgets SET serial = '2' WHERE name = 'a' RETURNING current_setting('synchronous_commit')")
	if err != nil {
		t.Fatalf("LazyQueryRow: %v", err)
	}
	if err := one.QueryRow(ctx, "SHOW synchronous_commit").Scan(&after); err != nil {
		t.Fatal(err)
	}
	if during != "off" {
		t.Errorf("synchronous_commit during the write = %q, want off", during)
	}
	if after != "on" {
		t.Errorf("synchronous_commit after the write = %q, want on: the setting leaked into the session", after)
	}
	var serial string
	if err := one.QueryRow(ctx, "SELECT serial FROM gadgets WHERE name = 'a'").Scan(&serial); err != nil || serial != "2" {
		t.Fatalf("serial = %q, %v; want the update committed", serial, err)
	}

	// No row is pgx.ErrNoRows; a failing statement's error comes back and nothing stays.
	err = db.LazyQueryRow(ctx, one, func(r pgx.Row) error { return r.Scan(&during) }, "UPDATE gadgets SET serial = '3' WHERE name = 'none' RETURNING name")
	if !errors.Is(err, pgx.ErrNoRows) {
		t.Errorf("no row: %v, want pgx.ErrNoRows", err)
	}
	if err := db.LazyExec(ctx, one, "INSERT INTO gadgets (name, serial) VALUES ($1, $2)", "a", "9"); err == nil || !db.IsUniqueViolation(err) {
		t.Errorf("duplicate name: %v, want a unique violation", err)
	}
	if n := count(t, one); n != 1 {
		t.Fatalf("after a failed write: %d rows, want 1", n)
	}
}
