// Package service is the builder's gRPC API: it authenticates the caller, checks requests
// (InvalidArgument naming the field), and hands builds to the store and the job queue; the
// engine runs them in the background.
package service

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/events"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/jobrun"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/builder/internal/analysis"
	"github.com/thefold/thefold/services/builder/internal/store"
)

// Limits of a StartBuild request.
const (
	maxPlanSteps         = 500
	maxDescription       = 16 << 10
	maxAdditionalContext = 64 << 10
	// maxMemoryHints and maxMemoryHint bound StartBuildRequest.memory_hints.
	maxMemoryHints = 50
	maxMemoryHint  = 4000
	maxModel       = 200
	maxReason      = 1000
	// maxTaskTitle (characters), maxTaskDescription (bytes) and maxContextPaths bound
	// StartBuildRequest.task_title, task_description and context_paths.
	maxTaskTitle       = 500
	maxTaskDescription = 100_000
	maxContextPaths    = 200
	// maxGuidanceText bounds AddGuidanceRequest.text, in characters.
	maxGuidanceText = 8000
)

// Queue starts build runs (jobrun.Enqueuer).
type Queue = jobrun.Enqueuer

// Canceller stops a build this process runs (the engine).
type Canceller interface{ Cancel(id string) }

// Server implements builderv1.BuilderServiceServer.
type Server struct {
	builderv1.UnimplementedBuilderServiceServer
	store   *store.Store
	queue   Queue
	cancel  Canceller
	sandbox sandboxv1.SandboxServiceClient
	watch   *events.Handler[*builderv1.WatchBuildResponse]
	log     *slog.Logger
}

// New returns a Server. maxWatches bounds concurrent WatchBuild streams, maxWatchesPerUser
// those of one caller (auth.CallerKey; <= 0 leaves only maxWatches).
func New(st *store.Store, q Queue, c Canceller, sb sandboxv1.SandboxServiceClient, heartbeat time.Duration, maxWatches, maxWatchesPerUser int, log *slog.Logger) *Server {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	watch := st.WatchHandler()
	watch.Every, watch.Watches = heartbeat, events.NewWatches(maxWatches, "build watches", events.PerCaller(maxWatchesPerUser))
	return &Server{store: st, queue: q, cancel: c, sandbox: sb, watch: watch, log: log}
}

var _ builderv1.BuilderServiceServer = (*Server)(nil)

func caller(ctx context.Context) (string, error) {
	p, err := auth.MustFromContext(ctx)
	if err != nil {
		return "", err
	}
	return p.UserID, nil
}

// StartBuild records the build and queues its run; it returns at once.
func (s *Server) StartBuild(ctx context.Context, req *builderv1.StartBuildRequest) (*builderv1.StartBuildResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkStart(req); err != nil {
		return nil, err
	}
	sb, err := s.sandbox.GetSandbox(ctx, &sandboxv1.GetSandboxRequest{Id: req.SandboxId})
	switch code := status.Code(err); {
	case err == nil:
	case code == codes.NotFound:
		return nil, errs.NotFound("sandbox", req.SandboxId)
	case code == codes.InvalidArgument:
		return nil, errs.Invalid("sandbox_id", "%s", status.Convert(err).Message())
	default:
		return nil, status.Errorf(codes.Unavailable, "sandbox service: %v", status.Convert(err).Message())
	}
	if st := sb.GetSandbox().GetStatus(); st != sandboxv1.SandboxStatus_SANDBOX_STATUS_READY {
		return nil, errs.Precondition("sandbox %s is %s; a build needs a READY sandbox", req.SandboxId, st)
	}
	b := &store.Build{
		BuildJob: &builderv1.BuildJob{
			OwnerId: owner, RequestId: req.RequestId, TaskId: req.TaskId, JobId: req.JobId, SandboxId: req.SandboxId,
			Repo: req.Repo, Plan: req.Plan, Model: req.Model, Budget: req.Budget,
		},
		AdditionalContext: req.AdditionalContext, MemoryHints: req.MemoryHints, RequestedStrategy: req.Strategy, MaxIterations: 3,
		TaskTitle: req.TaskTitle, TaskDescription: req.TaskDescription, ContextPaths: req.ContextPaths,
	}
	got, _, err := s.store.Create(ctx, b, store.RequestHash(req), s.queue.Enqueue)
	if err != nil {
		return nil, err
	}
	return &builderv1.StartBuildResponse{Build: got.BuildJob}, nil
}

