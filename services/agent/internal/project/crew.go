package project

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/thefold/thefold/pkg/fence"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/sandboxrun"
	"github.com/thefold/thefold/pkg/usage"
	"github.com/thefold/thefold/pkg/wait"

	"github.com/thefold/thefold/services/agent/internal/store"
)

// A crew project (PROJECT_MODE_CREW) works its tasks — usually a repository's open issues —
// with up to max_workers workers at once. Each task is a job of the task loop of its own
// (Job.crew: its own sandbox, branch, review gate and pull request that closes its issue).
// The runner here is the supervisor: it starts the next task whose blockers are merged on a
// free worker, follows each task's job, decides its review under the AUTO policy, checks its
// pull request, brings it up to date with the base, merges it, closes its issue, and sends a
// failing one back to its worker. It keeps nothing in memory that the checkpoint does not
// have: a run that ends anywhere is resumed by any agent process from the last checkpoint,
// and every side effect is idempotent (request ids, or a state that cannot be left twice).

// Crew defaults and limits.
const (
	DefaultWorkers    = 3
	MaxWorkers        = 10
	DefaultMinQuality = 8
	// MaxCheckFixes is how many times a task whose checks fail is sent back to its worker;
	// the next failure waits for a person.
	MaxCheckFixes = 2
	// maxChecksText caps what a task keeps of its last checks' output.
	maxChecksText = 4000
	// maxGroup bounds a merge group: the pull requests checked together.
	maxGroup = 8
	// groupCheck keys the merge group's check among the running checks.
	groupCheck = "merge-group"
)

// Task statuses, for the code below.
const (
	ptPending  = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_PENDING
	ptRunning  = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_RUNNING
	ptDone     = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_COMPLETED
	ptFailed   = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_FAILED
	ptSkipped  = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_SKIPPED
	ptReview   = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_IN_REVIEW
	ptChecking = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_CHECKING
	ptHuman    = agentv1.ProjectTaskStatus_PROJECT_TASK_STATUS_HUMAN_NEEDED
)

// Crew reports whether p is a crew project.
func Crew(p *agentv1.Project) bool { return p.GetMode() == agentv1.ProjectMode_PROJECT_MODE_CREW }

// Workers is p's worker count (its max_workers, or the default).
func Workers(p *agentv1.Project) int {
	if n := int(p.GetMaxWorkers()); n > 0 {
		return min(n, MaxWorkers)
	}
	return DefaultWorkers
}

// MinQuality is the least review quality p's AUTO policy merges.
func MinQuality(p *agentv1.Project) int32 {
	if q := p.GetAutoMergeMinQuality(); q > 0 {
		return q
	}
	return DefaultMinQuality
}

// Active reports whether a crew task holds a worker: its job runs or waits, or its pull
// request is being checked and merged.
func Active(t *agentv1.ProjectTask) bool {
	switch t.Status {
	case ptRunning, ptReview, ptChecking:
		return true
	}
	return false
}

// HoldsWorker reports whether crew task t holds its worker: its job runs or waits at its
// review. A task whose pull request is open leaves its worker for the next task; the crew
// checks and merges it (and a worker takes it again when its checks send it back).
func HoldsWorker(t *agentv1.ProjectTask) bool {
	return t.Status == ptRunning || t.Status == ptReview
}

// crew does the next thing of a crew project: follow a task that moved, start a ready task
// on a free worker, or finish. idle is set when nothing moved and it waited.
func (x *run) crew(ctx context.Context) (idle bool, err error) {
	p := x.p()
	// The cursor is read before the jobs are looked at: an event after the look wakes the
	// wait.
	cursor, err := x.e.store.LatestEvent(ctx)
	if err != nil {
		return false, err
	}
	var active []*agentv1.ProjectTask
	var jobs []string
	working := 0
	for _, t := range Tasks(p.Phases) {
		if Active(t) {
			active = append(active, t)
			if HoldsWorker(t) {
				working++
			}
			if t.Status != ptChecking && t.JobId != "" {
				jobs = append(jobs, t.JobId)
			}
		}
	}
	// The workers' jobs at a glance; only one that moved is read whole.
	states, err := x.e.store.JobStatuses(ctx, jobs)
	if err != nil {
		return false, err
	}
	front := x.mergeFront()
	for _, t := range active {
		var moved bool
		switch {
		case t.Status == ptChecking:
			if t != front {
				continue // its turn comes: each merge moves the base the ones after it take in
			}
			if x.rec.State.Group != nil {
				if rc := x.checking[groupCheck]; rc != nil && !isDone(rc.done) {
					continue // the group's check runs; its end wakes the crew
				}
				moved, err = x.groupChecked(ctx)
				break
			}
			if rc := x.checking[t.Id]; rc != nil && !isDone(rc.done) {
				continue // its check runs; its end wakes the crew
			}
			moved, err = x.crewCheck(ctx, t)
		case crewIdle(t, states[t.JobId]):
			continue
		default:
			moved, err = x.crewFollow(ctx, t)
		}
		if err != nil || moved {
			return false, err
		}
	}
	if working < Workers(p) {
		// A task its checks sent back first, then the next ready one.
		if t, fix := x.nextFix(); t != nil {
			if fix.Redo {
				return false, x.crewStart(ctx, t, phaseOf(p, t), "")
			}
			return false, x.crewStart(ctx, t, phaseOf(p, t), fix.Checks)
		}
		if t, ph := crewReady(p); t != nil {
			return false, x.crewStart(ctx, t, ph, "")
		}
	}
	if len(active) == 0 {
		x.crewFinish()
		return false, nil
	}
	return true, x.crewWait(ctx, cursor)
}

