// Package service is the agent's gRPC API: AgentService (jobs and the human controls) and
// ReviewService (the review gate). It authenticates the caller, checks requests
// (InvalidArgument naming the field), checks each job's state for the control asked
// (FailedPrecondition saying which), and records changes through the store, queueing the
// job's next run in the same transaction; the loop runs jobs in the background.
package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/events"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/jobrun"
	"github.com/thefold/thefold/pkg/linear"
	"github.com/thefold/thefold/pkg/seal"
	"github.com/thefold/thefold/pkg/usage"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/agent/internal/loop"
	"github.com/thefold/thefold/services/agent/internal/store"
)

// Limits of requests.
const (
	maxText   = 16 << 10
	maxReason = 4000
	maxModel  = 200
	maxBranch = 250
	maxAction = 64
)

// Queue starts job runs (jobrun.Enqueuer).
type Queue = jobrun.Enqueuer

// Stopper stops a job this process runs (the loop engine).
type Stopper interface{ Stop(id string) }

// Options configure the servers.
type Options struct {
	RateLimit  store.RateLimit
	Budget     *typev1.Budget
	Heartbeat  time.Duration
	MaxWatches int
	Log        *slog.Logger
	Stopper    Stopper
	Queue      Queue
	Tasks      tasksv1.TaskServiceClient
	Repos      githubv1.RepoServiceClient
	Sandbox    sandboxv1.SandboxServiceClient
	Builder    builderv1.BuilderServiceClient
	Memory     memoryv1.MemoryServiceClient
	// AI plans projects (DecomposeProject); CallTimeout bounds such a model call.
	AI          aiv1.AIServiceClient
	CallTimeout time.Duration
	// ProjectQueue starts project runs; ProjectStopper stops one this process runs.
	ProjectQueue   Queue
	ProjectStopper Stopper

	// MaxWatchesPerUser bounds the WatchJob streams one caller holds (auth.CallerKey), so
	// one user cannot take every slot; <= 0 leaves only MaxWatches.
	MaxWatchesPerUser int
	// Secrets seals people's integration secrets; nil: integrations cannot be created.
	Secrets *seal.Box
	// Disabled reports whether a user was disabled (the gateway's revocations); nil: none
	// known. Inbound messages of a disabled owner's integration are refused.
	Disabled func(user string) bool
	// WebhookHosts are the hosts webhooks may be posted to beside Slack's and Discord's.
	WebhookHosts []string
	// Linear syncs Linear connections; nil: LinearService is FAILED_PRECONDITION.
	Linear LinearSyncer
}

// LinearSyncer is the Linear sync (linearsync.Syncer) as the service uses it.
type LinearSyncer interface {
	// NewClient is a Linear client with key.
	NewClient(key string) *linear.Client
	// Sync pulls and pushes rec now (every issue of the chosen states when full).
	Sync(ctx context.Context, rec *store.LinearRecord, full bool) (*agentv1.SyncLinearResponse, error)
}

// Server implements AgentService and ReviewService.
type Server struct {
	agentv1.UnimplementedAgentServiceServer
	store *store.Store
	o     Options
	watch *events.Handler[*agentv1.WatchJobResponse]
	log   *slog.Logger
	// projects is the ProjectService side.
	projects *projects
}

// New returns a Server.
func New(st *store.Store, o Options) *Server {
	log := o.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	watch := st.WatchHandler()
	watch.Every, watch.Watches = o.Heartbeat, events.NewWatches(max(o.MaxWatches, 1), "job watches", events.PerCaller(o.MaxWatchesPerUser))
	s := &Server{store: st, o: o, watch: watch, log: log}
	s.projects = newProjects(s)
	return s
}

// Reviews is the ReviewService side of the server.
func (s *Server) Reviews() agentv1.ReviewServiceServer { return &reviews{s: s} }

var _ agentv1.AgentServiceServer = (*Server)(nil)

