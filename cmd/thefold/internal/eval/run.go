package eval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/thefold/thefold/cmd/thefold/internal/api"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
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
	API *api.Client
	// Sandboxes is the sandbox service (gRPC: it has no REST route for creating one); Auth
	// adds the caller's credentials to a context for it.
	Sandboxes sandboxv1.SandboxServiceClient
	Auth      func(context.Context) context.Context
	// RepoPrefix starts each task's repository name, e.g. "local/eval-20260101-120000-".
	RepoPrefix string
	// Timeout bounds one task's job, from its start to the review; Parallel is how many tasks
	// run at once; Poll how often a job is read (default 1s).
	Timeout  time.Duration
	Parallel int
	Poll     time.Duration
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
	files := make([]api.File, len(t.Repo))
	for i, f := range t.Repo {
		files[i] = api.File{Path: f.Path, Content: f.Content}
	}
	if _, err := r.API.CreateRepo(ctx, res.Repo, "eval task "+t.ID+": the starting files", files); err != nil {
		res.Reason = "harness: " + err.Error()
		return res
	}
	start := time.Now()
	_, jobID, err := r.API.StartTask(ctx, res.Repo, t.TitleWithMarker(), t.Description)
	if err != nil {
		res.Reason = "harness: " + err.Error()
		return res
	}
	res.JobID = jobID
	r.logf(t.ID, "job %s on %s", jobID, res.Repo)
	last := ""
	poll := r.Poll
	if poll == 0 {
		poll = time.Second
	}
	job, werr := r.API.WaitJob(ctx, jobID, "JOB_STATUS_PENDING_REVIEW", r.Timeout, poll, func(j *api.Job) {
		if now := short(j.Status) + " " + short(j.Phase); now != last {
			r.logf(t.ID, "%s (attempt %d)", now, j.Attempt)
			last = now
		}
	})
	res.Wall = time.Since(start)
	// A harness context of its own from here: what the job spent is read, and what it holds
	// released, also after a timeout or an interrupt.
	hctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
	defer cancel()
	if job != nil {
		res.JobStatus = short(job.Status)
	}
	r.collect(hctx, &res, job)
	if werr != nil {
		res.Reason = jobReason(job, werr)
		if job == nil || !terminal(job.Status) {
			if err := r.API.Do(hctx, http.MethodPost, "/v1/jobs/"+jobID+":cancel", map[string]any{"reason": "thefold eval: " + firstLine(res.Reason)}, nil); err != nil {
				r.logf(t.ID, "cancelling job %s: %v", jobID, err)
			}
		}
		return res
	}
	defer func() {
		if err := r.API.Do(hctx, http.MethodPost, "/v1/reviews/"+job.ReviewID+":reject", map[string]any{"reason": "thefold eval: measured by its hidden tests, not merged"}, nil); err != nil {
			r.logf(t.ID, "rejecting review %s: %v", job.ReviewID, err)
		}
	}()
	review, err := r.API.GetReview(hctx, job.ReviewID)
	if err != nil {
		res.Reason = "harness: read the review: " + err.Error()
		return res
	}
	for _, f := range review.Files {
		res.Files = append(res.Files, f.Diff.Path)
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

// collect reads what the job spent: attempts, its builds' fix rounds, tokens, cost, models.
func (r *Runner) collect(ctx context.Context, res *Result, job *api.Job) {
	if res.JobID == "" {
		return
	}
	if job != nil {
		res.Attempts = int(job.Attempt)
		res.InputTokens, res.OutputTokens, res.CostMicros = int64(job.Usage.InputTokens), int64(job.Usage.OutputTokens), int64(job.Usage.CostMicros)
		if job.Model != "" {
			res.Models = append(res.Models, job.Model)
		}
	}
	if m, err := r.API.JobMetrics(ctx, res.JobID); err == nil {
		res.InputTokens, res.OutputTokens, res.CostMicros = int64(m.Total.InputTokens), int64(m.Total.OutputTokens), int64(m.Total.CostMicros)
		for _, p := range m.Phases {
			res.Phases = append(res.Phases, PhaseTime{Phase: strings.ToLower(short(p.Phase)), Wall: time.Duration(p.Duration)})
			for _, model := range p.Models {
				if !slices.Contains(res.Models, model) {
					res.Models = append(res.Models, model)
				}
			}
		}
	}
	if builds, err := r.API.JobBuilds(ctx, res.JobID); err == nil {
		for _, b := range builds {
			res.FixRounds += int(b.Report.FixRounds)
		}
	}
}

// terminal statuses: nothing to cancel.
func terminal(status string) bool {
	switch status {
	case "JOB_STATUS_COMPLETED", "JOB_STATUS_FAILED", "JOB_STATUS_CANCELLED", "JOB_STATUS_SKIPPED", "JOB_STATUS_REJECTED":
		return true
	}
	return false
}

// jobReason says why a job did not reach review.
func jobReason(job *api.Job, err error) string {
	var stopped *api.StoppedError
	if errors.As(err, &stopped) {
		j := stopped.Job
		why := j.Error
		if why == "" {
			why = j.StatusReason
		}
		if j.Status == "JOB_STATUS_COMPLETED" {
			why = "completed without a review (broken down into subtasks?) " + why
		}
		if j.LastDiagnosis.Category != "" && !strings.Contains(why, j.LastDiagnosis.Reason) {
			why += fmt.Sprintf(" (last diagnosis %s: %s)", short(j.LastDiagnosis.Category), j.LastDiagnosis.Reason)
		}
		return "job " + short(j.Status) + ": " + strings.TrimSpace(why)
	}
	if job != nil {
		return fmt.Sprintf("job stopped waiting in %s %s: %v", short(job.Status), short(job.Phase), err)
	}
	return "harness: " + err.Error()
}

// short drops an enum's prefix: JOB_STATUS_RUNNING → RUNNING.
func short(enum string) string {
	for _, p := range []string{"JOB_STATUS_", "JOB_PHASE_", "DIAGNOSIS_CATEGORY_"} {
		if s, ok := strings.CutPrefix(enum, p); ok {
			return s
		}
	}
	return enum
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
