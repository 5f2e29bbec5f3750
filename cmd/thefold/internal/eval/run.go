package eval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/thefold/thefold/pkg/client"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// Result is what one task came to.
type Result struct {
	ID       string `json:"id"`
	Language string `json:"language"`
	Kind     string `json:"kind"`
	Title    string `json:"title"`
	// Passed: the job reached review and the hidden tests passed on what it holds.
	Passed bool `json:"passed"`
	// Reason says why it did not pass (or, when it passed, is empty).
	Reason string `json:"reason,omitempty"`
	Repo   string `json:"repo,omitempty"`
	JobID  string `json:"job_id,omitempty"`
	// JobStatus is where the job stopped (PENDING_REVIEW when it reached review).
	JobStatus string `json:"job_status,omitempty"`
	// Attempts is the job's attempt count; FixRounds the fix rounds of all its builds.
	Attempts  int `json:"attempts"`
	FixRounds int `json:"fix_rounds"`
	// Tokens and cost of every model call the job made.
	InputTokens  int64 `json:"input_tokens"`
	OutputTokens int64 `json:"output_tokens"`
	CostMicros   int64 `json:"cost_micros"`
	// Models are the model ids the job used.
	Models []string `json:"models,omitempty"`
	// Wall is the time from starting the job to its review (or its stop); TestWall the
	// hidden tests' run, sandbox included.
	Wall     time.Duration `json:"wall_ns"`
	TestWall time.Duration `json:"test_wall_ns"`
	// Phases are the job's phases in loop order, with the wall time spent in each.
	Phases []PhaseTime `json:"phases,omitempty"`
	// Files are the paths the review changed.
	Files []string `json:"files,omitempty"`
	// TestOutput is the tail of the hidden tests' output.
	TestOutput string `json:"test_output,omitempty"`
}

// PhaseTime is the time a job spent in one phase of its loop (all attempts).
type PhaseTime struct {
	Phase string        `json:"phase"`
	Wall  time.Duration `json:"wall_ns"`
}

// Runner runs tasks through the mesh.
type Runner struct {
	// Client is the stack's gRPC API, called as the stack's admin: the local forge, tasks,
	// jobs, reviews, builds, and the sandboxes the hidden tests run in.
	Client *client.Client
	// RepoPrefix starts each task's repository name, e.g. "local/eval-20260101-120000-".
	RepoPrefix string
	// Timeout bounds one task's job, from its start to the review; Parallel is how many tasks
	// run at once.
	Timeout  time.Duration
	Parallel int
	// Log gets a line per change of a task's job and per result; nil for none.
	Log io.Writer

	mu sync.Mutex
}

// Run runs tasks, Parallel at a time, and returns their results in the tasks' order. It
// stops starting tasks when ctx ends; tasks not run say so.
func (r *Runner) Run(ctx context.Context, tasks []*Task) []Result {
	results := make([]Result, len(tasks))
	par := max(r.Parallel, 1)
	sem := make(chan struct{}, par)
	var wg sync.WaitGroup
	for i, t := range tasks {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			results[i] = r.base(t)
			results[i].Reason = "not run: " + ctx.Err().Error()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = r.runOne(ctx, t)
			res := results[i]
			verdict := "PASS"
			if !res.Passed {
				verdict = "FAIL: " + firstLine(res.Reason)
			}
			r.logf(t.ID, "%s (%s, %d attempt(s), %d fix round(s))", verdict, res.Wall.Round(time.Second), res.Attempts, res.FixRounds)
		}()
	}
	wg.Wait()
	return results
}

func (r *Runner) base(t *Task) Result {
	return Result{ID: t.ID, Language: t.Language, Kind: t.Kind, Title: t.Title}
}

func (r *Runner) logf(id, format string, args ...any) {
	if r.Log == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.Log, "  %-22s %s\n", id, fmt.Sprintf(format, args...))
}

