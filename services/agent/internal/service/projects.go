package service

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/events"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/usage"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/agent/internal/project"
	"github.com/thefold/thefold/services/agent/internal/store"
)

// Limits of project requests.
const (
	maxRequest     = 20000
	maxConventions = 16 << 10
)

// Project statuses, for the code below.
const (
	projPlanned  = agentv1.ProjectStatus_PROJECT_STATUS_PLANNED
	projRunning  = agentv1.ProjectStatus_PROJECT_STATUS_RUNNING
	projPaused   = agentv1.ProjectStatus_PROJECT_STATUS_PAUSED
	projHuman    = agentv1.ProjectStatus_PROJECT_STATUS_HUMAN_NEEDED
	projCanceled = agentv1.ProjectStatus_PROJECT_STATUS_CANCELLED
)

// projects is the ProjectService side of the server.
type projects struct {
	agentv1.UnimplementedProjectServiceServer
	s     *Server
	watch *events.Handler[*agentv1.WatchProjectResponse]
	// jobTasks remembers which project task each relayed job runs (jobs do not change
	// task), for WatchProject.
	jobTasks sync.Map
}

// Projects is the ProjectService side of the server.
func (s *Server) Projects() agentv1.ProjectServiceServer { return s.projects }

func newProjects(s *Server) *projects {
	p := &projects{s: s}
	p.watch = s.store.ProjectWatchHandler(p.taskOf)
	p.watch.Every, p.watch.Watches = s.o.Heartbeat, s.watch.Watches
	return p
}

var _ agentv1.ProjectServiceServer = (*projects)(nil)

// taskOf is the project task job id runs and its worker ("" and 0 when unknown).
func (p *projects) taskOf(jobID string) (string, int32) {
	if v, ok := p.jobTasks.Load(jobID); ok {
		w := v.(jobTask)
		return w.task, w.worker
	}
	var taskID, projectID string
	if err := p.s.store.Pool().QueryRow(context.Background(), `SELECT task_id, project_id FROM jobs WHERE id = $1`, jobID).Scan(&taskID, &projectID); err != nil {
		return "", 0
	}
	rec, err := p.s.store.LoadProject(context.Background(), projectID)
	if err != nil {
		return "", 0
	}
	for _, t := range project.Tasks(rec.Project.Phases) {
		if t.TaskId == taskID {
			// A task's job keeps its worker (a retry is a new job).
			p.jobTasks.Store(jobID, jobTask{t.Id, t.Worker})
			return t.Id, t.Worker
		}
	}
	return "", 0
}

// jobTask is the project task a job runs and its worker.
type jobTask struct {
	task   string
	worker int32
}

func checkMode(field string, m agentv1.ProjectMode) (agentv1.ProjectMode, error) {
	switch m {
	case agentv1.ProjectMode_PROJECT_MODE_UNSPECIFIED:
		return agentv1.ProjectMode_PROJECT_MODE_REVIEW, nil
	case agentv1.ProjectMode_PROJECT_MODE_REVIEW, agentv1.ProjectMode_PROJECT_MODE_SESSION, agentv1.ProjectMode_PROJECT_MODE_CREW:
		return m, nil
	}
	return 0, errs.Invalid(field, "unknown mode %d", m)
}

// maxCheckCommand bounds a crew's check command.
const maxCheckCommand = 1000

