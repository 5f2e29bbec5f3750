package loop

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/agent/internal/learn"
	"github.com/thefold/thefold/services/agent/internal/store"
)

// completion's side effects in order; each is made once (State.Done) and checkpointed.
var completion = []struct {
	name string
	do   func(r *run, ctx context.Context, rev *agentv1.Review) error
}{
	{"branch", (*run).createBranch},
	{"commit", (*run).commit},
	{"pull_request", (*run).pullRequest},
	{"task", (*run).finishTask},
	{"memories", func(r *run, ctx context.Context, rev *agentv1.Review) error {
		return r.withoutMemory(ctx, r.remember(ctx, rev), "remembering what this job learned")
	}},
	{"skills", (*run).logSkills},
}

// complete carries an approved review to a pull request: branch, one commit, the pull
// request, the task done, memories (and a strategy when it earned one), skill results,
// the sandbox destroyed. Every effect is keyed and checkpointed, so a job resumed midway
// makes none twice.
func (r *run) complete(ctx context.Context) error {
	j, st := r.job(), &r.rec.State
	rev, err := r.e.store.GetReview(ctx, j.OwnerId, j.ReviewId)
	if err != nil {
		return err
	}
	if st.Done == nil {
		st.Done = map[string]bool{}
	}
	for _, c := range completion {
		if st.Done[c.name] {
			continue
		}
		if err := c.do(r, ctx, rev); err != nil {
			return err
		}
		st.Done[c.name] = true
		if err := r.save(ctx); err != nil {
			return err
		}
	}
	r.cleanup(ctx, tasksv1.TaskStatus_TASK_STATUS_UNSPECIFIED, "")
	j.SandboxId = ""
	if continuesPullRequest(j) {
		r.setStatus(completed, fmt.Sprintf("pull request %s updated (%s)", j.GetPullRequest().GetUrl(), shortSHA(r.rec.State.CommitSHA)))
		return nil
	}
	r.setStatus(completed, fmt.Sprintf("pull request %s opened", j.GetPullRequest().GetUrl()))
	return nil
}

var nonSlug = regexp.MustCompile(`[^a-z0-9]+`)

// branchName is the job's branch: thefold/<task slug>-<job id prefix>.
func branchName(title, jobID string) string {
	slug := strings.Trim(nonSlug.ReplaceAllString(strings.ToLower(title), "-"), "-")
	if len(slug) > 40 {
		slug = strings.Trim(slug[:40], "-")
	}
	if slug == "" {
		slug = "task"
	}
	return "thefold/" + slug + "-" + jobID[:8]
}

func (r *run) createBranch(ctx context.Context, _ *agentv1.Review) error {
	j := r.job()
	if j.Branch == "" {
		j.Branch = branchName(r.rec.Context.Task.GetTitle(), j.Id)
	}
	from := j.BaseBranch
	if j.Crew && r.rec.State.BaseCommit != "" {
		// A crew worker's branch starts where its work did; the crew brings its pull request
		// up to date with a base that moved since (and checks it again).
		from = r.rec.State.BaseCommit
	}
	start := time.Now()
	_, err := r.e.c.Repos.CreateBranch(ctx, &githubv1.CreateBranchRequest{Repo: j.Repo, Branch: j.Branch, FromRef: from})
	if status.Code(err) == codes.AlreadyExists {
		err = nil // made before a crash, or the open pull request's branch a fix continues
	}
	r.audit("branch_created", r.key("branch"), map[string]any{"branch": j.Branch, "from": from}, err, time.Since(start))
	return err
}

func (r *run) commit(ctx context.Context, rev *agentv1.Review) error {
	j := r.job()
	var files []*typev1.FileChange
	for _, f := range rev.Files {
		fc := &typev1.FileChange{Path: f.Diff.GetPath(), Action: f.Diff.GetAction(), Content: f.Content}
		if fc.Action == typev1.FileAction_FILE_ACTION_DELETE {
			fc.Content = ""
		}
		files = append(files, fc)
	}
	if len(files) == 0 {
		return status.Error(codes.FailedPrecondition, "the approved review changes no files")
	}
	title := r.rec.Context.Task.GetTitle()
	msg := "thefold: " + title
	if s := j.GetPlan().GetSummary(); s != "" {
		msg += "\n\n" + s
	}
	msg += "\n\nJob: " + j.Id + "\nTask: " + j.TaskId
	start := time.Now()
	resp, err := r.e.c.Repos.CommitFiles(ctx, &githubv1.CommitFilesRequest{Repo: j.Repo, Branch: j.Branch, Message: msg, Files: files,
		RequestId: r.key("commit"), AuthorName: "TheFold", AuthorEmail: "thefold@localhost"})
	r.audit("commit_created", r.key("commit"), map[string]any{"branch": j.Branch, "files": len(files), "commit": resp.GetCommitSha()}, err, time.Since(start))
	if err != nil {
		return err
	}
	r.rec.State.CommitSHA = resp.GetCommitSha()
	return nil
}