// runOne takes one task through the mesh: its repository on the local forge, the task and
// its job to the review gate, the hidden tests on the review's files in a fresh sandbox, and
// the review rejected (the eval measures; it merges nothing).
func (r *Runner) runOne(ctx context.Context, t *Task) Result {
	res := r.base(t)
	res.Repo = r.RepoPrefix + t.ID
	if err := r.createRepo(ctx, res.Repo, "eval task "+t.ID+": the starting files", t.Repo); err != nil {
		res.Reason = "harness: " + err.Error()
		return res
	}
	start := time.Now()
	started, err := r.startTask(ctx, res.Repo, t.TitleWithMarker(), t.Description)
	if err != nil {
		res.Reason = "harness: " + err.Error()
		return res
	}
	jobID := started.GetId()
	res.JobID = jobID
	r.logf(t.ID, "job %s on %s", jobID, res.Repo)
	last := ""
	job, werr := r.waitJob(ctx, started, agentv1.JobStatus_JOB_STATUS_PENDING_REVIEW, r.Timeout, func(j *agentv1.Job) {
		if now := short(j.GetStatus()) + " " + short(j.GetPhase()); now != last {
			r.logf(t.ID, "%s (attempt %d)", now, j.GetAttempt())
			last = now
		}
	})
	res.Wall = time.Since(start)
	// A harness context of its own from here: what the job spent is read, and what it holds
	// released, also after a timeout or an interrupt.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
	defer cancel()
	if job != nil {
		res.JobStatus = short(job.GetStatus())
	}
	r.collect(hctx, &res, job)
	if werr != nil {
		res.Reason = jobReason(job, werr)
		if job == nil || !terminal(job.GetStatus()) {
			if _, err := r.Client.Agent().CancelJob(hctx, &agentv1.CancelJobRequest{Id: jobID, Reason: "thefold eval: " + firstLine(res.Reason)}); err != nil {
				r.logf(t.ID, "cancelling job %s: %v", jobID, err)
			}
		}
		return res
	}
	reviewID := job.GetReviewId()
	defer func() {
		if _, err := r.Client.Reviews().RejectReview(hctx, &agentv1.RejectReviewRequest{Id: reviewID, Reason: "thefold eval: measured by its hidden tests, not merged"}); err != nil {
			r.logf(t.ID, "rejecting review %s: %v", reviewID, err)
		}
	}()
	got, err := r.Client.Reviews().GetReview(hctx, &agentv1.GetReviewRequest{Id: reviewID})
	if err != nil {
		res.Reason = "harness: read the review: " + err.Error()
		return res
	}
	review := got.GetReview()
	for _, f := range review.GetFiles() {
		res.Files = append(res.Files, f.GetDiff().GetPath())
	}
	if ctx.Err() != nil {
		res.Reason = "not tested: " + ctx.Err().Error()
		return res
	}
	began := time.Now()
	passed, output, err := r.hiddenTests(ctx, t, res.Repo, review)
	res.TestWall = time.Since(began)
	res.TestOutput = output
	switch {
	case err != nil:
		res.Reason = "harness: hidden tests: " + err.Error()
	case !passed:
		res.Reason = "hidden tests failed"
	default:
		res.Passed = true
	}
	return res
}

// createRepo creates repo ("local/name") on the local forge with files as its initial
// commit on main.
func (r *Runner) createRepo(ctx context.Context, repo, message string, files []File) error {
	if _, err := r.Client.Repos().CreateRepo(ctx, &githubv1.CreateRepoRequest{Repo: repo}); err != nil {
		return fmt.Errorf("create %s: %w", repo, err)
	}
	changes := make([]*typev1.FileChange, len(files))
	for i, f := range files {
		changes[i] = &typev1.FileChange{Path: f.Path, Action: typev1.FileAction_FILE_ACTION_CREATE, Content: f.Content}
	}
	if _, err := r.Client.Repos().InitRepo(ctx, &githubv1.InitRepoRequest{Repo: repo, Branch: "main", Message: message, Files: changes}); err != nil {
		return fmt.Errorf("commit to %s: %w", repo, err)
	}
	return nil
}

// startTask creates a task on repo and starts a job for it.
func (r *Runner) startTask(ctx context.Context, repo, title, description string) (*agentv1.Job, error) {
	task, err := r.Client.Tasks().CreateTask(ctx, &tasksv1.CreateTaskRequest{Title: title, Description: description, Repo: repo})
	if err != nil {
		return nil, fmt.Errorf("create the task: %w", err)
	}
	started, err := r.Client.Agent().StartTask(ctx, &agentv1.StartTaskRequest{TaskId: task.GetTask().GetId()})
	if err != nil {
		return nil, fmt.Errorf("start the job: %w", err)
	}
	return started.GetJob(), nil
}

