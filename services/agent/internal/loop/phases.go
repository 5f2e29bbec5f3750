package loop

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/usage"
	"github.com/thefold/thefold/pkg/wait"

	"github.com/thefold/thefold/services/agent/internal/learn"
	"github.com/thefold/thefold/services/agent/internal/store"
)

// prepare loads the task (as its owner: another user's task is NOT_FOUND and fails the
// job) and marks it in progress.
func (r *run) prepare(ctx context.Context) error {
	j := r.job()
	resp, err := r.e.c.Tasks.GetTask(ctx, &tasksv1.GetTaskRequest{Id: j.TaskId})
	if err != nil {
		return err
	}
	t := resp.GetTask()
	if r.rec.Context.Task == nil {
		r.rec.Context.Task = &aiv1.TaskSpec{Title: t.Title, Description: t.Description, Labels: t.Labels}
	}
	if t.Status != tasksv1.TaskStatus_TASK_STATUS_IN_PROGRESS {
		start := time.Now()
		_, err := r.e.c.Tasks.SetTaskStatus(ctx, &tasksv1.SetTaskStatusRequest{Id: j.TaskId, Status: tasksv1.TaskStatus_TASK_STATUS_IN_PROGRESS, Reason: "job " + j.Id})
		r.audit("task_status_changed", r.key("task_in_progress"), map[string]any{"status": "in_progress"}, err, time.Since(start))
		if err != nil {
			return err
		}
	}
	if t.JobId != j.Id {
		if _, err := r.e.c.Tasks.UpdateTask(ctx, &tasksv1.UpdateTaskRequest{Id: j.TaskId, Task: &tasksv1.Task{JobId: j.Id},
			UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"job_id"}}}); err != nil {
			return err
		}
	}
	r.thought("working on %q in %s@%s", t.Title, j.Repo, j.BaseBranch)
	r.setPhase(phaseContext)
	return nil
}

// taskText is the task as one text, for searches.
func (r *run) taskText() string {
	t := r.rec.Context.Task
	return strings.TrimSpace(t.GetTitle() + "\n" + t.GetDescription())
}

// gather collects the context: tree, relevant files, memories, error patterns, a strategy
// hint, skills and the pre-run check. An empty repository is initialised first.
func (r *run) gather(ctx context.Context) error {
	j, c := r.job(), r.rec.Context
	// The job acts with its owner's rights. A repository the owner may read but not write
	// would refuse the branch and the pull request only after all the work: say so now.
	repo, err := r.e.c.Repos.GetRepo(ctx, &githubv1.GetRepoRequest{Repo: j.Repo})
	if err != nil {
		return err
	}
	if p := repo.GetRepo().GetPermission(); p != githubv1.RepoRole_REPO_ROLE_UNSPECIFIED && p < githubv1.RepoRole_REPO_ROLE_WRITE {
		return status.Errorf(codes.PermissionDenied, "the task's owner may not write to %s (%s access): the agent pushes a branch and opens a pull request there; its owner grants write with SetCollaborator",
			j.Repo, strings.ToLower(strings.TrimPrefix(p.String(), "REPO_ROLE_")))
	}
	tree, err := r.e.c.Repos.GetTree(ctx, &githubv1.GetTreeRequest{Repo: j.Repo, Ref: j.BaseBranch, PageSize: 1000})
	if err != nil {
		return err
	}
	if tree.Empty {
		start := time.Now()
		_, err := r.e.c.Repos.InitRepo(ctx, &githubv1.InitRepoRequest{Repo: j.Repo, Branch: j.BaseBranch, Message: "Initial commit (TheFold)"})
		r.audit("repo_initialized", r.key("init_repo"), map[string]any{"repo": j.Repo, "branch": j.BaseBranch}, err, time.Since(start))
		if err != nil {
			return err
		}
		if tree, err = r.e.c.Repos.GetTree(ctx, &githubv1.GetTreeRequest{Repo: j.Repo, Ref: j.BaseBranch, PageSize: 1000}); err != nil {
			return err
		}
	}
	c.ProjectTree = c.ProjectTree[:0]
	for _, e := range tree.Entries {
		if e.Type == githubv1.TreeEntryType_TREE_ENTRY_TYPE_FILE {
			c.ProjectTree = append(c.ProjectTree, e.Path)
		}
	}
	if err := r.relevantFiles(ctx, nil); err != nil {
		return err
	}
	// Memory is context, not a precondition: while it is unavailable the job goes on
	// without it (and says so).
	if err := r.recall(ctx); err != nil {
		if permanent(err) {
			return err
		}
		r.thought("memory unavailable (%s): going on without memories and strategy hints", status.Convert(err).Message())
	}
	if r.e.c.Skills != nil {
		if stop, err := r.skills(ctx); err != nil || stop {
			return err
		}
	}
	r.setPhase(phaseConfident)
	return nil
}

