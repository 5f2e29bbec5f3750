package service

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	"github.com/thefold/thefold/pkg/usage"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/agent/internal/project"
	"github.com/thefold/thefold/services/agent/internal/store"
)

// The crew's conversation with its workers: PostProjectMessage, InterruptWorker,
// ResumeWorker and GetProjectPool. A worker is a crew task's job; what a person says to it
// is kept with the job (its model calls are told it, see the loop) and, while it builds,
// handed to its build (builder.AddGuidance).

// maxMessage bounds a person's message to a worker.
const maxMessage = 8000

// crewTarget is the crew task a request names by worker number or project task id (one of
// them; neither when none is required, for the project itself).
func crewTarget(p *agentv1.Project, worker int32, taskID string, required bool) (*agentv1.ProjectTask, error) {
	if !project.Crew(p) {
		return nil, errs.Precondition("project %s is not a crew project (mode %s)", p.Id, strings.TrimPrefix(p.Mode.String(), "PROJECT_MODE_"))
	}
	switch {
	case worker != 0 && taskID != "":
		return nil, errs.Invalid("worker", "name the worker or the project task, not both")
	case worker == 0 && taskID == "":
		if required {
			return nil, errs.Invalid("worker", "required: the worker (1–%d) or the project_task_id", project.Workers(p))
		}
		return nil, nil
	case worker != 0:
		if worker < 1 || int(worker) > project.Workers(p) {
			return nil, errs.Invalid("worker", "must be 1–%d, not %d", project.Workers(p), worker)
		}
		for _, t := range project.Tasks(p.Phases) {
			if t.Worker == worker && project.HoldsWorker(t) {
				return t, nil
			}
		}
		return nil, errs.Precondition("worker %d of project %s has no task now", worker, p.Id)
	}
	t, _ := project.Find(p, taskID)
	if t == nil {
		return nil, errs.NotFound("project task", taskID)
	}
	return t, nil
}

// checkTarget checks a request's worker and project_task_id fields.
func checkTarget(worker int32, taskID string) error {
	if worker < 0 {
		return errs.Invalid("worker", "must be 1 or more, not %d", worker)
	}
	if len(taskID) > project.MaxIDLen {
		return errs.Invalid("project_task_id", "at most %d characters", project.MaxIDLen)
	}
	return nil
}

