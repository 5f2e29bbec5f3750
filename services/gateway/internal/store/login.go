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

// LockoutPolicy is how failed verifications lock out: after MaxFailures in a row from one
// client, that client is locked out of the address; after MaxAddressFailures in a row from
// all clients together, every client is. Each lockout lasts Base, doubling with each
// lockout in a row (of that client, or of the address) up to Max. Keying the first by
// client is what keeps a stranger from locking the owner out; the address-wide ceiling,
// much higher, still bounds a guesser spread over many addresses.
type LockoutPolicy struct {
	MaxFailures        int
	MaxAddressFailures int
	Base, Max          time.Duration
}

// lockFor is the n-th lockout's length (n ≥ 1).
func (p LockoutPolicy) lockFor(n int) time.Duration {
	d := float64(p.Base) * math.Pow(2, float64(min(n-1, 30)))
	return time.Duration(min(d, float64(p.Max)))
}

// LockedError says a client is locked out of an address until Until (its own lockout or
// the address-wide one, whichever ends later).
type LockedError struct{ Until time.Time }

func (e *LockedError) Error() string { return "locked out until " + e.Until.Format(time.RFC3339) }

// LockoutStartedError is a failed code that locked its client (or, AddressWide, every
// client) out of the address, the InARow-th lockout in a row, until Until. It is
// ErrBadCode to the caller who sent it.
type LockoutStartedError struct {
	Until       time.Time
	InARow      int
	AddressWide bool
}

func (e *LockoutStartedError) Error() string {
	return "bad code; locked out until " + e.Until.Format(time.RFC3339)
}

// Is makes the error ErrBadCode.
func (e *LockoutStartedError) Is(target error) bool { return target == ErrBadCode }

// ErrBadCode is a code that is wrong, expired, used or superseded, or an address that has
// none: the caller cannot tell which.
var ErrBadCode = errors.New("invalid or expired code")

// RateLimitedError is a code request over one of the CodeLimits: Limit names it, and a
// request may succeed again after RetryAfter.
type RateLimitedError struct {
	Limit      string
	RetryAfter time.Duration
}

func (e *RateLimitedError) Error() string {
	return "too many login codes requested " + e.Limit + "; retry in " + e.RetryAfter.String()
}

// CodeLimits bound the code requests (sent or not: an unknown address counts the same) in
// any Window: of one address from one client, of one address from all clients, and of one
// client for any addresses. A zero limit is no limit.
type CodeLimits struct {
	Window                                  time.Duration
	PerAddressClient, PerAddress, PerClient int
}

// Caller is who made a login call: Client keys the limits (an IP address), Peer is what
// the audit records ("<client> via <proxy>" behind a proxy).
type Caller struct {
	Client, Peer string
}

// clientKey is the lockout and limit key of a caller; never "", the address-wide row's.
func (c Caller) clientKey() string {
	if c.Client == "" {
		return "unknown"
	}
	return c.Client
}

// Audit records a login event.
func (s *Store) Audit(ctx context.Context, emailNorm, userID string, c Caller, outcome string) error {
	return audit(ctx, s.pool, emailNorm, userID, c, outcome)
}

// execer is a pool or a transaction.
type execer interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}

func audit(ctx context.Context, q execer, emailNorm, userID string, c Caller, outcome string) error {
	var uid *string
	if userID != "" {
		uid = &userID
	}
	_, err := q.Exec(ctx, `INSERT INTO login_attempts (email_norm, user_id, peer, client, outcome) VALUES ($1, $2, $3, $4, $5)`,
		emailNorm, uid, c.Peer, c.clientKey(), outcome)
	return err
}

// CodeRequest is a request for a login code: Hash and Expire are the new code's when the
// address has an enabled user (UserID, audited either way), nil when none is sent.
type CodeRequest struct {
	EmailNorm, UserID string
	Caller            Caller
	Hash              []byte
	Expire            time.Time
}