func caller(ctx context.Context) (string, error) {
	p, err := auth.MustFromContext(ctx)
	if err != nil {
		return "", err
	}
	return p.UserID, nil
}

func actor(owner string) string { return "user:" + owner }

// checkBudget checks a budget's caps (zero fields take defaults).
func checkBudget(field string, b *typev1.Budget) error {
	if b == nil {
		return nil
	}
	if b.MaxTokens < 0 {
		return errs.Invalid(field+".max_tokens", "must not be negative")
	}
	if b.MaxCostMicros < 0 {
		return errs.Invalid(field+".max_cost_micros", "must not be negative")
	}
	if w := b.MaxWallTime; w != nil {
		if err := w.CheckValid(); err != nil || w.AsDuration() < 0 {
			return errs.Invalid(field+".max_wall_time", "must be a valid, non-negative duration")
		}
	}
	return nil
}

// withDefaults fills b's zero caps from def.
func withDefaults(b, def *typev1.Budget) *typev1.Budget {
	out := proto.CloneOf(def)
	if out == nil {
		out = &typev1.Budget{}
	}
	if b.GetMaxTokens() > 0 {
		out.MaxTokens = b.MaxTokens
	}
	if b.GetMaxCostMicros() > 0 {
		out.MaxCostMicros = b.MaxCostMicros
	}
	if b.GetMaxWallTime().AsDuration() > 0 {
		out.MaxWallTime = b.MaxWallTime
	}
	return out
}

// StartTask creates a job for one of the caller's tasks and queues it, with the caller's
// preferences as they are now (Job.preferences) and the budget the request gives, each cap
// it leaves unset taken from the preferences' job budget, else the server's default.
func (s *Server) StartTask(ctx context.Context, req *agentv1.StartTaskRequest) (*agentv1.StartTaskResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if req.RequestId != "" {
		if err := validate.RequestID("request_id", req.RequestId); err != nil {
			return nil, err
		}
	}
	taskID, err := validate.UUID("task_id", req.TaskId, true)
	if err != nil {
		return nil, err
	}
	if err := checkBranch("base_branch", req.BaseBranch); err != nil {
		return nil, err
	}
	if err := validate.MaxLen("model", req.Model, maxModel); err != nil {
		return nil, err
	}
	if err := checkBudget("budget", req.Budget); err != nil {
		return nil, err
	}
	if req.RequestId != "" {
		// A retry returns the job the first call started, whatever the task is now.
		j, hash, err := s.store.ByRequest(ctx, owner, req.RequestId)
		if err != nil {
			return nil, err
		}
		if j != nil {
			if string(hash) != string(store.RequestHash(req)) {
				return nil, errs.Invalid("request_id", "was used for a different StartTask request")
			}
			return &agentv1.StartTaskResponse{Job: j}, nil
		}
	}
	if err := s.store.CheckRate(ctx, owner, s.o.RateLimit); err != nil {
		return nil, rateLimited(err)
	}
	t, err := s.o.Tasks.GetTask(ctx, &tasksv1.GetTaskRequest{Id: taskID})
	if status.Code(err) == codes.NotFound {
		return nil, errs.NotFound("task", taskID)
	}
	if err != nil {
		return nil, err
	}
	task := t.GetTask()
	switch task.Status {
	case tasksv1.TaskStatus_TASK_STATUS_DONE, tasksv1.TaskStatus_TASK_STATUS_CANCELLED:
		return nil, errs.Precondition("task %s is %s; reopen it (SetTaskStatus backlog) to run it again", taskID, strings.ToLower(strings.TrimPrefix(task.Status.String(), "TASK_STATUS_")))
	}
	if task.Repo == "" {
		return nil, errs.Precondition("task %s names no repository; set its repo first", taskID)
	}
	branch := req.BaseBranch
	if branch == "" {
		repo, err := s.o.Repos.GetRepo(ctx, &githubv1.GetRepoRequest{Repo: task.Repo})
		if status.Code(err) == codes.NotFound {
			return nil, errs.Precondition("the task's repository %s does not exist", task.Repo)
		}
		if err != nil {
			return nil, err
		}
		branch = repo.GetRepo().GetDefaultBranch()
		if branch == "" {
			branch = "main"
		}
	}
	// The job runs under its owner's preferences as they are now (the loop reads them from
	// the job), and a cap the request leaves unset comes from them before the server's.
	prefs, err := s.store.GetPreferences(ctx, owner)
	if err != nil {
		return nil, err
	}
	j := &agentv1.Job{OwnerId: owner, TaskId: taskID, Repo: task.Repo, BaseBranch: branch, Model: req.Model,
		Budget: withDefaults(req.Budget, withDefaults(prefs.JobBudget, s.o.Budget)), Usage: &typev1.Usage{}, Preferences: prefs}
	rec, _, err := s.store.Create(ctx, j, req.RequestId, store.RequestHash(req), s.o.RateLimit, s.o.Queue.Enqueue)
	if err != nil {
		return nil, rateLimited(err)
	}
	return &agentv1.StartTaskResponse{Job: rec.Job}, nil
}

