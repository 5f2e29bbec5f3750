package db

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// Beginner starts transactions: a *pgxpool.Pool or a *pgx.Conn.
type Beginner interface {
	BeginTx(ctx context.Context, opts pgx.TxOptions) (pgx.Tx, error)
}

// InTx runs fn in a READ COMMITTED transaction on b and commits it when fn returns nil.
// fn's error is returned as it is (so a store's sentinels pass through); a failed begin or
// commit is wrapped ("db: commit: …", still matching its *pgconn.PgError with errors.As).
// The transaction is rolled back when fn fails or panics, even when ctx has ended.
func InTx(ctx context.Context, b Beginner, fn func(pgx.Tx) error) error {
	return run(ctx, b, pgx.TxOptions{}, fn)
}

// ReadTx runs fn in a read-only REPEATABLE READ transaction on b, so reads that span
// several queries (a page and its total, a graph, statistics) see one snapshot.
func ReadTx(ctx context.Context, b Beginner, fn func(pgx.Tx) error) error {
	return run(ctx, b, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly}, fn)
}

func run(ctx context.Context, b Beginner, opts pgx.TxOptions, fn func(pgx.Tx) error) error {
	tx, err := b.BeginTx(ctx, opts)
	if err != nil {
		return fmt.Errorf("db: begin: %w", err)
	}
	// Rollback after Commit is a no-op. It runs without ctx's cancellation: a rollback
	// skipped because the request ended would leave the connection to be discarded.
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	if err := fn(tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("db: commit: %w", err)
	}
	return nil
}
