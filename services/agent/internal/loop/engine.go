// Package loop runs the task loop: one job carries a task from its context through
// confidence, complexity, planning, a sandbox and a build, validation, diagnosis and
// recovery, to the human review gate, and after approval to a pull request and what the
// agent learned. A job runs under a lease (see store); every step ends with a checkpoint
// written with its events, audit entries and metrics, and every side effect carries an
// idempotency key made of the job, the generation, the attempt and the step, so a job
// resumed after a crash repeats no branch, commit, pull request, subtask or memory.
package loop

import (
	"context"
	"log/slog"
	"time"

	"github.com/thefold/thefold/pkg/auth"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpcclient"
	"github.com/thefold/thefold/pkg/jobrun"

	"github.com/thefold/thefold/services/agent/internal/store"
)

// Clients are the services the loop calls. Skills may be nil (no skills service).
type Clients struct {
	Tasks   tasksv1.TaskServiceClient
	AI      aiv1.AIServiceClient
	Models  aiv1.ModelRegistryServiceClient
	Builder builderv1.BuilderServiceClient
	Sandbox sandboxv1.SandboxServiceClient
	Repos   githubv1.RepoServiceClient
	Memory  memoryv1.MemoryServiceClient
	Skills  skillsv1.SkillServiceClient
}

// Config tunes the loop.
type Config struct {
	// LeaseExpiry is how long a job's lease lasts without renewal; RenewEvery how often a
	// running job renews it (and notices a pause or cancel from another replica).
	LeaseExpiry, RenewEvery time.Duration
	// MaxAttempts bounds the attempts of one run (human guidance starts a new run);
	// InterveneAfter is the number of failed attempts in a row after which ai.Intervene
	// decides; MaxPlanRevisions bounds bad_plan revisions.
	MaxAttempts, InterveneAfter, MaxPlanRevisions int
	// Backoff is the least wait after an environment_error.
	Backoff time.Duration
	// ContextTokens is the token budget of the relevant files; ContextFiles how many.
	ContextTokens, ContextFiles int
	// Budget fills a job's unset caps.
	Budget *typev1.Budget
	// CallTimeout bounds one model call (and a sandbox's creation).
	CallTimeout time.Duration
	// SandboxTTL is the idle lifetime of a job's sandbox (it is pinned while at the
	// review gate).
	SandboxTTL time.Duration
	// Instance names this process in a job's audit log: each run that claims the job
	// records it ("run_claimed").
	Instance string
}

// DefaultConfig is what the service runs with unless told otherwise.
var DefaultConfig = Config{
	LeaseExpiry: 15 * time.Second, RenewEvery: time.Second,
	MaxAttempts: 5, InterveneAfter: 3, MaxPlanRevisions: 2, Backoff: 30 * time.Second,
	ContextTokens: 30000, ContextFiles: 20, SandboxTTL: 2 * time.Hour, CallTimeout: 10 * time.Minute,
}

// Engine runs jobs.
type Engine struct {
	store  *store.Store
	c      Clients
	signer *auth.ServiceSigner
	cfg    Config
	log    *slog.Logger
	runner *jobrun.Runner
}

// New returns an engine. signer is the agent's own identity: a job outlives the token of
// the person who started it, so its calls go out on behalf of the job's owner.
func New(st *store.Store, c Clients, signer *auth.ServiceSigner, cfg Config, log *slog.Logger) *Engine {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Engine{store: st, c: c, signer: signer, cfg: cfg, log: log,
		runner: jobrun.NewRunner(st, jobrun.RunnerConfig{Expiry: cfg.LeaseExpiry, RenewEvery: cfg.RenewEvery, Noun: "job"}, log)}
}

// Config is the engine's configuration.
func (e *Engine) Config() Config { return e.cfg }

// Stop ends the run of job id at once if this process runs it (a person paused or
// cancelled it; the store has recorded that, other replicas notice at their next renewal).
func (e *Engine) Stop(id string) { e.runner.Stop(id) }

