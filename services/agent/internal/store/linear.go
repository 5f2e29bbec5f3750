package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/validate"
)

// LinearRecord is a Linear connection with its sealed key and secret and its sync state.
type LinearRecord struct {
	*agentv1.LinearConnection
	KeySealed, SecretSealed []byte
	// FullSync is set until a sync read every issue of the chosen states once.
	FullSync bool
	// SyncedTo is Linear's updatedAt up to which every change was read (zero: none).
	SyncedTo time.Time
}

const linearColumns = `id::text, owner_id, repo, key_sealed, key_hint, linear_user, secret_sealed, team_ids, team_keys, project_ids, state_types,
	sync_interval_secs, next_sync_time, full_sync, synced_to, last_sync_time, last_sync_status, create_time`

func scanLinear(row pgx.Row) (*LinearRecord, error) {
	var (
		c                 = &agentv1.LinearConnection{}
		rec               = &LinearRecord{LinearConnection: c}
		secs              int64
		next, created     time.Time
		syncedTo, lastRun *time.Time
	)
	if err := row.Scan(&c.Id, &c.OwnerId, &c.Repo, &rec.KeySealed, &c.ApiKeyHint, &c.LinearUser, &rec.SecretSealed, &c.TeamIds, &c.TeamKeys,
		&c.ProjectIds, &c.StateTypes, &secs, &next, &rec.FullSync, &syncedTo, &lastRun, &c.LastSyncStatus, &created); err != nil {
		return nil, err
	}
	c.SyncInterval = durationpb.New(time.Duration(secs) * time.Second)
	c.NextSyncTime, c.CreateTime = timestamppb.New(next), timestamppb.New(created)
	if syncedTo != nil {
		rec.SyncedTo = *syncedTo
	}
	if lastRun != nil {
		c.LastSyncTime = timestamppb.New(*lastRun)
	}
	return rec, nil
}

// CreateLinearConnection stores owner's connection c with its sealed key and secret; a
// retry with requestID returns the first (and created false).
func (s *Store) CreateLinearConnection(ctx context.Context, c *agentv1.LinearConnection, key, secret []byte, requestID string) (*agentv1.LinearConnection, bool, error) {
	if requestID != "" {
		rec, err := scanLinear(s.pool.QueryRow(ctx, `SELECT `+linearColumns+` FROM linear_connections WHERE owner_id = $1 AND request_id = $2`,
			c.OwnerId, requestID))
		if err == nil {
			return rec.LinearConnection, false, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, false, err
		}
	}
	rec, err := scanLinear(s.pool.QueryRow(ctx, `INSERT INTO linear_connections (owner_id, request_id, repo, key_sealed, key_hint, linear_user,
			secret_sealed, team_ids, team_keys, project_ids, state_types, sync_interval_secs)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12) RETURNING `+linearColumns,
		c.OwnerId, requestID, c.Repo, key, c.ApiKeyHint, c.LinearUser, secret, c.TeamIds, nonNilStrings(c.TeamKeys), nonNilStrings(c.ProjectIds),
		c.StateTypes, int64(c.SyncInterval.AsDuration()/time.Second)))
	switch {
	case db.IsUniqueViolation(err):
		return nil, false, fmt.Errorf("a ConnectLinear with request_id %q is in progress; retry: %w", requestID, errs.ErrConflict)
	case err != nil:
		return nil, false, err
	}
	return rec.LinearConnection, true, nil
}

// GetLinearConnection returns owner's connection id.
func (s *Store) GetLinearConnection(ctx context.Context, owner, id string) (*LinearRecord, error) {
	rec, err := scanLinear(s.pool.QueryRow(ctx, `SELECT `+linearColumns+` FROM linear_connections WHERE id = $1 AND owner_id = $2`, id, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.NotFound("linear connection", id)
	}
	return rec, err
}

// ListLinearConnections returns a page of owner's connections, newest first.
func (s *Store) ListLinearConnections(ctx context.Context, owner string, size int, token string) ([]*agentv1.LinearConnection, string, error) {
	var c db.Conds
	c.Add("owner_id = $%d", owner)
	if err := pageAfter(token, "lc1", "ListLinearConnections", &c); err != nil {
		return nil, "", err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+linearColumns+` FROM linear_connections`+c.Where()+` ORDER BY create_time DESC, id DESC LIMIT `+c.Arg(size+1), c.Args...)
	if err != nil {
		return nil, "", err
	}
	recs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*LinearRecord, error) { return scanLinear(r) })
	if err != nil {
		return nil, "", err
	}
	out := make([]*agentv1.LinearConnection, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.LinearConnection)
	}
	next := ""
	if len(out) > size {
		out = out[:size]
		last := out[size-1]
		next = validate.EncodeTimeIDToken("lc1", last.CreateTime.AsTime(), last.Id)
	}
	return out, next, nil
}

