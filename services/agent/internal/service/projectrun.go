package service

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/agent/internal/project"
	"github.com/thefold/thefold/services/agent/internal/store"
)

// The ProjectService controls of a project that runs: start, pause, resume, and the
// decisions on one task.

const (
	taskPending   = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_PENDING
	taskRunning   = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_RUNNING
	taskCompleted = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_COMPLETED
	taskFailed    = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_FAILED
	taskSkipped   = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_SKIPPED
	taskHuman     = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_HUMAN_NEEDED
)

// projectBudget is a project's budget: the caller's caps, the rest the job default times the
// project's task count.
func (p *projects) projectBudget(b *typev1.Budget, tasks int) *typev1.Budget {
	def := p.s.o.Budget
	n := int64(max(tasks, 1))
	scaled := &typev1.Budget{MaxTokens: def.GetMaxTokens() * n, MaxCostMicros: def.GetMaxCostMicros() * n}
	if w := def.GetMaxWallTime().AsDuration(); w > 0 {
		scaled.MaxWallTime = durationpb.New(w * time.Duration(n))
	}
	return withDefaults(b, scaled)
}

// StartProject creates the plan's tasks in the tasks service and starts the project.
func (p *projects) StartProject(ctx context.Context, req *agentv1.StartProjectRequest) (*agentv1.StartProjectResponse, error) {
	owner, id, err := callerAndProject(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	if req.RequestId != "" {
		if err := validate.RequestID("request_id", req.RequestId); err != nil {
			return nil, err
		}
	}
	if err := checkBudget("budget", req.Budget); err != nil {
		return nil, err
	}
	if err := validate.MaxLen("model", req.Model, maxModel); err != nil {
		return nil, err
	}
	hash := store.RequestHash(req)
	rec, err := p.s.store.GetProject(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if prev := rec.State.StartRequest; req.RequestId != "" && prev != nil && prev.ID == req.RequestId {
		if string(prev.Hash) != string(hash) {
			return nil, errs.Invalid("request_id", "was used for a different StartProject request")
		}
		return &agentv1.StartProjectResponse{Project: rec.Project}, nil
	}
	if err := wantProject(rec.Project, "StartProject", projPlanned); err != nil {
		return nil, err
	}
	if project.Crew(rec.Project) {
		if err := p.crewAccess(ctx, rec.Project); err != nil {
			return nil, err
		}
	}
	// The plan's tasks in the tasks service: the proposed ones created (once: the batch's
	// request id is the project's), the existing ones marked as the project's.
	tasks := project.Tasks(rec.Project.Phases)
	byID := map[string]*agentv1.ProjectTask{}
	for _, t := range tasks {
		byID[t.Id] = t
	}
	batch := &tasksv1.BatchCreateTasksRequest{RequestId: "project-start:" + id}
	var keys []string
	for _, t := range tasks {
		if t.TaskId != "" {
			continue
		}
		bt := &tasksv1.BatchTask{Key: t.Id, Task: &tasksv1.CreateTaskRequest{Title: validate.Truncate(t.Title, 490), Repo: rec.Project.Repo, Description: t.Description,
			Source: tasksv1.TaskSource_TASK_SOURCE_PROJECT, Status: tasksv1.TaskStatus_TASK_STATUS_PLANNED, ProjectId: id}}
		for _, d := range t.DependsOn {
			if dt := byID[d]; dt != nil && dt.TaskId != "" {
				bt.Task.BlockedBy = append(bt.Task.BlockedBy, dt.TaskId)
			} else {
				bt.BlockedByKeys = append(bt.BlockedByKeys, d)
			}
		}
		batch.Tasks = append(batch.Tasks, bt)
		keys = append(keys, t.Id)
	}
	created := map[string]string{}
	if len(batch.Tasks) > 0 {
		resp, err := p.s.o.Tasks.BatchCreateTasks(ctx, batch)
		if err != nil {
			return nil, err
		}
		for i, t := range resp.GetTasks() {
			if i < len(keys) {
				created[keys[i]] = t.Id
			}
		}
	}
	for _, t := range tasks {
		if t.TaskId == "" {
			continue
		}
		if _, err := p.s.o.Tasks.UpdateTask(ctx, &tasksv1.UpdateTaskRequest{Id: t.TaskId, Task: &tasksv1.Task{ProjectId: id},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"project_id"}}}); err != nil {
			return nil, err
		}
	}
	rec, err = p.s.store.ChangeProject(ctx, owner, id, func(rec *store.ProjectRecord) ([]*agentv1.WatchProjectResponse, error) {
		pr := rec.Project
		if err := wantProject(pr, "StartProject", projPlanned); err != nil {
			return nil, err
		}
		all := project.Tasks(pr.Phases)
		for _, t := range all {
			if t.TaskId == "" {
				if t.TaskId = created[t.Id]; t.TaskId == "" {
					return nil, errs.Precondition("project %s changed while it was being started; start it again", id)
				}
			}
		}
		b := pr.Budget
		if req.Budget != nil {
			b = req.Budget
		}
		pr.Budget = p.projectBudget(b, len(all))
		rec.State.Model = req.Model
		if req.RequestId != "" {
			rec.State.StartRequest = &store.ControlRequest{RPC: "StartProject", ID: req.RequestId, Hash: hash}
		}
		pr.StartTime, pr.CurrentPhase = timestamppb.Now(), 0
		prev := pr.Status
		pr.Status, pr.StatusReason = projRunning, "started"
		return []*agentv1.WatchProjectResponse{store.ProjectStatusEvent(prev, pr)}, nil
	}, p.enqueue)
	if err != nil {
		return nil, err
	}
	return &agentv1.StartProjectResponse{Project: rec.Project}, nil
}