// recall adds memories, error patterns and a strategy hint to the context.
func (r *run) recall(ctx context.Context) error {
	j, c := r.job(), r.rec.Context
	if err := r.memories(ctx, r.taskText()); err != nil {
		return err
	}
	// A strategy that worked for this kind of task in this repository, if one is close.
	strat, err := r.e.c.Memory.SearchMemories(ctx, &memoryv1.SearchMemoriesRequest{Query: r.taskText(), Repo: j.Repo,
		Types: []typev1.MemoryType{typev1.MemoryType_MEMORY_TYPE_STRATEGY}, Limit: 1})
	if err != nil {
		return err
	}
	c.StrategyHint = ""
	if res := strat.GetResults(); len(res) > 0 {
		sim := res[0].GetScore().GetSimilarity()
		if hint := learn.StrategyHint(res[0].GetMemory().GetContent(), sim); hint != "" {
			c.StrategyHint = hint
			r.thought("strategy hint from memory %s (similarity %.2f)", res[0].GetMemory().GetId(), sim)
		}
	}
	return nil
}

// relevantFiles asks the repository service for the files most relevant to the task,
// within the token budget (larger, and with include, after a missing_context diagnosis).
func (r *run) relevantFiles(ctx context.Context, include []string) error {
	j, c := r.job(), r.rec.Context
	n := max(r.rec.State.RelevantFiles, r.e.cfg.ContextFiles)
	budget := r.e.cfg.ContextTokens * n / max(r.e.cfg.ContextFiles, 1)
	var paths []string
	for _, p := range include {
		if slices.Contains(c.ProjectTree, p) {
			paths = append(paths, p)
		}
	}
	rel, err := r.e.c.Repos.FindRelevantFiles(ctx, &githubv1.FindRelevantFilesRequest{Repo: j.Repo, Ref: j.BaseBranch, Task: truncate(r.taskText(), 8000),
		TokenBudget: int32(budget), MaxFiles: int32(n), IncludePaths: paths})
	if err != nil {
		return err
	}
	for _, f := range rel.Files {
		if !f.ContentIncluded || slices.ContainsFunc(c.ContextFiles, func(cf *aiv1.ContextFile) bool { return cf.Path == f.Path }) {
			continue
		}
		c.ContextFiles = append(c.ContextFiles, &aiv1.ContextFile{Path: f.Path, Content: f.Content})
	}
	return nil
}

// memories adds what memory holds on query (general memories and past error patterns)
// to the context.
func (r *run) memories(ctx context.Context, query string) error {
	j, c := r.job(), r.rec.Context
	for _, search := range []struct {
		types []typev1.MemoryType
		limit int32
	}{
		{[]typev1.MemoryType{typev1.MemoryType_MEMORY_TYPE_GENERAL, typev1.MemoryType_MEMORY_TYPE_DECISION, typev1.MemoryType_MEMORY_TYPE_CODE_PATTERN,
			typev1.MemoryType_MEMORY_TYPE_TASK, typev1.MemoryType_MEMORY_TYPE_SKILL}, 6},
		{[]typev1.MemoryType{typev1.MemoryType_MEMORY_TYPE_ERROR_PATTERN}, 4},
	} {
		resp, err := r.e.c.Memory.SearchMemories(ctx, &memoryv1.SearchMemoriesRequest{Query: truncate(query, 4000), Repo: j.Repo, Types: search.types, Limit: search.limit})
		if err != nil {
			return err
		}
		for _, res := range resp.Results {
			m := res.GetMemory()
			if slices.Contains(r.rec.State.MemoryIDs, m.GetId()) {
				continue
			}
			r.rec.State.MemoryIDs = append(r.rec.State.MemoryIDs, m.GetId())
			c.Memories = append(c.Memories, &aiv1.MemoryFragment{Id: m.GetId(), Content: m.GetContent(), Type: m.GetType(), Relevance: res.GetScore().GetFinal()})
		}
	}
	return nil
}

// skills resolves the skills injected into planning and runs the pre-run checks; stop is
// set when a pre-run check refused the task (the job then needs a human).
func (r *run) skills(ctx context.Context) (stop bool, err error) {
	j, c := r.job(), r.rec.Context
	tc := &skillsv1.TaskContext{Description: truncate(r.taskText(), 16000), Repo: j.Repo, Labels: c.Task.GetLabels()}
	for _, f := range c.ContextFiles {
		tc.FilePaths = append(tc.FilePaths, f.Path)
	}
	res, err := r.e.c.Skills.ResolveSkills(ctx, &skillsv1.ResolveSkillsRequest{Context: tc, Phase: skillsv1.SkillPhase_SKILL_PHASE_INJECT})
	if err != nil {
		return false, err
	}
	c.Skills, r.rec.State.InjectSkillIDs = c.Skills[:0], r.rec.State.InjectSkillIDs[:0]
	for _, s := range res.Selected {
		c.Skills = append(c.Skills, &aiv1.SkillFragment{Id: s.SkillId, Name: s.Name, Content: s.PromptFragment, Priority: s.Priority})
		r.rec.State.InjectSkillIDs = append(r.rec.State.InjectSkillIDs, s.SkillId)
	}
	pre, err := r.e.c.Skills.ExecutePreRun(ctx, &skillsv1.ExecutePreRunRequest{Context: tc, Input: truncate(r.taskText(), 16000), JobId: j.Id})
	if err != nil {
		return false, err
	}
	r.spend(pre.Usage)
	if len(pre.Notes) > 0 {
		c.Skills = append(c.Skills, &aiv1.SkillFragment{Id: "pre-run", Name: "pre-run notes", Content: strings.Join(pre.Notes, "\n"), Priority: 100})
	}
	if !pre.Passed {
		reason := "pre-run checks refused the task: " + diagnosticsText(pre.Diagnostics, 5)
		r.audit("pre_run_refused", r.key("pre_run"), map[string]any{"findings": diagnosticsText(pre.Diagnostics, 20)}, errors.New(reason), 0)
		r.human(reason)
		r.cleanup(ctx, tasksv1.TaskStatus_TASK_STATUS_BLOCKED, reason)
		return true, nil
	}
	return false, nil
}

