package store

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/db"
)

// APIKey is a row of api_keys.
type APIKey struct {
	ID           string
	UserID       string
	Name         string
	Prefix       string
	Scopes       []string
	RequestID    string
	SecretEnc    []byte
	CreateTime   time.Time
	ExpireTime   time.Time // zero: none
	LastUsedTime time.Time // zero: never
	RevokeTime   time.Time // zero: active
}

const keyCols = `id::text, user_id, name, prefix, scopes, request_id, secret_enc, create_time, expire_time, last_used_time, revoke_time`

func scanKey(row pgx.Row) (APIKey, error) {
	var k APIKey
	var exp, used, rev *time.Time
	err := row.Scan(&k.ID, &k.UserID, &k.Name, &k.Prefix, &k.Scopes, &k.RequestID, &k.SecretEnc, &k.CreateTime, &exp, &used, &rev)
	if errors.Is(err, pgx.ErrNoRows) {
		return k, ErrNotFound
	}
	for _, p := range []struct {
		dst *time.Time
		src *time.Time
	}{{&k.ExpireTime, exp}, {&k.LastUsedTime, used}, {&k.RevokeTime, rev}} {
		if p.src != nil {
			*p.dst = *p.src
		}
	}
	return k, err
}

// CreateAPIKey inserts k (hash is the secret's SHA-256). With a request id already used by
// the same user it inserts nothing and returns the first key, created false.
func (s *Store) CreateAPIKey(ctx context.Context, k APIKey, hash []byte) (APIKey, bool, error) {
	var exp *time.Time
	if !k.ExpireTime.IsZero() {
		exp = &k.ExpireTime
	}
	out, err := scanKey(s.pool.QueryRow(ctx, `INSERT INTO api_keys (user_id, name, prefix, hash, scopes, request_id, secret_enc, expire_time)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (user_id, request_id) WHERE request_id <> '' DO NOTHING
		RETURNING `+keyCols, k.UserID, k.Name, k.Prefix, hash, k.Scopes, k.RequestID, k.SecretEnc, exp))
	if errors.Is(err, ErrNotFound) {
		out, err = scanKey(s.pool.QueryRow(ctx, `SELECT `+keyCols+` FROM api_keys WHERE user_id = $1 AND request_id = $2`, k.UserID, k.RequestID))
		return out, false, err
	}
	return out, true, err
}

// KeyFilter pages ListAPIKeys.
type KeyFilter struct {
	UserID       string
	ShowInactive bool
	// After is the page cursor: the create time and id of the previous page's last key.
	AfterTime time.Time
	AfterID   string
	Limit     int
}

// ListAPIKeys returns a user's keys, newest first.
func (s *Store) ListAPIKeys(ctx context.Context, f KeyFilter) ([]APIKey, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+keyCols+` FROM api_keys
		WHERE user_id = $1
		  AND ($2 OR (revoke_time IS NULL AND (expire_time IS NULL OR expire_time > now())))
		  AND ($3::text = '' OR (create_time, id) < ($4, $3::uuid))
		ORDER BY create_time DESC, id DESC LIMIT $5`, f.UserID, f.ShowInactive, f.AfterID, f.AfterTime, f.Limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []APIKey
	for rows.Next() {
		k, err := scanKey(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// RevokeAPIKey revokes user's key id (ErrNotFound for another user's) and revokes the
// tokens acting for it until revokeUntil. A revoked key is returned unchanged.
func (s *Store) RevokeAPIKey(ctx context.Context, userID, id string, revokeUntil time.Time) (APIKey, error) {
	var k APIKey
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var err error
		k, err = scanKey(tx.QueryRow(ctx, `SELECT `+keyCols+` FROM api_keys WHERE id = $1 AND user_id = $2 FOR UPDATE`, id, userID))
		if err != nil || !k.RevokeTime.IsZero() {
			return err
		}
		if k, err = scanKey(tx.QueryRow(ctx, `UPDATE api_keys SET revoke_time = now(), secret_enc = NULL WHERE id = $1 RETURNING `+keyCols, id)); err != nil {
			return err
		}
		return revoke(ctx, tx, Revocation{Type: RevokeAPIKey, Subject: id, Expire: revokeUntil})
	})
	return k, err
}

// KeyByHash returns the key whose secret hashes to hash, and marks it used (at most once a
// minute, so a busy key does not write on every exchange).
func (s *Store) KeyByHash(ctx context.Context, hash []byte) (APIKey, error) {
	k, err := scanKey(s.pool.QueryRow(ctx, `SELECT `+keyCols+` FROM api_keys WHERE hash = $1`, hash))
	if err != nil {
		return k, err
	}
	if k.LastUsedTime.Before(s.now().Add(-time.Minute)) {
		_, _ = s.pool.Exec(ctx, `UPDATE api_keys SET last_used_time = now() WHERE id = $1`, k.ID)
	}
	return k, nil
}
