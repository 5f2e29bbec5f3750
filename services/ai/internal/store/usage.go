package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// RecordUsage appends r to the usage ledger and returns its id. r.CreateTime, when set, is
// the entry's time (imports and tests); otherwise the database's now. r.Id is ignored.
func (s *Store) RecordUsage(ctx context.Context, r *aiv1.UsageRecord) (string, error) {
	return s.recordUsage(ctx, r, false)
}

// RecordUsageBeforeAnswer is RecordUsage for a call under a request_id, without waiting for
// the entry's WAL flush: the write that always follows it, the answer's (Finish) or the
// claim's release (Release), waits for its own flush, which makes this entry durable too.
func (s *Store) RecordUsageBeforeAnswer(ctx context.Context, r *aiv1.UsageRecord) (string, error) {
	return s.recordUsage(ctx, r, true)
}

func (s *Store) recordUsage(ctx context.Context, r *aiv1.UsageRecord, lazy bool) (string, error) {
	var at *time.Time
	if r.GetCreateTime() != nil {
		t := r.GetCreateTime().AsTime()
		at = &t
	}
	u := r.GetUsage()
	var id string
	q := `INSERT INTO usage_records (create_time, user_id, caller, rpc, phase, job_id, task_id,
			build_id, project_id, repo, request_id, model_id, model, provider, input_tokens, output_tokens,
			cache_read_tokens, cache_write_tokens, cost_micros, latency_us, calls, outcome, error, role, conversation_id)
		VALUES (coalesce($1, now()), $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12::uuid, $13, $14, $15, $16, $17,
			$18, $19, $20, $21, $22, $23, $24, $25)
		RETURNING id::text`
	args := []any{at, r.UserId, r.Caller, r.Rpc, int16(r.Phase), r.JobId, r.TaskId, r.BuildId, r.ProjectId, r.Repo,
		r.RequestId, nullable(r.ModelId), u.GetModel(), u.GetProvider(), u.GetInputTokens(), u.GetOutputTokens(),
		u.GetCacheReadTokens(), u.GetCacheWriteTokens(), u.GetCostMicros(), u.GetLatency().AsDuration().Microseconds(),
		u.GetCalls(), int16(r.Outcome), r.Error, int16(r.Role), r.ConversationId}
	var err error
	if lazy {
		err = db.LazyQueryRow(ctx, s.pool, func(row pgx.Row) error { return row.Scan(&id) }, q, args...)
	} else {
		err = s.pool.QueryRow(ctx, q, args...).Scan(&id)
	}
	if err != nil {
		return "", fmt.Errorf("store: record usage: %w", err)
	}
	return id, nil
}

// UsageFilter selects ledger entries; zero fields match anything.
type UsageFilter struct {
	// Start is inclusive, End exclusive; a zero time leaves that side open.
	Start, End time.Time
	UserID     string
	ModelID    string
	Repo       string
	JobID      string
	TaskID     string
	BuildID    string
	ProjectID  string
	RPC        string
	Phase      aiv1.CallPhase
	// ConversationID selects a conversation's chat replies.
	ConversationID string
}

func (f UsageFilter) where() *db.Conds {
	w := &db.Conds{}
	if !f.Start.IsZero() {
		w.Add("u.create_time >= $%d", f.Start)
	}
	if !f.End.IsZero() {
		w.Add("u.create_time < $%d", f.End)
	}
	for _, c := range []struct{ col, v string }{
		{"u.user_id", f.UserID}, {"u.repo", f.Repo}, {"u.job_id", f.JobID}, {"u.task_id", f.TaskID},
		{"u.build_id", f.BuildID}, {"u.project_id", f.ProjectID}, {"u.rpc", f.RPC}, {"u.conversation_id", f.ConversationID},
	} {
		if c.v != "" {
			w.Add(c.col+" = $%d", c.v) // c.col is one of the literals above
		}
	}
	if f.ModelID != "" {
		w.Add("u.model_id = $%d::uuid", f.ModelID)
	}
	if f.Phase != aiv1.CallPhase_CALL_PHASE_UNSPECIFIED {
		w.Add("u.phase = $%d", int16(f.Phase))
	}
	return w
}

