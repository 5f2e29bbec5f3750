package store

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/protoenum"
	"github.com/thefold/thefold/pkg/validate"
)

// ConnectionRecord is a repository connection with its sealed webhook secret.
type ConnectionRecord struct {
	*agentv1.RepoConnection
	SecretSealed []byte
	// PollETag and PollLastEvent are a polled connection's feed: the last read's ETag and
	// the newest event id taken (0: not read yet).
	PollETag      string
	PollLastEvent int64
}

const connectionColumns = `id::text, owner_id, repo, secret_sealed, issue_labels, last_delivery_time, create_time, poll, poll_etag,
	poll_last_event, last_poll_time, poll_status, health_enabled, health_interval_secs, health_todo_threshold, health_auto_start, next_health_time`

func scanConnection(row pgx.Row) (*ConnectionRecord, error) {
	var (
		c              = &agentv1.RepoConnection{}
		rec            = &ConnectionRecord{RepoConnection: c}
		last, lastPoll *time.Time
		created, next  time.Time
		h              = &agentv1.RepoHealthSettings{}
		interval       int64
	)
	if err := row.Scan(&c.Id, &c.OwnerId, &c.Repo, &rec.SecretSealed, &c.IssueLabels, &last, &created, &c.Poll, &rec.PollETag,
		&rec.PollLastEvent, &lastPoll, &c.PollStatus, &h.Enabled, &interval, &h.TodoThreshold, &h.AutoStart, &next); err != nil {
		return nil, err
	}
	h.Interval = durationpb.New(time.Duration(interval) * time.Second)
	if h.Enabled {
		h.NextCheckTime = timestamppb.New(next)
	}
	c.Health = h
	if last != nil {
		c.LastDeliveryTime = timestamppb.New(*last)
	}
	if lastPoll != nil {
		c.LastPollTime = timestamppb.New(*lastPoll)
	}
	c.CreateTime = timestamppb.New(created)
	return rec, nil
}

// CreateConnection stores owner's connection of c.Repo with its sealed secret; a retry with
// requestID returns the first (and created false). A second connection of the repository is
// ALREADY_EXISTS.
func (s *Store) CreateConnection(ctx context.Context, c *agentv1.RepoConnection, sealed []byte, requestID string) (*agentv1.RepoConnection, bool, error) {
	if requestID != "" {
		rec, err := scanConnection(s.pool.QueryRow(ctx, `SELECT `+connectionColumns+` FROM repo_connections WHERE owner_id = $1 AND request_id = $2`,
			c.OwnerId, requestID))
		if err == nil {
			return rec.RepoConnection, false, nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return nil, false, err
		}
	}
	h := c.GetHealth()
	rec, err := scanConnection(s.pool.QueryRow(ctx, `INSERT INTO repo_connections (owner_id, request_id, repo, secret_sealed, issue_labels, poll,
			health_enabled, health_interval_secs, health_todo_threshold, health_auto_start)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING `+connectionColumns, c.OwnerId, requestID, c.Repo, sealed, nonNilStrings(c.IssueLabels), c.Poll,
		h.GetEnabled(), int64(h.GetInterval().AsDuration()/time.Second), h.GetTodoThreshold(), h.GetAutoStart()))
	switch {
	case db.IsUniqueViolation(err, "repo_connections_owner_id_repo_key"):
		return nil, false, fmt.Errorf("%s is connected already; delete that connection to connect it again with a new secret: %w", c.Repo, errs.ErrAlreadyExists)
	case db.IsUniqueViolation(err):
		return nil, false, fmt.Errorf("a ConnectRepository with request_id %q is in progress; retry: %w", requestID, errs.ErrConflict)
	case err != nil:
		return nil, false, err
	}
	return rec.RepoConnection, true, nil
}

// ConnectionsOfRepo returns up to limit connections of repo, oldest first: the secrets a
// delivery naming it is checked against.
func (s *Store) ConnectionsOfRepo(ctx context.Context, repo string, limit int) ([]*ConnectionRecord, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+connectionColumns+` FROM repo_connections WHERE repo = $1 ORDER BY create_time, id LIMIT $2`, repo, limit)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*ConnectionRecord, error) { return scanConnection(r) })
}

