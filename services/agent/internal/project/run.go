package project

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/auth"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpcclient"
	"github.com/thefold/thefold/pkg/jobrun"
	"github.com/thefold/thefold/pkg/tokens"
	"github.com/thefold/thefold/pkg/usage"
	"github.com/thefold/thefold/pkg/wait"

	"github.com/thefold/thefold/services/agent/internal/store"
)

// Clients are the services a project's runner calls.
type Clients struct {
	Tasks   tasksv1.TaskServiceClient
	AI      aiv1.AIServiceClient
	Repos   githubv1.RepoServiceClient
	Sandbox sandboxv1.SandboxServiceClient
	Memory  memoryv1.MemoryServiceClient
}

// Config tunes the runner.
type Config struct {
	// LeaseExpiry and RenewEvery are the project's lease (see the loop's).
	LeaseExpiry, RenewEvery time.Duration
	// Poll is the longest the runner waits for an event of its task's job before it looks at
	// the job again (an event wakes it at once).
	Poll time.Duration
	// ContextTokens is the token budget of what a task is told of the project (conventions,
	// what the tasks it depends on built, guidance).
	ContextTokens int
	// ReviewTokens is the token budget of the files given to the project's review.
	ReviewTokens int
	// CallTimeout bounds one model call.
	CallTimeout time.Duration
	// JobBudget is a task job's default budget; a project's default budget is that times
	// its task count.
	JobBudget *typev1.Budget
	// RateLimit is the owner's job rate limit: a project's tasks count against it.
	RateLimit store.RateLimit
	// Approve approves a crew task's job review on its owner's behalf (the AUTO merge
	// policy): the same decision ReviewService.ApproveReview makes.
	Approve func(ctx context.Context, owner, reviewID, comment string) error
}

// DefaultConfig is what the service runs with unless told otherwise.
var DefaultConfig = Config{LeaseExpiry: 15 * time.Second, RenewEvery: time.Second, Poll: 5 * time.Second,
	ContextTokens: 30000, ReviewTokens: 60000, CallTimeout: 10 * time.Minute}

// Runner runs projects: each under its lease (jobrun.Runner), one step per checkpoint.
type Runner struct {
	store  *store.Store
	c      Clients
	signer *auth.ServiceSigner
	cfg    Config
	log    *slog.Logger
	runner *jobrun.Runner
	// jobs starts the runs of the task jobs the runner creates.
	jobs jobrun.Enqueuer
}

// NewRunner returns a runner; jobs enqueues the task jobs it creates.
func NewRunner(st *store.Store, c Clients, signer *auth.ServiceSigner, cfg Config, jobs jobrun.Enqueuer, log *slog.Logger) *Runner {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Runner{store: st, c: c, signer: signer, cfg: cfg, log: log, jobs: jobs,
		runner: jobrun.NewRunner(st.ProjectLeases(), jobrun.RunnerConfig{Expiry: cfg.LeaseExpiry, RenewEvery: cfg.RenewEvery, Noun: "project"}, log)}
}

// Stop ends the run of project id at once if this process runs it.
func (e *Runner) Stop(id string) { e.runner.Stop(id) }

// Config is the runner's configuration.
func (e *Runner) Config() Config { return e.cfg }

// Run runs project id under its lease until it stops being RUNNING or ctx ends.
func (e *Runner) Run(ctx context.Context, id string) error {
	return e.runner.Run(ctx, id, func(ctx context.Context, id, lease string) (jobrun.Job, bool, error) {
		rec, ok, err := e.store.ClaimProject(ctx, id, lease, e.cfg.LeaseExpiry)
		if err != nil || !ok {
			return nil, false, err
		}
		return &run{e: e, rec: rec, lease: lease, since: time.Now()}, true, nil
	})
}

// Stages of a running project, in its state.
const (
	stageTasks    = ""
	stageReview   = "review"
	stageComplete = "complete"
)

// run is one worker's hold on one project.
type run struct {
	e     *Runner
	rec   *store.ProjectRecord
	lease string
	since time.Time
	evs   []*agentv1.WatchProjectResponse
	after []func(ctx context.Context, tx pgx.Tx) error
	// saved is set by a step that wrote its checkpoint itself (with what it created).
	saved bool
	// carry is set by a step whose changes are written with the next step's checkpoint.
	carry bool
	// reads are the ended tasks' files still being read from the sandbox (see follow);
	// unsaved those read and not yet written (with the next checkpoint).
	reads   []*pendingRead
	unsaved []store.ProjectFile
	// checking are a crew's checks running in sandboxes, by project task (see checks);
	// woken is told when one ends.
	checking map[string]*runningCheck
	woken    chan struct{}
	// noGroups is set once the forge said it makes no merge groups (GitHub).
	noGroups bool
}

// pendingRead is the read of a finished task's files, which goes on while the runner moves
// to the next thing; it is settled before anything needs the files or they are written.
type pendingRead struct {
	t     *agentv1.ProjectTask
	files []store.ProjectFile
	err   error
	done  chan struct{}
}

func (x *run) p() *agentv1.Project { return x.rec.Project }

// calls is ctx for the run's calls: on behalf of the project's owner, failing at once when
// a service is down.
func (x *run) calls(ctx context.Context) context.Context {
	ctx = grpcclient.FailFast(ctx)
	if x.e.signer != nil {
		ctx = auth.OnBehalfOf(ctx, x.e.signer, x.p().OwnerId)
	}
	return ctx
}

// Run implements jobrun.Job.
func (x *run) Run(ctx context.Context) error { return x.loop(x.calls(ctx)) }

// Fail implements jobrun.Job: a step that failed for good fails the project; anything else
// is tried again from the last checkpoint.
func (x *run) Fail(ctx context.Context, err error) error {
	if !permanent(err) {
		_ = x.e.store.ProjectLeases().Release(ctx, x.p().Id, x.lease)
		return err
	}
	rec, lerr := x.e.store.LoadProject(ctx, x.p().Id)
	if lerr == nil {
		x.rec = rec
	}
	x.evs, x.after, x.reads, x.unsaved = nil, nil, nil, nil
	x.setStatus(agentv1.ProjectStatus_PROJECT_STATUS_FAILED, status.Convert(err).Message())
	if serr := x.save(ctx); serr != nil && !errors.Is(serr, store.ErrLeaseLost) {
		return errors.Join(err, serr)
	}
	return nil
}

func permanent(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.NotFound, codes.PermissionDenied, codes.FailedPrecondition, codes.OutOfRange,
		codes.Unimplemented, codes.AlreadyExists, codes.Unauthenticated:
		return true
	}
	return false
}

func (x *run) emit(evs ...*agentv1.WatchProjectResponse) { x.evs = append(x.evs, evs...) }

func (x *run) setStatus(s agentv1.ProjectStatus, reason string) {
	p := x.p()
	prev := p.Status
	p.Status, p.StatusReason = s, reason
	if prev != s {
		x.emit(store.ProjectStatusEvent(prev, p))
	}
}

