// Package engine runs builds: it claims a build's lease, then carries the build through its
// phases (init → scaffold → dependencies → implement → integrate → finalize) one persisted
// step at a time. Every transition of a step is written with its events before the next
// one starts, and every model call carries an idempotency key made of the build, its
// retry generation, the step and the call (generation or fix round n), so a build resumed
// after a crash picks up at the first unfinished transition: a file already generated is
// not asked for again, and a call that was in flight is answered by the ai service from its
// record instead of by the model.
package engine

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/thefold/thefold/pkg/auth"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	"github.com/thefold/thefold/pkg/jobrun"

	"github.com/thefold/thefold/services/builder/internal/store"
)

// Config tunes the engine.
type Config struct {
	// LeaseExpiry is how long a build's lease lasts without renewal: after it, another
	// worker may resume the build (its worker is presumed dead).
	LeaseExpiry time.Duration
	// RenewEvery is how often a running build renews its lease and checks for a
	// cancellation; CancelBuild takes effect within it on any replica.
	RenewEvery time.Duration
	// ContextBudget is the tokens of dependency files given to one generation in full;
	// beyond it, dependencies are given as outlines.
	ContextBudget int
	// ReferenceBudget is the tokens of repository outlines (reference files: the build's
	// context paths, the target's directory, the packages it imports) given to one
	// generation or fix; 0 gives none.
	ReferenceBudget int
	// MaxFixRounds bounds the fix rounds of one file in the implement phase.
	MaxFixRounds int
	// MaxIterations bounds the validate→fix iterations of the integrate phase.
	MaxIterations int
	// CallTimeout bounds one model call (generation, fix); ValidateTimeout one validation
	// or command in the sandbox (a cold toolchain compiles the standard library first).
	CallTimeout, ValidateTimeout time.Duration
}

// DefaultConfig is the configuration the service runs with unless told otherwise.
var DefaultConfig = Config{LeaseExpiry: 15 * time.Second, RenewEvery: time.Second, ContextBudget: 60000, ReferenceBudget: 6000,
	MaxFixRounds: 3, MaxIterations: 3, CallTimeout: 10 * time.Minute, ValidateTimeout: 15 * time.Minute}

// Engine runs builds.
type Engine struct {
	store *store.Store
	ai    aiv1.AIServiceClient
	sb    sandboxv1.SandboxServiceClient
	// skills resolves the fragments injected into generations; nil runs builds without.
	skills skillsv1.SkillServiceClient
	signer *auth.ServiceSigner
	cfg    Config
	log    *slog.Logger

	runner *jobrun.Runner

	// callSeconds is the time spent waiting on other services, by service; stepSeconds
	// the time spent running steps, by kind. Their difference is the builder's own share.
	callSeconds *prometheus.CounterVec
	stepSeconds *prometheus.CounterVec
	steps       *prometheus.CounterVec
	// storeSeconds is the part of the builder's own share spent writing builds' progress
	// to its database (store.Apply), so a benchmark can tell it from the rest.
	storeSeconds prometheus.Counter
}

// Register adds the engine's metrics to reg: thefold_builder_call_seconds_total{service},
// thefold_builder_step_seconds_total{kind}, thefold_builder_steps_total{kind,status},
// thefold_builder_store_seconds_total.
func (e *Engine) Register(reg prometheus.Registerer) error {
	for _, c := range []prometheus.Collector{e.callSeconds, e.stepSeconds, e.steps, e.storeSeconds} {
		if err := reg.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// timed adds the time until the returned function is called to svc's call seconds.
func (e *Engine) timed(svc string) func() {
	start := time.Now()
	return func() { e.callSeconds.WithLabelValues(svc).Add(time.Since(start).Seconds()) }
}

// New returns an engine; skills may be nil. signer is the builder's own identity: a build outlives the token
// of the person who started it, so its calls go out on behalf of the build's owner.
func New(st *store.Store, ai aiv1.AIServiceClient, sb sandboxv1.SandboxServiceClient, skills skillsv1.SkillServiceClient, signer *auth.ServiceSigner, cfg Config, log *slog.Logger) *Engine {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Engine{
		store: st, ai: ai, sb: sb, skills: skills, signer: signer, cfg: cfg, log: log,
		runner: jobrun.NewRunner(st, jobrun.RunnerConfig{Expiry: cfg.LeaseExpiry, RenewEvery: cfg.RenewEvery, FailTimeout: 10 * time.Second, Noun: "build"}, log),
		callSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "thefold_builder_call_seconds_total", Help: "Time builds spent waiting on calls to other services.",
		}, []string{"service"}),
		stepSeconds: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "thefold_builder_step_seconds_total", Help: "Time spent running build steps, by step kind.",
		}, []string{"kind"}),
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "thefold_builder_steps_total", Help: "Build steps run to their end, by kind and status.",
		}, []string{"kind", "status"}),
		storeSeconds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "thefold_builder_store_seconds_total", Help: "Time builds spent writing their progress to the builder's database.",
		}),
	}
}

// Cancel stops build id at once if this process runs it (the store has recorded the
// cancellation; other replicas notice it at their next lease renewal).
func (e *Engine) Cancel(id string) { e.runner.Stop(id) }

// Running reports how many builds this process is running.
func (e *Engine) Running() int { return e.runner.Running() }

// Run runs build id under its lease (see jobrun.Runner) until it finishes, is cancelled,
// or ctx ends (the worker stops: the lease is released so another worker resumes the
// build). A build that is finished or held by a live worker is left alone.
func (e *Engine) Run(ctx context.Context, id string) error {
	return e.runner.Run(ctx, id, func(ctx context.Context, id, lease string) (jobrun.Job, bool, error) {
		b, steps, ok, err := e.store.Claim(ctx, id, lease, e.cfg.LeaseExpiry)
		if err != nil || !ok {
			return nil, false, err
		}
		return claimed{&run{e: e, b: b, steps: steps, lease: lease}}, true, nil
	})
}

// claimed is a claimed run of a build, for the runner. Its calls go out on behalf of the
// build's owner.
type claimed struct{ r *run }

func (c claimed) Run(ctx context.Context) error {
	if c.r.e.signer != nil {
		ctx = auth.OnBehalfOf(ctx, c.r.e.signer, c.r.b.OwnerId)
	}
	err := c.r.run(ctx)
	// The run ends with its writes done: a step start in flight, a step's end not written.
	if werr := c.r.flush(ctx); err == nil {
		err = werr
	}
	return err
}

func (c claimed) Fail(ctx context.Context, err error) error { return c.r.fail(ctx, err) }
