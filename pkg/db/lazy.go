package db

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Batcher sends a batch in one round trip: a *pgxpool.Pool, a *pgx.Conn or a pgx.Tx.
type Batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// lazyCommit is queued before a statement so that its implicit transaction commits
// without waiting for the WAL to reach the disk (synchronous_commit off for it alone).
const lazyCommit = `SELECT set_config('synchronous_commit', 'off', true)`

// LazyExec runs one write whose loss in a crash of the database server costs nothing that
// matters (an access count, a last-used time), without waiting for its WAL flush: on a
// server that syncs its commits that is most of a small write's time. The statement is
// still atomic, and every later commit that is durable makes it durable too.
func LazyExec(ctx context.Context, b Batcher, sql string, args ...any) error {
	batch := &pgx.Batch{}
	batch.Queue(lazyCommit)
	batch.Queue(sql, args...)
	return b.SendBatch(ctx, batch).Close()
}

// LazyQueryRow is LazyExec for a write that returns a row (UPDATE … RETURNING), scanned
// into dest; no row is pgx.ErrNoRows.
func LazyQueryRow(ctx context.Context, b Batcher, dest func(pgx.Row) error, sql string, args ...any) error {
	batch := &pgx.Batch{}
	batch.Queue(lazyCommit)
	batch.Queue(sql, args...)
	br := b.SendBatch(ctx, batch)
	if _, err := br.Exec(); err != nil {
		_ = br.Close()
		return err
	}
	if err := dest(br.QueryRow()); err != nil {
		_ = br.Close()
		return err
	}
	return br.Close()
}