// confidence asks whether the task is clear enough: proceed, ask, or break it down.
func (r *run) confidence(ctx context.Context) error {
	j, c := r.job(), r.rec.Context
	mctx, cancel := r.modelCall(ctx)
	defer cancel()
	resp, err := r.e.c.AI.AssessConfidence(mctx, &aiv1.AssessConfidenceRequest{
		RequestId: r.key("confidence", shortHash(j.ClarificationAnswer)), Task: c.Task, ProjectTree: c.ProjectTree,
		ContextFiles: c.ContextFiles, Memories: c.Memories, Model: r.modelChoice(), Attribution: r.attribution(aiv1.CallPhase_CALL_PHASE_CONFIDENCE),
	})
	if err != nil {
		return err
	}
	r.spend(resp.Usage)
	switch resp.Decision {
	case aiv1.ConfidenceDecision_CONFIDENCE_DECISION_CLARIFY:
		q := strings.Join(resp.Questions, "\n")
		if q == "" {
			q = resp.Reasoning
		}
		j.ClarificationQuestion, j.ClarificationAnswer = q, ""
		r.emit(&agentv1.WatchJobResponse{Type: agentv1.JobEventType_JOB_EVENT_TYPE_CLARIFICATION_REQUESTED,
			Payload: &agentv1.WatchJobResponse_ClarificationRequested{ClarificationRequested: &agentv1.ClarificationRequested{Question: q}}})
		r.setStatus(waitingAnswer, "waiting for an answer: "+truncate(q, 500))
		return nil
	case aiv1.ConfidenceDecision_CONFIDENCE_DECISION_BREAK_DOWN:
		if len(resp.SuggestedSubtasks) > 0 {
			return r.split(ctx, "confidence", resp.SuggestedSubtasks, resp.Reasoning)
		}
	}
	r.thought("confidence %d%%: %s", resp.Confidence, truncate(resp.Reasoning, 300))
	r.setPhase(phaseComplex)
	return nil
}

// split replaces the task by subtasks (blocked-by links among them kept): the job ends
// COMPLETED pointing at them and the task is blocked on them.
func (r *run) split(ctx context.Context, why string, proposals []*aiv1.TaskProposal, reason string) error {
	j := r.job()
	req := &tasksv1.BatchCreateTasksRequest{RequestId: r.key("subtasks", why)}
	for i, p := range proposals {
		k := p.Key
		if k == "" {
			k = fmt.Sprintf("t%d", i+1)
		}
		req.Tasks = append(req.Tasks, &tasksv1.BatchTask{Key: k, BlockedByKeys: p.DependsOn, Task: &tasksv1.CreateTaskRequest{
			Title: truncate(p.Title, 200), Description: p.Description, Repo: j.Repo, ParentId: j.TaskId, Source: tasksv1.TaskSource_TASK_SOURCE_API,
		}})
	}
	start := time.Now()
	resp, err := r.e.c.Tasks.BatchCreateTasks(ctx, req)
	r.audit("subtasks_created", r.key("subtasks", why), map[string]any{"count": len(proposals), "why": why}, err, time.Since(start))
	if err != nil {
		return err
	}
	j.SubtaskIds = j.SubtaskIds[:0]
	for _, t := range resp.Tasks {
		j.SubtaskIds = append(j.SubtaskIds, t.Id)
	}
	r.emit(&agentv1.WatchJobResponse{Type: agentv1.JobEventType_JOB_EVENT_TYPE_SUBTASKS_CREATED,
		Payload: &agentv1.WatchJobResponse_SubtasksCreated{SubtasksCreated: &agentv1.SubtasksCreated{TaskIds: j.SubtaskIds}}})
	msg := fmt.Sprintf("broken down into %d subtasks: %s", len(j.SubtaskIds), truncate(reason, 500))
	r.cleanup(ctx, tasksv1.TaskStatus_TASK_STATUS_BLOCKED, msg)
	r.setStatus(completed, msg)
	return nil
}