// rateLimited makes a *store.RateLimitError RESOURCE_EXHAUSTED with a RetryInfo; other
// errors pass.
func rateLimited(err error) error {
	var rl *store.RateLimitError
	if !errors.As(err, &rl) {
		return err
	}
	return errs.Public(codes.ResourceExhausted, "%s", rl.Error()).
		WithDetails(&errdetails.RetryInfo{RetryDelay: durationpb.New(max(time.Until(rl.Retry), time.Second).Round(time.Second))})
}

// reasonOr is a request's reason (at most maxReason bytes, else INVALID_ARGUMENT naming
// "reason"), or def when it gives none.
func reasonOr(reason, def string) (string, error) {
	if err := validate.MaxLen("reason", reason, maxReason); err != nil {
		return "", err
	}
	if reason == "" {
		return def, nil
	}
	return reason, nil
}

// checkBranch checks a git branch name (empty allowed).
func checkBranch(field, b string) error {
	if b == "" {
		return nil
	}
	if len(b) > maxBranch || strings.ContainsAny(b, " ~^:?*[\\\x7f") || strings.Contains(b, "..") || strings.HasPrefix(b, "-") ||
		strings.HasPrefix(b, "/") || strings.HasSuffix(b, "/") || strings.HasSuffix(b, ".lock") || !validate.PrintableASCII(b, false) {
		return errs.Invalid(field, "not a valid branch name")
	}
	return nil
}

// GetJob returns one of the caller's jobs with its plan.
func (s *Server) GetJob(ctx context.Context, req *agentv1.GetJobRequest) (*agentv1.GetJobResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.Id, true)
	if err != nil {
		return nil, err
	}
	j, err := s.store.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return &agentv1.GetJobResponse{Job: j}, nil
}

// ListJobs lists the caller's jobs, newest first.
func (s *Server) ListJobs(ctx context.Context, req *agentv1.ListJobsRequest) (*agentv1.ListJobsResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	f := store.ListFilter{Statuses: req.Statuses}
	if f.TaskID, err = validate.UUID("task_id", req.TaskId, false); err != nil {
		return nil, err
	}
	if f.ProjectID, err = validate.UUID("project_id", req.ProjectId, false); err != nil {
		return nil, err
	}
	if err := validate.Repo("repo", req.Repo, false); err != nil {
		return nil, err
	}
	f.Repo = req.Repo
	for i, st := range req.Statuses {
		if err := validate.Enum(fmt.Sprintf("statuses[%d]", i), st, false); err != nil {
			return nil, err
		}
	}
	size, err := validate.PageSize(req.PageSize, 50, 200)
	if err != nil {
		return nil, err
	}
	jobs, next, err := s.store.List(ctx, owner, f, size, req.PageToken)
	if err != nil {
		return nil, err
	}
	return &agentv1.ListJobsResponse{Jobs: jobs, NextPageToken: next}, nil
}