// save writes the checkpoint with what the step collected, in a transaction of its own.
func (x *run) save(ctx context.Context) error {
	if err := x.settle(); err != nil {
		return err
	}
	return x.e.store.InTx(ctx, func(tx pgx.Tx) error { return x.saveIn(ctx, tx) })
}

// saveIn writes the checkpoint with what the step collected in tx, fenced by the lease.
// What was collected is handed over: should tx not commit, the run fails and the project
// goes on from its last checkpoint.
func (x *run) saveIn(ctx context.Context, tx pgx.Tx) error {
	if err := x.settle(); err != nil { // (settled before the transaction began, as a rule)
		return err
	}
	now := time.Now()
	x.rec.State.Active += now.Sub(x.since)
	x.since = now
	evs, after := x.evs, x.after
	x.evs, x.after, x.unsaved = nil, nil, nil
	return x.e.store.SaveProject(ctx, tx, x.rec, x.lease, evs, after...)
}

// key is an idempotency key of the project's side effect.
func (x *run) key(parts ...any) string {
	var b strings.Builder
	fmt.Fprintf(&b, "project:%s:g%d", x.p().Id, x.rec.State.Generation)
	for _, p := range parts {
		fmt.Fprintf(&b, ":%v", p)
	}
	return b.String()
}

func (x *run) done(k string) bool { return x.rec.State.Done[k] }

func (x *run) mark(k string) {
	if x.rec.State.Done == nil {
		x.rec.State.Done = map[string]bool{}
	}
	x.rec.State.Done[k] = true
}

// loop runs steps until the project stops being RUNNING. A step that found nothing to do
// yet (the task's job still running) waits a poll and writes nothing.
func (x *run) loop(ctx context.Context) error {
	for x.p().Status == agentv1.ProjectStatus_PROJECT_STATUS_RUNNING {
		if x.overBudget() {
			return x.save(ctx)
		}
		idle, err := x.step(ctx)
		if err != nil {
			return err
		}
		if idle {
			continue // follow waited for the job
		}
		if x.saved || x.carry {
			x.saved, x.carry = false, false
			continue
		}
		if err := x.save(ctx); err != nil {
			return err
		}
	}
	return nil
}

func (x *run) step(ctx context.Context) (idle bool, err error) {
	switch x.rec.State.Stage {
	case stageTasks:
		if Crew(x.p()) {
			return x.crew(ctx)
		}
		return x.tasks(ctx)
	case stageReview:
		return false, x.review(ctx)
	case stageComplete:
		return false, x.complete(ctx)
	}
	return false, fmt.Errorf("project %s: unknown stage %q", x.p().Id, x.rec.State.Stage)
}

// overBudget stops the project for a person when it has spent its budget.
func (x *run) overBudget() bool {
	p := x.p()
	b := p.GetBudget()
	what := usage.Exhausted(p.Usage, b, x.rec.State.Active+time.Since(x.since))
	if what == "" {
		return false
	}
	x.emit(&agentv1.WatchProjectResponse{Type: agentv1.ProjectEventType_PROJECT_EVENT_TYPE_BUDGET_EXHAUSTED,
		Payload: &agentv1.WatchProjectResponse_BudgetExhausted{BudgetExhausted: &agentv1.BudgetExhausted{Usage: p.Usage, Budget: b}}})
	x.setStatus(agentv1.ProjectStatus_PROJECT_STATUS_HUMAN_NEEDED, "budget exhausted: spent "+what+"; ResumeProject with a larger budget continues")
	return true
}

// --- The tasks stage ---------------------------------------------------------------------

// tasks does the next thing of the tasks stage: set up, follow the task in progress, start
// the next ready task, or close the phase (revising the next one) and move on.
func (x *run) tasks(ctx context.Context) (idle bool, err error) {
	for {
		idle, again, err := x.tasksOnce(ctx)
		if err != nil || idle || !again {
			return idle, err
		}
	}
}

// tasksOnce does one thing of the tasks stage; again is set when what it did needs no
// checkpoint of its own before the next (a task's end taken in, a phase begun, a task
// skipped), so one checkpoint covers a task's end and the next task's start.
func (x *run) tasksOnce(ctx context.Context) (idle, again bool, err error) {
	p := x.p()
	// The first task's job scaffolds an empty repository and makes the project's sandbox,
	// as any job of the task loop does; the tasks after it work in that sandbox.
	if t, ph := running(p); t != nil {
		idle, err := x.follow(ctx, t, ph)
		return idle, !idle, err
	}
	gen := x.rec.State.Generation
	phaseEvent := func(typ agentv1.ProjectEventType, ph *agentv1.ProjectPhase) {
		x.emit(&agentv1.WatchProjectResponse{Type: typ,
			Payload: &agentv1.WatchProjectResponse_Phase{Phase: &agentv1.ProjectPhaseChange{Number: ph.Number, Name: ph.Name}}})
	}
	// The phase in progress is closed once no task of it is left to run.
	closeCurrent := func(next int32) {
		if p.CurrentPhase < 1 || int(p.CurrentPhase) > len(p.Phases) || p.CurrentPhase == next {
			return
		}
		if k := fmt.Sprintf("g%d:phase%d_completed", gen, p.CurrentPhase); !x.done(k) {
			x.mark(k)
			phaseEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_PHASE_COMPLETED, p.Phases[p.CurrentPhase-1])
		}
	}
	ph := firstPending(p)
	if ph == nil {
		closeCurrent(0)
		// The review's checkpoint writes this too (should the run end before it, the last
		// task's end is taken in again, and the review's model call is idempotent).
		x.rec.State.Stage = stageReview
		x.carry = true
		return false, false, nil
	}
	if ph.Number != p.CurrentPhase {
		closeCurrent(ph.Number)
		// A later phase is revised once, before it first runs, in the light of what was built
		// (not when a review's changes run tasks again).
		if k := fmt.Sprintf("phase%d_revised", ph.Number); gen == 0 && ph.Number > 1 && !x.done(k) {
			if err := x.revise(ctx, int(ph.Number)); err != nil {
				return false, false, err
			}
			// The revision is written with the next task's start (its model call and the
			// tasks it creates are idempotent by request id, should the run end before).
			x.mark(k)
			return false, true, nil
		}
		p.CurrentPhase = ph.Number
		phaseEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_PHASE_STARTED, ph)
		return false, true, nil
	}
	if t := ready(p, ph); t != nil {
		return false, false, x.start(ctx, t, ph)
	}
	for _, t := range ph.Tasks {
		if t.Status == agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_PENDING {
			// Waits on a task that cannot finish (a failed task skips its dependents, so it
			// should not happen): skip it rather than wait for ever.
			x.skip(t, ph, "its dependencies did not complete")
			return false, true, nil
		}
	}
	return false, false, nil
}

