package store

import (
	"context"
	"fmt"

	"github.com/thefold/thefold/pkg/validate"
)

// Live returns which of ids name a live sandbox (creating or ready) of any owner, keyed by
// the ids as given. It serves the reconciliation of backend resources labelled with a
// sandbox id (a container a crashed process left behind): every other id (destroyed,
// failed, unknown, not a UUID at all) is missing from the answer. Expiry is not looked at
// here: the reaper destroys an expired sandbox first, waiting for a command running in it,
// and its row then says destroyed.
func (s *Store) Live(ctx context.Context, ids []string) (map[string]bool, error) {
	byUUID := make(map[string][]string, len(ids))
	for _, id := range ids {
		if u, err := validate.UUID("id", id, true); err == nil {
			byUUID[u] = append(byUUID[u], id)
		}
	}
	out := map[string]bool{}
	if len(byUUID) == 0 {
		return out, nil
	}
	uuids := make([]string, 0, len(byUUID))
	for u := range byUUID {
		uuids = append(uuids, u)
	}
	rows, err := s.pool.Query(ctx, `SELECT id::text FROM sandboxes WHERE id = ANY($1::uuid[]) AND `+live, uuids)
	if err != nil {
		return nil, fmt.Errorf("store: live sandboxes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("store: live sandboxes: %w", err)
		}
		for _, given := range byUUID[id] {
			out[given] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("store: live sandboxes: %w", err)
	}
	return out, nil
}