func (r *run) pullRequest(ctx context.Context, rev *agentv1.Review) error {
	j := r.job()
	body := rev.Documentation
	if body == "" {
		body = j.GetPlan().GetSummary()
	}
	if j.IssueNumber > 0 {
		body += fmt.Sprintf("\n\nCloses #%d", j.IssueNumber)
	}
	body += fmt.Sprintf("\n\n---\nOpened by TheFold (job %s, task %s). Review quality %d/10.", j.Id, j.TaskId, rev.QualityScore)
	if continuesPullRequest(j) {
		// A fix of an open pull request: the commit is on its branch; say what changed there.
		start := time.Now()
		_, err := r.e.c.Repos.CommentOnIssue(ctx, &githubv1.CommentOnIssueRequest{Repo: j.Repo, Number: j.PullRequest.GetNumber(), RequestId: r.key("pull_request"),
			Body: pushedComment(j, r.rec.State.CommitSHA, rev)})
		r.audit("pull_request_updated", r.key("pull_request"), map[string]any{"number": j.PullRequest.GetNumber(), "commit": r.rec.State.CommitSHA}, err, time.Since(start))
		if err != nil {
			return err
		}
		rev.PullRequest = j.PullRequest
		r.step.After = func(ctx context.Context, tx pgx.Tx) error { return store.UpdateReview(ctx, tx, rev) }
		return nil
	}
	start := time.Now()
	resp, err := r.e.c.Repos.CreatePullRequest(ctx, &githubv1.CreatePullRequestRequest{Repo: j.Repo, Head: j.Branch, Base: j.BaseBranch,
		Title: truncate(r.rec.Context.Task.GetTitle(), 250), Body: body, RequestId: r.key("pull_request")})
	pr := resp.GetPullRequest()
	r.audit("pull_request_opened", r.key("pull_request"), map[string]any{"number": pr.GetNumber(), "url": pr.GetUrl(), "head": j.Branch}, err, time.Since(start))
	if err != nil {
		return err
	}
	j.PullRequest = &typev1.PullRequestRef{Repo: j.Repo, Number: pr.GetNumber(), Url: pr.GetUrl()}
	rev.PullRequest = j.PullRequest
	r.step.After = func(ctx context.Context, tx pgx.Tx) error { return store.UpdateReview(ctx, tx, rev) }
	r.emit(&agentv1.WatchJobResponse{Type: agentv1.JobEventType_JOB_EVENT_TYPE_PULL_REQUEST_OPENED,
		Payload: &agentv1.WatchJobResponse_PullRequest{PullRequest: j.PullRequest}})
	return nil
}

// pushedComment is the reply on a pull request a job pushed a commit to: what changed, file
// by file, and why.
func pushedComment(j *agentv1.Job, sha string, rev *agentv1.Review) string {
	var b strings.Builder
	fmt.Fprintf(&b, "TheFold pushed %s to this branch (job %s, review quality %d/10)", shortSHA(sha), j.Id, rev.QualityScore)
	if revises(j) {
		b.WriteString(" in answer to the changes asked for here")
	}
	b.WriteString(":\n")
	for _, f := range rev.Files {
		d := f.GetDiff()
		fmt.Fprintf(&b, "\n- `%s` %s (+%d −%d)", d.GetPath(), strings.ToLower(strings.TrimPrefix(d.GetAction().String(), "FILE_ACTION_")), d.GetAdditions(), d.GetDeletions())
	}
	if rev.Documentation != "" {
		b.WriteString("\n\n" + rev.Documentation)
	}
	return b.String()
}

