package loop

// Tests of the loop's phases: a real run over a fresh agent schema, with fake services
// (fakes_test.go) scripted per test. Each test asserts on what the services were asked
// and on the job's state and events in the store.

import (
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	memoryv1 "github.com/thefold/thefold/pkg/gen/thefold/memory/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/agent/internal/breaker"
	"github.com/thefold/thefold/services/agent/internal/learn"
	"github.com/thefold/thefold/services/agent/internal/store"
)

// The happy path: planned, built and validated at the first try, the job stops at the
// review gate; approved, it opens the pull request and completes.
func TestRunToReviewAndCompletion(t *testing.T) {
	t.Parallel()
	f := newFakes()
	h := newHarness(t, f, testConfig())
	rec := h.start(nil)
	wantStatus(t, rec, pendingReview, "waits for a decision")
	if n := f.count("PlanTask"); n != 1 {
		t.Errorf("%d plans, want 1", n)
	}
	if got := f.taskStatuses(); !slices.Equal(got, []tasksv1.TaskStatus{tasksv1.TaskStatus_TASK_STATUS_IN_PROGRESS, tasksv1.TaskStatus_TASK_STATUS_IN_REVIEW}) {
		t.Errorf("task statuses %v", got)
	}
	// The build gets the task as the person wrote it and the context phase's files.
	builds := requests[*builderv1.StartBuildRequest](f, "StartBuild")
	if len(builds) != 1 || builds[0].TaskTitle != taskTitle || builds[0].TaskDescription != taskDesc ||
		!slices.Equal(builds[0].ContextPaths, []string{"greet/greet.go"}) {
		t.Errorf("StartBuild %v: want the task %q / %q and the context path greet/greet.go", builds, taskTitle, taskDesc)
	}
	rec = h.approve(rec.Job.Id)
	wantStatus(t, rec, completed, "pull request http://forge/local/r/pulls/7 opened")
	if n := f.count("CreatePullRequest"); n != 1 {
		t.Errorf("%d pull requests, want 1", n)
	}
	if n := f.count("StoreMemory"); n == 0 {
		t.Error("nothing remembered")
	}
}

// A revision of a pull request people asked changes on (Job.revises_job_id): it starts
// from the pull request's branch with their feedback, passes the gate by itself (they review
// the pushed commit), pushes one commit to that branch, opens no pull request, replies on it
// with the files it changed, and leaves the task in review for their approval or merge.
func TestRevisionPushesToThePullRequestItRevises(t *testing.T) {
	t.Parallel()
	f := newFakes()
	h := newHarness(t, f, testConfig())
	pr := &typev1.PullRequestRef{Repo: testRepo, Number: 7, Url: "http://forge/local/r/pulls/7"}
	rec, created, err := h.st.CreateWithContext(t.Context(), &agentv1.Job{OwnerId: testOwner, TaskId: "task-rev", Repo: testRepo, BaseBranch: "main",
		Branch: "thefold/greet-1234", PullRequest: pr, RevisesJobId: "job-before"},
		&aiv1.PlanTaskRequest{Feedback: "- greet/greet.go:4, octo: say Hi"}, "", nil, store.RateLimit{}, noEnqueue)
	if err != nil || !created {
		t.Fatalf("create: %v %v", err, created)
	}
	rec = h.run(rec.Job.Id)
	wantStatus(t, rec, completed, "pull request http://forge/local/r/pulls/7 updated (abc123")
	if sb := requests[*sandboxv1.CreateSandboxRequest](f, "CreateSandbox"); len(sb) != 1 || sb[0].Ref != "thefold/greet-1234" {
		t.Errorf("sandboxes %v: want one from the pull request's branch", sb)
	}
	if b := requests[*builderv1.StartBuildRequest](f, "StartBuild"); len(b) != 1 || !strings.Contains(b[0].GetAdditionalContext(), "greet/greet.go:4, octo: say Hi") {
		t.Errorf("the build was not told the feedback: %v", b)
	}
	if c := requests[*githubv1.CommitFilesRequest](f, "CommitFiles"); len(c) != 1 || c[0].Branch != "thefold/greet-1234" {
		t.Errorf("commits %v: want one on the pull request's branch", c)
	}
	if n := f.count("CreatePullRequest"); n != 0 {
		t.Errorf("%d pull requests opened, want 0", n)
	}
	replies := requests[*githubv1.CommentOnIssueRequest](f, "CommentOnIssue")
	if len(replies) != 1 || replies[0].Number != 7 || !strings.Contains(replies[0].Body, "in answer to the changes asked for here") ||
		!strings.Contains(replies[0].Body, "`greet/hello.go` create") {
		t.Errorf("replies %v", replies)
	}
	if got := f.taskStatuses(); len(got) == 0 || got[len(got)-1] != tasksv1.TaskStatus_TASK_STATUS_IN_REVIEW || slices.Contains(got, tasksv1.TaskStatus_TASK_STATUS_DONE) {
		t.Errorf("task statuses %v: want it left in review", got)
	}
	rev, err := h.st.GetReview(t.Context(), testOwner, rec.Job.ReviewId)
	if err != nil || rev.Status != agentv1.ReviewStatus_REVIEW_STATUS_APPROVED || !strings.Contains(rev.Feedback, "pull request #7") {
		t.Errorf("review %v %v", rev, err)
	}
}

// ---- diagnosis and recovery ----