// checkCrew checks the crew fields of p (a plan or an edit) and fills in their defaults for
// a crew project; for another mode they must be unset.
func checkCrew(p *agentv1.Project) error {
	if p.Mode != agentv1.ProjectMode_PROJECT_MODE_CREW {
		switch {
		case p.MaxWorkers != 0:
			return errs.Invalid("max_workers", "only for mode PROJECT_MODE_CREW")
		case p.MergePolicy != agentv1.MergePolicy_MERGE_POLICY_UNSPECIFIED:
			return errs.Invalid("merge_policy", "only for mode PROJECT_MODE_CREW")
		case p.AutoMergeMinQuality != 0:
			return errs.Invalid("auto_merge_min_quality", "only for mode PROJECT_MODE_CREW")
		case p.CheckCommand != "":
			return errs.Invalid("check_command", "only for mode PROJECT_MODE_CREW")
		}
		return nil
	}
	switch {
	case p.MaxWorkers < 0 || p.MaxWorkers > project.MaxWorkers:
		return errs.Invalid("max_workers", "must be 1–%d (0 takes the default, %d), not %d", project.MaxWorkers, project.DefaultWorkers, p.MaxWorkers)
	case p.AutoMergeMinQuality < 0 || p.AutoMergeMinQuality > 10:
		return errs.Invalid("auto_merge_min_quality", "must be 1–10 (0 takes the default, %d), not %d", project.DefaultMinQuality, p.AutoMergeMinQuality)
	}
	switch p.MergePolicy {
	case agentv1.MergePolicy_MERGE_POLICY_UNSPECIFIED:
		p.MergePolicy = agentv1.MergePolicy_MERGE_POLICY_HUMAN
	case agentv1.MergePolicy_MERGE_POLICY_HUMAN, agentv1.MergePolicy_MERGE_POLICY_AUTO:
	default:
		return errs.Invalid("merge_policy", "unknown merge policy %d", p.MergePolicy)
	}
	if err := validate.MaxLen("check_command", p.CheckCommand, maxCheckCommand); err != nil {
		return err
	}
	if strings.ContainsRune(p.CheckCommand, 0) {
		return errs.Invalid("check_command", "must not contain NUL")
	}
	if p.CheckCommand != "" {
		if _, err := project.SplitCommand(p.CheckCommand); err != nil {
			return errs.Invalid("check_command", "%v (a program and its arguments, e.g. \"make check\"; no shell)", err)
		}
	}
	if p.MaxWorkers == 0 {
		p.MaxWorkers = project.DefaultWorkers
	}
	if p.AutoMergeMinQuality == 0 {
		p.AutoMergeMinQuality = project.DefaultMinQuality
	}
	return nil
}