// GetConnection returns owner's connection id.
func (s *Store) GetConnection(ctx context.Context, owner, id string) (*ConnectionRecord, error) {
	rec, err := scanConnection(s.pool.QueryRow(ctx, `SELECT `+connectionColumns+` FROM repo_connections WHERE id = $1 AND owner_id = $2`, id, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.NotFound("repo connection", id)
	}
	return rec, err
}

// ListConnections returns a page of owner's connections, newest first.
func (s *Store) ListConnections(ctx context.Context, owner string, size int, token string) ([]*agentv1.RepoConnection, string, error) {
	var c db.Conds
	c.Add("owner_id = $%d", owner)
	if err := pageAfter(token, "rc1", "ListRepoConnections", &c); err != nil {
		return nil, "", err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+connectionColumns+` FROM repo_connections`+c.Where()+` ORDER BY create_time DESC, id DESC LIMIT `+c.Arg(size+1), c.Args...)
	if err != nil {
		return nil, "", err
	}
	recs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*ConnectionRecord, error) { return scanConnection(r) })
	if err != nil {
		return nil, "", err
	}
	out := make([]*agentv1.RepoConnection, 0, len(recs))
	for _, r := range recs {
		out = append(out, r.RepoConnection)
	}
	next := ""
	if len(out) > size {
		out = out[:size]
		last := out[size-1]
		next = validate.EncodeTimeIDToken("rc1", last.CreateTime.AsTime(), last.Id)
	}
	return out, next, nil
}

