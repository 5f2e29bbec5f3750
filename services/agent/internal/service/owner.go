package service

import (
	"context"
	"errors"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/services/agent/internal/store"
)

// ReasonOwnerDisabled is the status reason of a job cancelled because its owner was
// disabled.
const ReasonOwnerDisabled = "owner disabled"

// unfinished are the statuses of a job that has not ended.
var unfinished = func() []agentv1.JobStatus {
	var out []agentv1.JobStatus
	for v := range agentv1.JobStatus_name {
		if st := agentv1.JobStatus(v); st != agentv1.JobStatus_JOB_STATUS_UNSPECIFIED && !store.Terminal(st) {
			out = append(out, st)
		}
	}
	return out
}()

// CancelOwnerJobs cancels every unfinished job of owner with reason, as CancelJob does for
// one, and stops those this process runs: the owner was disabled, so nothing may go on in
// their name (auth.RevokeUserDisabled). It runs without a caller: the revocation is the
// authority. The jobs' builds, sandboxes and tasks are not touched here — no service may
// act for a disabled owner any more; the builder stops their builds itself and a sandbox
// expires. It returns how many jobs it cancelled.
func (s *Server) CancelOwnerJobs(ctx context.Context, owner, reason string) (int, error) {
	if owner == "" {
		return 0, errs.Invalid("owner", "required")
	}
	n := 0
	for {
		// Each pass takes the first page again: what it cancels leaves the filter.
		jobs, _, err := s.store.List(ctx, owner, store.ListFilter{Statuses: unfinished}, 100, "")
		if err != nil {
			return n, err
		}
		cancelled := 0
		for _, j := range jobs {
			_, err := s.store.Mutate(ctx, owner, j.Id, func(_ context.Context, _ pgx.Tx, rec *store.Record) (store.Step, error) {
				if store.Terminal(rec.Job.Status) {
					return store.Step{}, errAlreadyEnded
				}
				return s.statusChange(rec, agentv1.JobStatus_JOB_STATUS_CANCELLED, reason, "job_cancelled", nil), nil
			}, nil)
			switch {
			case errors.Is(err, errAlreadyEnded):
				continue // ended meanwhile
			case err != nil:
				return n, err
			}
			if s.o.Stopper != nil {
				s.o.Stopper.Stop(j.Id)
			}
			n++
			cancelled++
			s.log.InfoContext(ctx, "job cancelled", "job", j.Id, "owner", owner, "reason", reason)
		}
		if len(jobs) == 0 || cancelled == 0 {
			return n, nil
		}
	}
}

var errAlreadyEnded = errors.New("job already ended")