// PlanProject makes and stores a PLANNED project.
func (p *projects) PlanProject(ctx context.Context, req *agentv1.PlanProjectRequest) (*agentv1.PlanProjectResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if req.RequestId != "" {
		if err := validate.RequestID("request_id", req.RequestId); err != nil {
			return nil, err
		}
	}
	if err := validate.Repo("repo", req.Repo, true); err != nil {
		return nil, err
	}
	if err := validate.MaxLen("request", req.Request, maxRequest); err != nil {
		return nil, err
	}
	if err := validate.MaxLen("conventions", req.Conventions, maxConventions); err != nil {
		return nil, err
	}
	if err := checkBranch("base_branch", req.BaseBranch); err != nil {
		return nil, err
	}
	mode, err := checkMode("mode", req.Mode)
	if err != nil {
		return nil, err
	}
	crew := &agentv1.Project{Mode: mode, MaxWorkers: req.MaxWorkers, MergePolicy: req.MergePolicy,
		AutoMergeMinQuality: req.AutoMergeMinQuality, CheckCommand: req.CheckCommand}
	if err := checkCrew(crew); err != nil {
		return nil, err
	}
	if mode == agentv1.ProjectMode_PROJECT_MODE_CREW && len(req.TaskIds) == 0 && strings.TrimSpace(req.Request) == "" {
		req.ImportIssues = true // a crew works the repository's open issues by default
	}
	switch {
	case len(req.TaskIds) > 0 && req.ImportIssues:
		return nil, errs.Invalid("task_ids", "give task_ids or import_issues, not both")
	case len(req.TaskIds) > project.MaxTasks:
		return nil, errs.Invalid("task_ids", "at most %d tasks, not %d", project.MaxTasks, len(req.TaskIds))
	case len(req.TaskIds) == 0 && !req.ImportIssues && strings.TrimSpace(req.Request) == "":
		return nil, errs.Invalid("request", "required: what to build (or name the work with task_ids or import_issues)")
	}
	for i, id := range req.TaskIds {
		if _, err := validate.UUID(fmt.Sprintf("task_ids[%d]", i), id, true); err != nil {
			return nil, err
		}
	}
	hash := store.RequestHash(req)
	if req.RequestId != "" {
		prev, prevHash, err := p.s.store.ProjectByRequest(ctx, owner, req.RequestId)
		if err != nil {
			return nil, err
		}
		if prev != nil {
			if string(prevHash) != string(hash) {
				return nil, errs.Invalid("request_id", "was used for a different PlanProject request")
			}
			return &agentv1.PlanProjectResponse{Project: prev}, nil
		}
	}
	repo, err := p.s.o.Repos.GetRepo(ctx, &githubv1.GetRepoRequest{Repo: req.Repo})
	if status.Code(err) == codes.NotFound {
		return nil, errs.NotFound("repository", req.Repo)
	}
	if err != nil {
		return nil, err
	}
	branch := req.BaseBranch
	if branch == "" {
		if branch = repo.GetRepo().GetDefaultBranch(); branch == "" {
			branch = "main"
		}
	}
	pr := &agentv1.Project{OwnerId: owner, Repo: req.Repo, Request: req.Request, Status: projPlanned, Conventions: req.Conventions,
		Mode: mode, BaseBranch: branch, Usage: &typev1.Usage{}, MaxWorkers: crew.MaxWorkers, MergePolicy: crew.MergePolicy,
		AutoMergeMinQuality: crew.AutoMergeMinQuality, CheckCommand: crew.CheckCommand}
	switch {
	case len(req.TaskIds) > 0:
		tasks := make([]*tasksv1.Task, 0, len(req.TaskIds))
		for i, id := range req.TaskIds {
			t, err := p.planTask(ctx, fmt.Sprintf("task_ids[%d]", i), id, req.Repo)
			if err != nil {
				return nil, err
			}
			tasks = append(tasks, t)
		}
		if pr.Phases, err = project.FromTasks(tasks); err != nil {
			return nil, err
		}
		pr.Description = fmt.Sprintf("%d tasks of %s in %d layers of their blocked-by graph", len(tasks), req.Repo, len(pr.Phases))
	case req.ImportIssues:
		imp, err := p.s.o.Tasks.ImportIssues(ctx, &tasksv1.ImportIssuesRequest{Repo: req.Repo})
		if err != nil {
			return nil, err
		}
		var tasks []*tasksv1.Task
		for _, t := range append(imp.Created, imp.Updated...) {
			if open(t) {
				tasks = append(tasks, t)
			}
		}
		if len(tasks) == 0 {
			return nil, errs.Precondition("%s has no open issues to plan from", req.Repo)
		}
		if len(tasks) > project.MaxTasks {
			return nil, errs.Precondition("%s has %d open issues; a project takes at most %d (plan from task_ids instead)", req.Repo, len(tasks), project.MaxTasks)
		}
		if pr.Phases, err = project.FromTasks(tasks); err != nil {
			return nil, err
		}
		pr.Description = fmt.Sprintf("%d open issues of %s in %d layers of their blocked-by graph", len(tasks), req.Repo, len(pr.Phases))
	default:
		if err := p.decompose(ctx, req, pr); err != nil {
			return nil, err
		}
	}
	if pr.Description == "" {
		pr.Description = validate.Truncate(firstLine(req.Request), 200)
	}
	out, _, err := p.s.store.CreateProject(ctx, pr, req.RequestId, hash)
	if err != nil {
		return nil, err
	}
	return &agentv1.PlanProjectResponse{Project: out}, nil
}

func open(t *tasksv1.Task) bool {
	switch t.Status {
	case tasksv1.TaskStatus_TASK_STATUS_DONE, tasksv1.TaskStatus_TASK_STATUS_CANCELLED:
		return false
	}
	return true
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return s
}

