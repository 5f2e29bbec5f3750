package store

import (
	"context"
	"errors"
	"math"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/thefold/thefold/pkg/db"
)

// Login outcomes as audited.
const (
	OutcomeCodeSent    = "code_sent"
	OutcomeCodeNotSent = "code_not_sent"
	OutcomeSuccess     = "success"
	OutcomeBadCode     = "bad_code"
	OutcomeLockedOut   = "locked_out"
)

// LockoutPolicy is how failed verifications lock an address out: after MaxFailures in a
// row, for Base, doubling with each lockout in a row up to Max.
type LockoutPolicy struct {
	MaxFailures int
	Base, Max   time.Duration
}

// lockFor is the n-th lockout's length (n ≥ 1).
func (p LockoutPolicy) lockFor(n int) time.Duration {
	d := float64(p.Base) * math.Pow(2, float64(min(n-1, 30)))
	return time.Duration(min(d, float64(p.Max)))
}

// LockedError says an address is locked out until Until.
type LockedError struct{ Until time.Time }

func (e *LockedError) Error() string { return "locked out until " + e.Until.Format(time.RFC3339) }

// LockoutStartedError is a failed code that locked its address out, the InARow-th lockout
// in a row, until Until. It is ErrBadCode to the caller who sent it.
type LockoutStartedError struct {
	Until  time.Time
	InARow int
}

func (e *LockoutStartedError) Error() string {
	return "bad code; locked out until " + e.Until.Format(time.RFC3339)
}

// Is makes the error ErrBadCode.
func (e *LockoutStartedError) Is(target error) bool { return target == ErrBadCode }

// ErrBadCode is a code that is wrong, expired, used or superseded, or an address that has
// none: the caller cannot tell which.
var ErrBadCode = errors.New("invalid or expired code")

// Audit records a login event.
func (s *Store) Audit(ctx context.Context, emailNorm, userID, peer, outcome string) error {
	return audit(ctx, s.pool, emailNorm, userID, peer, outcome)
}

// execer is a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func audit(ctx context.Context, q execer, emailNorm, userID, peer, outcome string) error {
	var uid *string
	if userID != "" {
		uid = &userID
	}
	_, err := q.Exec(ctx, `INSERT INTO login_attempts (email_norm, user_id, peer, outcome) VALUES ($1, $2, $3, $4)`,
		emailNorm, uid, peer, outcome)
	return err
}

// LockedUntil returns when the address's lockout ends (zero when it is not locked out).
func (s *Store) LockedUntil(ctx context.Context, emailNorm string) (time.Time, error) {
	var until *time.Time
	err := s.pool.QueryRow(ctx, `SELECT locked_until FROM login_lockouts WHERE email_norm = $1 AND locked_until > now()`, emailNorm).Scan(&until)
	if errors.Is(err, pgx.ErrNoRows) || until == nil {
		return time.Time{}, nil
	}
	return *until, err
}

// CreateCode stores a new login code for user (superseding earlier ones) and audits it.
func (s *Store) CreateCode(ctx context.Context, userID, emailNorm, peer string, hash []byte, expire time.Time) error {
	return pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `INSERT INTO login_codes (user_id, code_hash, expire_time) VALUES ($1, $2, $3)`, userID, hash, expire); err != nil {
			return err
		}
		return audit(ctx, tx, emailNorm, userID, peer, OutcomeCodeSent)
	})
}