// control applies change to the caller's job id and returns it; runAfter stops (stop) the
// job's current run in this process.
func (s *Server) control(ctx context.Context, id string, change store.Change, stop bool) (*store.Record, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	rec, err := s.store.Mutate(ctx, owner, id, change, s.o.Queue.Enqueue)
	if err != nil {
		return nil, err
	}
	if stop && s.o.Stopper != nil {
		s.o.Stopper.Stop(id)
	}
	return rec, nil
}

// once makes a control with a request_id happen once: the job keeps its latest control's
// key, and a retry of that call (same RPC, key and request) is done already, to be answered
// with the job as it is; the same key for another request is InvalidArgument.
func once(rec *store.Record, rpc, requestID string, req proto.Message) (done bool, err error) {
	if requestID == "" {
		return false, nil
	}
	hash := store.RequestHash(req)
	if l := rec.State.LastRequest; l != nil && l.ID == requestID {
		if l.RPC != rpc || !bytes.Equal(l.Hash, hash) {
			return false, errs.Invalid("request_id", "was used for a different request")
		}
		return true, nil
	}
	rec.State.LastRequest = &store.ControlRequest{RPC: rpc, ID: requestID, Hash: hash}
	return false, nil
}

// want returns FailedPrecondition unless rec's job is in one of ok, naming the status and
// the control.
func want(rec *store.Record, what string, ok ...agentv1.JobStatus) error {
	if slices.Contains(ok, rec.Job.Status) {
		return nil
	}
	names := make([]string, len(ok))
	for i, st := range ok {
		names[i] = store.StatusName(st)
	}
	return errs.Precondition("job %s is %s; %s needs a job that is %s", rec.Job.Id, store.StatusName(rec.Job.Status), what, strings.Join(names, " or "))
}

func (s *Server) statusChange(rec *store.Record, to agentv1.JobStatus, reason, action string, details map[string]any) store.Step {
	j := rec.Job
	prev := j.Status
	j.Status, j.StatusReason = to, reason
	if details == nil {
		details = map[string]any{}
	}
	details["reason"] = reason
	return store.Step{
		Events: []*agentv1.WatchJobResponse{store.StatusEvent(prev, j)},
		Audit: []store.Audit{{Key: fmt.Sprintf("%s:%s:%d", j.Id, action, time.Now().UnixNano()), Actor: actor(j.OwnerId), Action: action,
			Details: details}},
	}
}

// CancelJob stops an unfinished job.
func (s *Server) CancelJob(ctx context.Context, req *agentv1.CancelJobRequest) (*agentv1.CancelJobResponse, error) {
	id, err := validate.UUID("id", req.Id, true)
	if err != nil {
		return nil, err
	}
	reason, err := reasonOr(req.Reason, "cancelled")
	if err != nil {
		return nil, err
	}
	rec, err := s.control(ctx, id, func(_ context.Context, _ pgx.Tx, rec *store.Record) (store.Step, error) {
		if store.Terminal(rec.Job.Status) {
			return store.Step{}, errs.Precondition("job %s is %s; only an unfinished job can be cancelled", id, store.StatusName(rec.Job.Status))
		}
		return s.statusChange(rec, agentv1.JobStatus_JOB_STATUS_CANCELLED, reason, "job_cancelled", nil), nil
	}, true)
	if err != nil {
		return nil, err
	}
	s.release(ctx, rec.Job, tasksv1.TaskStatus_TASK_STATUS_BACKLOG, "job cancelled: "+reason)
	return &agentv1.CancelJobResponse{Job: rec.Job}, nil
}