// complexity rates the task and selects the model (unless the job names one).
func (r *run) complexity(ctx context.Context) error {
	j, c := r.job(), r.rec.Context
	mctx, cancel := r.modelCall(ctx)
	defer cancel()
	resp, err := r.e.c.AI.AssessComplexity(mctx, &aiv1.AssessComplexityRequest{
		RequestId: r.key("complexity"), Task: c.Task, ProjectTree: c.ProjectTree, ContextFiles: c.ContextFiles,
		Model: r.modelChoice(), Attribution: r.attribution(aiv1.CallPhase_CALL_PHASE_COMPLEXITY),
	})
	if err != nil {
		return err
	}
	r.spend(resp.Usage)
	j.Complexity = resp.Complexity
	if j.Model == "" && r.e.c.Models != nil {
		sel, err := r.e.c.Models.SelectModel(ctx, &aiv1.SelectModelRequest{Complexity: resp.Complexity, Tags: resp.Tags, BudgetMode: resp.BudgetMode})
		switch {
		case err == nil:
			j.Model = sel.GetModel().GetId()
			r.thought("complexity %d: model %s (%s)", j.Complexity, j.Model, truncate(sel.GetReason(), 200))
		case status.Code(err) == codes.NotFound || status.Code(err) == codes.FailedPrecondition:
			// No model fits: the ai service chooses per call.
			r.thought("complexity %d: no model in the registry fits; the ai service chooses per call", j.Complexity)
		default:
			return err
		}
	}
	if j.Attempt == 0 {
		j.Attempt = 1
	}
	r.setPhase(phasePlanning)
	return nil
}

// plan asks for a plan, or a revised one (after bad_plan, missing_context, feedback).
func (r *run) plan(ctx context.Context) error {
	j, st := r.job(), &r.rec.State
	if st.MoreContext {
		before := len(r.rec.Context.ContextFiles)
		if err := r.relevantFiles(ctx, st.ContextRequests); err != nil {
			return err
		}
		query := r.taskText()
		if d := j.LastDiagnosis; d != nil {
			query += "\n" + d.Reason
		}
		if err := r.memories(ctx, query); err != nil {
			return err
		}
		st.MoreContext, st.ContextRequests = false, nil
		r.thought("more context: %d files now (%d new)", len(r.rec.Context.ContextFiles), len(r.rec.Context.ContextFiles)-before)
	}
	req := proto.CloneOf(r.rec.Context)
	req.RequestId = r.key("plan", j.Attempt, j.PlanRevisions)
	req.Model, req.Attribution = r.modelChoice(), r.attribution(aiv1.CallPhase_CALL_PHASE_PLANNING)
	start := time.Now()
	mctx, cancel := r.modelCall(ctx)
	defer cancel()
	resp, err := r.e.c.AI.PlanTask(mctx, req)
	if err != nil {
		return err
	}
	r.spend(resp.Usage)
	if len(resp.GetPlan().GetSteps()) == 0 {
		return status.Error(codes.FailedPrecondition, "the plan has no steps")
	}
	typ := agentv1.JobEventType_JOB_EVENT_TYPE_PLAN_CREATED
	if j.Plan != nil {
		typ = agentv1.JobEventType_JOB_EVENT_TYPE_PLAN_REVISED
	}
	j.Plan = resp.Plan
	r.rec.Context.PreviousPlan = nil
	r.emit(&agentv1.WatchJobResponse{Type: typ, Payload: &agentv1.WatchJobResponse_Plan{Plan: &agentv1.JobPlanChange{Revision: j.PlanRevisions, Plan: j.Plan}}})
	r.audit("plan_created", r.key("plan", j.Attempt, j.PlanRevisions), map[string]any{"steps": len(j.Plan.Steps), "summary": truncate(j.Plan.Summary, 500),
		"revision": j.PlanRevisions, "attempt": j.Attempt}, nil, time.Since(start))
	r.setPhase(phaseSandbox)
	return nil
}

// sandbox waits out an environment_error's backoff, then creates the attempt's sandbox
// from the repository's base branch (the previous attempt's is destroyed).
func (r *run) sandbox(ctx context.Context) error {
	j, st := r.job(), &r.rec.State
	if d := time.Until(st.BackoffUntil); d > 0 {
		if err := wait.Sleep(ctx, d); err != nil {
			return err
		}
	}
	k := r.key("sandbox", j.Attempt)
	if j.SandboxId != "" {
		if _, err := r.e.c.Sandbox.DestroySandbox(ctx, &sandboxv1.DestroySandboxRequest{Id: j.SandboxId}); err != nil && status.Code(err) != codes.NotFound {
			return err
		}
		j.SandboxId = ""
	}
	start := time.Now()
	sctx, cancel := r.modelCall(ctx) // a checkout of a large repository takes a while
	defer cancel()
	resp, err := r.e.c.Sandbox.CreateSandbox(sctx, &sandboxv1.CreateSandboxRequest{RequestId: k, Repo: j.Repo, Ref: j.BaseBranch, JobId: j.Id,
		Ttl: durationpb.New(r.e.cfg.SandboxTTL)})
	r.audit("sandbox_created", k, map[string]any{"sandbox_id": resp.GetSandbox().GetId(), "attempt": j.Attempt}, err, time.Since(start))
	if err != nil {
		return err
	}
	j.SandboxId, j.BuildId = resp.GetSandbox().GetId(), ""
	// What the sandbox service says of the isolation it gave (another backend than the
	// default, a protection that did not apply) goes into the job's history.
	for _, w := range resp.GetWarnings() {
		r.emit(&agentv1.WatchJobResponse{Type: agentv1.JobEventType_JOB_EVENT_TYPE_THOUGHT,
			Payload: &agentv1.WatchJobResponse_Thought{Thought: &agentv1.JobThought{Text: "sandbox " + resp.GetSandbox().GetBackend().String() + ": " + w}}})
	}
	r.setPhase(phaseBuilding)
	return nil
}

