package store

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	builderv1 "github.com/thefold/thefold/pkg/gen/thefold/builder/v1"
)

// MaxGuidance bounds the messages one build keeps: every later model call of the build is
// told all of them.
const MaxGuidance = 50

// GuidanceLog is the LOG event's message when a person's guidance arrives.
const GuidanceLog = "a person's guidance arrived"

// AddGuidance appends text, said by owner, to owner's build id that is not finished, with
// the step running now, and its LOG event, in one transaction. With requestID, a retry of
// the same call returns the build as it is now and adds nothing (the build remembers the
// request_ids of the messages it was given), even once the build has finished. A PAUSED
// build takes it (a person's word while it waits); a finished build is FailedPrecondition
// naming its status.
func (s *Store) AddGuidance(ctx context.Context, owner, id, text, requestID string) (*Build, error) {
	var out *Build
	err := db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		b, err := lockBuild(ctx, tx, owner, id)
		if err != nil {
			return err
		}
		out = b
		if requestID != "" {
			var seen []string
			if err := tx.QueryRow(ctx, "SELECT guidance_request_ids FROM builds WHERE id = $1", id).Scan(&seen); err != nil {
				return err
			}
			if slices.Contains(seen, requestID) {
				return nil // a retry of the call that added it
			}
		}
		if terminalStatus(b.Status) {
			return status.Errorf(codes.FailedPrecondition, "build %s is %s; guidance can only be given to a pending, running or paused build",
				id, StatusName(b.Status))
		}
		if len(b.Guidance) >= MaxGuidance {
			return status.Errorf(codes.FailedPrecondition, "build %s already has %d messages; at most %d", id, len(b.Guidance), MaxGuidance)
		}
		b.Guidance = append(b.Guidance, &builderv1.BuildGuidance{
			Text: text, Author: owner, CreateTime: timestamppb.Now(), StepNumber: b.CurrentStep,
		})
		list, err := marshalList(b.Guidance)
		if err != nil {
			return err
		}
		batch := &pgx.Batch{}
		batch.Queue(`UPDATE builds SET guidance = $2,
			guidance_request_ids = CASE WHEN $3 = '' THEN guidance_request_ids ELSE array_append(guidance_request_ids, $3) END,
			update_time = now() WHERE id = $1 RETURNING update_time`, id, list, requestID).QueryRow(func(row pgx.Row) error {
			var t time.Time
			if err := row.Scan(&t); err != nil {
				return err
			}
			b.UpdateTime = timestamppb.New(t)
			return nil
		})
		if err := queueEvents(batch, b, []*builderv1.WatchBuildResponse{LogEvent(b.CurrentStep, b.Phase, GuidanceLog)}); err != nil {
			return err
		}
		return tx.SendBatch(ctx, batch).Close()
	})
	return out, err
}

// Guidance returns the guidance of build id (any owner's: the engine running it asks),
// oldest first.
func (s *Store) Guidance(ctx context.Context, id string) ([]*builderv1.BuildGuidance, error) {
	var raw []byte
	err := s.pool.QueryRow(ctx, "SELECT guidance FROM builds WHERE id = $1", id).Scan(&raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("build %s: %w", id, errs.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return unmarshalGuidance(raw)
}

func unmarshalGuidance(b []byte) ([]*builderv1.BuildGuidance, error) {
	return unmarshalArray(b, func() *builderv1.BuildGuidance { return &builderv1.BuildGuidance{} })
}