// firstPending is the first phase with a task to run, nil when none is left.
func firstPending(p *agentv1.Project) *agentv1.ProjectPhase {
	for _, ph := range p.Phases {
		for _, t := range ph.Tasks {
			if t.Status == agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_PENDING {
				return ph
			}
		}
	}
	return nil
}

func running(p *agentv1.Project) (*agentv1.ProjectTask, *agentv1.ProjectPhase) {
	for _, ph := range p.Phases {
		for _, t := range ph.Tasks {
			if t.Status == agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_RUNNING {
				return t, ph
			}
		}
	}
	return nil, nil
}

// ready is the first pending task of ph whose dependencies are done (completed, or skipped
// by a person: it runs without their work).
func ready(p *agentv1.Project, ph *agentv1.ProjectPhase) *agentv1.ProjectTask {
	byID := index(Tasks(p.Phases))
	for _, t := range ph.Tasks {
		if t.Status != agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_PENDING {
			continue
		}
		ok := true
		for _, d := range t.DependsOn {
			switch byID[d].GetStatus() {
			case agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_COMPLETED, agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_SKIPPED:
			default:
				ok = false
			}
		}
		if ok {
			return t
		}
	}
	return nil
}

// start creates the job of task t (once per attempt: its request id is the attempt's) in
// the project's sandbox, with the project's context in its description.
func (x *run) start(ctx context.Context, t *agentv1.ProjectTask, ph *agentv1.ProjectPhase) error {
	p := x.p()
	t.Attempts++
	j := &agentv1.Job{OwnerId: p.OwnerId, TaskId: t.TaskId, ProjectId: p.Id, Repo: p.Repo, BaseBranch: p.BaseBranch,
		SandboxId: p.SandboxId, Model: x.rec.State.Model, Budget: x.taskBudget(), Usage: &typev1.Usage{}}
	// A task is told what the tasks it depends on built: their files must be in.
	if slices.ContainsFunc(t.DependsOn, x.pending) {
		if err := x.settle(); err != nil {
			return err
		}
	}
	spec := &aiv1.TaskSpec{Title: t.Title, Description: x.taskContext(ctx, t)}
	// The job's transaction does not wait on the sandbox.
	if err := x.settle(); err != nil {
		return err
	}
	return x.launch(ctx, t, ph, j, spec)
}

// launch creates job j of task t (once per attempt: its request id is the attempt's) and
// the checkpoint that names it, in one transaction, and enqueues its run.
func (x *run) launch(ctx context.Context, t *agentv1.ProjectTask, ph *agentv1.ProjectPhase, j *agentv1.Job, spec *aiv1.TaskSpec) error {
	reqID := fmt.Sprintf("project:%s:%s:%d", x.p().Id, t.Id, t.Attempts)
	// The job and the checkpoint that names it commit together.
	rec, _, err := x.e.store.CreateWithTask(ctx, j, spec, reqID, store.RequestHash(&aiv1.TaskSpec{Title: reqID}), x.e.cfg.RateLimit,
		func(ctx context.Context, tx pgx.Tx, id string) error {
			if err := x.e.jobs.Enqueue(ctx, tx, id); err != nil {
				return err
			}
			t.JobId, t.Status, t.Error = id, agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_RUNNING, ""
			x.emit(TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_STARTED, t, ph))
			if err := x.saveIn(ctx, tx); err != nil {
				return err
			}
			x.saved = true
			return nil
		})
	var rl *store.RateLimitError
	if errors.As(err, &rl) {
		// The owner's rate limit counts a project's tasks: wait for it.
		t.Attempts--
		x.emitNothingAndWait(ctx, time.Until(rl.Retry))
		return nil
	}
	if err != nil {
		x.saved = false
		return err
	}
	if !x.saved {
		// The job was made before (a run that ended before its checkpoint): this is it.
		t.JobId, t.Status, t.Error = rec.Job.Id, agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_RUNNING, ""
		x.emit(TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_STARTED, t, ph))
	}
	return nil
}

// emitNothingAndWait sleeps d (at most a minute) without a change.
func (x *run) emitNothingAndWait(ctx context.Context, d time.Duration) {
	_ = wait.Sleep(ctx, min(max(d, time.Second), time.Minute))
}

// taskBudget is a task job's share of what the project has left.
func (x *run) taskBudget() *typev1.Budget {
	p := x.p()
	left := 0
	for _, t := range Tasks(p.Phases) {
		if t.Status == agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_PENDING {
			left++
		}
	}
	left = max(left, 1)
	b, def := p.GetBudget(), x.e.cfg.JobBudget
	out := &typev1.Budget{MaxTokens: def.GetMaxTokens(), MaxCostMicros: def.GetMaxCostMicros(), MaxWallTime: def.GetMaxWallTime()}
	if b.GetMaxTokens() > 0 {
		share := (b.GetMaxTokens() - usage.Tokens(p.Usage)) / int64(left)
		out.MaxTokens = max(min(out.MaxTokens, share), 1)
	}
	if b.GetMaxCostMicros() > 0 {
		share := (b.GetMaxCostMicros() - p.Usage.GetCostMicros()) / int64(left)
		out.MaxCostMicros = max(min(out.MaxCostMicros, share), 1)
	}
	return out
}

// taskContext is task t's description with what it needs to know of the project, within
// the context budget, in priority order: the conventions, the review feedback and
// guidance, then what the tasks it depends on built (their files, most recent first),
// whole files while they fit.
func (x *run) taskContext(ctx context.Context, t *agentv1.ProjectTask) string {
	p := x.p()
	var b strings.Builder
	b.WriteString(t.Description)
	budget := x.e.cfg.ContextTokens - tokens.Count(t.Description)
	add := func(s string) bool {
		n := tokens.Count(s)
		if n > budget {
			return false
		}
		budget -= n
		b.WriteString(s)
		return true
	}
	add(fmt.Sprintf("\n\n## Project context\nThis task is one of a project's tasks in %s: %s\n", p.Repo, firstLine(p.Description)))
	if p.Conventions != "" {
		add("\n### Conventions every task follows\n" + p.Conventions + "\n")
	}
	if f := x.rec.State.Feedback; f != "" && x.rec.State.Generation > 0 {
		add("\n### Review feedback on the project (act on it)\n" + f + "\n")
	}
	if t.StatusReason != "" && t.Attempts > 1 {
		add("\n### Guidance\n" + t.StatusReason + "\n")
	}
	byID := index(Tasks(p.Phases))
	var deps []*agentv1.ProjectTask
	for _, d := range t.DependsOn {
		if dt := byID[d]; dt != nil {
			deps = append(deps, dt)
		}
	}
	if len(deps) == 0 {
		return b.String()
	}
	add("\n### Already built by the tasks this one depends on\n")
	var paths []string
	for _, d := range deps {
		paths = append(paths, d.OutputFiles...)
	}
	var files []store.ProjectFile
	var err error
	if len(paths) > 0 {
		files, err = x.files(ctx, paths...)
	}
	if err != nil {
		x.e.log.WarnContext(ctx, "project: files for a task's context", "project", p.Id, "error", err)
	}
	content := map[string]store.ProjectFile{}
	for _, f := range files {
		content[f.Path] = f
	}
	for _, d := range deps {
		line := fmt.Sprintf("- %s (%s): %s\n", d.Title, strings.ToLower(strings.TrimPrefix(d.Status.String(), "PROJECT_TASK_STATUS_")), strings.Join(d.OutputFiles, ", "))
		if d.Status == agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_COMPLETED && d.Error == "" && d.StatusReason != "" && d.JobId == "" {
			line += "  Done by hand: " + d.StatusReason + "\n"
		}
		add(line)
	}
	for _, d := range slices.Backward(deps) {
		for _, path := range d.OutputFiles {
			f, ok := content[path]
			if !ok || f.Deleted {
				continue
			}
			add(fmt.Sprintf("\n%s (by %q):\n```\n%s\n```\n", path, d.Title, f.Content))
		}
	}
	return b.String()
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = strings.TrimRight(s[:i], "\r")
	}
	return s
}

