// Package store keeps the sandbox service's state in its PostgreSQL schema: sandboxes (owner,
// source, backend, status, limits, idle expiry, pin), their named snapshots, the command log
// and CreateSandbox's request ids. Every query is scoped by owner; another owner's sandbox is
// ErrNotFound.
package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
)

// Store is the sandbox schema.
type Store struct {
	pool *pgxpool.Pool
	now  func() time.Time
}

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock of expiry (tests).
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

// New returns a store over pool, whose search_path is the sandbox schema.
func New(pool *pgxpool.Pool, opts ...Option) *Store {
	s := &Store{pool: pool, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Sandbox is a row: the contract's message plus what only the service sees.
type Sandbox struct {
	*sandboxv1.Sandbox
	TTL time.Duration
	// Workspace is the host path of the files; Handle the backend's (a container id).
	Workspace string
	Handle    string
}

var backendNames = map[sandboxv1.SandboxBackend]string{
	sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER:     "docker",
	sandboxv1.SandboxBackend_SANDBOX_BACKEND_BWRAP:      "bwrap",
	sandboxv1.SandboxBackend_SANDBOX_BACKEND_LOCAL:      "local",
	sandboxv1.SandboxBackend_SANDBOX_BACKEND_KUBERNETES: "kubernetes",
}

var statusNames = map[sandboxv1.SandboxStatus]string{
	sandboxv1.SandboxStatus_SANDBOX_STATUS_CREATING:  "creating",
	sandboxv1.SandboxStatus_SANDBOX_STATUS_READY:     "ready",
	sandboxv1.SandboxStatus_SANDBOX_STATUS_FAILED:    "failed",
	sandboxv1.SandboxStatus_SANDBOX_STATUS_DESTROYED: "destroyed",
}

func reverse[K comparable, V comparable](m map[K]V) map[V]K {
	out := make(map[V]K, len(m))
	for k, v := range m {
		out[v] = k
	}
	return out
}

var (
	backendByName = reverse(backendNames)
	statusByName  = reverse(statusNames)
)

const sandboxColumns = `id::text, owner_id, repo, ref, base_commit, backend, status, status_reason, language, image,
	limits::text, job_id, ttl_seconds, pinned, workspace, handle, create_time, expire_time, destroy_time`

func scanSandbox(row pgx.Row) (*Sandbox, error) {
	var (
		sb               = &Sandbox{Sandbox: &sandboxv1.Sandbox{}}
		backend, status  string
		limits           string
		ttl              int64
		created, expires time.Time
		destroyed        *time.Time
	)
	p := sb.Sandbox
	err := row.Scan(&p.Id, &p.OwnerId, &p.Repo, &p.Ref, &p.BaseCommit, &backend, &status, &p.StatusReason, &p.Language,
		&p.Image, &limits, &p.JobId, &ttl, &p.Pinned, &sb.Workspace, &sb.Handle, &created, &expires, &destroyed)
	if err != nil {
		return nil, err
	}
	p.Backend, p.Status = backendByName[backend], statusByName[status]
	p.Limits = &sandboxv1.ResourceLimits{}
	if err := protojson.Unmarshal([]byte(limits), p.Limits); err != nil {
		return nil, fmt.Errorf("store: sandbox %s limits: %w", p.Id, err)
	}
	sb.TTL = time.Duration(ttl) * time.Second
	p.CreateTime = timestamppb.New(created)
	if !p.Pinned && (p.Status == sandboxv1.SandboxStatus_SANDBOX_STATUS_CREATING || p.Status == sandboxv1.SandboxStatus_SANDBOX_STATUS_READY) {
		p.ExpireTime = timestamppb.New(expires)
	}
	if destroyed != nil {
		p.DestroyTime = timestamppb.New(*destroyed)
	}
	return sb, nil
}

func notFound(id string) error { return fmt.Errorf("sandbox %q: %w", id, errs.ErrNotFound) }

// isUUIDSyntax reports a malformed uuid from PostgreSQL: the id names no sandbox.
func isUUIDSyntax(err error) bool {
	var pg *pgconn.PgError
	return errors.As(err, &pg) && pg.Code == "22P02"
}

// Get returns owner's sandbox id.
func (s *Store) Get(ctx context.Context, owner, id string) (*Sandbox, error) {
	sb, err := scanSandbox(s.pool.QueryRow(ctx, "SELECT "+sandboxColumns+" FROM sandboxes WHERE id = $1 AND owner_id = $2", id, owner))
	if errors.Is(err, pgx.ErrNoRows) || isUUIDSyntax(err) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("store: get sandbox: %w", err)
	}
	return sb, nil
}

// CreateRequest makes CreateSandbox idempotent: ID is the caller's request_id, Fingerprint
// a hash of the request without it.
type CreateRequest struct {
	ID          string
	Fingerprint []byte
}

// Create inserts sb (status creating) for its owner, unless the owner has maxLive live
// sandboxes already (ErrFailedPrecondition naming the limit). With req, a retry returns the
// sandbox the first call created (existing true) and a different request under the same id
// is ErrInvalid.
func (s *Store) Create(ctx context.Context, sb *Sandbox, maxLive int, req *CreateRequest) (out *Sandbox, existing bool, err error) {
	limits, err := protojson.Marshal(sb.GetLimits())
	if err != nil {
		return nil, false, fmt.Errorf("store: limits: %w", err)
	}
	err = db.InTx(ctx, s.pool, func(tx pgx.Tx) error {
		owner := sb.GetOwnerId()
		// One owner's creates are serialised, so the live count cannot be raced past.
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock(hashtextextended('sandbox-owner:' || $1, 0))", owner); err != nil {
			return err
		}
		if req != nil {
			prev, err := s.claim(ctx, tx, owner, req)
			if err != nil || prev != nil {
				out, existing = prev, prev != nil
				return err
			}
		}
		var live int
		if err := tx.QueryRow(ctx, "SELECT count(*) FROM sandboxes WHERE owner_id = $1 AND status IN ('creating', 'ready')", owner).Scan(&live); err != nil {
			return err
		}
		if maxLive > 0 && live >= maxLive {
			return fmt.Errorf("%d live sandboxes already, the most one owner may have; destroy one first: %w", live, errs.ErrFailedPrecondition)
		}
		now := s.now()
		out, err = scanSandbox(tx.QueryRow(ctx, `INSERT INTO sandboxes
			(owner_id, repo, ref, base_commit, backend, status, language, image, limits, job_id, ttl_seconds, workspace,
			 create_time, last_used_time, expire_time)
			VALUES ($1, $2, $3, $4, $5, 'creating', $6, $7, $8, $9, $10, $11, $12, $12, $13)
			RETURNING `+sandboxColumns,
			owner, sb.GetRepo(), sb.GetRef(), sb.GetBaseCommit(), backendNames[sb.GetBackend()], sb.GetLanguage(), sb.GetImage(),
			string(limits), sb.GetJobId(), int64(sb.TTL/time.Second), sb.Workspace, now, now.Add(sb.TTL)))
		if err != nil {
			return err
		}
		if req != nil {
			_, err = tx.Exec(ctx, "UPDATE create_requests SET sandbox_id = $3 WHERE owner_id = $1 AND request_id = $2", owner, req.ID, out.Id)
		}
		return err
	})
	if err != nil {
		if errors.Is(err, errs.ErrFailedPrecondition) || errors.Is(err, errs.ErrInvalid) {
			return nil, false, err
		}
		return nil, false, fmt.Errorf("store: create sandbox: %w", err)
	}
	return out, existing, nil
}