// RequestCode records a code request in one transaction: a caller locked out of the
// address is *LockedError, one over a limit *RateLimitedError (neither is audited, nor
// counts); otherwise the code, if any, is stored (superseding the user's earlier ones) and
// the request audited, code_sent or code_not_sent.
func (s *Store) RequestCode(ctx context.Context, r CodeRequest, lim CodeLimits) error {
	client := r.Caller.clientKey()
	var result error
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		result = nil
		// Concurrent requests for one address, or from one client, are counted one after
		// the other, so none slips past a limit. Always the address's lock first, then the
		// client's: no two transactions wait for each other in a circle.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('thefold.login.address:' || $1, 0)),
				pg_advisory_xact_lock(hashtextextended('thefold.login.client:' || $2, 0))`, r.EmailNorm, client); err != nil {
			return err
		}
		var until *time.Time
		if err := tx.QueryRow(ctx, `SELECT max(locked_until) FROM login_lockouts
			WHERE email_norm = $1 AND client IN ($2, '') AND locked_until > $3`, r.EmailNorm, client, s.now()).Scan(&until); err != nil {
			return err
		}
		if until != nil {
			result = &LockedError{Until: *until}
			return nil
		}
		now := s.now()
		since := now.Add(-lim.Window)
		for _, c := range []struct {
			name  string
			limit int
			where string
			args  []any
		}{
			{"for this address from this client", lim.PerAddressClient, `email_norm = $3 AND client = $4`, []any{r.EmailNorm, client}},
			{"for this address", lim.PerAddress, `email_norm = $3`, []any{r.EmailNorm}},
			{"from this client", lim.PerClient, `client = $3 AND client <> ''`, []any{client}},
		} {
			if c.limit <= 0 {
				continue
			}
			// The limit-th newest request in the window: while there is one, the next
			// would be one too many, until it leaves the window.
			var t time.Time
			err := tx.QueryRow(ctx, `SELECT time FROM login_attempts
				WHERE outcome IN ('code_sent', 'code_not_sent') AND time > $1 AND `+c.where+`
				ORDER BY time DESC OFFSET $2 LIMIT 1`, append([]any{since, c.limit - 1}, c.args...)...).Scan(&t)
			if errors.Is(err, pgx.ErrNoRows) {
				continue
			}
			if err != nil {
				return err
			}
			result = &RateLimitedError{Limit: c.name, RetryAfter: max(t.Add(lim.Window).Sub(now), time.Second)}
			return nil
		}
		outcome := OutcomeCodeNotSent
		if r.Hash != nil {
			if _, err := tx.Exec(ctx, `INSERT INTO login_codes (user_id, code_hash, expire_time) VALUES ($1, $2, $3)`,
				r.UserID, r.Hash, r.Expire); err != nil {
				return err
			}
			outcome = OutcomeCodeSent
		}
		return audit(ctx, tx, r.EmailNorm, r.UserID, r.Caller, outcome)
	})
	if err != nil {
		return err
	}
	return result
}

// lockoutRow is a row of login_lockouts.
type lockoutRow struct {
	client             string
	failures, lockouts int
	until              *time.Time
}

// VerifyCode checks a code for the address in one transaction: a caller locked out of the
// address (by its own failures, or by the address-wide ceiling) is *LockedError; then the
// user's newest code (userID "" for an address with no enabled user, which fails like a
// wrong code) must be unused, unexpired and match (check). A match spends the code and
// clears the failures, the caller's and the address-wide; a failure counts toward both
// lockouts. Every outcome is audited.
func (s *Store) VerifyCode(ctx context.Context, emailNorm, userID string, c Caller, check func(hash []byte) bool, pol LockoutPolicy) error {
	client := c.clientKey()
	var result error
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		result = nil
		// The caller's row, then the address-wide one (in this order in every transaction,
		// so two never wait for each other in a circle), both locked until the commit.
		rows, err := tx.Query(ctx, `INSERT INTO login_lockouts (email_norm, client) VALUES ($1, $2), ($1, '')
			ON CONFLICT (email_norm, client) DO UPDATE SET email_norm = EXCLUDED.email_norm
			RETURNING client, failures, lockouts, locked_until`, emailNorm, client)
		if err != nil {
			return err
		}
		got, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (lockoutRow, error) {
			var l lockoutRow
			return l, row.Scan(&l.client, &l.failures, &l.lockouts, &l.until)
		})
		if err != nil {
			return err
		}
		now := s.now()
		var mine, wide lockoutRow
		for _, l := range got {
			if l.client == "" {
				wide = l
			} else {
				mine = l
			}
		}
		var lockedUntil time.Time
		for _, l := range got {
			if l.until != nil && l.until.After(now) && l.until.After(lockedUntil) {
				lockedUntil = *l.until
			}
		}
		if !lockedUntil.IsZero() {
			result = &LockedError{Until: lockedUntil}
			return audit(ctx, tx, emailNorm, userID, c, OutcomeLockedOut)
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
				WHERE email_norm = $1 AND client IN ($2, '')`, emailNorm, client); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE users SET last_login_time = now() WHERE id = $1`, userID); err != nil {
				return err
			}
			return audit(ctx, tx, emailNorm, userID, c, OutcomeSuccess)
		}
		result = ErrBadCode
		for _, l := range []struct {
			row   lockoutRow
			limit int
			wide  bool
		}{{mine, pol.MaxFailures, false}, {wide, pol.MaxAddressFailures, true}} {
			failures, lockouts := l.row.failures+1, l.row.lockouts
			var lockUntil *time.Time
			if l.limit > 0 && failures >= l.limit {
				lockouts++
				t := now.Add(pol.lockFor(lockouts))
				lockUntil, failures = &t, 0
				if started, ok := result.(*LockoutStartedError); !ok || t.After(started.Until) {
					result = &LockoutStartedError{Until: t, InARow: lockouts, AddressWide: l.wide}
				}
			}
			if _, err := tx.Exec(ctx, `UPDATE login_lockouts SET failures = $3, lockouts = $4, locked_until = COALESCE($5, locked_until), update_time = now()
				WHERE email_norm = $1 AND client = $2`, emailNorm, l.row.client, failures, lockouts, lockUntil); err != nil {
				return err
			}
		}
		return audit(ctx, tx, emailNorm, userID, c, OutcomeBadCode)
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
				count(DISTINCT CASE WHEN client <> '' THEN client ELSE peer END) FILTER (WHERE outcome = 'bad_code') AS peers,
				max(time) FILTER (WHERE outcome = 'bad_code') AS last_failure
			FROM login_attempts WHERE time >= $1 AND outcome IN ('bad_code', 'locked_out')
			GROUP BY email_norm) a
		LEFT JOIN users u ON u.email_norm = a.email_norm
		-- Locked out now: by any client's lockout or the address-wide one, the latest.
		LEFT JOIN LATERAL (SELECT max(locked_until) AS locked_until FROM login_lockouts
			WHERE email_norm = a.email_norm AND locked_until > $4) l ON true
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