// checkStart checks a StartBuild request.
func checkStart(req *builderv1.StartBuildRequest) error {
	if req.GetRequestId() == "" {
		return errs.Invalid("request_id", "required: a retry with the same request_id returns the first build")
	}
	if err := validate.RequestID("request_id", req.RequestId); err != nil {
		return err
	}
	if _, err := validate.UUID("sandbox_id", req.SandboxId, true); err != nil {
		return err
	}
	if _, err := validate.UUID("job_id", req.JobId, false); err != nil {
		return err
	}
	if _, err := validate.UUID("task_id", req.TaskId, false); err != nil {
		return err
	}
	if err := validate.Repo("repo", req.Repo, false); err != nil {
		return err
	}
	if err := validate.MaxLen("model", req.Model, maxModel); err != nil {
		return err
	}
	if err := validate.MaxLen("additional_context", req.AdditionalContext, maxAdditionalContext); err != nil {
		return err
	}
	if len(req.MemoryHints) > maxMemoryHints {
		return errs.Invalid("memory_hints", "%d hints; at most %d", len(req.MemoryHints), maxMemoryHints)
	}
	for i, h := range req.MemoryHints {
		field := fmt.Sprintf("memory_hints[%d]", i)
		if strings.TrimSpace(h) == "" {
			return errs.Invalid(field, "must not be empty")
		}
		if err := validate.MaxLen(field, h, maxMemoryHint); err != nil {
			return err
		}
	}
	if err := checkTask(req); err != nil {
		return err
	}
	if err := validate.Enum("strategy", req.Strategy, true); err != nil {
		return err
	}
	if bu := req.Budget; bu != nil {
		if bu.MaxTokens < 0 {
			return errs.Invalid("budget.max_tokens", "must not be negative")
		}
		if bu.MaxCostMicros < 0 {
			return errs.Invalid("budget.max_cost_micros", "must not be negative")
		}
		if bu.MaxWallTime != nil && (bu.MaxWallTime.CheckValid() != nil || bu.MaxWallTime.AsDuration() < 0) {
			return errs.Invalid("budget.max_wall_time", "must be a valid, non-negative duration")
		}
	}
	if err := checkPlan(req.Plan); err != nil {
		return err
	}
	return validate.Strings(req)
}

// checkTask checks the task as written and the context phase's paths.
func checkTask(req *builderv1.StartBuildRequest) error {
	if err := validate.MaxLen("task_title", req.TaskTitle, maxTaskTitle); err != nil {
		return err
	}
	if n := len(req.TaskDescription); n > maxTaskDescription {
		return errs.Invalid("task_description", "%d bytes; at most %d", n, maxTaskDescription)
	}
	if n := len(req.ContextPaths); n > maxContextPaths {
		return errs.Invalid("context_paths", "%d paths; at most %d", n, maxContextPaths)
	}
	seen := make(map[string]int, len(req.ContextPaths))
	for i, p := range req.ContextPaths {
		field := fmt.Sprintf("context_paths[%d]", i)
		if err := validate.Path(field, p); err != nil {
			return err
		}
		if j, ok := seen[p]; ok {
			return errs.Invalid(field, "%q is also context_paths[%d]", p, j)
		}
		seen[p] = i
	}
	return nil
}

func checkPlan(p *typev1.Plan) error {
	if p == nil || len(p.Steps) == 0 {
		return errs.Invalid("plan.steps", "required: at least one step")
	}
	if len(p.Steps) > maxPlanSteps {
		return errs.Invalid("plan.steps", "at most %d steps, got %d", maxPlanSteps, len(p.Steps))
	}
	if err := validate.MaxLen("plan.summary", p.Summary, maxDescription); err != nil {
		return err
	}
	ids := map[string]bool{}
	paths := map[string]string{}
	for i, s := range p.Steps {
		f := fmt.Sprintf("plan.steps[%d]", i)
		switch {
		case s.Id == "":
			return errs.Invalid(f+".id", "required")
		case len(s.Id) > 128:
			return errs.Invalid(f+".id", "at most 128 bytes")
		case ids[s.Id]:
			return errs.Invalid(f+".id", "%q is used by an earlier step", s.Id)
		}
		ids[s.Id] = true
		if err := validate.MaxLen(f+".description", s.Description, maxDescription); err != nil {
			return err
		}
		switch {
		case s.Path != "" && len(s.Command) > 0:
			return errs.Invalid(f, "a step changes a file (path) or runs a command, not both")
		case s.Path == "" && len(s.Command) == 0:
			return errs.Invalid(f, "a step needs a path (file step) or a command (command step)")
		case s.Path != "":
			if err := validate.Path(f+".path", s.Path); err != nil {
				return err
			}
			if prev, ok := paths[s.Path]; ok {
				return errs.Invalid(f+".path", "%q is also the path of step %q; one step per file", s.Path, prev)
			}
			paths[s.Path] = s.Id
			switch s.Action {
			case typev1.FileAction_FILE_ACTION_CREATE, typev1.FileAction_FILE_ACTION_MODIFY, typev1.FileAction_FILE_ACTION_DELETE:
			default:
				return errs.Invalid(f+".action", "a file step's action is CREATE, MODIFY or DELETE")
			}
			if s.Workdir != "" {
				return errs.Invalid(f+".workdir", "only for command steps")
			}
		default:
			if s.Action != typev1.FileAction_FILE_ACTION_UNSPECIFIED {
				return errs.Invalid(f+".action", "a command step has no file action")
			}
			if s.Command[0] == "" {
				return errs.Invalid(f+".command", "the program (command[0]) is empty")
			}
			if s.Workdir != "" {
				if err := validate.Path(f+".workdir", s.Workdir); err != nil {
					return err
				}
			}
		}
	}
	for i, s := range p.Steps {
		for j, d := range s.DependsOn {
			if !ids[d] || d == s.Id {
				return errs.Invalid(fmt.Sprintf("plan.steps[%d].depends_on[%d]", i, j), "%q is not another step of the plan", d)
			}
		}
	}
	for i, pk := range p.Packages {
		if pk == "" || len(pk) > 300 || !validate.PrintableASCII(pk, false) {
			return errs.Invalid(fmt.Sprintf("plan.packages[%d]", i), "a package spec of printable ASCII without spaces, at most 300 bytes")
		}
	}
	return nil
}

