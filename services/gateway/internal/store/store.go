// Package store is the gateway's identity data in PostgreSQL (schema gateway): users,
// login codes and their audit and lockouts, sessions and refresh tokens, API keys, and the
// revocations every verifier follows (each also appended to the outbox, in the same
// transaction as the change that caused it).
package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/events"
)

// Errors the service maps to statuses.
var (
	ErrNotFound = errors.New("not found")
	ErrExists   = errors.New("already exists")
)

// Store reads and writes the gateway schema.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// New returns a Store on pool (whose search_path is the gateway schema).
func New(pool *pgxpool.Pool) *Store { return &Store{pool: pool, now: time.Now} }

// Pool is the store's pool (the event hub listens on it).
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Roles as stored.
const (
	RoleAdmin  = "admin"
	RoleMember = "member"
)

// User is a row of users.
type User struct {
	ID              string
	Email           string
	DisplayName     string
	Role            string
	Disabled        bool
	TokensNotBefore time.Time // zero: none
	CreateTime      time.Time
	UpdateTime      time.Time
	LastLoginTime   time.Time // zero: never
}

const userCols = `id, email, display_name, role, disabled, tokens_not_before, create_time, update_time, last_login_time`

func scanUser(row pgx.Row) (User, error) {
	var u User
	var nb, last *time.Time
	err := row.Scan(&u.ID, &u.Email, &u.DisplayName, &u.Role, &u.Disabled, &nb, &u.CreateTime, &u.UpdateTime, &last)
	if errors.Is(err, pgx.ErrNoRows) {
		return u, ErrNotFound
	}
	if nb != nil {
		u.TokensNotBefore = *nb
	}
	if last != nil {
		u.LastLoginTime = *last
	}
	return u, err
}

// EnsureUser creates the user id with email and role unless a user with that id exists
// (the launcher's first admin). A taken address is ErrExists.
//
// Gateway replicas starting at once on a fresh database each ensure the first admin: the
// insert that loses the race can fail on the address's unique index before ON CONFLICT (id)
// sees the winner's row, so a unique violation is looked at again: the user id existing
// now is the same outcome as DO NOTHING.
func (s *Store) EnsureUser(ctx context.Context, id, email, emailNorm, displayName, role string) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO users (id, email, email_norm, display_name, role)
		VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING`, id, email, emailNorm, displayName, role)
	if db.IsUniqueViolation(err) {
		var exists bool
		if qerr := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM users WHERE id = $1)`, id).Scan(&exists); qerr != nil {
			return qerr
		}
		if exists {
			return nil
		}
		return fmt.Errorf("user %s: %w: address %s belongs to another user", id, ErrExists, email)
	}
	return err
}

// CreateUser inserts a user; a taken address is ErrExists.
func (s *Store) CreateUser(ctx context.Context, id, email, emailNorm, displayName, role string) (User, error) {
	u, err := scanUser(s.pool.QueryRow(ctx, `INSERT INTO users (id, email, email_norm, display_name, role)
		VALUES ($1, $2, $3, $4, $5) RETURNING `+userCols, id, email, emailNorm, displayName, role))
	if db.IsUniqueViolation(err) {
		return User{}, ErrExists
	}
	return u, err
}

// GetUser returns the user id.
func (s *Store) GetUser(ctx context.Context, id string) (User, error) {
	return scanUser(s.pool.QueryRow(ctx, `SELECT `+userCols+` FROM users WHERE id = $1`, id))
}

// UserByEmail returns the user with the normalised address.
func (s *Store) UserByEmail(ctx context.Context, emailNorm string) (User, error) {
	return scanUser(s.pool.QueryRow(ctx, `SELECT `+userCols+` FROM users WHERE email_norm = $1`, emailNorm))
}

// UserFilter narrows ListUsers.
type UserFilter struct {
	Role     string // "" any
	Disabled *bool
	// AfterEmail is the page cursor: the last normalised address of the previous page.
	AfterEmail string
	Limit      int
}

// ListUsers returns users by address.
func (s *Store) ListUsers(ctx context.Context, f UserFilter) ([]User, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+userCols+` FROM users
		WHERE ($1 = '' OR role = $1) AND ($2::boolean IS NULL OR disabled = $2) AND email_norm > $3
		ORDER BY email_norm LIMIT $4`, f.Role, f.Disabled, f.AfterEmail, f.Limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []User
	for rows.Next() {
		u, err := scanUser(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, u)
	}
	return out, rows.Err()
}

// ErrLastAdmin refuses a change that leaves no enabled admin.
var ErrLastAdmin = errors.New("the last enabled admin")

