package service

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/errs"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
	"github.com/thefold/thefold/services/builder/internal/store"
)

// ReasonOwnerDisabled is the error of a build cancelled because its owner was disabled.
const ReasonOwnerDisabled = "owner disabled"

// CancelOwnerBuilds cancels every pending, running or paused build of owner with reason, as
// CancelBuild does for one, and stops those this process runs: the owner was disabled,
// so nothing may go on in their name (auth.RevokeUserDisabled). It runs without a caller:
// the revocation is the authority. It returns how many builds it cancelled.
func (s *Server) CancelOwnerBuilds(ctx context.Context, owner, reason string) (int, error) {
	if owner == "" {
		return 0, errs.Invalid("owner", "required")
	}
	unfinished := store.ListFilter{Statuses: []builderv1.BuildStatus{builderv1.BuildStatus_BUILD_STATUS_PENDING, builderv1.BuildStatus_BUILD_STATUS_RUNNING,
		builderv1.BuildStatus_BUILD_STATUS_PAUSED}}
	n := 0
	for {
		// Each pass takes the first page again: what it cancels leaves the filter.
		builds, _, err := s.store.List(ctx, owner, unfinished, 100, "")
		if err != nil {
			return n, err
		}
		cancelled := 0
		for _, b := range builds {
			_, err := s.store.Cancel(ctx, owner, b.Id, reason)
			switch {
			case status.Code(err) == codes.FailedPrecondition:
				continue // ended meanwhile
			case err != nil:
				return n, err
			}
			s.cancel.Cancel(b.Id)
			n++
			cancelled++
			s.log.InfoContext(ctx, "build cancelled", "build", b.Id, "owner", owner, "reason", reason)
		}
		if cancelled == 0 {
			return n, nil
		}
	}
}
