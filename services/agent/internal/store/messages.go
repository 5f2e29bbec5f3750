package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
)

// A person's message to a crew project's worker (or to the project itself) is kept in
// project_messages. A worker's message names the worker's job: the job's later model calls
// are given all of the job's messages, and the job's history shows each as a
// MESSAGE_RECEIVED event.

// PostMessage stores m (project, worker, task, job, author and text set) for owner, with
// the events that announce it: MESSAGE_POSTED on the project and, for a worker's message,
// MESSAGE_RECEIVED on its job (j). A retry with the same requestID returns the first
// message (created false).
func (s *Store) PostMessage(ctx context.Context, owner, requestID string, m *agentv1.ProjectMessage, j *agentv1.Job, p *agentv1.Project) (*agentv1.ProjectMessage, bool, error) {
	var out *agentv1.ProjectMessage
	created := false
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if requestID != "" {
			prev, err := scanMessage(tx.QueryRow(ctx, `SELECT `+messageColumns+` FROM project_messages WHERE owner_id = $1 AND request_id = $2`, owner, requestID))
			if err == nil {
				out = prev
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		var jobID *string
		phase := ""
		if j != nil {
			jobID = &j.Id
			phase = PhaseName(j.Phase)
		}
		now := time.Now()
		var id string
		if err := tx.QueryRow(ctx, `INSERT INTO project_messages (project_id, owner_id, author_id, worker, project_task_id, job_id, job_phase, text, request_id, create_time)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id`,
			m.ProjectId, owner, m.AuthorId, m.Worker, m.ProjectTaskId, jobID, phase, m.Text, requestID, now).Scan(&id); err != nil {
			return err
		}
		m.Id, m.CreateTime = id, timestamppb.New(now)
		out, created = m, true
		batch := &pgx.Batch{}
		if j != nil {
			if err := queueEvents(batch, j, []*agentv1.WatchJobResponse{{Type: agentv1.JobEventType_JOB_EVENT_TYPE_MESSAGE_RECEIVED,
				Payload: &agentv1.WatchJobResponse_Message{Message: &agentv1.JobMessage{Id: id, AuthorId: m.AuthorId, Text: m.Text, Phase: j.Phase, CreateTime: m.CreateTime}}}}); err != nil {
				return err
			}
		}
		if err := queueProjectEvents(batch, p, []*agentv1.WatchProjectResponse{{Type: agentv1.ProjectEventType_PROJECT_EVENT_TYPE_MESSAGE_POSTED,
			Worker: m.Worker, ProjectTaskId: m.ProjectTaskId, Payload: &agentv1.WatchProjectResponse_Message{Message: m}}}); err != nil {
			return err
		}
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return nil, false, fmt.Errorf("store: post message: %w", err)
	}
	return out, created, nil
}

const messageColumns = `id::text, project_id::text, author_id, worker, project_task_id, COALESCE(job_id::text, ''), text, create_time`

func scanMessage(row pgx.Row) (*agentv1.ProjectMessage, error) {
	m := &agentv1.ProjectMessage{}
	var t time.Time
	if err := row.Scan(&m.Id, &m.ProjectId, &m.AuthorId, &m.Worker, &m.ProjectTaskId, &m.JobId, &m.Text, &t); err != nil {
		return nil, err
	}
	m.CreateTime = timestamppb.New(t)
	return m, nil
}

// MessageByRequest is owner's message posted with requestID, nil when there is none.
func (s *Store) MessageByRequest(ctx context.Context, owner, requestID string) (*agentv1.ProjectMessage, error) {
	m, err := scanMessage(s.pool.QueryRow(ctx, `SELECT `+messageColumns+` FROM project_messages WHERE owner_id = $1 AND request_id = $2`, owner, requestID))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	return m, err
}

// JobMessages is what people said to job id, oldest first.
func (s *Store) JobMessages(ctx context.Context, id string) ([]*agentv1.JobMessage, error) {
	rows, err := s.pool.Query(ctx, `SELECT id::text, author_id, job_phase, text, create_time FROM project_messages
		WHERE job_id = $1 ORDER BY create_time, id`, id)
	if err != nil {
		return nil, fmt.Errorf("store: job %s messages: %w", id, err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*agentv1.JobMessage, error) {
		m := &agentv1.JobMessage{}
		var phase string
		var t time.Time
		if err := row.Scan(&m.Id, &m.AuthorId, &phase, &m.Text, &t); err != nil {
			return nil, err
		}
		m.Phase, m.CreateTime = parsePhase(phase), timestamppb.New(t)
		return m, nil
	})
}

// ProjectMessages is what people said to project id itself (not to a worker), oldest
// first.
func (s *Store) ProjectMessages(ctx context.Context, id string) ([]*agentv1.ProjectMessage, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+messageColumns+` FROM project_messages WHERE project_id = $1 AND worker = 0 ORDER BY create_time, id`, id)
	if err != nil {
		return nil, fmt.Errorf("store: project %s messages: %w", id, err)
	}
	return pgx.CollectRows(rows, func(row pgx.CollectableRow) (*agentv1.ProjectMessage, error) { return scanMessage(row) })
}

// AppendProjectEvents writes evs of project p on their own (events that change nothing of
// the project's record: a worker interrupted or resumed).
func (s *Store) AppendProjectEvents(ctx context.Context, p *agentv1.Project, evs ...*agentv1.WatchProjectResponse) error {
	return appendProjectEvents(ctx, s.pool, p, evs)
}

// LastEvent is the type and time of a job's last event.
type LastEvent struct {
	Type agentv1.JobEventType
	Time *timestamppb.Timestamp
}

// LastJobEvents is the last event of each of jobs, by job id.
func (s *Store) LastJobEvents(ctx context.Context, jobs []string) (map[string]LastEvent, error) {
	out := map[string]LastEvent{}
	if len(jobs) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT DISTINCT ON (aggregate_id) aggregate_id, type, create_time FROM events
		WHERE stream = $1 AND aggregate_id = ANY($2) ORDER BY aggregate_id, id DESC`, EventStream, jobs)
	if err != nil {
		return nil, fmt.Errorf("store: last job events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, typ string
		var t time.Time
		if err := rows.Scan(&id, &typ, &t); err != nil {
			return nil, err
		}
		out[id] = LastEvent{Type: agentv1.JobEventType(agentv1.JobEventType_value["JOB_EVENT_TYPE_"+typ]), Time: timestamppb.New(t)}
	}
	return out, rows.Err()
}

// JobStatuses is the status and phase of each of jobs, by id (one round trip: a crew's
// look at its workers).
func (s *Store) JobStatuses(ctx context.Context, jobs []string) (map[string]JobState, error) {
	out := make(map[string]JobState, len(jobs))
	if len(jobs) == 0 {
		return out, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT id::text, status, phase FROM jobs WHERE id = ANY($1::uuid[])`, jobs)
	if err != nil {
		return nil, fmt.Errorf("store: job statuses: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id, st, ph string
		if err := rows.Scan(&id, &st, &ph); err != nil {
			return nil, err
		}
		out[id] = JobState{Status: parseStatus(st), Phase: parsePhase(ph)}
	}
	return out, rows.Err()
}

// JobState is a job's status and phase.
type JobState struct {
	Status agentv1.JobStatus
	Phase  agentv1.JobPhase
}
