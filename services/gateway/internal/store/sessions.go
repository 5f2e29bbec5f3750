package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/db"
)

// CreateSession starts a session for user with its first refresh token.
func (s *Store) CreateSession(ctx context.Context, userID string, expire time.Time, refreshHash []byte) (string, error) {
	var id string
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if err := tx.QueryRow(ctx, `INSERT INTO sessions (user_id, expire_time) VALUES ($1, $2) RETURNING id::text`, userID, expire).Scan(&id); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `INSERT INTO refresh_tokens (hash, session_id, expire_time) VALUES ($1, $2, $3)`, refreshHash, id, expire)
		return err
	})
	return id, err
}

// Refresh is a refresh token with its session.
type Refresh struct {
	SessionID     string
	UserID        string
	Expire        time.Time
	Spent         time.Time // zero: not spent
	SessionEnded  bool
	SessionExpire time.Time
}

// SpendResult is what SpendRefresh did.
type SpendResult int

// Outcomes of SpendRefresh.
const (
	// Spent: the token was live and is now spent; its successor is stored.
	Spent SpendResult = iota + 1
	// Retried: the token was spent within the grace period and its successor is unspent:
	// the caller returns the same successor.
	Retried
	// Reused: the token was spent before the grace period, or its successor too: the
	// session has been ended as stolen.
	Reused
	// Dead: unknown, expired, or its session ended or expired.
	Dead
)

// SpendRefresh spends the refresh token hash and stores its successor (successorHash,
// expiring with the session), in one transaction. A reuse past grace ends the session and
// revokes its access tokens until revokeUntil.
func (s *Store) SpendRefresh(ctx context.Context, hash, successorHash []byte, grace time.Duration, revokeUntil time.Time) (Refresh, SpendResult, error) {
	var r Refresh
	var res SpendResult
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var spent, ended *time.Time
		err := tx.QueryRow(ctx, `SELECT r.session_id::text, s.user_id, r.expire_time, r.spent_time, s.end_time, s.expire_time
			FROM refresh_tokens r JOIN sessions s ON s.id = r.session_id WHERE r.hash = $1 FOR UPDATE OF r, s`, hash).
			Scan(&r.SessionID, &r.UserID, &r.Expire, &spent, &ended, &r.SessionExpire)
		if errors.Is(err, pgx.ErrNoRows) {
			res = Dead
			return nil
		}
		if err != nil {
			return err
		}
		now := s.now()
		r.SessionEnded = ended != nil
		if spent != nil {
			r.Spent = *spent
		}
		switch {
		case r.SessionEnded || !r.Expire.After(now) || !r.SessionExpire.After(now):
			res = Dead
			return nil
		case spent == nil:
			if _, err := tx.Exec(ctx, `UPDATE refresh_tokens SET spent_time = now() WHERE hash = $1`, hash); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, `INSERT INTO refresh_tokens (hash, session_id, expire_time) VALUES ($1, $2, $3)`, successorHash, r.SessionID, r.SessionExpire)
			res = Spent
			return err
		}
		var successorSpent *time.Time
		err = tx.QueryRow(ctx, `SELECT spent_time FROM refresh_tokens WHERE hash = $1`, successorHash).Scan(&successorSpent)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		if err == nil && successorSpent == nil && now.Sub(*spent) <= grace {
			res = Retried
			return nil
		}
		res = Reused
		return endSession(ctx, tx, r.SessionID, "refresh token reused", revokeUntil)
	})
	return r, res, err
}

func endSession(ctx context.Context, tx pgx.Tx, sessionID, reason string, revokeUntil time.Time) error {
	tag, err := tx.Exec(ctx, `UPDATE sessions SET end_time = now(), end_reason = $2 WHERE id = $1 AND end_time IS NULL`, sessionID, reason)
	if err != nil || tag.RowsAffected() == 0 {
		return err
	}
	return revoke(ctx, tx, Revocation{Type: RevokeSession, Subject: sessionID, Expire: revokeUntil})
}

// EndSessionByRefresh ends the session of refresh token hash (logout) and revokes its access
// tokens until revokeUntil; ErrNotFound when no session has that token.
func (s *Store) EndSessionByRefresh(ctx context.Context, hash []byte, revokeUntil time.Time) error {
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var sid string
		err := tx.QueryRow(ctx, `SELECT session_id::text FROM refresh_tokens WHERE hash = $1`, hash).Scan(&sid)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrNotFound
		}
		if err != nil {
			return err
		}
		return endSession(ctx, tx, sid, "logout", revokeUntil)
	})
}