// VerifyCode checks a code for the address in one transaction: a locked-out address is
// *LockedError; then the user's newest code (userID "" for an address with no enabled
// user, which fails like a wrong code) must be unused, unexpired and match (check). A
// match spends the code and clears the failures; a failure counts toward a lockout. Every
// outcome is audited.
func (s *Store) VerifyCode(ctx context.Context, emailNorm, userID, peer string, check func(hash []byte) bool, pol LockoutPolicy) error {
	var result error
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		result = nil
		var failures, lockouts int
		var until *time.Time
		if err := tx.QueryRow(ctx, `INSERT INTO login_lockouts (email_norm) VALUES ($1)
			ON CONFLICT (email_norm) DO UPDATE SET email_norm = EXCLUDED.email_norm
			RETURNING failures, lockouts, locked_until`, emailNorm).Scan(&failures, &lockouts, &until); err != nil {
			return err
		}
		now := s.now()
		if until != nil && until.After(now) {
			result = &LockedError{Until: *until}
			return audit(ctx, tx, emailNorm, userID, peer, OutcomeLockedOut)
		}
		ok := false
		if userID != "" {
			var id int64
			var hash []byte
			var expire time.Time
			var used *time.Time
			err := tx.QueryRow(ctx, `SELECT id, code_hash, expire_time, used_time FROM login_codes
				WHERE user_id = $1 ORDER BY id DESC LIMIT 1 FOR UPDATE`, userID).Scan(&id, &hash, &expire, &used)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if err == nil && used == nil && expire.After(now) && check(hash) {
				if _, err := tx.Exec(ctx, `UPDATE login_codes SET used_time = now() WHERE id = $1`, id); err != nil {
					return err
				}
				ok = true
			}
		}
		if ok {
			if _, err := tx.Exec(ctx, `UPDATE login_lockouts SET failures = 0, lockouts = 0, locked_until = NULL, update_time = now()
				WHERE email_norm = $1`, emailNorm); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE users SET last_login_time = now() WHERE id = $1`, userID); err != nil {
				return err
			}
			return audit(ctx, tx, emailNorm, userID, peer, OutcomeSuccess)
		}
		failures++
		var lockUntil *time.Time
		if failures >= pol.MaxFailures {
			lockouts++
			t := now.Add(pol.lockFor(lockouts))
			lockUntil, failures = &t, 0
		}
		if _, err := tx.Exec(ctx, `UPDATE login_lockouts SET failures = $2, lockouts = $3, locked_until = COALESCE($4, locked_until), update_time = now()
			WHERE email_norm = $1`, emailNorm, failures, lockouts, lockUntil); err != nil {
			return err
		}
		result = ErrBadCode
		if lockUntil != nil {
			result = &LockoutStartedError{Until: *lockUntil, InARow: lockouts}
		}
		return audit(ctx, tx, emailNorm, userID, peer, OutcomeBadCode)
	})
	if err != nil {
		return err
	}
	return result
}

// LoginAttempt is a row of the login audit.
type LoginAttempt struct {
	ID                               int64
	EmailNorm, UserID, Peer, Outcome string
	Time                             time.Time
}

// LoginAttempts returns the newest limit audit rows of an address.
func (s *Store) LoginAttempts(ctx context.Context, emailNorm string, limit int) ([]LoginAttempt, error) {
	return s.ListLoginAttempts(ctx, AttemptFilter{EmailNorm: emailNorm, Limit: limit})
}

// AttemptFilter selects login audit rows; zero fields do not filter.
type AttemptFilter struct {
	EmailNorm string
	Outcome   string
	Since     time.Time
	BeforeID  int64 // rows older than this one (the previous page's last)
	Limit     int
}

// ListLoginAttempts returns audit rows newest first. The conditions are only those the
// filter sets, so each shape of query gets a plan that uses its index.
func (s *Store) ListLoginAttempts(ctx context.Context, f AttemptFilter) ([]LoginAttempt, error) {
	var c db.Conds
	if f.EmailNorm != "" {
		c.Add("email_norm = $%d", f.EmailNorm)
	}
	if f.Outcome != "" {
		c.Add("outcome = $%d", f.Outcome)
	}
	if !f.Since.IsZero() {
		c.Add("time >= $%d", f.Since)
	}
	if f.BeforeID > 0 {
		c.Add("id < $%d", f.BeforeID)
	}
	rows, err := s.pool.Query(ctx, `SELECT id, email_norm, COALESCE(user_id, ''), peer, outcome, time FROM login_attempts`+
		c.Where()+" ORDER BY id DESC LIMIT "+c.Arg(f.Limit), c.Args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[LoginAttempt])
}

// LoginReport sums up the login audit since a time.
type LoginReport struct {
	CodesSent, CodesNotSent, Successes, Failures, LockedOut int64
	Addresses                                               []ReportAddress // most failures first
	Truncated                                               bool            // more qualified than listed
}

// ReportAddress is an address with failed codes in a report's window.
type ReportAddress struct {
	EmailNorm, UserID          string
	Failures, LockedOut, Peers int64
	LastFailure                time.Time
	LockedUntil                *time.Time // set while locked out
}

// LoginReport counts the audit's outcomes since since, and lists up to limit addresses with
// at least minFailures failed codes since then, most first.
func (s *Store) LoginReport(ctx context.Context, since time.Time, minFailures, limit int) (LoginReport, error) {
	var r LoginReport
	if err := s.pool.QueryRow(ctx, `SELECT
			count(*) FILTER (WHERE outcome = 'code_sent'), count(*) FILTER (WHERE outcome = 'code_not_sent'),
			count(*) FILTER (WHERE outcome = 'success'), count(*) FILTER (WHERE outcome = 'bad_code'),
			count(*) FILTER (WHERE outcome = 'locked_out')
		FROM login_attempts WHERE time >= $1`, since).
		Scan(&r.CodesSent, &r.CodesNotSent, &r.Successes, &r.Failures, &r.LockedOut); err != nil {
		return LoginReport{}, err
	}
	rows, err := s.pool.Query(ctx, `SELECT a.email_norm, COALESCE(u.id, ''), a.failures, a.locked_out, a.peers, a.last_failure,
			l.locked_until
		FROM (SELECT email_norm,
				count(*) FILTER (WHERE outcome = 'bad_code') AS failures,
				count(*) FILTER (WHERE outcome = 'locked_out') AS locked_out,
				count(DISTINCT peer) FILTER (WHERE outcome = 'bad_code') AS peers,
				max(time) FILTER (WHERE outcome = 'bad_code') AS last_failure
			FROM login_attempts WHERE time >= $1 AND outcome IN ('bad_code', 'locked_out')
			GROUP BY email_norm) a
		LEFT JOIN users u ON u.email_norm = a.email_norm
		LEFT JOIN login_lockouts l ON l.email_norm = a.email_norm AND l.locked_until > $4
		WHERE a.failures >= $2
		ORDER BY a.failures DESC, a.last_failure DESC, a.email_norm
		LIMIT $3`, since, minFailures, limit+1, s.now())
	if err != nil {
		return LoginReport{}, err
	}
	if r.Addresses, err = pgx.CollectRows(rows, pgx.RowToStructByPos[ReportAddress]); err != nil {
		return LoginReport{}, err
	}
	if len(r.Addresses) > limit {
		r.Addresses, r.Truncated = r.Addresses[:limit], true
	}
	return r, nil
}
