package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/protoenum"
	"github.com/thefold/thefold/pkg/validate"
)

// ConnectionUpdate is what UpdateConnection changes: the fields whose Set* is true.
type ConnectionUpdate struct {
	SetLabels bool
	Labels    []string
	SetPoll   bool
	Poll      bool
	// Health, when set, replaces the monitor's settings (the service merges partial paths
	// into the current ones first).
	Health *agentv1.RepoHealthSettings
}

// UpdateConnection applies u to owner's connection id and returns it. Turning the monitor on
// makes its first periodic check due now; a shorter interval brings the next one forward.
func (s *Store) UpdateConnection(ctx context.Context, owner, id string, u ConnectionUpdate) (*agentv1.RepoConnection, error) {
	var c db.Conds
	var set []string
	if u.SetLabels {
		set = append(set, "issue_labels = "+c.Arg(nonNilStrings(u.Labels)))
	}
	if u.SetPoll {
		set = append(set, "poll = "+c.Arg(u.Poll))
	}
	if h := u.Health; h != nil {
		secs := int64(h.GetInterval().AsDuration() / time.Second)
		en, iv := c.Arg(h.GetEnabled()), c.Arg(secs)+"::integer"
		set = append(set, "health_enabled = "+en, "health_interval_secs = "+iv,
			"health_todo_threshold = "+c.Arg(h.GetTodoThreshold()), "health_auto_start = "+c.Arg(h.GetAutoStart()),
			fmt.Sprintf(`next_health_time = CASE WHEN NOT health_enabled AND %[1]s THEN now()
				ELSE least(next_health_time, now() + make_interval(secs => %[2]s)) END`, en, iv))
	}
	if len(set) == 0 {
		rec, err := s.GetConnection(ctx, owner, id)
		if err != nil {
			return nil, err
		}
		return rec.RepoConnection, nil
	}
	rec, err := scanConnection(s.pool.QueryRow(ctx, `UPDATE repo_connections SET `+strings.Join(set, ", ")+
		` WHERE id = `+c.Arg(id)+` AND owner_id = `+c.Arg(owner)+` RETURNING `+connectionColumns, c.Args...))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, errs.NotFound("repo connection", id)
	}
	if err != nil {
		return nil, err
	}
	return rec.RepoConnection, nil
}

// RepoHealthStateName is the stored name of st ("queued").
func RepoHealthStateName(st agentv1.RepoHealthState) string {
	return protoenum.Name(st, "REPO_HEALTH_STATE_")
}

const reportColumns = `r.id::text, r.connection_id::text, c.repo, r.state, r.manual, r.commit_sha, r.detail, r.error, r.create_time, r.start_time,
	r.finish_time, r.failed_checks, r.outdated_count, r.todo_count, r.stale_todo_count, r.finding_count, r.vulnerability_count, r.attempts`

// HealthRecord is a stored check with what the trend and a retry need.
type HealthRecord struct {
	*agentv1.RepoHealthReport
	Point    *agentv1.RepoHealthPoint
	Attempts int32
}

func scanReport(row pgx.Row) (*HealthRecord, error) {
	var (
		r                          = &agentv1.RepoHealthReport{}
		p                          = &agentv1.RepoHealthPoint{}
		rec                        = &HealthRecord{Point: p}
		id, conn, repo, state, sha string
		manual                     bool
		detail                     []byte
		errText                    string
		created                    time.Time
		started, finished          *time.Time
	)
	if err := row.Scan(&id, &conn, &repo, &state, &manual, &sha, &detail, &errText, &created, &started, &finished,
		&p.FailedChecks, &p.OutdatedCount, &p.TodoCount, &p.StaleTodoCount, &p.FindingCount, &p.VulnerabilityCount, &rec.Attempts); err != nil {
		return nil, err
	}
	if err := protojson.Unmarshal(detail, r); err != nil {
		return nil, fmt.Errorf("store: health report %s: %w", id, err)
	}
	r.Id, r.ConnectionId, r.Repo, r.Manual, r.Commit, r.Error = id, conn, repo, manual, sha, errText
	r.State = protoenum.Parse[agentv1.RepoHealthState](state, "REPO_HEALTH_STATE_", agentv1.RepoHealthState_value)
	r.CreateTime = timestamppb.New(created)
	if started != nil {
		r.StartTime = timestamppb.New(*started)
	}
	if finished != nil {
		r.FinishTime = timestamppb.New(*finished)
	}
	p.ReportId, p.State, p.FinishTime, p.Commit = id, r.State, r.FinishTime, sha
	rec.RepoHealthReport = r
	return rec, nil
}

