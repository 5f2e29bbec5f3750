package store

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/validate"
)

// Audit is one audit log entry to write with a step.
type Audit struct {
	// Key identifies the side effect (job + step + attempt): the entry of a resumed step
	// is the same row, written once.
	Key string
	// Actor is "agent" or "user:<id>".
	Actor    string
	Action   string
	Details  map[string]any
	Err      error
	Duration time.Duration
}

// row is a's details as stored (JSON) and its error's message ("" for a success).
func (a Audit) row() (details []byte, msg string, err error) {
	st, err := structpb.NewStruct(a.Details)
	if err != nil {
		return nil, "", fmt.Errorf("store: audit %s: details: %w", a.Action, err)
	}
	if details, err = jsonOut.Marshal(st); err != nil {
		return nil, "", err
	}
	if a.Err != nil {
		msg = a.Err.Error()
	}
	return details, msg, nil
}

// Metric is what one step adds to its phase's totals.
type Metric struct {
	Phase    agentv1.JobPhase
	Usage    *typev1.Usage
	Duration time.Duration
}

// writeAudit writes st's audit entries and metrics for job j.
func (s *Store) writeAudit(ctx context.Context, tx pgx.Tx, j *agentv1.Job, st Step) error {
	batch := &pgx.Batch{}
	for _, a := range st.Audit {
		doc, msg, err := a.row()
		if err != nil {
			return err
		}
		batch.Queue(`INSERT INTO audit_log (job_id, task_id, owner_id, actor, action, key, details, success, error, duration_ms)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (key) DO NOTHING`,
			j.Id, j.TaskId, j.OwnerId, a.Actor, a.Action, a.Key, doc, a.Err == nil, msg, a.Duration.Milliseconds())
	}
	for _, m := range st.Metrics {
		if m.Phase == agentv1.JobPhase_JOB_PHASE_UNSPECIFIED {
			continue
		}
		u := m.Usage
		if u == nil {
			u = &typev1.Usage{}
		}
		batch.Queue(`INSERT INTO phase_metrics AS p (job_id, phase, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens,
				cost_micros, calls, duration_ms, model_tokens)
			VALUES ($1, $2, $3::bigint, $4::bigint, $5::bigint, $6::bigint, $7::bigint, $8::integer, $9::bigint,
				CASE WHEN $10::text = '' THEN '{}'::jsonb ELSE jsonb_build_object($10::text, $3::bigint + $4::bigint) END)
			ON CONFLICT (job_id, phase) DO UPDATE SET input_tokens = p.input_tokens + $3::bigint, output_tokens = p.output_tokens + $4::bigint,
				cache_read_tokens = p.cache_read_tokens + $5::bigint, cache_write_tokens = p.cache_write_tokens + $6::bigint,
				cost_micros = p.cost_micros + $7::bigint, calls = p.calls + $8::integer, duration_ms = p.duration_ms + $9::bigint,
				model_tokens = CASE WHEN $10::text = '' THEN p.model_tokens
					ELSE p.model_tokens || jsonb_build_object($10::text, coalesce((p.model_tokens->>$10::text)::bigint, 0) + $3::bigint + $4::bigint) END`,
			j.Id, PhaseName(m.Phase), u.InputTokens, u.OutputTokens, u.CacheReadTokens, u.CacheWriteTokens, u.CostMicros, u.Calls,
			m.Duration.Milliseconds(), u.Model)
	}
	if batch.Len() == 0 {
		return nil
	}
	return tx.SendBatch(ctx, batch).Close()
}

