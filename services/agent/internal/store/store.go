// Package store keeps the agent's state in its PostgreSQL schema: jobs with their loop
// checkpoint, reviews, the audit log, phase metrics and the job events of the schema's
// outbox. A job's every step is one row update together with its events, audit entries and
// metrics, in one transaction, so a job resumed after a crash starts from the last step
// that committed. A running job is held by a lease (a worker's id and the time it last
// renewed it): the loop's writes are fenced by it, so a worker that lost the job (paused,
// cancelled, or taken over after a stall) cannot write over what replaced it.
package store

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/events"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/jobrun"
	"github.com/thefold/thefold/pkg/protoenum"
)

// Store is the agent schema. Its Renew, Release and TakeStale are the jobs' leases
// (jobrun.Leases over the jobs table): a job in QUEUED or RUNNING should have a runner.
type Store struct {
	pool *pgxpool.Pool
	hub  *events.Hub
	*jobrun.Leases
	ends jobEnds
}

// New returns a store over pool (whose search_path is the agent schema); hub serves Watch
// and may be nil when nothing watches.
func New(pool *pgxpool.Pool, hub *events.Hub) *Store {
	return &Store{pool: pool, hub: hub, Leases: &jobrun.Leases{DB: pool, Table: "jobs", Active: []string{"queued", "running"}}}
}

// Pool is the store's pool, for the job queue's transactions.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// ErrLeaseLost is returned by a loop write when the job is no longer held by the caller's
// lease: a person paused or cancelled it, or another worker took it over.
var ErrLeaseLost = jobrun.ErrLeaseLost

// State is the loop's own checkpoint beside the job and its context: what it needs to
// carry on after a restart that the contract's Job does not say.
type State struct {
	// InjectSkillIDs are the skills resolved for the task (LogResult reports on them);
	// PostRunSkillIDs those checked after the build.
	InjectSkillIDs  []string `json:"inject_skill_ids,omitempty"`
	PostRunSkillIDs []string `json:"post_run_skill_ids,omitempty"`
	// MemoryIDs are the memories given to planning.
	MemoryIDs []string `json:"memory_ids,omitempty"`
	// Fingerprints are the failed attempts' loop-guard fingerprints, in order.
	Fingerprints []string `json:"fingerprints,omitempty"`
	// Rewrites counts intervention rewrites (attempts reset at most once).
	Rewrites int `json:"rewrites,omitempty"`
	// Intervened is set once Intervene ran for the current run of attempts.
	Intervened bool `json:"intervened,omitempty"`
	// Failures counts failed attempts in a row (reset by a rewrite or a human's guidance).
	Failures int `json:"failures,omitempty"`
	// BackoffUntil is when an environment_error's wait ends.
	BackoffUntil time.Time `json:"backoff_until,omitzero"`
	// LastRequest is the latest control with a request_id (ResumeJob, RespondToClarification):
	// a retry of it changes nothing again.
	LastRequest *ControlRequest `json:"last_request,omitempty"`
	// Generation counts restarts of the attempt numbering (human guidance, rewrites, review
	// feedback); it is part of every idempotency key, so a new run asks again.
	Generation int `json:"generation,omitempty"`
	// ChangedFiles are the files the last successful build changed.
	ChangedFiles []string `json:"changed_files,omitempty"`
	// Active is the wall time the job has run (not paused, not waiting for a human).
	Active time.Duration `json:"active,omitempty"`
	// CommitSHA is the approved change's commit, once made.
	CommitSHA string `json:"commit_sha,omitempty"`
	// BaseCommit is the commit the attempt's sandbox was checked out at: a crew worker's
	// branch starts there (its pull request is brought up to date with the base by the crew).
	BaseCommit string `json:"base_commit,omitempty"`
	// RelevantFiles is how many files context gathering asks for (grows on missing_context).
	RelevantFiles int `json:"relevant_files,omitempty"`
	// Quality is the last review's quality score.
	Quality int32 `json:"quality,omitempty"`
	// Attempts is the total number of attempts made, over all generations.
	Attempts int `json:"attempts,omitempty"`
	// BuildSteps are the last successful build's plan steps that succeeded, summarised.
	BuildSteps []string `json:"build_steps,omitempty"`
	// MoreContext is set by a missing_context diagnosis: the next planning first fetches
	// more files (ContextRequests among them) and memories.
	MoreContext     bool     `json:"more_context,omitempty"`
	ContextRequests []string `json:"context_requests,omitempty"`
	// ReviewMemories are what the last code review found worth remembering.
	ReviewMemories []string `json:"review_memories,omitempty"`
	// PreviousReview is the review the next one replaces (RequestChanges).
	PreviousReview string `json:"previous_review,omitempty"`
	// AutoResumeAt is when a job paused by an open circuit breaker is resumed by itself.
	AutoResumeAt time.Time `json:"auto_resume_at,omitzero"`
	// RunErrors counts the transient failures in a row of the step in progress.
	RunErrors int `json:"run_errors,omitempty"`
	// Done are the side effects of completion already made, by key.
	Done map[string]bool `json:"done,omitempty"`
}

