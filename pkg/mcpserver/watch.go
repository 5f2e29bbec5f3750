package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/jsonschema-go/jsonschema"
	mcp "github.com/modelcontextprotocol/go-sdk/mcp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/protoenum"
	"github.com/thefold/thefold/pkg/wait"
)

// watch_job's timeout bounds, in seconds.
const (
	defaultWatch = 120
	maxWatch     = 600
)

// Between two events, a heartbeat of the stream becomes a progress notification at most
// this often, so that a client that resets its timeout on progress keeps waiting.
const quietProgress = 15 * time.Second

type WatchInput struct {
	JobID          string `json:"job_id" jsonschema:"the job to watch"`
	TimeoutSeconds int    `json:"timeout_seconds,omitempty" jsonschema:"how long to wait at most, in seconds (1–600, default 120); call again to wait longer"`
}

var watchSchema = schemaOf[WatchInput](func(p map[string]*jsonschema.Schema) {
	bounds(p["timeout_seconds"], 1, maxWatch, defaultWatch)
})

// WatchResult is watch_job's result.
type WatchResult struct {
	Job      Job  `json:"job"`
	TimedOut bool `json:"timed_out" jsonschema:"true when the timeout came first and the job is still moving: watch again to wait longer"`
	Events   int  `json:"events" jsonschema:"events of the job seen while watching"`
}

// checkWatch checks watch_job's input; a zero timeout is the default.
func checkWatch(in WatchInput) (string, time.Duration, error) {
	jobID, err := id("job_id", in.JobID)
	if err != nil {
		return "", 0, err
	}
	switch {
	case in.TimeoutSeconds == 0:
		in.TimeoutSeconds = defaultWatch
	case in.TimeoutSeconds < 0 || in.TimeoutSeconds > maxWatch:
		return "", 0, errs.Invalid("timeout_seconds", "must be 1–%d, got %d", maxWatch, in.TimeoutSeconds)
	}
	return jobID, time.Duration(in.TimeoutSeconds) * time.Second, nil
}

// watchJob follows AgentService.WatchJob until the job stops or the timeout passes. The
// stream is opened from now and its first message (a heartbeat, sent once its cursor is
// fixed) is read before the job is: a change after that read is on the stream, so a job
// that stops in between is not waited for in vain.
func (t *tools) watchJob(ctx context.Context, req *mcp.CallToolRequest, in WatchInput) (WatchResult, string, error) {
	jobID, timeout, err := checkWatch(in)
	if err != nil {
		return WatchResult{}, "", callError("", err)
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p := newProgress(req)

	stream, err := t.c.Agent().WatchJob(wctx, &agentv1.WatchJobRequest{Id: jobID, FromNow: true})
	var cursor int64
	if err == nil {
		var first *agentv1.WatchJobResponse
		if first, err = stream.Recv(); err == nil {
			cursor = first.GetHeartbeat().GetCursor()
		}
	}
	// The watch's own deadline, not the caller's: the server, which got the deadline with
	// the call, may end the stream (DEADLINE_EXCEEDED) a moment before wctx's timer fires here.
	timedOut := func(err error) bool {
		return ctx.Err() == nil && (wctx.Err() != nil || statusCode(err) == codes.DeadlineExceeded)
	}
	if err != nil && !timedOut(err) {
		return WatchResult{}, "", callError("watch the job", err)
	}
	expired := err != nil
	job, err := t.job(ctx, jobID)
	if err != nil {
		return WatchResult{}, "", err
	}
	status := job.GetStatus()
	res := WatchResult{}
	for done := stopStatuses[status] || expired; !done && wctx.Err() == nil; {
		msg, err := stream.Recv()
		switch {
		case errors.Is(err, io.EOF):
			// The stream of a finished job ends; the job read below says how.
			done = true
			continue
		case err != nil && timedOut(err):
			done = true
			continue
		case err != nil && statusCode(err) == codes.Unavailable:
			// The agent restarted: go on from the last event seen.
			if stream, err = t.reopen(wctx, jobID, cursor); err != nil && wctx.Err() == nil {
				return WatchResult{}, "", callError("watch the job", err)
			}
			continue
		case err != nil:
			return WatchResult{}, "", callError("watch the job", err)
		}
		if hb := msg.GetHeartbeat(); hb != nil {
			cursor = max(cursor, hb.GetCursor())
			done = hb.GetEnd()
			if !done {
				p.quiet(ctx, "still "+protoenum.Name(status, "JOB_STATUS_"))
			}
			continue
		}
		cursor = max(cursor, msg.GetId())
		res.Events++
		if sc := msg.GetStatusChange(); sc != nil {
			status = sc.GetStatus()
			done = stopStatuses[status]
		}
		p.send(ctx, eventText(msg))
	}
	if job, err = t.job(ctx, jobID); err != nil {
		return WatchResult{}, "", err
	}
	res.Job = jobView(job)
	res.TimedOut = !res.Job.Stopped
	text := jobText(res.Job)
	if res.TimedOut {
		text = fmt.Sprintf("Job %s is still %s (phase %s) after %s: call watch_job again to wait longer.", res.Job.ID, res.Job.Status, res.Job.Phase, timeout)
	}
	return res, text, nil
}

// reopen opens the job's stream again after cursor, after a moment's pause.
func (t *tools) reopen(ctx context.Context, jobID string, cursor int64) (agentv1.AgentService_WatchJobClient, error) {
	if err := wait.Sleep(ctx, 500*time.Millisecond); err != nil {
		return nil, err
	}
	return t.c.Agent().WatchJob(ctx, &agentv1.WatchJobRequest{Id: jobID, AfterId: cursor})
}

func statusCode(err error) codes.Code {
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		return se.GRPCStatus().Code()
	}
	return status.Code(err)
}

