package store

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/db"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
)

// Pause stops owner's build id where it is: a PENDING or RUNNING build becomes PAUSED with
// reason as its error, its steps and files as they are (the step that was running stays
// RUNNING: the next run takes it up again from its last recorded transition). The write
// drops the lease, and a paused build is not active for the leases nor for build_fence: the
// worker running it loses it at its next renewal or write (ErrLeaseLost, a clean stop, not
// a failure), and no worker or reaper takes it until Resume. A paused build is returned
// unchanged; a completed, failed or cancelled one is FailedPrecondition naming its status.
func (s *Store) Pause(ctx context.Context, owner, id, reason string) (*Build, error) {
	var out *Build
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		b, err := lockBuild(ctx, tx, owner, id)
		if err != nil {
			return err
		}
		out = b
		switch b.Status {
		case builderv1.BuildStatus_BUILD_STATUS_PAUSED:
			return nil
		case builderv1.BuildStatus_BUILD_STATUS_PENDING, builderv1.BuildStatus_BUILD_STATUS_RUNNING:
		default:
			return status.Errorf(codes.FailedPrecondition, "build %s is %s; only a pending or running build can be paused",
				id, StatusName(b.Status))
		}
		if reason == "" {
			reason = "paused"
		}
		prev := b.Status
		b.Status, b.Error = builderv1.BuildStatus_BUILD_STATUS_PAUSED, reason
		if _, err := tx.Exec(ctx, `UPDATE builds SET pause_time = now() WHERE id = $1`, id); err != nil {
			return err
		}
		return writeChange(ctx, tx, Change{Build: b, Events: []*builderv1.WatchBuildResponse{StatusEvent(prev, b)}})
	})
	return out, err
}

// Resume continues owner's PAUSED build id: it becomes PENDING (its pause reason cleared,
// the paused span added to Paused when the build had started), and enqueue is called in the
// same transaction, so a worker claims it and runs it from its first unfinished step — the
// step that was interrupted runs again from its last recorded transition, its model call
// asked again under the same key (the ai service kept no answer for the call that was cut
// off, so the model is asked). Another status is FailedPrecondition naming it.
func (s *Store) Resume(ctx context.Context, owner, id string, enqueue func(ctx context.Context, tx pgx.Tx, id string) error) (*Build, error) {
	var out *Build
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		b, err := lockBuild(ctx, tx, owner, id)
		if err != nil {
			return err
		}
		out = b
		if b.Status != builderv1.BuildStatus_BUILD_STATUS_PAUSED {
			return status.Errorf(codes.FailedPrecondition, "build %s is %s; only a paused build can be resumed", id, StatusName(b.Status))
		}
		var pausedMS int64
		if err := tx.QueryRow(ctx, `UPDATE builds SET
				paused_ms = paused_ms + CASE WHEN start_time IS NULL OR pause_time IS NULL THEN 0
					ELSE (extract(epoch FROM now() - greatest(pause_time, start_time)) * 1000)::bigint END,
				pause_time = NULL
			WHERE id = $1 RETURNING paused_ms`, id).Scan(&pausedMS); err != nil {
			return err
		}
		prev := b.Status
		b.Status, b.Error = builderv1.BuildStatus_BUILD_STATUS_PENDING, ""
		if err := enqueue(ctx, tx, id); err != nil {
			return err
		}
		if err := writeChange(ctx, tx, Change{Build: b, Events: []*builderv1.WatchBuildResponse{StatusEvent(prev, b)}}); err != nil {
			return err
		}
		b.Paused = time.Duration(pausedMS) * time.Millisecond
		return nil
	})
	return out, err
}