// Record is a job with its loop checkpoint.
type Record struct {
	// Job is the contract's job, with its plan.
	Job *agentv1.Job
	// Context is what the loop gathered, in the ai service's planning request: task, tree,
	// files, memories, skills, strategy hint, attempts, feedback, previous plan.
	Context *aiv1.PlanTaskRequest
	State   State
	// Started is set once the job left QUEUED: it holds its repository branch's lock.
	Started bool
}

// Terminal reports whether s ends a job.
func Terminal(s agentv1.JobStatus) bool {
	switch s {
	case agentv1.JobStatus_JOB_STATUS_COMPLETED, agentv1.JobStatus_JOB_STATUS_FAILED, agentv1.JobStatus_JOB_STATUS_CANCELLED,
		agentv1.JobStatus_JOB_STATUS_SKIPPED, agentv1.JobStatus_JOB_STATUS_REJECTED:
		return true
	}
	return false
}

// StatusName is the stored name of a job status, e.g. "pending_review".
func StatusName(s agentv1.JobStatus) string { return protoenum.Name(s, "JOB_STATUS_") }
func parseStatus(s string) agentv1.JobStatus {
	return protoenum.Parse[agentv1.JobStatus](s, "JOB_STATUS_", agentv1.JobStatus_value)
}

// PhaseName is the stored name of a job phase, e.g. "building".
func PhaseName(p agentv1.JobPhase) string { return protoenum.Name(p, "JOB_PHASE_") }
func parsePhase(s string) agentv1.JobPhase {
	return protoenum.Parse[agentv1.JobPhase](s, "JOB_PHASE_", agentv1.JobPhase_value)
}

var (
	jsonOut = protojson.MarshalOptions{UseProtoNames: true}
	jsonIn  = protojson.UnmarshalOptions{DiscardUnknown: true}
)

// marshal writes m as protojson; a nil message is SQL NULL.
func marshal(m proto.Message) ([]byte, error) {
	if m == nil || !m.ProtoReflect().IsValid() {
		return nil, nil
	}
	return jsonOut.Marshal(m)
}

// ControlRequest is a control's idempotency key and the hash of what it asked
// (RequestHash).
type ControlRequest struct {
	RPC  string `json:"rpc"`
	ID   string `json:"id"`
	Hash []byte `json:"hash"`
}

// RequestHash identifies what a StartTask request asked for, to tell a retry (same hash)
// from a reused request_id (different hash).
func RequestHash(req proto.Message) []byte {
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(req)
	h := sha256.Sum256(b)
	return h[:]
}

// RateLimit caps how many jobs one owner starts.
type RateLimit struct {
	PerHour, PerDay int
}

// RateLimitError is a StartTask over the owner's rate limit: RESOURCE_EXHAUSTED with the
// time a job may start again.
type RateLimitError struct {
	Limit  int
	Window time.Duration
	Retry  time.Time
}

func (e *RateLimitError) Error() string {
	return fmt.Sprintf("rate limit: %d tasks started in the last %s; the next may start at %s (in %s)",
		e.Limit, e.Window, e.Retry.UTC().Format(time.RFC3339), time.Until(e.Retry).Round(time.Second))
}