// mergeFront is the task whose pull request is merged next: the first of the merge queue
// still CHECKING (the queue is kept to those; one that reached CHECKING without a place,
// from an older checkpoint, joins at the end).
func (x *run) mergeFront() *agentv1.ProjectTask {
	st, p := &x.rec.State, x.p()
	st.MergeQueue = queueOrder(st, p)
	if len(st.MergeQueue) == 0 {
		return nil
	}
	t, _ := Find(p, st.MergeQueue[0])
	return t
}

// queueOrder is the merge queue of crew project p with checkpoint st: its CHECKING tasks
// not sent back to a worker, in the order they joined (one that reached CHECKING without a
// place, from an older checkpoint, joins at the end).
func queueOrder(st *store.ProjectState, p *agentv1.Project) []string {
	byID := index(Tasks(p.Phases))
	q := make([]string, 0, len(st.MergeQueue))
	for _, id := range st.MergeQueue {
		if t := byID[id]; t != nil && t.Status == ptChecking && st.Fixes[id] == nil && !slices.Contains(q, id) {
			q = append(q, id)
		}
	}
	for _, t := range Tasks(p.Phases) {
		if t.Status == ptChecking && st.Fixes[t.Id] == nil && !slices.Contains(q, t.Id) {
			q = append(q, t.Id)
		}
	}
	return q
}

// crewIdle reports whether the job of running or in-review task t, in state js, has
// nothing for the crew to do: it runs (or waits for a person) as the task says.
func crewIdle(t *agentv1.ProjectTask, js store.JobState) bool {
	switch js.Status {
	case agentv1.JobStatus_JOB_STATUS_QUEUED, agentv1.JobStatus_JOB_STATUS_RUNNING, agentv1.JobStatus_JOB_STATUS_PAUSED,
		agentv1.JobStatus_JOB_STATUS_WAITING_CLARIFICATION, agentv1.JobStatus_JOB_STATUS_HUMAN_NEEDED:
		// In review and running again only after a decision: the crew says so (crewFollow).
		return t.Status == ptRunning || js.Phase == agentv1.JobPhase_JOB_PHASE_COMPLETING
	}
	return false
}

