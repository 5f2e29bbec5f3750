package jobrun

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"
)

// ErrStopped is the cause of a run ended by Runner.Stop (a person paused or cancelled the
// job on this replica; the store has recorded it).
var ErrStopped = errors.New("jobrun: run stopped")

// Job is one claimed run of a job.
type Job interface {
	// Run carries the job on until it ends, pauses or ctx ends. ctx is cancelled with
	// ErrLeaseLost when the lease is lost.
	Run(ctx context.Context) error
	// Fail records that Run failed with err for a reason of its own (not a lost lease, not
	// the worker stopping). ctx is not cancelled with the run, but has a deadline.
	Fail(ctx context.Context, err error) error
}

// Claim claims job id for token and returns its run; ok is false when the job is not
// runnable now (finished, held by a live worker, or waiting for something).
type Claim func(ctx context.Context, id, token string) (job Job, ok bool, err error)

// RunnerConfig tunes a Runner.
type RunnerConfig struct {
	// Expiry is how long a lease lasts without renewal.
	Expiry time.Duration
	// RenewEvery is how often a run renews its lease (default Expiry/3). It is also how
	// soon a run notices that its job was paused or cancelled elsewhere.
	RenewEvery time.Duration
	// FailTimeout bounds Job.Fail (default 30s).
	FailTimeout time.Duration
	// Noun names a job in logs ("job", "build").
	Noun string
}

// Runner runs claimed jobs under their lease: it renews the lease while the job runs,
// cancels the run when the lease is lost, and gives the lease back when the run ends.
type Runner struct {
	store Store
	cfg   RunnerConfig
	log   *slog.Logger

	mu      sync.Mutex
	running map[string]context.CancelCauseFunc
}

// NewRunner returns a runner over st.
func NewRunner(st Store, cfg RunnerConfig, log *slog.Logger) *Runner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.RenewEvery <= 0 {
		cfg.RenewEvery = cfg.Expiry / 3
	}
	if cfg.FailTimeout <= 0 {
		cfg.FailTimeout = 30 * time.Second
	}
	if cfg.Noun == "" {
		cfg.Noun = "job"
	}
	return &Runner{store: st, cfg: cfg, log: log, running: map[string]context.CancelCauseFunc{}}
}

// Stop ends the run of job id at once if this process runs it.
func (r *Runner) Stop(id string) {
	r.mu.Lock()
	cancel := r.running[id]
	r.mu.Unlock()
	if cancel != nil {
		cancel(ErrStopped)
	}
}

// Running reports how many jobs this process runs.
func (r *Runner) Running() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.running)
}

// Run claims job id under a fresh token and runs it until it ends. It returns nil when
// the job ended, was not runnable, was stopped, or its lease was lost (another worker has
// it); ctx's error when ctx ended first (the worker is stopping: the lease is released for
// another worker to resume the job at once); and an error when Fail returns one (it could
// not record the failure, or wants the run tried again): the queue retries the run.
func (r *Runner) Run(ctx context.Context, id string, claim Claim) error {
	token := uuid.NewString()
	job, ok, err := claim(ctx, id, token)
	if err != nil || !ok {
		return err
	}
	claimsTotal.WithLabelValues(r.cfg.Noun).Inc()
	running.WithLabelValues(r.cfg.Noun).Inc()
	defer running.WithLabelValues(r.cfg.Noun).Dec()
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	r.mu.Lock()
	r.running[id] = cancel
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.running, id)
		r.mu.Unlock()
	}()
	renewed := make(chan struct{})
	go func() {
		defer close(renewed)
		r.renew(runCtx, id, token, cancel)
	}()
	// The lease is given back however the run ends: a job still active is free for the
	// next claim at once instead of after the expiry (a no-op when a finishing write
	// already cleared it or another worker holds it).
	defer func() {
		relCtx, relCancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer relCancel()
		if err := r.store.Release(relCtx, id, token); err != nil {
			r.log.WarnContext(relCtx, r.cfg.Noun+" lease release failed", r.cfg.Noun, id, "error", err)
		}
	}()
	defer func() { cancel(nil); <-renewed }()

	err = job.Run(runCtx)
	cause := context.Cause(runCtx)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrLeaseLost), errors.Is(cause, ErrLeaseLost), errors.Is(cause, ErrStopped):
		return nil
	case ctx.Err() != nil:
		return ctx.Err()
	}
	r.log.WarnContext(ctx, r.cfg.Noun+" failed", r.cfg.Noun, id, "error", err)
	failCtx, failCancel := context.WithTimeout(context.WithoutCancel(runCtx), r.cfg.FailTimeout)
	defer failCancel()
	switch ferr := job.Fail(failCtx, err); {
	case ferr == nil, errors.Is(ferr, ErrLeaseLost):
		return nil
	case errors.Is(ferr, err):
		return ferr // Fail recorded the error as one to try again
	default:
		return errors.Join(err, ferr)
	}
}

// renew keeps the lease alive every RenewEvery and cancels the run with ErrLeaseLost when
// the lease is lost, or when no renewal succeeded for the expiry (the worker is cut off
// from the database: another worker may hold the job by now, and this one's writes would
// be refused anyway).
func (r *Runner) renew(ctx context.Context, id, token string, cancel context.CancelCauseFunc) {
	t := time.NewTicker(r.cfg.RenewEvery)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := r.store.Renew(ctx, id, token)
		switch {
		case err == nil:
			last = time.Now()
		case errors.Is(err, ErrLeaseLost):
			cancel(ErrLeaseLost)
			return
		case ctx.Err() != nil:
			return
		case time.Since(last) >= r.cfg.Expiry:
			r.log.WarnContext(ctx, r.cfg.Noun+" lease not renewed within its expiry: stopping", r.cfg.Noun, id, "error", err)
			cancel(ErrLeaseLost)
			return
		default:
			r.log.WarnContext(ctx, r.cfg.Noun+" lease renewal failed", r.cfg.Noun, id, "error", err)
		}
	}
}