// crewAccess refuses to start crew pr when its owner may not merge its pull requests
// (admin on the repository): said now rather than at the first merge, after the work.
func (p *projects) crewAccess(ctx context.Context, pr *agentv1.Project) error {
	if p.s.o.Repos == nil {
		return nil
	}
	resp, err := p.s.o.Repos.GetRepo(ctx, &githubv1.GetRepoRequest{Repo: pr.Repo})
	if err != nil {
		return err
	}
	if r := resp.GetRepo().GetPermission(); r != githubv1.RepoRole_REPO_ROLE_UNSPECIFIED && r < githubv1.RepoRole_REPO_ROLE_ADMIN {
		return errs.Precondition("a crew merges its pull requests, which needs admin on %s, and you have %s access: the repository's owner grants it with SetCollaborator (on GitHub, an admin with SetGitHubGrant)",
			pr.Repo, strings.ToLower(strings.TrimPrefix(r.String(), "REPO_ROLE_")))
	}
	return nil
}

// enqueue hands a RUNNING project a run in the change's transaction.
func (p *projects) enqueue(ctx context.Context, tx pgx.Tx, rec *store.ProjectRecord) error {
	if rec.Project.Status != projRunning || p.s.o.ProjectQueue == nil {
		return nil
	}
	return p.s.o.ProjectQueue.Enqueue(ctx, tx, rec.Project.Id)
}

// statusChange moves pr to status with reason, returning its event.
func projectStatus(pr *agentv1.Project, to agentv1.ProjectStatus, reason string) *agentv1.WatchProjectResponse {
	prev := pr.Status
	pr.Status, pr.StatusReason = to, reason
	return store.ProjectStatusEvent(prev, pr)
}