// Create inserts job j (owner, task, repo, budget, model set) QUEUED with its CREATED event
// and calls enqueue in the same transaction. A job without preferences gets its owner's
// current ones (the snapshot it runs under). A retry of the same request returns the first
// job and created false; the same request_id with another request is InvalidArgument; a
// task with an unfinished job is AlreadyExists; an owner over the rate limit gets a
// *RateLimitError.
func (s *Store) Create(ctx context.Context, j *agentv1.Job, requestID string, requestHash []byte, limit RateLimit,
	enqueue func(ctx context.Context, tx pgx.Tx, id string) error) (*Record, bool, error) {
	return s.CreateWithTask(ctx, j, nil, requestID, requestHash, limit, enqueue)
}

// CreateWithTask is Create with the task as the job is to see it (a project's task, with
// the project's context in its description), instead of the task as the tasks service has
// it; nil is Create.
func (s *Store) CreateWithTask(ctx context.Context, j *agentv1.Job, task *aiv1.TaskSpec, requestID string, requestHash []byte, limit RateLimit,
	enqueue func(ctx context.Context, tx pgx.Tx, id string) error) (*Record, bool, error) {
	var c *aiv1.PlanTaskRequest
	if task != nil {
		c = &aiv1.PlanTaskRequest{Task: task}
	}
	return s.CreateWithContext(ctx, j, c, requestID, requestHash, limit, enqueue)
}

// CreateWithContext is Create with the job's context to start from (the task as the job is
// to see it, feedback it is to act on); nil is Create.
func (s *Store) CreateWithContext(ctx context.Context, j *agentv1.Job, c *aiv1.PlanTaskRequest, requestID string, requestHash []byte, limit RateLimit,
	enqueue func(ctx context.Context, tx pgx.Tx, id string) error) (*Record, bool, error) {
	jobContext := []byte("{}")
	if c != nil {
		var err error
		if jobContext, err = jsonOut.Marshal(c); err != nil {
			return nil, false, err
		}
	}
	created := false
	var id string
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		// One owner's starts are serialised, so the count below cannot be raced past.
		if _, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('agent.start:' || $1))`, j.OwnerId); err != nil {
			return err
		}
		if requestID != "" {
			var hash []byte
			err := tx.QueryRow(ctx, `SELECT id, request_hash FROM jobs WHERE owner_id = $1 AND request_id = $2`, j.OwnerId, requestID).Scan(&id, &hash)
			if err == nil {
				if string(hash) != string(requestHash) {
					return errs.Invalid("request_id", "was used for a different StartTask request")
				}
				return nil
			}
			if !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
		}
		if err := checkRate(ctx, tx, j.OwnerId, limit); err != nil {
			return err
		}
		// The job runs under its owner's preferences as they are when it starts.
		if j.Preferences == nil {
			p, err := preferences(ctx, tx, j.OwnerId, false)
			if err != nil {
				return err
			}
			j.Preferences = p
		}
		now := time.Now()
		j.Status, j.CreateTime, j.UpdateTime = agentv1.JobStatus_JOB_STATUS_QUEUED, timestamppb.New(now), timestamppb.New(now)
		doc, err := marshalJob(j)
		if err != nil {
			return err
		}
		err = tx.QueryRow(ctx, `INSERT INTO jobs (owner_id, request_id, request_hash, task_id, project_id, repo, base_branch, status, job, context, create_time, update_time, lock_branch)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 'queued', $8, $10, $9, $9, $11) RETURNING id`,
			j.OwnerId, requestID, requestHash, j.TaskId, j.ProjectId, j.Repo, j.BaseBranch, doc, now, jobContext, LockBranch(j)).Scan(&id)
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.ConstraintName == "jobs_task_active" {
			return status409(j.TaskId)
		}
		if err != nil {
			return err
		}
		j.Id = id
		// The stored document carries its own id.
		if doc, err = marshalJob(j); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE jobs SET job = $2 WHERE id = $1`, id, doc); err != nil {
			return err
		}
		created = true
		// The caller's writes first (a project's checkpoint locks the project's row), the
		// job's event last: see SaveProject.
		if err := enqueue(ctx, tx, id); err != nil {
			return err
		}
		batch := &pgx.Batch{}
		if err := queueEvents(batch, j, []*agentv1.WatchJobResponse{{
			Type: agentv1.JobEventType_JOB_EVENT_TYPE_CREATED,
			Payload: &agentv1.WatchJobResponse_Created{Created: &agentv1.JobSummary{
				Id: id, TaskId: j.TaskId, ProjectId: j.ProjectId, Repo: j.Repo, BaseBranch: j.BaseBranch, Status: j.Status, CreateTime: j.CreateTime,
			}},
		}}); err != nil {
			return err
		}
		return tx.SendBatch(ctx, batch).Close()
	})
	if err != nil {
		return nil, false, err
	}
	rec, err := s.Load(ctx, id)
	return rec, created, err
}

