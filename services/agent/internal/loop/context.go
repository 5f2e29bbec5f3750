package loop

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/agent/internal/learn"
)

// The context phase: the task, the repository, memories, strategy hints and skills.

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
	if err := r.withoutMemory(ctx, r.recall(ctx), "memories and strategy hints"); err != nil {
		return err
	}
	if r.e.c.Skills != nil {
		if stop, err := r.skills(ctx); err != nil || stop {
			return err
		}
	}
	r.setPhase(phaseConfident)
	return nil
}

// withoutMemory lets a job go on when a call to memory failed — memory is context and
// learning, never a precondition (seed 002: the strategy lookup must never block
// planning): whatever the failure (down, its circuit breaker open, a refusal), the job
// notes what it goes without and continues. Only the job's own end (ctx) stops it.
func (r *run) withoutMemory(ctx context.Context, err error, without string) error {
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return err
	}
	r.thought("memory unavailable (%s): going on without %s", status.Convert(err).Message(), without)
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