func (s *Store) report(ctx context.Context, q pgx.Tx, cond string, args ...any) (*HealthRecord, error) {
	sql := `SELECT ` + reportColumns + ` FROM repo_health_reports r JOIN repo_connections c ON c.id = r.connection_id WHERE ` + cond
	if q != nil {
		return scanReport(q.QueryRow(ctx, sql, args...))
	}
	return scanReport(s.pool.QueryRow(ctx, sql, args...))
}

// QueueHealthCheck queues a check of connection now, unless one is queued or running: then
// that one is returned (created false). A retry with requestID returns the first.
func (s *Store) QueueHealthCheck(ctx context.Context, connection, requestID string) (*agentv1.RepoHealthReport, bool, error) {
	var (
		out     *HealthRecord
		created bool
	)
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if requestID != "" {
			rec, err := s.report(ctx, tx, `r.connection_id = $1 AND r.request_id = $2`, connection, requestID)
			if err == nil {
				out = rec
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		var id string
		err := tx.QueryRow(ctx, `INSERT INTO repo_health_reports (connection_id, request_id, state, manual) VALUES ($1, $2, 'queued', true)
			ON CONFLICT (connection_id) WHERE state IN ('queued', 'running') DO NOTHING RETURNING id::text`, connection, requestID).Scan(&id)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			out, err = s.report(ctx, tx, `r.connection_id = $1 AND r.state IN ('queued', 'running')`, connection)
			return err
		case db.IsUniqueViolation(err):
			return fmt.Errorf("a CheckRepoHealth with request_id %q is in progress; retry: %w", requestID, errs.ErrConflict)
		case err != nil:
			return err
		}
		created = true
		out, err = s.report(ctx, tx, `r.id = $1`, id)
		return err
	})
	if err != nil {
		return nil, false, err
	}
	return out.RepoHealthReport, created, nil
}

// QueueDueHealthChecks queues a periodic check of each connection whose monitor is on and
// whose next check is due (at most n), and moves their next check an interval on. A
// connection with a check queued or running gets no second one.
func (s *Store) QueueDueHealthChecks(ctx context.Context, n int) (int, error) {
	var queued int
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `UPDATE repo_connections c SET next_health_time = now() + make_interval(secs => c.health_interval_secs)
			FROM (SELECT id FROM repo_connections WHERE health_enabled AND next_health_time <= now() ORDER BY next_health_time LIMIT $1
				FOR UPDATE SKIP LOCKED) due
			WHERE c.id = due.id RETURNING c.id::text`, n)
		if err != nil {
			return err
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return err
		}
		for _, id := range ids {
			tag, err := tx.Exec(ctx, `INSERT INTO repo_health_reports (connection_id, state) VALUES ($1, 'queued')
				ON CONFLICT (connection_id) WHERE state IN ('queued', 'running') DO NOTHING`, id)
			if err != nil {
				return err
			}
			queued += int(tag.RowsAffected())
		}
		return nil
	})
	return queued, err
}

// DueHealthCheck is a check claimed to run, with its connection.
type DueHealthCheck struct {
	*HealthRecord
	Connection *ConnectionRecord
}

// ClaimHealthChecks claims up to n queued checks, oldest first, and running ones whose lease
// ran out (their replica stopped): they are RUNNING under a new lease and their attempts
// count one more.
func (s *Store) ClaimHealthChecks(ctx context.Context, n int, lease time.Duration) ([]*DueHealthCheck, error) {
	rows, err := s.pool.Query(ctx, `UPDATE repo_health_reports r SET state = 'running', start_time = coalesce(r.start_time, now()),
			lease_until = now() + $2::interval, attempts = r.attempts + 1
		FROM (SELECT id FROM repo_health_reports WHERE state = 'queued' OR (state = 'running' AND lease_until < now())
			ORDER BY create_time LIMIT $1 FOR UPDATE SKIP LOCKED) due
		WHERE r.id = due.id RETURNING r.id::text`, n, interval(lease))
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	out := make([]*DueHealthCheck, 0, len(ids))
	for _, id := range ids {
		rec, err := s.report(ctx, nil, `r.id = $1`, id)
		if err != nil {
			return nil, err
		}
		conn, err := scanConnection(s.pool.QueryRow(ctx, `SELECT `+connectionColumns+` FROM repo_connections WHERE id = $1`, rec.ConnectionId))
		if err != nil {
			return nil, fmt.Errorf("store: the connection of health check %s: %w", id, err)
		}
		out = append(out, &DueHealthCheck{HealthRecord: rec, Connection: conn})
	}
	return out, nil
}

