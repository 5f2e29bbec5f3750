package store

import (
	"context"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/db"
)

// RevokeTokenOnce revokes the token id until expire unless a revocation of it is already
// in force, and says whether it recorded one. The gateway calls it for every admin token
// the launcher lists as replaced, at each start and each change of the list: the list
// repeats, the revocations (and the events every verifier follows) must not.
func (s *Store) RevokeTokenOnce(ctx context.Context, id string, r Revocation) (bool, error) {
	recorded := false
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		// Two gateways starting together serialize here rather than both recording it.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtextextended('thefold.revoke.token:' || $1, 0))`, id); err != nil {
			return err
		}
		var exists bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM revocations WHERE type = $1 AND subject = $2 AND expire_time >= $3)`,
			RevokeToken, id, r.Expire).Scan(&exists); err != nil || exists {
			return err
		}
		r.Type, r.Subject = RevokeToken, id
		recorded = true
		return revoke(ctx, tx, r)
	})
	return recorded && err == nil, err
}