// planTask is the caller's open task id in repo, for a plan made from tasks.
func (p *projects) planTask(ctx context.Context, field, id, repo string) (*tasksv1.Task, error) {
	resp, err := p.s.o.Tasks.GetTask(ctx, &tasksv1.GetTaskRequest{Id: id})
	if status.Code(err) == codes.NotFound {
		return nil, errs.NotFound("task", id)
	}
	if err != nil {
		return nil, err
	}
	t := resp.GetTask()
	switch {
	case t.Repo != repo:
		return nil, errs.Invalid(field, "task %s is of repository %q, not %q", id, t.Repo, repo)
	case !open(t):
		return nil, errs.Precondition("task %s is %s; a project plans open tasks", id, strings.ToLower(strings.TrimPrefix(t.Status.String(), "TASK_STATUS_")))
	case t.ProjectId != "":
		return nil, errs.Precondition("task %s belongs to project %s already", id, t.ProjectId)
	}
	return t, nil
}

// decompose plans pr from its request text with ai.DecomposeProject, given the
// repository's files.
func (p *projects) decompose(ctx context.Context, req *agentv1.PlanProjectRequest, pr *agentv1.Project) error {
	var tree []string
	t, err := p.s.o.Repos.GetTree(ctx, &githubv1.GetTreeRequest{Repo: pr.Repo, Ref: pr.BaseBranch, PageSize: 1000})
	switch {
	case status.Code(err) == codes.NotFound:
		// A new repository's branch does not exist yet: the plan starts from nothing.
	case err != nil:
		return err
	default:
		for _, e := range t.Entries {
			if e.Type == githubv1.TreeEntryType_TREE_ENTRY_TYPE_FILE {
				tree = append(tree, e.Path)
			}
		}
	}
	key := ""
	if req.RequestId != "" {
		key = "plan-project:" + pr.OwnerId + ":" + req.RequestId
	}
	request := req.Request
	if req.Conventions != "" {
		request += "\n\nConventions to follow:\n" + req.Conventions
	}
	mctx, cancel := context.WithTimeout(ctx, p.s.o.CallTimeout)
	defer cancel()
	resp, err := p.s.o.AI.DecomposeProject(mctx, &aiv1.DecomposeProjectRequest{RequestId: key, Request: request, ProjectTree: tree,
		Attribution: &aiv1.Attribution{Repo: pr.Repo, Phase: aiv1.CallPhase_CALL_PHASE_PLANNING}})
	if err != nil {
		return err
	}
	pr.Usage = usage.Add(pr.Usage, resp.Usage)
	phases, err := project.FromAI(resp.GetPlan())
	if err != nil {
		// The model's plan is unusable: say what was wrong with it, as a failure of the
		// planner rather than of the request.
		return errs.Public(codes.Unavailable, "the planner's plan could not be used, try again: %s", status.Convert(err).Message())
	}
	pr.Phases, pr.Description = phases, resp.GetPlan().GetSummary()
	if pr.Conventions == "" {
		pr.Conventions = resp.GetPlan().GetConventions()
	}
	return nil
}

// projectID checks the id of a request.
func projectID(field, id string) (string, error) { return validate.UUID(field, id, true) }

// callerAndProject is the caller and the project id of a request naming one in its id.
func callerAndProject(ctx context.Context, id string) (owner, project string, err error) {
	if owner, err = caller(ctx); err != nil {
		return "", "", err
	}
	project, err = projectID("id", id)
	return owner, project, err
}

// wantProject is FailedPrecondition naming the project's status and the ones what needs.
func wantProject(p *agentv1.Project, what string, ok ...agentv1.ProjectStatus) error {
	if slices.Contains(ok, p.Status) {
		return nil
	}
	names := make([]string, len(ok))
	for i, st := range ok {
		names[i] = store.ProjectStatusName(st)
	}
	return errs.Precondition("project %s is %s; %s needs a project that is %s", p.Id, store.ProjectStatusName(p.Status), what, strings.Join(names, " or "))
}

