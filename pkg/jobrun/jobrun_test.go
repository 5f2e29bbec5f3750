package jobrun_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/jobrun"
)

// The table has the shape Leases expects, and writes records the fenced writes of runs.
var migrations = fstest.MapFS{"00001_jobs.sql": {Data: []byte(`-- +goose Up
CREATE TABLE jobs (
    id          UUID PRIMARY KEY,
    status      TEXT NOT NULL,
    lease_id    UUID,
    lease_time  TIMESTAMPTZ,
    update_time TIMESTAMPTZ NOT NULL DEFAULT now()
);
CREATE TABLE writes (
    seq   BIGSERIAL PRIMARY KEY,
    job   UUID NOT NULL,
    token UUID NOT NULL
);
-- +goose Down
DROP TABLE writes;
DROP TABLE jobs;
`)}}

type env struct {
	pool   *pgxpool.Pool
	leases *jobrun.Leases
}

func newEnv(t *testing.T) *env {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "jobrun", migrations)
	return &env{pool: pool, leases: &jobrun.Leases{DB: pool, Table: "jobs", Active: []string{"queued", "running"}}}
}

// job inserts a job in status.
func (e *env) job(t *testing.T, status string) string {
	t.Helper()
	id := uuid.NewString()
	if _, err := e.pool.Exec(t.Context(), `INSERT INTO jobs (id, status) VALUES ($1, $2)`, id, status); err != nil {
		t.Fatal(err)
	}
	return id
}

// write is one fenced write of the run holding token: a row in writes, and status when
// set (a status outside the active ones ends the job and drops the lease).
func (e *env) write(ctx context.Context, id, token, status string) error {
	return pgx.BeginFunc(ctx, e.pool, func(tx pgx.Tx) error {
		if _, err := e.leases.Fence(ctx, tx, id, token); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `INSERT INTO writes (job, token) VALUES ($1, $2)`, id, token); err != nil {
			return err
		}
		if status == "" {
			return nil
		}
		_, err := tx.Exec(ctx, `UPDATE jobs SET status = $2, update_time = now(),
			lease_id = CASE WHEN $2 IN ('queued', 'running') THEN lease_id END,
			lease_time = CASE WHEN $2 IN ('queued', 'running') THEN lease_time END WHERE id = $1`, id, status)
		return err
	})
}

