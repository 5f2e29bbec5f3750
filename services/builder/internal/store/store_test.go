package store_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/events"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/builder/internal/store"
	"github.com/thefold/thefold/services/builder/migrations"
)

const (
	alice = "alice"
	bob   = "bob"
)

const (
	pending   = builderv1.BuildStatus_BUILD_STATUS_PENDING
	running   = builderv1.BuildStatus_BUILD_STATUS_RUNNING
	completed = builderv1.BuildStatus_BUILD_STATUS_COMPLETED
	failed    = builderv1.BuildStatus_BUILD_STATUS_FAILED
	cancelled = builderv1.BuildStatus_BUILD_STATUS_CANCELLED

	stepPending   = builderv1.BuildStepStatus_BUILD_STEP_STATUS_PENDING
	stepRunning   = builderv1.BuildStepStatus_BUILD_STEP_STATUS_RUNNING
	stepSucceeded = builderv1.BuildStepStatus_BUILD_STEP_STATUS_SUCCEEDED
	stepFailed    = builderv1.BuildStepStatus_BUILD_STEP_STATUS_FAILED
	stepSkipped   = builderv1.BuildStepStatus_BUILD_STEP_STATUS_SKIPPED
)

func newStore(t *testing.T) (*store.Store, *pgxpool.Pool) {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "builder", migrations.FS)
	hub := events.NewHub(pool, events.WithPollInterval(50*time.Millisecond))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = hub.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return store.New(pool, hub), pool
}

// recorder is an enqueue func that records the ids it was called with, or fails.
type recorder struct {
	mu   sync.Mutex
	ids  []string
	fail error
}

func (r *recorder) enqueue(_ context.Context, tx pgx.Tx, id string) error {
	if tx == nil {
		return errors.New("enqueue: no transaction")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	r.ids = append(r.ids, id)
	return nil
}

func (r *recorder) got() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.ids)
}

var (
	sandboxID = "5b0c2f5e-1a62-4b1e-9e0e-3b1f2a4c5d6e"
	jobA      = "0a000000-0000-4000-8000-00000000000a"
	jobB      = "0b000000-0000-4000-8000-00000000000b"
	taskA     = "1a000000-0000-4000-8000-00000000001a"
)

// newBuild is a build of owner with request reqID, changed by mods.
func newBuild(owner, reqID string, mods ...func(*store.Build)) *store.Build {
	b := &store.Build{
		BuildJob: &builderv1.BuildJob{
			OwnerId: owner, RequestId: reqID, JobId: jobA, TaskId: taskA, SandboxId: sandboxID, Repo: "acme/app",
			Model: "m1",
			Plan: &typev1.Plan{Summary: "add a thing", Steps: []*typev1.PlanStep{
				{Id: "a", Path: "a.go", Action: typev1.FileAction_FILE_ACTION_CREATE, Description: "file a"},
				{Id: "b", Command: []string{"go", "test", "./..."}, DependsOn: []string{"a"}},
			}},
			Budget: &typev1.Budget{MaxTokens: 1000},
		},
		AdditionalContext: "ctx", MemoryHints: []string{"prefer pgx.Batch", "wrap errors with %w"}, RequestedStrategy: builderv1.BuildStrategy_BUILD_STRATEGY_SEQUENTIAL, MaxIterations: 5,
		TaskTitle: "Add a thing", TaskDescription: "The thing goes in a.go.\n\nIt must be tested.", ContextPaths: []string{"b.go", "lib/c.go"},
	}
	for _, m := range mods {
		m(b)
	}
	return b
}

func hashOf(s string) []byte { return store.RequestHash(&typev1.Plan{Summary: s}) }

func mustCreate(t *testing.T, s *store.Store, b *store.Build, r *recorder) *store.Build {
	t.Helper()
	if r == nil {
		r = &recorder{}
	}
	got, created, err := s.Create(t.Context(), b, hashOf(b.RequestId), r.enqueue)
	if err != nil {
		t.Fatalf("Create(%s): %v", b.RequestId, err)
	}
	if !created {
		t.Fatalf("Create(%s): created = false", b.RequestId)
	}
	return got
}

func mustClaim(t *testing.T, s *store.Store, id, lease string) (*store.Build, []*store.Step) {
	t.Helper()
	b, steps, ok, err := s.Claim(t.Context(), id, lease, time.Minute)
	if err != nil || !ok {
		t.Fatalf("Claim(%s): ok=%v err=%v", id, ok, err)
	}
	return b, steps
}

func mustApply(t *testing.T, s *store.Store, lease string, c store.Change) {
	t.Helper()
	if err := s.Apply(t.Context(), lease, c); err != nil {
		t.Fatalf("Apply: %v", err)
	}
}

func step(buildID string, n int32, st builderv1.BuildStepStatus, path string) *store.Step {
	return &store.Step{BuildStep: &builderv1.BuildStep{
		BuildId: buildID, StepNumber: n, Phase: builderv1.BuildPhase_BUILD_PHASE_IMPLEMENT,
		Kind: builderv1.StepKind_STEP_KIND_FILE, PlanStepId: path, Action: typev1.FileAction_FILE_ACTION_CREATE,
		Path: path, Status: st,
	}, Description: "write " + path}
}