// RequeueHealthCheck puts a claimed check back in the queue (its run failed in a way a
// later attempt may not).
func (s *Store) RequeueHealthCheck(ctx context.Context, id string) error {
	_, err := s.pool.Exec(ctx, `UPDATE repo_health_reports SET state = 'queued', lease_until = NULL WHERE id = $1 AND state = 'running'`, id)
	return err
}

// FinishHealthCheck stores a claimed check's outcome: r (DONE or FAILED) with its figures
// and the fingerprints of its markers.
func (s *Store) FinishHealthCheck(ctx context.Context, r *agentv1.RepoHealthReport, marks []string) error {
	failed, called := 0, 0
	for _, c := range r.Checks {
		if c.Status == agentv1.RepoHealthCheckStatus_REPO_HEALTH_CHECK_STATUS_FAILED {
			failed++
		}
	}
	for _, v := range r.Vulnerabilities {
		if v.Called {
			called++
		}
	}
	detail, err := protojson.Marshal(&agentv1.RepoHealthReport{Checks: r.Checks, Outdated: r.Outdated, TodoCount: r.TodoCount,
		StaleTodoCount: r.StaleTodoCount, Todos: r.Todos, Findings: r.Findings, Vulnerabilities: r.Vulnerabilities})
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `UPDATE repo_health_reports SET state = $2, commit_sha = $3, detail = $4, error = $5, failed_checks = $6,
			outdated_count = $7, todo_count = $8, stale_todo_count = $9, finding_count = $10, todo_marks = $11, vulnerability_count = $12,
			lease_until = NULL, finish_time = now()
		WHERE id = $1 AND state = 'running'`,
		r.Id, RepoHealthStateName(r.State), r.Commit, detail, validate.Truncate(r.Error, 2000), failed, len(r.Outdated), r.TodoCount,
		r.StaleTodoCount, len(r.Findings), nonNilStrings(marks), called)
	return err
}

// OldMarks are the marker fingerprints of connection's newest finished check that finished
// before t (nil when there is none): a marker still there is stale.
func (s *Store) OldMarks(ctx context.Context, connection string, t time.Time) ([]string, error) {
	var marks []string
	err := s.pool.QueryRow(ctx, `SELECT todo_marks FROM repo_health_reports WHERE connection_id = $1 AND state = 'done' AND finish_time <= $2
		ORDER BY finish_time DESC LIMIT 1`, connection, t).Scan(&marks)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return marks, err
}

// LatestHealthReport is connection's newest check; nil before the first.
func (s *Store) LatestHealthReport(ctx context.Context, connection string) (*agentv1.RepoHealthReport, error) {
	rec, err := s.report(ctx, nil, `r.connection_id = $1 ORDER BY r.create_time DESC, r.id DESC LIMIT 1`, connection)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return rec.RepoHealthReport, nil
}

// HealthTrend is connection's last n finished checks, newest first.
func (s *Store) HealthTrend(ctx context.Context, connection string, n int) ([]*agentv1.RepoHealthPoint, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+reportColumns+` FROM repo_health_reports r JOIN repo_connections c ON c.id = r.connection_id
		WHERE r.connection_id = $1 AND r.state IN ('done', 'failed') ORDER BY r.finish_time DESC, r.id DESC LIMIT $2`, connection, n)
	if err != nil {
		return nil, err
	}
	recs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*HealthRecord, error) { return scanReport(r) })
	if err != nil {
		return nil, err
	}
	out := make([]*agentv1.RepoHealthPoint, len(recs))
	for i, r := range recs {
		out[i] = r.Point
	}
	return out, nil
}

// Finding is a finding of a connection's checks as stored.
type Finding struct {
	*agentv1.RepoHealthFinding
	Occurrence int32
}

const findingColumns = `key, kind, occurrence, title, evidence, task_id, task_error, first_seen_time`