// groupColumns are the SQL expressions of each grouping dimension, the only ones a GetUsage
// query groups by: the dimensions are whitelisted here, never taken from a request's text.
var groupColumns = map[aiv1.UsageGroupBy][]string{
	aiv1.UsageGroupBy_USAGE_GROUP_BY_MODEL: {"u.provider", "u.model"},
	// The UTC day, whatever the session's time zone.
	aiv1.UsageGroupBy_USAGE_GROUP_BY_DAY:          {"to_char(u.create_time AT TIME ZONE 'UTC', 'YYYY-MM-DD')"},
	aiv1.UsageGroupBy_USAGE_GROUP_BY_PHASE:        {"u.phase"},
	aiv1.UsageGroupBy_USAGE_GROUP_BY_JOB:          {"u.job_id"},
	aiv1.UsageGroupBy_USAGE_GROUP_BY_TASK:         {"u.task_id"},
	aiv1.UsageGroupBy_USAGE_GROUP_BY_BUILD:        {"u.build_id"},
	aiv1.UsageGroupBy_USAGE_GROUP_BY_PROJECT:      {"u.project_id"},
	aiv1.UsageGroupBy_USAGE_GROUP_BY_RPC:          {"u.rpc"},
	aiv1.UsageGroupBy_USAGE_GROUP_BY_ROLE:         {"u.role"},
	aiv1.UsageGroupBy_USAGE_GROUP_BY_CONVERSATION: {"u.conversation_id"},
}

// numericColumns are the group columns holding enum numbers: ordered by number, not text.
var numericColumns = map[string]bool{"u.phase": true, "u.role": true}

// setGroupValue puts the scanned value of dimension g's column i into row.
func setGroupValue(row *aiv1.UsageRow, g aiv1.UsageGroupBy, i int, v any) {
	s, _ := v.(string)
	switch g {
	case aiv1.UsageGroupBy_USAGE_GROUP_BY_MODEL:
		if i == 0 {
			row.Provider = s
		} else {
			row.Model = s
		}
	case aiv1.UsageGroupBy_USAGE_GROUP_BY_DAY:
		row.Day = s
	case aiv1.UsageGroupBy_USAGE_GROUP_BY_PHASE:
		n, _ := v.(int16)
		row.Phase = aiv1.CallPhase(n)
	case aiv1.UsageGroupBy_USAGE_GROUP_BY_JOB:
		row.JobId = s
	case aiv1.UsageGroupBy_USAGE_GROUP_BY_TASK:
		row.TaskId = s
	case aiv1.UsageGroupBy_USAGE_GROUP_BY_BUILD:
		row.BuildId = s
	case aiv1.UsageGroupBy_USAGE_GROUP_BY_PROJECT:
		row.ProjectId = s
	case aiv1.UsageGroupBy_USAGE_GROUP_BY_RPC:
		row.Rpc = s
	case aiv1.UsageGroupBy_USAGE_GROUP_BY_ROLE:
		n, _ := v.(int16)
		row.Role = aiv1.SubAgentRole(n)
	case aiv1.UsageGroupBy_USAGE_GROUP_BY_CONVERSATION:
		row.ConversationId = s
	}
}

