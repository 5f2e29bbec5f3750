package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/errs"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

// Request identifies a side-effecting create by the caller's request_id, so that a retry
// (after a timeout, a crash, a lost response) returns the first call's result instead of
// creating again.
type Request struct {
	// ID is the caller's request_id, unique per owner.
	ID string
	// Method names the RPC, e.g. "CreateTask"; a request id is bound to one method.
	Method string
	// Fingerprint is a hash of the request without its request_id: the same id with a
	// different request is refused (errs.ErrInvalid), never answered with the wrong result.
	Fingerprint []byte
}

// claimRequest records req for owner in tx. When the request id is new it returns nil, nil
// and the caller goes on creating (completeRequest records the result in the same
// transaction). When it was already used it returns the tasks that request created.
//
// Two concurrent calls with one id cannot both create: the second insert waits on the
// primary key until the first transaction ends, then either finds its row (committed) or
// inserts its own (rolled back).
func claimRequest(ctx context.Context, tx pgx.Tx, owner string, req *Request) ([]*tasksv1.Task, error) {
	tag, err := tx.Exec(ctx, `INSERT INTO create_requests (owner_id, request_id, method, fingerprint, task_ids)
		VALUES ($1, $2, $3, $4, '{}') ON CONFLICT (owner_id, request_id) DO NOTHING`,
		owner, req.ID, req.Method, req.Fingerprint)
	if err != nil {
		return nil, fmt.Errorf("store: claim request: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return nil, nil
	}
	var (
		method      string
		fingerprint []byte
		ids         []string
	)
	err = tx.QueryRow(ctx, `SELECT method, fingerprint, task_ids::text[] FROM create_requests
		WHERE owner_id = $1 AND request_id = $2`, owner, req.ID).Scan(&method, &fingerprint, &ids)
	if err != nil {
		return nil, fmt.Errorf("store: read request: %w", err)
	}
	if method != req.Method || !bytes.Equal(fingerprint, req.Fingerprint) {
		return nil, fmt.Errorf("request_id: %q was already used for a different request: %w", req.ID, errs.ErrInvalid)
	}
	tasks := make([]*tasksv1.Task, len(ids))
	for i, id := range ids {
		t, err := getTask(ctx, tx, owner, id, "")
		if errors.Is(err, errs.ErrNotFound) {
			return nil, fmt.Errorf("request_id: %q created task %s, which has since been deleted: %w", req.ID, id, errs.ErrFailedPrecondition)
		}
		if err != nil {
			return nil, err
		}
		tasks[i] = t
	}
	return tasks, nil
}

// completeRequest records the tasks req created.
func completeRequest(ctx context.Context, tx pgx.Tx, owner, requestID string, ids []string) error {
	_, err := tx.Exec(ctx, "UPDATE create_requests SET task_ids = $3::uuid[] WHERE owner_id = $1 AND request_id = $2", owner, requestID, ids)
	if err != nil {
		return fmt.Errorf("store: record request: %w", err)
	}
	return nil
}
