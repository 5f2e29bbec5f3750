package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
)

// Request names a side-effecting call made with a request_id.
type Request struct {
	Caller, Method, ID string
	// Fingerprint is a hash of the request without its request_id: the same id with a
	// different request is refused (errs.ErrInvalid), never answered with the wrong result.
	Fingerprint []byte
}

// Once runs do at most once per request: the first call runs it and records its answer in
// the same transaction; a retry (after a lost response, a timeout) gets the recorded answer
// and replayed = true. Two concurrent calls with one id cannot both run do: the second
// waits on the first's row lock and then reads its answer. When do fails nothing is
// recorded, so a retry runs it again.
func (s *Store) Once(ctx context.Context, r Request, do func() ([]byte, error)) (answer []byte, replayed bool, err error) {
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO requests (caller, method, request_id, fingerprint, response)
			VALUES ($1, $2, $3, $4, '') ON CONFLICT DO NOTHING`, r.Caller, r.Method, r.ID, r.Fingerprint)
		if err != nil {
			return fmt.Errorf("store: claim request: %w", err)
		}
		if tag.RowsAffected() == 0 {
			var fp []byte
			if err := tx.QueryRow(ctx, `SELECT fingerprint, response FROM requests
				WHERE caller = $1 AND method = $2 AND request_id = $3`, r.Caller, r.Method, r.ID).Scan(&fp, &answer); err != nil {
				return fmt.Errorf("store: read request: %w", err)
			}
			if !bytes.Equal(fp, r.Fingerprint) {
				return fmt.Errorf("request_id: %q was already used for a different request: %w", r.ID, errs.ErrInvalid)
			}
			replayed = true
			return nil
		}
		if answer, err = do(); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE requests SET response = $4 WHERE caller = $1 AND method = $2 AND request_id = $3`,
			r.Caller, r.Method, r.ID, answer); err != nil {
			return fmt.Errorf("store: record request: %w", err)
		}
		return nil
	})
	if err != nil {
		return nil, false, err
	}
	if replayed && len(answer) == 0 {
		return nil, false, errors.New("store: recorded request has no answer")
	}
	return answer, replayed, nil
}