// buildContext is what the build is told beside the plan: feedback, the last diagnosis,
// the human's guidance.
func (r *run) buildContext() string {
	var b strings.Builder
	if f := r.rec.Context.Feedback; f != "" {
		b.WriteString("Feedback and guidance from the reviewer (act on it):\n" + f + "\n\n")
	}
	if d := r.job().LastDiagnosis; d != nil {
		fmt.Fprintf(&b, "The previous attempt (%d) failed. Diagnosis (%s): %s\n", d.Attempt,
			strings.ToLower(strings.TrimPrefix(d.Category.String(), "DIAGNOSIS_CATEGORY_")), d.Reason)
		if atts := r.rec.Context.PreviousAttempts; len(atts) > 0 {
			b.WriteString("Its errors:\n" + diagnosticsText(atts[len(atts)-1].Errors, 20) + "\n")
		}
	}
	return b.String()
}

// build starts the attempt's build and follows it to its end, relaying its progress.
func (r *run) build(ctx context.Context) error {
	j := r.job()
	if j.BuildId == "" {
		k := r.key("build", j.Attempt)
		var hints []string
		for _, m := range r.rec.Context.Memories {
			hints = append(hints, truncate(m.Content, 4000))
		}
		start := time.Now()
		resp, err := r.e.c.Builder.StartBuild(ctx, &builderv1.StartBuildRequest{RequestId: k, JobId: j.Id, TaskId: j.TaskId, SandboxId: j.SandboxId,
			Repo: j.Repo, Plan: j.Plan, Model: j.Model, AdditionalContext: truncate(r.buildContext(), 60000), MemoryHints: hints[:min(len(hints), 50)],
			Budget: r.remaining()})
		r.audit("build_started", k, map[string]any{"build_id": resp.GetBuild().GetId(), "attempt": j.Attempt}, err, time.Since(start))
		if err != nil {
			return err
		}
		j.BuildId = resp.GetBuild().GetId()
		// Checkpoint now: a resumed job follows this build instead of starting another.
		if err := r.save(ctx); err != nil {
			return err
		}
	}
	stream, err := r.e.c.Builder.WatchBuild(ctx, &builderv1.WatchBuildRequest{Id: j.BuildId})
	if err != nil {
		return err
	}
	for {
		ev, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if s := ev.GetStep(); s != nil && ev.Type == builderv1.BuildEventType_BUILD_EVENT_TYPE_STEP_STARTED {
			b := ev.GetStep()
			r.emit(&agentv1.WatchJobResponse{Type: agentv1.JobEventType_JOB_EVENT_TYPE_PROGRESS, Payload: &agentv1.WatchJobResponse_Progress{Progress: &agentv1.JobProgress{
				BuildPhase: b.Phase, CurrentStep: b.StepNumber, TotalSteps: int32(len(j.Plan.GetSteps())), FilePath: b.Path,
			}}})
			if err := r.save(ctx); err != nil {
				return err
			}
		}
		if ev.GetStatusChange() != nil && isBuildEnd(ev.GetStatusChange().Status) {
			break
		}
	}
	r.setPhase(phaseValidate)
	return nil
}

// remaining is what is left of the job's budget, the cap of its next build (a build
// that would spend more fails, and the job stops on its budget at its next step).
func (r *run) remaining() *typev1.Budget {
	j := r.job()
	b := j.GetBudget()
	out := &typev1.Budget{}
	if b.GetMaxTokens() > 0 {
		out.MaxTokens = max(b.GetMaxTokens()-usage.Tokens(j.Usage), 1)
	}
	if b.GetMaxCostMicros() > 0 {
		out.MaxCostMicros = max(b.GetMaxCostMicros()-j.Usage.GetCostMicros(), 1)
	}
	if w := b.GetMaxWallTime().AsDuration(); w > 0 {
		out.MaxWallTime = durationpb.New(max(w-r.rec.State.Active-time.Since(r.since), time.Second))
	}
	return out
}

func isBuildEnd(s builderv1.BuildStatus) bool {
	switch s {
	case builderv1.BuildStatus_BUILD_STATUS_COMPLETED, builderv1.BuildStatus_BUILD_STATUS_FAILED, builderv1.BuildStatus_BUILD_STATUS_CANCELLED:
		return true
	}
	return false
}

