package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/db"
	"github.com/thefold/thefold/pkg/errs"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
)

// SaveSnapshot stores a named snapshot of a sandbox's files (files is the workspace's
// encoded snapshot). A name already used in the sandbox is ErrAlreadyExists.
func (s *Store) SaveSnapshot(ctx context.Context, sandboxID, name string, files []byte, count int, total int64) (*sandboxv1.SnapshotInfo, error) {
	info := &sandboxv1.SnapshotInfo{SandboxId: sandboxID, Name: name, FileCount: int32(count), TotalBytes: total}
	var created time.Time
	err := s.pool.QueryRow(ctx, `INSERT INTO snapshots (sandbox_id, name, files, file_count, total_bytes, create_time)
		VALUES ($1, $2, $3, $4, $5, $6) RETURNING id::text, create_time`, sandboxID, name, files, count, total, s.now()).
		Scan(&info.Id, &created)
	if db.IsUniqueViolation(err) {
		return nil, fmt.Errorf("snapshot %q exists in sandbox %s: %w", name, sandboxID, errs.ErrAlreadyExists)
	}
	if err != nil {
		return nil, fmt.Errorf("store: save snapshot: %w", err)
	}
	info.CreateTime = timestamppb.New(created)
	return info, nil
}

// Snapshot returns a snapshot of the sandbox and its encoded files.
func (s *Store) Snapshot(ctx context.Context, sandboxID, id string) (*sandboxv1.SnapshotInfo, []byte, error) {
	info := &sandboxv1.SnapshotInfo{SandboxId: sandboxID}
	var (
		files   []byte
		created time.Time
	)
	err := s.pool.QueryRow(ctx, `SELECT id::text, name, files, file_count, total_bytes, create_time FROM snapshots
		WHERE id = $1 AND sandbox_id = $2`, id, sandboxID).Scan(&info.Id, &info.Name, &files, &info.FileCount, &info.TotalBytes, &created)
	if errors.Is(err, pgx.ErrNoRows) || isUUIDSyntax(err) {
		return nil, nil, fmt.Errorf("snapshot %q of sandbox %s: %w", id, sandboxID, errs.ErrNotFound)
	}
	if err != nil {
		return nil, nil, fmt.Errorf("store: snapshot: %w", err)
	}
	info.CreateTime = timestamppb.New(created)
	return info, files, nil
}

// Command is one entry of the command log.
type Command struct {
	ID         string
	SandboxID  string
	Argv       []string
	Workdir    string
	ExitCode   int
	TimedOut   bool
	Truncated  bool
	Duration   time.Duration
	OutputTail string
	CreateTime time.Time
	// RequestID and RequestHash are a RunCommand's idempotency key and what it asked ("" and
	// nil without one).
	RequestID   string
	RequestHash []byte
}

// maxTail bounds the output kept in the log.
const maxTail = 8 << 10

// LogCommand appends c to the command log and returns its id.
func (s *Store) LogCommand(ctx context.Context, c *Command) (string, error) {
	tail := c.OutputTail
	if len(tail) > maxTail {
		tail = tail[len(tail)-maxTail:]
	}
	var id string
	err := s.pool.QueryRow(ctx, `INSERT INTO commands (sandbox_id, argv, workdir, exit_code, timed_out, truncated, duration_us, output_tail, create_time,
			request_id, request_hash)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING id::text`,
		c.SandboxID, c.Argv, c.Workdir, c.ExitCode, c.TimedOut, c.Truncated, c.Duration.Microseconds(), tail, s.now(),
		c.RequestID, nonNilBytes(c.RequestHash)).Scan(&id)
	if db.IsUniqueViolation(err, "commands_request") {
		return "", fmt.Errorf("request_id: a command with this request_id ran already in this sandbox: %w", errs.ErrAlreadyExists)
	}
	if err != nil {
		return "", fmt.Errorf("store: log command: %w", err)
	}
	return id, nil
}

// CommandByRequest returns the logged command of sandboxID that ran with requestID, or
// errs.ErrNotFound.
func (s *Store) CommandByRequest(ctx context.Context, sandboxID, requestID string) (*Command, error) {
	c := &Command{}
	var us int64
	err := s.pool.QueryRow(ctx, `SELECT id::text, sandbox_id::text, argv, workdir, exit_code, timed_out, truncated, duration_us, output_tail, create_time,
			request_id, request_hash
		FROM commands WHERE sandbox_id = $1 AND request_id = $2 AND request_id <> ''`, sandboxID, requestID).
		Scan(&c.ID, &c.SandboxID, &c.Argv, &c.Workdir, &c.ExitCode, &c.TimedOut, &c.Truncated, &us, &c.OutputTail, &c.CreateTime,
			&c.RequestID, &c.RequestHash)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("command %q: %w", requestID, errs.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("store: command by request: %w", err)
	}
	c.Duration = time.Duration(us) * time.Microsecond
	return c, nil
}

func nonNilBytes(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// Commands returns a sandbox's command log, oldest first, at most limit entries.
func (s *Store) Commands(ctx context.Context, sandboxID string, limit int) ([]*Command, error) {
	rows, err := s.pool.Query(ctx, `SELECT id::text, sandbox_id::text, argv, workdir, exit_code, timed_out, truncated, duration_us, output_tail, create_time
		FROM commands WHERE sandbox_id = $1 ORDER BY create_time, id LIMIT $2`, sandboxID, limit)
	if err != nil {
		return nil, fmt.Errorf("store: commands: %w", err)
	}
	defer rows.Close()
	var out []*Command
	for rows.Next() {
		c := &Command{}
		var us int64
		if err := rows.Scan(&c.ID, &c.SandboxID, &c.Argv, &c.Workdir, &c.ExitCode, &c.TimedOut, &c.Truncated, &us, &c.OutputTail, &c.CreateTime); err != nil {
			return nil, fmt.Errorf("store: commands: %w", err)
		}
		c.Duration = time.Duration(us) * time.Microsecond
		out = append(out, c)
	}
	return out, rows.Err()
}
