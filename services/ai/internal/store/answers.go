package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/wait"
)

// Answer is an AIService call recorded under its caller's request_id.
type Answer struct {
	// Caller scopes request ids: the same id from two callers is two requests.
	Caller    string
	RequestID string
	// RPC and Fingerprint identify the request: a retry must match both.
	RPC         string
	Fingerprint string
	// Done is set once Response holds the answer; until then the first call is running.
	Done     bool
	Response []byte
	// UsageRecordID is the ledger entry of the call that answered, if one was recorded.
	UsageRecordID string
	CreateTime    time.Time
	UpdateTime    time.Time
}

const answerColumns = `a.caller, a.request_id, a.rpc, a.fingerprint, a.state = 'done', a.response,
	coalesce(a.usage_record_id::text, ''), a.create_time, a.update_time`

func scanAnswer(row pgx.Row) (*Answer, error) {
	var a Answer
	err := row.Scan(&a.Caller, &a.RequestID, &a.RPC, &a.Fingerprint, &a.Done, &a.Response,
		&a.UsageRecordID, &a.CreateTime, &a.UpdateTime)
	if err != nil {
		return nil, err
	}
	return &a, nil
}

// Claim registers (caller, requestID) as running and returns the claim with claimed set;
// or, when the id is taken, returns the existing row unclaimed for the caller to compare
// (RPC, Fingerprint), answer from (Done) or wait on. A claim still running after the stale
// period was left by a call that died; Claim takes it over.
//
// Two concurrent claims of one id cannot both succeed: the second insert waits on the
// primary key for the first and then finds its row.
func (s *Store) Claim(ctx context.Context, caller, requestID, rpc, fingerprint string) (*Answer, bool, error) {
	// A row released between the insert and the read is claimed on the next round.
	for range 3 {
		now := s.now()
		// The claim is written without waiting for its WAL flush: it only keeps live callers
		// from calling twice, which a crash of the database ends anyway, and the answer's
		// write (or the release) that follows it is flushed, and with it the claim.
		var a *Answer
		err := db.LazyQueryRow(ctx, s.pool, func(row pgx.Row) (err error) { a, err = scanAnswer(row); return err },
			`INSERT INTO answers AS a (caller, request_id, rpc, fingerprint, state, create_time, update_time)
			VALUES ($1, $2, $3, $4, 'running', $5, $5)
			ON CONFLICT (caller, request_id) DO UPDATE
				SET rpc = excluded.rpc, fingerprint = excluded.fingerprint,
					create_time = excluded.create_time, update_time = excluded.update_time
				WHERE a.state = 'running' AND a.update_time < $6
			RETURNING `+answerColumns, caller, requestID, rpc, fingerprint, now, now.Add(-s.staleAfter))
		if err == nil {
			return a, true, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, false, fmt.Errorf("store: claim answer: %w", err)
		}
		a, err = s.Get(ctx, caller, requestID)
		if errors.Is(err, errs.ErrNotFound) {
			continue
		}
		if err != nil {
			return nil, false, err
		}
		return a, false, nil
	}
	return nil, false, fmt.Errorf("store: claim answer %s: released and taken again repeatedly", requestID)
}

// Finish stores the response of a running claim and marks it done. Finishing an answer that
// is already done keeps the first (a call that outlived its stale claim raced the one that
// took it over; both answered the same request). A claim that is gone is errs.ErrNotFound.
func (s *Store) Finish(ctx context.Context, caller, requestID string, response []byte, usageRecordID string) error {
	if response == nil {
		// An empty message marshals to no bytes; NULL would mean "no answer".
		response = []byte{}
	}
	tag, err := s.pool.Exec(ctx, `UPDATE answers SET state = 'done', response = $3, usage_record_id = $4::uuid, update_time = $5
		WHERE caller = $1 AND request_id = $2 AND state = 'running'`,
		caller, requestID, response, nullable(usageRecordID), s.now())
	if err != nil {
		return fmt.Errorf("store: finish answer: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return nil
	}
	if _, err := s.Get(ctx, caller, requestID); err != nil {
		return err
	}
	return nil
}

// Release deletes a running claim after its call failed, so a retry calls again. An answer
// that is done is never released.
func (s *Store) Release(ctx context.Context, caller, requestID string) error {
	if _, err := s.pool.Exec(ctx, "DELETE FROM answers WHERE caller = $1 AND request_id = $2 AND state = 'running'", caller, requestID); err != nil {
		return fmt.Errorf("store: release answer: %w", err)
	}
	return nil
}

// Touch marks a running claim as still being worked on, so no retry takes it over while its
// call lives (DefaultStaleClaim). A claim that is done or gone is left as it is.
func (s *Store) Touch(ctx context.Context, caller, requestID string) error {
	if _, err := s.pool.Exec(ctx, "UPDATE answers SET update_time = $3 WHERE caller = $1 AND request_id = $2 AND state = 'running'",
		caller, requestID, s.now()); err != nil {
		return fmt.Errorf("store: touch answer: %w", err)
	}
	return nil
}

// Get reads one recorded answer or claim.
func (s *Store) Get(ctx context.Context, caller, requestID string) (*Answer, error) {
	a, err := scanAnswer(s.pool.QueryRow(ctx, "SELECT "+answerColumns+" FROM answers a WHERE a.caller = $1 AND a.request_id = $2", caller, requestID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("request_id %q: %w", requestID, errs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get answer: %w", err)
	}
	return a, nil
}

// PruneAnswers deletes answers and claims last touched before olderThan and returns how
// many.
func (s *Store) PruneAnswers(ctx context.Context, olderThan time.Time) (int64, error) {
	tag, err := s.pool.Exec(ctx, "DELETE FROM answers WHERE update_time < $1", olderThan)
	if err != nil {
		return 0, fmt.Errorf("store: prune answers: %w", err)
	}
	return tag.RowsAffected(), nil
}

// RunAnswerPruning prunes answers older than keep every interval until ctx ends (the
// contract keeps them at least 24 hours). A failed round is logged and retried at the next
// tick: a passing database hiccup must not stop the service.
func (s *Store) RunAnswerPruning(ctx context.Context, log *slog.Logger, every, keep time.Duration) error {
	if every <= 0 || keep <= 0 {
		return fmt.Errorf("store: answer pruning: interval %v and age %v must be positive", every, keep)
	}
	prune := func(ctx context.Context) {
		n, err := s.PruneAnswers(ctx, s.now().Add(-keep))
		switch {
		case ctx.Err() != nil:
		case err != nil:
			log.ErrorContext(ctx, "answer pruning failed", "err", err)
		case n > 0:
			log.InfoContext(ctx, "pruned recorded answers", "pruned", n, "keep", keep)
		}
	}
	prune(ctx)
	wait.Every(ctx, every, prune)
	return ctx.Err()
}