// PostProjectMessage gives a worker (or the project itself) a person's message.
func (p *projects) PostProjectMessage(ctx context.Context, req *agentv1.PostProjectMessageRequest) (*agentv1.PostProjectMessageResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	id, err := projectID("project_id", req.ProjectId)
	if err != nil {
		return nil, err
	}
	if err := checkTarget(req.Worker, req.ProjectTaskId); err != nil {
		return nil, err
	}
	order := len(req.Prioritize) > 0 || len(req.Hold) > 0 || len(req.Release) > 0
	text := strings.TrimSpace(req.Text)
	if err := validate.MaxLen("text", req.Text, maxMessage); err != nil {
		return nil, err
	}
	if text == "" && !order {
		return nil, errs.Invalid("text", "required (or change the crew's order with prioritize, hold or release)")
	}
	for field, ids := range map[string][]string{"prioritize": req.Prioritize, "hold": req.Hold, "release": req.Release} {
		if len(ids) > project.MaxTasks {
			return nil, errs.Invalid(field, "at most %d project tasks, not %d", project.MaxTasks, len(ids))
		}
		for i, tid := range ids {
			if strings.TrimSpace(tid) == "" || len(tid) > project.MaxIDLen {
				return nil, errs.Invalid(fmt.Sprintf("%s[%d]", field, i), "must be a project task id (1–%d characters)", project.MaxIDLen)
			}
		}
	}
	if order && (req.Worker != 0 || req.ProjectTaskId != "") {
		return nil, errs.Invalid("prioritize", "prioritize, hold and release are for the project itself, not a worker")
	}
	if req.RequestId != "" {
		if err := validate.RequestID("request_id", req.RequestId); err != nil {
			return nil, err
		}
	}
	rec, err := p.s.store.GetProject(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	pr := rec.Project
	t, err := crewTarget(pr, req.Worker, strings.TrimSpace(req.ProjectTaskId), false)
	if err != nil {
		return nil, err
	}
	// A message to the crew itself may arrange it before it starts; a worker's needs it running.
	ok := []agentv1.ProjectStatus{projRunning, projPaused, projHuman}
	if t == nil {
		ok = append(ok, projPlanned)
	}
	if err := wantProject(pr, "PostProjectMessage", ok...); err != nil {
		return nil, err
	}
	m := &agentv1.ProjectMessage{ProjectId: pr.Id, AuthorId: owner, Text: text, Prioritize: req.Prioritize, Hold: req.Hold, Release: req.Release}
	if order {
		if req.RequestId != "" {
			if prev, err := p.s.store.MessageByRequest(ctx, owner, req.RequestId); err != nil || prev != nil {
				if prev != nil {
					return &agentv1.PostProjectMessageResponse{Message: prev}, nil
				}
				return nil, err
			}
		}
		if rec, err = p.reorder(ctx, owner, pr.Id, req); err != nil {
			return nil, err
		}
		pr = rec.Project
	}
	var job *store.Record
	if t != nil {
		if t.JobId == "" || (t.Status != agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_RUNNING && t.Status != agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_IN_REVIEW) {
			return nil, errs.Precondition("project task %s is %s: no job of it runs to be told", t.Id, strings.ToLower(strings.TrimPrefix(t.Status.String(), "PROJECT_TASK_STATUS_")))
		}
		if job, err = p.s.store.Load(ctx, t.JobId); err != nil {
			return nil, err
		}
		m.Worker, m.ProjectTaskId, m.JobId = t.Worker, t.Id, t.JobId
	}
	var j *agentv1.Job
	if job != nil {
		j = job.Job
	}
	out, created, err := p.s.store.PostMessage(ctx, owner, req.RequestId, m, j, pr)
	if err != nil {
		return nil, err
	}
	if !created || j == nil {
		return &agentv1.PostProjectMessageResponse{Message: out}, nil
	}
	// A build in progress hears it at its next model call; the job's own calls read it.
	if j.BuildId != "" && j.Phase == agentv1.JobPhase_JOB_PHASE_BUILDING && p.s.o.Builder != nil {
		_, err := p.s.o.Builder.AddGuidance(ctx, &builderv1.AddGuidanceRequest{BuildId: j.BuildId, Text: text, RequestId: "message:" + out.Id})
		if err != nil && status.Code(err) != codes.FailedPrecondition { // (a build that just ended)
			p.s.log.WarnContext(ctx, "crew: hand a message to the worker's build", "job", j.Id, "build", j.BuildId, "error", err)
		}
	}
	// An interrupted worker goes on with it.
	if j.Status == agentv1.JobStatus_JOB_STATUS_PAUSED {
		if _, err := p.s.ResumeJob(ctx, &agentv1.ResumeJobRequest{Id: j.Id, RequestId: "message:" + out.Id}); err != nil && status.Code(err) != codes.FailedPrecondition {
			return nil, err
		}
	}
	return &agentv1.PostProjectMessageResponse{Message: out}, nil
}

// reorder applies a message's prioritize, hold and release to crew project id: a held task
// is not started until released; prioritized ready tasks start first, in their order. A
// release of a crew that waits on a person only because of held tasks sets it running.
func (p *projects) reorder(ctx context.Context, owner, id string, req *agentv1.PostProjectMessageRequest) (*store.ProjectRecord, error) {
	return p.s.store.ChangeProject(ctx, owner, id, func(rec *store.ProjectRecord) ([]*agentv1.WatchProjectResponse, error) {
		pr := rec.Project
		find := func(field string, i int, tid string) (*agentv1.ProjectTask, error) {
			t, _ := project.Find(pr, tid)
			if t == nil {
				return nil, errs.Invalid(fmt.Sprintf("%s[%d]", field, i), "project %s has no task %q", pr.Id, tid)
			}
			return t, nil
		}
		var prio []string
		for i, tid := range req.Prioritize {
			if _, err := find("prioritize", i, tid); err != nil {
				return nil, err
			}
			if !slices.Contains(prio, tid) {
				prio = append(prio, tid)
			}
		}
		if len(prio) > 0 {
			pr.Priority = prio
		}
		var evs []*agentv1.WatchProjectResponse
		for i, tid := range req.Hold {
			t, err := find("hold", i, tid)
			if err != nil {
				return nil, err
			}
			if t.Status != agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_PENDING {
				return nil, errs.Precondition("project task %s is %s: only a pending task can be held", tid, strings.ToLower(strings.TrimPrefix(t.Status.String(), "PROJECT_TASK_STATUS_")))
			}
			t.Held = true
		}
		released := false
		for i, tid := range req.Release {
			t, err := find("release", i, tid)
			if err != nil {
				return nil, err
			}
			released = released || t.Held
			t.Held = false
		}
		if released && pr.Status == projHuman {
			evs = append(evs, projectStatus(pr, projRunning, "held tasks released"))
		}
		return evs, nil
	}, p.enqueue)
}

// InterruptWorker stops what a worker is doing: its job pauses, its current call cancelled.
func (p *projects) InterruptWorker(ctx context.Context, req *agentv1.InterruptWorkerRequest) (*agentv1.InterruptWorkerResponse, error) {
	owner, t, pr, err := p.worker(ctx, req.ProjectId, req.Worker, req.ProjectTaskId, "InterruptWorker")
	if err != nil {
		return nil, err
	}
	reason, err := reasonOr(req.Reason, "interrupted by a person")
	if err != nil {
		return nil, err
	}
	jr, err := p.s.store.Load(ctx, t.JobId)
	if err != nil {
		return nil, err
	}
	if jr.Job.Status != agentv1.JobStatus_JOB_STATUS_PAUSED {
		if _, err := p.s.PauseJob(ctx, &agentv1.PauseJobRequest{Id: t.JobId, Reason: reason}); err != nil {
			return nil, err
		}
		p.s.crewEvent(ctx, pr, t, agentv1.ProjectEventType_PROJECT_EVENT_TYPE_WORKER_INTERRUPTED, reason)
	}
	w, err := p.poolWorker(ctx, owner, pr.Id, t.Worker)
	if err != nil {
		return nil, err
	}
	return &agentv1.InterruptWorkerResponse{Worker: w}, nil
}

// ResumeWorker continues an interrupted worker.
func (p *projects) ResumeWorker(ctx context.Context, req *agentv1.ResumeWorkerRequest) (*agentv1.ResumeWorkerResponse, error) {
	owner, t, pr, err := p.worker(ctx, req.ProjectId, req.Worker, req.ProjectTaskId, "ResumeWorker")
	if err != nil {
		return nil, err
	}
	jr, err := p.s.store.Load(ctx, t.JobId)
	if err != nil {
		return nil, err
	}
	if jr.Job.Status != agentv1.JobStatus_JOB_STATUS_PAUSED {
		return nil, errs.Precondition("worker %d is not interrupted (its job is %s)", t.Worker, store.StatusName(jr.Job.Status))
	}
	if _, err := p.s.ResumeJob(ctx, &agentv1.ResumeJobRequest{Id: t.JobId}); err != nil {
		return nil, err
	}
	p.s.crewEvent(ctx, pr, t, agentv1.ProjectEventType_PROJECT_EVENT_TYPE_WORKER_RESUMED, "resumed by a person")
	w, err := p.poolWorker(ctx, owner, pr.Id, t.Worker)
	if err != nil {
		return nil, err
	}
	return &agentv1.ResumeWorkerResponse{Worker: w}, nil
}

// worker is the caller's crew task a worker request names, with a job to act on.
func (p *projects) worker(ctx context.Context, pid string, worker int32, taskID, what string) (string, *agentv1.ProjectTask, *agentv1.Project, error) {
	owner, err := caller(ctx)
	if err != nil {
		return "", nil, nil, err
	}
	id, err := projectID("project_id", pid)
	if err != nil {
		return "", nil, nil, err
	}
	if err := checkTarget(worker, taskID); err != nil {
		return "", nil, nil, err
	}
	rec, err := p.s.store.GetProject(ctx, owner, id)
	if err != nil {
		return "", nil, nil, err
	}
	t, err := crewTarget(rec.Project, worker, strings.TrimSpace(taskID), true)
	if err != nil {
		return "", nil, nil, err
	}
	if err := wantProject(rec.Project, what, projRunning, projPaused); err != nil {
		return "", nil, nil, err
	}
	if t.JobId == "" || (t.Status != agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_RUNNING && t.Status != agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_IN_REVIEW) {
		return "", nil, nil, errs.Precondition("project task %s is %s: no job of it runs", t.Id, strings.ToLower(strings.TrimPrefix(t.Status.String(), "PROJECT_TASK_STATUS_")))
	}
	return owner, t, rec.Project, nil
}

// crewEvent records a worker's event on its project (best effort: the job's own events
// say the same).
func (s *Server) crewEvent(ctx context.Context, pr *agentv1.Project, t *agentv1.ProjectTask, typ agentv1.ProjectEventType, reason string) {
	ev := project.TaskEvent(typ, t, nil)
	ev.GetTask().Reason = reason
	if err := s.store.AppendProjectEvents(ctx, pr, ev); err != nil {
		s.log.WarnContext(ctx, "crew: record a worker's event", "project", pr.Id, "error", err)
	}
}

// GetProjectPool returns a crew project's workers.
func (p *projects) GetProjectPool(ctx context.Context, req *agentv1.GetProjectPoolRequest) (*agentv1.GetProjectPoolResponse, error) {
	owner, id, err := callerAndProject(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	rec, err := p.s.store.GetProject(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if _, err := crewTarget(rec.Project, 0, "", false); err != nil {
		return nil, err
	}
	ws, err := p.pool(ctx, rec.Project)
	if err != nil {
		return nil, err
	}
	return &agentv1.GetProjectPoolResponse{Workers: ws, ReadyTasks: int32(project.ReadyCount(rec.Project)), MergeQueue: project.MergeQueue(rec)}, nil
}

// poolWorker is worker n of the caller's project id as GetProjectPool has it.
func (p *projects) poolWorker(ctx context.Context, owner, id string, n int32) (*agentv1.ProjectWorker, error) {
	rec, err := p.s.store.GetProject(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	ws, err := p.pool(ctx, rec.Project)
	if err != nil {
		return nil, err
	}
	for _, w := range ws {
		if w.Number == n {
			return w, nil
		}
	}
	return nil, fmt.Errorf("worker %d of project %s: %w", n, id, errs.ErrNotFound)
}

// pool is the workers of crew project pr: what each does now, and what its tasks cost.
func (p *projects) pool(ctx context.Context, pr *agentv1.Project) ([]*agentv1.ProjectWorker, error) {
	n := project.Workers(pr)
	ws := make([]*agentv1.ProjectWorker, n)
	for i := range ws {
		ws[i] = &agentv1.ProjectWorker{Number: int32(i + 1), State: agentv1.WorkerState_WORKER_STATE_IDLE}
	}
	var jobs []string
	for _, t := range project.Tasks(pr.Phases) {
		if t.Worker < 1 || int(t.Worker) > n {
			continue
		}
		w := ws[t.Worker-1]
		w.Usage = usage.Add(w.Usage, t.Usage)
		if t.Status == agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_COMPLETED && t.PullRequest != nil {
			w.TasksDone++
		}
		if !project.HoldsWorker(t) {
			continue
		}
		w.ProjectTaskId, w.TaskId, w.Title, w.IssueNumber, w.JobId, w.PullRequest = t.Id, t.TaskId, t.Title, t.IssueNumber, t.JobId, t.PullRequest
		w.State = agentv1.WorkerState_WORKER_STATE_WORKING
		if t.JobId != "" {
			jobs = append(jobs, t.JobId)
		}
	}
	last, err := p.s.store.LastJobEvents(ctx, jobs)
	if err != nil {
		return nil, err
	}
	for _, w := range ws {
		if w.JobId == "" {
			continue
		}
		jr, err := p.s.store.Load(ctx, w.JobId)
		if err != nil {
			return nil, err
		}
		j := jr.Job
		w.JobStatus, w.Phase, w.Attempt = j.Status, j.Phase, j.Attempt
		if w.State == agentv1.WorkerState_WORKER_STATE_WORKING {
			// The task's own usage counts its ended jobs; the running one adds what it spent.
			w.Usage = usage.Add(w.Usage, j.Usage)
			switch j.Status {
			case agentv1.JobStatus_JOB_STATUS_PAUSED:
				w.State = agentv1.WorkerState_WORKER_STATE_INTERRUPTED
			case agentv1.JobStatus_JOB_STATUS_PENDING_REVIEW, agentv1.JobStatus_JOB_STATUS_WAITING_CLARIFICATION, agentv1.JobStatus_JOB_STATUS_HUMAN_NEEDED:
				w.State = agentv1.WorkerState_WORKER_STATE_WAITING
			}
		}
		if e, ok := last[w.JobId]; ok {
			w.LastEventType, w.LastEventTime = e.Type, e.Time
		}
	}
	return ws, nil
}