func isDone(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// crewReady is the task to start next: the first of the person's priorities that is
// ready, else the first ready task in plan order. A task is ready when it is pending, not
// held, and its dependencies are merged or were skipped by a person.
func crewReady(p *agentv1.Project) (*agentv1.ProjectTask, *agentv1.ProjectPhase) {
	byID := index(Tasks(p.Phases))
	for _, id := range p.Priority {
		if t := byID[id]; t != nil && crewStartable(byID, t) {
			return t, phaseOf(p, t)
		}
	}
	for _, ph := range p.Phases {
		for _, t := range ph.Tasks {
			if crewStartable(byID, t) {
				return t, ph
			}
		}
	}
	return nil, nil
}

// crewStartable reports whether crew task t could start now.
func crewStartable(byID map[string]*agentv1.ProjectTask, t *agentv1.ProjectTask) bool {
	return t.Status == ptPending && !t.Held && !slices.ContainsFunc(t.DependsOn, func(d string) bool {
		s := byID[d].GetStatus()
		return s != ptDone && s != ptSkipped
	})
}

// ReadyCount is how many of a crew project's pending tasks could start now.
func ReadyCount(p *agentv1.Project) int {
	byID := index(Tasks(p.Phases))
	n := 0
	for _, t := range Tasks(p.Phases) {
		if crewStartable(byID, t) {
			n++
		}
	}
	return n
}

// nextFix is the first task, in plan order, that its checks sent back to a worker.
func (x *run) nextFix() (*agentv1.ProjectTask, *store.CrewFix) {
	if len(x.rec.State.Fixes) == 0 {
		return nil, nil
	}
	for _, t := range Tasks(x.p().Phases) {
		if f := x.rec.State.Fixes[t.Id]; f != nil && t.Status == ptChecking {
			return t, f
		}
	}
	return nil, nil
}

// sendBack takes task t out of the merge queue until a worker fixes it (or, with redo, does
// it again from the base).
func (x *run) sendBack(t *agentv1.ProjectTask, checks string, redo bool) {
	st := &x.rec.State
	if st.Fixes == nil {
		st.Fixes = map[string]*store.CrewFix{}
	}
	st.Fixes[t.Id] = &store.CrewFix{Checks: checks, Redo: redo}
	if st.AloneFirst == t.Id {
		st.AloneFirst = ""
	}
}

// freeWorker is the lowest worker number no task holds.
func freeWorker(p *agentv1.Project) int32 {
	held := map[int32]bool{}
	for _, t := range Tasks(p.Phases) {
		if HoldsWorker(t) {
			held[t.Worker] = true
		}
	}
	for w := int32(1); ; w++ {
		if !held[w] {
			return w
		}
	}
}

// crewBranch is task t's branch for its attempt: thefold/issue-<n>-<slug> (thefold/task-…
// for a task without an issue), with the attempt appended after the first.
func crewBranch(t *agentv1.ProjectTask) string {
	b := fmt.Sprintf("thefold/task-%s-%s", slug(t.Title), t.Id[:min(8, len(t.Id))])
	if t.IssueNumber > 0 {
		b = fmt.Sprintf("thefold/issue-%d-%s", t.IssueNumber, slug(t.Title))
	}
	if t.Attempts > 1 {
		b += fmt.Sprintf("-%d", t.Attempts)
	}
	return b
}

// crewStart starts a job of task t on a free worker (or its own, for a fix): a fresh attempt
// on a branch of its own, or, with fix set, a fix of its open pull request on that pull
// request's branch, told what its checks said.
func (x *run) crewStart(ctx context.Context, t *agentv1.ProjectTask, ph *agentv1.ProjectPhase, fix string) error {
	p := x.p()
	if t.Worker == 0 || !HoldsWorker(t) {
		t.Worker = freeWorker(p)
	}
	delete(x.rec.State.Fixes, t.Id)
	t.Attempts++
	if fix == "" {
		t.Branch, t.PullRequest = crewBranch(t), nil
	}
	j := &agentv1.Job{OwnerId: p.OwnerId, TaskId: t.TaskId, ProjectId: p.Id, Repo: p.Repo, BaseBranch: p.BaseBranch,
		Model: x.rec.State.Model, Budget: x.taskBudget(), Usage: &typev1.Usage{}, Crew: true, IssueNumber: t.IssueNumber,
		Branch: t.Branch, PullRequest: t.PullRequest}
	desc, err := x.crewContext(ctx, t, fix)
	if err != nil {
		t.Attempts--
		return err
	}
	return x.launch(ctx, t, ph, j, &aiv1.TaskSpec{Title: t.Title, Description: desc})
}

// crewContext is task t's description with what it needs to know of the crew: the
// conventions, the person's messages to the project, and for a fix what its checks said.
func (x *run) crewContext(ctx context.Context, t *agentv1.ProjectTask, fix string) (string, error) {
	p := x.p()
	var b strings.Builder
	b.WriteString(t.Description)
	if t.IssueNumber > 0 {
		fmt.Fprintf(&b, "\n\nThis task is issue #%d of %s; its pull request closes the issue.", t.IssueNumber, p.Repo)
	}
	if p.Conventions != "" {
		b.WriteString("\n\n### Conventions every task follows\n" + p.Conventions)
	}
	msgs, err := x.e.store.ProjectMessages(ctx, p.Id)
	if err != nil {
		return "", err
	}
	if len(msgs) > 0 {
		b.WriteString("\n\n### Messages from the person to the crew (their words, to act on)")
		for _, m := range msgs {
			b.WriteString("\n" + fence.Fence("guidance", [][2]string{{"author", m.AuthorId}}, m.Text, 8<<10))
		}
	}
	if fix != "" {
		fmt.Fprintf(&b, "\n\n### The checks of pull request #%d failed: fix the code on its branch %s so they pass\n%s",
			t.PullRequest.GetNumber(), t.Branch, fence.Fence("check-output", nil, fix, maxChecksText*2))
	} else if t.StatusReason != "" && t.Attempts > 1 {
		b.WriteString("\n\n### Why this attempt\n" + t.StatusReason)
	}
	return b.String(), nil
}

// crewFollow looks at the job of running or in-review task t; moved is set when the task
// changed (written with the next checkpoint).
func (x *run) crewFollow(ctx context.Context, t *agentv1.ProjectTask) (moved bool, err error) {
	p := x.p()
	jr, err := x.e.store.Load(ctx, t.JobId)
	if err != nil {
		return false, err
	}
	j := jr.Job
	ph := phaseOf(p, t)
	switch j.Status {
	case agentv1.JobStatus_JOB_STATUS_PENDING_REVIEW:
		if t.Status != ptReview {
			t.Status, t.StatusReason = ptReview, "review "+j.ReviewId+" waits"
			if p.MergePolicy != agentv1.MergePolicy_MERGE_POLICY_AUTO {
				t.StatusReason += " for a person (merge policy HUMAN)"
			}
			x.emit(TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_IN_REVIEW, t, ph))
			return true, nil
		}
		k := "auto:" + j.ReviewId
		if p.MergePolicy != agentv1.MergePolicy_MERGE_POLICY_AUTO || x.done(k) {
			return false, nil
		}
		x.mark(k)
		ok, why, err := x.autoDecide(ctx, j)
		if err != nil {
			return false, err
		}
		if !ok {
			t.StatusReason = why + "; the review waits for a person"
			x.emit(TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_IN_REVIEW, t, ph))
			return true, nil
		}
		if x.e.cfg.Approve == nil {
			return false, status.Error(codes.Internal, "the crew cannot approve reviews (no approver configured)")
		}
		if err := x.e.cfg.Approve(ctx, p.OwnerId, j.ReviewId, "approved by the crew: "+why); err != nil {
			return false, err
		}
		t.StatusReason = "approved by the crew: " + why
		return true, nil
	case agentv1.JobStatus_JOB_STATUS_COMPLETED:
		x.addUsage(t, j)
		if j.GetPullRequest().GetNumber() == 0 {
			t.Status, t.StatusReason = ptDone, "its job completed without a pull request: "+j.StatusReason
			x.emit(TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_COMPLETED, t, ph))
			return true, nil
		}
		t.PullRequest, t.Status, t.StatusReason = j.PullRequest, ptChecking, "pull request "+j.PullRequest.GetUrl()+" opened"
		x.emit(TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_PULL_REQUEST_OPENED, t, ph))
		return true, nil
	case agentv1.JobStatus_JOB_STATUS_SKIPPED:
		x.addUsage(t, j)
		t.Status, t.StatusReason = ptSkipped, "its job was skipped: "+j.StatusReason
		x.emit(TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_SKIPPED, t, ph))
		return true, nil
	case agentv1.JobStatus_JOB_STATUS_FAILED, agentv1.JobStatus_JOB_STATUS_CANCELLED, agentv1.JobStatus_JOB_STATUS_REJECTED:
		x.addUsage(t, j)
		reason := firstNonEmpty(j.Error, j.StatusReason)
		t.Status, t.Error = ptFailed, fmt.Sprintf("job %s %s: %s", j.Id, store.StatusName(j.Status), reason)
		x.emit(TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_FAILED, t, ph))
		x.skipDependents(t)
		x.setTask(ctx, t.TaskId, tasksv1.TaskStatus_TASK_STATUS_BLOCKED, "crew task failed: "+t.Error)
		return true, nil
	}
	if t.Status == ptReview && j.Phase != agentv1.JobPhase_JOB_PHASE_COMPLETING {
		// Changes were requested: the job runs again. (Approved, it opens its pull request.)
		t.Status, t.StatusReason = ptRunning, "changes requested"
		x.emit(TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_STARTED, t, ph))
		return true, nil
	}
	return false, nil
}