// An implementation error: the next attempt rebuilds in a new sandbox with the diagnosis,
// on the same plan.
func TestDiagnoseImplementationErrorRebuildsWithDiagnosis(t *testing.T) {
	t.Parallel()
	f := newFakes()
	f.Build = failing(1)
	f.Diagnose = func(int, *aiv1.DiagnoseFailureRequest) (*aiv1.DiagnoseFailureResponse, error) {
		return &aiv1.DiagnoseFailureResponse{Category: aiv1.FailureCategory_FAILURE_CATEGORY_IMPLEMENTATION_ERROR, Reason: "hello is misspelt",
			RecommendedRecovery: "spell it hello"}, nil
	}
	h := newHarness(t, f, testConfig())
	rec := h.start(nil)
	wantStatus(t, rec, pendingReview, "")
	id := rec.Job.Id

	diag := requests[*aiv1.DiagnoseFailureRequest](f, "DiagnoseFailure")
	if len(diag) != 1 || len(diag[0].Errors) != 1 || diag[0].Errors[0].Message != "undefined: hellob" || diag[0].ErrorOutput != "undefined: hellob" {
		t.Fatalf("diagnosis requests %v", diag)
	}
	// The diagnosis sees the failed code the errors point at, read from the attempt's sandbox.
	if fs := diag[0].Files; len(fs) == 0 || fs[0].Path != "greet/hello.go" || fs[0].Content != "package greet\n" {
		t.Fatalf("diagnosis files %v, want the failed greet/hello.go first", fs)
	}
	if reads := requests[*sandboxv1.ReadFileRequest](f, "ReadFile"); len(reads) == 0 || reads[0].SandboxId != "sb-1" {
		t.Fatalf("sandbox reads %v, want greet/hello.go from the failed attempt's sandbox", reads)
	}
	if rec.Job.LastDiagnosis.GetRecommendedRecovery() != "spell it hello" {
		t.Errorf("the diagnosis's recommended recovery was dropped: %v", rec.Job.LastDiagnosis)
	}
	if builds := requests[*builderv1.StartBuildRequest](f, "StartBuild"); len(builds) != 2 ||
		!strings.Contains(builds[1].AdditionalContext, "Recommended recovery: spell it hello") {
		t.Errorf("the second build is not given the recommended recovery")
	}
	if n := f.count("PlanTask"); n != 1 {
		t.Errorf("%d plans, want 1 (an implementation error keeps the plan)", n)
	}
	sbs := requests[*sandboxv1.CreateSandboxRequest](f, "CreateSandbox")
	if len(sbs) != 2 || sbs[0].RequestId == sbs[1].RequestId {
		t.Fatalf("sandboxes %v, want two with their own keys", sbs)
	}
	if d := requests[*sandboxv1.DestroySandboxRequest](f, "DestroySandbox"); len(d) == 0 || d[0].Id != "sb-1" {
		t.Errorf("destroyed %v, want the first attempt's sandbox", d)
	}
	builds := requests[*builderv1.StartBuildRequest](f, "StartBuild")
	if len(builds) != 2 || builds[1].SandboxId != "sb-2" || !strings.Contains(builds[1].AdditionalContext, "The previous attempt (1) failed") ||
		!strings.Contains(builds[1].AdditionalContext, "hello is misspelt") || !strings.Contains(builds[1].AdditionalContext, "undefined: hellob") {
		t.Fatalf("second build %v", builds[len(builds)-1])
	}
	if rec.Job.Attempt != 2 || rec.Job.LastDiagnosis.GetCategory() != agentv1.DiagnosisCategory_DIAGNOSIS_CATEGORY_IMPLEMENTATION_ERROR {
		t.Errorf("job attempt %d, diagnosis %v", rec.Job.Attempt, rec.Job.LastDiagnosis)
	}
	if ds := h.diagnoses(id); len(ds) != 1 || ds[0].Recovery != "fixing: attempt 2 rebuilds with the diagnosis" || ds[0].Reason != "hello is misspelt" {
		t.Errorf("diagnoses: %q", recoveries(ds))
	}
}

// A bad plan: the plan is revised (the failed one given as the previous plan), up to
// MaxPlanRevisions; beyond, the next attempt only rebuilds.
func TestDiagnoseBadPlanRevisesPlan(t *testing.T) {
	t.Parallel()
	f := newFakes()
	f.Build = failing(2)
	f.Diagnose = func(int, *aiv1.DiagnoseFailureRequest) (*aiv1.DiagnoseFailureResponse, error) {
		return &aiv1.DiagnoseFailureResponse{Category: aiv1.FailureCategory_FAILURE_CATEGORY_BAD_PLAN, Reason: "wrong file"}, nil
	}
	plans := 0
	f.PlanTask = func(req *aiv1.PlanTaskRequest) (*aiv1.PlanTaskResponse, error) {
		plans++
		return &aiv1.PlanTaskResponse{Plan: &typev1.Plan{Summary: "plan " + string(rune('0'+plans)), Steps: []*typev1.PlanStep{
			{Id: "s1", Action: typev1.FileAction_FILE_ACTION_CREATE, Path: "greet/hello.go"}}}}, nil
	}
	cfg := testConfig()
	cfg.MaxPlanRevisions = 1
	h := newHarness(t, f, cfg)
	rec := h.start(nil)
	wantStatus(t, rec, pendingReview, "")
	id := rec.Job.Id

	reqs := requests[*aiv1.PlanTaskRequest](f, "PlanTask")
	if len(reqs) != 2 {
		t.Fatalf("%d plans, want 2 (one revision of %d)", len(reqs), cfg.MaxPlanRevisions)
	}
	if reqs[0].PreviousPlan != nil || reqs[1].PreviousPlan.GetSummary() != "plan 1" || reqs[0].RequestId == reqs[1].RequestId {
		t.Errorf("plan requests: previous plans %v, %v; keys %q, %q", reqs[0].PreviousPlan, reqs[1].PreviousPlan, reqs[0].RequestId, reqs[1].RequestId)
	}
	if len(h.ofType(id, agentv1.JobEventType_JOB_EVENT_TYPE_PLAN_REVISED)) != 1 || rec.Job.PlanRevisions != 1 || rec.Job.Plan.GetSummary() != "plan 2" {
		t.Errorf("plan revisions %d, plan %v", rec.Job.PlanRevisions, rec.Job.Plan)
	}
	ds := h.diagnoses(id)
	if len(ds) != 2 || ds[0].Recovery != "revising plan (revision 1 of 1)" || !strings.HasPrefix(ds[1].Recovery, "fixing: attempt 3") {
		t.Errorf("diagnoses: %q", recoveries(ds))
	}
	if rec.Job.Attempt != 3 {
		t.Errorf("attempt %d, want 3", rec.Job.Attempt)
	}
}