// PauseProject pauses a RUNNING project; the task in progress finishes.
func (p *projects) PauseProject(ctx context.Context, req *agentv1.PauseProjectRequest) (*agentv1.PauseProjectResponse, error) {
	owner, id, err := callerAndProject(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	reason, err := reasonOr(req.Reason, "paused")
	if err != nil {
		return nil, err
	}
	rec, err := p.s.store.ChangeProject(ctx, owner, id, func(rec *store.ProjectRecord) ([]*agentv1.WatchProjectResponse, error) {
		if err := wantProject(rec.Project, "PauseProject", projRunning); err != nil {
			return nil, err
		}
		return []*agentv1.WatchProjectResponse{projectStatus(rec.Project, projPaused, reason)}, nil
	}, nil)
	if err != nil {
		return nil, err
	}
	if p.s.o.ProjectStopper != nil {
		p.s.o.ProjectStopper.Stop(id)
	}
	return &agentv1.PauseProjectResponse{Project: rec.Project}, nil
}

// ResumeProject continues a PAUSED project, or one a spent budget stopped.
func (p *projects) ResumeProject(ctx context.Context, req *agentv1.ResumeProjectRequest) (*agentv1.ResumeProjectResponse, error) {
	owner, id, err := callerAndProject(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	if err := checkBudget("budget", req.Budget); err != nil {
		return nil, err
	}
	rec, err := p.s.store.ChangeProject(ctx, owner, id, func(rec *store.ProjectRecord) ([]*agentv1.WatchProjectResponse, error) {
		pr := rec.Project
		if err := wantProject(pr, "ResumeProject", projPaused, projHuman); err != nil {
			return nil, err
		}
		if req.Budget != nil {
			pr.Budget = withDefaults(req.Budget, pr.Budget)
		}
		return []*agentv1.WatchProjectResponse{projectStatus(pr, projRunning, "resumed")}, nil
	}, p.enqueue)
	if err != nil {
		return nil, err
	}
	return &agentv1.ResumeProjectResponse{Project: rec.Project}, nil
}

// taskChange applies change to project task ptID of the caller's project pid (which must
// be RUNNING, PAUSED or HUMAN_NEEDED) and hands a RUNNING project a run.
func (p *projects) taskChange(ctx context.Context, what, pid, ptID string,
	change func(rec *store.ProjectRecord, t *agentv1.ProjectTask, ph *agentv1.ProjectPhase) ([]*agentv1.WatchProjectResponse, error)) (*store.ProjectRecord, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	return p.s.store.ChangeProject(ctx, owner, pid, func(rec *store.ProjectRecord) ([]*agentv1.WatchProjectResponse, error) {
		t, ph := project.Find(rec.Project, ptID)
		if t == nil {
			return nil, errs.NotFound("project task", ptID)
		}
		if err := wantProject(rec.Project, what, projRunning, projPaused, projHuman); err != nil {
			return nil, err
		}
		return change(rec, t, ph)
	}, p.enqueue)
}

// checkTaskIDs checks the ids of a task request.
func checkTaskIDs(projectField, taskField, pid, tid string) (string, error) {
	if _, err := projectID(projectField, pid); err != nil {
		return "", err
	}
	tid = strings.TrimSpace(tid)
	switch {
	case tid == "":
		return "", errs.Invalid(taskField, "required")
	case len(tid) > project.MaxIDLen:
		return "", errs.Invalid(taskField, "at most %d characters", project.MaxIDLen)
	}
	return tid, nil
}

// wantTask is FailedPrecondition naming the task's status and the ones what needs.
func wantTask(t *agentv1.ProjectTask, what string, ok ...agentv1.ProjectTaskStatus) error {
	if slices.Contains(ok, t.Status) {
		return nil
	}
	name := func(s agentv1.ProjectTaskStatus) string {
		return strings.ToLower(strings.TrimPrefix(s.String(), "PROJECT_TASK_STATUS_"))
	}
	names := make([]string, len(ok))
	for i, st := range ok {
		names[i] = name(st)
	}
	return errs.Precondition("project task %s is %s; %s needs a task that is %s", t.Id, name(t.Status), what, strings.Join(names, " or "))
}

// unskip puts back to PENDING the tasks skipped because t failed — the runner names the
// task that failed in the reason of each of its dependents, direct or not; a reason naming
// a task that was itself skipped because of t (a chain) counts too — returning their events.
func unskip(pr *agentv1.Project, t *agentv1.ProjectTask) []*agentv1.WatchProjectResponse {
	var evs []*agentv1.WatchProjectResponse
	because := []string{t.Id}
	for changed := true; changed; {
		changed = false
		for _, ph := range pr.Phases {
			for _, d := range ph.Tasks {
				if d.Status != taskSkipped || !skippedBecause.MatchString(d.StatusReason) ||
					!slices.ContainsFunc(because, func(id string) bool { return strings.HasSuffix(d.StatusReason, "("+id+"), which failed") }) {
					continue
				}
				d.Status, d.StatusReason = taskPending, ""
				evs = append(evs, project.TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_RETRIED, d, ph))
				because, changed = append(because, d.Id), true
			}
		}
	}
	return evs
}

// skippedBecause matches the reason the runner skips a task whose dependency failed.
var skippedBecause = regexp.MustCompile(`^depends on ".*" \(.+\), which failed$`)

// SkipProjectTask gives up on one pending or failed task.
func (p *projects) SkipProjectTask(ctx context.Context, req *agentv1.SkipProjectTaskRequest) (*agentv1.SkipProjectTaskResponse, error) {
	tid, err := checkTaskIDs("project_id", "project_task_id", req.ProjectId, req.ProjectTaskId)
	if err != nil {
		return nil, err
	}
	reason, err := reasonOr(req.Reason, "skipped")
	if err != nil {
		return nil, err
	}
	var taskID string
	rec, err := p.taskChange(ctx, "SkipProjectTask", req.ProjectId, tid, func(rec *store.ProjectRecord, t *agentv1.ProjectTask, ph *agentv1.ProjectPhase) ([]*agentv1.WatchProjectResponse, error) {
		if err := wantTask(t, "SkipProjectTask", taskPending, taskFailed, taskHuman); err != nil {
			return nil, err
		}
		// The tasks skipped because it failed run without its work.
		evs := unskip(rec.Project, t)
		t.Status, t.StatusReason, taskID = taskSkipped, reason, t.TaskId
		return append(evs, project.TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_SKIPPED, t, ph)), nil
	})
	if err != nil {
		return nil, err
	}
	p.s.setTask(ctx, taskID, tasksv1.TaskStatus_TASK_STATUS_CANCELLED, "skipped in its project: "+reason)
	return &agentv1.SkipProjectTaskResponse{Project: rec.Project}, nil
}