func buildID(field, id string) (string, error) {
	return validate.UUID(field, id, true)
}

// GetBuild returns one of the caller's builds with its steps.
func (s *Server) GetBuild(ctx context.Context, req *builderv1.GetBuildRequest) (*builderv1.GetBuildResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := buildID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	b, err := s.store.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	steps, err := s.store.Steps(ctx, id)
	if err != nil {
		return nil, err
	}
	resp := &builderv1.GetBuildResponse{Build: b.BuildJob}
	for _, st := range steps {
		resp.Steps = append(resp.Steps, st.BuildStep)
	}
	return resp, nil
}

// ListBuilds lists the caller's builds, newest first.
func (s *Server) ListBuilds(ctx context.Context, req *builderv1.ListBuildsRequest) (*builderv1.ListBuildsResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	size, err := validate.PageSize(req.GetPageSize(), 50, 200)
	if err != nil {
		return nil, err
	}
	f := store.ListFilter{Repo: req.GetRepo()}
	if f.TaskID, err = validate.UUID("task_id", req.GetTaskId(), false); err != nil {
		return nil, err
	}
	if f.JobID, err = validate.UUID("job_id", req.GetJobId(), false); err != nil {
		return nil, err
	}
	if err := validate.Repo("repo", req.GetRepo(), false); err != nil {
		return nil, err
	}
	for i, st := range req.GetStatuses() {
		if err := validate.Enum(fmt.Sprintf("statuses[%d]", i), st, false); err != nil {
			return nil, err
		}
		if !slices.Contains(f.Statuses, st) {
			f.Statuses = append(f.Statuses, st)
		}
	}
	builds, next, err := s.store.List(ctx, owner, f, size, req.GetPageToken())
	if err != nil {
		return nil, err
	}
	resp := &builderv1.ListBuildsResponse{NextPageToken: next}
	for _, b := range builds {
		resp.Builds = append(resp.Builds, b.BuildJob)
	}
	return resp, nil
}

// CancelBuild stops a build that is not finished.
func (s *Server) CancelBuild(ctx context.Context, req *builderv1.CancelBuildRequest) (*builderv1.CancelBuildResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := buildID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	if err := validate.MaxLen("reason", req.GetReason(), maxReason); err != nil {
		return nil, err
	}
	b, err := s.store.Cancel(ctx, owner, id, req.GetReason())
	if err != nil {
		return nil, err
	}
	s.cancel.Cancel(id)
	return &builderv1.CancelBuildResponse{Build: b.BuildJob}, nil
}

// PauseBuild stops a pending or running build where it is. The store records it (the lease
// dropped, so a worker on another replica stops at its next renewal, within RenewEvery);
// the run in this process, if any, is stopped at once, which cancels its call in flight.
func (s *Server) PauseBuild(ctx context.Context, req *builderv1.PauseBuildRequest) (*builderv1.PauseBuildResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := buildID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	if err := validate.MaxLen("reason", req.GetReason(), maxReason); err != nil {
		return nil, err
	}
	b, err := s.store.Pause(ctx, owner, id, req.GetReason())
	if err != nil {
		return nil, err
	}
	s.cancel.Cancel(id)
	return &builderv1.PauseBuildResponse{Build: b.BuildJob}, nil
}

