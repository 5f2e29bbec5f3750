package jobrun

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"

	"github.com/thefold/thefold/pkg/wait"
)

// Args is a service's River job that runs one job of its store: its Kind names the
// service's job kind, Job the id of the row it runs.
type Args interface {
	river.JobArgs
	Job() string
}

// QueueConfig describes a service's queue of runs.
type QueueConfig[A Args] struct {
	// Name is the River queue; MaxWorkers how many runs this process runs at once;
	// MaxAttempts how often River retries a run that returned an error.
	Name        string
	MaxWorkers  int
	MaxAttempts int
	// New returns the River job that runs job id.
	New func(id string) A
	// Run runs job id (typically Runner.Run with the service's claim).
	Run func(ctx context.Context, id string) error
}

// Enqueuer starts runs: Enqueue adds a run of the job (or build) id in tx, so the run exists
// exactly when the transaction commits. Queue is one; a service's handlers take this
// interface so their tests can count what they enqueue.
type Enqueuer interface {
	Enqueue(ctx context.Context, tx pgx.Tx, id string) error
}

// Queue is the River client of one service's runs, in the pool's schema.
type Queue[A Args] struct {
	client *river.Client[pgx.Tx]
	cfg    QueueConfig[A]
	log    *slog.Logger
}

// worker runs one River job: a run of the job it names.
type worker[A Args] struct {
	river.WorkerDefaults[A]
	run func(ctx context.Context, id string) error
}

func (w *worker[A]) Work(ctx context.Context, job *river.Job[A]) error {
	return w.run(ctx, job.Args.Job())
}

// Timeout: a run lasts as long as its job's budget allows; its lease, not River, notices a
// dead worker. (River's rescuer leaves jobs with a negative timeout alone.)
func (w *worker[A]) Timeout(*river.Job[A]) time.Duration { return -1 }

// NewQueue migrates River's tables in pool's schema and returns the queue's client (not
// started: see Serve).
func NewQueue[A Args](ctx context.Context, pool *pgxpool.Pool, cfg QueueConfig[A], log *slog.Logger) (*Queue[A], error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, nil)
	if err != nil {
		return nil, err
	}
	if err := migrateLocked(ctx, pool, func() error {
		_, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil)
		return err
	}); err != nil {
		return nil, fmt.Errorf("jobrun: job queue migrations: %w", err)
	}
	workers := river.NewWorkers()
	river.AddWorker(workers, &worker[A]{run: cfg.Run})
	client, err := river.NewClient(driver, &river.Config{
		Queues:  map[string]river.QueueConfig{cfg.Name: {MaxWorkers: cfg.MaxWorkers}},
		Workers: workers,
		Logger:  log,
	})
	if err != nil {
		return nil, fmt.Errorf("jobrun: job queue: %w", err)
	}
	return &Queue[A]{client: client, cfg: cfg, log: log}, nil
}

func (q *Queue[A]) opts() *river.InsertOpts {
	return &river.InsertOpts{Queue: q.cfg.Name, MaxAttempts: q.cfg.MaxAttempts}
}

// Enqueue adds a run of job id in tx, so the run exists exactly when tx commits.
func (q *Queue[A]) Enqueue(ctx context.Context, tx pgx.Tx, id string) error {
	_, err := q.client.InsertTx(ctx, tx, q.cfg.New(id), q.opts())
	return err
}

// Insert adds a run of job id.
func (q *Queue[A]) Insert(ctx context.Context, id string) error {
	_, err := q.client.Insert(ctx, q.cfg.New(id), q.opts())
	return err
}

// Serve works the queue until ctx ends, then stops: running jobs are cancelled (their
// runs release their leases for another worker).
func (q *Queue[A]) Serve(ctx context.Context) error {
	if err := q.client.Start(ctx); err != nil {
		return fmt.Errorf("job queue: %w", err)
	}
	<-ctx.Done()
	stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return q.client.StopAndCancel(stopCtx)
}

// ReapConfig tunes Queue.Reap.
type ReapConfig struct {
	// Expiry is the lease expiry; the reaper looks every third of it.
	Expiry time.Duration
	// Limit is the most jobs taken per look (default 100).
	Limit int
	// Also runs first at every look (the agent resumes jobs a breaker paused).
	Also func(ctx context.Context) error
}

// Reap resumes the jobs of st nobody runs until ctx ends: every third of the expiry it
// takes the stale ones (TakeStale: each at most once per expiry, whichever replica looks)
// and inserts a run of each.
func (q *Queue[A]) Reap(ctx context.Context, st Store, cfg ReapConfig) error {
	if cfg.Limit <= 0 {
		cfg.Limit = 100
	}
	wait.Every(ctx, cfg.Expiry/3, func(ctx context.Context) {
		if cfg.Also != nil {
			if err := cfg.Also(ctx); err != nil && ctx.Err() == nil {
				q.log.WarnContext(ctx, "reaper", "queue", q.cfg.Name, "error", err)
			}
		}
		ids, err := st.TakeStale(ctx, cfg.Expiry, cfg.Limit)
		if err != nil {
			if ctx.Err() == nil {
				q.log.WarnContext(ctx, "reaper: take stale jobs", "queue", q.cfg.Name, "error", err)
			}
			return
		}
		for _, id := range ids {
			if err := q.Insert(ctx, id); err != nil {
				q.log.WarnContext(ctx, "reaper: resume", "queue", q.cfg.Name, "id", id, "error", err)
				continue
			}
			q.log.InfoContext(ctx, "resuming a job nobody runs", "queue", q.cfg.Name, "id", id)
		}
	})
	return nil
}

// migrateLocked runs migrate while this session holds the schema's queue-migration lock:
// replicas starting at once on a fresh schema would otherwise race River's DDL (two
// CREATE FUNCTIONs of the same name, and one fails on the catalog's unique index). River's
// migrator takes no lock of its own.
func migrateLocked(ctx context.Context, pool *pgxpool.Pool, migrate func() error) error {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer conn.Release()
	const key = `hashtext('thefold/jobrun.migrate/' || current_schema())`
	if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock(`+key+`)`); err != nil {
		return fmt.Errorf("take the migration lock: %w", err)
	}
	defer func() {
		uctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if _, err := conn.Exec(uctx, `SELECT pg_advisory_unlock(`+key+`)`); err != nil {
			// Never hand the pool a session that still holds the lock: closing it frees it.
			_ = conn.Conn().Close(uctx)
		}
	}()
	return migrate()
}