func status409(taskID string) error {
	return fmt.Errorf("task %s already has an unfinished job: %w", taskID, errs.ErrAlreadyExists)
}

// CheckRate is checkRate outside a start, to refuse early (Create checks again, atomically).
func (s *Store) CheckRate(ctx context.Context, owner string, limit RateLimit) error {
	return db.InTx(ctx, s.pool, func(tx pgx.Tx) error { return checkRate(ctx, tx, owner, limit) })
}

// checkRate returns a *RateLimitError when owner started limit.PerHour jobs in the last
// hour or limit.PerDay in the last day (zero limits are off).
func checkRate(ctx context.Context, tx pgx.Tx, owner string, limit RateLimit) error {
	for _, w := range []struct {
		n      int
		window time.Duration
	}{{limit.PerHour, time.Hour}, {limit.PerDay, 24 * time.Hour}} {
		if w.n <= 0 {
			continue
		}
		// The n-th newest start inside the window: when it leaves, one more may start.
		var oldest time.Time
		err := tx.QueryRow(ctx, `SELECT create_time FROM jobs WHERE owner_id = $1 AND create_time > now() - $2::interval
			ORDER BY create_time DESC OFFSET $3 - 1 LIMIT 1`, owner, w.window, w.n).Scan(&oldest)
		if errors.Is(err, pgx.ErrNoRows) {
			continue
		}
		if err != nil {
			return err
		}
		return &RateLimitError{Limit: w.n, Window: w.window, Retry: oldest.Add(w.window)}
	}
	return nil
}

// marshalJob is j's stored document: the job without its plan (kept beside it).
func marshalJob(j *agentv1.Job) ([]byte, error) {
	c := proto.CloneOf(j)
	c.Plan = nil
	return jsonOut.Marshal(c)
}

const recordColumns = `job, plan, context, state, started, status, phase`

func scanRecord(row pgx.Row, withPlan bool, extra ...any) (*Record, error) {
	var (
		doc, plan, ctxDoc, state []byte
		status, phase            string
		rec                      = &Record{Job: &agentv1.Job{}, Context: &aiv1.PlanTaskRequest{}}
	)
	if err := row.Scan(append([]any{&doc, &plan, &ctxDoc, &state, &rec.Started, &status, &phase}, extra...)...); err != nil {
		return nil, err
	}
	if err := jsonIn.Unmarshal(doc, rec.Job); err != nil {
		return nil, fmt.Errorf("store: job: %w", err)
	}
	// The columns are authoritative for what people change beside the loop.
	rec.Job.Status, rec.Job.Phase = parseStatus(status), parsePhase(phase)
	if withPlan && len(plan) > 0 {
		rec.Job.Plan = &typev1.Plan{}
		if err := jsonIn.Unmarshal(plan, rec.Job.Plan); err != nil {
			return nil, fmt.Errorf("store: job %s: plan: %w", rec.Job.Id, err)
		}
	}
	if len(ctxDoc) > 0 {
		if err := jsonIn.Unmarshal(ctxDoc, rec.Context); err != nil {
			return nil, fmt.Errorf("store: job %s: context: %w", rec.Job.Id, err)
		}
	}
	if len(state) > 0 {
		if err := json.Unmarshal(state, &rec.State); err != nil {
			return nil, fmt.Errorf("store: job %s: state: %w", rec.Job.Id, err)
		}
	}
	return rec, nil
}

// Load returns job id with its checkpoint, whoever owns it (the loop's read).
func (s *Store) Load(ctx context.Context, id string) (*Record, error) {
	rec, err := scanRecord(s.pool.QueryRow(ctx, `SELECT `+recordColumns+` FROM jobs WHERE id = $1`, id), true)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("job %s: %w", id, errs.ErrNotFound)
	}
	return rec, err
}