// follow looks at the job of the running task t: still going (idle), or ended — its files
// taken into the project, or its failure recorded and its dependents skipped.
func (x *run) follow(ctx context.Context, t *agentv1.ProjectTask, ph *agentv1.ProjectPhase) (bool, error) {
	p := x.p()
	jr, err := x.e.store.Load(ctx, t.JobId)
	if err != nil {
		return false, err
	}
	if !store.Terminal(jr.Job.Status) {
		// The cursor is read before the job is looked at again: an event that ends the job
		// after that look wakes the wait.
		cursor, err := x.e.store.LatestEvent(ctx)
		if err != nil {
			return false, err
		}
		if jr, err = x.e.store.Load(ctx, t.JobId); err != nil {
			return false, err
		}
		if !store.Terminal(jr.Job.Status) {
			return true, x.e.store.AwaitJobEnd(ctx, t.JobId, cursor, x.e.cfg.Poll)
		}
	}
	j := jr.Job
	t.Usage = usage.Add(t.Usage, j.Usage)
	p.Usage = usage.Add(p.Usage, j.Usage)
	if j.SandboxId != "" && j.SandboxId != p.SandboxId {
		p.SandboxId = j.SandboxId // the job made the sandbox again
	}
	if j.Status != agentv1.JobStatus_JOB_STATUS_COMPLETED {
		reason := j.Error
		if reason == "" {
			reason = j.StatusReason
		}
		t.Status, t.Error = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_FAILED, fmt.Sprintf("job %s %s: %s", j.Id, store.StatusName(j.Status), reason)
		x.emit(TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_FAILED, t, ph))
		x.skipDependents(t)
		x.setTask(ctx, t.TaskId, tasksv1.TaskStatus_TASK_STATUS_BLOCKED, "project task failed: "+t.Error)
		return false, nil
	}
	changed := jr.State.ChangedFiles
	// The task's files are read from the sandbox while the runner goes on (a phase's
	// revision, the next task's context); they are taken in before anything needs them
	// and written with the next checkpoint (settle).
	r := x.readFiles(ctx, t, p.SandboxId, changed)
	t.OutputFiles, t.Status, t.Error = changed, agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_COMPLETED, ""
	if p.Mode == agentv1.ProjectMode_PROJECT_MODE_SESSION {
		if err := x.settle(); err != nil {
			return false, err
		}
		if err := x.commitTask(ctx, t, r.files); err != nil {
			return false, err
		}
	}
	// (The job moved its task to in_review: it waits for the project's review.)
	x.emit(TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_COMPLETED, t, ph))
	return false, nil
}

// readFiles starts reading task t's changed files from sandbox into a pending read.
func (x *run) readFiles(ctx context.Context, t *agentv1.ProjectTask, sandbox string, changed []string) *pendingRead {
	r := &pendingRead{t: t, files: make([]store.ProjectFile, len(changed)), done: make(chan struct{})}
	x.reads = append(x.reads, r)
	go func() {
		defer close(r.done)
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(8)
		for i, path := range changed {
			g.Go(func() error {
				f := store.ProjectFile{Path: path, TaskID: t.Id}
				resp, err := x.e.c.Sandbox.ReadFile(gctx, &sandboxv1.ReadFileRequest{SandboxId: sandbox, Path: path})
				switch {
				case status.Code(err) == codes.NotFound:
					f.Deleted = true
				case err != nil:
					return err
				default:
					f.Content = resp.Content
				}
				r.files[i] = f
				return nil
			})
		}
		r.err = g.Wait()
	}()
	return r
}

// settle waits for the pending reads and takes their files into the project: its files'
// history now, the stored contents with the next checkpoint.
func (x *run) settle() error {
	reads := x.reads
	x.reads = nil
	p := x.p()
	for _, r := range reads {
		<-r.done
		if r.err != nil {
			return r.err
		}
		files := r.files
		x.after = append(x.after, func(ctx context.Context, tx pgx.Tx) error { return store.PutProjectFiles(ctx, tx, p.Id, files) })
		x.unsaved = append(x.unsaved, files...)
		for _, f := range files {
			recordFile(p, f.Path, r.t.Id, f.Deleted)
		}
	}
	return nil
}