// eventTypes are the stored event types of build id, in id order.
func eventTypes(t *testing.T, pool *pgxpool.Pool, id string) []string {
	t.Helper()
	rows, err := pool.Query(t.Context(), `SELECT type FROM events WHERE stream = 'build' AND aggregate_id = $1 ORDER BY id`, id)
	if err != nil {
		t.Fatal(err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func countRows(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	if err := pool.QueryRow(t.Context(), sql, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

func TestCreate(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()

	t.Run("enqueue failure rolls back", func(t *testing.T) {
		boom := errors.New("queue down")
		r := &recorder{fail: boom}
		_, _, err := s.Create(ctx, newBuild(alice, "r-fail"), hashOf("x"), r.enqueue)
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v, want %v", err, boom)
		}
		if n := countRows(t, pool, `SELECT count(*) FROM builds WHERE request_id = 'r-fail'`); n != 0 {
			t.Errorf("%d builds stored after a failed enqueue, want 0", n)
		}
		if n := countRows(t, pool, `SELECT count(*) FROM events`); n != 0 {
			t.Errorf("%d events stored after a failed enqueue, want 0", n)
		}
	})

	r := &recorder{}
	b, created, err := s.Create(ctx, newBuild(alice, "r1"), hashOf("one"), r.enqueue)
	if err != nil || !created {
		t.Fatalf("Create: created=%v err=%v", created, err)
	}
	if _, err := uuid.Parse(b.Id); err != nil {
		t.Fatalf("id %q: %v", b.Id, err)
	}
	if got := r.got(); !slices.Equal(got, []string{b.Id}) {
		t.Errorf("enqueued %v, want [%s]", got, b.Id)
	}
	if b.Status != pending || b.OwnerId != alice || b.RequestId != "r1" || b.JobId != jobA || b.TaskId != taskA ||
		b.SandboxId != sandboxID || b.Repo != "acme/app" || b.Model != "m1" || b.AdditionalContext != "ctx" ||
		b.RequestedStrategy != builderv1.BuildStrategy_BUILD_STRATEGY_SEQUENTIAL || b.MaxIterations != 5 ||
		b.Generation != 0 || b.CreateTime == nil || !slices.Equal(b.MemoryHints, []string{"prefer pgx.Batch", "wrap errors with %w"}) {
		t.Errorf("created build = %v (+%q %q %v %d)", b.BuildJob, b.AdditionalContext, b.MemoryHints, b.RequestedStrategy, b.MaxIterations)
	}
	if b.TaskTitle != "Add a thing" || b.TaskDescription != "The thing goes in a.go.\n\nIt must be tested." || !slices.Equal(b.ContextPaths, []string{"b.go", "lib/c.go"}) {
		t.Errorf("created build's task %q %q, context paths %q", b.TaskTitle, b.TaskDescription, b.ContextPaths)
	}
	if !proto.Equal(b.Plan, newBuild(alice, "r1").Plan) {
		t.Errorf("plan = %v", b.Plan)
	}
	if b.Budget.GetMaxTokens() != 1000 {
		t.Errorf("budget = %v", b.Budget)
	}
	if got := eventTypes(t, pool, b.Id); !slices.Equal(got, []string{"created"}) {
		t.Errorf("events = %v, want [created]", got)
	}

	t.Run("retry returns the first build", func(t *testing.T) {
		again, created, err := s.Create(ctx, newBuild(alice, "r1"), hashOf("one"), r.enqueue)
		if err != nil {
			t.Fatal(err)
		}
		if created || again.Id != b.Id {
			t.Errorf("retry: created=%v id=%s, want false %s", created, again.Id, b.Id)
		}
		if got := r.got(); len(got) != 1 {
			t.Errorf("enqueued %v, want once", got)
		}
		if got := eventTypes(t, pool, b.Id); len(got) != 1 {
			t.Errorf("events after retry = %v, want one", got)
		}
	})

	t.Run("request_id reused for another request", func(t *testing.T) {
		_, _, err := s.Create(ctx, newBuild(alice, "r1"), hashOf("two"), r.enqueue)
		grpctest.WantCode(t, err, codes.InvalidArgument, "request_id")
		if n := countRows(t, pool, `SELECT count(*) FROM builds WHERE owner_id = 'alice' AND request_id = 'r1'`); n != 1 {
			t.Errorf("%d builds with r1, want 1", n)
		}
	})

	t.Run("request ids are per owner", func(t *testing.T) {
		rb := &recorder{}
		other, created, err := s.Create(ctx, newBuild(bob, "r1"), hashOf("two"), rb.enqueue)
		if err != nil || !created || other.Id == b.Id || other.OwnerId != bob {
			t.Fatalf("bob's create: %v created=%v err=%v", other.GetId(), created, err)
		}
	})

	t.Run("another owner's build is not found", func(t *testing.T) {
		_, err := s.Get(ctx, bob, b.Id)
		if !errors.Is(err, errs.ErrNotFound) {
			t.Errorf("Get as bob: %v, want ErrNotFound", err)
		}
		got, err := s.Get(ctx, alice, b.Id)
		if err != nil || got.Id != b.Id {
			t.Errorf("Get as alice: %v, %v", got, err)
		}
		if _, err := s.Get(ctx, alice, uuid.NewString()); !errors.Is(err, errs.ErrNotFound) {
			t.Errorf("Get missing: %v, want ErrNotFound", err)
		}
	})
}

func TestLease(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	b := mustCreate(t, s, newBuild(alice, "lease"), nil)
	l1, l2, l3 := uuid.NewString(), uuid.NewString(), uuid.NewString()

	s.Instance = "builder-1"
	claimed, steps, ok, err := s.Claim(ctx, b.Id, l1, time.Minute)
	if err != nil || !ok {
		t.Fatalf("first Claim: ok=%v err=%v", ok, err)
	}
	if claimed.Id != b.Id || claimed.Status != pending || len(steps) != 0 {
		t.Errorf("claimed %s %v with %d steps", claimed.Id, claimed.Status, len(steps))
	}
	if claimed.Instance != "builder-1" || claimed.Claims != 1 {
		t.Errorf("first claim recorded instance %q, %d claims", claimed.Instance, claimed.Claims)
	}
	if _, _, ok, err := s.Claim(ctx, b.Id, l2, time.Minute); err != nil || ok {
		t.Fatalf("second Claim with a fresh first lease: ok=%v err=%v, want false", ok, err)
	}
	if _, _, ok, err := s.Claim(ctx, b.Id, l1, time.Minute); err != nil || !ok {
		t.Errorf("re-Claim with the same lease: ok=%v err=%v, want true", ok, err)
	}
	if err := s.Renew(ctx, b.Id, l1); err != nil {
		t.Errorf("Renew(l1) = %v", err)
	}
	// The first worker stalls: its lease is older than the expiry.
	if _, err := pool.Exec(ctx, `UPDATE builds SET lease_time = now() - interval '2 minutes' WHERE id = $1`, b.Id); err != nil {
		t.Fatal(err)
	}
	s.Instance = "builder-2"
	taken, _, ok, err := s.Claim(ctx, b.Id, l2, time.Minute)
	if err != nil || !ok {
		t.Fatalf("Claim after expiry: ok=%v err=%v", ok, err)
	}
	// The take-over names its process; the refused claim counted nothing (two by l1, one now).
	if taken.Instance != "builder-2" || taken.Claims != 3 {
		t.Errorf("take-over recorded instance %q, %d claims; want builder-2, 3", taken.Instance, taken.Claims)
	}
	eventsBefore := eventTypes(t, pool, b.Id)

	// The stalled worker's write is fenced out.
	stale := proto.Clone(taken.BuildJob).(*builderv1.BuildJob)
	stale.Status, stale.Error = failed, "stale write"
	err = s.Apply(ctx, l1, store.Change{
		Build:  &store.Build{BuildJob: stale},
		Steps:  []*store.Step{step(b.Id, 1, stepFailed, "a.go")},
		Events: []*builderv1.WatchBuildResponse{store.LogEvent(1, 0, "stale")},
	})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Apply with the old lease: %v, want ErrLeaseLost", err)
	}
	if got, _ := s.Get(ctx, alice, b.Id); got.Status != pending || got.Error != "" {
		t.Errorf("after a fenced write: status %v error %q", got.Status, got.Error)
	}
	if n := countRows(t, pool, `SELECT count(*) FROM build_steps WHERE build_id = $1`, b.Id); n != 0 {
		t.Errorf("%d steps written by a fenced Apply", n)
	}
	if got := eventTypes(t, pool, b.Id); !slices.Equal(got, eventsBefore) {
		t.Errorf("events after a fenced Apply = %v, want %v", got, eventsBefore)
	}
	// Likewise a progress change (committed without waiting for its WAL flush).
	err = s.Apply(ctx, l1, store.Change{
		Build:    &store.Build{BuildJob: stale},
		Steps:    []*store.Step{step(b.Id, 1, stepFailed, "a.go")},
		Events:   []*builderv1.WatchBuildResponse{store.LogEvent(1, 0, "stale")},
		Progress: true,
	})
	if !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("progress Apply with the old lease: %v, want ErrLeaseLost", err)
	}
	if n := countRows(t, pool, `SELECT count(*) FROM build_steps WHERE build_id = $1`, b.Id); n != 0 {
		t.Errorf("%d steps written by a fenced progress Apply", n)
	}
	if err := s.Renew(ctx, b.Id, l1); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Renew(old lease) = %v, want ErrLeaseLost", err)
	}

	// The new holder writes (its step's start as progress).
	taken.Status = running
	mustApply(t, s, l2, store.Change{
		Build:    taken,
		Steps:    []*store.Step{step(b.Id, 1, stepRunning, "a.go")},
		Events:   []*builderv1.WatchBuildResponse{store.StatusEvent(pending, taken)},
		Progress: true,
	})
	if n := countRows(t, pool, `SELECT count(*) FROM build_steps WHERE build_id = $1`, b.Id); n != 1 {
		t.Errorf("%d steps after the holder's progress Apply, want 1", n)
	}
	if err := s.Renew(ctx, b.Id, l2); err != nil {
		t.Errorf("Renew(l2) = %v", err)
	}
	if got := eventTypes(t, pool, b.Id); !slices.Equal(got, []string{"created", "status_changed"}) {
		t.Errorf("events = %v", got)
	}

	// Release by a non-holder does nothing; by the holder frees the build.
	if err := s.Release(ctx, b.Id, l1); err != nil {
		t.Fatal(err)
	}
	if _, _, ok, _ := s.Claim(ctx, b.Id, l3, time.Minute); ok {
		t.Fatal("Claim succeeded after a non-holder's Release")
	}
	if err := s.Release(ctx, b.Id, l2); err != nil {
		t.Fatal(err)
	}
	if err := s.Renew(ctx, b.Id, l2); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Renew after Release = %v, want ErrLeaseLost", err)
	}
	c3, steps3, ok, err := s.Claim(ctx, b.Id, l3, time.Minute)
	if err != nil || !ok {
		t.Fatalf("Claim after Release: ok=%v err=%v", ok, err)
	}
	if c3.Status != running || len(steps3) != 1 || steps3[0].Status != stepRunning || steps3[0].Description != "write a.go" {
		t.Errorf("claimed %v with steps %v", c3.Status, steps3)
	}

	// A finished build cannot be claimed, and a finishing write drops the lease.
	c3.Status = completed
	mustApply(t, s, l3, store.Change{Build: c3, Events: []*builderv1.WatchBuildResponse{store.StatusEvent(running, c3)}})
	if n := countRows(t, pool, `SELECT count(*) FROM builds WHERE id = $1 AND lease_id IS NULL AND lease_time IS NULL`, b.Id); n != 1 {
		t.Error("lease kept after the build completed")
	}
	if _, _, ok, err := s.Claim(ctx, b.Id, l1, time.Minute); err != nil || ok {
		t.Errorf("Claim of a completed build: ok=%v err=%v, want false", ok, err)
	}
	if _, _, ok, err := s.Claim(ctx, uuid.NewString(), l1, time.Minute); err != nil || ok {
		t.Errorf("Claim of a missing build: ok=%v err=%v, want false", ok, err)
	}
}

