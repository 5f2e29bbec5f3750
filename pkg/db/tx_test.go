package db_test

import (
	"context"
	"errors"
	"testing"
	"testing/fstest"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/db/dbtest"
)

// gadgets has a plain unique index and a deferred unique constraint, whose violation
// surfaces only at commit.
var gadgets = fstest.MapFS{
	"00001_gadgets.sql": {Data: []byte(`-- +goose Up
CREATE TABLE gadgets (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL, serial TEXT NOT NULL,
	CONSTRAINT gadgets_serial_key UNIQUE (serial) DEFERRABLE INITIALLY DEFERRED);
CREATE UNIQUE INDEX gadgets_name_idx ON gadgets (name);
-- +goose Down
DROP TABLE gadgets;
`)},
}

func count(t *testing.T, q interface {
	QueryRow(context.Context, string, ...any) pgx.Row
}) int {
	t.Helper()
	var n int
	if err := q.QueryRow(t.Context(), "SELECT count(*) FROM gadgets").Scan(&n); err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

func TestInTx(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDatabase(t, "db_tx", gadgets)
	ctx := t.Context()
	insert := func(name, serial string) func(pgx.Tx) error {
		return func(tx pgx.Tx) error {
			_, err := tx.Exec(ctx, "INSERT INTO gadgets (name, serial) VALUES ($1, $2)", name, serial)
			return err
		}
	}

	if err := db.InTx(ctx, pool, insert("a", "1")); err != nil {
		t.Fatalf("InTx: %v", err)
	}
	if n := count(t, pool); n != 1 {
		t.Fatalf("after a committed InTx: %d rows, want 1", n)
	}

	// fn's error comes back as it is, and its writes are rolled back.
	sentinel := errors.New("no")
	err := db.InTx(ctx, pool, func(tx pgx.Tx) error {
		if err := insert("b", "2")(tx); err != nil {
			return err
		}
		return sentinel
	})
	if err != sentinel {
		t.Fatalf("InTx returned %v, want fn's error unwrapped", err)
	}
	if n := count(t, pool); n != 1 {
		t.Fatalf("after a failed fn: %d rows, want 1", n)
	}

	// A panic rolls back too, and the connection goes back to the pool usable.
	func() {
		defer func() { _ = recover() }()
		_ = db.InTx(ctx, pool, func(tx pgx.Tx) error {
			_ = insert("c", "3")(tx)
			panic("boom")
		})
	}()
	if n := count(t, pool); n != 1 {
		t.Fatalf("after a panic: %d rows, want 1", n)
	}

	// A unique index is violated by the statement, a deferred constraint at commit: both
	// are recognised, the commit error wrapped.
	err = db.InTx(ctx, pool, insert("a", "9"))
	if !db.IsUniqueViolation(err) || !db.IsUniqueViolation(err, "gadgets_name_idx") || db.IsUniqueViolation(err, "gadgets_serial_key") {
		t.Fatalf("duplicate name: %v", err)
	}
	err = db.InTx(ctx, pool, insert("d", "1"))
	if !db.IsUniqueViolation(err, "other", "gadgets_serial_key") || db.IsUniqueViolation(err, "gadgets_name_idx") {
		t.Fatalf("duplicate serial at commit: %v", err)
	}
	if n := count(t, pool); n != 1 {
		t.Fatalf("after failed commits: %d rows, want 1", n)
	}

	// A context that ends inside fn still leaves no transaction open.
	cctx, cancel := context.WithCancel(ctx)
	err = db.InTx(cctx, pool, func(tx pgx.Tx) error {
		if err := insert("e", "5")(tx); err != nil {
			return err
		}
		cancel()
		return nil
	})
	if err == nil {
		t.Fatal("InTx committed after its context ended")
	}
	if n := count(t, pool); n != 1 {
		t.Fatalf("after a cancelled commit: %d rows, want 1", n)
	}
}

func TestReadTx(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDatabase(t, "db_tx", gadgets)
	ctx := t.Context()

	err := db.ReadTx(ctx, pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, "INSERT INTO gadgets (name, serial) VALUES ('x', 'x')")
		return err
	})
	var pg *pgconn.PgError
	if !errors.As(err, &pg) || pg.Code != "25006" { // read_only_sql_transaction
		t.Fatalf("a write in ReadTx: %v, want read-only refusal", err)
	}

	// One snapshot: a row committed between two reads is not seen by the second.
	err = db.ReadTx(ctx, pool, func(tx pgx.Tx) error {
		before := count(t, tx)
		if err := db.InTx(ctx, pool, func(w pgx.Tx) error {
			_, err := w.Exec(ctx, "INSERT INTO gadgets (name, serial) VALUES ('y', 'y')")
			return err
		}); err != nil {
			return err
		}
		if after := count(t, tx); after != before {
			t.Errorf("ReadTx saw %d rows then %d: not one snapshot", before, after)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("ReadTx: %v", err)
	}
	if n := count(t, pool); n != 1 {
		t.Fatalf("after ReadTx: %d rows, want 1", n)
	}
}

func TestIsUniqueViolation(t *testing.T) {
	t.Parallel()
	unique := &pgconn.PgError{Code: "23505", ConstraintName: "things_name_idx"}
	cases := []struct {
		name        string
		err         error
		constraints []string
		want        bool
	}{
		{"nil", nil, nil, false},
		{"plain error", errors.New("23505"), nil, false},
		{"another code", &pgconn.PgError{Code: "23503", ConstraintName: "things_name_idx"}, nil, false},
		{"any constraint", unique, nil, true},
		{"wrapped", errors.Join(errors.New("store: insert"), unique), nil, true},
		{"named", unique, []string{"things_name_idx"}, true},
		{"one of named", unique, []string{"x", "things_name_idx"}, true},
		{"other name", unique, []string{"things_key"}, false},
	}
	for _, c := range cases {
		if got := db.IsUniqueViolation(c.err, c.constraints...); got != c.want {
			t.Errorf("%s: IsUniqueViolation = %v, want %v", c.name, got, c.want)
		}
	}
	if !db.IsDuplicateTable(&pgconn.PgError{Code: "42P07"}) || db.IsDuplicateTable(unique) {
		t.Error("IsDuplicateTable")
	}
}

// Two transactions that each lock a row and then want the other's: PostgreSQL ends one as
// a deadlock, which IsDeadlock recognises (and IsUniqueViolation does not).
func TestIsDeadlock(t *testing.T) {
	pool, _ := dbtest.NewDatabase(t, "db_tx", gadgets)
	ctx := t.Context()
	if _, err := pool.Exec(ctx, `INSERT INTO gadgets (name, serial) VALUES ('a', '1'), ('b', '2')`); err != nil {
		t.Fatal(err)
	}
	ready, both := make(chan struct{}, 2), make(chan struct{})
	lockBoth := func(first, second string) error {
		return db.InTx(ctx, pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, `UPDATE gadgets SET serial = serial WHERE name = $1`, first); err != nil {
				return err
			}
			ready <- struct{}{} // both hold their first row before either asks for its second
			<-both
			_, err := tx.Exec(ctx, `UPDATE gadgets SET serial = serial WHERE name = $1`, second)
			return err
		})
	}
	errs := make(chan error, 2)
	go func() { errs <- lockBoth("a", "b") }()
	go func() { errs <- lockBoth("b", "a") }()
	<-ready
	<-ready
	close(both)
	e1, e2 := <-errs, <-errs
	if (e1 == nil) == (e2 == nil) {
		t.Fatalf("want one transaction ended as a deadlock: %v, %v", e1, e2)
	}
	err := errors.Join(e1, e2)
	if !db.IsDeadlock(err) || db.IsUniqueViolation(err) {
		t.Fatalf("IsDeadlock(%v) = false", err)
	}
	if db.IsDeadlock(errors.New("deadlock detected")) {
		t.Fatal("IsDeadlock of an error that is not PostgreSQL's")
	}
}
