package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
)

// Claim takes build id for the worker holding lease when the build is pending or running
// and no live worker holds it (no lease, or one not renewed within expiry). It returns the
// build and its steps, or ok false when the build is finished or held by another worker.
func (s *Store) Claim(ctx context.Context, id, lease string, expiry time.Duration) (*Build, []*Step, bool, error) {
	if ok, err := s.Leases.Claim(ctx, s.pool, id, lease, expiry); err != nil || !ok {
		return nil, nil, false, err
	}
	// Who holds it now; fenced by the lease like every write of the run.
	if _, err := s.pool.Exec(ctx, `UPDATE builds SET instance = $2, claims = claims + 1 WHERE id = $1 AND lease_id = $3`, id, s.Instance, lease); err != nil {
		return nil, nil, false, err
	}
	b, err := scanBuild(s.pool.QueryRow(ctx, `SELECT `+buildColumns+` FROM builds WHERE id = $1`, id))
	if err != nil {
		return nil, nil, false, err
	}
	steps, err := s.Steps(ctx, id)
	if err != nil {
		return nil, nil, false, err
	}
	return b, steps, true, nil
}

// Change is one state change of a running build: the build row as it is now, steps
// inserted or rewritten whole, and the events that describe the change.
type Change struct {
	Build  *Build
	Steps  []*Step
	Events []*builderv1.WatchBuildResponse
	// Progress marks a change whose loss in a crash of the database costs nothing but a
	// redo (a step's start: a resumed build runs the step again from pending, its model
	// answers recorded by request id): it commits without waiting for its WAL flush, which
	// the step's end, flushed, then covers.
	Progress bool
}

// Apply writes c in one round trip if the build is still held by lease and running
// (pending for its first change); else ErrLeaseLost and nothing is written. The batch's
// statements run in one implicit transaction (no BEGIN and COMMIT of their own: two round
// trips fewer, on every step of every file), which build_fence, its first statement, aborts
// on the server when the lease does not hold the build.
func (s *Store) Apply(ctx context.Context, lease string, c Change) error {
	if lease == "" {
		return errors.New("store: apply: a lease is required")
	}
	b := &pgx.Batch{}
	if err := queueChange(b, c, lease, &c.Build.UpdateTime); err != nil {
		return err
	}
	if err := s.send(ctx, b); err != nil {
		return err
	}
	c.Build.GraphChanged = false
	return nil
}

// send runs the batch of a change.
func (s *Store) send(ctx context.Context, b *pgx.Batch) error {
	if err := s.pool.SendBatch(ctx, b).Close(); err != nil {
		var pg *pgconn.PgError
		if errors.As(err, &pg) && pg.Code == fenceCode {
			return ErrLeaseLost
		}
		return err
	}
	return nil
}

// Pending is a change ApplyLater is writing.
type Pending struct {
	done    chan struct{}
	err     error
	b       *Build
	graph   bool // the change carried the graph (GraphChanged): to carry again if it fails
	updated *timestamppb.Timestamp
}

// ApplyLater is Apply with the round trip in the background: c becomes its statements
// before ApplyLater returns, so the caller may change c's build and steps at once, and
// Wait says how the write went. It is for a change nothing waits on (a step's start, which
// the step's first call to another service can overlap): the caller Waits before its next
// change, so changes are written in order, and before it ends.
func (s *Store) ApplyLater(ctx context.Context, lease string, c Change) (*Pending, error) {
	if lease == "" {
		return nil, errors.New("store: apply: a lease is required")
	}
	p := &Pending{done: make(chan struct{}), b: c.Build, graph: c.Build.GraphChanged}
	b := &pgx.Batch{}
	if err := queueChange(b, c, lease, &p.updated); err != nil {
		return nil, err
	}
	c.Build.GraphChanged = false
	go func() {
		defer close(p.done)
		p.err = s.send(ctx, b)
	}()
	return p, nil
}

// Wait waits for the write and returns its error. It may be called more than once; only
// from the goroutine that owns the change's build.
func (p *Pending) Wait() error {
	<-p.done
	if p.err != nil {
		p.b.GraphChanged = p.b.GraphChanged || p.graph
		return p.err
	}
	if p.updated != nil {
		p.b.UpdateTime, p.updated = p.updated, nil
	}
	return nil
}

// fenceCode is the SQLSTATE build_fence raises.
const fenceCode = "TF001"