// ResolveProjectTask records that a person did one pending or failed task by hand.
func (p *projects) ResolveProjectTask(ctx context.Context, req *agentv1.ResolveProjectTaskRequest) (*agentv1.ResolveProjectTaskResponse, error) {
	tid, err := checkTaskIDs("project_id", "project_task_id", req.ProjectId, req.ProjectTaskId)
	if err != nil {
		return nil, err
	}
	note, err := validate.RequiredText("note", req.Note, maxText)
	if err != nil {
		return nil, err
	}
	var taskID, title string
	rec, err := p.taskChange(ctx, "ResolveProjectTask", req.ProjectId, tid, func(rec *store.ProjectRecord, t *agentv1.ProjectTask, ph *agentv1.ProjectPhase) ([]*agentv1.WatchProjectResponse, error) {
		if err := wantTask(t, "ResolveProjectTask", taskPending, taskFailed, taskHuman); err != nil {
			return nil, err
		}
		evs := unskip(rec.Project, t)
		t.Status, t.StatusReason, t.Error, t.JobId = taskCompleted, note, "", ""
		taskID, title = t.TaskId, t.Title
		return append(evs, project.TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_RESOLVED, t, ph)), nil
	})
	if err != nil {
		return nil, err
	}
	p.s.setTask(ctx, taskID, tasksv1.TaskStatus_TASK_STATUS_DONE, "resolved by hand in its project: "+note)
	if p.s.o.Memory != nil {
		if _, err := p.s.o.Memory.StoreMemory(ctx, &memoryv1.StoreMemoryRequest{Repo: rec.Project.Repo, Type: typev1.MemoryType_MEMORY_TYPE_DECISION,
			Content: fmt.Sprintf("Project task %q was done by hand: %s", title, note), Tags: []string{"decision", "project", "resolved"},
			SourceTaskId: taskID, RequestId: "project-resolve:" + rec.Project.Id + ":" + tid + ":" + rec.Project.Etag}); err != nil {
			p.s.log.WarnContext(ctx, "remember a resolved project task", "project", rec.Project.Id, "task", tid, "error", err)
		}
	}
	return &agentv1.ResolveProjectTaskResponse{Project: rec.Project}, nil
}