// validate judges the finished build, then runs the post-run skills on the changed files:
// a pass goes to review, a failure to diagnosis with its errors.
func (r *run) validate(ctx context.Context) error {
	j, st := r.job(), &r.rec.State
	resp, err := r.e.c.Builder.GetBuild(ctx, &builderv1.GetBuildRequest{Id: j.BuildId})
	if err != nil {
		return err
	}
	b := resp.GetBuild()
	if !isBuildEnd(b.Status) {
		// Resumed before the build ended: follow it again.
		r.setPhase(phaseBuilding)
		return nil
	}
	// The build's usage is the job's too (counted once: this step writes it).
	r.step.Metrics = append(r.step.Metrics, store.Metric{Phase: phaseBuilding, Usage: b.Usage})
	j.Usage = usage.Add(j.Usage, b.Usage)
	rep := b.GetReport()
	var changed []string
	for _, f := range rep.GetFilesChanged() {
		changed = append(changed, f.Path)
	}
	diags := slices.Clone(rep.GetDiagnostics())
	for _, f := range b.Files {
		if f.Status == builderv1.BuildFileStatus_BUILD_FILE_STATUS_FAILED {
			diags = append(diags, f.Diagnostics...)
		}
	}
	ok := b.Status == builderv1.BuildStatus_BUILD_STATUS_COMPLETED && rep.GetValidationPassed() && len(rep.GetFailedPaths()) == 0
	summary := fmt.Sprintf("build %s: %s", strings.ToLower(strings.TrimPrefix(b.Status.String(), "BUILD_STATUS_")), truncate(rep.GetSummary(), 500))
	errText := b.Error
	if errText == "" {
		errText = truncate(rep.GetValidationOutput(), 8000)
	}
	if ok && r.e.c.Skills != nil && len(changed) > 0 {
		post, err := r.postRun(ctx, changed)
		if err != nil {
			return err
		}
		if !post.Passed {
			ok, summary = false, "post-run skills found blocking problems"
			diags, errText = post.Diagnostics, diagnosticsText(post.Diagnostics, 30)
		}
	}
	if ok {
		st.ChangedFiles = changed
		st.BuildSteps = st.BuildSteps[:0]
		for _, s := range j.Plan.GetSteps() {
			st.BuildSteps = append(st.BuildSteps, learn.PlanStepSummary(s))
		}
		r.thought("attempt %d validated: %d files changed", j.Attempt, len(changed))
		r.setPhase(phaseReviewing)
		return nil
	}
	if len(diags) > 30 {
		diags = diags[:30]
	}
	r.rec.Context.PreviousAttempts = append(r.rec.Context.PreviousAttempts, &aiv1.AttemptRecord{
		Attempt: j.Attempt, Summary: summary, Errors: diags, Error: errText,
	})
	st.Fingerprints = append(st.Fingerprints, learn.Fingerprint(diags, changed))
	r.thought("attempt %d failed: %s", j.Attempt, truncate(summary, 300))
	r.setPhase(phaseDiagnose)
	return nil
}

// postRun runs the post-run skills on the changed files (read from the sandbox).
func (r *run) postRun(ctx context.Context, changed []string) (*skillsv1.ExecutePostRunResponse, error) {
	j := r.job()
	var files []*skillsv1.File
	for _, p := range changed {
		f, err := r.e.c.Sandbox.ReadFile(ctx, &sandboxv1.ReadFileRequest{SandboxId: j.SandboxId, Path: p})
		if status.Code(err) == codes.NotFound {
			continue // deleted
		}
		if err != nil {
			return nil, err
		}
		if bytes.IndexByte(f.Content, 0) >= 0 || !utf8.Valid(f.Content) {
			continue // binary: the skills check text
		}
		files = append(files, &skillsv1.File{Path: p, Content: string(f.Content)})
	}
	post, err := r.e.c.Skills.ExecutePostRun(ctx, &skillsv1.ExecutePostRunRequest{
		Context: &skillsv1.TaskContext{Description: truncate(r.taskText(), 16000), Repo: j.Repo, FilePaths: changed}, Files: files, JobId: j.Id,
	})
	if err != nil {
		return nil, err
	}
	r.spend(post.Usage)
	r.rec.State.PostRunSkillIDs = post.SkillIds
	return post, nil
}

// nextAttempt starts the next attempt of the current run.
func (r *run) nextAttempt() {
	r.job().Attempt++
	r.job().BuildId = ""
}

// diagnose asks why the attempt failed and acts on the category.
func (r *run) diagnose(ctx context.Context) error {
	j, c, st := r.job(), r.rec.Context, &r.rec.State
	last := c.PreviousAttempts[len(c.PreviousAttempts)-1]
	mctx, cancel := r.modelCall(ctx)
	defer cancel()
	resp, err := r.e.c.AI.DiagnoseFailure(mctx, &aiv1.DiagnoseFailureRequest{
		RequestId: r.key("diagnose", j.Attempt), Task: c.Task, Plan: j.Plan, Errors: last.Errors, ErrorOutput: last.Error,
		Attempts: c.PreviousAttempts, Files: c.ContextFiles, Model: r.modelChoice(), Attribution: r.attribution(aiv1.CallPhase_CALL_PHASE_DIAGNOSIS),
	})
	if err != nil {
		return err
	}
	r.spend(resp.Usage)
	last.Category, last.Diagnosis = resp.Category, resp.Reason
	st.Failures++
	st.Attempts++
	d := &agentv1.Diagnosis{Category: agentv1.DiagnosisCategory(resp.Category), Reason: resp.Reason, Attempt: j.Attempt, CreateTime: timestamppb.Now()}
	j.LastDiagnosis = d
	stalled := learn.Stalled(st.Fingerprints)
	switch {
	case resp.Category == aiv1.FailureCategory_FAILURE_CATEGORY_IMPOSSIBLE_TASK:
		d.Recovery = "escalated: the task cannot be done as asked"
		r.human("impossible task: " + resp.Reason)
		r.cleanup(ctx, tasksv1.TaskStatus_TASK_STATUS_BLOCKED, "impossible task: "+resp.Reason)
	case stalled || st.Failures >= r.e.cfg.InterveneAfter || int(j.Attempt) >= r.e.cfg.MaxAttempts:
		why := fmt.Sprintf("%d failed attempts", st.Failures)
		if stalled {
			why = "no progress: two attempts in a row failed the same way"
		} else if int(j.Attempt) >= r.e.cfg.MaxAttempts {
			why = fmt.Sprintf("all %d attempts spent", r.e.cfg.MaxAttempts)
		}
		if !st.Intervened {
			d.Recovery = why + "; intervening"
			r.setPhase(phaseIntervene)
		} else {
			d.Recovery = why + "; escalated"
			r.human(why + ": " + resp.Reason)
		}
	default:
		d.Recovery = r.recover(ctx, resp)
	}
	r.emit(&agentv1.WatchJobResponse{Type: agentv1.JobEventType_JOB_EVENT_TYPE_DIAGNOSED, Payload: &agentv1.WatchJobResponse_Diagnosis{Diagnosis: d}})
	r.audit("diagnosed", r.key("diagnose", j.Attempt), map[string]any{"category": d.Category.String(), "reason": truncate(d.Reason, 1000),
		"recovery": d.Recovery, "attempt": d.Attempt}, nil, 0)
	return nil
}