// UpdateUser applies change to user id in one transaction. When the change disables the
// user or changes their role, their sessions end and their tokens issued before
// notBefore are revoked (expiring with revokeUntil). A change that leaves no enabled admin
// is ErrLastAdmin.
func (s *Store) UpdateUser(ctx context.Context, id string, change func(*User) error, notBefore, revokeUntil time.Time) (User, error) {
	var out User
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		// Admin changes are serialised, so two demotions cannot both pass the check.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('gateway.users.admins'))`); err != nil {
			return err
		}
		before, err := scanUser(tx.QueryRow(ctx, `SELECT `+userCols+` FROM users WHERE id = $1 FOR UPDATE`, id))
		if err != nil {
			return err
		}
		after := before
		if err := change(&after); err != nil {
			return err
		}
		if before.Role == RoleAdmin && !before.Disabled && (after.Role != RoleAdmin || after.Disabled) {
			var n int
			if err := tx.QueryRow(ctx, `SELECT count(*) FROM users WHERE role = 'admin' AND NOT disabled AND id <> $1`, id).Scan(&n); err != nil {
				return err
			}
			if n == 0 {
				return ErrLastAdmin
			}
		}
		disabled, enabled := after.Disabled && !before.Disabled, before.Disabled && !after.Disabled
		cut := disabled || after.Role != before.Role
		var nb *time.Time
		if cut {
			nb = &notBefore
		}
		out, err = scanUser(tx.QueryRow(ctx, `UPDATE users SET display_name = $2, role = $3, disabled = $4,
			tokens_not_before = COALESCE($5, tokens_not_before), update_time = now()
			WHERE id = $1 RETURNING `+userCols, id, after.DisplayName, after.Role, after.Disabled, nb))
		if err != nil {
			return err
		}
		if cut {
			if _, err := tx.Exec(ctx, `UPDATE sessions SET end_time = now(), end_reason = 'user changed'
				WHERE user_id = $1 AND end_time IS NULL`, id); err != nil {
				return err
			}
			if err := revoke(ctx, tx, Revocation{Type: RevokeUser, Subject: id, NotBefore: notBefore, Expire: revokeUntil}); err != nil {
				return err
			}
		}
		// Services stop the work they run for a disabled user and refuse to act for them
		// until they are enabled again (auth.RevokeUserDisabled); the users table is the
		// record, so these are events only (RevocationsInForce adds the disabled users).
		switch {
		case disabled:
			return userStateEvent(ctx, tx, RevokeUserDisabled, id, notBefore)
		case enabled:
			return userStateEvent(ctx, tx, RevokeUserEnabled, id, time.Time{})
		}
		return nil
	})
	return out, err
}

// Revocation types as stored (and as the outbox event's type).
const (
	RevokeToken   = "token"
	RevokeSession = "session"
	RevokeUser    = "user"
	RevokeAPIKey  = "api_key"
	// RevokeUserDisabled and RevokeUserEnabled are outbox events only: a user disabled
	// (services stop acting for them), enabled again (that is lifted).
	RevokeUserDisabled = "user_disabled"
	RevokeUserEnabled  = "user_enabled"
)

// userStateForever is the expire_time of a user's disabled state: it lasts until they are
// enabled again.
var userStateForever = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC)

// userStateEvent appends a user's disabled or enabled state to the revocation stream.
func userStateEvent(ctx context.Context, tx pgx.Tx, typ, id string, notBefore time.Time) error {
	p := revocationPayload{Expire: userStateForever}
	if !notBefore.IsZero() {
		p.NotBefore = &notBefore
	}
	payload, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = events.Append(ctx, tx, events.Event{Stream: revocationStream, AggregateID: id, Type: typ, Payload: payload})
	return err
}

// Revocation is a row of revocations.
type Revocation struct {
	EventID   int64
	Type      string
	Subject   string
	NotBefore time.Time
	Expire    time.Time
	Time      time.Time
}

// revocationStream is the outbox stream of revocations.
const revocationStream = "revocation"

type revocationPayload struct {
	NotBefore *time.Time `json:"not_before,omitempty"`
	Expire    time.Time  `json:"expire_time"`
}

// revoke records r in tx and appends it to the outbox; call it last in the transaction
// (events.Append serialises appends).
func revoke(ctx context.Context, tx pgx.Tx, r Revocation) error {
	p := revocationPayload{Expire: r.Expire}
	if !r.NotBefore.IsZero() {
		p.NotBefore = &r.NotBefore
	}
	payload, err := json.Marshal(p)
	if err != nil {
		return err
	}
	id, err := events.Append(ctx, tx, events.Event{Stream: revocationStream, AggregateID: r.Subject, Type: r.Type, Payload: payload})
	if err != nil {
		return err
	}
	var nb *time.Time
	if !r.NotBefore.IsZero() {
		nb = &r.NotBefore
	}
	_, err = tx.Exec(ctx, `INSERT INTO revocations (type, subject, not_before, expire_time, event_id)
		VALUES ($1, $2, $3, $4, $5)`, r.Type, r.Subject, nb, r.Expire, id)
	return err
}