func TestClaimExpiresForReal(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	b := mustCreate(t, s, newBuild(alice, "expiry"), nil)
	if _, _, ok, err := s.Claim(t.Context(), b.Id, uuid.NewString(), time.Second); err != nil || !ok {
		t.Fatalf("Claim: ok=%v err=%v", ok, err)
	}
	if _, _, ok, _ := s.Claim(t.Context(), b.Id, uuid.NewString(), time.Second); ok {
		t.Fatal("second Claim succeeded within the expiry")
	}
	time.Sleep(1200 * time.Millisecond)
	if _, _, ok, err := s.Claim(t.Context(), b.Id, uuid.NewString(), time.Second); err != nil || !ok {
		t.Fatalf("Claim after the expiry: ok=%v err=%v", ok, err)
	}
}

func TestTakeStale(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	held := mustCreate(t, s, newBuild(alice, "held"), nil)
	fresh := mustCreate(t, s, newBuild(alice, "fresh"), nil)
	orphan := mustCreate(t, s, newBuild(alice, "orphan"), nil)
	done := mustCreate(t, s, newBuild(alice, "done"), nil)
	lease, freshLease, doneLease := uuid.NewString(), uuid.NewString(), uuid.NewString()
	hb, _ := mustClaim(t, s, held.Id, lease)
	hb.Status = running
	mustApply(t, s, lease, store.Change{Build: hb})
	mustClaim(t, s, fresh.Id, freshLease)
	db, _ := mustClaim(t, s, done.Id, doneLease)
	db.Status = completed
	mustApply(t, s, doneLease, store.Change{Build: db})
	// held's worker died an hour ago; orphan was never claimed for an hour; done is old too.
	if _, err := pool.Exec(ctx, `UPDATE builds SET lease_time = now() - interval '1 hour' WHERE id = $1`, held.Id); err != nil {
		t.Fatal(err)
	}
	if _, err := pool.Exec(ctx, `UPDATE builds SET update_time = now() - interval '1 hour' WHERE id = ANY($1::uuid[])`,
		[]string{orphan.Id, done.Id, fresh.Id}); err != nil {
		t.Fatal(err)
	}

	ids, err := s.TakeStale(ctx, time.Minute, 10)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	want := []string{held.Id, orphan.Id}
	slices.Sort(want)
	if !slices.Equal(ids, want) {
		t.Fatalf("TakeStale = %v, want %v (held, orphan)", ids, want)
	}
	if n := countRows(t, pool, `SELECT count(*) FROM builds WHERE id = $1 AND lease_id IS NULL`, held.Id); n != 1 {
		t.Error("TakeStale kept the expired lease")
	}
	if n := countRows(t, pool, `SELECT count(*) FROM builds WHERE id = $1 AND lease_id = $2`, fresh.Id, freshLease); n != 1 {
		t.Error("TakeStale took a live lease")
	}
	// The stalled worker is fenced out.
	hb.Error = "late"
	if err := s.Apply(ctx, lease, store.Change{Build: hb}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Apply by the stale worker = %v, want ErrLeaseLost", err)
	}
	if err := s.Renew(ctx, held.Id, lease); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Renew by the stale worker = %v, want ErrLeaseLost", err)
	}
	// Handed out once per expiry.
	if again, err := s.TakeStale(ctx, time.Minute, 10); err != nil || len(again) != 0 {
		t.Errorf("second TakeStale = %v, %v; want none", again, err)
	}
	// The limit holds (once the expiry has passed since they were handed out).
	if _, err := pool.Exec(ctx, `UPDATE builds SET lease_time = now() - interval '1 hour' WHERE id = ANY($1::uuid[])`,
		[]string{held.Id, orphan.Id}); err != nil {
		t.Fatal(err)
	}
	if one, err := s.TakeStale(ctx, time.Minute, 1); err != nil || len(one) != 1 {
		t.Errorf("TakeStale(limit 1) = %v, %v", one, err)
	}
}