// DeleteLinearConnection deletes owner's connection id with what it synced.
func (s *Store) DeleteLinearConnection(ctx context.Context, owner, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM linear_connections WHERE id = $1 AND owner_id = $2`, id, owner)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return errs.NotFound("linear connection", id)
	}
	return nil
}

// LinearConnectionsOfTeam returns up to limit connections that sync team: the secrets a
// delivery about one of its issues is checked against.
func (s *Store) LinearConnectionsOfTeam(ctx context.Context, team string, limit int) ([]*LinearRecord, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+linearColumns+` FROM linear_connections WHERE team_ids @> ARRAY[$1]::text[] ORDER BY create_time, id LIMIT $2`,
		team, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*LinearRecord, error) { return scanLinear(r) })
}

// AddLinearDelivery stores a verified delivery about issue once and makes the connection's
// sync due now; a delivery id seen before stores nothing (duplicate true).
func (s *Store) AddLinearDelivery(ctx context.Context, connection, delivery, issue string) (duplicate bool, err error) {
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO linear_deliveries (connection_id, delivery_id, issue_id) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
			connection, delivery, issue)
		if err != nil {
			return err
		}
		if duplicate = tag.RowsAffected() == 0; duplicate {
			return nil
		}
		_, err = tx.Exec(ctx, `UPDATE linear_connections SET next_sync_time = least(next_sync_time, now()) WHERE id = $1`, connection)
		return err
	})
	return duplicate, err
}

// ClaimLinearSyncs claims up to n connections whose sync is due: their next sync moves past
// lease, so no other replica syncs them meanwhile.
func (s *Store) ClaimLinearSyncs(ctx context.Context, n int, lease time.Duration) ([]*LinearRecord, error) {
	rows, err := s.pool.Query(ctx, `UPDATE linear_connections c SET next_sync_time = now() + $2::interval
		FROM (SELECT id FROM linear_connections WHERE next_sync_time <= now() ORDER BY next_sync_time LIMIT $1 FOR UPDATE SKIP LOCKED) due
		WHERE c.id = due.id RETURNING `+prefixed("c.", linearColumns), n, interval(lease))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*LinearRecord, error) { return scanLinear(r) })
}

// ClaimLinearPushes claims up to n connections whose push is due: their next push moves
// every on, so no other replica pushes them meanwhile.
func (s *Store) ClaimLinearPushes(ctx context.Context, n int, every time.Duration) ([]*LinearRecord, error) {
	rows, err := s.pool.Query(ctx, `UPDATE linear_connections c SET next_push_time = now() + $2::interval
		FROM (SELECT id FROM linear_connections WHERE next_push_time <= now() ORDER BY next_push_time LIMIT $1 FOR UPDATE SKIP LOCKED) due
		WHERE c.id = due.id RETURNING `+prefixed("c.", linearColumns), n, interval(every))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*LinearRecord, error) { return scanLinear(r) })
}

// PendingLinearDeliveries are the issues named by connection's deliveries not read yet,
// with the deliveries' ids.
func (s *Store) PendingLinearDeliveries(ctx context.Context, connection string) (issues, deliveries []string, err error) {
	rows, err := s.pool.Query(ctx, `SELECT issue_id, delivery_id FROM linear_deliveries WHERE connection_id = $1 AND NOT done
		ORDER BY receive_time LIMIT 200`, connection)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	seen := map[string]bool{}
	for rows.Next() {
		var issue, delivery string
		if err := rows.Scan(&issue, &delivery); err != nil {
			return nil, nil, err
		}
		if !seen[issue] {
			seen[issue] = true
			issues = append(issues, issue)
		}
		deliveries = append(deliveries, delivery)
	}
	return issues, deliveries, rows.Err()
}

// LinearSynced records the end of a sync of connection: the deliveries it read, Linear's
// updatedAt it read up to (zero: unchanged), whether it read every issue, what it said,
// and when the next is due: after next, or at once when the sync went well (ok) and a
// delivery it did not read is waiting.
func (s *Store) LinearSynced(ctx context.Context, connection string, deliveries []string, syncedTo time.Time, full bool, status string, next time.Duration, ok bool) error {
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if len(deliveries) > 0 {
			if _, err := tx.Exec(ctx, `UPDATE linear_deliveries SET done = true WHERE connection_id = $1 AND delivery_id = ANY ($2)`,
				connection, deliveries); err != nil {
				return err
			}
		}
		// Read deliveries are kept a day, for a redelivery to find.
		if _, err := tx.Exec(ctx, `DELETE FROM linear_deliveries WHERE connection_id = $1 AND done AND receive_time < now() - interval '1 day'`,
			connection); err != nil {
			return err
		}
		var to *time.Time
		if !syncedTo.IsZero() {
			to = &syncedTo
		}
		// A delivery that came while the sync ran (after it read the pending ones) made the
		// connection due at once (AddLinearDelivery); a sync that went well keeps it due
		// rather than putting it off by next, which lost such a delivery for a whole sync
		// interval. (One committing after this statement waits for its row lock and makes
		// it due itself.) A failed sync waits next either way: its backoff.
		_, err := tx.Exec(ctx, `UPDATE linear_connections SET synced_to = coalesce($2, synced_to), full_sync = full_sync AND NOT $3,
				last_sync_time = now(), last_sync_status = $4,
				next_sync_time = CASE WHEN $6 AND EXISTS (SELECT 1 FROM linear_deliveries d WHERE d.connection_id = $1 AND NOT d.done)
					THEN now() ELSE now() + $5::interval END
			WHERE id = $1`, connection, to, full, validate.Truncate(status, 500), interval(next), ok)
		return err
	})
}

// LinearIssueRecord is an issue a connection synced, as stored.
type LinearIssueRecord struct {
	ConnectionID, IssueID, Identifier, URL, TeamID string
	StateName, StateType                           string
	TaskID                                         string
	Title, Description                             string
	LinearUpdatedAt, TaskUpdatedAt                 time.Time
	PushedStatus                                   string
	Conflict                                       string
	ConflictTime                                   *time.Time
	SyncTime                                       time.Time
}

const linearIssueColumns = `connection_id::text, issue_id, identifier, url, team_id, state_name, state_type, task_id, title, description,
	linear_updated_at, task_updated_at, pushed_status, conflict, conflict_time, sync_time`

// LinearIssue is connection's issue; nil when it was never synced.
func (s *Store) LinearIssue(ctx context.Context, connection, issue string) (*LinearIssueRecord, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+linearIssueColumns+` FROM linear_issues WHERE connection_id = $1 AND issue_id = $2`, connection, issue)
	if err != nil {
		return nil, err
	}
	r, err := pgx.CollectOneRow(rows, pgx.RowToAddrOfStructByPos[LinearIssueRecord])
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return r, err
}

// LinearIssues are every issue connection synced.
func (s *Store) LinearIssues(ctx context.Context, connection string) ([]*LinearIssueRecord, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+linearIssueColumns+` FROM linear_issues WHERE connection_id = $1 ORDER BY issue_id`, connection)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToAddrOfStructByPos[LinearIssueRecord])
}

// PutLinearIssue stores r as connection's synced issue, as of now.
func (s *Store) PutLinearIssue(ctx context.Context, r *LinearIssueRecord) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO linear_issues (connection_id, issue_id, identifier, url, team_id, state_name, state_type, task_id, title,
			description, linear_updated_at, task_updated_at, pushed_status, conflict, conflict_time, sync_time)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, now())
		ON CONFLICT (connection_id, issue_id) DO UPDATE SET identifier = $3, url = $4, team_id = $5, state_name = $6, state_type = $7, task_id = $8,
			title = $9, description = $10, linear_updated_at = $11, task_updated_at = $12, pushed_status = $13, conflict = $14, conflict_time = $15,
			sync_time = now()`,
		r.ConnectionID, r.IssueID, r.Identifier, r.URL, r.TeamID, r.StateName, r.StateType, r.TaskID, r.Title, r.Description, r.LinearUpdatedAt,
		r.TaskUpdatedAt, r.PushedStatus, validate.Truncate(r.Conflict, 1000), r.ConflictTime)
	return err
}