// files is the project's files (those at paths when any are given): as stored, with those
// taken in since the last checkpoint in their place.
func (x *run) files(ctx context.Context, paths ...string) ([]store.ProjectFile, error) {
	stored, err := x.e.store.ProjectFiles(ctx, x.p().Id, paths...)
	if err != nil {
		return nil, err
	}
	if len(x.unsaved) == 0 {
		return stored, nil
	}
	byPath := map[string]store.ProjectFile{}
	for _, f := range stored {
		byPath[f.Path] = f
	}
	for _, f := range x.unsaved { // in the order taken in: the latest stands
		if len(paths) == 0 || slices.Contains(paths, f.Path) {
			byPath[f.Path] = f
		}
	}
	out := make([]store.ProjectFile, 0, len(byPath))
	for _, f := range byPath {
		out = append(out, f)
	}
	slices.SortFunc(out, func(a, b store.ProjectFile) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// pending reports whether task id's files are still being read.
func (x *run) pending(id string) bool {
	return slices.ContainsFunc(x.reads, func(r *pendingRead) bool { return r.t.Id == id })
}

// recordFile notes that task wrote path: its version stands, an earlier task's is named in
// the history.
func recordFile(p *agentv1.Project, path, task string, deleted bool) {
	for _, f := range p.Files {
		if f.Path == path {
			if f.ProjectTaskId != task {
				f.EarlierTaskIds = append(f.EarlierTaskIds, f.ProjectTaskId)
				f.ProjectTaskId = task
			}
			f.Deleted = deleted
			return
		}
	}
	p.Files = append(p.Files, &agentv1.ProjectFile{Path: path, ProjectTaskId: task, Deleted: deleted})
	slices.SortFunc(p.Files, func(a, b *agentv1.ProjectFile) int { return strings.Compare(a.Path, b.Path) })
}

// skipDependents skips every pending task that depends on t, directly or not, naming t
// (the task that failed) as the reason.
func (x *run) skipDependents(t *agentv1.ProjectTask) {
	p := x.p()
	reason := fmt.Sprintf("depends on %q (%s), which failed", t.Title, t.Id)
	skipped := map[string]bool{t.Id: true}
	for changed := true; changed; {
		changed = false
		for _, ph := range p.Phases {
			for _, d := range ph.Tasks {
				if d.Status != agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_PENDING ||
					!slices.ContainsFunc(d.DependsOn, func(id string) bool { return skipped[id] }) {
					continue
				}
				x.skip(d, ph, reason)
				skipped[d.Id], changed = true, true
			}
		}
	}
}

func (x *run) skip(t *agentv1.ProjectTask, ph *agentv1.ProjectPhase, reason string) {
	t.Status, t.StatusReason = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_SKIPPED, reason
	x.emit(TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_SKIPPED, t, ph))
}

// setTask moves a task in the tasks service, best effort (the project's record is what
// counts).
func (x *run) setTask(ctx context.Context, id string, to tasksv1.TaskStatus, reason string) {
	if id == "" {
		return
	}
	_, err := x.e.c.Tasks.SetTaskStatus(ctx, &tasksv1.SetTaskStatusRequest{Id: id, Status: to, Reason: truncate(reason, 1000)})
	if status.Code(err) == codes.FailedPrecondition {
		if _, err = x.e.c.Tasks.SetTaskStatus(ctx, &tasksv1.SetTaskStatusRequest{Id: id, Status: tasksv1.TaskStatus_TASK_STATUS_IN_PROGRESS}); err == nil {
			_, err = x.e.c.Tasks.SetTaskStatus(ctx, &tasksv1.SetTaskStatusRequest{Id: id, Status: to, Reason: truncate(reason, 1000)})
		}
	}
	if err != nil {
		x.e.log.WarnContext(ctx, "project: move a task", "task", id, "to", to, "error", err)
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && (s[cut]&0xC0) == 0x80 {
		cut--
	}
	return s[:cut] + "…"
}

// revise asks ai.ReviseProjectPhase to adjust phase number (1-based) in the light of what
// was built, and applies what it changed to the pending tasks of that phase.
func (x *run) revise(ctx context.Context, number int) error {
	p := x.p()
	plan := &aiv1.ProjectPlan{Summary: p.Description, Conventions: p.Conventions}
	for _, ph := range p.Phases {
		aph := &aiv1.ProjectPhase{Name: ph.Name, Description: ph.Description}
		for _, t := range ph.Tasks {
			aph.Tasks = append(aph.Tasks, &aiv1.TaskProposal{Key: t.Id, Title: t.Title, Description: t.Description, DependsOn: t.DependsOn, Complexity: t.Complexity})
		}
		plan.Phases = append(plan.Phases, aph)
	}
	var outcomes []*aiv1.TaskOutcome
	for _, t := range Tasks(p.Phases) {
		switch t.Status {
		case agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_COMPLETED:
			outcomes = append(outcomes, &aiv1.TaskOutcome{Key: t.Id, Title: t.Title, Succeeded: true, Summary: "built", Files: t.OutputFiles})
		case agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_FAILED, agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_SKIPPED:
			outcomes = append(outcomes, &aiv1.TaskOutcome{Key: t.Id, Title: t.Title, Summary: firstNonEmpty(t.Error, t.StatusReason)})
		}
	}
	mctx, cancel := context.WithTimeout(ctx, x.e.cfg.CallTimeout)
	defer cancel()
	resp, err := x.e.c.AI.ReviseProjectPhase(mctx, &aiv1.ReviseProjectPhaseRequest{RequestId: x.key("revise", number), Request: request(p),
		Plan: plan, PhaseIndex: int32(number - 1), Completed: outcomes, Attribution: x.attribution(aiv1.CallPhase_CALL_PHASE_PLANNING)})
	if err != nil {
		return err
	}
	p.Usage = usage.Add(p.Usage, resp.Usage)
	if !resp.Changed {
		return nil
	}
	ph := p.Phases[number-1]
	rev := &agentv1.ProjectRevision{PhaseNumber: int32(number), Reason: resp.Reasoning, CreateTime: timestamppb.Now()}
	old := index(ph.Tasks)
	proposed := resp.GetPhase().GetTasks()
	keys := map[string]string{}
	for _, pt := range proposed {
		if _, ok := old[pt.Key]; ok {
			keys[pt.Key] = pt.Key
		} else if _, taken := index(Tasks(p.Phases))[pt.Key]; !taken {
			keys[pt.Key] = newID()
		}
	}
	var tasks []*agentv1.ProjectTask
	for _, pt := range proposed {
		id, ok := keys[pt.Key]
		if !ok {
			continue
		}
		var deps []string
		for _, d := range pt.DependsOn {
			if m, ok := keys[d]; ok {
				deps = append(deps, m)
			} else if _, ok := index(Tasks(p.Phases))[d]; ok {
				deps = append(deps, d)
			}
		}
		if o, ok := old[id]; ok {
			if o.Status != agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_PENDING {
				tasks = append(tasks, o)
				continue
			}
			if o.Title != pt.Title || o.Description != pt.Description || !slices.Equal(o.DependsOn, deps) {
				rev.ChangedTaskIds = append(rev.ChangedTaskIds, id)
			}
			o.Title, o.Description, o.DependsOn = pt.Title, pt.Description, deps
			if pt.Complexity > 0 {
				o.Complexity = min(pt.Complexity, 10)
			}
			tasks = append(tasks, o)
			continue
		}
		tasks = append(tasks, &agentv1.ProjectTask{Id: id, Title: pt.Title, Description: pt.Description, DependsOn: deps,
			Complexity: min(max(pt.Complexity, 0), 10), Status: agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_PENDING})
		rev.AddedTaskIds = append(rev.AddedTaskIds, id)
	}
	var dropped []*agentv1.ProjectTask
	for _, t := range ph.Tasks {
		if !slices.ContainsFunc(tasks, func(n *agentv1.ProjectTask) bool { return n.Id == t.Id }) {
			if t.Status != agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_PENDING {
				tasks = append(tasks, t) // what ran stays
				continue
			}
			dropped = append(dropped, t)
			rev.RemovedTaskIds = append(rev.RemovedTaskIds, t.Id)
		}
	}
	// The revised plan must still be a plan; a revision that breaks it is not applied.
	trial := slices.Clone(p.Phases)
	trial[number-1] = &agentv1.ProjectPhase{Number: ph.Number, Name: ph.Name, Description: ph.Description, Tasks: tasks}
	for _, d := range dropped {
		for _, t := range Tasks(trial) {
			t.DependsOn = slices.DeleteFunc(t.DependsOn, func(id string) bool { return id == d.Id })
		}
	}
	if err := Check(trial); err != nil {
		x.e.log.WarnContext(ctx, "project: the planner's revision breaks the plan; kept the phase as it was", "project", p.Id, "phase", number, "error", err)
		return nil
	}
	// New tasks become tasks in the tasks service.
	for _, t := range tasks {
		if t.TaskId != "" || !slices.Contains(rev.AddedTaskIds, t.Id) {
			continue
		}
		resp, err := x.e.c.Tasks.CreateTask(ctx, &tasksv1.CreateTaskRequest{RequestId: x.key("revise_task", number, t.Id), Title: truncate(t.Title, 490),
			Repo: p.Repo, Description: t.Description, Source: tasksv1.TaskSource_TASK_SOURCE_PROJECT, Status: tasksv1.TaskStatus_TASK_STATUS_PLANNED, ProjectId: p.Id})
		if err != nil {
			return err
		}
		t.TaskId = resp.GetTask().GetId()
	}
	for _, d := range dropped {
		x.setTask(ctx, d.TaskId, tasksv1.TaskStatus_TASK_STATUS_CANCELLED, "dropped by the project's revision before phase "+fmt.Sprint(number))
	}
	p.Phases = trial
	p.Revisions = append(p.Revisions, rev)
	x.emit(&agentv1.WatchProjectResponse{Type: agentv1.ProjectEventType_PROJECT_EVENT_TYPE_PHASE_REVISED,
		Payload: &agentv1.WatchProjectResponse_PhaseRevised{PhaseRevised: &agentv1.ProjectPhaseRevision{Phase: trial[number-1], Reason: resp.Reasoning}}})
	return nil
}

// request is what the project was asked to do: its request text, or for a plan made from
// tasks or issues, its description.
func request(p *agentv1.Project) string { return firstNonEmpty(p.Request, p.Description) }

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func (x *run) attribution(phase aiv1.CallPhase) *aiv1.Attribution {
	return &aiv1.Attribution{Repo: x.p().Repo, Phase: phase, ProjectId: x.p().Id}
}

// --- Branch and commits --------------------------------------------------------------------

// branch makes the project's branch once.
func (x *run) branch(ctx context.Context) error {
	p := x.p()
	if p.Branch == "" {
		p.Branch = branchName(p.Description, p.Id)
	}
	if x.done("branch") {
		return nil
	}
	_, err := x.e.c.Repos.CreateBranch(ctx, &githubv1.CreateBranchRequest{Repo: p.Repo, Branch: p.Branch, FromRef: p.BaseBranch})
	if err != nil && status.Code(err) != codes.AlreadyExists {
		return err
	}
	x.mark("branch")
	return nil
}

// commitTask commits task t's files to the project branch (session mode).
func (x *run) commitTask(ctx context.Context, t *agentv1.ProjectTask, files []store.ProjectFile) error {
	if len(files) == 0 {
		return nil
	}
	if err := x.branch(ctx); err != nil {
		return err
	}
	p := x.p()
	fc, err := x.changes(ctx, p.Branch, files)
	if err != nil || len(fc) == 0 {
		return err
	}
	resp, err := x.e.c.Repos.CommitFiles(ctx, &githubv1.CommitFilesRequest{Repo: p.Repo, Branch: p.Branch, Files: fc,
		Message:   fmt.Sprintf("thefold: %s\n\nProject: %s\nTask: %s (attempt %d)", t.Title, p.Id, t.Id, t.Attempts),
		RequestId: x.key("commit", t.Id, t.Attempts), AuthorName: "TheFold", AuthorEmail: "thefold@localhost"})
	if err != nil {
		return err
	}
	x.rec.State.CommitSHA = resp.GetCommitSha()
	return nil
}

// changes are files as the changes of a commit on ref: a file ref lacks is created, one it
// has is modified, a deleted one it has is deleted (one it lacks is left out).
func (x *run) changes(ctx context.Context, ref string, files []store.ProjectFile) ([]*typev1.FileChange, error) {
	p := x.p()
	missing := map[string]bool{}
	for i := 0; i < len(files); i += 100 {
		var paths []string
		for _, f := range files[i:min(i+100, len(files))] {
			paths = append(paths, f.Path)
		}
		resp, err := x.e.c.Repos.GetFiles(ctx, &githubv1.GetFilesRequest{Repo: p.Repo, Ref: ref, Paths: paths})
		if err != nil {
			return nil, err
		}
		for _, m := range resp.MissingPaths {
			missing[m] = true
		}
	}
	out := make([]*typev1.FileChange, 0, len(files))
	for _, f := range files {
		c := &typev1.FileChange{Path: f.Path, Action: typev1.FileAction_FILE_ACTION_MODIFY, Content: string(f.Content)}
		switch {
		case f.Deleted && missing[f.Path]:
			continue
		case f.Deleted:
			c.Action, c.Content = typev1.FileAction_FILE_ACTION_DELETE, ""
		case missing[f.Path]:
			c.Action = typev1.FileAction_FILE_ACTION_CREATE
		}
		out = append(out, c)
	}
	return out, nil
}

// branchName is the project's branch: thefold/project-<slug>-<id prefix>.
func branchName(title, id string) string { return "thefold/project-" + slug(title) + "-" + id[:8] }

// slug is title as a branch name's part: lower-case letters and digits, dashes between,
// at most about 40 characters ("work" for none).
func slug(title string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(title) {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') {
			b.WriteRune(r)
			dash = false
		} else if !dash && b.Len() > 0 {
			b.WriteByte('-')
			dash = true
		}
		if b.Len() >= 40 {
			break
		}
	}
	s := strings.Trim(b.String(), "-")
	if s == "" {
		s = "work"
	}
	return s
}

// --- The review ------------------------------------------------------------------------------

// review asks for ONE review of every file of every task and stops at the review gate.
func (x *run) review(ctx context.Context) error {
	p := x.p()
	if err := x.settle(); err != nil {
		return err
	}
	files, err := x.files(ctx)
	if err != nil {
		return err
	}
	var outcomes []*aiv1.TaskOutcome
	for _, t := range Tasks(p.Phases) {
		o := &aiv1.TaskOutcome{Key: t.Id, Title: t.Title, Files: t.OutputFiles, Succeeded: t.Status == agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_COMPLETED}
		o.Summary = firstNonEmpty(t.Error, t.StatusReason, strings.ToLower(strings.TrimPrefix(t.Status.String(), "PROJECT_TASK_STATUS_")))
		outcomes = append(outcomes, o)
	}
	aiFiles := trimForReview(files, x.e.cfg.ReviewTokens)
	if len(aiFiles) > maxReviewFiles {
		// The review takes at most maxReviewFiles files: the largest are left out (every
		// task's outcome still names its files).
		slices.SortStableFunc(aiFiles, func(a, b *aiv1.ReviewFile) int { return len(a.Content) - len(b.Content) })
		aiFiles = aiFiles[:maxReviewFiles]
		slices.SortStableFunc(aiFiles, func(a, b *aiv1.ReviewFile) int { return strings.Compare(a.Path, b.Path) })
	}
	plan := &aiv1.ProjectPlan{Summary: p.Description, Conventions: p.Conventions}
	for _, ph := range p.Phases {
		aph := &aiv1.ProjectPhase{Name: ph.Name, Description: ph.Description}
		for _, t := range ph.Tasks {
			aph.Tasks = append(aph.Tasks, &aiv1.TaskProposal{Key: t.Id, Title: t.Title, Description: t.Description, DependsOn: t.DependsOn})
		}
		plan.Phases = append(plan.Phases, aph)
	}
	mctx, cancel := context.WithTimeout(ctx, x.e.cfg.CallTimeout)
	defer cancel()
	// The sandbox is kept for the review's decision (a change request runs tasks in it
	// again) while the model reviews.
	var rc *aiv1.ReviewProjectResponse
	g, gctx := errgroup.WithContext(mctx)
	g.Go(func() (err error) {
		rc, err = x.e.c.AI.ReviewProject(gctx, &aiv1.ReviewProjectRequest{RequestId: x.key("review"), Request: request(p), Plan: plan,
			Outcomes: outcomes, Files: aiFiles, Attribution: x.attribution(aiv1.CallPhase_CALL_PHASE_REVIEW)})
		return err
	})
	if p.SandboxId != "" {
		g.Go(func() error {
			_, err := x.e.c.Sandbox.KeepAliveSandbox(gctx, &sandboxv1.KeepAliveSandboxRequest{Id: p.SandboxId, Pin: true})
			if status.Code(err) == codes.NotFound {
				return nil
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		if p.SandboxId != "" {
			// No review waits: the sandbox goes back to its time to live (a retry pins it again).
			_, _ = x.e.c.Sandbox.KeepAliveSandbox(context.WithoutCancel(ctx), &sandboxv1.KeepAliveSandboxRequest{Id: p.SandboxId})
		}
		return err
	}
	p.Usage = usage.Add(p.Usage, rc.Usage)
	var rfiles []*agentv1.ReviewFile
	stats := &typev1.DiffStats{}
	for _, f := range files {
		action := typev1.FileAction_FILE_ACTION_MODIFY
		if f.Deleted {
			action = typev1.FileAction_FILE_ACTION_DELETE
		}
		rfiles = append(rfiles, &agentv1.ReviewFile{Diff: &typev1.FileDiff{Path: f.Path, Action: action}, Content: string(f.Content)})
		stats.FilesChanged++
	}
	rev := &agentv1.Review{Id: newID(), QualityScore: rc.QualityScore, Concerns: rc.Concerns, Documentation: rc.Documentation,
		ArchitecturalDecisions: rc.ArchitecturalDecisions, Files: rfiles, Stats: stats, PreviousReviewId: x.rec.State.PreviousReview}
	x.rec.State.ReviewMemories = rc.MemoriesExtracted
	key := x.key("review")
	x.after = append(x.after, func(ctx context.Context, tx pgx.Tx) error { return store.InsertProjectReview(ctx, tx, p, rev, key) })
	p.ReviewId = rev.Id
	x.emit(&agentv1.WatchProjectResponse{Type: agentv1.ProjectEventType_PROJECT_EVENT_TYPE_REVIEW_SUBMITTED,
		Payload: &agentv1.WatchProjectResponse_ReviewSubmitted{ReviewSubmitted: &agentv1.ReviewSubmitted{ReviewId: rev.Id, QualityScore: rc.QualityScore}}})
	x.setStatus(agentv1.ProjectStatus_PROJECT_STATUS_PENDING_REVIEW, fmt.Sprintf("review %s waits for a decision (quality %d/10)", rev.Id, rc.QualityScore))
	return nil
}

// maxReviewFiles is the most files ai.ReviewProject takes.
const maxReviewFiles = 200

// trimForReview is the project's files for its review within a token budget: files are
// taken smallest first, each whole when it fits its fair share of what is left (the
// budget over the files not yet taken), else cut to the lines that fit, with a note of
// what was left out.
func trimForReview(files []store.ProjectFile, budget int) []*aiv1.ReviewFile {
	out := make([]*aiv1.ReviewFile, len(files))
	order := make([]int, len(files))
	for i := range files {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return len(files[a].Content) - len(files[b].Content) })
	left := budget
	for k, i := range order {
		f := files[i]
		rf := &aiv1.ReviewFile{Path: f.Path, Action: typev1.FileAction_FILE_ACTION_MODIFY}
		out[i] = rf
		if f.Deleted {
			rf.Action = typev1.FileAction_FILE_ACTION_DELETE
			continue
		}
		text := string(f.Content)
		n, share := tokens.Count(text), max(left/(len(order)-k), 0)
		if n <= share {
			rf.Content, left = text, left-n
			continue
		}
		lines := strings.Split(text, "\n")
		if keep := min(max(len(lines)*share/max(n, 1), 1), len(lines)); keep < len(lines) {
			rf.Content = strings.Join(lines[:keep], "\n") +
				fmt.Sprintf("\n… (%d of its %d lines not shown: the file is cut to fit the review's budget)", len(lines)-keep, len(lines))
		} else {
			// Too few lines to cut by (a minified file): cut its bytes instead.
			keep := truncate(text, len(text)*share/max(n, 1))
			rf.Content = strings.TrimSuffix(keep, "…") +
				fmt.Sprintf("\n… (%d of its %d bytes not shown: the file is cut to fit the review's budget)", len(text)-len(strings.TrimSuffix(keep, "…")), len(text))
		}
		left = max(left-tokens.Count(rf.Content), 0)
	}
	return out
}

// --- Completion --------------------------------------------------------------------------------

// complete carries an approved review to one pull request: the branch, one commit of
// every file (or, in session mode, the commits already made), the pull request, the tasks
// done, memories, the sandbox destroyed. Each effect is made once.
func (x *run) complete(ctx context.Context) error {
	p := x.p()
	rev, err := x.e.store.GetReview(ctx, p.OwnerId, p.ReviewId)
	if err != nil {
		return err
	}
	if err := x.branch(ctx); err != nil {
		return err
	}
	if !x.done("commit") && p.Mode == agentv1.ProjectMode_PROJECT_MODE_SESSION {
		// Every finished task's files were committed as it finished.
		x.mark("commit")
	}
	if !x.done("commit") {
		files, err := x.files(ctx)
		if err != nil {
			return err
		}
		if len(files) == 0 {
			return status.Error(codes.FailedPrecondition, "the approved project changes no files")
		}
		fc, err := x.changes(ctx, p.Branch, files)
		if err != nil {
			return err
		}
		resp, err := x.e.c.Repos.CommitFiles(ctx, &githubv1.CommitFilesRequest{Repo: p.Repo, Branch: p.Branch, Files: fc,
			Message: "thefold: " + firstLine(p.Description) + "\n\nProject: " + p.Id, RequestId: x.key("commit_all"),
			AuthorName: "TheFold", AuthorEmail: "thefold@localhost"})
		if err != nil {
			return err
		}
		if resp.GetCommitSha() != "" {
			x.rec.State.CommitSHA = resp.GetCommitSha()
		}
		x.mark("commit")
		return nil
	}
	if !x.done("pull_request") {
		resp, err := x.e.c.Repos.CreatePullRequest(ctx, &githubv1.CreatePullRequestRequest{Repo: p.Repo, Head: p.Branch, Base: p.BaseBranch,
			Title: truncate(firstLine(p.Description), 250), Body: x.prBody(rev), RequestId: x.key("pull_request")})
		if err != nil {
			return err
		}
		pr := resp.GetPullRequest()
		p.PullRequest = &typev1.PullRequestRef{Repo: p.Repo, Number: pr.GetNumber(), Url: pr.GetUrl()}
		rev.PullRequest = p.PullRequest
		x.after = append(x.after, func(ctx context.Context, tx pgx.Tx) error { return store.UpdateReview(ctx, tx, rev) })
		x.emit(&agentv1.WatchProjectResponse{Type: agentv1.ProjectEventType_PROJECT_EVENT_TYPE_PULL_REQUEST_OPENED,
			Payload: &agentv1.WatchProjectResponse_PullRequest{PullRequest: p.PullRequest}})
		x.mark("pull_request")
		return nil
	}
	if !x.done("tasks") {
		for _, t := range Tasks(p.Phases) {
			if t.TaskId == "" || t.Status != agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_COMPLETED {
				continue
			}
			if _, err := x.e.c.Tasks.UpdateTask(ctx, &tasksv1.UpdateTaskRequest{Id: t.TaskId, Task: &tasksv1.Task{PullRequest: p.PullRequest},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"pull_request"}}}); err != nil {
				return err
			}
			x.setTask(ctx, t.TaskId, tasksv1.TaskStatus_TASK_STATUS_DONE, "pull request "+p.GetPullRequest().GetUrl())
		}
		x.mark("tasks")
		return nil
	}
	if !x.done("memories") {
		if err := x.remember(ctx, rev); err != nil {
			// Memory is learning, not a precondition: the project completes without it.
			x.e.log.WarnContext(ctx, "project: remember", "project", p.Id, "error", err)
		}
		x.mark("memories")
		return nil
	}
	if p.SandboxId != "" {
		if _, err := x.e.c.Sandbox.DestroySandbox(ctx, &sandboxv1.DestroySandboxRequest{Id: p.SandboxId}); err != nil && status.Code(err) != codes.NotFound {
			x.e.log.WarnContext(ctx, "project: destroy the sandbox", "project", p.Id, "sandbox", p.SandboxId, "error", err)
		}
		p.SandboxId = ""
	}
	x.setStatus(agentv1.ProjectStatus_PROJECT_STATUS_COMPLETED, "pull request "+p.GetPullRequest().GetUrl()+" opened")
	return nil
}

// prBody lists the phases, tasks, skipped tasks and why, the review and the cost.
func (x *run) prBody(rev *agentv1.Review) string {
	p := x.p()
	var b strings.Builder
	if rev.Documentation != "" {
		b.WriteString(rev.Documentation + "\n\n")
	}
	b.WriteString("## Phases and tasks\n")
	var skipped []string
	for _, ph := range p.Phases {
		fmt.Fprintf(&b, "\n### Phase %d: %s\n", ph.Number, ph.Name)
		for _, t := range ph.Tasks {
			st := strings.ToLower(strings.TrimPrefix(t.Status.String(), "PROJECT_TASK_STATUS_"))
			fmt.Fprintf(&b, "- [%s] %s", st, t.Title)
			if len(t.OutputFiles) > 0 {
				fmt.Fprintf(&b, " — %s", strings.Join(t.OutputFiles, ", "))
			}
			b.WriteByte('\n')
			if t.Status != agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_COMPLETED {
				skipped = append(skipped, fmt.Sprintf("- %s (%s): %s", t.Title, st, firstNonEmpty(t.StatusReason, t.Error)))
			}
		}
	}
	if len(skipped) > 0 {
		b.WriteString("\n## Not done\n" + strings.Join(skipped, "\n") + "\n")
	}
	if len(p.Revisions) > 0 {
		b.WriteString("\n## Plan revisions\n")
		for _, r := range p.Revisions {
			fmt.Fprintf(&b, "- before phase %d: %s (+%d, -%d, ~%d tasks)\n", r.PhaseNumber, r.Reason, len(r.AddedTaskIds), len(r.RemovedTaskIds), len(r.ChangedTaskIds))
		}
	}
	fmt.Fprintf(&b, "\n---\nOpened by TheFold (project %s). Review quality %d/10. Cost: %d tokens, $%.4f.", p.Id, rev.QualityScore,
		usage.Tokens(p.Usage), float64(p.Usage.GetCostMicros())/1e6)
	return b.String()
}

// remember stores the project's decision and what its review found worth keeping.
func (x *run) remember(ctx context.Context, rev *agentv1.Review) error {
	p := x.p()
	if x.e.c.Memory == nil {
		return nil
	}
	put := func(k string, typ typev1.MemoryType, content string, tags []string) error {
		_, err := x.e.c.Memory.StoreMemory(ctx, &memoryv1.StoreMemoryRequest{Content: content, Repo: p.Repo, Type: typ, Tags: tags,
			RequestId: x.key("memory", k)})
		return err
	}
	n := 0
	for _, t := range Tasks(p.Phases) {
		if t.Status == agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_COMPLETED {
			n++
		}
	}
	decision := fmt.Sprintf("Project %q in %s was built in %d phases, %d tasks done (%d files; review quality %d/10).",
		firstLine(p.Description), p.Repo, len(p.Phases), n, len(rev.Files), rev.QualityScore)
	for _, d := range rev.ArchitecturalDecisions {
		decision += "\n- " + d
	}
	if err := put("decision", typev1.MemoryType_MEMORY_TYPE_DECISION, truncate(decision, 8000), []string{"decision", "project"}); err != nil {
		return err
	}
	for i, m := range x.rec.State.ReviewMemories {
		if err := put(fmt.Sprintf("review%d", i), typev1.MemoryType_MEMORY_TYPE_CODE_PATTERN, truncate(m, 4000), []string{"code-review", "project"}); err != nil {
			return err
		}
	}
	return nil
}