// collect reads what the job spent: attempts, its builds' fix rounds, tokens, cost, models.
func (r *Runner) collect(ctx context.Context, res *Result, job *agentv1.Job) {
	if res.JobID == "" {
		return
	}
	if job != nil {
		res.Attempts = int(job.GetAttempt())
		u := job.GetUsage()
		res.InputTokens, res.OutputTokens, res.CostMicros = u.GetInputTokens(), u.GetOutputTokens(), u.GetCostMicros()
		if job.GetModel() != "" {
			res.Models = append(res.Models, job.GetModel())
		}
	}
	if m, err := r.Client.Agent().GetJobMetrics(ctx, &agentv1.GetJobMetricsRequest{Id: res.JobID}); err == nil {
		u := m.GetTotal()
		res.InputTokens, res.OutputTokens, res.CostMicros = u.GetInputTokens(), u.GetOutputTokens(), u.GetCostMicros()
		for _, p := range m.GetPhases() {
			res.Phases = append(res.Phases, PhaseTime{Phase: strings.ToLower(short(p.GetPhase())), Wall: p.GetDuration().AsDuration()})
			for _, model := range p.GetModels() {
				if !slices.Contains(res.Models, model) {
					res.Models = append(res.Models, model)
				}
			}
		}
	}
	if builds, err := r.jobBuilds(ctx, res.JobID); err == nil {
		for _, b := range builds {
			res.FixRounds += int(b.GetReport().GetFixRounds())
		}
	}
}

// jobBuilds lists a job's builds (one per attempt), newest first.
func (r *Runner) jobBuilds(ctx context.Context, jobID string) ([]*builderv1.BuildJob, error) {
	var out []*builderv1.BuildJob
	req := &builderv1.ListBuildsRequest{JobId: jobID, PageSize: 200}
	for {
		page, err := r.Client.Builder().ListBuilds(ctx, req)
		if err != nil {
			return nil, err
		}
		out = append(out, page.GetBuilds()...)
		if page.GetNextPageToken() == "" {
			return out, nil
		}
		req.PageToken = page.GetNextPageToken()
	}
}

// terminal statuses: nothing to cancel.
func terminal(status agentv1.JobStatus) bool {
	switch status {
	case agentv1.JobStatus_JOB_STATUS_COMPLETED, agentv1.JobStatus_JOB_STATUS_FAILED, agentv1.JobStatus_JOB_STATUS_CANCELLED,
		agentv1.JobStatus_JOB_STATUS_SKIPPED, agentv1.JobStatus_JOB_STATUS_REJECTED:
		return true
	}
	return false
}

// jobReason says why a job did not reach review.
func jobReason(job *agentv1.Job, err error) string {
	var stopped *stoppedError
	if errors.As(err, &stopped) {
		j := stopped.job
		why := j.GetError()
		if why == "" {
			why = j.GetStatusReason()
		}
		if j.GetStatus() == agentv1.JobStatus_JOB_STATUS_COMPLETED {
			why = "completed without a review (broken down into subtasks?) " + why
		}
		if d := j.GetLastDiagnosis(); d.GetCategory() != agentv1.DiagnosisCategory_DIAGNOSIS_CATEGORY_UNSPECIFIED && !strings.Contains(why, d.GetReason()) {
			why += fmt.Sprintf(" (last diagnosis %s: %s)", short(d.GetCategory()), d.GetReason())
		}
		return "job " + short(j.GetStatus()) + ": " + strings.TrimSpace(why)
	}
	if job != nil {
		return fmt.Sprintf("job stopped waiting in %s %s: %v", short(job.GetStatus()), short(job.GetPhase()), err)
	}
	return "harness: " + err.Error()
}

// enum is a generated protobuf enum.
type enum interface {
	protoreflect.Enum
	String() string
}

// short drops an enum's prefix: JOB_STATUS_RUNNING → RUNNING; the zero value (unset) is "".
func short(v enum) string {
	if v.Number() == 0 {
		return ""
	}
	name := v.String()
	for _, p := range []string{"JOB_STATUS_", "JOB_PHASE_", "DIAGNOSIS_CATEGORY_"} {
		if s, ok := strings.CutPrefix(name, p); ok {
			return s
		}
	}
	return name
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