// runningWithSteps creates a build claimed by a new lease and running, with steps 1
// SUCCEEDED, 2 PENDING, 3 RUNNING and files matching.
func runningWithSteps(t *testing.T, s *store.Store, owner, reqID string) (*store.Build, string) {
	t.Helper()
	b := mustCreate(t, s, newBuild(owner, reqID), nil)
	lease := uuid.NewString()
	cb, _ := mustClaim(t, s, b.Id, lease)
	cb.Status, cb.Phase, cb.TotalSteps = running, builderv1.BuildPhase_BUILD_PHASE_IMPLEMENT, 3
	cb.Files = []*builderv1.BuildFile{
		{Path: "a.go", Status: builderv1.BuildFileStatus_BUILD_FILE_STATUS_VALID},
		{Path: "b.go", Status: builderv1.BuildFileStatus_BUILD_FILE_STATUS_PENDING},
		{Path: "c.go", Status: builderv1.BuildFileStatus_BUILD_FILE_STATUS_IN_PROGRESS},
	}
	mustApply(t, s, lease, store.Change{
		Build:  cb,
		Steps:  []*store.Step{step(b.Id, 1, stepSucceeded, "a.go"), step(b.Id, 2, stepPending, "b.go"), step(b.Id, 3, stepRunning, "c.go")},
		Events: []*builderv1.WatchBuildResponse{store.StatusEvent(pending, cb)},
	})
	return cb, lease
}

func TestCancel(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	b, lease := runningWithSteps(t, s, alice, "c1")

	if _, err := s.Cancel(ctx, bob, b.Id, "not mine"); !errors.Is(err, errs.ErrNotFound) {
		t.Fatalf("Cancel as bob = %v, want ErrNotFound", err)
	}
	got, err := s.Cancel(ctx, alice, b.Id, "user stop")
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != cancelled || got.Error != "user stop" || got.EndTime == nil {
		t.Errorf("cancelled build: status %v error %q end %v", got.Status, got.Error, got.EndTime)
	}
	stored, _ := s.Get(ctx, alice, b.Id)
	if stored.Status != cancelled || stored.Error != "user stop" || stored.EndTime == nil {
		t.Errorf("stored build: status %v error %q end %v", stored.Status, stored.Error, stored.EndTime)
	}
	wantFiles := []builderv1.BuildFileStatus{
		builderv1.BuildFileStatus_BUILD_FILE_STATUS_VALID,
		builderv1.BuildFileStatus_BUILD_FILE_STATUS_SKIPPED,
		builderv1.BuildFileStatus_BUILD_FILE_STATUS_SKIPPED,
	}
	for i, f := range stored.Files {
		if f.Status != wantFiles[i] {
			t.Errorf("file %s: %v, want %v", f.Path, f.Status, wantFiles[i])
		}
	}
	steps, err := s.Steps(ctx, b.Id)
	if err != nil {
		t.Fatal(err)
	}
	wantSteps := []builderv1.BuildStepStatus{stepSucceeded, stepSkipped, stepSkipped}
	if len(steps) != 3 {
		t.Fatalf("%d steps", len(steps))
	}
	for i, st := range steps {
		if st.Status != wantSteps[i] {
			t.Errorf("step %d: %v, want %v", st.StepNumber, st.Status, wantSteps[i])
		}
		if wantSteps[i] == stepSkipped && (st.Error != "build cancelled: user stop" || st.EndTime == nil) {
			t.Errorf("step %d: error %q end %v", st.StepNumber, st.Error, st.EndTime)
		}
	}
	if steps[0].Error != "" {
		t.Errorf("succeeded step got error %q", steps[0].Error)
	}
	wantEvents := []string{"created", "status_changed", "step_skipped", "step_skipped", "status_changed"}
	if got := eventTypes(t, pool, b.Id); !slices.Equal(got, wantEvents) {
		t.Errorf("events = %v, want %v", got, wantEvents)
	}

	again, err := s.Cancel(ctx, alice, b.Id, "second reason")
	if err != nil || again.Status != cancelled || again.Error != "user stop" {
		t.Errorf("second Cancel = %v %q, %v; want the cancelled build unchanged", again.GetStatus(), again.GetError(), err)
	}
	if got := eventTypes(t, pool, b.Id); len(got) != len(wantEvents) {
		t.Errorf("second Cancel wrote events: %v", got)
	}

	// The engine notices.
	b.CurrentStep = 3
	if err := s.Apply(ctx, lease, store.Change{Build: b, Steps: []*store.Step{step(b.Id, 3, stepSucceeded, "c.go")}}); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Apply after Cancel = %v, want ErrLeaseLost", err)
	}
	if steps, _ := s.Steps(ctx, b.Id); steps[2].Status != stepSkipped {
		t.Errorf("step 3 after a fenced Apply: %v", steps[2].Status)
	}
	// A cancelled build holds no lease: the worker's next renewal stops it.
	if err := s.Renew(ctx, b.Id, lease); !errors.Is(err, store.ErrLeaseLost) {
		t.Errorf("Renew after Cancel = %v, want ErrLeaseLost", err)
	}
	if _, _, ok, _ := s.Claim(ctx, b.Id, uuid.NewString(), time.Minute); ok {
		t.Error("Claim of a cancelled build succeeded")
	}

	t.Run("pending build, default reason", func(t *testing.T) {
		p := mustCreate(t, s, newBuild(alice, "c-pending"), nil)
		got, err := s.Cancel(ctx, alice, p.Id, "")
		if err != nil || got.Status != cancelled || got.Error != "cancelled" {
			t.Errorf("Cancel pending = %v %q, %v", got.GetStatus(), got.GetError(), err)
		}
	})

	for _, end := range []builderv1.BuildStatus{completed, failed} {
		t.Run("finished "+store.StatusName(end), func(t *testing.T) {
			fb := mustCreate(t, s, newBuild(alice, "c-"+store.StatusName(end)), nil)
			l := uuid.NewString()
			cb, _ := mustClaim(t, s, fb.Id, l)
			cb.Status = end
			mustApply(t, s, l, store.Change{Build: cb})
			_, err := s.Cancel(ctx, alice, fb.Id, "too late")
			grpctest.WantCode(t, err, codes.FailedPrecondition, store.StatusName(end))
			if got, _ := s.Get(ctx, alice, fb.Id); got.Status != end || got.Error != "" {
				t.Errorf("after a refused Cancel: %v %q", got.Status, got.Error)
			}
		})
	}
}