// Missing context: the next planning first fetches more files (those the diagnosis named
// that exist) and memories on the diagnosis.
func TestDiagnoseMissingContextFetchesMore(t *testing.T) {
	t.Parallel()
	f := newFakes()
	f.Build = failing(1)
	f.Diagnose = func(int, *aiv1.DiagnoseFailureRequest) (*aiv1.DiagnoseFailureResponse, error) {
		return &aiv1.DiagnoseFailureResponse{Category: aiv1.FailureCategory_FAILURE_CATEGORY_MISSING_CONTEXT, Reason: "needs pkg/x.go",
			ContextRequests: []string{"pkg/x.go", "no/such.go"}}, nil
	}
	cfg := testConfig()
	h := newHarness(t, f, cfg)
	rec := h.start(nil)
	wantStatus(t, rec, pendingReview, "")

	rel := requests[*githubv1.FindRelevantFilesRequest](f, "FindRelevantFiles")
	if len(rel) != 2 {
		t.Fatalf("%d relevant-file searches, want 2", len(rel))
	}
	if rel[0].IncludePaths != nil || rel[0].MaxFiles != int32(cfg.ContextFiles) {
		t.Errorf("first search %v", rel[0])
	}
	if !slices.Equal(rel[1].IncludePaths, []string{"pkg/x.go"}) || rel[1].MaxFiles != int32(cfg.ContextFiles+10) ||
		rel[1].TokenBudget != int32(cfg.ContextTokens*(cfg.ContextFiles+10)/cfg.ContextFiles) {
		t.Errorf("second search %v: want pkg/x.go included, %d files", rel[1], cfg.ContextFiles+10)
	}
	plans := requests[*aiv1.PlanTaskRequest](f, "PlanTask")
	if len(plans) != 2 {
		t.Fatalf("%d plans, want 2", len(plans))
	}
	var paths []string
	for _, cf := range plans[1].ContextFiles {
		paths = append(paths, cf.Path)
	}
	if !slices.Equal(paths, []string{"greet/greet.go", "pkg/x.go"}) {
		t.Errorf("second plan's files %v", paths)
	}
	// The files fetched reach the build too, as context paths.
	builds := requests[*builderv1.StartBuildRequest](f, "StartBuild")
	if len(builds) != 2 || !slices.Equal(builds[0].ContextPaths, []string{"greet/greet.go"}) ||
		!slices.Equal(builds[1].ContextPaths, []string{"greet/greet.go", "pkg/x.go"}) {
		t.Errorf("builds' context paths %v", func() (out [][]string) {
			for _, b := range builds {
				out = append(out, b.ContextPaths)
			}
			return out
		}())
	}
	// The memories are searched again with the diagnosis.
	var again bool
	for _, s := range requests[*memoryv1.SearchMemoriesRequest](f, "SearchMemories") {
		again = again || strings.Contains(s.Query, "needs pkg/x.go")
	}
	if !again {
		t.Error("memories were not searched with the diagnosis")
	}
	if ds := h.diagnoses(rec.Job.Id); len(ds) != 1 || !strings.HasPrefix(ds[0].Recovery, "fetching more context (15 files, 2 named)") {
		t.Errorf("diagnoses: %q", recoveries(ds))
	}
	if !anyContains(h.thoughts(rec.Job.Id), "more context: 2 files now (1 new)") {
		t.Errorf("thoughts %q", h.thoughts(rec.Job.Id))
	}
}

// An environment error: the next attempt waits at least the backoff (or the diagnosis's
// retry_after, whichever is longer), then retries in a new sandbox on the same plan.
func TestDiagnoseEnvironmentErrorBacksOff(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		backoff, retryAfter, want time.Duration
	}{
		"retry_after is longer": {time.Millisecond, 40 * time.Millisecond, 40 * time.Millisecond},
		"backoff is longer":     {30 * time.Millisecond, 0, 30 * time.Millisecond},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFakes()
			f.Build = failing(1)
			f.Diagnose = func(int, *aiv1.DiagnoseFailureRequest) (*aiv1.DiagnoseFailureResponse, error) {
				resp := &aiv1.DiagnoseFailureResponse{Category: aiv1.FailureCategory_FAILURE_CATEGORY_ENVIRONMENT_ERROR, Reason: "disk full"}
				if tc.retryAfter > 0 {
					resp.RetryAfter = durationpb.New(tc.retryAfter)
				}
				return resp, nil
			}
			cfg := testConfig()
			cfg.Backoff = tc.backoff
			h := newHarness(t, f, cfg)
			rec := h.start(nil)
			wantStatus(t, rec, pendingReview, "")

			if ds := h.diagnoses(rec.Job.Id); len(ds) != 1 || ds[0].Recovery != "environment error: backing off "+tc.want.String()+", then retrying in a new sandbox" {
				t.Fatalf("diagnoses: %q", recoveries(ds))
			}
			diag, sbs := f.callsOf("DiagnoseFailure"), f.callsOf("CreateSandbox")
			if len(sbs) != 2 || len(diag) != 1 {
				t.Fatalf("%d sandboxes, %d diagnoses", len(sbs), len(diag))
			}
			if waited := sbs[1].at.Sub(diag[0].at); waited < tc.want {
				t.Errorf("the new sandbox came %s after the diagnosis, want at least %s", waited, tc.want)
			}
			if d := requests[*sandboxv1.DestroySandboxRequest](f, "DestroySandbox"); len(d) == 0 || d[0].Id != "sb-1" {
				t.Errorf("destroyed %v, want the first attempt's sandbox", d)
			}
			if n := f.count("PlanTask"); n != 1 {
				t.Errorf("%d plans, want 1", n)
			}
			if rec.State.BackoffUntil.IsZero() || rec.Job.Attempt != 2 {
				t.Errorf("backoff until %v, attempt %d", rec.State.BackoffUntil, rec.Job.Attempt)
			}
		})
	}
}