// Running reports how many jobs this process is running.
func (e *Engine) Running() int { return e.runner.Running() }

// Run runs job id under its lease (see jobrun.Runner) until it stops (review gate, a
// person needed, paused, finished) or ctx ends (the worker stops: the lease is released so
// another worker resumes the job). A job held by a live worker, waiting for a person, or
// whose branch is locked is left alone.
func (e *Engine) Run(ctx context.Context, id string) error {
	return e.runner.Run(ctx, id, func(ctx context.Context, id, lease string) (jobrun.Job, bool, error) {
		rec, ok, err := e.store.Claim(ctx, id, lease, e.cfg.LeaseExpiry)
		if err != nil || !ok {
			return nil, false, err
		}
		return claimed{&run{e: e, rec: rec, lease: lease, since: time.Now()}}, true, nil
	})
}

// claimed is a claimed run of the loop, for the runner.
type claimed struct{ r *run }

func (c claimed) Run(ctx context.Context) error {
	// Which process took the job (and, after a crash or a hand-over, which took it next).
	c.r.audit("run_claimed", "run:"+c.r.lease, map[string]any{"instance": c.r.e.cfg.Instance}, nil, 0)
	return c.r.loop(c.calls(ctx))
}

func (c claimed) Fail(ctx context.Context, err error) error { return c.r.settle(c.calls(ctx), err) }

// calls is ctx for the run's calls: they go out on behalf of the job's owner, and fail at
// once when a service is down (instead of waiting for it within their deadline), so the
// circuit breakers count them and pause the job.
func (c claimed) calls(ctx context.Context) context.Context {
	ctx = grpcclient.FailFast(ctx)
	if c.r.e.signer != nil {
		ctx = auth.OnBehalfOf(ctx, c.r.e.signer, c.r.rec.Job.OwnerId)
	}
	return ctx
}

// Actor is the audit actor of the loop itself.
const Actor = "agent"

// Status names for the code below.
const (
	queued         = agentv1.JobStatus_JOB_STATUS_QUEUED
	running        = agentv1.JobStatus_JOB_STATUS_RUNNING
	waitingAnswer  = agentv1.JobStatus_JOB_STATUS_WAITING_CLARIFICATION
	pendingReview  = agentv1.JobStatus_JOB_STATUS_PENDING_REVIEW
	paused         = agentv1.JobStatus_JOB_STATUS_PAUSED
	humanNeeded    = agentv1.JobStatus_JOB_STATUS_HUMAN_NEEDED
	completed      = agentv1.JobStatus_JOB_STATUS_COMPLETED
	failed         = agentv1.JobStatus_JOB_STATUS_FAILED
	phasePreparing = agentv1.JobPhase_JOB_PHASE_PREPARING
	phaseContext   = agentv1.JobPhase_JOB_PHASE_CONTEXT
	phaseConfident = agentv1.JobPhase_JOB_PHASE_CONFIDENCE
	phaseComplex   = agentv1.JobPhase_JOB_PHASE_COMPLEXITY
	phasePlanning  = agentv1.JobPhase_JOB_PHASE_PLANNING
	phaseSandbox   = agentv1.JobPhase_JOB_PHASE_SANDBOX
	phaseBuilding  = agentv1.JobPhase_JOB_PHASE_BUILDING
	phaseValidate  = agentv1.JobPhase_JOB_PHASE_VALIDATING
	phaseDiagnose  = agentv1.JobPhase_JOB_PHASE_DIAGNOSING
	phaseIntervene = agentv1.JobPhase_JOB_PHASE_INTERVENING
	phaseReviewing = agentv1.JobPhase_JOB_PHASE_REVIEWING
	phaseComplete  = agentv1.JobPhase_JOB_PHASE_COMPLETING
	phaseSubAgents = agentv1.JobPhase_JOB_PHASE_SUB_AGENTS
)