// failedBuild is a build that failed at step 2 (of 2) in IMPLEMENT.
func failedBuild(t *testing.T, s *store.Store, reqID string) *store.Build {
	t.Helper()
	b := mustCreate(t, s, newBuild(alice, reqID), nil)
	lease := uuid.NewString()
	cb, _ := mustClaim(t, s, b.Id, lease)
	cb.Status, cb.Phase, cb.Error, cb.Iterations = failed, builderv1.BuildPhase_BUILD_PHASE_INTEGRATE, "step 2 failed", 2
	cb.EndTime = cb.CreateTime
	cb.Report = &builderv1.BuildReport{}
	cb.Files = []*builderv1.BuildFile{
		{Path: "a.go", Status: builderv1.BuildFileStatus_BUILD_FILE_STATUS_VALID},
		{Path: "b.go", Status: builderv1.BuildFileStatus_BUILD_FILE_STATUS_FAILED},
	}
	s2 := step(b.Id, 2, stepFailed, "b.go")
	s2.Error, s2.Generated, s2.Content = "does not compile", true, "package b"
	s2.FixRounds = []*builderv1.FixRound{{}, {}}
	s2.StartTime, s2.EndTime = cb.CreateTime, cb.CreateTime
	mustApply(t, s, lease, store.Change{
		Build:  cb,
		Steps:  []*store.Step{step(b.Id, 1, stepSucceeded, "a.go"), s2},
		Events: []*builderv1.WatchBuildResponse{store.StatusEvent(pending, cb)},
	})
	return cb
}

func TestRetry(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	b := failedBuild(t, s, "f1")
	r := &recorder{}

	t.Run("pending build", func(t *testing.T) {
		p := mustCreate(t, s, newBuild(alice, "f-pending"), nil)
		_, err := s.Retry(ctx, alice, p.Id, 1, "", store.RetryRequest{}, r.enqueue)
		grpctest.WantCode(t, err, codes.FailedPrecondition, "pending")
	})
	t.Run("cancelled build", func(t *testing.T) {
		p := mustCreate(t, s, newBuild(alice, "f-cancelled"), nil)
		if _, err := s.Cancel(ctx, alice, p.Id, ""); err != nil {
			t.Fatal(err)
		}
		_, err := s.Retry(ctx, alice, p.Id, 1, "", store.RetryRequest{}, r.enqueue)
		grpctest.WantCode(t, err, codes.FailedPrecondition, "cancelled")
	})
	t.Run("succeeded step", func(t *testing.T) {
		_, err := s.Retry(ctx, alice, b.Id, 1, "", store.RetryRequest{}, r.enqueue)
		grpctest.WantCode(t, err, codes.FailedPrecondition, "succeeded")
	})
	t.Run("unknown step", func(t *testing.T) {
		if _, err := s.Retry(ctx, alice, b.Id, 9, "", store.RetryRequest{}, r.enqueue); !errors.Is(err, errs.ErrNotFound) {
			t.Errorf("Retry step 9 = %v, want ErrNotFound", err)
		}
	})
	t.Run("another owner", func(t *testing.T) {
		if _, err := s.Retry(ctx, bob, b.Id, 2, "", store.RetryRequest{}, r.enqueue); !errors.Is(err, errs.ErrNotFound) {
			t.Errorf("Retry as bob = %v, want ErrNotFound", err)
		}
	})
	t.Run("enqueue failure rolls back", func(t *testing.T) {
		boom := errors.New("queue down")
		if _, err := s.Retry(ctx, alice, b.Id, 2, "g", store.RetryRequest{}, (&recorder{fail: boom}).enqueue); !errors.Is(err, boom) {
			t.Errorf("Retry = %v, want %v", err, boom)
		}
		if got, _ := s.Get(ctx, alice, b.Id); got.Status != failed || got.Generation != 0 {
			t.Errorf("after a failed Retry: %v generation %d", got.Status, got.Generation)
		}
	})
	if got := r.got(); len(got) != 0 {
		t.Fatalf("refused retries enqueued %v", got)
	}

	got, err := s.Retry(ctx, alice, b.Id, 2, "use the other API", store.RetryRequest{}, r.enqueue)
	if err != nil {
		t.Fatal(err)
	}
	if ids := r.got(); !slices.Equal(ids, []string{b.Id}) {
		t.Errorf("enqueued %v, want [%s]", ids, b.Id)
	}
	stored, _ := s.Get(ctx, alice, b.Id)
	for name, bb := range map[string]*store.Build{"returned": got, "stored": stored} {
		if bb.Status != pending || bb.Generation != 1 || bb.Error != "" || bb.EndTime != nil || bb.Report != nil ||
			bb.Iterations != 0 || bb.Phase != builderv1.BuildPhase_BUILD_PHASE_IMPLEMENT {
			t.Errorf("%s build: status %v generation %d error %q end %v report %v iterations %d phase %v",
				name, bb.Status, bb.Generation, bb.Error, bb.EndTime, bb.Report, bb.Iterations, bb.Phase)
		}
	}
	if f := stored.Files; len(f) != 2 || f[0].Status != builderv1.BuildFileStatus_BUILD_FILE_STATUS_VALID ||
		f[1].Status != builderv1.BuildFileStatus_BUILD_FILE_STATUS_PENDING {
		t.Errorf("files = %v", f)
	}
	steps, _ := s.Steps(ctx, b.Id)
	if steps[0].Status != stepSucceeded {
		t.Errorf("step 1: %v", steps[0].Status)
	}
	s2 := steps[1]
	if s2.Status != stepPending || s2.Guidance != "use the other API" || s2.Error != "" || s2.Generated ||
		len(s2.FixRounds) != 0 || s2.StartTime != nil || s2.EndTime != nil {
		t.Errorf("step 2 = %v guidance %q generated %v", s2.BuildStep, s2.Guidance, s2.Generated)
	}
	if ev := eventTypes(t, pool, b.Id); !slices.Equal(ev, []string{"created", "status_changed", "status_changed"}) {
		t.Errorf("events = %v", ev)
	}
	// The build runs again.
	if _, _, ok, err := s.Claim(ctx, b.Id, uuid.NewString(), time.Minute); err != nil || !ok {
		t.Errorf("Claim after Retry: ok=%v err=%v", ok, err)
	}
	// It is not FAILED anymore.
	_, err = s.Retry(ctx, alice, b.Id, 2, "", store.RetryRequest{}, r.enqueue)
	grpctest.WantCode(t, err, codes.FailedPrecondition)
}