// projectPaths are UpdateProject's updatable paths.
var projectPaths = []string{"description", "conventions", "phases", "budget", "mode", "max_workers", "merge_policy", "auto_merge_min_quality", "check_command"}

// UpdateProject edits a PLANNED project.
func (p *projects) UpdateProject(ctx context.Context, req *agentv1.UpdateProjectRequest) (*agentv1.UpdateProjectResponse, error) {
	owner, id, err := callerAndProject(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	in := req.GetProject()
	if in == nil {
		return nil, errs.Invalid("project", "required")
	}
	if in.Id != "" && !strings.EqualFold(in.Id, id) {
		return nil, errs.Invalid("project.id", "must equal id (%s) when set", id)
	}
	paths := req.GetUpdateMask().GetPaths()
	if len(paths) == 0 {
		return nil, errs.Invalid("update_mask", "required: name the fields to change among %s", strings.Join(projectPaths, ", "))
	}
	for i, path := range paths {
		if !slices.Contains(projectPaths, path) {
			return nil, errs.Invalid(fmt.Sprintf("update_mask.paths[%d]", i), "%q is not updatable; the updatable fields are %s", path, strings.Join(projectPaths, ", "))
		}
	}
	has := func(f string) bool { return slices.Contains(paths, f) }
	if has("description") {
		if err := validate.MaxLen("project.description", in.Description, maxText); err != nil {
			return nil, err
		}
	}
	if has("conventions") {
		if err := validate.MaxLen("project.conventions", in.Conventions, maxConventions); err != nil {
			return nil, err
		}
	}
	if has("budget") {
		if err := checkBudget("project.budget", in.Budget); err != nil {
			return nil, err
		}
	}
	mode := in.Mode
	if has("mode") {
		if mode, err = checkMode("project.mode", in.Mode); err != nil {
			return nil, err
		}
	}
	if err := validate.MaxLen("project.etag", in.Etag, 32); err != nil {
		return nil, err
	}
	// The crew's values on their own (whether the project's mode takes them is seen below).
	pre := &agentv1.Project{Mode: agentv1.ProjectMode_PROJECT_MODE_CREW}
	for _, f := range crewPaths {
		if has(f) {
			setCrewField(pre, in, f)
		}
	}
	if err := prefixField(checkCrew(pre), "project."); err != nil {
		return nil, err
	}
	rec, err := p.s.store.ChangeProject(ctx, owner, id, func(rec *store.ProjectRecord) ([]*agentv1.WatchProjectResponse, error) {
		cur := rec.Project
		if in.Etag != "" && in.Etag != cur.Etag {
			return nil, fmt.Errorf("project %s changed since it was read (etag %s, now %s): read it again and redo the edit: %w", id, in.Etag, cur.Etag, errs.ErrConflict)
		}
		if err := wantProject(cur, "UpdateProject", projPlanned); err != nil {
			return nil, err
		}
		changed := &agentv1.Project{}
		if has("phases") {
			phases, err := project.Edit(cur.Phases, in.Phases)
			if err != nil {
				return nil, prefixField(err, "project.")
			}
			cur.Phases, changed.Phases = phases, phases
		}
		if has("description") {
			cur.Description, changed.Description = in.Description, in.Description
		}
		if has("conventions") {
			cur.Conventions, changed.Conventions = in.Conventions, in.Conventions
		}
		if has("budget") {
			cur.Budget, changed.Budget = in.Budget, in.Budget
		}
		if has("mode") {
			cur.Mode, changed.Mode = mode, mode
		}
		// The crew's settings: as edited, checked against the mode the project ends up in.
		next := proto.CloneOf(cur)
		if cur.Mode != agentv1.ProjectMode_PROJECT_MODE_CREW {
			next.MaxWorkers, next.MergePolicy, next.AutoMergeMinQuality, next.CheckCommand = 0, 0, 0, ""
		}
		for _, f := range crewPaths {
			if has(f) {
				setCrewField(next, in, f)
			}
		}
		if err := prefixField(checkCrew(next), "project."); err != nil {
			return nil, err
		}
		cur.MaxWorkers, cur.MergePolicy, cur.AutoMergeMinQuality, cur.CheckCommand = next.MaxWorkers, next.MergePolicy, next.AutoMergeMinQuality, next.CheckCommand
		for _, f := range crewPaths {
			if has(f) {
				setCrewField(changed, cur, f)
			}
		}
		return []*agentv1.WatchProjectResponse{{Type: agentv1.ProjectEventType_PROJECT_EVENT_TYPE_UPDATED,
			Payload: &agentv1.WatchProjectResponse_Updated{Updated: &agentv1.ProjectUpdate{
				UpdateMask: &fieldmaskpb.FieldMask{Paths: slices.Clone(paths)}, Project: changed}}}}, nil
	}, nil)
	if err != nil {
		return nil, err
	}
	return &agentv1.UpdateProjectResponse{Project: rec.Project}, nil
}

// crewPaths are the crew's update_mask paths.
var crewPaths = []string{"max_workers", "merge_policy", "auto_merge_min_quality", "check_command"}

// setCrewField copies crew field f from src to dst.
func setCrewField(dst, src *agentv1.Project, f string) {
	switch f {
	case "max_workers":
		dst.MaxWorkers = src.MaxWorkers
	case "merge_policy":
		dst.MergePolicy = src.MergePolicy
	case "auto_merge_min_quality":
		dst.AutoMergeMinQuality = src.AutoMergeMinQuality
	case "check_command":
		dst.CheckCommand = src.CheckCommand
	}
}

// prefixField puts prefix before the field an INVALID_ARGUMENT of errs.Invalid names;
// other errors pass.
func prefixField(err error, prefix string) error {
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.InvalidArgument {
		return err
	}
	field, msg, found := strings.Cut(st.Message(), ": ")
	if !found {
		return err
	}
	return errs.Invalid(prefix+field, "%s", msg)
}

// GetProject returns one of the caller's projects.
func (p *projects) GetProject(ctx context.Context, req *agentv1.GetProjectRequest) (*agentv1.GetProjectResponse, error) {
	owner, id, err := callerAndProject(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	rec, err := p.s.store.GetProject(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return &agentv1.GetProjectResponse{Project: rec.Project}, nil
}

// ListProjects lists the caller's projects, newest first.
func (p *projects) ListProjects(ctx context.Context, req *agentv1.ListProjectsRequest) (*agentv1.ListProjectsResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	if err := validate.Repo("repo", req.Repo, false); err != nil {
		return nil, err
	}
	for i, st := range req.Statuses {
		if _, ok := agentv1.ProjectStatus_name[int32(st)]; !ok || st == agentv1.ProjectStatus_PROJECT_STATUS_UNSPECIFIED {
			return nil, errs.Invalid(fmt.Sprintf("statuses[%d]", i), "unknown status %d", st)
		}
	}
	size, err := validate.PageSize(req.PageSize, 50, 200)
	if err != nil {
		return nil, err
	}
	out, next, err := p.s.store.ListProjects(ctx, owner, store.ProjectFilter{Repo: req.Repo, Statuses: req.Statuses}, size, req.PageToken)
	if err != nil {
		return nil, err
	}
	return &agentv1.ListProjectsResponse{Projects: out, NextPageToken: next}, nil
}

// WatchProject streams one project's events with its task jobs' events relayed, or all of
// the caller's projects' own events.
func (p *projects) WatchProject(req *agentv1.WatchProjectRequest, stream grpc.ServerStreamingServer[agentv1.WatchProjectResponse]) error {
	ctx := stream.Context()
	owner, err := caller(ctx)
	if err != nil {
		return err
	}
	id, err := validate.UUID("id", req.Id, false)
	if err != nil {
		return err
	}
	w := events.Watch[*agentv1.WatchProjectResponse]{AfterID: req.AfterId, FromNow: req.FromNow, OwnerID: owner, ID: id,
		Ends: store.ProjectFinishing}
	if id != "" {
		w.Scope, w.Related = id, true
		w.State = func(ctx context.Context) (bool, error) { return p.s.store.ProjectWatchState(ctx, owner, id) }
	}
	return p.watch.Serve(ctx, w, stream.Send)
}

// CancelProject stops a project that has not ended.
func (p *projects) CancelProject(ctx context.Context, req *agentv1.CancelProjectRequest) (*agentv1.CancelProjectResponse, error) {
	owner, id, err := callerAndProject(ctx, req.Id)
	if err != nil {
		return nil, err
	}
	reason, err := reasonOr(req.Reason, "cancelled")
	if err != nil {
		return nil, err
	}
	var running []string
	rec, err := p.s.store.ChangeProject(ctx, owner, id, func(rec *store.ProjectRecord) ([]*agentv1.WatchProjectResponse, error) {
		pr := rec.Project
		if err := wantProject(pr, "CancelProject", projPlanned, projRunning, projPaused, projHuman); err != nil {
			return nil, err
		}
		evs := []*agentv1.WatchProjectResponse{}
		for _, ph := range pr.Phases {
			for _, t := range ph.Tasks {
				switch t.Status {
				case agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_RUNNING, agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_IN_REVIEW:
					running = append(running, t.JobId)
					fallthrough
				case agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_PENDING, agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_CHECKING:
					// (A crew task's open pull request stays open for a person to decide.)
					t.Status, t.StatusReason = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_SKIPPED, "the project was cancelled: "+reason
					evs = append(evs, project.TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_SKIPPED, t, ph))
				}
			}
		}
		prev := pr.Status
		pr.Status, pr.StatusReason = projCanceled, reason
		return append(evs, store.ProjectStatusEvent(prev, pr)), nil
	}, nil)
	if err != nil {
		return nil, err
	}
	p.release(ctx, rec.Project, running, "project cancelled: "+reason)
	return &agentv1.CancelProjectResponse{Project: rec.Project}, nil
}

// release cleans up after a project a person ended: its running jobs cancelled, its tasks
// not done cancelled in the tasks service, its sandbox destroyed. Best effort: the
// project's end is recorded already.
func (p *projects) release(ctx context.Context, pr *agentv1.Project, jobs []string, reason string) {
	for _, j := range jobs {
		if j == "" {
			continue
		}
		if _, err := p.s.CancelJob(ctx, &agentv1.CancelJobRequest{Id: j, Reason: reason}); err != nil && status.Code(err) != codes.FailedPrecondition {
			p.s.log.WarnContext(ctx, "cancel a project task's job", "project", pr.Id, "job", j, "error", err)
		}
	}
	for _, t := range project.Tasks(pr.Phases) {
		// A plan's tasks are the project's once it started (a PLANNED project's existing
		// tasks are left as they were).
		if pr.StartTime != nil && t.TaskId != "" && t.Status == agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_SKIPPED {
			p.s.setTask(ctx, t.TaskId, tasksv1.TaskStatus_TASK_STATUS_CANCELLED, reason)
		}
	}
	if pr.SandboxId != "" && p.s.o.Sandbox != nil {
		if _, err := p.s.o.Sandbox.DestroySandbox(ctx, &sandboxv1.DestroySandboxRequest{Id: pr.SandboxId}); err != nil && status.Code(err) != codes.NotFound {
			p.s.log.WarnContext(ctx, "destroy the project's sandbox", "project", pr.Id, "sandbox", pr.SandboxId, "error", err)
		}
	}
}