// An impossible task needs a human at once: no intervention, the task blocked, the
// sandbox destroyed.
func TestDiagnoseImpossibleTaskNeedsHuman(t *testing.T) {
	t.Parallel()
	f := newFakes()
	f.Build = failing(5)
	f.Diagnose = func(int, *aiv1.DiagnoseFailureRequest) (*aiv1.DiagnoseFailureResponse, error) {
		return &aiv1.DiagnoseFailureResponse{Category: aiv1.FailureCategory_FAILURE_CATEGORY_IMPOSSIBLE_TASK, Reason: "there is no such API"}, nil
	}
	h := newHarness(t, f, testConfig())
	rec := h.start(nil)
	wantStatus(t, rec, humanNeeded, "impossible task: there is no such API")
	if rec.Job.Error != "impossible task: there is no such API" {
		t.Errorf("job error %q", rec.Job.Error)
	}
	if n := f.count("Intervene") + f.count("CreateSandbox"); n != 1 {
		t.Errorf("%d interventions and sandboxes after the first, want none", n-1)
	}
	if got := f.taskStatuses(); got[len(got)-1] != tasksv1.TaskStatus_TASK_STATUS_BLOCKED {
		t.Errorf("task statuses %v, want blocked last", got)
	}
	if d := requests[*sandboxv1.DestroySandboxRequest](f, "DestroySandbox"); len(d) != 1 || d[0].Id != "sb-1" {
		t.Errorf("destroyed %v", d)
	}
	if ds := h.diagnoses(rec.Job.Id); len(ds) != 1 || ds[0].Recovery != "escalated: the task cannot be done as asked" {
		t.Errorf("diagnoses: %q", recoveries(ds))
	}
}

// After InterveneAfter failed attempts the loop intervenes; the intervention sees every
// attempt and the last plan (here it gives up, so the job needs a human).
func TestDiagnoseRepeatedFailuresIntervene(t *testing.T) {
	t.Parallel()
	f := newFakes()
	f.Build = failing(10)
	f.Intervene = func(int, *aiv1.InterveneRequest) (*aiv1.InterveneResponse, error) {
		return &aiv1.InterveneResponse{Action: aiv1.InterventionAction_INTERVENTION_ACTION_ESCALATE, Reason: "stuck"}, nil
	}
	cfg := testConfig()
	cfg.InterveneAfter = 2
	h := newHarness(t, f, cfg)
	rec := h.start(nil)
	wantStatus(t, rec, humanNeeded, "intervention gave up: stuck")
	iv := requests[*aiv1.InterveneRequest](f, "Intervene")
	if len(iv) != 1 || len(iv[0].Attempts) != 2 || iv[0].LastPlan == nil {
		t.Fatalf("intervention requests %v", iv)
	}
	ds := h.diagnoses(rec.Job.Id)
	if len(ds) != 2 || !strings.HasPrefix(ds[0].Recovery, "fixing") || ds[1].Recovery != "2 failed attempts; intervening" {
		t.Errorf("diagnoses: %q", recoveries(ds))
	}
}

// The last of MaxAttempts attempts failing intervenes too, whatever the failure count.
func TestDiagnoseAllAttemptsSpentIntervenes(t *testing.T) {
	t.Parallel()
	f := newFakes()
	f.Build = failing(10)
	cfg := testConfig()
	cfg.InterveneAfter, cfg.MaxAttempts = 100, 2
	h := newHarness(t, f, cfg)
	rec := h.start(nil)
	wantStatus(t, rec, humanNeeded, "intervention gave up: no idea")
	if ds := h.diagnoses(rec.Job.Id); len(ds) != 2 || ds[1].Recovery != "all 2 attempts spent; intervening" {
		t.Errorf("diagnoses: %q", recoveries(ds))
	}
	if n := f.count("Intervene"); n != 1 {
		t.Errorf("%d interventions, want 1", n)
	}
}

// Once intervened (Intervened in the checkpoint), another repeated failure escalates
// without asking again; the loop guard (the same failure over and over) counts too.
func TestDiagnoseStalledIntervenesRewritesOnlyOnce(t *testing.T) {
	t.Parallel()
	f := newFakes()
	f.Build = func(int) *builderv1.BuildJob { return failedBuild("undefined: hello") } // no progress
	f.Intervene = func(int, *aiv1.InterveneRequest) (*aiv1.InterveneResponse, error) {
		return &aiv1.InterveneResponse{Action: aiv1.InterventionAction_INTERVENTION_ACTION_REWRITE_TASK, Reason: "clearer", NewDescription: "greet.Hello(name) returns \"Hello, name\""}, nil
	}
	cfg := testConfig()
	cfg.InterveneAfter, cfg.MaxAttempts = 100, 100
	h := newHarness(t, f, cfg)
	rec := h.start(nil)
	// Three equal failures: stalled → intervene (rewrite, a new run of attempts); three
	// more: stalled again → intervene again, which may not rewrite twice → escalate.
	wantStatus(t, rec, humanNeeded, "intervention: the task was rewritten once already and still fails")
	ds := h.diagnoses(rec.Job.Id)
	if len(ds) != 6 || ds[2].Recovery != "no progress: two attempts in a row failed the same way; intervening" {
		t.Fatalf("%d diagnoses: %q", len(ds), truncateList(recoveries(ds), 8))
	}
	if n := f.count("Intervene"); n != 2 {
		t.Errorf("%d interventions, want 2", n)
	}
}

