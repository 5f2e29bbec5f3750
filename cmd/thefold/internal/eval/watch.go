package eval

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/wait"
)

// stopped are the statuses a job does not leave by itself: terminal, or waiting for a person
// to answer. (PENDING_REVIEW is not one: a job approved a moment ago still shows it.)
var stopped = []agentv1.JobStatus{
	agentv1.JobStatus_JOB_STATUS_FAILED, agentv1.JobStatus_JOB_STATUS_CANCELLED, agentv1.JobStatus_JOB_STATUS_HUMAN_NEEDED,
	agentv1.JobStatus_JOB_STATUS_REJECTED, agentv1.JobStatus_JOB_STATUS_SKIPPED, agentv1.JobStatus_JOB_STATUS_COMPLETED,
	agentv1.JobStatus_JOB_STATUS_WAITING_CLARIFICATION,
}

// stoppedError is a job that stopped somewhere other than where it was waited for.
type stoppedError struct {
	job *agentv1.Job
}

func (e *stoppedError) Error() string {
	why := e.job.GetError()
	if why == "" {
		why = e.job.GetStatusReason()
	}
	return fmt.Sprintf("job %s ended %s: %s", e.job.GetId(), e.job.GetStatus(), why)
}

// reconnectPause is how long a watch whose stream broke (the agent restarting) waits before
// it opens the stream again.
const reconnectPause = 500 * time.Millisecond

// waitJob follows job (as StartTask returned it) on AgentService.WatchJob until it reaches
// want, calling progress with the job's status, phase and attempt first and at each change
// of them. The job returned is read once it stops (or the wait does), so it holds what the
// job spent, its review and its last diagnosis. A job that stops elsewhere (failed, needs a
// human, …) is a *stoppedError holding it; one still going after limit is an error saying
// where it is.
func (r *Runner) waitJob(ctx context.Context, job *agentv1.Job, want agentv1.JobStatus, limit time.Duration, progress func(*agentv1.Job)) (*agentv1.Job, error) {
	// cur is the job as its events tell it: enough for the progress lines and for saying
	// where a wait that ends early stopped.
	cur := &agentv1.Job{Id: job.GetId(), Status: job.GetStatus(), StatusReason: job.GetStatusReason(), Phase: job.GetPhase(), Attempt: job.GetAttempt()}
	progress(cur)
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	deadline, _ := wctx.Deadline()
	// over reports whether the wait is over: its context's end can trail the stream's own
	// timer, which ends the stream with DeadlineExceeded (or, when the server saw it first,
	// cleanly) a moment before.
	over := func() bool { return wctx.Err() != nil || !time.Now().Before(deadline) }
	// From the job's first event (after_id 0 replays what the agent retains): the job was
	// started a moment ago, so nothing it did before the stream opened is missed. After a
	// reconnection, from the last event seen.
	var (
		cursor int64
		stream agentv1.AgentService_WatchJobClient
		err    error
	)
	for {
		if stream == nil {
			stream, err = r.Client.Agent().WatchJob(wctx, &agentv1.WatchJobRequest{Id: cur.Id, AfterId: cursor})
		}
		var ev *agentv1.WatchJobResponse
		if err == nil {
			ev, err = stream.Recv()
		}
		switch {
		case err != nil && over():
			return r.notThere(ctx, cur, limit)
		case errors.Is(err, io.EOF):
			// The stream of a finished job ends after its last event: the read says how.
			return r.settled(ctx, cur, want, true)
		case status.Code(err) == codes.Unavailable:
			// The agent restarted: go on from the last event seen.
			stream, err = nil, wait.Sleep(wctx, reconnectPause)
			if err != nil {
				return r.notThere(ctx, cur, limit)
			}
			continue
		case err != nil:
			return nil, fmt.Errorf("watch job %s: %w", cur.Id, err)
		}
		if hb := ev.GetHeartbeat(); hb != nil {
			cursor = max(cursor, hb.GetCursor())
			if hb.GetEnd() {
				return r.settled(ctx, cur, want, true)
			}
			continue
		}
		cursor = max(cursor, ev.GetId())
		switch p := ev.GetPayload().(type) {
		case *agentv1.WatchJobResponse_StatusChange:
			cur.Status, cur.StatusReason = p.StatusChange.GetStatus(), p.StatusChange.GetReason()
		case *agentv1.WatchJobResponse_PhaseChanged:
			cur.Phase, cur.Attempt = p.PhaseChanged.GetPhase(), p.PhaseChanged.GetAttempt()
		default:
			continue
		}
		progress(cur)
		if cur.Status == want || slices.Contains(stopped, cur.Status) {
			if j, err := r.settled(ctx, cur, want, false); j == nil || err != nil || j.GetStatus() == want {
				return j, err
			}
		}
	}
}

// settled reads the job its events say stopped: at want it is the answer, stopped elsewhere
// a *stoppedError. A job that went on since (a person answered it) is returned without an
// error for the watch to go on, unless its stream has ended (final).
func (r *Runner) settled(ctx context.Context, cur *agentv1.Job, want agentv1.JobStatus, final bool) (*agentv1.Job, error) {
	got, err := r.Client.Agent().GetJob(ctx, &agentv1.GetJobRequest{Id: cur.Id})
	if err != nil {
		return nil, err
	}
	j := got.GetJob()
	switch {
	case j.GetStatus() == want:
		return j, nil
	case slices.Contains(stopped, j.GetStatus()):
		return j, &stoppedError{job: j}
	case final:
		return j, fmt.Errorf("job %s's stream ended while it is %s (%s)", j.GetId(), j.GetStatus(), j.GetPhase())
	}
	return j, nil
}

// notThere is the answer of a wait that ended before the job stopped: limit passed, or ctx
// ended. The job is read (outside ctx, which may be over) to say where it is.
func (r *Runner) notThere(ctx context.Context, cur *agentv1.Job, limit time.Duration) (*agentv1.Job, error) {
	j := cur
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer cancel()
	if got, err := r.Client.Agent().GetJob(rctx, &agentv1.GetJobRequest{Id: cur.Id}); err == nil {
		j = got.GetJob()
	}
	if ctx.Err() != nil {
		return j, ctx.Err()
	}
	return j, fmt.Errorf("job %s is still %s (%s) after %s", j.GetId(), j.GetStatus(), j.GetPhase(), limit)
}