// addUsage counts what job j spent into its task and the project, once per job.
func (x *run) addUsage(t *agentv1.ProjectTask, j *agentv1.Job) {
	k := "usage:" + j.Id
	if x.done(k) {
		return
	}
	x.mark(k)
	t.Usage = usage.Add(t.Usage, j.Usage)
	x.p().Usage = usage.Add(x.p().Usage, j.Usage)
}

// autoDecide applies the AUTO merge policy to job j's pending review: merge without a
// person when its quality reaches the bar and it raised no error-level concern (the post-run
// skills' blocking findings fail validation before a review is made at all).
func (x *run) autoDecide(ctx context.Context, j *agentv1.Job) (ok bool, why string, err error) {
	rev, err := x.e.store.GetReview(ctx, j.OwnerId, j.ReviewId)
	if err != nil {
		return false, "", err
	}
	bar := MinQuality(x.p())
	if rev.QualityScore < bar {
		return false, fmt.Sprintf("review quality %d is below the AUTO bar of %d", rev.QualityScore, bar), nil
	}
	for _, c := range rev.Concerns {
		if c.GetSeverity() == typev1.Severity_SEVERITY_ERROR {
			return false, "the review raised an error: " + truncate(c.GetMessage(), 300), nil
		}
	}
	return true, fmt.Sprintf("review quality %d ≥ %d, no blocking concern", rev.QualityScore, bar), nil
}