// Metrics returns the phase totals of owner's job id in loop order (NotFound for another
// owner's job).
func (s *Store) Metrics(ctx context.Context, owner, id string) ([]*agentv1.PhaseMetrics, error) {
	var exists bool
	if err := s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM jobs WHERE id = $1 AND owner_id = $2)`, id, owner).Scan(&exists); err != nil {
		return nil, err
	}
	if !exists {
		return nil, fmt.Errorf("job %s: %w", id, errs.ErrNotFound)
	}
	rows, err := s.pool.Query(ctx, `SELECT phase, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_micros, calls,
		duration_ms, model_tokens FROM phase_metrics WHERE job_id = $1 ORDER BY first_seen`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*agentv1.PhaseMetrics
	for rows.Next() {
		var (
			phase  string
			u      = &typev1.Usage{}
			ms     int64
			models map[string]int64
		)
		if err := rows.Scan(&phase, &u.InputTokens, &u.OutputTokens, &u.CacheReadTokens, &u.CacheWriteTokens, &u.CostMicros, &u.Calls, &ms, &models); err != nil {
			return nil, err
		}
		pm := &agentv1.PhaseMetrics{Phase: parsePhase(phase), Usage: u, Duration: durationpb.New(time.Duration(ms) * time.Millisecond)}
		for m := range models {
			pm.Models = append(pm.Models, m)
		}
		slices.Sort(pm.Models)
		var most int64 = -1
		for _, m := range pm.Models {
			if models[m] > most {
				u.Model, most = m, models[m]
			}
		}
		out = append(out, pm)
	}
	return out, rows.Err()
}

// AuditFilter narrows ListAudit; empty fields match anything.
type AuditFilter struct {
	JobID, TaskID, Action, ConversationID string
	FailuresOnly                          bool
	Start, End                            time.Time
}

const auditTokenVersion = "a1"

// ListAudit returns a page of the audit entries of owner's jobs, newest first, and the
// next page's token.
func (s *Store) ListAudit(ctx context.Context, owner string, f AuditFilter, pageSize int, pageToken string) ([]*agentv1.AuditLogEntry, string, error) {
	var c db.Conds
	c.Add("owner_id = $%d", owner)
	if f.JobID != "" {
		c.Add("job_id = $%d::uuid", f.JobID)
	}
	if f.TaskID != "" {
		c.Add("task_id = $%d", f.TaskID)
	}
	if f.Action != "" {
		c.Add("action = $%d", f.Action)
	}
	if f.FailuresOnly {
		c.Add("NOT success")
	}
	if !f.Start.IsZero() {
		c.Add("create_time >= $%d", f.Start)
	}
	if !f.End.IsZero() {
		c.Add("create_time < $%d", f.End)
	}
	if pageToken != "" {
		parts, err := validate.DecodePageToken(pageToken, auditTokenVersion, 1, "ListAuditLog")
		if err != nil {
			return nil, "", err
		}
		before, err := strconv.ParseInt(parts[0], 10, 64)
		if err != nil {
			return nil, "", validate.BadPageToken("ListAuditLog")
		}
		c.Add("id < $%d", before)
	}
	if f.ConversationID != "" {
		c.Add("conversation_id = $%d::uuid", f.ConversationID)
	}
	rows, err := s.pool.Query(ctx, `SELECT id, coalesce(job_id::text, ''), task_id, owner_id, actor, action, details, success, error, duration_ms,
			create_time, coalesce(conversation_id::text, '')
		FROM audit_log`+c.Where()+` ORDER BY id DESC LIMIT `+c.Arg(pageSize+1), c.Args...)
	if err != nil {
		return nil, "", err
	}
	defer rows.Close()
	var out []*agentv1.AuditLogEntry
	for rows.Next() {
		var (
			e       = &agentv1.AuditLogEntry{Details: &structpb.Struct{}}
			id, ms  int64
			details []byte
			at      time.Time
		)
		if err := rows.Scan(&id, &e.JobId, &e.TaskId, &e.OwnerId, &e.Actor, &e.Action, &details, &e.Success, &e.Error, &ms, &at,
			&e.ConversationId); err != nil {
			return nil, "", err
		}
		if err := jsonIn.Unmarshal(details, e.Details); err != nil {
			return nil, "", fmt.Errorf("store: audit %d: details: %w", id, err)
		}
		e.Id, e.Duration, e.CreateTime = strconv.FormatInt(id, 10), durationpb.New(time.Duration(ms)*time.Millisecond), timestamppb.New(at)
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, "", err
	}
	next := ""
	if len(out) > pageSize {
		out = out[:pageSize]
		next = validate.EncodePageToken(auditTokenVersion, out[len(out)-1].Id)
	}
	return out, next, nil
}

// AuditTool records a conversation's tool call a (Key: the reply and the call, so a resumed
// reply's call is one entry), done for owner by actor.
func (s *Store) AuditTool(ctx context.Context, conv, owner string, a Audit) error {
	doc, msg, err := a.row()
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO audit_log (conversation_id, task_id, owner_id, actor, action, key, details, success, error, duration_ms)
		VALUES ($1, '', $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (key) DO NOTHING`,
		conv, owner, a.Actor, a.Action, a.Key, doc, a.Err == nil, msg, a.Duration.Milliseconds())
	return err
}