// ListLinearIssues returns a page of connection's synced issues, the most recently synced
// first.
func (s *Store) ListLinearIssues(ctx context.Context, connection string, size int, token string) ([]*agentv1.LinearIssue, string, error) {
	var c db.Conds
	c.Add("connection_id = $%d", connection)
	if token != "" {
		parts, err := validate.DecodePageToken(token, "li1", 2, "ListLinearIssues")
		if err != nil {
			return nil, "", err
		}
		micros, err := strconv.ParseInt(parts[0], 10, 64)
		if err != nil || micros < 0 {
			return nil, "", errs.Invalid("page_token", "not a token of ListLinearIssues")
		}
		c.Add("(sync_time, issue_id) < ($%d, $%d)", time.UnixMicro(micros).UTC(), parts[1])
	}
	rows, err := s.pool.Query(ctx, `SELECT `+linearIssueColumns+` FROM linear_issues`+c.Where()+` ORDER BY sync_time DESC, issue_id DESC LIMIT `+
		c.Arg(size+1), c.Args...)
	if err != nil {
		return nil, "", err
	}
	recs, err := pgx.CollectRows(rows, pgx.RowToAddrOfStructByPos[LinearIssueRecord])
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(recs) > size {
		recs = recs[:size]
		last := recs[size-1]
		next = validate.EncodePageToken("li1", strconv.FormatInt(last.SyncTime.UnixMicro(), 10), last.IssueID)
	}
	out := make([]*agentv1.LinearIssue, 0, len(recs))
	for _, r := range recs {
		i := &agentv1.LinearIssue{IssueId: r.IssueID, Identifier: r.Identifier, Url: r.URL, StateName: r.StateName, StateType: r.StateType,
			TaskId: r.TaskID, PushedStatus: r.PushedStatus, Conflict: r.Conflict, LinearUpdateTime: timestamppb.New(r.LinearUpdatedAt),
			SyncTime: timestamppb.New(r.SyncTime)}
		if r.ConflictTime != nil {
			i.ConflictTime = timestamppb.New(*r.ConflictTime)
		}
		out = append(out, i)
	}
	return out, next, nil
}