// Get returns owner's job id with its plan; another owner's or a missing one is
// errs.ErrNotFound.
func (s *Store) Get(ctx context.Context, owner, id string) (*agentv1.Job, error) {
	rec, err := scanRecord(s.pool.QueryRow(ctx, `SELECT `+recordColumns+` FROM jobs WHERE id = $1 AND owner_id = $2`, id, owner), true)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("job %s: %w", id, errs.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return rec.Job, nil
}

// ByRequest returns owner's job started with requestID and the hash of that request, or
// a nil job.
func (s *Store) ByRequest(ctx context.Context, owner, requestID string) (*agentv1.Job, []byte, error) {
	var hash []byte
	rec, err := scanRecord(s.pool.QueryRow(ctx, `SELECT `+recordColumns+`, request_hash FROM jobs WHERE owner_id = $1 AND request_id = $2`,
		owner, requestID), true, &hash)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	return rec.Job, hash, nil
}

// LockBranch is the branch job j's lock is on: its base branch, or for a crew worker
// (which works on a branch of its own while other workers of its project work beside it)
// its own branch.
func LockBranch(j *agentv1.Job) string {
	if j.Crew && j.Branch != "" {
		return j.Branch
	}
	return j.BaseBranch
}

// lockBranch serialises the lock decisions of one repository branch.
func lockBranch(ctx context.Context, tx pgx.Tx, repo, branch string) error {
	_, err := tx.Exec(ctx, `SELECT pg_advisory_xact_lock(hashtext('agent.branch:' || $1 || '@' || $2))`, repo, branch)
	return err
}

// Claim takes job id for the worker with lease: a QUEUED job whose repository branch is
// free becomes RUNNING (its STATUS_CHANGED event written), a RUNNING job whose lease is
// free or expired is taken over. ok is false when the job is not runnable now (another
// worker holds it, it waits for a person, or its branch is locked by another job).
func (s *Store) Claim(ctx context.Context, id, lease string, expiry time.Duration) (rec *Record, ok bool, err error) {
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var repo, branch string
		if err := tx.QueryRow(ctx, `SELECT repo, lock_branch FROM jobs WHERE id = $1`, id).Scan(&repo, &branch); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return nil
			}
			return err
		}
		if err := lockBranch(ctx, tx, repo, branch); err != nil {
			return err
		}
		var fresh bool
		r, err := scanRecord(tx.QueryRow(ctx, `SELECT `+recordColumns+`, lease_id IS NOT NULL AND lease_time > now() - $2::interval
			FROM jobs WHERE id = $1 FOR UPDATE`, id, expiry), true, &fresh)
		if err != nil {
			return err
		}
		switch {
		case fresh:
			return nil
		case r.Job.Status == agentv1.JobStatus_JOB_STATUS_QUEUED:
			var held bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM jobs WHERE repo = $1 AND lock_branch = $2 AND started AND id <> $3
				AND status NOT IN ('completed', 'failed', 'cancelled', 'skipped', 'rejected'))`, repo, branch, id).Scan(&held); err != nil {
				return err
			}
			if held {
				return nil
			}
			prev := r.Job.Status
			now := time.Now()
			r.Job.Status, r.Started = agentv1.JobStatus_JOB_STATUS_RUNNING, true
			if r.Job.StartTime == nil {
				r.Job.StartTime = timestamppb.New(now)
			}
			if err := s.write(ctx, tx, r, "", lease, []*agentv1.WatchJobResponse{StatusEvent(prev, r.Job)}); err != nil {
				return err
			}
		case r.Job.Status == agentv1.JobStatus_JOB_STATUS_RUNNING:
		default:
			return nil
		}
		if ok, err = s.Leases.Claim(ctx, tx, id, lease, expiry); err != nil || !ok {
			return err
		}
		rec = r
		return nil
	})
	return rec, ok, err
}

// Step is what one loop step writes with the job: its events, audit entries, phase
// metrics and a review, all in the job's transaction.
type Step struct {
	Events []*agentv1.WatchJobResponse
	Audit  []Audit
	// Metrics add usage, time and a model to the job's phase totals.
	Metrics []Metric
	// Review, when set, is inserted (keyed by ReviewKey: a resumed step does not submit a
	// second one) and its id set on the job.
	Review    *agentv1.Review
	ReviewKey string
	// After runs last in the transaction, for writes beside the job (a review's decision
	// or its pull request).
	After func(ctx context.Context, tx pgx.Tx) error
	// Unchanged: the change found nothing to do (a retry of a control already applied), so
	// Mutate writes nothing and hands nothing to a new run.
	Unchanged bool
}

// Save writes the loop's checkpoint of rec after a step, fenced by lease: ErrLeaseLost
// when the job is no longer the caller's or no longer RUNNING. A job leaving RUNNING gives
// up its lease.
func (s *Store) Save(ctx context.Context, rec *Record, lease string, st Step) error {
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		if cur, err := s.Fence(ctx, tx, rec.Job.Id, lease); err != nil || cur != "running" {
			return cmp.Or(err, ErrLeaseLost)
		}
		if st.Review != nil {
			if err := s.insertReview(ctx, tx, rec, st.Review, st.ReviewKey); err != nil {
				return err
			}
		}
		if err := s.write(ctx, tx, rec, lease, "", st.Events); err != nil {
			return err
		}
		return s.writeExtras(ctx, tx, rec.Job, st)
	})
	if err == nil && Terminal(rec.Job.Status) {
		s.ends.ended(rec.Job.Id)
	}
	return err
}

// writeExtras writes st's audit entries and metrics for job j and runs st.After.
func (s *Store) writeExtras(ctx context.Context, tx pgx.Tx, j *agentv1.Job, st Step) error {
	if err := s.writeAudit(ctx, tx, j, st); err != nil {
		return err
	}
	if st.After != nil {
		return st.After(ctx, tx)
	}
	return nil
}

// write stores rec's row and queues events. keep is the lease the write leaves in place
// while the job runs (a Save); set is a lease the write gives the job (a Claim). A job
// not RUNNING holds no lease.
func (s *Store) write(ctx context.Context, tx pgx.Tx, rec *Record, keep, set string, evs []*agentv1.WatchJobResponse) error {
	j := rec.Job
	j.UpdateTime = timestamppb.Now()
	if Terminal(j.Status) && j.EndTime == nil {
		j.EndTime = j.UpdateTime
	}
	doc, err := marshalJob(j)
	if err != nil {
		return err
	}
	plan, err := marshal(j.Plan)
	if err != nil {
		return err
	}
	ctxDoc, err := marshal(rec.Context)
	if err != nil {
		return err
	}
	if ctxDoc == nil {
		ctxDoc = []byte("{}")
	}
	state, err := json.Marshal(rec.State)
	if err != nil {
		return err
	}
	lease := keep
	if set != "" {
		lease = set
	}
	running := j.Status == agentv1.JobStatus_JOB_STATUS_RUNNING
	_, err = tx.Exec(ctx, `UPDATE jobs SET job = $2, plan = $3, context = $4, state = $5, status = $6, phase = $7, started = $8,
		lease_id = CASE WHEN $9 AND $10 <> '' THEN $10::uuid ELSE NULL END,
		lease_time = CASE WHEN $9 AND $10 <> '' THEN now() ELSE NULL END, update_time = now() WHERE id = $1`,
		j.Id, doc, plan, ctxDoc, state, StatusName(j.Status), PhaseName(j.Phase), rec.Started, running, lease)
	if err != nil {
		return err
	}
	if len(evs) == 0 {
		return nil
	}
	batch := &pgx.Batch{}
	if err := queueEvents(batch, j, evs); err != nil {
		return err
	}
	return tx.SendBatch(ctx, batch).Close()
}

// Change is what a person's control (pause, approve, …) does to a job: it checks the job's
// state and changes rec, returning what to write with it; tx is the transaction, for what
// it reads or writes beside the job (a review).
type Change func(ctx context.Context, tx pgx.Tx, rec *Record) (Step, error)

// Mutate applies change to owner's job id in one transaction (NotFound for another
// owner's job) and, when the job is then runnable (RUNNING or QUEUED) and enqueue is
// given, queues a run of it in the same transaction. A RUNNING job that change takes out
// of RUNNING loses its lease: its worker stops at its next write.
func (s *Store) Mutate(ctx context.Context, owner, id string, change Change, enqueue func(ctx context.Context, tx pgx.Tx, id string) error) (*Record, error) {
	if owner == "" {
		return nil, errors.New("store: mutate: owner is required")
	}
	return s.mutate(ctx, owner, id, change, enqueue)
}

// mutate is Mutate; an empty owner matches any (the agent's own changes).
func (s *Store) mutate(ctx context.Context, owner, id string, change Change, enqueue func(ctx context.Context, tx pgx.Tx, id string) error) (*Record, error) {
	var rec *Record
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		var repo, branch string
		if err := tx.QueryRow(ctx, `SELECT repo, lock_branch FROM jobs WHERE id = $1 AND ($2 = '' OR owner_id = $2)`, id, owner).Scan(&repo, &branch); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("job %s: %w", id, errs.ErrNotFound)
			}
			return err
		}
		if err := lockBranch(ctx, tx, repo, branch); err != nil {
			return err
		}
		r, err := scanRecord(tx.QueryRow(ctx, `SELECT `+recordColumns+` FROM jobs WHERE id = $1 FOR UPDATE`, id), true)
		if err != nil {
			return err
		}
		st, err := change(ctx, tx, r)
		if err != nil {
			return err
		}
		if st.Unchanged {
			rec = r
			return nil
		}
		if st.Review != nil {
			if err := s.insertReview(ctx, tx, r, st.Review, st.ReviewKey); err != nil {
				return err
			}
		}
		// A person's change hands a RUNNING job to a new run: the old worker's lease goes.
		if err := s.write(ctx, tx, r, "", "", st.Events); err != nil {
			return err
		}
		if err := s.writeExtras(ctx, tx, r.Job, st); err != nil {
			return err
		}
		switch r.Job.Status {
		case agentv1.JobStatus_JOB_STATUS_RUNNING, agentv1.JobStatus_JOB_STATUS_QUEUED:
			if enqueue != nil {
				if err := enqueue(ctx, tx, id); err != nil {
					return err
				}
			}
		}
		rec = r
		return nil
	})
	if err == nil && rec != nil && Terminal(rec.Job.Status) {
		s.ends.ended(id)
	}
	return rec, err
}

// ResumeDue resumes the jobs paused by an open circuit breaker whose wait is over: each
// goes back to RUNNING (QUEUED if it never started) with its event and an audit entry, and
// a run is queued. It returns the ids resumed.
func (s *Store) ResumeDue(ctx context.Context, limit int, enqueue func(ctx context.Context, tx pgx.Tx, id string) error) ([]string, error) {
	rows, err := s.pool.Query(ctx, `SELECT id FROM jobs WHERE status = 'paused' AND state ? 'auto_resume_at'
		AND (state->>'auto_resume_at')::timestamptz <= now() ORDER BY update_time LIMIT $1`, limit)
	if err != nil {
		return nil, err
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, err
	}
	var resumed []string
	for _, id := range ids {
		_, err := s.mutate(ctx, "", id, func(_ context.Context, _ pgx.Tx, rec *Record) (Step, error) {
			j := rec.Job
			if j.Status != agentv1.JobStatus_JOB_STATUS_PAUSED || rec.State.AutoResumeAt.IsZero() || rec.State.AutoResumeAt.After(time.Now()) {
				return Step{}, errNotDue
			}
			rec.State.AutoResumeAt = time.Time{}
			prev := j.Status
			j.Status, j.StatusReason = agentv1.JobStatus_JOB_STATUS_RUNNING, "resumed: the circuit breaker's wait is over"
			if !rec.Started {
				j.Status = agentv1.JobStatus_JOB_STATUS_QUEUED
			}
			return Step{
				Events: []*agentv1.WatchJobResponse{StatusEvent(prev, j)},
				Audit: []Audit{{Key: fmt.Sprintf("%s:auto_resumed:%d", j.Id, time.Now().UnixNano()), Actor: "agent", Action: "job_resumed",
					Details: map[string]any{"reason": j.StatusReason}}},
			}, nil
		}, enqueue)
		if errors.Is(err, errNotDue) {
			continue
		}
		if err != nil {
			return resumed, err
		}
		resumed = append(resumed, id)
	}
	return resumed, nil
}

var errNotDue = errors.New("store: not due")