// queueChange queues c's statements on b: the fence when lease is set, the build (also
// fenced by lease), the steps, the events.
func queueChange(b *pgx.Batch, c Change, lease string, updated **timestamppb.Timestamp) error {
	if c.Progress {
		b.Queue(`SELECT set_config('synchronous_commit', 'off', true)`)
	}
	if lease != "" {
		b.Queue(`SELECT build_fence($1, $2)`, c.Build.Id, lease)
	}
	if err := queueBuild(b, c.Build, lease, updated); err != nil {
		return err
	}
	for _, st := range c.Steps {
		if err := queueStep(b, st); err != nil {
			return err
		}
	}
	return queueEvents(b, c.Build, c.Events)
}

// writeChange writes c (unfenced) in tx.
func writeChange(ctx context.Context, tx pgx.Tx, c Change) error {
	b := &pgx.Batch{}
	if err := queueChange(b, c, "", &c.Build.UpdateTime); err != nil {
		return err
	}
	return tx.SendBatch(ctx, b).Close()
}

func ts(t *timestamppb.Timestamp) pgtype.Timestamptz {
	if t == nil {
		return pgtype.Timestamptz{}
	}
	return pgtype.Timestamptz{Time: t.AsTime(), Valid: true}
}

// queueBuild queues the rewrite of b's mutable columns (the graph only when it changed).
// With a lease, only while the build is held by it and not finished, else the batch fails
// with ErrLeaseLost; the lease is dropped when b is finished. The time of the write is
// stored in *updated. The statement holds nothing of b that b's owner may change after
// the call: the batch may be sent from another goroutine (ApplyLater).
func queueBuild(batch *pgx.Batch, b *Build, lease string, updated **timestamppb.Timestamp) error {
	var graph []byte
	if b.GraphChanged {
		var err error
		if graph, err = marshal(b.Graph); err != nil {
			return err
		}
	}
	files, err := b.marshalFiles()
	if err != nil {
		return err
	}
	usage, err := marshal(b.Usage)
	if err != nil {
		return err
	}
	if usage == nil {
		usage = []byte("{}")
	}
	report, err := marshal(b.Report)
	if err != nil {
		return err
	}
	skills, err := marshalList(b.Skills)
	if err != nil {
		return err
	}
	u := b.Usage
	fence := ""
	args := []any{b.Id, StatusName(b.Status), strategyName(b.Strategy), phaseName(b.Phase), b.CurrentStep, b.TotalSteps,
		b.FilesWritten, b.FilesValidated, b.Iterations, b.NewProject, graph, files, usage,
		u.GetInputTokens() + u.GetOutputTokens(), u.GetCostMicros(), report, b.Error, ts(b.StartTime), ts(b.EndTime), b.Generation,
		b.GraphChanged, skills}
	if lease != "" {
		fence = ` AND lease_id = $23 AND status IN ('pending', 'running')`
		args = append(args, lease)
	}
	batch.Queue(`UPDATE builds SET status = $2, strategy = $3, phase = $4, current_step = $5, total_steps = $6,
		files_written = $7, files_validated = $8, iterations = $9, new_project = $10,
		graph = CASE WHEN $21::bool THEN $11::jsonb ELSE graph END, files = $12, usage = $13,
		tokens = $14, cost_micros = $15, report = $16, error = $17, start_time = $18, end_time = $19, generation = $20,
		skills = $22, update_time = now(),
		lease_id = CASE WHEN $2 IN ('pending', 'running') THEN lease_id END,
		lease_time = CASE WHEN $2 IN ('pending', 'running') THEN lease_time END
		WHERE id = $1`+fence, args...).Exec(func(tag pgconn.CommandTag) error {
		if tag.RowsAffected() == 0 {
			if lease != "" {
				return ErrLeaseLost
			}
			return fmt.Errorf("build %s: %w", b.Id, errs.ErrNotFound)
		}
		*updated = timestamppb.Now()
		return nil
	})
	return nil
}