// DeleteConnection deletes owner's connection id with its deliveries.
func (s *Store) DeleteConnection(ctx context.Context, owner, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM repo_connections WHERE id = $1 AND owner_id = $2`, id, owner)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return errs.NotFound("repo connection", id)
	}
	return nil
}

// RepoDeliveryStateName is the stored name of st ("pending").
func RepoDeliveryStateName(st agentv1.RepoDeliveryState) string {
	return protoenum.Name(st, "REPO_DELIVERY_STATE_")
}

const deliveryColumns = `connection_id::text, delivery_id, event, action, state, outcome, attempts, receive_time, finish_time`

func scanRepoDelivery(row pgx.Row) (*agentv1.RepoDelivery, error) {
	var (
		d        = &agentv1.RepoDelivery{}
		state    string
		received time.Time
		finished *time.Time
	)
	if err := row.Scan(&d.ConnectionId, &d.DeliveryId, &d.Event, &d.Action, &state, &d.Outcome, &d.Attempts, &received, &finished); err != nil {
		return nil, err
	}
	d.State = protoenum.Parse[agentv1.RepoDeliveryState](state, "REPO_DELIVERY_STATE_", agentv1.RepoDeliveryState_value)
	d.ReceiveTime = timestamppb.New(received)
	if finished != nil {
		d.FinishTime = timestamppb.New(*finished)
	}
	return d, nil
}

// AddRepoDelivery stores a verified delivery of connection d.ConnectionId once, with its
// payload while it is PENDING, and notes the connection's last delivery. A delivery id seen
// before stores nothing: the first is returned with duplicate true.
func (s *Store) AddRepoDelivery(ctx context.Context, d *agentv1.RepoDelivery, payload []byte) (*agentv1.RepoDelivery, bool, error) {
	var (
		out       *agentv1.RepoDelivery
		duplicate bool
	)
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var keep []byte
		finished := "NULL"
		if d.State == agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_PENDING {
			keep = payload
		} else {
			finished = "now()"
		}
		got, err := scanRepoDelivery(tx.QueryRow(ctx, `INSERT INTO repo_deliveries (connection_id, delivery_id, event, action, state, outcome, payload, finish_time)
			VALUES ($1, $2, $3, $4, $5, $6, $7, `+finished+`) ON CONFLICT DO NOTHING RETURNING `+deliveryColumns,
			d.ConnectionId, d.DeliveryId, d.Event, d.Action, RepoDeliveryStateName(d.State), d.Outcome, keep))
		if errors.Is(err, pgx.ErrNoRows) {
			duplicate = true
			out, err = scanRepoDelivery(tx.QueryRow(ctx, `SELECT `+deliveryColumns+` FROM repo_deliveries WHERE connection_id = $1 AND delivery_id = $2`,
				d.ConnectionId, d.DeliveryId))
			return err
		}
		if err != nil {
			return err
		}
		out = got
		_, err = tx.Exec(ctx, `UPDATE repo_connections SET last_delivery_time = now() WHERE id = $1`, d.ConnectionId)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return out, duplicate, nil
}

// ListRepoDeliveries returns a page of connection id's deliveries, newest first.
func (s *Store) ListRepoDeliveries(ctx context.Context, connection string, size int, token string) ([]*agentv1.RepoDelivery, string, error) {
	var c db.Conds
	c.Add("connection_id = $%d", connection)
	if token != "" {
		parts, err := validate.DecodePageToken(token, "rd1", 2, "ListRepoDeliveries")
		if err != nil {
			return nil, "", err
		}
		micros, err := strconv.ParseInt(parts[0], 10, 64)
		if err != nil || micros < 0 {
			return nil, "", errs.Invalid("page_token", "not a token of ListRepoDeliveries")
		}
		c.Add("(receive_time, delivery_id) < ($%d, $%d)", time.UnixMicro(micros).UTC(), parts[1])
	}
	rows, err := s.pool.Query(ctx, `SELECT `+deliveryColumns+` FROM repo_deliveries`+c.Where()+
		` ORDER BY receive_time DESC, delivery_id DESC LIMIT `+c.Arg(size+1), c.Args...)
	if err != nil {
		return nil, "", err
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*agentv1.RepoDelivery, error) { return scanRepoDelivery(r) })
	if err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > size {
		out = out[:size]
		last := out[size-1]
		next = validate.EncodePageToken("rd1", strconv.FormatInt(last.ReceiveTime.AsTime().UnixMicro(), 10), last.DeliveryId)
	}
	return out, next, nil
}

// DueDelivery is a pending delivery claimed to be handled, with its connection.
type DueDelivery struct {
	*agentv1.RepoDelivery
	Connection *ConnectionRecord
	Payload    []byte
}

// ClaimRepoDeliveries claims up to n pending deliveries that are due, oldest first, for
// lease: their next attempt moves past it, so no other replica takes them meanwhile (one
// that is not finished by then is taken again), and their attempts count one more.
func (s *Store) ClaimRepoDeliveries(ctx context.Context, n int, lease time.Duration) ([]*DueDelivery, error) {
	rows, err := s.pool.Query(ctx, `WITH due AS (
			SELECT connection_id, delivery_id FROM repo_deliveries
			WHERE state = 'pending' AND next_attempt_time <= now()
			ORDER BY receive_time, delivery_id LIMIT $1 FOR UPDATE SKIP LOCKED)
		UPDATE repo_deliveries d SET attempts = d.attempts + 1, next_attempt_time = now() + $2::interval
		FROM due WHERE d.connection_id = due.connection_id AND d.delivery_id = due.delivery_id
		RETURNING d.connection_id::text, d.delivery_id, d.event, d.action, d.state, d.outcome, d.attempts, d.receive_time, d.finish_time, d.payload`,
		n, interval(lease))
	if err != nil {
		return nil, err
	}
	due, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*DueDelivery, error) {
		d := &DueDelivery{RepoDelivery: &agentv1.RepoDelivery{}}
		var (
			state    string
			received time.Time
			finished *time.Time
		)
		if err := r.Scan(&d.ConnectionId, &d.DeliveryId, &d.Event, &d.Action, &state, &d.Outcome, &d.Attempts, &received, &finished, &d.Payload); err != nil {
			return nil, err
		}
		d.State = agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_PENDING
		d.ReceiveTime = timestamppb.New(received)
		return d, nil
	})
	if err != nil {
		return nil, err
	}
	for _, d := range due {
		if d.Connection, err = scanConnection(s.pool.QueryRow(ctx, `SELECT `+connectionColumns+` FROM repo_connections WHERE id = $1`, d.ConnectionId)); err != nil {
			return nil, fmt.Errorf("store: the connection of delivery %s: %w", d.DeliveryId, err)
		}
	}
	return due, nil
}

// FinishRepoDelivery records what became of a claimed delivery: DONE, IGNORED or FAILED
// with outcome (its payload is dropped), or PENDING to be tried again after retry.
func (s *Store) FinishRepoDelivery(ctx context.Context, d *agentv1.RepoDelivery, state agentv1.RepoDeliveryState, outcome string, retry time.Duration) error {
	outcome = validate.Truncate(outcome, 1000)
	if state == agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_PENDING {
		_, err := s.pool.Exec(ctx, `UPDATE repo_deliveries SET outcome = $3, next_attempt_time = now() + $4::interval
			WHERE connection_id = $1 AND delivery_id = $2 AND state = 'pending'`, d.ConnectionId, d.DeliveryId, outcome, interval(retry))
		return err
	}
	_, err := s.pool.Exec(ctx, `UPDATE repo_deliveries SET state = $3, outcome = $4, payload = NULL, finish_time = now()
		WHERE connection_id = $1 AND delivery_id = $2 AND state = 'pending'`, d.ConnectionId, d.DeliveryId, RepoDeliveryStateName(state), outcome)
	return err
}

// PruneRepoDeliveries deletes the finished deliveries older than age.
func (s *Store) PruneRepoDeliveries(ctx context.Context, age time.Duration) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM repo_deliveries WHERE state <> 'pending' AND receive_time < now() - $1::interval`, interval(age))
	return err
}

func nonNilStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// interval is d as PostgreSQL reads an interval.
func interval(d time.Duration) string { return fmt.Sprintf("%d milliseconds", d.Milliseconds()) }

// DeferRepoDelivery puts a claimed delivery off for wait without counting the attempt.
func (s *Store) DeferRepoDelivery(ctx context.Context, d *agentv1.RepoDelivery, wait time.Duration) error {
	_, err := s.pool.Exec(ctx, `UPDATE repo_deliveries SET next_attempt_time = now() + $3::interval, attempts = greatest(attempts - 1, 0)
		WHERE connection_id = $1 AND delivery_id = $2 AND state = 'pending'`, d.ConnectionId, d.DeliveryId, interval(wait))
	return err
}

// Feedback is a line comment on a pull request, by a person with write access.
type Feedback struct {
	ConnectionID string
	PullRequest  int32
	CommentID    int64
	ReviewID     int64
	Author       string
	Path         string
	Line         int32
	Body         string
}

// AddFeedback keeps a line comment until a revision takes it; a comment kept before (a
// redelivery, or its edit) is left as it is.
func (s *Store) AddFeedback(ctx context.Context, f Feedback) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO pr_feedback (connection_id, pr_number, comment_id, review_id, author, path, line, body)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`,
		f.ConnectionID, f.PullRequest, f.CommentID, f.ReviewID, f.Author, f.Path, f.Line, f.Body)
	return err
}

// OpenFeedback is the comments on a pull request no revision took yet, oldest first.
func (s *Store) OpenFeedback(ctx context.Context, connection string, pr int32) ([]Feedback, error) {
	rows, err := s.pool.Query(ctx, `SELECT connection_id::text, pr_number, comment_id, review_id, author, path, line, body FROM pr_feedback
		WHERE connection_id = $1 AND pr_number = $2 AND job_id IS NULL ORDER BY create_time, comment_id`, connection, pr)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[Feedback])
}

// UseFeedback records that job took the comments ids of a connection.
func (s *Store) UseFeedback(ctx context.Context, connection, job string, ids []int64) error {
	_, err := s.pool.Exec(ctx, `UPDATE pr_feedback SET job_id = $2 WHERE connection_id = $1 AND comment_id = ANY ($3) AND job_id IS NULL`,
		connection, job, ids)
	return err
}

// JobOfPullRequest is owner's latest job whose pull request is number in repo; nil when
// there is none.
func (s *Store) JobOfPullRequest(ctx context.Context, owner, repo string, number int32) (*agentv1.Job, error) {
	return s.latestJob(ctx, `owner_id = $1 AND repo = $2 AND (job->'pull_request'->>'number')::int = $3`, owner, repo, number)
}

// JobOfBranch is owner's latest job with a pull request from branch in repo; nil when there
// is none.
func (s *Store) JobOfBranch(ctx context.Context, owner, repo, branch string) (*agentv1.Job, error) {
	return s.latestJob(ctx, `owner_id = $1 AND repo = $2 AND job->>'branch' = $3 AND job ? 'pull_request'`, owner, repo, branch)
}

// RevisionsOf counts the jobs that revised owner's pull request number in repo.
func (s *Store) RevisionsOf(ctx context.Context, owner, repo string, number int32) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM jobs WHERE owner_id = $1 AND repo = $2 AND (job->'pull_request'->>'number')::int = $3
		AND coalesce(job->>'revises_job_id', '') <> ''`, owner, repo, number).Scan(&n)
	return n, err
}