// RetryProjectTask runs one failed or skipped task again.
func (p *projects) RetryProjectTask(ctx context.Context, req *agentv1.RetryProjectTaskRequest) (*agentv1.RetryProjectTaskResponse, error) {
	tid, err := checkTaskIDs("project_id", "project_task_id", req.ProjectId, req.ProjectTaskId)
	if err != nil {
		return nil, err
	}
	if err := validate.MaxLen("guidance", req.Guidance, maxText); err != nil {
		return nil, err
	}
	if req.RequestId != "" {
		if err := validate.RequestID("request_id", req.RequestId); err != nil {
			return nil, err
		}
	}
	hash := store.RequestHash(req)
	rec, err := p.taskChange(ctx, "RetryProjectTask", req.ProjectId, tid, func(rec *store.ProjectRecord, t *agentv1.ProjectTask, ph *agentv1.ProjectPhase) ([]*agentv1.WatchProjectResponse, error) {
		if prev := rec.State.RetryRequests[req.RequestId]; req.RequestId != "" && prev != nil {
			if string(prev.Hash) != string(hash) {
				return nil, errs.Invalid("request_id", "was used for a different RetryProjectTask request")
			}
			return nil, store.ErrUnchanged
		}
		if err := wantTask(t, "RetryProjectTask", taskFailed, taskSkipped, taskHuman); err != nil {
			return nil, err
		}
		evs := unskip(rec.Project, t)
		t.Status, t.StatusReason, t.Error, t.CheckFailures = taskPending, req.Guidance, "", 0
		if req.RequestId != "" {
			if rec.State.RetryRequests == nil {
				rec.State.RetryRequests = map[string]*store.ControlRequest{}
			}
			rec.State.RetryRequests[req.RequestId] = &store.ControlRequest{RPC: "RetryProjectTask", ID: req.RequestId, Hash: hash}
		}
		rec.State.Stage = "" // back to running tasks, should the review have been next
		return append(evs, project.TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_RETRIED, t, ph)), nil
	})
	if err != nil {
		return nil, err
	}
	return &agentv1.RetryProjectTaskResponse{Project: rec.Project}, nil
}

// --- Project reviews (ReviewService) ---------------------------------------------------------

// decideProject applies a decision to review id of the caller's project pid.
func (p *projects) decideProject(ctx context.Context, owner, pid, id, what string,
	decide func(rec *store.ProjectRecord, r *agentv1.Review) ([]*agentv1.WatchProjectResponse, error),
	alreadyDone agentv1.ReviewStatus) (*store.ProjectRecord, *agentv1.Review, error) {
	var review *agentv1.Review
	rec, err := p.s.store.ChangeProject(ctx, owner, pid, func(rec *store.ProjectRecord) ([]*agentv1.WatchProjectResponse, error) {
		r, err := p.s.store.GetReview(ctx, owner, id)
		if err != nil {
			return nil, err
		}
		review = r
		if alreadyDone != agentv1.ReviewStatus_REVIEW_STATUS_UNSPECIFIED && r.Status == alreadyDone {
			// A retry of a decision already made writes nothing.
			return nil, store.ErrUnchanged
		}
		if r.Status != agentv1.ReviewStatus_REVIEW_STATUS_PENDING {
			return nil, errs.Precondition("review %s is %s; %s needs a pending review", id, store.ReviewStatusName(r.Status), what)
		}
		if rec.Project.Status != agentv1.ProjectStatus_PROJECT_STATUS_PENDING_REVIEW || rec.Project.ReviewId != id {
			return nil, errs.Precondition("review %s is no longer the one its project %s waits on (project is %s)", id, pid, store.ProjectStatusName(rec.Project.Status))
		}
		evs, err := decide(rec, r)
		if err != nil {
			return nil, err
		}
		r.DecideTime = timestamppb.Now()
		return evs, nil
	}, func(ctx context.Context, tx pgx.Tx, rec *store.ProjectRecord) error {
		if err := store.UpdateReview(ctx, tx, review); err != nil {
			return err
		}
		return p.enqueue(ctx, tx, rec)
	})
	return rec, review, err
}