// release cleans up after a job a person ended: its build cancelled, its sandbox destroyed,
// its task moved to taskStatus. Best effort: the job's end is recorded already.
func (s *Server) release(ctx context.Context, j *agentv1.Job, taskStatus tasksv1.TaskStatus, reason string) {
	if j.BuildId != "" && s.o.Builder != nil {
		if _, err := s.o.Builder.CancelBuild(ctx, &builderv1.CancelBuildRequest{Id: j.BuildId, Reason: "job ended"}); err != nil &&
			status.Code(err) != codes.FailedPrecondition && status.Code(err) != codes.NotFound {
			s.log.WarnContext(ctx, "cancel the job's build", "job", j.Id, "build", j.BuildId, "error", err)
		}
	}
	if j.SandboxId != "" && j.ProjectId == "" && s.o.Sandbox != nil { // a project's sandbox is the project's
		if _, err := s.o.Sandbox.DestroySandbox(ctx, &sandboxv1.DestroySandboxRequest{Id: j.SandboxId}); err != nil && status.Code(err) != codes.NotFound {
			s.log.WarnContext(ctx, "destroy the job's sandbox", "job", j.Id, "sandbox", j.SandboxId, "error", err)
		}
	}
	if taskStatus != tasksv1.TaskStatus_TASK_STATUS_UNSPECIFIED {
		s.setTask(ctx, j.TaskId, taskStatus, reason)
	}
}

// setTask moves a task, by way of in_progress when the direct move is not allowed (a
// blocked task resolved by hand).
func (s *Server) setTask(ctx context.Context, id string, to tasksv1.TaskStatus, reason string) {
	if s.o.Tasks == nil {
		return
	}
	_, err := s.o.Tasks.SetTaskStatus(ctx, &tasksv1.SetTaskStatusRequest{Id: id, Status: to, Reason: validate.Truncate(reason, 1000)})
	if status.Code(err) == codes.FailedPrecondition && to != tasksv1.TaskStatus_TASK_STATUS_IN_PROGRESS {
		if _, err = s.o.Tasks.SetTaskStatus(ctx, &tasksv1.SetTaskStatusRequest{Id: id, Status: tasksv1.TaskStatus_TASK_STATUS_IN_PROGRESS}); err == nil {
			_, err = s.o.Tasks.SetTaskStatus(ctx, &tasksv1.SetTaskStatusRequest{Id: id, Status: to, Reason: validate.Truncate(reason, 1000)})
		}
	}
	if err != nil {
		s.log.WarnContext(ctx, "move the job's task", "task", id, "to", to, "error", err)
	}
}

// PauseJob pauses a queued or running job: its run is stopped (its call in flight
// cancelled), and a build it is following is paused too, so nothing goes on in its name
// until it resumes (its loop resumes the build when it follows it again).
func (s *Server) PauseJob(ctx context.Context, req *agentv1.PauseJobRequest) (*agentv1.PauseJobResponse, error) {
	id, err := validate.UUID("id", req.Id, true)
	if err != nil {
		return nil, err
	}
	reason, err := reasonOr(req.Reason, "paused")
	if err != nil {
		return nil, err
	}
	rec, err := s.control(ctx, id, func(_ context.Context, _ pgx.Tx, rec *store.Record) (store.Step, error) {
		if err := want(rec, "PauseJob", agentv1.JobStatus_JOB_STATUS_QUEUED, agentv1.JobStatus_JOB_STATUS_RUNNING); err != nil {
			return store.Step{}, err
		}
		return s.statusChange(rec, agentv1.JobStatus_JOB_STATUS_PAUSED, reason, "job_paused", nil), nil
	}, true)
	if err != nil {
		return nil, err
	}
	s.pauseBuild(ctx, rec.Job, reason)
	return &agentv1.PauseJobResponse{Job: rec.Job}, nil
}