// recover sets up the next attempt for a recoverable diagnosis and says what it does.
func (r *run) recover(ctx context.Context, resp *aiv1.DiagnoseFailureResponse) string {
	j, st := r.job(), &r.rec.State
	switch resp.Category {
	case aiv1.FailureCategory_FAILURE_CATEGORY_BAD_PLAN:
		if int(j.PlanRevisions) < r.e.cfg.MaxPlanRevisions {
			j.PlanRevisions++
			r.rec.Context.PreviousPlan = j.Plan
			r.nextAttempt()
			r.setPhase(phasePlanning)
			return fmt.Sprintf("revising plan (revision %d of %d)", j.PlanRevisions, r.e.cfg.MaxPlanRevisions)
		}
	case aiv1.FailureCategory_FAILURE_CATEGORY_MISSING_CONTEXT:
		st.RelevantFiles = max(st.RelevantFiles, r.e.cfg.ContextFiles) + 10
		// More context is gathered at the next planning (relevantFiles with the requests).
		st.MoreContext, st.ContextRequests = true, resp.ContextRequests
		r.nextAttempt()
		r.setPhase(phasePlanning)
		return fmt.Sprintf("fetching more context (%d files, %d named) and planning again", st.RelevantFiles, len(resp.ContextRequests))
	case aiv1.FailureCategory_FAILURE_CATEGORY_ENVIRONMENT_ERROR:
		wait := max(r.e.cfg.Backoff, resp.GetRetryAfter().AsDuration())
		st.BackoffUntil = time.Now().Add(wait)
		r.nextAttempt()
		r.setPhase(phaseSandbox)
		return fmt.Sprintf("environment error: backing off %s, then retrying in a new sandbox", wait)
	}
	r.nextAttempt()
	r.setPhase(phaseSandbox)
	return fmt.Sprintf("fixing: attempt %d rebuilds with the diagnosis", j.Attempt)
}

// intervene asks what to do after repeated failures: rewrite the task (attempts start
// again, once), split it, or give up to a human.
func (r *run) intervene(ctx context.Context) error {
	j, c, st := r.job(), r.rec.Context, &r.rec.State
	mctx, cancel := r.modelCall(ctx)
	defer cancel()
	resp, err := r.e.c.AI.Intervene(mctx, &aiv1.InterveneRequest{RequestId: r.key("intervene", j.Attempt), Task: c.Task, Attempts: c.PreviousAttempts,
		LastPlan: j.Plan, Model: r.modelChoice(), Attribution: r.attribution(aiv1.CallPhase_CALL_PHASE_INTERVENTION)})
	if err != nil {
		return err
	}
	r.spend(resp.Usage)
	st.Intervened = true
	action := agentv1.InterventionAction(resp.Action)
	defer func() {
		r.emit(&agentv1.WatchJobResponse{Type: agentv1.JobEventType_JOB_EVENT_TYPE_INTERVENED,
			Payload: &agentv1.WatchJobResponse_Intervention{Intervention: &agentv1.JobIntervention{Action: action, Reason: resp.Reason}}})
	}()
	r.audit("intervened", r.key("intervene", j.Attempt), map[string]any{"action": action.String(), "reason": truncate(resp.Reason, 1000)}, nil, 0)
	switch resp.Action {
	case aiv1.InterventionAction_INTERVENTION_ACTION_REWRITE_TASK:
		if st.Rewrites == 0 && (resp.NewTitle != "" || resp.NewDescription != "") {
			st.Rewrites++
			if resp.NewTitle != "" {
				c.Task.Title = resp.NewTitle
			}
			if resp.NewDescription != "" {
				c.Task.Description = resp.NewDescription
			}
			r.restart()
			r.thought("task rewritten: %s", truncate(resp.Reason, 300))
			r.setPhase(phasePlanning)
			return nil
		}
		action = agentv1.InterventionAction_INTERVENTION_ACTION_ESCALATE
		r.human("intervention: the task was rewritten once already and still fails: " + resp.Reason)
	case aiv1.InterventionAction_INTERVENTION_ACTION_SPLIT_TASK:
		if len(resp.Subtasks) > 0 {
			return r.split(ctx, "intervention", resp.Subtasks, resp.Reason)
		}
		action = agentv1.InterventionAction_INTERVENTION_ACTION_ESCALATE
		r.human("intervention wanted to split the task but proposed no subtasks: " + resp.Reason)
	default:
		r.human("intervention gave up: " + resp.Reason)
	}
	return nil
}