// latestJob is the latest job where cond holds; nil when there is none.
func (s *Store) latestJob(ctx context.Context, cond string, args ...any) (*agentv1.Job, error) {
	var id string
	err := s.pool.QueryRow(ctx, `SELECT id::text FROM jobs WHERE `+cond+` ORDER BY create_time DESC, id DESC LIMIT 1`, args...).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	rec, err := s.Load(ctx, id)
	if err != nil {
		return nil, err
	}
	return rec.Job, nil
}

// ClaimPolls claims up to n polled connections whose next read is due: their next read moves
// past lease, so no other replica reads them meanwhile.
func (s *Store) ClaimPolls(ctx context.Context, n int, lease time.Duration) ([]*ConnectionRecord, error) {
	rows, err := s.pool.Query(ctx, `UPDATE repo_connections c SET next_poll_time = now() + $2::interval
		FROM (SELECT id FROM repo_connections WHERE poll AND next_poll_time <= now() ORDER BY next_poll_time LIMIT $1 FOR UPDATE SKIP LOCKED) due
		WHERE c.id = due.id RETURNING `+prefixed("c.", connectionColumns), n, interval(lease))
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, func(r pgx.CollectableRow) (*ConnectionRecord, error) { return scanConnection(r) })
}

// Polled records a read of a polled connection's feed: the deliveries it made (stored once
// each, as AddRepoDelivery does), its ETag and newest event, what it said, and when to read
// next.
func (s *Store) Polled(ctx context.Context, c *ConnectionRecord, deliveries []*agentv1.RepoDelivery, payloads [][]byte, etag string, last int64,
	status string, next time.Duration) error {
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		for i, d := range deliveries {
			finished := "now()"
			var keep []byte
			if d.State == agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_PENDING {
				finished, keep = "NULL", payloads[i]
			}
			if _, err := tx.Exec(ctx, `INSERT INTO repo_deliveries (connection_id, delivery_id, event, action, state, outcome, payload, finish_time)
				VALUES ($1, $2, $3, $4, $5, $6, $7, `+finished+`) ON CONFLICT DO NOTHING`,
				c.Id, d.DeliveryId, d.Event, d.Action, RepoDeliveryStateName(d.State), d.Outcome, keep); err != nil {
				return err
			}
		}
		delivered := ""
		if len(deliveries) > 0 {
			delivered = ", last_delivery_time = now()"
		}
		_, err := tx.Exec(ctx, `UPDATE repo_connections SET poll_etag = $2, poll_last_event = $3, poll_status = $4, last_poll_time = now(),
			next_poll_time = now() + $5::interval`+delivered+` WHERE id = $1`, c.Id, etag, last, validate.Truncate(status, 500), interval(next))
		return err
	})
}

// prefixed qualifies each column of a column list with prefix.
func prefixed(prefix, columns string) string {
	parts := strings.Split(columns, ",")
	for i, p := range parts {
		parts[i] = prefix + strings.TrimSpace(p)
	}
	return strings.Join(parts, ", ")
}