// pauseBuild pauses the build paused job j is following, if any. Best effort, as release
// is: the job's pause is recorded already. A build that has finished (FAILED_PRECONDITION)
// or is gone (NOT_FOUND) has nothing to pause.
func (s *Server) pauseBuild(ctx context.Context, j *agentv1.Job, reason string) {
	if j.BuildId == "" || j.Phase != agentv1.JobPhase_JOB_PHASE_BUILDING || s.o.Builder == nil {
		return
	}
	// The builder takes a reason of at most 1000 characters (Truncate adds one, "…").
	_, err := s.o.Builder.PauseBuild(ctx, &builderv1.PauseBuildRequest{Id: j.BuildId, Reason: validate.Truncate("job paused: "+reason, 999)})
	if err != nil && status.Code(err) != codes.FailedPrecondition && status.Code(err) != codes.NotFound {
		s.log.WarnContext(ctx, "pause the job's build", "job", j.Id, "build", j.BuildId, "error", err)
	}
}

// ResumeJob continues a paused job, or retries a job that needs a human with guidance.
func (s *Server) ResumeJob(ctx context.Context, req *agentv1.ResumeJobRequest) (*agentv1.ResumeJobResponse, error) {
	id, err := validate.UUID("id", req.Id, true)
	if err != nil {
		return nil, err
	}
	if err := validate.MaxLen("guidance", req.Guidance, maxText); err != nil {
		return nil, err
	}
	if err := validate.RequestID("request_id", req.RequestId); err != nil {
		return nil, err
	}
	wasHuman := false
	rec, err := s.control(ctx, id, func(_ context.Context, _ pgx.Tx, rec *store.Record) (store.Step, error) {
		if done, err := once(rec, "ResumeJob", req.RequestId, req); done || err != nil {
			return store.Step{Unchanged: done}, err
		}
		if err := want(rec, "ResumeJob", agentv1.JobStatus_JOB_STATUS_PAUSED, agentv1.JobStatus_JOB_STATUS_HUMAN_NEEDED); err != nil {
			return store.Step{}, err
		}
		j := rec.Job
		rec.State.AutoResumeAt = time.Time{}
		if j.Status == agentv1.JobStatus_JOB_STATUS_PAUSED {
			to := agentv1.JobStatus_JOB_STATUS_RUNNING
			if !rec.Started {
				to = agentv1.JobStatus_JOB_STATUS_QUEUED
			}
			return s.statusChange(rec, to, "resumed", "job_resumed", nil), nil
		}
		wasHuman = true
		if req.Guidance != "" {
			rec.Context.Feedback = strings.TrimSpace(rec.Context.Feedback + "\n\nGuidance from a person: " + req.Guidance)
		}
		j.Error = ""
		loop.Restart(rec)
		if j.Plan != nil {
			prev := j.Phase
			j.Phase = agentv1.JobPhase_JOB_PHASE_PLANNING
			st := s.statusChange(rec, agentv1.JobStatus_JOB_STATUS_RUNNING, "resumed with guidance", "job_resumed", map[string]any{"guidance": req.Guidance})
			st.Events = append(st.Events, store.PhaseEvent(prev, j))
			return st, nil
		}
		return s.statusChange(rec, agentv1.JobStatus_JOB_STATUS_RUNNING, "resumed with guidance", "job_resumed", map[string]any{"guidance": req.Guidance}), nil
	}, false)
	if err != nil {
		return nil, err
	}
	if wasHuman {
		s.setTask(ctx, rec.Job.TaskId, tasksv1.TaskStatus_TASK_STATUS_IN_PROGRESS, "")
	}
	return &agentv1.ResumeJobResponse{Job: rec.Job}, nil
}