// A run of attempts that has had its intervention already (Intervened in the checkpoint)
// escalates at the next repeated failure instead of intervening again.
func TestDiagnoseRepeatedFailuresAfterInterventionEscalate(t *testing.T) {
	t.Parallel()
	f := newFakes()
	f.Build = failing(10)
	cfg := testConfig()
	cfg.InterveneAfter = 2
	h := newHarness(t, f, cfg)
	id := h.create(nil)
	h.seed(id, func(rec *store.Record) { rec.State.Intervened = true })
	rec := h.run(id)
	wantStatus(t, rec, humanNeeded, "2 failed attempts: a typo")
	if n := f.count("Intervene"); n != 0 {
		t.Errorf("%d interventions, want none", n)
	}
	if ds := h.diagnoses(id); len(ds) != 2 || ds[1].Recovery != "2 failed attempts; escalated" {
		t.Errorf("diagnoses: %q", recoveries(ds))
	}
}

// ---- intervention ----

// interveneAt1 makes the first failure intervene.
func interveneAt1() Config {
	cfg := testConfig()
	cfg.InterveneAfter = 1
	return cfg
}

// Rewrite: the task is rewritten (once), a new run of attempts plans it afresh with new
// idempotency keys and the last plan to revise.
func TestInterveneRewritesTask(t *testing.T) {
	t.Parallel()
	f := newFakes()
	f.Build = failing(1)
	f.Intervene = func(int, *aiv1.InterveneRequest) (*aiv1.InterveneResponse, error) {
		return &aiv1.InterveneResponse{Action: aiv1.InterventionAction_INTERVENTION_ACTION_REWRITE_TASK, Reason: "too vague",
			NewTitle: "Add greet.Hello", NewDescription: "Hello(name string) string"}, nil
	}
	h := newHarness(t, f, interveneAt1())
	rec := h.start(nil)
	wantStatus(t, rec, pendingReview, "")
	plans := requests[*aiv1.PlanTaskRequest](f, "PlanTask")
	if len(plans) != 2 {
		t.Fatalf("%d plans, want 2", len(plans))
	}
	p := plans[1]
	if p.Task.GetTitle() != "Add greet.Hello" || p.Task.GetDescription() != "Hello(name string) string" || p.PreviousPlan == nil {
		t.Errorf("plan after the rewrite: task %v, previous plan %v", p.Task, p.PreviousPlan)
	}
	if !strings.Contains(p.RequestId, ":g1:") || !strings.Contains(plans[0].RequestId, ":g0:") {
		t.Errorf("plan keys %q, %q: want a new generation", plans[0].RequestId, p.RequestId)
	}
	if rec.State.Rewrites != 1 || rec.State.Generation != 1 || rec.Job.Attempt != 1 {
		t.Errorf("rewrites %d, generation %d, attempt %d", rec.State.Rewrites, rec.State.Generation, rec.Job.Attempt)
	}
	iv := h.ofType(rec.Job.Id, agentv1.JobEventType_JOB_EVENT_TYPE_INTERVENED)
	if len(iv) != 1 || iv[0].GetIntervention().GetAction() != agentv1.InterventionAction_INTERVENTION_ACTION_REWRITE_TASK {
		t.Errorf("intervened events %v", iv)
	}
	if !anyContains(h.thoughts(rec.Job.Id), "task rewritten: too vague") {
		t.Errorf("thoughts %q", h.thoughts(rec.Job.Id))
	}
}

// Split: the task is replaced by subtasks (their dependencies kept), blocked on them; the
// job completes pointing at them.
func TestInterveneSplitsTask(t *testing.T) {
	t.Parallel()
	f := newFakes()
	f.Build = failing(1)
	f.Intervene = func(int, *aiv1.InterveneRequest) (*aiv1.InterveneResponse, error) {
		return &aiv1.InterveneResponse{Action: aiv1.InterventionAction_INTERVENTION_ACTION_SPLIT_TASK, Reason: "two things", Subtasks: []*aiv1.TaskProposal{
			{Key: "a", Title: "Add Hello"}, {Key: "b", Title: "Test Hello", DependsOn: []string{"a"}}}}, nil
	}
	h := newHarness(t, f, interveneAt1())
	rec := h.start(nil)
	wantStatus(t, rec, completed, "broken down into 2 subtasks: two things")
	batch := requests[*tasksv1.BatchCreateTasksRequest](f, "BatchCreateTasks")
	if len(batch) != 1 || len(batch[0].Tasks) != 2 {
		t.Fatalf("batch requests %v", batch)
	}
	b := batch[0].Tasks[1]
	if b.Key != "b" || !slices.Equal(b.BlockedByKeys, []string{"a"}) || b.Task.ParentId != rec.Job.TaskId || b.Task.Repo != testRepo || b.Task.Title != "Test Hello" {
		t.Errorf("second subtask %v", b)
	}
	if !slices.Equal(rec.Job.SubtaskIds, []string{"sub-1", "sub-2"}) {
		t.Errorf("subtasks %v", rec.Job.SubtaskIds)
	}
	if got := f.taskStatuses(); got[len(got)-1] != tasksv1.TaskStatus_TASK_STATUS_BLOCKED {
		t.Errorf("task statuses %v", got)
	}
	if len(h.ofType(rec.Job.Id, agentv1.JobEventType_JOB_EVENT_TYPE_SUBTASKS_CREATED)) != 1 {
		t.Error("no SUBTASKS_CREATED event")
	}
}