func (e *env) count(t *testing.T, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// job is a run: work is called with the run's context and token.
type job struct {
	work   func(ctx context.Context, token string) error
	failed atomic.Pointer[error]
}

func (j *job) Run(ctx context.Context) error { return j.work(ctx, "") }
func (j *job) Fail(_ context.Context, err error) error {
	j.failed.Store(&err)
	return nil
}

// claim claims with the generic claim and runs work with the token.
func (e *env) claim(claims *atomic.Int32, work func(ctx context.Context, id, token string) error) jobrun.Claim {
	return func(ctx context.Context, id, token string) (jobrun.Job, bool, error) {
		ok, err := e.leases.Claim(ctx, e.pool, id, token, time.Minute)
		if err != nil || !ok {
			return nil, ok, err
		}
		if claims != nil {
			claims.Add(1)
		}
		return &job{work: func(ctx context.Context, _ string) error { return work(ctx, id, token) }}, true, nil
	}
}

// partitioned is a store whose renewals fail (the worker is cut off from the database)
// while cut is set.
type partitioned struct {
	jobrun.Store
	cut atomic.Bool
}

func (p *partitioned) Renew(ctx context.Context, id, token string) error {
	if p.cut.Load() {
		return errors.New("connection refused")
	}
	return p.Store.Renew(ctx, id, token)
}

// A worker that lost its lease cannot write: a run cut off from the database keeps on
// writing (it does not notice its context), the reaper takes its job after the expiry and
// a second worker runs it; from then on every write of the first is refused, so the
// writes of the two never interleave, and the first run ends without failing the job.
func TestLostLeaseFencesOldRunnersWrites(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	id := e.job(t, "running")
	const expiry = 600 * time.Millisecond
	storeA := &partitioned{Store: e.leases}
	runnerA := jobrun.NewRunner(storeA, jobrun.RunnerConfig{Expiry: expiry, RenewEvery: 50 * time.Millisecond}, nil)
	runnerB := jobrun.NewRunner(e.leases, jobrun.RunnerConfig{Expiry: expiry, RenewEvery: 50 * time.Millisecond}, nil)

	var tokenA atomic.Value
	var refused atomic.Int32
	wroteA := make(chan struct{}, 100)
	resultA := make(chan error, 1)
	go func() {
		resultA <- runnerA.Run(ctx, id, e.claim(nil, func(_ context.Context, id, token string) error {
			tokenA.Store(token)
			// A stalled worker: it goes on with a context of its own.
			for {
				err := e.write(context.Background(), id, token, "")
				if errors.Is(err, jobrun.ErrLeaseLost) {
					refused.Add(1)
					if refused.Load() >= 5 {
						return err
					}
				} else if err != nil {
					return err
				}
				wroteA <- struct{}{}
				time.Sleep(20 * time.Millisecond)
			}
		}))
	}()
	for range 3 {
		select {
		case <-wroteA:
		case <-time.After(10 * time.Second):
			t.Fatal("the first run did not write")
		}
	}
	storeA.cut.Store(true)
	if ids, err := e.leases.TakeStale(ctx, expiry, 10); err != nil || len(ids) != 0 {
		t.Fatalf("TakeStale of a live lease = %v, %v; want none", ids, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		ids, err := e.leases.TakeStale(ctx, expiry, 10)
		if err != nil {
			t.Fatal(err)
		}
		if slices.Equal(ids, []string{id}) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the stale job was never taken")
		}
		time.Sleep(20 * time.Millisecond)
	}
	var tokenB string
	err := runnerB.Run(ctx, id, e.claim(nil, func(ctx context.Context, id, token string) error {
		tokenB = token
		for range 3 {
			if err := e.write(ctx, id, token, ""); err != nil {
				return err
			}
			time.Sleep(30 * time.Millisecond)
		}
		return e.write(ctx, id, token, "done")
	}))
	if err != nil || tokenB == "" {
		t.Fatalf("the second run: %v (token %q)", err, tokenB)
	}
	select {
	case err := <-resultA:
		if err != nil {
			t.Errorf("the first run = %v, want nil (its lease was lost)", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the first run never stopped")
	}
	if refused.Load() == 0 {
		t.Error("no write of the first run was refused")
	}
	a := tokenA.Load().(string)
	if n := e.count(t, `SELECT count(*) FROM writes WHERE token = $1 AND seq > (SELECT min(seq) FROM writes WHERE token = $2)`, a, tokenB); n != 0 {
		t.Errorf("%d writes of the first run after the second took over", n)
	}
	if n := e.count(t, `SELECT count(*) FROM writes WHERE token = $1`, tokenB); n != 4 {
		t.Errorf("the second run wrote %d times, want 4", n)
	}
	if n := e.count(t, `SELECT count(*) FROM jobs WHERE id = $1 AND status = 'done' AND lease_id IS NULL`, id); n != 1 {
		t.Error("the job did not end done without a lease")
	}
}

// A run whose lease is lost (here: a person's change cleared it) has its context
// cancelled at the next renewal, and ends without failing the job.
func TestLostLeaseCancelsRun(t *testing.T) {
	e := newEnv(t)
	id := e.job(t, "running")
	r := jobrun.NewRunner(e.leases, jobrun.RunnerConfig{Expiry: time.Minute, RenewEvery: 50 * time.Millisecond}, nil)
	started := make(chan struct{})
	var cause error
	j := &job{}
	done := make(chan error, 1)
	go func() {
		done <- r.Run(t.Context(), id, func(ctx context.Context, id, token string) (jobrun.Job, bool, error) {
			ok, err := e.leases.Claim(ctx, e.pool, id, token, time.Minute)
			j.work = func(ctx context.Context, _ string) error {
				close(started)
				<-ctx.Done()
				cause = context.Cause(ctx)
				return ctx.Err()
			}
			return j, ok, err
		})
	}()
	<-started
	if _, err := e.pool.Exec(t.Context(), `UPDATE jobs SET status = 'paused', lease_id = NULL, lease_time = NULL WHERE id = $1`, id); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil || !errors.Is(cause, jobrun.ErrLeaseLost) {
			t.Errorf("Run = %v with cause %v; want nil with ErrLeaseLost", err, cause)
		}
		if j.failed.Load() != nil {
			t.Error("a lost lease failed the job")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the run went on after its lease was lost")
	}
}

// A dead worker's job is taken over exactly once: reapers racing over many stale jobs
// take each once, and leave live and finished ones alone.
func TestTakeStaleOncePerRacingReapers(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	var stale, live []string
	for range 40 {
		id := e.job(t, "running")
		stale = append(stale, id)
		if _, err := e.pool.Exec(ctx, `UPDATE jobs SET lease_id = $2, lease_time = now() - interval '1 hour' WHERE id = $1`, id, uuid.NewString()); err != nil {
			t.Fatal(err)
		}
	}
	for range 5 {
		id := e.job(t, "running")
		live = append(live, id)
		if ok, err := e.leases.Claim(ctx, e.pool, id, uuid.NewString(), time.Minute); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	e.job(t, "done")

	var mu sync.Mutex
	var taken []string
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			<-start
			for range 50 { // bounded: a TakeStale that hands a job out again would never run dry
				ids, err := e.leases.TakeStale(ctx, time.Minute, 3)
				if err != nil {
					t.Error(err)
					return
				}
				if len(ids) == 0 {
					return
				}
				mu.Lock()
				taken = append(taken, ids...)
				mu.Unlock()
			}
		})
	}
	close(start)
	wg.Wait()
	slices.Sort(taken)
	slices.Sort(stale)
	if !slices.Equal(taken, stale) {
		t.Fatalf("taken %d jobs (%d distinct), want each of the %d stale ones once", len(taken), len(slices.Compact(slices.Clone(taken))), len(stale))
	}
	if again, err := e.leases.TakeStale(ctx, time.Minute, 100); err != nil || len(again) != 0 {
		t.Errorf("TakeStale again within the expiry = %v, %v; want none", again, err)
	}
	// Handed out, a job is free to claim at once.
	if ok, err := e.leases.Claim(ctx, e.pool, stale[0], uuid.NewString(), time.Minute); err != nil || !ok {
		t.Errorf("Claim of a job taken from a dead worker: %v %v", ok, err)
	}
}

type runArgs struct {
	ID string `json:"id"`
}

func (runArgs) Kind() string  { return "jobrun_test_run" }
func (a runArgs) Job() string { return a.ID }

// Two replicas, each with its River queue and reaper, find a dead worker's job: it is
// resumed once, by one run, which finishes it.
func TestReapersResumeDeadWorkersJobOnce(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	id := e.job(t, "running")
	if _, err := e.pool.Exec(ctx, `UPDATE jobs SET lease_id = $2, lease_time = now() - interval '1 hour' WHERE id = $1`, id, uuid.NewString()); err != nil {
		t.Fatal(err)
	}
	const expiry = 300 * time.Millisecond
	var claims, works atomic.Int32
	var wg sync.WaitGroup
	for range 2 {
		r := jobrun.NewRunner(e.leases, jobrun.RunnerConfig{Expiry: expiry}, nil)
		q, err := jobrun.NewQueue(ctx, e.pool, jobrun.QueueConfig[runArgs]{
			Name: "jobs", MaxWorkers: 2, MaxAttempts: 3,
			New: func(id string) runArgs { return runArgs{ID: id} },
			Run: func(ctx context.Context, id string) error {
				works.Add(1)
				return r.Run(ctx, id, e.claim(&claims, func(ctx context.Context, id, token string) error {
					time.Sleep(2 * expiry) // longer than a reaper's period: renewal keeps it
					return e.write(ctx, id, token, "done")
				}))
			},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() { _ = q.Serve(ctx) })
		wg.Go(func() { _ = q.Reap(ctx, e.leases, jobrun.ReapConfig{Expiry: expiry}) })
	}
	deadline := time.Now().Add(20 * time.Second)
	for e.count(t, `SELECT count(*) FROM jobs WHERE id = $1 AND status = 'done'`, id) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the dead worker's job was never finished")
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(4 * expiry) // long enough for a second take-over to show
	cancel()
	wg.Wait()
	if n := e.count(t, `SELECT count(*) FROM writes WHERE job = $1`, id); n != 1 || claims.Load() != 1 {
		t.Errorf("the job was claimed %d times and written %d times (River runs: %d); want once", claims.Load(), n, works.Load())
	}
	if n := e.count(t, `SELECT count(*) FROM river_job WHERE kind = 'jobrun_test_run'`); n != 1 {
		t.Errorf("%d runs enqueued, want 1", n)
	}
}

// Renewal keeps a run alive for many times its expiry: reapers looking all along never
// take it, no other worker can claim it, and all its writes land. The expiry leaves a
// renewal room for the scheduler of a loaded CI machine (400 ms, renewed every 133 ms, lost
// its lease once under make test-unit's four race-built binaries on two cores).
func TestRenewalKeepsLongRunAlive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	ctx := t.Context()
	id := e.job(t, "running")
	const expiry = 1200 * time.Millisecond
	r := jobrun.NewRunner(e.leases, jobrun.RunnerConfig{Expiry: expiry}, nil)
	stop := make(chan struct{})
	reaped := make(chan []string, 1)
	go func() {
		var got []string
		for {
			select {
			case <-stop:
				reaped <- got
				return
			case <-time.After(25 * time.Millisecond):
			}
			ids, err := e.leases.TakeStale(ctx, expiry, 10)
			if err != nil {
				t.Error(err)
			}
			got = append(got, ids...)
		}
	}()
	var stolen atomic.Bool
	err := r.Run(ctx, id, e.claim(nil, func(ctx context.Context, id, token string) error {
		for range 10 {
			time.Sleep(expiry / 2)
			if ok, err := e.leases.Claim(ctx, e.pool, id, uuid.NewString(), expiry); err != nil || ok {
				stolen.Store(true)
			}
			if err := e.write(ctx, id, token, ""); err != nil {
				return err
			}
		}
		return e.write(ctx, id, token, "done")
	}))
	close(stop)
	if got := <-reaped; len(got) != 0 {
		t.Errorf("reapers took a renewed job: %v", got)
	}
	if err != nil || stolen.Load() {
		t.Fatalf("a run of 5 expiries: %v (claimed by another: %v)", err, stolen.Load())
	}
	if n := e.count(t, `SELECT count(*) FROM writes WHERE job = $1`, id); n != 11 {
		t.Errorf("%d writes landed, want 11", n)
	}
}

// The lease is given back however a run ends: a job left active by a run that returned,
// or by a worker that is stopping, can be claimed at once, not after the expiry.
func TestReleaseOnFinish(t *testing.T) {
	e := newEnv(t)
	r := jobrun.NewRunner(e.leases, jobrun.RunnerConfig{Expiry: time.Hour}, nil)
	free := func(id string) bool {
		return e.count(t, `SELECT count(*) FROM jobs WHERE id = $1 AND lease_id IS NULL AND lease_time IS NULL`, id) == 1
	}

	returned := e.job(t, "running")
	if err := r.Run(t.Context(), returned, e.claim(nil, func(ctx context.Context, id, token string) error {
		return e.write(ctx, id, token, "") // e.g. waits for something: still running
	})); err != nil {
		t.Fatal(err)
	}
	if !free(returned) {
		t.Error("the lease was kept after the run returned")
	}

	stopping := e.job(t, "running")
	ctx, cancel := context.WithCancel(t.Context())
	err := r.Run(ctx, stopping, e.claim(nil, func(ctx context.Context, id, token string) error {
		cancel()
		<-ctx.Done()
		return ctx.Err()
	}))
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Run of a stopping worker = %v, want context.Canceled (River retries it)", err)
	}
	if !free(stopping) {
		t.Error("the lease was kept by a stopping worker")
	}
	if ok, err := e.leases.Claim(t.Context(), e.pool, stopping, uuid.NewString(), time.Hour); err != nil || !ok {
		t.Errorf("Claim after release: %v %v", ok, err)
	}
	if r.Running() != 0 {
		t.Errorf("Running = %d after the runs ended", r.Running())
	}

	// A run failing for its own reason is recorded by Fail, and its lease given back.
	failing := e.job(t, "running")
	j := &job{work: func(context.Context, string) error { return errors.New("boom") }}
	if err := r.Run(t.Context(), failing, func(ctx context.Context, id, token string) (jobrun.Job, bool, error) {
		ok, err := e.leases.Claim(ctx, e.pool, id, token, time.Hour)
		return j, ok, err
	}); err != nil {
		t.Errorf("Run of a failing job = %v, want nil (Fail recorded it)", err)
	}
	if f := j.failed.Load(); f == nil || (*f).Error() != "boom" {
		t.Error("Fail was not called with the run's error")
	}
	if !free(failing) {
		t.Error("the lease was kept after a failed run")
	}
}

// Replicas start at once on a fresh schema: each migrates River's tables, and none fails on
// another's half-made DDL (as a builder replica did before the migration took a lock).
func TestQueuesOfReplicasMigrateAtOnce(t *testing.T) {
	_, url := dbtest.NewDatabase(t, "jobrun", migrations)
	ctx := t.Context()
	const replicas = 4
	errs := make(chan error, replicas)
	var wg sync.WaitGroup
	for range replicas {
		// A pool each, as each replica has its own.
		pool, err := db.Open(ctx, url, "jobrun", 4)
		if err != nil {
			t.Fatal(err)
		}
		defer pool.Close()
		wg.Go(func() {
			_, err := jobrun.NewQueue(ctx, pool, jobrun.QueueConfig[runArgs]{
				Name: "jobs", MaxWorkers: 1, MaxAttempts: 1,
				New: func(id string) runArgs { return runArgs{ID: id} },
				Run: func(context.Context, string) error { return nil },
			}, nil)
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Errorf("NewQueue: %v", err)
		}
	}
}