// serveWatch runs the store's Watch handler (the one WatchBuild serves) of owner's build id
// or builds of job, calling fn for each event (heartbeats and the end marker are not
// passed on).
func serveWatch(ctx context.Context, s *store.Store, owner, id, job string, after int64, fn func(*builderv1.WatchBuildResponse) error) error {
	w := events.Watch[*builderv1.WatchBuildResponse]{AfterID: after, OwnerID: owner, ID: id, Scope: job}
	if id != "" {
		w.State = func(ctx context.Context) (bool, error) { return s.WatchState(ctx, owner, id) }
		w.Ends = store.Terminal
	}
	return s.WatchHandler().Serve(ctx, w, func(e *builderv1.WatchBuildResponse) error {
		if e.GetHeartbeat() != nil {
			return nil
		}
		return fn(e)
	})
}

// watchAll collects the events a watch delivers until it returns.
func watchAll(t *testing.T, s *store.Store, owner, id, job string, after int64, timeout time.Duration) ([]*builderv1.WatchBuildResponse, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), timeout)
	defer cancel()
	var out []*builderv1.WatchBuildResponse
	err := serveWatch(ctx, s, owner, id, job, after, func(e *builderv1.WatchBuildResponse) error {
		out = append(out, e)
		return nil
	})
	return out, err
}

func types(es []*builderv1.WatchBuildResponse) []builderv1.BuildEventType {
	out := make([]builderv1.BuildEventType, len(es))
	for i, e := range es {
		out[i] = e.Type
	}
	return out
}