// GetUsage sums the entries f selects, grouped by groupBy (in that order, which is also the
// rows' order), and returns the rows and their total. Without groupBy there is one row, the
// total. A dimension given twice counts once.
func (s *Store) GetUsage(ctx context.Context, f UsageFilter, groupBy []aiv1.UsageGroupBy) ([]*aiv1.UsageRow, *aiv1.UsageRow, error) {
	var (
		dims []aiv1.UsageGroupBy
		cols []string
	)
	for _, g := range groupBy {
		gc, ok := groupColumns[g]
		if !ok {
			return nil, nil, fmt.Errorf("store: usage: cannot group by %v", g)
		}
		if slices.Contains(dims, g) {
			continue
		}
		dims = append(dims, g)
		cols = append(cols, gc...)
	}
	w := f.where()
	// calls counts provider calls; failed_calls the entries that ended without an answer.
	sums := `coalesce(sum(u.calls), 0)::bigint, coalesce(sum(u.input_tokens), 0)::bigint,
		coalesce(sum(u.output_tokens), 0)::bigint, coalesce(sum(u.cache_read_tokens), 0)::bigint,
		coalesce(sum(u.cache_write_tokens), 0)::bigint, coalesce(sum(u.cost_micros), 0)::bigint,
		count(*) FILTER (WHERE u.outcome <> ` + w.Arg(int16(aiv1.CallOutcome_CALL_OUTCOME_OK)) + `)`
	query := "SELECT " + sums
	if len(cols) > 0 {
		query += ", " + strings.Join(cols, ", ")
	}
	query += " FROM usage_records u" + w.Where()
	if len(cols) > 0 {
		// Text columns order bytewise, so the order does not depend on the server's locale.
		order := make([]string, len(cols))
		for i, c := range cols {
			order[i] = c
			if !numericColumns[c] {
				order[i] += ` COLLATE "C"`
			}
		}
		query += " GROUP BY " + strings.Join(cols, ", ") + " ORDER BY " + strings.Join(order, ", ")
	}
	rows, err := s.pool.Query(ctx, query, w.Args...)
	if err != nil {
		return nil, nil, fmt.Errorf("store: usage: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*aiv1.UsageRow, error) {
		row := &aiv1.UsageRow{}
		groups := make([]any, len(cols))
		dest := []any{&row.Calls, &row.InputTokens, &row.OutputTokens, &row.CacheReadTokens,
			&row.CacheWriteTokens, &row.CostMicros, &row.FailedCalls}
		for i := range groups {
			dest = append(dest, &groups[i])
		}
		if err := r.Scan(dest...); err != nil {
			return nil, err
		}
		i := 0
		for _, g := range dims {
			for j := range groupColumns[g] {
				setGroupValue(row, g, j, groups[i])
				i++
			}
		}
		return row, nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("store: usage: %w", err)
	}
	total := &aiv1.UsageRow{}
	for _, r := range out {
		total.Calls += r.Calls
		total.InputTokens += r.InputTokens
		total.OutputTokens += r.OutputTokens
		total.CacheReadTokens += r.CacheReadTokens
		total.CacheWriteTokens += r.CacheWriteTokens
		total.CostMicros += r.CostMicros
		total.FailedCalls += r.FailedCalls
	}
	return out, total, nil
}

// UsageCursor is a position in ListUsageRecords' newest-first order: the last entry of a
// page.
type UsageCursor struct {
	CreateTime time.Time
	ID         string
}

const usageColumns = `u.id::text, u.create_time, u.user_id, u.caller, u.rpc, u.phase, u.job_id, u.task_id,
	u.build_id, u.project_id, u.repo, u.request_id, coalesce(u.model_id::text, ''), u.model, u.provider,
	u.input_tokens, u.output_tokens, u.cache_read_tokens, u.cache_write_tokens, u.cost_micros, u.latency_us,
	u.calls, u.outcome, u.error, u.role, u.conversation_id`

func scanUsage(row pgx.Row) (*aiv1.UsageRecord, error) {
	var (
		r              aiv1.UsageRecord
		u              typev1.Usage
		createTime     time.Time
		phase, outcome int16
		role           int16
		latencyUS      int64
	)
	err := row.Scan(&r.Id, &createTime, &r.UserId, &r.Caller, &r.Rpc, &phase, &r.JobId, &r.TaskId,
		&r.BuildId, &r.ProjectId, &r.Repo, &r.RequestId, &r.ModelId, &u.Model, &u.Provider,
		&u.InputTokens, &u.OutputTokens, &u.CacheReadTokens, &u.CacheWriteTokens, &u.CostMicros, &latencyUS,
		&u.Calls, &outcome, &r.Error, &role, &r.ConversationId)
	if err != nil {
		return nil, err
	}
	r.CreateTime = timestamppb.New(createTime)
	r.Phase = aiv1.CallPhase(phase)
	r.Outcome = aiv1.CallOutcome(outcome)
	r.Role = aiv1.SubAgentRole(role)
	u.Latency = durationpb.New(time.Duration(latencyUS) * time.Microsecond)
	r.Usage = &u
	return &r, nil
}

// ListUsageRecords returns a page of the entries f selects, newest first, and the cursor of
// the next page (nil on the last). Keyset pagination on (create_time, id): entries recorded
// meanwhile never shift a later page.
func (s *Store) ListUsageRecords(ctx context.Context, f UsageFilter, pageSize int, after *UsageCursor) ([]*aiv1.UsageRecord, *UsageCursor, error) {
	if pageSize <= 0 {
		return nil, nil, errors.New("store: list usage: page size must be positive")
	}
	w := f.where()
	if after != nil {
		w.Add("(u.create_time, u.id) < ($%d, $%d::uuid)", after.CreateTime, after.ID)
	}
	query := "SELECT " + usageColumns + " FROM usage_records u" + w.Where() +
		" ORDER BY u.create_time DESC, u.id DESC LIMIT " + w.Arg(pageSize+1)
	rows, err := s.pool.Query(ctx, query, w.Args...)
	if err != nil {
		return nil, nil, fmt.Errorf("store: list usage: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (*aiv1.UsageRecord, error) { return scanUsage(r) })
	if err != nil {
		return nil, nil, fmt.Errorf("store: list usage: %w", err)
	}
	if len(out) <= pageSize {
		return out, nil, nil
	}
	out = out[:pageSize]
	last := out[len(out)-1]
	return out, &UsageCursor{CreateTime: last.CreateTime.AsTime(), ID: last.Id}, nil
}

// SpentSince sums the cost of userID's ledger entries recorded at or after since: the
// spend limit's check before every model call, one range scan of usage_records_user_idx.
func (s *Store) SpentSince(ctx context.Context, userID string, since time.Time) (int64, error) {
	var spent int64
	err := s.pool.QueryRow(ctx, `SELECT coalesce(sum(cost_micros), 0)::bigint FROM usage_records
		WHERE user_id = $1 AND create_time >= $2`, userID, since).Scan(&spent)
	if err != nil {
		return 0, fmt.Errorf("store: spent since: %w", err)
	}
	return spent, nil
}