// Escalate, a split without subtasks and a second rewrite all stop the job for a human,
// recorded as an escalation.
func TestInterveneEscalates(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		resp   *aiv1.InterveneResponse
		reason string
	}{
		"escalate": {&aiv1.InterveneResponse{Action: aiv1.InterventionAction_INTERVENTION_ACTION_ESCALATE, Reason: "beyond me"},
			"intervention gave up: beyond me"},
		"split without subtasks": {&aiv1.InterveneResponse{Action: aiv1.InterventionAction_INTERVENTION_ACTION_SPLIT_TASK, Reason: "split?"},
			"intervention wanted to split the task but proposed no subtasks: split?"},
		"rewrite without a new task": {&aiv1.InterveneResponse{Action: aiv1.InterventionAction_INTERVENTION_ACTION_REWRITE_TASK, Reason: "hm"},
			"intervention: the task was rewritten once already and still fails: hm"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFakes()
			f.Build = failing(5)
			f.Intervene = func(int, *aiv1.InterveneRequest) (*aiv1.InterveneResponse, error) { return proto.CloneOf(tc.resp), nil }
			h := newHarness(t, f, interveneAt1())
			rec := h.start(nil)
			wantStatus(t, rec, humanNeeded, tc.reason)
			iv := h.ofType(rec.Job.Id, agentv1.JobEventType_JOB_EVENT_TYPE_INTERVENED)
			if len(iv) != 1 || iv[0].GetIntervention().GetAction() != agentv1.InterventionAction_INTERVENTION_ACTION_ESCALATE {
				t.Errorf("intervened events %v", iv)
			}
			if n := f.count("BatchCreateTasks") + f.count("PlanTask"); n != 1 {
				t.Errorf("%d subtask batches and plans after the intervention", n-1)
			}
		})
	}
}

// ---- confidence ----

// An unclear task waits for an answer to the model's questions before anything else.
func TestConfidenceClarifyWaitsForAnswer(t *testing.T) {
	t.Parallel()
	f := newFakes()
	f.AssessConfidence = func(*aiv1.AssessConfidenceRequest) (*aiv1.AssessConfidenceResponse, error) {
		return &aiv1.AssessConfidenceResponse{Decision: aiv1.ConfidenceDecision_CONFIDENCE_DECISION_CLARIFY, Questions: []string{"Which package?", "Which name?"}}, nil
	}
	h := newHarness(t, f, testConfig())
	rec := h.start(nil)
	wantStatus(t, rec, waitingAnswer, "waiting for an answer: Which package?\nWhich name?")
	if rec.Job.ClarificationQuestion != "Which package?\nWhich name?" || f.count("AssessComplexity") != 0 {
		t.Errorf("question %q, complexity calls %d", rec.Job.ClarificationQuestion, f.count("AssessComplexity"))
	}
	if ev := h.ofType(rec.Job.Id, agentv1.JobEventType_JOB_EVENT_TYPE_CLARIFICATION_REQUESTED); len(ev) != 1 {
		t.Errorf("clarification events %v", ev)
	}
}

// A task the confidence check breaks down is split into its subtasks at once; a break-down
// without subtasks goes on.
func TestConfidenceBreakDownSplits(t *testing.T) {
	t.Parallel()
	for name, subtasks := range map[string][]*aiv1.TaskProposal{
		"with subtasks":    {{Title: "Add Hello"}, {Title: "Document Hello"}},
		"without subtasks": nil,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFakes()
			f.AssessConfidence = func(*aiv1.AssessConfidenceRequest) (*aiv1.AssessConfidenceResponse, error) {
				return &aiv1.AssessConfidenceResponse{Decision: aiv1.ConfidenceDecision_CONFIDENCE_DECISION_BREAK_DOWN, Reasoning: "big", SuggestedSubtasks: subtasks}, nil
			}
			h := newHarness(t, f, testConfig())
			rec := h.start(nil)
			if subtasks == nil {
				wantStatus(t, rec, pendingReview, "")
				return
			}
			wantStatus(t, rec, completed, "broken down into 2 subtasks: big")
			batch := requests[*tasksv1.BatchCreateTasksRequest](f, "BatchCreateTasks")
			if len(batch) != 1 || !strings.HasSuffix(batch[0].RequestId, ":subtasks:confidence") || batch[0].Tasks[1].Key != "t2" {
				t.Errorf("batch requests %v", batch)
			}
			if f.count("AssessComplexity")+f.count("CreateSandbox") != 0 {
				t.Error("the split task was worked on")
			}
		})
	}
}

// ---- budget ----

// A job that spends its budget stops for a human with "budget exhausted" before its next
// step, with a BUDGET_EXHAUSTED event.
func TestBudgetExhaustedStopsJob(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		budget *typev1.Budget
		usage  *typev1.Usage
		active time.Duration // wall time already spent (in the checkpoint)
		reason string
	}{
		"tokens": {&typev1.Budget{MaxTokens: 100}, &typev1.Usage{InputTokens: 120, OutputTokens: 30}, 0, "budget exhausted: spent 150 tokens of 100"},
		"cost":   {&typev1.Budget{MaxCostMicros: 1000}, &typev1.Usage{CostMicros: 2500}, 0, "budget exhausted: spent $0.0025 of $0.0010"},
		"wall time": {&typev1.Budget{MaxWallTime: durationpb.New(time.Hour)}, nil, 2 * time.Hour,
			"budget exhausted: spent 2h0m0s of wall time of 1h0m0s"},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFakes()
			f.AssessConfidence = func(*aiv1.AssessConfidenceRequest) (*aiv1.AssessConfidenceResponse, error) {
				return &aiv1.AssessConfidenceResponse{Decision: aiv1.ConfidenceDecision_CONFIDENCE_DECISION_PROCEED, Usage: tc.usage}, nil
			}
			h := newHarness(t, f, testConfig())
			id := h.create(tc.budget)
			if tc.active > 0 {
				h.seed(id, func(rec *store.Record) { rec.State.Active = tc.active })
			}
			rec := h.run(id)
			wantStatus(t, rec, humanNeeded, tc.reason)
			if n := f.count("AssessComplexity"); n != 0 {
				t.Errorf("%d complexity calls after the budget was spent", n)
			}
			ev := h.ofType(rec.Job.Id, agentv1.JobEventType_JOB_EVENT_TYPE_BUDGET_EXHAUSTED)
			if len(ev) != 1 || !proto.Equal(ev[0].GetBudgetExhausted().GetBudget(), tc.budget) {
				t.Errorf("budget events %v", ev)
			}
		})
	}
}