// restart begins a new run of attempts (a rewrite, a human's guidance, review feedback):
// new idempotency keys, counters back to the start, the last plan kept to revise.
func (r *run) restart() { Restart(r.rec) }

// Restart begins a new run of attempts on rec (see run.restart); the service calls it for
// ResumeJob and RequestChanges.
func Restart(rec *store.Record) {
	j, st := rec.Job, &rec.State
	st.Generation++
	st.Failures, st.Fingerprints, st.Intervened, st.BackoffUntil = 0, nil, false, time.Time{}
	j.Attempt, j.PlanRevisions, j.BuildId = 1, 0, ""
	if j.Plan != nil {
		rec.Context.PreviousPlan = j.Plan
	}
}

// review asks for the code review and stops at the review gate (a project's job ends
// here instead: the project reviews all its tasks at once).
func (r *run) review(ctx context.Context) error {
	j, st := r.job(), &r.rec.State
	diff, err := r.e.c.Sandbox.Diff(ctx, &sandboxv1.DiffRequest{Id: j.SandboxId})
	if err != nil {
		return err
	}
	var files []*agentv1.ReviewFile
	var aiFiles []*aiv1.ReviewFile
	for _, f := range diff.Files {
		rf := &agentv1.ReviewFile{Diff: f}
		if f.Action != typev1.FileAction_FILE_ACTION_DELETE && !f.Binary {
			c, err := r.e.c.Sandbox.ReadFile(ctx, &sandboxv1.ReadFileRequest{SandboxId: j.SandboxId, Path: f.Path})
			if err != nil {
				return err
			}
			rf.Content = string(c.Content)
		}
		files = append(files, rf)
		aiFiles = append(aiFiles, &aiv1.ReviewFile{Path: f.Path, Action: f.Action, Content: rf.Content, Diff: f.UnifiedDiff})
	}
	mctx, cancel := r.modelCall(ctx)
	defer cancel()
	rc, err := r.e.c.AI.ReviewCode(mctx, &aiv1.ReviewCodeRequest{RequestId: r.key("review", j.Attempt), Task: r.rec.Context.Task, Files: aiFiles,
		ValidationSummary: fmt.Sprintf("The build validated (attempt %d); %d files changed.", j.Attempt, len(files)),
		Model:             r.modelChoice(), Attribution: r.attribution(aiv1.CallPhase_CALL_PHASE_REVIEW)})
	if err != nil {
		return err
	}
	r.spend(rc.Usage)
	st.Quality, st.ReviewMemories = rc.QualityScore, rc.MemoriesExtracted
	if j.ProjectId != "" {
		r.setStatus(completed, "validated for the project's review")
		return nil
	}
	if _, err := r.e.c.Sandbox.KeepAliveSandbox(ctx, &sandboxv1.KeepAliveSandboxRequest{Id: j.SandboxId, Pin: true}); err != nil {
		return err
	}
	if _, err := r.e.c.Tasks.SetTaskStatus(ctx, &tasksv1.SetTaskStatusRequest{Id: j.TaskId, Status: tasksv1.TaskStatus_TASK_STATUS_IN_REVIEW}); err != nil {
		return err
	}
	rev := &agentv1.Review{Id: uuid.NewString(), QualityScore: rc.QualityScore, Concerns: rc.Concerns, Documentation: rc.Documentation,
		Files: files, Stats: diff.Stats, PreviousReviewId: st.PreviousReview}
	r.step.Review, r.step.ReviewKey = rev, r.key("review", j.Attempt)
	j.ReviewId = rev.Id
	r.emit(&agentv1.WatchJobResponse{Type: agentv1.JobEventType_JOB_EVENT_TYPE_REVIEW_SUBMITTED,
		Payload: &agentv1.WatchJobResponse_ReviewSubmitted{ReviewSubmitted: &agentv1.ReviewSubmitted{ReviewId: rev.Id, QualityScore: rc.QualityScore}}})
	r.audit("review_submitted", r.key("review", j.Attempt), map[string]any{"review_id": rev.Id, "quality_score": rc.QualityScore, "files": len(files)}, nil, 0)
	r.setStatus(pendingReview, fmt.Sprintf("review %s waits for a decision (quality %d/10)", rev.Id, rc.QualityScore))
	return nil
}

// diagnosticsText is up to n diagnostics, one per line.
func diagnosticsText(ds []*typev1.Diagnostic, n int) string {
	var b strings.Builder
	for i, d := range ds {
		if i == n {
			fmt.Fprintf(&b, "… and %d more\n", len(ds)-n)
			break
		}
		loc := d.Path
		if d.Line > 0 {
			loc = fmt.Sprintf("%s:%d", d.Path, d.Line)
		}
		if loc != "" {
			loc += ": "
		}
		fmt.Fprintf(&b, "%s%s", loc, d.Message)
		if d.Rule != "" {
			fmt.Fprintf(&b, " (%s)", d.Rule)
		}
		b.WriteByte('\n')
	}
	return strings.TrimSpace(b.String())
}