// SkipTask gives up on a job that needs a human.
func (s *Server) SkipTask(ctx context.Context, req *agentv1.SkipTaskRequest) (*agentv1.SkipTaskResponse, error) {
	id, err := validate.UUID("id", req.Id, true)
	if err != nil {
		return nil, err
	}
	reason, err := reasonOr(req.Reason, "skipped")
	if err != nil {
		return nil, err
	}
	rec, err := s.control(ctx, id, func(_ context.Context, _ pgx.Tx, rec *store.Record) (store.Step, error) {
		if err := want(rec, "SkipTask", agentv1.JobStatus_JOB_STATUS_HUMAN_NEEDED); err != nil {
			return store.Step{}, err
		}
		return s.statusChange(rec, agentv1.JobStatus_JOB_STATUS_SKIPPED, reason, "task_skipped", nil), nil
	}, false)
	if err != nil {
		return nil, err
	}
	s.release(ctx, rec.Job, tasksv1.TaskStatus_TASK_STATUS_CANCELLED, "skipped: "+reason)
	return &agentv1.SkipTaskResponse{Job: rec.Job}, nil
}

// ResolveTask records that a person did the task by hand.
func (s *Server) ResolveTask(ctx context.Context, req *agentv1.ResolveTaskRequest) (*agentv1.ResolveTaskResponse, error) {
	id, err := validate.UUID("id", req.Id, true)
	if err != nil {
		return nil, err
	}
	note, err := validate.RequiredText("note", req.Note, maxText)
	if err != nil {
		return nil, err
	}
	rec, err := s.control(ctx, id, func(_ context.Context, _ pgx.Tx, rec *store.Record) (store.Step, error) {
		if err := want(rec, "ResolveTask", agentv1.JobStatus_JOB_STATUS_HUMAN_NEEDED); err != nil {
			return store.Step{}, err
		}
		return s.statusChange(rec, agentv1.JobStatus_JOB_STATUS_COMPLETED, "resolved by hand: "+note, "task_resolved", nil), nil
	}, false)
	if err != nil {
		return nil, err
	}
	j := rec.Job
	s.release(ctx, j, tasksv1.TaskStatus_TASK_STATUS_DONE, "resolved by hand: "+note)
	if s.o.Memory != nil {
		title := ""
		if t := rec.Context.GetTask(); t != nil {
			title = t.Title
		}
		if _, err := s.o.Memory.StoreMemory(ctx, &memoryv1.StoreMemoryRequest{Repo: j.Repo, Type: typev1.MemoryType_MEMORY_TYPE_DECISION,
			Content: fmt.Sprintf("Task %q needed a human (%s). Resolution: %s", title, j.Error, note), Tags: []string{"resolved-by-hand"},
			SourceTaskId: j.TaskId, SourceJobId: j.Id, RequestId: j.Id + ":resolution"}); err != nil {
			s.log.WarnContext(ctx, "remember the resolution", "job", j.Id, "error", err)
		}
	}
	return &agentv1.ResolveTaskResponse{Job: j}, nil
}

// RespondToClarification answers the job's question; the job runs again from confidence.
func (s *Server) RespondToClarification(ctx context.Context, req *agentv1.RespondToClarificationRequest) (*agentv1.RespondToClarificationResponse, error) {
	id, err := validate.UUID("id", req.Id, true)
	if err != nil {
		return nil, err
	}
	answer, err := validate.RequiredText("answer", req.Answer, maxText)
	if err != nil {
		return nil, err
	}
	if err := validate.RequestID("request_id", req.RequestId); err != nil {
		return nil, err
	}
	rec, err := s.control(ctx, id, func(_ context.Context, _ pgx.Tx, rec *store.Record) (store.Step, error) {
		if done, err := once(rec, "RespondToClarification", req.RequestId, req); done || err != nil {
			return store.Step{Unchanged: done}, err
		}
		if err := want(rec, "RespondToClarification", agentv1.JobStatus_JOB_STATUS_WAITING_CLARIFICATION); err != nil {
			return store.Step{}, err
		}
		j := rec.Job
		j.ClarificationAnswer = answer
		if t := rec.Context.Task; t != nil {
			t.Description = strings.TrimSpace(t.Description + "\n\nQuestion: " + j.ClarificationQuestion + "\nAnswer: " + answer)
		}
		return s.statusChange(rec, agentv1.JobStatus_JOB_STATUS_RUNNING, "clarified", "clarification_answered", map[string]any{"answer": validate.Truncate(answer, 1000)}), nil
	}, false)
	if err != nil {
		return nil, err
	}
	return &agentv1.RespondToClarificationResponse{Job: rec.Job}, nil
}

