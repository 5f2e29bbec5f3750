package jobrun

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrLeaseLost is returned by a lease operation or a fenced write when the job is no
// longer held by the caller's token: a person paused or cancelled it, it finished, or
// another worker took it over.
var ErrLeaseLost = errors.New("jobrun: lease lost")

// Store is what a service's store implements for the runner and the reaper; Leases
// implements it over a table. Claiming is the service's own (it loads the job and may
// change its status), see Runner.Run.
type Store interface {
	// Renew extends the lease held by token; ErrLeaseLost when token no longer holds it.
	Renew(ctx context.Context, id, token string) error
	// Release gives the lease up (a no-op unless token holds it).
	Release(ctx context.Context, id, token string) error
	// TakeStale fences out the holders of up to limit jobs whose lease was not renewed
	// within expiry and returns them, each at most once per expiry, to be run again.
	TakeStale(ctx context.Context, expiry time.Duration, limit int) ([]string, error)
}

// Querier is what Leases runs its statements on: a pool or a transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Leases is the lease store of one table of jobs. The table has the columns
//
//	id UUID PRIMARY KEY, status TEXT, lease_id UUID, lease_time TIMESTAMPTZ, update_time TIMESTAMPTZ
//
// A job in one of the Active statuses should have a runner. It is held while lease_id is
// set and lease_time is within the expiry; lease_id is the holder's token, a fresh UUID
// per claim, so every claim (and every take-over) changes it. Every write of a runner is
// fenced by its token in the same row lock as the write (Fence), so a runner that lost its
// lease cannot write. A write that ends the job (a status outside Active) clears lease_id
// and lease_time.
//
// lease_time with no lease_id marks a job the reaper handed out at that time: it is free
// to claim, and is handed out again only after the expiry (its run may never come: a
// queue that dropped it, a claim refused for a reason of the service's).
type Leases struct {
	DB     Querier
	Table  string
	Active []string
}

func (l *Leases) table() string { return pgx.Identifier{l.Table}.Sanitize() }

func interval(d time.Duration) string { return fmt.Sprintf("%d microseconds", d.Microseconds()) }

// active is the SQL list of the active statuses (literals: they are the service's own
// constants, never input).
func (l *Leases) active() string {
	quoted := make([]string, len(l.Active))
	for i, s := range l.Active {
		quoted[i] = "'" + strings.ReplaceAll(s, "'", "''") + "'"
	}
	return "(" + strings.Join(quoted, ", ") + ")"
}

// Claim gives job id's lease to token in q (typically the transaction that loads the job)
// if the job is active and not held by a live lease (none, token's own, or one not
// renewed within expiry). ok is false when the job is missing, not active or held.
func (l *Leases) Claim(ctx context.Context, q Querier, id, token string, expiry time.Duration) (bool, error) {
	tag, err := q.Exec(ctx, `UPDATE `+l.table()+` SET lease_id = $2, lease_time = now()
		WHERE id = $1 AND status IN `+l.active()+`
		  AND (lease_id IS NULL OR lease_id = $2 OR lease_time < now() - $3::interval)`, id, token, interval(expiry))
	if err != nil {
		return false, fmt.Errorf("jobrun: claim %s: %w", id, err)
	}
	return tag.RowsAffected() == 1, nil
}

// Fence locks job id's row in tx if token holds its lease and the job is active, so the
// writes that follow in tx are the holder's; else ErrLeaseLost. It returns the status.
func (l *Leases) Fence(ctx context.Context, tx pgx.Tx, id, token string) (string, error) {
	var status string
	err := tx.QueryRow(ctx, `SELECT status FROM `+l.table()+` WHERE id = $1 AND lease_id = $2 AND status IN `+l.active()+` FOR UPDATE`,
		id, token).Scan(&status)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", ErrLeaseLost
	}
	return status, err
}

// Renew implements Store.
func (l *Leases) Renew(ctx context.Context, id, token string) error {
	tag, err := l.DB.Exec(ctx, `UPDATE `+l.table()+` SET lease_time = now() WHERE id = $1 AND lease_id = $2 AND status IN `+l.active(), id, token)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return ErrLeaseLost
	}
	return nil
}

// Release implements Store: the job is free to claim at once.
func (l *Leases) Release(ctx context.Context, id, token string) error {
	_, err := l.DB.Exec(ctx, `UPDATE `+l.table()+` SET lease_id = NULL, lease_time = NULL WHERE id = $1 AND lease_id = $2`, id, token)
	return err
}

// TakeStale implements Store. It takes the active jobs with no live holder — a lease not
// renewed within expiry (the worker died or is cut off), no lease at all (released, or
// never claimed), or handed out more than expiry ago and not claimed since — oldest first.
// Taking one clears its lease_id, which fences out a holder that was only stalled, and
// marks lease_time, so two reapers never both take it within expiry: the row lock (SKIP
// LOCKED, then the condition re-checked on the row as committed) decides between them.
func (l *Leases) TakeStale(ctx context.Context, expiry time.Duration, limit int) ([]string, error) {
	t := l.table()
	rows, err := l.DB.Query(ctx, `UPDATE `+t+` SET lease_id = NULL, lease_time = now()
		WHERE id IN (SELECT id FROM `+t+` WHERE status IN `+l.active()+`
			AND (lease_time IS NULL OR lease_time < now() - $1::interval)
			ORDER BY update_time LIMIT $2 FOR UPDATE SKIP LOCKED)
		RETURNING id::text`, interval(expiry), limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
