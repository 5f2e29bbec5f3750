package loop

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/usage"

	"github.com/thefold/thefold/services/agent/internal/breaker"
	"github.com/thefold/thefold/services/agent/internal/store"
)

// run is one worker's hold on one job.
type run struct {
	e     *Engine
	rec   *store.Record
	lease string
	// since is when the job's active time was last counted.
	since time.Time
	// step collects what the step in progress writes with its checkpoint.
	step store.Step
	// stepPhase and stepStart are the phase the step began in and when.
	stepPhase agentv1.JobPhase
	stepStart time.Time
}

func (r *run) job() *agentv1.Job { return r.rec.Job }

// key is an idempotency key of this job's side effect: the job, the generation and the
// given parts.
func (r *run) key(parts ...any) string {
	var b strings.Builder
	b.WriteString(r.job().Id)
	fmt.Fprintf(&b, ":g%d", r.rec.State.Generation)
	for _, p := range parts {
		fmt.Fprintf(&b, ":%v", p)
	}
	return b.String()
}

// shortHash is a short stable hash of s, for keys that depend on text.
func shortHash(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:6])
}

func (r *run) emit(evs ...*agentv1.WatchJobResponse) { r.step.Events = append(r.step.Events, evs...) }

func (r *run) thought(format string, args ...any) {
	r.emit(store.ThoughtEvent(fmt.Sprintf(format, args...)))
}

// audit records a side effect (or its failure) under key.
func (r *run) audit(action, key string, details map[string]any, err error, d time.Duration) {
	r.step.Audit = append(r.step.Audit, store.Audit{Key: key, Actor: Actor, Action: action, Details: details, Err: err, Duration: d})
}

// spend adds a call's usage to the job and to the current phase's metrics.
func (r *run) spend(u *typev1.Usage) {
	if u == nil {
		return
	}
	j := r.job()
	j.Usage = usage.Add(j.Usage, u)
	r.step.Metrics = append(r.step.Metrics, store.Metric{Phase: j.Phase, Usage: u})
}

func (r *run) setPhase(p agentv1.JobPhase) {
	j := r.job()
	if j.Phase == p {
		return
	}
	prev := j.Phase
	j.Phase = p
	r.emit(store.PhaseEvent(prev, j))
}

func (r *run) setStatus(s agentv1.JobStatus, reason string) {
	j := r.job()
	prev := j.Status
	j.Status, j.StatusReason = s, reason
	if prev != s {
		r.emit(store.StatusEvent(prev, j))
	}
}

// save writes the checkpoint: the job, its context and state, with what the step
// collected. The step's wall time goes to the phase it ran in.
func (r *run) save(ctx context.Context) error {
	now := time.Now()
	r.rec.State.Active += now.Sub(r.since)
	r.since = now
	if !r.stepStart.IsZero() {
		r.step.Metrics = append(r.step.Metrics, store.Metric{Phase: r.stepPhase, Duration: now.Sub(r.stepStart)})
		r.stepStart = now
	}
	err := r.e.store.Save(ctx, r.rec, r.lease, r.step)
	r.step = store.Step{}
	return err
}

// loop runs steps until the job stops being RUNNING.
func (r *run) loop(ctx context.Context) error {
	for {
		j := r.job()
		if j.Status != running {
			return nil
		}
		if j.Phase == agentv1.JobPhase_JOB_PHASE_UNSPECIFIED {
			r.setPhase(phasePreparing)
		}
		r.stepPhase, r.stepStart = j.Phase, time.Now()
		if r.overBudget() {
			return r.save(ctx)
		}
		var err error
		switch j.Phase {
		case phasePreparing:
			err = r.prepare(ctx)
		case phaseContext:
			err = r.gather(ctx)
		case phaseConfident:
			err = r.confidence(ctx)
		case phaseComplex:
			err = r.complexity(ctx)
		case phaseSubAgents:
			err = r.subAgents(ctx)
		case phasePlanning:
			err = r.plan(ctx)
		case phaseSandbox:
			err = r.sandbox(ctx)
		case phaseBuilding:
			err = r.build(ctx)
		case phaseValidate:
			err = r.validate(ctx)
		case phaseDiagnose:
			err = r.diagnose(ctx)
		case phaseIntervene:
			err = r.intervene(ctx)
		case phaseReviewing:
			err = r.review(ctx)
		case phaseComplete:
			err = r.complete(ctx)
		default:
			err = fmt.Errorf("job %s: unknown phase %v", j.Id, j.Phase)
		}
		if err != nil {
			return err
		}
		r.rec.State.RunErrors = 0
		if err := r.save(ctx); err != nil {
			return err
		}
	}
}