// crewCheck carries task t's open pull request on: brought up to date with the base, its
// checks (the forge's, or the repository's own in a sandbox), then merged and its issue
// closed — or sent back to its worker when the checks fail or it conflicts.
func (x *run) crewCheck(ctx context.Context, t *agentv1.ProjectTask) (moved bool, err error) {
	p := x.p()
	ph := phaseOf(p, t)
	pr := t.PullRequest
	up, err := x.e.c.Repos.MergeBaseIntoPullRequest(ctx, &githubv1.MergeBaseIntoPullRequestRequest{Repo: p.Repo, Number: pr.GetNumber()})
	if status.Code(err) == codes.FailedPrecondition {
		got, gerr := x.e.c.Repos.GetPullRequest(ctx, &githubv1.GetPullRequestRequest{Repo: p.Repo, Number: pr.GetNumber()})
		if gerr != nil {
			return false, gerr
		}
		switch got.GetPullRequest().GetState() {
		case githubv1.PullRequestState_PULL_REQUEST_STATE_MERGED:
			return true, x.crewMerged(ctx, t, got.GetPullRequest()) // merged before the last checkpoint
		case githubv1.PullRequestState_PULL_REQUEST_STATE_CLOSED:
			x.crewHuman(ctx, t, fmt.Sprintf("pull request #%d was closed without merging", pr.GetNumber()))
			return true, nil
		}
		return true, x.crewConflict(ctx, t, status.Convert(err).Message())
	}
	if err != nil {
		return false, err
	}
	head := up.GetPullRequest().GetHeadSha()
	if up.GetUpdated() {
		t.StatusReason = fmt.Sprintf("took in %s (head %s)", p.BaseBranch, shortSHA(head))
		x.emit(TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_BRANCH_UPDATED, t, ph))
	}
	res, err := x.checks(ctx, t, head)
	if err != nil {
		return false, err
	}
	switch res.State {
	case store.CheckPending:
		return up.GetUpdated(), nil
	case store.CheckFailed:
		if res.Reported {
			return up.GetUpdated(), nil
		}
		res.Reported = true
		t.CheckFailures++
		t.Checks = res.Summary
		t.StatusReason = fmt.Sprintf("checks failed on %s (%d of %d allowed)", shortSHA(head), t.CheckFailures, MaxCheckFixes+1)
		x.emit(TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_CHECKS_FAILED, t, ph))
		if t.CheckFailures > MaxCheckFixes {
			x.crewHuman(ctx, t, fmt.Sprintf("the checks of pull request #%d failed %d times", pr.GetNumber(), t.CheckFailures))
			return true, nil
		}
		x.sendBack(t, res.Summary, false)
		return true, nil
	}
	moved = up.GetUpdated()
	if !res.Reported {
		// (Written with the merge's checkpoint, or the next: a resumed run merges again, or
		// finds the pull request merged.)
		res.Reported, moved = true, true
		t.Checks = res.Summary
		t.StatusReason = "checks passed on " + shortSHA(head)
		x.emit(TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_CHECKS_PASSED, t, ph))
	}
	m, err := x.e.c.Repos.MergePullRequest(ctx, &githubv1.MergePullRequestRequest{Repo: p.Repo, Number: pr.GetNumber(), ExpectedHeadSha: head,
		Method: githubv1.MergeMethod_MERGE_METHOD_SQUASH})
	switch status.Code(err) {
	case codes.OK:
		return true, x.crewMerged(ctx, t, m.GetPullRequest())
	case codes.Aborted, codes.FailedPrecondition:
		// The head or the base moved since the checks: up to date again, checked again.
		x.e.log.InfoContext(ctx, "crew: merge refused; checking again", "project", p.Id, "pull_request", pr.GetNumber(), "error", err)
		return moved, nil
	}
	return moved, err
}