func TestWatch(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	ctx := t.Context()
	const (
		created  = builderv1.BuildEventType_BUILD_EVENT_TYPE_CREATED
		statusCh = builderv1.BuildEventType_BUILD_EVENT_TYPE_STATUS_CHANGED
		phaseCh  = builderv1.BuildEventType_BUILD_EVENT_TYPE_PHASE_CHANGED
		logEv    = builderv1.BuildEventType_BUILD_EVENT_TYPE_LOG
		skipped  = builderv1.BuildEventType_BUILD_EVENT_TYPE_STEP_SKIPPED
	)

	b := mustCreate(t, s, newBuild(alice, "w1"), nil)
	other := mustCreate(t, s, newBuild(alice, "w-other", func(b *store.Build) { b.JobId = jobB }), nil)
	lease := uuid.NewString()
	cb, _ := mustClaim(t, s, b.Id, lease)
	cb.Status, cb.Phase = running, builderv1.BuildPhase_BUILD_PHASE_IMPLEMENT
	mustApply(t, s, lease, store.Change{Build: cb, Steps: []*store.Step{step(b.Id, 1, stepPending, "a.go")}, Events: []*builderv1.WatchBuildResponse{
		store.StatusEvent(pending, cb), store.PhaseEvent(builderv1.BuildPhase_BUILD_PHASE_INIT, cb), store.LogEvent(1, cb.Phase, "hello"),
	}})
	if _, err := s.Cancel(ctx, alice, b.Id, "stop"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Cancel(ctx, alice, other.Id, "stop"); err != nil {
		t.Fatal(err)
	}

	got, err := watchAll(t, s, alice, b.Id, "", 0, 10*time.Second)
	if err != nil {
		t.Fatalf("Watch: %v (the build's watch must end after its terminal event)", err)
	}
	want := []builderv1.BuildEventType{created, statusCh, phaseCh, logEv, skipped, statusCh}
	if !slices.Equal(types(got), want) {
		t.Fatalf("events = %v, want %v", types(got), want)
	}
	for i, e := range got {
		if e.BuildId != b.Id || e.JobId != jobA || e.Time == nil || (i > 0 && e.Id <= got[i-1].Id) {
			t.Errorf("event %d = %v", i, e)
		}
	}
	if c := got[0].GetCreated(); c.GetPlanSteps() != 2 || c.GetPlanSummary() != "add a thing" || c.GetSandboxId() != sandboxID {
		t.Errorf("created payload = %v", c)
	}
	if got[3].GetLog().GetMessage() != "hello" {
		t.Errorf("log payload = %v", got[3])
	}
	if sc := got[5].GetStatusChange(); sc.GetPreviousStatus() != running || sc.GetStatus() != cancelled || sc.GetError() != "stop" {
		t.Errorf("terminal payload = %v", sc)
	}
	if st := got[4].GetStep(); st.GetStepNumber() != 1 || st.GetStatus() != stepSkipped {
		t.Errorf("skipped payload = %v", st)
	}

	t.Run("after_id", func(t *testing.T) {
		rest, err := watchAll(t, s, alice, b.Id, "", got[2].Id, 10*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(types(rest), want[3:]) || rest[0].Id != got[3].Id {
			t.Errorf("after %d: %v, want %v", got[2].Id, types(rest), want[3:])
		}
	})

	t.Run("by job", func(t *testing.T) {
		// A job watch does not end by itself; stop after the events we expect.
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		var seen []*builderv1.WatchBuildResponse
		errEnough := errors.New("enough")
		err := serveWatch(ctx, s, alice, "", jobB, 0, func(e *builderv1.WatchBuildResponse) error {
			seen = append(seen, e)
			if len(seen) == 2 {
				return errEnough
			}
			return nil
		})
		if !errors.Is(err, errEnough) {
			t.Fatalf("Watch by job = %v", err)
		}
		for _, e := range seen {
			if e.BuildId != other.Id || e.JobId != jobB {
				t.Errorf("job watch delivered %v", e)
			}
		}
	})

	t.Run("another owner's build is not found", func(t *testing.T) {
		// It heartbeat until the deadline before the one Watch handler (events.Handler).
		seen, err := watchAll(t, s, bob, b.Id, "", 0, 10*time.Second)
		if !errors.Is(err, errs.ErrNotFound) || len(seen) != 0 {
			t.Errorf("bob's watch = %v, %v; want NOT_FOUND", types(seen), err)
		}
	})

	t.Run("live", func(t *testing.T) {
		nb := mustCreate(t, s, newBuild(alice, "w-live"), nil)
		start, err := s.LatestEventID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		type result struct {
			es  []*builderv1.WatchBuildResponse
			err error
		}
		done := make(chan result, 1)
		go func() {
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			var es []*builderv1.WatchBuildResponse
			err := serveWatch(wctx, s, alice, nb.Id, "", start, func(e *builderv1.WatchBuildResponse) error {
				es = append(es, e)
				return nil
			})
			done <- result{es, err}
		}()
		time.Sleep(200 * time.Millisecond)
		l := uuid.NewString()
		c, _ := mustClaim(t, s, nb.Id, l)
		c.Status = running
		mustApply(t, s, l, store.Change{Build: c, Events: []*builderv1.WatchBuildResponse{store.StatusEvent(pending, c), store.LogEvent(0, 0, "live")}})
		c.Status, c.Error = failed, "boom"
		mustApply(t, s, l, store.Change{Build: c, Events: []*builderv1.WatchBuildResponse{store.StatusEvent(running, c)}})
		r := <-done
		if r.err != nil {
			t.Fatalf("live Watch: %v", r.err)
		}
		if want := []builderv1.BuildEventType{statusCh, logEv, statusCh}; !slices.Equal(types(r.es), want) {
			t.Errorf("live events = %v, want %v", types(r.es), want)
		}
	})

	t.Run("heartbeat first, end last", func(t *testing.T) {
		var msgs []*builderv1.WatchBuildResponse
		h := s.WatchHandler()
		h.Every = time.Hour
		err := h.Serve(ctx, events.Watch[*builderv1.WatchBuildResponse]{OwnerID: alice, ID: b.Id, Ends: store.Terminal,
			State: func(ctx context.Context) (bool, error) { return s.WatchState(ctx, alice, b.Id) },
		}, func(e *builderv1.WatchBuildResponse) error {
			msgs = append(msgs, e)
			return nil
		})
		if err != nil || len(msgs) != len(want)+2 {
			t.Fatalf("messages = %v, err %v; want a heartbeat, %d events and the end", msgs, err, len(want))
		}
		first, last := msgs[0].GetHeartbeat(), msgs[len(msgs)-1].GetHeartbeat()
		if first == nil || first.Cursor != 0 || first.End {
			t.Errorf("first message = %v, want a heartbeat at cursor 0", msgs[0])
		}
		if last == nil || !last.End || last.Cursor != got[len(got)-1].Id {
			t.Errorf("last message = %v, want the end at cursor %d", msgs[len(msgs)-1], got[len(got)-1].Id)
		}
	})

	if _, err := watchAll(t, s, "", b.Id, "", 0, time.Second); err == nil {
		t.Error("Watch without an owner succeeded")
	}
}

func TestList(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	taskB := "1b000000-0000-4000-8000-00000000001b"
	// Seven builds of alice, b[0] oldest; two of bob.
	var bs []*store.Build
	for i := range 7 {
		job, task, repo := jobA, taskA, "acme/app"
		if i%2 == 1 {
			job = jobB
		}
		if i >= 5 {
			task, repo = taskB, "acme/other"
		}
		bs = append(bs, mustCreate(t, s, newBuild(alice, "l"+string(rune('0'+i)), func(b *store.Build) {
			b.JobId, b.TaskId, b.Repo = job, task, repo
		}), nil))
	}
	for i := range 2 {
		mustCreate(t, s, newBuild(bob, "lb"+string(rune('0'+i))), nil)
	}
	for i, b := range bs {
		if _, err := pool.Exec(ctx, `UPDATE builds SET create_time = now() - $2 * interval '1 minute' WHERE id = $1`, b.Id, 10-i); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{1, 4} {
		if _, err := s.Cancel(ctx, alice, bs[i].Id, ""); err != nil {
			t.Fatal(err)
		}
	}
	newest := func(idx ...int) []string {
		var out []string
		for _, i := range slices.Backward(idx) {
			out = append(out, bs[i].Id)
		}
		return out
	}
	ids := func(bs []*store.Build) []string {
		out := make([]string, len(bs))
		for i, b := range bs {
			out[i] = b.Id
		}
		return out
	}

	t.Run("pages", func(t *testing.T) {
		var all []string
		tok := ""
		var sizes []int
		for page := 0; ; page++ {
			if page > 5 {
				t.Fatal("paging does not end")
			}
			got, next, err := s.List(ctx, alice, store.ListFilter{}, 3, tok)
			if err != nil {
				t.Fatal(err)
			}
			sizes = append(sizes, len(got))
			all = append(all, ids(got)...)
			if next == "" {
				break
			}
			tok = next
		}
		if !slices.Equal(sizes, []int{3, 3, 1}) {
			t.Errorf("page sizes = %v, want [3 3 1]", sizes)
		}
		if want := newest(0, 1, 2, 3, 4, 5, 6); !slices.Equal(all, want) {
			t.Errorf("ids = %v, want %v", all, want)
		}
	})

	for _, c := range []struct {
		name string
		f    store.ListFilter
		want []string
	}{
		{"job", store.ListFilter{JobID: jobB}, newest(1, 3, 5)},
		{"task", store.ListFilter{TaskID: taskB}, newest(5, 6)},
		{"repo", store.ListFilter{Repo: "acme/app"}, newest(0, 1, 2, 3, 4)},
		{"status", store.ListFilter{Statuses: []builderv1.BuildStatus{cancelled}}, newest(1, 4)},
		{"statuses", store.ListFilter{Statuses: []builderv1.BuildStatus{pending, cancelled}}, newest(0, 1, 2, 3, 4, 5, 6)},
		{"combined", store.ListFilter{JobID: jobA, Statuses: []builderv1.BuildStatus{cancelled}}, newest(4)},
		{"none", store.ListFilter{Statuses: []builderv1.BuildStatus{completed}}, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, next, err := s.List(ctx, alice, c.f, 50, "")
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(ids(got), c.want) || next != "" {
				t.Errorf("List = %v (next %q), want %v", ids(got), next, c.want)
			}
		})
	}

	t.Run("exact page has no next token", func(t *testing.T) {
		got, next, err := s.List(ctx, alice, store.ListFilter{}, 7, "")
		if err != nil || len(got) != 7 || next != "" {
			t.Errorf("List(7) = %d builds, next %q, %v", len(got), next, err)
		}
	})

	t.Run("bob sees his own", func(t *testing.T) {
		got, _, err := s.List(ctx, bob, store.ListFilter{}, 50, "")
		if err != nil || len(got) != 2 {
			t.Fatalf("bob's list = %d, %v", len(got), err)
		}
		for _, b := range got {
			if b.OwnerId != bob {
				t.Errorf("bob sees %s of %s", b.Id, b.OwnerId)
			}
		}
	})

	for name, tok := range map[string]string{
		"not base64":    "!!!",
		"wrong version": validate.EncodePageToken("b0", "1", bs[0].Id),
		"wrong parts":   validate.EncodePageToken("b1", "1"),
		"bad time":      validate.EncodePageToken("b1", "yesterday", bs[0].Id),
	} {
		t.Run("bad page token: "+name, func(t *testing.T) {
			_, _, err := s.List(ctx, alice, store.ListFilter{}, 3, tok)
			grpctest.WantCode(t, err, codes.InvalidArgument, "page_token")
		})
	}
}

// A page token of the right form whose id is not a UUID reaches PostgreSQL's uuid cast.
func TestListForgedPageTokenID(t *testing.T) {
	t.Parallel()
	s, _ := newStore(t)
	_, _, err := s.List(t.Context(), alice, store.ListFilter{}, 3, validate.EncodePageToken("b1", "1", "not-a-uuid"))
	grpctest.WantCode(t, err, codes.InvalidArgument, "page_token")
}

// ApplyLater writes the change as it was when it was called, whatever the caller changes
// after; its write is fenced like Apply's; and Wait reports both.
func TestApplyLater(t *testing.T) {
	t.Parallel()
	s, pool := newStore(t)
	ctx := t.Context()
	b := mustCreate(t, s, newBuild(alice, "later"), nil)
	lease := uuid.NewString()
	claimed, _, ok, err := s.Claim(ctx, b.Id, lease, time.Minute)
	if err != nil || !ok {
		t.Fatalf("Claim: ok=%v err=%v", ok, err)
	}
	claimed.Status = running
	st := step(b.Id, 1, stepRunning, "a.go")
	st.ContextFiles = []string{"dep.go"}
	p, err := s.ApplyLater(ctx, lease, store.Change{Build: claimed, Steps: []*store.Step{st},
		Events: []*builderv1.WatchBuildResponse{store.StatusEvent(pending, claimed)}, Progress: true})
	if err != nil {
		t.Fatal(err)
	}
	// The caller goes on at once: what it changes now is its next change, not this one.
	claimed.Error, claimed.FilesWritten = "changed after", 7
	st.Status, st.ContextFiles[0] = stepSucceeded, "changed.go"
	if err := p.Wait(); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if err := p.Wait(); err != nil {
		t.Fatalf("second Wait: %v", err)
	}
	var status, errText, ctxFile, stepStatus string
	var written int
	if err := pool.QueryRow(ctx, `SELECT b.status, b.error, b.files_written, s.status, s.context_files[1]
		FROM builds b JOIN build_steps s ON s.build_id = b.id WHERE b.id = $1`, b.Id).Scan(&status, &errText, &written, &stepStatus, &ctxFile); err != nil {
		t.Fatal(err)
	}
	if status != "running" || errText != "" || written != 0 || stepStatus != "running" || ctxFile != "dep.go" {
		t.Errorf("written: build %s %q %d, step %s %q; want the change as it was when ApplyLater was called", status, errText, written, stepStatus, ctxFile)
	}
	if claimed.UpdateTime == nil {
		t.Error("Wait did not set the build's update time")
	}
	if got := eventTypes(t, pool, b.Id); !slices.Equal(got, []string{"created", "status_changed"}) {
		t.Errorf("events = %v", got)
	}

	// Another lease's change is fenced out, and Wait says so.
	p, err = s.ApplyLater(ctx, uuid.NewString(), store.Change{Build: claimed, Steps: []*store.Step{step(b.Id, 2, stepRunning, "b.go")}, Progress: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(); !errors.Is(err, store.ErrLeaseLost) {
		t.Fatalf("Wait of a fenced change: %v, want ErrLeaseLost", err)
	}
	if n := countRows(t, pool, `SELECT count(*) FROM build_steps WHERE build_id = $1`, b.Id); n != 1 {
		t.Errorf("%d steps after a fenced ApplyLater, want 1", n)
	}
	if _, err := s.ApplyLater(ctx, "", store.Change{Build: claimed}); err == nil {
		t.Error("ApplyLater without a lease: no error")
	}
}