func scanFinding(row pgx.Row) (*Finding, error) {
	var (
		f     = &agentv1.RepoHealthFinding{}
		out   = &Finding{RepoHealthFinding: f}
		kind  string
		first time.Time
	)
	if err := row.Scan(&f.Key, &kind, &out.Occurrence, &f.Title, &f.Evidence, &f.TaskId, &f.TaskError, &first); err != nil {
		return nil, err
	}
	f.Kind = protoenum.Parse[agentv1.RepoHealthFindingKind](kind, "REPO_HEALTH_FINDING_KIND_", agentv1.RepoHealthFindingKind_value)
	f.FirstSeenTime = timestamppb.New(first)
	return out, nil
}

// SeeFindings records what a check of connection found. A finding not open before opens
// (a new occurrence when it was seen and closed earlier) and comes back with New set; one
// still open keeps its task and takes the new evidence. An open finding that the check did
// not see is closed when its key is in ran (a key there ending in ':' stands for every key
// it starts): the part it belongs to ran and no longer finds it. The findings are returned
// in the order given.
func (s *Store) SeeFindings(ctx context.Context, connection string, seen []*agentv1.RepoHealthFinding, ran []string) ([]*Finding, error) {
	out := make([]*Finding, 0, len(seen))
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		out = out[:0]
		// The connection may have been deleted while its check ran.
		var there bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM repo_connections WHERE id = $1 FOR SHARE)`, connection).Scan(&there); err != nil {
			return err
		}
		if !there {
			return errs.NotFound("repo connection", connection)
		}
		keys := make([]string, 0, len(seen))
		for _, f := range seen {
			keys = append(keys, f.Key)
			kind := protoenum.Name(f.Kind, "REPO_HEALTH_FINDING_KIND_")
			var wasOpen bool
			err := tx.QueryRow(ctx, `SELECT open FROM repo_health_findings WHERE connection_id = $1 AND key = $2 FOR UPDATE`, connection, f.Key).Scan(&wasOpen)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			existed := err == nil
			var q string
			switch {
			case !existed:
				q = `INSERT INTO repo_health_findings (connection_id, key, kind, title, evidence) VALUES ($1, $2, $3, $4, $5) RETURNING ` + findingColumns
			case wasOpen:
				q = `UPDATE repo_health_findings SET kind = $3, title = $4, evidence = $5, last_seen_time = now()
					WHERE connection_id = $1 AND key = $2 RETURNING ` + findingColumns
			default:
				q = `UPDATE repo_health_findings SET kind = $3, title = $4, evidence = $5, open = true, occurrence = occurrence + 1, task_id = '',
						task_error = '', first_seen_time = now(), last_seen_time = now()
					WHERE connection_id = $1 AND key = $2 RETURNING ` + findingColumns
			}
			got, err := scanFinding(tx.QueryRow(ctx, q, connection, f.Key, kind, validate.Truncate(f.Title, 500), validate.Truncate(f.Evidence, 8000)))
			if err != nil {
				return err
			}
			got.New = !wasOpen
			out = append(out, got)
		}
		_, err := tx.Exec(ctx, `UPDATE repo_health_findings SET open = false WHERE connection_id = $1 AND open AND NOT key = ANY ($3)
			AND EXISTS (SELECT 1 FROM unnest($2::text[]) p WHERE key = p OR (right(p, 1) = ':' AND starts_with(key, p)))`,
			connection, nonNilStrings(ran), keys)
		return err
	})
	return out, err
}

// SetFindingTask records the task filed for connection's finding key, or why none was.
func (s *Store) SetFindingTask(ctx context.Context, connection, key, taskID, taskErr string) error {
	_, err := s.pool.Exec(ctx, `UPDATE repo_health_findings SET task_id = $3, task_error = $4 WHERE connection_id = $1 AND key = $2`,
		connection, key, taskID, validate.Truncate(taskErr, 1000))
	return err
}

// OpenFindings are connection's open findings, oldest first.
func (s *Store) OpenFindings(ctx context.Context, connection string) ([]*agentv1.RepoHealthFinding, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+findingColumns+` FROM repo_health_findings WHERE connection_id = $1 AND open
		ORDER BY first_seen_time, key`, connection)
	if err != nil {
		return nil, err
	}
	fs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*Finding, error) { return scanFinding(r) })
	if err != nil {
		return nil, err
	}
	out := make([]*agentv1.RepoHealthFinding, len(fs))
	for i, f := range fs {
		out[i] = f.RepoHealthFinding
	}
	return out, nil
}