func (r *run) finishTask(ctx context.Context, _ *agentv1.Review) error {
	j := r.job()
	if _, err := r.e.c.Tasks.UpdateTask(ctx, &tasksv1.UpdateTaskRequest{Id: j.TaskId, Task: &tasksv1.Task{PullRequest: j.PullRequest},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"pull_request"}}}); err != nil {
		return err
	}
	if revises(j) {
		// Done when its reviewers approve the pull request or a person merges it (the
		// repository's events say so).
		_, err := r.e.c.Tasks.SetTaskStatus(ctx, &tasksv1.SetTaskStatusRequest{Id: j.TaskId, Status: tasksv1.TaskStatus_TASK_STATUS_IN_REVIEW,
			Reason: "pull request " + j.GetPullRequest().GetUrl() + " updated for its reviewers"})
		r.audit("task_status_changed", r.key("task_in_review"), map[string]any{"status": "in_review"}, err, 0)
		return err
	}
	if j.Crew {
		// A crew's task is done when its pull request merges (the crew says so then).
		_, err := r.e.c.Tasks.SetTaskStatus(ctx, &tasksv1.SetTaskStatusRequest{Id: j.TaskId, Status: tasksv1.TaskStatus_TASK_STATUS_IN_REVIEW,
			Reason: "pull request " + j.GetPullRequest().GetUrl() + " waits for its checks and merge"})
		r.audit("task_status_changed", r.key("task_in_review"), map[string]any{"status": "in_review"}, err, 0)
		return err
	}
	_, err := r.e.c.Tasks.SetTaskStatus(ctx, &tasksv1.SetTaskStatusRequest{Id: j.TaskId, Status: tasksv1.TaskStatus_TASK_STATUS_DONE,
		Reason: "pull request " + j.GetPullRequest().GetUrl()})
	r.audit("task_status_changed", r.key("task_done"), map[string]any{"status": "done"}, err, 0)
	return err
}

// remember stores what the job learned: the decision, the error patterns it got past,
// what the review found worth keeping, and — when the job succeeded on its first attempt
// with a good review — the strategy.
func (r *run) remember(ctx context.Context, rev *agentv1.Review) error {
	j, c, st := r.job(), r.rec.Context, &r.rec.State
	title := c.Task.GetTitle()
	store1 := func(k string, typ typev1.MemoryType, content string, tags []string) error {
		start := time.Now()
		resp, err := r.e.c.Memory.StoreMemory(ctx, &memoryv1.StoreMemoryRequest{Content: content, Repo: j.Repo, Type: typ, Tags: tags,
			SourceTaskId: j.TaskId, SourceJobId: j.Id, RequestId: r.key("memory", k)})
		r.audit("memory_stored", r.key("memory", k), map[string]any{"type": typ.String(), "memory_id": resp.GetMemory().GetId()}, err, time.Since(start))
		return err
	}
	decision := fmt.Sprintf("Task %q in %s was done by: %s (%d files changed; review quality %d/10).", title, j.Repo,
		j.GetPlan().GetSummary(), len(rev.Files), rev.QualityScore)
	if err := store1("decision", typev1.MemoryType_MEMORY_TYPE_DECISION, decision, []string{"decision"}); err != nil {
		return err
	}
	for i, a := range c.PreviousAttempts {
		if a.Diagnosis == "" {
			continue
		}
		content := fmt.Sprintf("Error pattern while doing %q: %s\nErrors: %s\nWhat fixed it: the next attempt, after diagnosis %q.",
			title, a.Summary, truncate(diagnosticsText(a.Errors, 5), 2000), truncate(a.Diagnosis, 1000))
		if err := store1(fmt.Sprintf("error%d", i), typev1.MemoryType_MEMORY_TYPE_ERROR_PATTERN, content, []string{"error-pattern"}); err != nil {
			return err
		}
	}
	for i, m := range st.ReviewMemories {
		if err := store1(fmt.Sprintf("review%d", i), typev1.MemoryType_MEMORY_TYPE_CODE_PATTERN, truncate(m, 4000), []string{"code-review"}); err != nil {
			return err
		}
	}
	var outcomes []learn.StepOutcome
	for _, s := range st.BuildSteps {
		outcomes = append(outcomes, learn.StepOutcome{Summary: s})
	}
	steps := learn.ExtractSuccessfulSteps(outcomes)
	if learn.WorthRemembering(st.Attempts+1, float64(rev.QualityScore), steps) {
		pattern := learn.DetectTaskPattern(title + " " + c.Task.GetDescription())
		content := "Task: " + title + "\n" + learn.StrategyContent(pattern, steps)
		if err := store1("strategy", typev1.MemoryType_MEMORY_TYPE_STRATEGY, content, []string{"strategy", pattern}); err != nil {
			return err
		}
		r.thought("strategy remembered for %q tasks", pattern)
	}
	return nil
}

func (r *run) logSkills(ctx context.Context, rev *agentv1.Review) error {
	j, st := r.job(), &r.rec.State
	ids := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(st.InjectSkillIDs), st.PostRunSkillIDs...))))
	if r.e.c.Skills == nil || len(ids) == 0 {
		return nil
	}
	_, err := r.e.c.Skills.LogResult(ctx, &skillsv1.LogResultRequest{SkillIds: ids, JobId: j.Id, TaskId: j.TaskId, Success: true, QualityScore: rev.QualityScore})
	r.audit("skills_result_logged", r.key("skills"), map[string]any{"skills": len(ids)}, err, 0)
	return err
}
