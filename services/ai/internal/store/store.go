// Package store is the ai service's persistence: the model registry (providers and their
// models), the usage ledger and the answers recorded under callers' request_ids, in hand-
// written SQL over pgx. Its API speaks the contract's own messages (aiv1.Provider,
// aiv1.Model, aiv1.UsageRecord) rather than a parallel set of structs.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
)

// Store reads and writes the ai schema.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
	// staleAfter is how long a running answer claim lasts before another call may take it.
	staleAfter time.Duration
}

// DefaultStaleClaim is how long a running claim may go untouched before it counts as
// abandoned (the process that made it died mid-call, or the call ended without releasing
// it): the call that holds it touches it every few seconds (Touch) for as long as it runs,
// so a live call is never taken over however long it takes, and a retry waits at most this
// long on a dead one.
const DefaultStaleClaim = time.Minute

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock of answer claims (their times and staleness), so tests can age
// a claim without waiting.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// WithStaleClaim sets how long a running claim lasts; d <= 0 keeps DefaultStaleClaim.
func WithStaleClaim(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.staleAfter = d
		}
	}
}

// New returns a Store on pool, which must use the ai schema's search_path (db.Open).
func New(pool *pgxpool.Pool, opts ...Option) *Store {
	s := &Store{pool: pool, now: time.Now, staleAfter: DefaultStaleClaim}
	for _, o := range opts {
		o(s)
	}
	return s
}

// inTx runs fn in a transaction (db.InTx); a commit refused for a constraint becomes the
// sentinel dbError gives it.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	committing := false
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if err := fn(tx); err != nil {
			return err
		}
		committing = true
		return nil
	})
	if err != nil && committing {
		return dbError("store: commit", err)
	}
	return err
}

// querier is a pool or a transaction.
type querier interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// Unique constraints whose violation is a name taken, with the text a client sees.
var uniqueTexts = map[string]string{
	"providers_name_idx":       "name: a provider of this name exists already",
	"models_provider_name_key": "name: the provider has a model of this name already",
}

// dbError turns constraint violations the service cannot rule out up front (a name taken
// meanwhile) into sentinels whose text is fit for a client; any other error is wrapped with
// op for the log.
func dbError(op string, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return fmt.Errorf("%s: %w", op, err)
	}
	if db.IsUniqueViolation(err) {
		if text, ok := uniqueTexts[pgErr.ConstraintName]; ok {
			return fmt.Errorf("%s: %w", text, errs.ErrAlreadyExists)
		}
		return fmt.Errorf("duplicate: %w", errs.ErrAlreadyExists)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// isForeignKey reports whether err is a foreign-key violation (a referenced row is missing,
// or a referencing row still exists).
func isForeignKey(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "23503"
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// nullable maps "" to SQL NULL (uuid columns that may be empty).
func nullable(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