// Within its budget a job goes on (the build is told what is left of it).
func TestBudgetNotExhaustedGoesOn(t *testing.T) {
	t.Parallel()
	f := newFakes()
	h := newHarness(t, f, testConfig())
	rec := h.start(&typev1.Budget{MaxTokens: 1000})
	wantStatus(t, rec, pendingReview, "")
	if b := requests[*builderv1.StartBuildRequest](f, "StartBuild"); len(b) != 1 || b[0].Budget.GetMaxTokens() != 1000 {
		t.Errorf("build budget %v", b)
	}
}

// ---- strategy hints ----

// A close STRATEGY memory becomes the plan's strategy hint; a distant one or none gives
// no hint.
func TestStrategyHintReachesPlan(t *testing.T) {
	t.Parallel()
	const strategy = "Task: Add a Goodbye function\nSteps: create greet/goodbye.go"
	for name, tc := range map[string]struct {
		results []*memoryv1.MemorySearchResult
		want    string
	}{
		"close": {[]*memoryv1.MemorySearchResult{{Memory: &memoryv1.Memory{Id: "m-s", Content: strategy}, Score: &memoryv1.MemoryScore{Similarity: 0.8}}},
			learn.StrategyHint(strategy, 0.8)},
		"distant": {[]*memoryv1.MemorySearchResult{{Memory: &memoryv1.Memory{Id: "m-s", Content: strategy}, Score: &memoryv1.MemoryScore{Similarity: 0.1}}}, ""},
		"none":    {nil, ""},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFakes()
			f.SearchMemories = func(req *memoryv1.SearchMemoriesRequest) (*memoryv1.SearchMemoriesResponse, error) {
				if isStrategySearch(req) {
					return &memoryv1.SearchMemoriesResponse{Results: tc.results}, nil
				}
				return &memoryv1.SearchMemoriesResponse{}, nil
			}
			h := newHarness(t, f, testConfig())
			rec := h.start(nil)
			wantStatus(t, rec, pendingReview, "")
			var strat []*memoryv1.SearchMemoriesRequest
			for _, s := range requests[*memoryv1.SearchMemoriesRequest](f, "SearchMemories") {
				if isStrategySearch(s) {
					strat = append(strat, s)
				}
			}
			if len(strat) != 1 || strat[0].Repo != testRepo || strat[0].Limit != 1 || !strings.Contains(strat[0].Query, taskTitle) {
				t.Fatalf("strategy searches %v", strat)
			}
			plans := requests[*aiv1.PlanTaskRequest](f, "PlanTask")
			if len(plans) != 1 || plans[0].StrategyHint != tc.want {
				t.Fatalf("plan's strategy hint %q, want %q", plans[0].GetStrategyHint(), tc.want)
			}
			if got := anyContains(h.thoughts(rec.Job.Id), "strategy hint from memory m-s"); got != (tc.want != "") {
				t.Errorf("strategy thought %v, want %v", got, tc.want != "")
			}
		})
	}
}

// ---- memory outages ----

// memoryDown are the ways memory fails that must never block a job.
func memoryDown() map[string]error {
	return map[string]error{
		"unavailable":       status.Error(codes.Unavailable, "memory is down"),
		"breaker open":      &breaker.OpenError{Service: "memory", Failures: 5, RetryAt: time.Now().Add(time.Minute)},
		"permission denied": status.Error(codes.PermissionDenied, "memory refuses"),
	}
}

// Memory failing while the context is gathered: the job plans without memories or a
// strategy hint and says so; it neither fails nor pauses.
func TestMemoryOutageDuringGatherDoesNotBlock(t *testing.T) {
	t.Parallel()
	for name, merr := range memoryDown() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFakes()
			f.SearchMemories = func(*memoryv1.SearchMemoriesRequest) (*memoryv1.SearchMemoriesResponse, error) { return nil, merr }
			h := newHarness(t, f, testConfig())
			rec := h.start(nil)
			wantStatus(t, rec, pendingReview, "")
			plans := requests[*aiv1.PlanTaskRequest](f, "PlanTask")
			if len(plans) != 1 || len(plans[0].Memories) != 0 || plans[0].StrategyHint != "" {
				t.Fatalf("plan requests %v", plans)
			}
			want := "memory unavailable (" + status.Convert(merr).Message() + "): going on without memories and strategy hints"
			if th := h.thoughts(rec.Job.Id); !slices.Contains(th, want) {
				t.Errorf("thoughts %q, want %q", th, want)
			}
		})
	}
}

// Memory failing when a missing_context diagnosis asks for more memories: the job plans
// again with the memories it has.
func TestMemoryOutageDuringPlanDoesNotBlock(t *testing.T) {
	t.Parallel()
	for name, merr := range memoryDown() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFakes()
			f.Build = failing(1)
			f.Diagnose = func(int, *aiv1.DiagnoseFailureRequest) (*aiv1.DiagnoseFailureResponse, error) {
				return &aiv1.DiagnoseFailureResponse{Category: aiv1.FailureCategory_FAILURE_CATEGORY_MISSING_CONTEXT, Reason: "more"}, nil
			}
			f.SearchMemories = func(req *memoryv1.SearchMemoriesRequest) (*memoryv1.SearchMemoriesResponse, error) {
				if f.count("DiagnoseFailure") > 0 {
					return nil, merr
				}
				if isStrategySearch(req) {
					return &memoryv1.SearchMemoriesResponse{}, nil
				}
				return &memoryv1.SearchMemoriesResponse{Results: []*memoryv1.MemorySearchResult{{Memory: &memoryv1.Memory{Id: "m-" + req.Types[0].String(), Content: "x"}}}}, nil
			}
			h := newHarness(t, f, testConfig())
			rec := h.start(nil)
			wantStatus(t, rec, pendingReview, "")
			plans := requests[*aiv1.PlanTaskRequest](f, "PlanTask")
			if len(plans) != 2 || len(plans[1].Memories) != 2 {
				t.Fatalf("%d plans; the second with memories %v, want the 2 gathered before", len(plans), plans[len(plans)-1].GetMemories())
			}
			want := "memory unavailable (" + status.Convert(merr).Message() + "): going on without more memories"
			if th := h.thoughts(rec.Job.Id); !slices.Contains(th, want) {
				t.Errorf("thoughts %q, want %q", th, want)
			}
		})
	}
}