func queueStep(b *pgx.Batch, st *Step) error {
	usage, err := marshal(st.Usage)
	if err != nil {
		return err
	}
	if usage == nil {
		usage = []byte("{}")
	}
	validation, err := marshal(st.Validation)
	if err != nil {
		return err
	}
	rounds, err := marshalList(st.FixRounds)
	if err != nil {
		return err
	}
	var dur int64
	if st.StartTime != nil && st.EndTime != nil {
		dur = st.EndTime.AsTime().Sub(st.StartTime.AsTime()).Milliseconds()
	}
	// Copies: the batch may be sent from another goroutine while the step's owner changes
	// them (ApplyLater). Never nil: the columns are NOT NULL arrays.
	cmd, ctxFiles := append([]string{}, st.Command...), append([]string{}, st.ContextFiles...)
	b.Queue(`INSERT INTO build_steps (build_id, step_number, phase, kind, plan_step_id, action, path, command,
		workdir, description, model, context_files, usage, tokens, cost_micros, status, content, output, error, validation,
		fix_rounds, guidance, generated, start_time, end_time, duration_ms)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26)
		ON CONFLICT (build_id, step_number) DO UPDATE SET phase = $3, kind = $4, plan_step_id = $5, action = $6, path = $7,
		command = $8, workdir = $9, description = $10, model = $11, context_files = $12, usage = $13, tokens = $14,
		cost_micros = $15, status = $16, content = $17, output = $18, error = $19, validation = $20, fix_rounds = $21,
		guidance = $22, generated = $23, start_time = $24, end_time = $25, duration_ms = $26`,
		st.BuildId, st.StepNumber, phaseName(st.Phase), kindName(st.Kind), st.PlanStepId, actionName(st.Action), st.Path,
		cmd, st.Workdir, st.Description, st.Model, ctxFiles, usage,
		st.Usage.GetInputTokens()+st.Usage.GetOutputTokens(), st.Usage.GetCostMicros(), stepStatusName(st.Status),
		st.Content, st.Output, st.Error, validation, rounds, st.Guidance, st.Generated, ts(st.StartTime), ts(st.EndTime), dur)
	return nil
}

// lockBuild reads owner's build id for update.
func lockBuild(ctx context.Context, tx pgx.Tx, owner, id string) (*Build, error) {
	b, err := scanBuild(tx.QueryRow(ctx, `SELECT `+buildColumns+` FROM builds WHERE id = $1 AND owner_id = $2 FOR UPDATE`, id, owner))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("build %s: %w", id, errs.ErrNotFound)
	}
	return b, err
}

func stepsTx(ctx context.Context, tx pgx.Tx, id string) ([]*Step, error) {
	rows, err := tx.Query(ctx, `SELECT `+stepColumns+` FROM build_steps WHERE build_id = $1 ORDER BY step_number`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []*Step
	for rows.Next() {
		st, err := scanStep(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, st)
	}
	return out, rows.Err()
}

// Cancel stops owner's build id (pending, running or paused): the build becomes CANCELLED
// with reason as its error, its unfinished steps and files SKIPPED; the worker running it
// notices at its next lease renewal or write. A cancelled build is returned unchanged; a
// completed or failed one is FailedPrecondition.
func (s *Store) Cancel(ctx context.Context, owner, id, reason string) (*Build, error) {
	var out *Build
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		b, err := lockBuild(ctx, tx, owner, id)
		if err != nil {
			return err
		}
		out = b
		switch b.Status {
		case builderv1.BuildStatus_BUILD_STATUS_CANCELLED:
			return nil
		case builderv1.BuildStatus_BUILD_STATUS_COMPLETED, builderv1.BuildStatus_BUILD_STATUS_FAILED:
			return status.Errorf(codes.FailedPrecondition, "build %s is %s; only a pending, running or paused build can be cancelled",
				id, StatusName(b.Status))
		}
		steps, err := stepsTx(ctx, tx, id)
		if err != nil {
			return err
		}
		if reason == "" {
			reason = "cancelled"
		}
		prev := b.Status
		now := timestamppb.Now()
		b.Status, b.Error, b.EndTime = builderv1.BuildStatus_BUILD_STATUS_CANCELLED, reason, now
		c := Change{Build: b}
		for _, st := range steps {
			if st.Status != builderv1.BuildStepStatus_BUILD_STEP_STATUS_PENDING && st.Status != builderv1.BuildStepStatus_BUILD_STEP_STATUS_RUNNING {
				continue
			}
			st.Status, st.Error, st.EndTime = builderv1.BuildStepStatus_BUILD_STEP_STATUS_SKIPPED, "build cancelled: "+reason, now
			c.Steps = append(c.Steps, st)
			c.Events = append(c.Events, StepEvent(builderv1.BuildEventType_BUILD_EVENT_TYPE_STEP_SKIPPED, st, b.Usage))
		}
		for _, f := range b.Files {
			if f.Status == builderv1.BuildFileStatus_BUILD_FILE_STATUS_PENDING || f.Status == builderv1.BuildFileStatus_BUILD_FILE_STATUS_IN_PROGRESS {
				f.Status = builderv1.BuildFileStatus_BUILD_FILE_STATUS_SKIPPED
			}
		}
		c.Events = append(c.Events, StatusEvent(prev, b))
		return writeChange(ctx, tx, c)
	})
	return out, err
}