// progress sends a call's progress notifications, when the client asked for them with a
// progress token; otherwise it does nothing.
type progress struct {
	req   *mcp.CallToolRequest
	token any
	n     float64
	last  time.Time
}

func newProgress(req *mcp.CallToolRequest) *progress {
	p := &progress{req: req, last: time.Now()}
	if req != nil && req.Params != nil && req.Session != nil {
		p.token = req.Params.GetProgressToken()
	}
	return p
}

func (p *progress) send(ctx context.Context, msg string) {
	if p.token == nil {
		return
	}
	p.n++
	p.last = time.Now()
	// A client that went away ends the call through ctx; a lost notification is no error.
	_ = p.req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{ProgressToken: p.token, Progress: p.n, Message: msg})
}

// quiet sends msg when nothing was sent for a while.
func (p *progress) quiet(ctx context.Context, msg string) {
	if time.Since(p.last) >= quietProgress {
		p.send(ctx, msg)
	}
}

// eventText is a job event as a line of progress.
func eventText(e *agentv1.WatchJobResponse) string {
	switch {
	case e.GetStatusChange() != nil:
		s := "status: " + protoenum.Name(e.GetStatusChange().GetStatus(), "JOB_STATUS_")
		if r := e.GetStatusChange().GetReason(); r != "" {
			s += " (" + cutText(r, 200) + ")"
		}
		return s
	case e.GetPhaseChanged() != nil:
		s := "phase: " + protoenum.Name(e.GetPhaseChanged().GetPhase(), "JOB_PHASE_")
		if a := e.GetPhaseChanged().GetAttempt(); a > 0 {
			s += fmt.Sprintf(" (attempt %d)", a)
		}
		return s
	case e.GetProgress() != nil:
		pr := e.GetProgress()
		s := fmt.Sprintf("build: step %d of %d", pr.GetCurrentStep(), pr.GetTotalSteps())
		if pr.GetFilePath() != "" {
			s += ", " + pr.GetFilePath()
		}
		return s
	case e.GetThought() != nil:
		return cutText(e.GetThought().GetText(), 300)
	case e.GetClarificationRequested() != nil:
		return "question: " + cutText(e.GetClarificationRequested().GetQuestion(), 300)
	case e.GetPlan() != nil:
		return fmt.Sprintf("plan: %d steps (revision %d)", len(e.GetPlan().GetPlan().GetSteps()), e.GetPlan().GetRevision())
	case e.GetDiagnosis() != nil:
		return "diagnosis: " + protoenum.Name(e.GetDiagnosis().GetCategory(), "DIAGNOSIS_CATEGORY_") + ": " + cutText(e.GetDiagnosis().GetReason(), 200)
	case e.GetReviewSubmitted() != nil:
		return fmt.Sprintf("review %s submitted (quality %d/10)", e.GetReviewSubmitted().GetReviewId(), e.GetReviewSubmitted().GetQualityScore())
	case e.GetPullRequest() != nil:
		return "pull request opened: " + e.GetPullRequest().GetUrl()
	case e.GetBudgetExhausted() != nil:
		return "budget exhausted at " + dollars(e.GetBudgetExhausted().GetUsage().GetCostMicros())
	}
	return protoenum.Name(e.GetType(), "JOB_EVENT_TYPE_")
}