// Memory failing when the job remembers what it learned: the pull request is opened and
// the job completes all the same.
func TestMemoryOutageDuringCompleteDoesNotBlock(t *testing.T) {
	t.Parallel()
	for name, merr := range memoryDown() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newFakes()
			f.StoreMemory = func(*memoryv1.StoreMemoryRequest) (*memoryv1.StoreMemoryResponse, error) { return nil, merr }
			h := newHarness(t, f, testConfig())
			rec := h.start(nil)
			wantStatus(t, rec, pendingReview, "")
			rec = h.approve(rec.Job.Id)
			wantStatus(t, rec, completed, "pull request")
			if f.count("StoreMemory") == 0 || f.count("CreatePullRequest") != 1 || !rec.State.Done["memories"] {
				t.Errorf("store calls %d, pull requests %d, done %v", f.count("StoreMemory"), f.count("CreatePullRequest"), rec.State.Done)
			}
			want := "memory unavailable (" + status.Convert(merr).Message() + "): going on without remembering what this job learned"
			if th := h.thoughts(rec.Job.Id); !slices.Contains(th, want) {
				t.Errorf("thoughts %q, want %q", th, want)
			}
		})
	}
}

// ---- repository permission ----

// The owner's access to the repository is checked before any work: read-only (or no)
// access fails the job at once (the branch and pull request would be refused after all
// the work), as a permanent error, not retried.
func TestGatherRefusesReadOnlyRepo(t *testing.T) {
	t.Parallel()
	for perm, access := range map[githubv1.RepoRole]string{githubv1.RepoRole_REPO_ROLE_READ: "read", githubv1.RepoRole_REPO_ROLE_NONE: "none"} {
		t.Run(access, func(t *testing.T) {
			t.Parallel()
			f := newFakes()
			f.GetRepo = func(*githubv1.GetRepoRequest) (*githubv1.GetRepoResponse, error) {
				return &githubv1.GetRepoResponse{Repo: &githubv1.Repo{Permission: perm}}, nil
			}
			h := newHarness(t, f, testConfig())
			rec := h.start(nil)
			wantStatus(t, rec, failed, "may not write to local/r ("+access+" access)")
			if !strings.HasPrefix(rec.Job.Error, "context: the task's owner may not write") {
				t.Errorf("job error %q", rec.Job.Error)
			}
			if r := requests[*githubv1.GetRepoRequest](f, "GetRepo"); len(r) != 1 || r[0].Repo != testRepo {
				t.Errorf("GetRepo requests %v", r)
			}
			if n := f.count("GetTree") + f.count("SearchMemories") + f.count("AssessConfidence"); n != 0 {
				t.Errorf("%d calls after the refusal", n)
			}
			if got := f.taskStatuses(); got[len(got)-1] != tasksv1.TaskStatus_TASK_STATUS_BLOCKED {
				t.Errorf("task statuses %v", got)
			}
			if rec.State.RunErrors != 0 {
				t.Errorf("run errors %d: a refusal is not retried", rec.State.RunErrors)
			}
		})
	}
}

// Write access (or more, or a repository that does not say) lets the job go on.
func TestGatherAllowsWritableRepo(t *testing.T) {
	t.Parallel()
	for _, perm := range []githubv1.RepoRole{githubv1.RepoRole_REPO_ROLE_WRITE, githubv1.RepoRole_REPO_ROLE_ADMIN, githubv1.RepoRole_REPO_ROLE_UNSPECIFIED} {
		t.Run(perm.String(), func(t *testing.T) {
			t.Parallel()
			f := newFakes()
			f.GetRepo = func(*githubv1.GetRepoRequest) (*githubv1.GetRepoResponse, error) {
				return &githubv1.GetRepoResponse{Repo: &githubv1.Repo{Permission: perm}}, nil
			}
			h := newHarness(t, f, testConfig())
			rec := h.start(nil)
			wantStatus(t, rec, pendingReview, "")
			if f.count("GetTree") == 0 {
				t.Error("the tree was not read")
			}
		})
	}
}

// A GetRepo the fakes do not answer (UNIMPLEMENTED) fails the job as a permanent error:
// the fakes' base answers really reach the loop.
func TestUnscriptedCallFailsJob(t *testing.T) {
	t.Parallel()
	f := newFakes()
	f.GetRepo = func(req *githubv1.GetRepoRequest) (*githubv1.GetRepoResponse, error) {
		return githubv1.NewRepoServiceClient(unimplemented{}).GetRepo(t.Context(), req)
	}
	h := newHarness(t, f, testConfig())
	rec := h.start(nil)
	wantStatus(t, rec, failed, "GetRepo is not scripted")
}

// The contrast to the memory outages: a service the job cannot go on without (ai) behind
// an open circuit breaker pauses the job until the breaker lets calls through.
func TestAIOutagePausesJob(t *testing.T) {
	t.Parallel()
	f := newFakes()
	retry := time.Now().Add(time.Minute)
	f.PlanTask = func(*aiv1.PlanTaskRequest) (*aiv1.PlanTaskResponse, error) {
		return nil, &breaker.OpenError{Service: "ai", Failures: 5, RetryAt: retry}
	}
	h := newHarness(t, f, testConfig())
	rec := h.start(nil)
	wantStatus(t, rec, paused, "circuit breaker for ai is open")
	if rec.Job.Phase != phasePlanning || !rec.State.AutoResumeAt.After(retry) {
		t.Errorf("phase %v, auto resume at %v (breaker retry at %v)", rec.Job.Phase, rec.State.AutoResumeAt, retry)
	}
}