// claim records req, or returns the sandbox an earlier call with its id created.
func (s *Store) claim(ctx context.Context, tx pgx.Tx, owner string, req *CreateRequest) (*Sandbox, error) {
	tag, err := tx.Exec(ctx, `INSERT INTO create_requests (owner_id, request_id, fingerprint) VALUES ($1, $2, $3)
		ON CONFLICT (owner_id, request_id) DO NOTHING`, owner, req.ID, req.Fingerprint)
	if err != nil || tag.RowsAffected() == 1 {
		return nil, err
	}
	var (
		fp []byte
		id *string
	)
	if err := tx.QueryRow(ctx, "SELECT fingerprint, sandbox_id::text FROM create_requests WHERE owner_id = $1 AND request_id = $2",
		owner, req.ID).Scan(&fp, &id); err != nil {
		return nil, err
	}
	if !bytes.Equal(fp, req.Fingerprint) {
		return nil, fmt.Errorf("request_id: %q was already used for a different request: %w", req.ID, errs.ErrInvalid)
	}
	if id == nil {
		return nil, fmt.Errorf("request_id: %q: its sandbox was deleted: %w", req.ID, errs.ErrFailedPrecondition)
	}
	return scanSandbox(tx.QueryRow(ctx, "SELECT "+sandboxColumns+" FROM sandboxes WHERE id = $1", *id))
}