// checks is what task t's checks say of head: the forge's check runs and statuses, or, when
// the forge has none (the local forge, a repository without CI), the repository's own in a
// sandbox. A result is kept per head.
func (x *run) checks(ctx context.Context, t *agentv1.ProjectTask, head string) (*store.CrewCheck, error) {
	st := &x.rec.State
	if st.Checks == nil {
		st.Checks = map[string]*store.CrewCheck{}
	}
	if c := st.Checks[t.Id]; c != nil && c.Head == head && c.State != store.CheckPending {
		return c, nil
	}
	c := st.Checks[t.Id]
	if c == nil || c.Head != head {
		c = &store.CrewCheck{Head: head}
		st.Checks[t.Id] = c
	}
	if rc := x.checking[t.Id]; rc != nil && rc.head == head {
		return c, x.takeCheck(t, c, rc) // the repository's own check, running or done
	}
	if time.Now().Before(c.Next) {
		return c, nil
	}
	p := x.p()
	resp, err := x.e.c.Repos.GetPullRequestChecks(ctx, &githubv1.GetPullRequestChecksRequest{Repo: p.Repo, Number: t.PullRequest.GetNumber()})
	if err != nil {
		return nil, err
	}
	if resp.GetHeadSha() != "" && resp.GetHeadSha() != head {
		c.State = store.CheckPending // the forge has not seen the new head yet
		c.Backoff()
		return c, nil
	}
	switch resp.GetState() {
	case githubv1.CheckState_CHECK_STATE_SUCCESS:
		c.State, c.Summary = store.CheckPassed, fmt.Sprintf("%d checks passed", len(resp.GetChecks()))
	case githubv1.CheckState_CHECK_STATE_FAILURE:
		var b strings.Builder
		for _, ch := range resp.GetChecks() {
			if ch.GetState() == githubv1.CheckState_CHECK_STATE_FAILURE {
				fmt.Fprintf(&b, "%s: %s\n%s\n", ch.GetName(), ch.GetSummary(), ch.GetDetailsUrl())
			}
		}
		c.State, c.Summary = store.CheckFailed, truncate(b.String(), maxChecksText)
	case githubv1.CheckState_CHECK_STATE_PENDING:
		c.State = store.CheckPending
		c.Backoff()
	default:
		// The repository's own check runs in a sandbox beside the crew's other work; its
		// end wakes the crew. (Should the run end first, the next one runs it again.) The
		// pull requests queued behind this one are checked with it when the forge can merge
		// them together.
		grouped, err := x.startGroup(ctx, t)
		if err != nil {
			return nil, err
		}
		if grouped {
			c.State, c.Next = store.CheckPending, time.Now().Add(x.e.cfg.Poll)
			return c, nil
		}
		if err := x.takeCheck(t, c, x.startCheck(ctx, t.Id, t.Branch, head)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// takeCheck takes the result of task t's sandbox check rc into c once it is done; until
// then c is pending (the check's end wakes the crew).
func (x *run) takeCheck(t *agentv1.ProjectTask, c *store.CrewCheck, rc *runningCheck) error {
	select {
	case <-rc.done:
		delete(x.checking, t.Id)
		if rc.err != nil {
			return rc.err
		}
		c.State, c.Summary = store.CheckFailed, rc.out
		if rc.passed {
			c.State = store.CheckPassed
		}
	default:
		c.State, c.Next = store.CheckPending, time.Now().Add(x.e.cfg.Poll)
	}
	return nil
}

// runningCheck is a check running in a sandbox.
type runningCheck struct {
	head   string
	done   chan struct{}
	passed bool
	out    string
	err    error
}

// startCheck starts the sandbox check of ref at head, kept in the running checks under id
// (a project task's, or groupCheck).
func (x *run) startCheck(ctx context.Context, id, ref, head string) *runningCheck {
	if x.checking == nil {
		x.checking = map[string]*runningCheck{}
	}
	if x.woken == nil {
		x.woken = make(chan struct{}, 1)
	}
	rc := &runningCheck{head: head, done: make(chan struct{})}
	x.checking[id] = rc
	p := x.p()
	// A new sandbox for each run of a check (one a crashed run made may be gone).
	spec := checkSpec{key: x.key("check", id, shortSHA(head), newID()[:8]), repo: p.Repo, branch: ref, command: p.CheckCommand}
	go func() {
		defer func() {
			close(rc.done)
			select {
			case x.woken <- struct{}{}:
			default:
			}
		}()
		rc.passed, rc.out, rc.err = x.sandboxCheck(ctx, spec)
	}()
	return rc
}

// checkSpec is what a sandbox check needs, copied from the project (the check runs beside
// the crew's loop, which goes on changing it).
type checkSpec struct{ key, repo, branch, command string }

// sandboxCheck runs the repository's own checks on head in a sandbox of its own: the
// project's check_command, or the sandbox's validation (build, lint, tests).
func (x *run) sandboxCheck(ctx context.Context, spec checkSpec) (passed bool, out string, err error) {
	k := spec.key
	sctx, cancel := context.WithTimeout(ctx, x.e.cfg.CallTimeout)
	defer cancel()
	sb, err := x.e.c.Sandbox.CreateSandbox(sctx, &sandboxv1.CreateSandboxRequest{RequestId: k, Repo: spec.repo, Ref: spec.branch,
		Ttl: durationpb.New(30 * time.Minute)})
	if err != nil {
		return false, "", err
	}
	id := sb.GetSandbox().GetId()
	defer func() {
		if _, derr := x.e.c.Sandbox.DestroySandbox(context.WithoutCancel(ctx), &sandboxv1.DestroySandboxRequest{Id: id}); derr != nil && status.Code(derr) != codes.NotFound {
			x.e.log.WarnContext(ctx, "crew: destroy a check's sandbox", "sandbox", id, "error", derr)
		}
	}()
	if spec.command != "" {
		argv, err := SplitCommand(spec.command)
		if err != nil {
			return false, "", status.Errorf(codes.InvalidArgument, "check_command: %v", err)
		}
		res, err := sandboxrun.Run(sctx, x.e.c.Sandbox, &sandboxv1.RunCommandRequest{SandboxId: id, Command: argv,
			Timeout: durationpb.New(10 * time.Minute), RequestId: k + ":run"}, 64<<10)
		if err != nil {
			return false, "", err
		}
		text := fmt.Sprintf("$ %s\nexit %d\n%s", spec.command, res.GetExitCode(), tail(string(res.Output), maxChecksText))
		if res.GetTimedOut() {
			text = "timed out\n" + text
		}
		return res.Passed(), text, nil
	}
	v, err := x.e.c.Sandbox.Validate(sctx, &sandboxv1.ValidateRequest{SandboxId: id})
	if err != nil {
		return false, "", err
	}
	var b strings.Builder
	for _, s := range v.GetSteps() {
		fmt.Fprintf(&b, "%s: %s %s\n", strings.TrimPrefix(s.GetKind().String(), "VALIDATION_STEP_KIND_"),
			strings.TrimPrefix(s.GetStatus().String(), "STEP_STATUS_"), strings.Join(s.GetCommand(), " "))
		if s.GetStatus() == sandboxv1.StepStatus_STEP_STATUS_FAILED {
			b.WriteString(tail(s.GetOutput(), maxChecksText/2) + "\n")
		}
	}
	return v.GetPassed(), truncate(b.String(), maxChecksText), nil
}

// SplitCommand splits a check command into its program and arguments as a shell would
// split words: on blanks, with single or double quotes grouping (and a backslash escaping
// the next character outside single quotes). Nothing else of a shell applies: no
// variables, pipes or globs; the sandbox runs the program itself (a script runs through an
// allowed program, e.g. "make check").
func SplitCommand(s string) ([]string, error) {
	var out []string
	var cur strings.Builder
	in, quote, escaped := false, rune(0), false
	for _, r := range s {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped, in = false, true
		case r == '\\' && quote != '\'':
			escaped = true
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '"' || r == '\'':
			quote, in = r, true
		case r == ' ' || r == '\t' || r == '\n':
			if in {
				out = append(out, cur.String())
				cur.Reset()
				in = false
			}
		default:
			cur.WriteRune(r)
			in = true
		}
	}
	switch {
	case quote != 0:
		return nil, fmt.Errorf("an unclosed %c quote", quote)
	case escaped:
		return nil, errors.New("a backslash at the end")
	}
	if in {
		out = append(out, cur.String())
	}
	if len(out) == 0 {
		return nil, errors.New("no program")
	}
	return out, nil
}

// tail is the end of s, at most n bytes.
func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// crewMerged records task t's merged pull request: its issue closed with a comment that
// links it, its task done; its dependents become ready.
func (x *run) crewMerged(ctx context.Context, t *agentv1.ProjectTask, pr *githubv1.PullRequest) error {
	p := x.p()
	if t.IssueNumber > 0 {
		_, err := x.e.c.Repos.CommentOnIssue(ctx, &githubv1.CommentOnIssueRequest{Repo: p.Repo, Number: t.IssueNumber, RequestId: x.key("closed", t.Id),
			Body: fmt.Sprintf("Fixed by #%d (%s), merged by TheFold's crew (project %s).", pr.GetNumber(), firstNonEmpty(pr.GetUrl(), t.PullRequest.GetUrl()), p.Id)})
		if err != nil {
			return err
		}
		_, err = x.e.c.Repos.UpdateIssue(ctx, &githubv1.UpdateIssueRequest{Repo: p.Repo, Number: t.IssueNumber,
			Issue: &githubv1.Issue{State: githubv1.IssueState_ISSUE_STATE_CLOSED}, UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"state"}}})
		if err != nil {
			return err
		}
	}
	x.setTask(ctx, t.TaskId, tasksv1.TaskStatus_TASK_STATUS_DONE, "merged: pull request "+t.PullRequest.GetUrl())
	t.Status, t.StatusReason = ptDone, "merged as "+shortSHA(pr.GetMergeCommitSha())
	x.emit(TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_MERGED, t, phaseOf(p, t)))
	return nil
}