// overBudget stops the job in HUMAN_NEEDED when it has spent its budget.
func (r *run) overBudget() bool {
	j := r.job()
	b := j.GetBudget()
	what := usage.Exhausted(j.Usage, b, r.rec.State.Active+time.Since(r.since))
	if what == "" {
		return false
	}
	r.emit(&agentv1.WatchJobResponse{
		Type:    agentv1.JobEventType_JOB_EVENT_TYPE_BUDGET_EXHAUSTED,
		Payload: &agentv1.WatchJobResponse_BudgetExhausted{BudgetExhausted: &agentv1.BudgetExhausted{Usage: j.Usage, Budget: b}},
	})
	r.human("budget exhausted: spent " + what)
	return true
}

// human stops the job for a person: ResumeJob with guidance, SkipTask or ResolveTask. A
// project's job (a crew worker's too) never waits for a person: it fails, and the project
// decides (its task is FAILED, its dependents skipped; RetryProjectTask runs it again).
func (r *run) human(reason string) {
	r.job().Error = reason
	if r.job().ProjectId != "" {
		r.thought("gave up: %s", reason)
		r.setStatus(failed, reason)
		return
	}
	r.thought("needs a human: %s", reason)
	r.setStatus(humanNeeded, reason)
}

// permanent reports whether a call's error will not go away by trying again.
func permanent(err error) bool {
	switch status.Code(err) {
	case codes.InvalidArgument, codes.NotFound, codes.PermissionDenied, codes.FailedPrecondition, codes.OutOfRange,
		codes.Unimplemented, codes.AlreadyExists, codes.Unauthenticated:
		return true
	case codes.ResourceExhausted:
		return spendLimited(err)
	}
	return false
}

// spendLimited reports whether err is ai's per-user daily spend limit (ErrorInfo reason
// DAILY_SPEND_LIMIT_EXCEEDED): unlike a provider's rate limit it lasts until the next UTC
// day, so the job fails with ai's message (which says when calls are accepted again)
// instead of trying the step again and again.
func spendLimited(err error) bool {
	for _, d := range status.Convert(err).Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok && info.GetDomain() == "ai.thefold.dev" && info.GetReason() == "DAILY_SPEND_LIMIT_EXCEEDED" {
			return true
		}
	}
	return false
}