// ResumeBuild continues a paused build: it is queued again, in the transaction that sets it
// pending, and a worker takes it up at the step that was interrupted.
func (s *Server) ResumeBuild(ctx context.Context, req *builderv1.ResumeBuildRequest) (*builderv1.ResumeBuildResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := buildID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	b, err := s.store.Resume(ctx, owner, id, s.queue.Enqueue)
	if err != nil {
		return nil, err
	}
	return &builderv1.ResumeBuildResponse{Build: b.BuildJob}, nil
}

// RetryStep runs a failed step of a failed build again and continues the build.
func (s *Server) RetryStep(ctx context.Context, req *builderv1.RetryStepRequest) (*builderv1.RetryStepResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := buildID("build_id", req.GetBuildId())
	if err != nil {
		return nil, err
	}
	if req.GetStepNumber() <= 0 {
		return nil, errs.Invalid("step_number", "required: a step number (1-based)")
	}
	if err := validate.MaxLen("guidance", req.GetGuidance(), maxAdditionalContext); err != nil {
		return nil, err
	}
	if err := validate.RequestID("request_id", req.GetRequestId()); err != nil {
		return nil, err
	}
	retry := store.RetryRequest{ID: req.GetRequestId()}
	if retry.ID != "" {
		retry.Hash = store.RequestHash(req)
	}
	b, err := s.store.Retry(ctx, owner, id, req.GetStepNumber(), req.GetGuidance(), retry, s.queue.Enqueue)
	if err != nil {
		return nil, err
	}
	return &builderv1.RetryStepResponse{Build: b.BuildJob}, nil
}

// AddGuidance gives a build that is not finished a person's message; every model call the
// build makes after it is told it (the engine reads the build's guidance before each).
func (s *Server) AddGuidance(ctx context.Context, req *builderv1.AddGuidanceRequest) (*builderv1.AddGuidanceResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := buildID("build_id", req.GetBuildId())
	if err != nil {
		return nil, err
	}
	text, err := validate.RequiredText("text", req.GetText(), maxGuidanceText)
	if err != nil {
		return nil, err
	}
	if err := validate.RequestID("request_id", req.GetRequestId()); err != nil {
		return nil, err
	}
	if err := validate.Strings(req); err != nil {
		return nil, err
	}
	b, err := s.store.AddGuidance(ctx, owner, id, text, req.GetRequestId())
	if err != nil {
		return nil, err
	}
	return &builderv1.AddGuidanceResponse{Build: b.BuildJob}, nil
}

// WatchBuild streams build events after a cursor (events.Handler's rules: a watch of one
// build ends after the event that finishes it).
func (s *Server) WatchBuild(req *builderv1.WatchBuildRequest, stream grpc.ServerStreamingServer[builderv1.WatchBuildResponse]) error {
	ctx := stream.Context()
	owner, err := caller(ctx)
	if err != nil {
		return err
	}
	id, err := validate.UUID("id", req.GetId(), false)
	if err != nil {
		return err
	}
	jobID, err := validate.UUID("job_id", req.GetJobId(), false)
	if err != nil {
		return err
	}
	w := events.Watch[*builderv1.WatchBuildResponse]{AfterID: req.GetAfterId(), FromNow: req.GetFromNow(), OwnerID: owner, ID: id, Scope: jobID}
	if id != "" {
		w.State = func(ctx context.Context) (bool, error) { return s.store.WatchState(ctx, owner, id) }
		w.Ends = store.Terminal
	}
	return s.watch.Serve(ctx, w, stream.Send)
}

// AnalyzeDependencies computes the dependency graph and strategy of planned files.
func (s *Server) AnalyzeDependencies(ctx context.Context, req *builderv1.AnalyzeDependenciesRequest) (*builderv1.AnalyzeDependenciesResponse, error) {
	if _, err := caller(ctx); err != nil {
		return nil, err
	}
	if err := analysis.CheckRequest(req); err != nil {
		return nil, err
	}
	var src analysis.Source
	if len(req.Archive) > 0 {
		var err error
		if src, err = analysis.ArchiveSource(req.Archive); err != nil {
			return nil, err
		}
	}
	if req.SandboxId != "" {
		if _, err := s.sandbox.GetSandbox(ctx, &sandboxv1.GetSandboxRequest{Id: req.SandboxId}); err != nil {
			if status.Code(err) == codes.NotFound {
				return nil, errs.NotFound("sandbox", req.SandboxId)
			}
			return nil, status.Errorf(codes.Unavailable, "sandbox service: %v", status.Convert(err).Message())
		}
		src = analysis.SandboxSource(s.sandbox, req.SandboxId)
	}
	res, err := analysis.Analyze(ctx, src, req.Files, req.NewProject)
	if err != nil {
		return nil, err
	}
	return &builderv1.AnalyzeDependenciesResponse{Graph: res.Graph, Strategy: res.Strategy, StrategyReason: res.Reason}, nil
}