// crewConflict sends task t back to its worker after its pull request stopped merging
// cleanly: the pull request is closed with a comment, and the task is done again from the
// current base on a new branch (a conflict counts as a failed check).
func (x *run) crewConflict(ctx context.Context, t *agentv1.ProjectTask, why string) error {
	p := x.p()
	ph := phaseOf(p, t)
	t.CheckFailures++
	t.Checks = truncate("conflict: "+why, maxChecksText)
	x.emit(TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_CHECKS_FAILED, t, ph))
	n := t.PullRequest.GetNumber()
	if t.CheckFailures > MaxCheckFixes {
		x.crewHuman(ctx, t, fmt.Sprintf("pull request #%d conflicts with %s: %s", n, p.BaseBranch, why))
		return nil
	}
	if _, err := x.e.c.Repos.CommentOnIssue(ctx, &githubv1.CommentOnIssueRequest{Repo: p.Repo, Number: n, RequestId: x.key("conflict", t.Id, n),
		Body: fmt.Sprintf("This pull request conflicts with %s (%s). TheFold's crew closes it and does the task again from %s.", p.BaseBranch, why, p.BaseBranch)}); err != nil {
		return err
	}
	if _, err := x.e.c.Repos.ClosePullRequest(ctx, &githubv1.ClosePullRequestRequest{Repo: p.Repo, Number: n}); err != nil {
		return err
	}
	t.StatusReason = fmt.Sprintf("pull request #%d conflicted with %s (%s): do the task again from %s", n, p.BaseBranch, why, p.BaseBranch)
	x.sendBack(t, "", true)
	return nil
}