// approveProject: the project goes on to its pull request.
func (p *projects) approveProject(ctx context.Context, owner, pid, id, comment string) (*agentv1.Review, error) {
	_, r, err := p.decideProject(ctx, owner, pid, id, "ApproveReview", func(rec *store.ProjectRecord, r *agentv1.Review) ([]*agentv1.WatchProjectResponse, error) {
		r.Status, r.Feedback = agentv1.ReviewStatus_REVIEW_STATUS_APPROVED, comment
		rec.State.Stage = "complete"
		return []*agentv1.WatchProjectResponse{projectStatus(rec.Project, projRunning, "review approved")}, nil
	}, agentv1.ReviewStatus_REVIEW_STATUS_APPROVED)
	return r, err
}

// changesProject: the tasks named (or named by the feedback) run again, then a new review.
func (p *projects) changesProject(ctx context.Context, owner, pid, id, feedback string, ids []string) (*agentv1.Review, error) {
	_, r, err := p.decideProject(ctx, owner, pid, id, "RequestChanges", func(rec *store.ProjectRecord, r *agentv1.Review) ([]*agentv1.WatchProjectResponse, error) {
		pr := rec.Project
		var rerun []*agentv1.ProjectTask
		for i, tid := range ids {
			t, _ := project.Find(pr, tid)
			if t == nil {
				return nil, errs.Invalid(fmt.Sprintf("project_task_ids[%d]", i), "%q is not a task of project %s", tid, pr.Id)
			}
			rerun = append(rerun, t)
		}
		if len(rerun) == 0 {
			lower := strings.ToLower(feedback)
			for _, t := range project.Tasks(pr.Phases) {
				if strings.Contains(feedback, t.Id) || (len(t.Title) >= 4 && strings.Contains(lower, strings.ToLower(t.Title))) {
					rerun = append(rerun, t)
				}
			}
		}
		if len(rerun) == 0 {
			return nil, errs.Invalid("project_task_ids", "name the tasks to run again: the feedback names none of the project's tasks (by title or id)")
		}
		r.Status, r.Feedback = agentv1.ReviewStatus_REVIEW_STATUS_CHANGES_REQUESTED, feedback
		st := &rec.State
		st.Generation++
		st.Feedback, st.PreviousReview, st.Stage = feedback, id, ""
		var evs []*agentv1.WatchProjectResponse
		for _, t := range rerun {
			_, ph := project.Find(pr, t.Id)
			t.Status, t.StatusReason, t.Error = taskPending, "changes requested: "+validate.Truncate(feedback, 2000), ""
			evs = append(evs, project.TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_RETRIED, t, ph))
		}
		return append(evs, projectStatus(pr, projRunning, "changes requested")), nil
	}, agentv1.ReviewStatus_REVIEW_STATUS_UNSPECIFIED)
	return r, err
}

// rejectProject: the project ends, its sandbox destroyed and its tasks back to the backlog.
func (p *projects) rejectProject(ctx context.Context, owner, pid, id, reason string) (*agentv1.Review, error) {
	rec, r, err := p.decideProject(ctx, owner, pid, id, "RejectReview", func(rec *store.ProjectRecord, r *agentv1.Review) ([]*agentv1.WatchProjectResponse, error) {
		r.Status, r.Feedback = agentv1.ReviewStatus_REVIEW_STATUS_REJECTED, reason
		return []*agentv1.WatchProjectResponse{projectStatus(rec.Project, agentv1.ProjectStatus_PROJECT_STATUS_REJECTED, "review rejected: "+reason)}, nil
	}, agentv1.ReviewStatus_REVIEW_STATUS_UNSPECIFIED)
	if err != nil {
		return nil, err
	}
	for _, t := range project.Tasks(rec.Project.Phases) {
		if t.TaskId != "" {
			p.s.setTask(ctx, t.TaskId, tasksv1.TaskStatus_TASK_STATUS_BACKLOG, "the project's review was rejected: "+reason)
		}
	}
	p.release(ctx, rec.Project, nil, "review rejected")
	return r, nil
}