// Revoke records r (a token revoked by its holder).
func (s *Store) Revoke(ctx context.Context, r Revocation) error {
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error { return revoke(ctx, tx, r) })
}

// RevocationFromEvent decodes an outbox event of the revocation stream.
func RevocationFromEvent(e events.Event) (Revocation, bool) {
	if e.Stream != revocationStream {
		return Revocation{}, false
	}
	var p revocationPayload
	if err := json.Unmarshal(e.Payload, &p); err != nil {
		return Revocation{}, false
	}
	r := Revocation{EventID: e.ID, Type: e.Type, Subject: e.AggregateID, Expire: p.Expire, Time: e.CreateTime}
	if p.NotBefore != nil {
		r.NotBefore = *p.NotBefore
	}
	return r, true
}

// RevocationFilter selects the revocation events of the outbox.
var RevocationFilter = events.Filter{Stream: revocationStream}

// RevocationsInForce returns the revocations that still cover a valid token, then the
// users disabled now (RevokeUserDisabled, with the cursor as their id), and the outbox
// cursor they are current to: a watcher sends them, then follows from the cursor.
func (s *Store) RevocationsInForce(ctx context.Context) ([]Revocation, int64, error) {
	var out []Revocation
	var cursor int64
	err := db.ReadTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		if cursor, err = events.Latest(ctx, tx); err != nil {
			return err
		}
		rows, err := tx.Query(ctx, `SELECT event_id, type, subject, not_before, expire_time, create_time
			FROM revocations WHERE expire_time > now() AND event_id <= $1 ORDER BY event_id`, cursor)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var r Revocation
			var nb *time.Time
			if err := rows.Scan(&r.EventID, &r.Type, &r.Subject, &nb, &r.Expire, &r.Time); err != nil {
				return err
			}
			if nb != nil {
				r.NotBefore = *nb
			}
			out = append(out, r)
		}
		if err := rows.Err(); err != nil {
			return err
		}
		// Then the users disabled now, as of the cursor (their state changes are events
		// up to it; with no event at all nobody was disabled through UpdateUser).
		if cursor == 0 {
			return nil
		}
		rows, err = tx.Query(ctx, `SELECT id, tokens_not_before FROM users WHERE disabled ORDER BY id`)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			r := Revocation{EventID: cursor, Type: RevokeUserDisabled, Expire: userStateForever, Time: time.Now()}
			var nb *time.Time
			if err := rows.Scan(&r.Subject, &nb); err != nil {
				return err
			}
			if nb != nil {
				r.NotBefore = *nb
			}
			out = append(out, r)
		}
		return rows.Err()
	})
	return out, cursor, err
}

// LatestEventID is the outbox's newest event id.
func (s *Store) LatestEventID(ctx context.Context) (int64, error) {
	return events.Latest(ctx, s.pool)
}

// CheckCursor reports a cursor older than the outbox keeps.
func (s *Store) CheckCursor(ctx context.Context, after int64) error {
	return events.CheckCursor(ctx, s.pool, after)
}

// Prune deletes what no longer matters: expired revocations, codes and refresh tokens,
// ended sessions' rows, login audit older than keepAudit, and API key secrets held past
// their window.
func (s *Store) Prune(ctx context.Context, keepAudit, secretWindow time.Duration) error {
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`DELETE FROM revocations WHERE expire_time < now()`, nil},
		{`DELETE FROM login_codes WHERE expire_time < now() - interval '1 day'`, nil},
		{`DELETE FROM refresh_tokens WHERE expire_time < now()`, nil},
		{`DELETE FROM sessions WHERE expire_time < now() - interval '1 day'`, nil},
		{`DELETE FROM login_attempts WHERE time < $1`, []any{s.now().Add(-keepAudit)}},
		// A lockout's failures count only while they come in a row: a day of quiet forgets them.
		{`DELETE FROM login_lockouts WHERE (locked_until IS NULL OR locked_until < now()) AND update_time < now() - interval '1 day'`, nil},
		{`UPDATE api_keys SET secret_enc = NULL WHERE secret_enc IS NOT NULL AND create_time < $1`, []any{s.now().Add(-secretWindow)}},
	} {
		if _, err := s.pool.Exec(ctx, q.sql, q.args...); err != nil {
			return fmt.Errorf("prune: %w", err)
		}
	}
	return nil
}