// crewHuman stops task t for a person and skips its dependents.
func (x *run) crewHuman(ctx context.Context, t *agentv1.ProjectTask, why string) {
	t.Status, t.StatusReason = ptHuman, why
	x.emit(TaskEvent(agentv1.ProjectEventType_PROJECT_EVENT_TYPE_TASK_HUMAN_NEEDED, t, phaseOf(x.p(), t)))
	x.skipDependents(t)
	x.setTask(ctx, t.TaskId, tasksv1.TaskStatus_TASK_STATUS_BLOCKED, "waits for a person: "+why)
}

// crewFinish ends a crew project with nothing left to run: COMPLETED when every task merged
// or was skipped, HUMAN_NEEDED naming the tasks that wait on a person (or failed).
func (x *run) crewFinish() {
	p := x.p()
	var merged, skipped int
	var waiting []string
	for _, t := range Tasks(p.Phases) {
		switch t.Status {
		case ptDone:
			merged++
		case ptSkipped:
			skipped++
		case ptPending:
			if t.Held || heldBefore(p, t) {
				waiting = append(waiting, fmt.Sprintf("%s (held by a person%s)", taskLabel(t), map[bool]string{true: "", false: ", after a held task"}[t.Held]))
				continue
			}
			x.skip(t, phaseOf(p, t), "its dependencies did not merge")
			skipped++
		case ptHuman, ptFailed:
			waiting = append(waiting, fmt.Sprintf("%s (%s)", taskLabel(t), truncate(firstNonEmpty(t.StatusReason, t.Error), 200)))
		}
	}
	reason := fmt.Sprintf("%d merged, %d skipped", merged, skipped)
	if len(waiting) > 0 {
		x.setStatus(agentv1.ProjectStatus_PROJECT_STATUS_HUMAN_NEEDED, fmt.Sprintf("%s, %d waiting on a person: %s", reason, len(waiting), strings.Join(waiting, "; ")))
		return
	}
	x.setStatus(agentv1.ProjectStatus_PROJECT_STATUS_COMPLETED, reason)
}

// heldBefore reports whether pending task t waits, directly or not, on a held task.
func heldBefore(p *agentv1.Project, t *agentv1.ProjectTask) bool {
	byID := index(Tasks(p.Phases))
	seen := map[string]bool{}
	var walk func(*agentv1.ProjectTask) bool
	walk = func(t *agentv1.ProjectTask) bool {
		for _, d := range t.DependsOn {
			dt := byID[d]
			if dt == nil || seen[d] {
				continue
			}
			seen[d] = true
			if (dt.Status == ptPending && dt.Held) || (dt.Status == ptPending && walk(dt)) {
				return true
			}
		}
		return false
	}
	return walk(t)
}

// taskLabel names a task for people: its issue, or its title.
func taskLabel(t *agentv1.ProjectTask) string {
	if t.IssueNumber > 0 {
		return fmt.Sprintf("#%d %s", t.IssueNumber, t.Title)
	}
	return t.Title
}

// crewWait waits for an event of one of the project's jobs, or until the next check is
// due, or a poll.
func (x *run) crewWait(ctx context.Context, cursor int64) error {
	d := x.e.cfg.Poll
	for _, c := range x.rec.State.Checks {
		if c.State == store.CheckPending {
			d = min(d, max(time.Until(c.Next), 50*time.Millisecond))
		}
	}
	if x.hasCheckingTask() && d > time.Second {
		// A pull request being checked may be waiting on the forge (a merge refused for a
		// moved base): look again soon.
		d = time.Second
	}
	// A check that ends wakes the wait too.
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if x.woken != nil {
		go func() {
			select {
			case <-x.woken:
				cancel()
			case <-wctx.Done():
			}
		}()
	}
	var err error
	if x.e.store.Hub() == nil {
		err = wait.Sleep(wctx, d)
	} else {
		err = x.e.store.AwaitProjectJobs(wctx, x.p().Id, cursor, d)
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if wctx.Err() != nil {
		return nil // woken by a check
	}
	return err
}

func (x *run) hasCheckingTask() bool {
	return slices.ContainsFunc(Tasks(x.p().Phases), func(t *agentv1.ProjectTask) bool { return t.Status == ptChecking })
}

func phaseOf(p *agentv1.Project, t *agentv1.ProjectTask) *agentv1.ProjectPhase {
	for _, ph := range p.Phases {
		if slices.Contains(ph.Tasks, t) {
			return ph
		}
	}
	return nil
}

func shortSHA(s string) string {
	if len(s) > 10 {
		return s[:10]
	}
	return s
}