// Retry prepares owner's FAILED build id to run step again with guidance, and calls
// enqueue in the same transaction: the step becomes PENDING (its fix rounds start again),
// the build PENDING in the step's phase with a new generation, so the step's model calls
// are asked again and not replayed. Other states are FailedPrecondition. With req.ID, a
// retry of the same request returns the build as it is now and changes nothing (the build
// keeps its latest Retry's key); the same key with another request is InvalidArgument.
func (s *Store) Retry(ctx context.Context, owner, id string, step int32, guidance string, req RetryRequest, enqueue func(ctx context.Context, tx pgx.Tx, id string) error) (*Build, error) {
	var out *Build
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		b, err := lockBuild(ctx, tx, owner, id)
		if err != nil {
			return err
		}
		out = b
		if req.ID != "" {
			var prevID string
			var prevHash []byte
			if err := tx.QueryRow(ctx, "SELECT retry_request_id, retry_request_hash FROM builds WHERE id = $1", id).Scan(&prevID, &prevHash); err != nil {
				return err
			}
			if prevID == req.ID {
				if !bytes.Equal(prevHash, req.Hash) {
					return errs.Invalid("request_id", "was used for a different RetryStep request")
				}
				return nil // a retry of the call that ran it: the build as it is now
			}
		}
		if b.Status != builderv1.BuildStatus_BUILD_STATUS_FAILED {
			return status.Errorf(codes.FailedPrecondition, "build %s is %s; only a failed build's steps can be retried", id, StatusName(b.Status))
		}
		steps, err := stepsTx(ctx, tx, id)
		if err != nil {
			return err
		}
		var st *Step
		for _, s := range steps {
			if s.StepNumber == step {
				st = s
			}
		}
		if st == nil {
			return fmt.Errorf("step %d of build %s: %w", step, id, errs.ErrNotFound)
		}
		if st.Status != builderv1.BuildStepStatus_BUILD_STEP_STATUS_FAILED {
			return status.Errorf(codes.FailedPrecondition, "step %d of build %s is %s; only a failed step can be retried",
				step, id, stepStatusName(st.Status))
		}
		st.Status, st.Error, st.Guidance = builderv1.BuildStepStatus_BUILD_STEP_STATUS_PENDING, "", guidance
		st.Generated, st.Validation, st.FixRounds, st.StartTime, st.EndTime = false, nil, nil, nil, nil
		prev := b.Status
		b.Status, b.Error, b.EndTime, b.Report = builderv1.BuildStatus_BUILD_STATUS_PENDING, "", nil, nil
		b.Generation++
		b.Iterations = 0
		if st.Phase < b.Phase {
			b.Phase = st.Phase
		}
		for _, f := range b.Files {
			if f.Path == st.Path && st.Kind == builderv1.StepKind_STEP_KIND_FILE {
				f.Status = builderv1.BuildFileStatus_BUILD_FILE_STATUS_PENDING
			}
		}
		if err := enqueue(ctx, tx, id); err != nil {
			return err
		}
		if req.ID != "" {
			if _, err := tx.Exec(ctx, "UPDATE builds SET retry_request_id = $2, retry_request_hash = $3 WHERE id = $1", id, req.ID, req.Hash); err != nil {
				return err
			}
		}
		return writeChange(ctx, tx, Change{Build: b, Steps: []*Step{st}, Events: []*builderv1.WatchBuildResponse{StatusEvent(prev, b)}})
	})
	return out, err
}

// RetryRequest is a RetryStep's idempotency key (ID, "" for none) and the hash of what it
// asked (RequestHash), to tell a retry from a reused key.
type RetryRequest struct {
	ID   string
	Hash []byte
}