// settle ends a run that failed with err: an open circuit breaker pauses the job (the
// service it needs is down; no attempt is burnt), an error that will not go away fails
// it, and anything else is returned so the job queue tries the run again later (it
// resumes from the last checkpoint).
func (r *run) settle(ctx context.Context, err error) error {
	// What the failed step changed is dropped: the job goes on from its last checkpoint.
	tries := r.rec.State.RunErrors
	if rec, lerr := r.e.store.Load(ctx, r.job().Id); lerr == nil {
		r.rec = rec
	}
	r.rec.State.RunErrors = tries
	j := r.job()
	r.step = store.Step{}
	open, isOpen := breaker.Open(err)
	if !isOpen && !permanent(err) {
		r.rec.State.RunErrors++
	}
	switch {
	case isOpen:
		// It goes on by itself when the breaker lets a trial call through (or by ResumeJob).
		r.rec.State.AutoResumeAt = open.RetryAt.Add(100 * time.Millisecond)
		r.rec.State.RunErrors = 0 // the breaker, not the try count, judges a service that is down
		r.setStatus(paused, fmt.Sprintf("%s; the job resumes by itself then (or by ResumeJob)", open.Error()))
		r.audit("job_paused", r.key("paused", j.Phase, time.Now().UnixNano()), map[string]any{"reason": open.Error()}, nil, 0)
	case permanent(err) || r.rec.State.RunErrors >= maxRunErrors:
		msg := fmt.Sprintf("%s: %s", strings.ToLower(strings.TrimPrefix(j.Phase.String(), "JOB_PHASE_")), status.Convert(err).Message())
		if !permanent(err) {
			msg = fmt.Sprintf("gave up after %d failed tries of one step: %s", r.rec.State.RunErrors, msg)
		}
		j.Error = msg
		r.setStatus(failed, msg)
		r.audit("job_failed", r.key("failed"), map[string]any{"error": msg}, nil, 0)
		r.cleanup(ctx, tasksv1.TaskStatus_TASK_STATUS_BLOCKED, "job failed: "+msg)
	default:
		r.e.log.WarnContext(ctx, "job run failed; it will be tried again from its last checkpoint", "job", j.Id, "phase", j.Phase,
			"tries", r.rec.State.RunErrors, "error", err)
		// The count of failed tries is kept (nothing else of the failed step is).
		if serr := r.e.store.Save(ctx, r.rec, r.lease, store.Step{}); serr != nil && !errors.Is(serr, store.ErrLeaseLost) {
			r.e.log.WarnContext(ctx, "job: record a failed try", "job", j.Id, "error", serr)
		}
		_ = r.e.store.Release(ctx, j.Id, r.lease)
		return err
	}
	if serr := r.save(ctx); serr != nil && !errors.Is(serr, store.ErrLeaseLost) {
		return errors.Join(err, serr)
	}
	return nil
}

// maxRunErrors is how many times in a row one step may fail with a transient error before
// the job fails. It is above the breakers' failure counts, so a service that is down opens
// its breaker (and pauses the job) before the job gives up.
const maxRunErrors = 8

// cleanup destroys the job's sandbox and moves its task to taskStatus (unless unset),
// best effort: the job's end is recorded whatever they answer.
func (r *run) cleanup(ctx context.Context, taskStatus tasksv1.TaskStatus, reason string) {
	j := r.job()
	if j.SandboxId != "" && !collectOnly(j) { // a project's sandbox is the project's
		_, err := r.e.c.Sandbox.DestroySandbox(ctx, &sandboxv1.DestroySandboxRequest{Id: j.SandboxId})
		if status.Code(err) == codes.NotFound {
			err = nil
		}
		r.audit("sandbox_destroyed", r.key("sandbox_destroyed", j.SandboxId), map[string]any{"sandbox_id": j.SandboxId}, err, 0)
	}
	if taskStatus != tasksv1.TaskStatus_TASK_STATUS_UNSPECIFIED {
		_, err := r.e.c.Tasks.SetTaskStatus(ctx, &tasksv1.SetTaskStatusRequest{Id: j.TaskId, Status: taskStatus, Reason: truncate(reason, 1000)})
		r.audit("task_status_changed", r.key("task", taskStatus, shortHash(reason)), map[string]any{"status": taskStatus.String(), "reason": reason}, err, 0)
	}
}

// modelCall bounds one model call (or another long one): the platform's default deadline
// of 30 s is too short for planning or reviewing with a real model.
func (r *run) modelCall(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, r.e.cfg.CallTimeout)
}

// modelChoice is the model the job's own calls use: the owner's default model for
// planning when the preferences name one, else the job's, selected in the owner's budget
// mode.
func (r *run) modelChoice() *aiv1.ModelChoice {
	return r.modelFor("planning")
}

// modelFor is the model of the job's calls for purpose ("planning", "review"; see
// Preferences.default_models).
func (r *run) modelFor(purpose string) *aiv1.ModelChoice {
	j := r.job()
	m := j.Model
	if d := j.GetPreferences().GetDefaultModels()[purpose]; d != "" {
		m = d
	}
	return &aiv1.ModelChoice{Model: m, Complexity: j.Complexity, BudgetMode: r.budgetMode()}
}

// attribution tags the job's calls in the ai usage ledger.
func (r *run) attribution(phase aiv1.CallPhase) *aiv1.Attribution {
	j := r.job()
	return &aiv1.Attribution{JobId: j.Id, TaskId: j.TaskId, Repo: j.Repo, Phase: phase, BuildId: j.BuildId, ProjectId: j.ProjectId}
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