// WatchJob streams job events from a cursor (events.Handler's rules: a watch of one job
// ends after the event that finishes it).
func (s *Server) WatchJob(req *agentv1.WatchJobRequest, stream grpc.ServerStreamingServer[agentv1.WatchJobResponse]) error {
	ctx := stream.Context()
	owner, err := caller(ctx)
	if err != nil {
		return err
	}
	id, err := validate.UUID("id", req.GetId(), false)
	if err != nil {
		return err
	}
	w := events.Watch[*agentv1.WatchJobResponse]{AfterID: req.GetAfterId(), FromNow: req.GetFromNow(), OwnerID: owner, ID: id}
	if id != "" {
		w.State = func(ctx context.Context) (bool, error) { return s.store.WatchState(ctx, owner, id) }
		w.Ends = store.Finishing
	}
	return s.watch.Serve(ctx, w, stream.Send)
}

// GetJobMetrics returns a job's usage and time per phase.
func (s *Server) GetJobMetrics(ctx context.Context, req *agentv1.GetJobMetricsRequest) (*agentv1.GetJobMetricsResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.Id, true)
	if err != nil {
		return nil, err
	}
	phases, err := s.store.Metrics(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	resp := &agentv1.GetJobMetricsResponse{JobId: id, Phases: phases, Total: &typev1.Usage{}}
	var d time.Duration
	for _, p := range phases {
		resp.Total = usage.Add(resp.Total, p.Usage)
		d += p.Duration.AsDuration()
	}
	resp.TotalDuration = durationpb.New(d)
	return resp, nil
}

// ListAuditLog lists the audit trail of the caller's jobs, newest first.
func (s *Server) ListAuditLog(ctx context.Context, req *agentv1.ListAuditLogRequest) (*agentv1.ListAuditLogResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	f := store.AuditFilter{FailuresOnly: req.FailuresOnly}
	if f.JobID, err = validate.UUID("job_id", req.JobId, false); err != nil {
		return nil, err
	}
	if f.TaskID, err = validate.UUID("task_id", req.TaskId, false); err != nil {
		return nil, err
	}
	if f.ConversationID, err = validate.UUID("conversation_id", req.ConversationId, false); err != nil {
		return nil, err
	}
	if req.Action != "" {
		if len(req.Action) > maxAction || strings.Trim(req.Action, "abcdefghijklmnopqrstuvwxyz_") != "" {
			return nil, errs.Invalid("action", "must be a lower_snake action name, e.g. plan_created")
		}
		f.Action = req.Action
	}
	for _, t := range []struct {
		name string
		ts   *timestamppb.Timestamp
		dst  *time.Time
	}{{"start_time", req.StartTime, &f.Start}, {"end_time", req.EndTime, &f.End}} {
		if t.ts == nil {
			continue
		}
		if err := t.ts.CheckValid(); err != nil {
			return nil, errs.Invalid(t.name, "not a valid timestamp")
		}
		*t.dst = t.ts.AsTime()
	}
	if !f.Start.IsZero() && !f.End.IsZero() && !f.End.After(f.Start) {
		return nil, errs.Invalid("end_time", "must be after start_time")
	}
	size, err := validate.PageSize(req.PageSize, 100, 500)
	if err != nil {
		return nil, err
	}
	entries, next, err := s.store.ListAudit(ctx, owner, f, size, req.PageToken)
	if err != nil {
		return nil, err
	}
	return &agentv1.ListAuditLogResponse{Entries: entries, NextPageToken: next}, nil
}
