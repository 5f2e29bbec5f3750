package service

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/thefold/thefold/pkg/errs"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/sandbox/internal/store"
	"github.com/thefold/thefold/services/sandbox/internal/workspace"
)

const (
	maxSnapshotName = 100
	maxDiffPaths    = 200
	maxContextLines = 100
)

// blobDir holds the contents of a sandbox's base and snapshots by SHA-256, so Diff can show
// unified diffs against them (the snapshot rows keep only hashes).
func blobDir(sb *store.Sandbox) string { return filepath.Join(sandboxDir(sb), "blobs") }

// keepBlobs copies each file of snap that is not kept yet into the sandbox's blobs.
func (s *Server) keepBlobs(sb *store.Sandbox, ws *workspace.Workspace, snap *workspace.Snapshot) error {
	dir := blobDir(sb)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("blobs: %w", err)
	}
	for p, st := range snap.Files {
		dst := filepath.Join(dir, st.SHA256)
		if _, err := os.Lstat(dst); err == nil {
			continue
		}
		b, err := ws.SnapshotContent(p)
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, errs.ErrNotFound) {
			continue // removed since the snapshot was taken: it has no diff to show
		}
		if err != nil {
			return fmt.Errorf("blob of %s: %w", p, err)
		}
		tmp := dst + ".tmp"
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return fmt.Errorf("blobs: %w", err)
		}
		if err := os.Rename(tmp, dst); err != nil {
			return fmt.Errorf("blobs: %w", err)
		}
	}
	return nil
}

// Snapshot records the workspace's files under a name.
func (s *Server) Snapshot(ctx context.Context, req *sandboxv1.SnapshotRequest) (*sandboxv1.SnapshotResponse, error) {
	name, err := validate.RequiredText("name", req.GetName(), maxSnapshotName)
	if err != nil {
		return nil, err
	}
	if !validate.PrintableASCII(name, false) {
		return nil, errs.Invalid("name", "printable ASCII without spaces, e.g. before-fix-2")
	}
	sb, ws, done, err := s.use(ctx, "sandbox_id", req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	defer done()
	snap, err := ws.Snapshot()
	if err != nil {
		return nil, err
	}
	if err := s.keepBlobs(sb, ws, snap); err != nil {
		return nil, err
	}
	b, err := snap.MarshalBinary()
	if err != nil {
		return nil, err
	}
	info, err := s.store.SaveSnapshot(ctx, sb.Id, name, b, len(snap.Files), snap.TotalBytes())
	if err != nil {
		return nil, err
	}
	return &sandboxv1.SnapshotResponse{Snapshot: info}, nil
}

// Diff lists the files changed since the base or a snapshot.
func (s *Server) Diff(ctx context.Context, req *sandboxv1.DiffRequest) (*sandboxv1.DiffResponse, error) {
	snapID, err := validate.UUID("snapshot_id", req.GetSnapshotId(), false)
	if err != nil {
		return nil, err
	}
	if len(req.GetPaths()) > maxDiffPaths {
		return nil, errs.Invalid("paths", "at most %d", maxDiffPaths)
	}
	var prefixes []string
	for i, p := range req.GetPaths() {
		c, err := checkPath(fmt.Sprintf("paths[%d]", i), p, true)
		if err != nil {
			return nil, err
		}
		prefixes = append(prefixes, c)
	}
	if c := req.GetContextLines(); c < 0 || c > maxContextLines {
		return nil, errs.Invalid("context_lines", "want 0 to %d", maxContextLines)
	}
	sb, ws, done, err := s.use(ctx, "id", req.GetId())
	if err != nil {
		return nil, err
	}
	defer done()
	base := &workspace.Snapshot{}
	label := "initial"
	if sb.BaseCommit != "" {
		label = sb.BaseCommit
	}
	if snapID != "" {
		info, b, err := s.store.Snapshot(ctx, sb.Id, snapID)
		if err != nil {
			return nil, err
		}
		if err := base.UnmarshalBinary(b); err != nil {
			return nil, fmt.Errorf("snapshot %s: %w", info.Id, err)
		}
		label = info.Id
	} else {
		b, err := os.ReadFile(filepath.Join(sandboxDir(sb), "base.json"))
		if err != nil {
			return nil, errs.Public(codes.FailedPrecondition, "sandbox %s has lost its base; diff against a snapshot", sb.Id).Wrap(err)
		}
		if err := base.UnmarshalBinary(b); err != nil {
			return nil, fmt.Errorf("base of %s: %w", sb.Id, err)
		}
	}
	blobs := blobDir(sb)
	files, _, err := ws.DiffWith(base, workspace.DiffOptions{Unified: !req.GetStatsOnly(), Context: int(req.GetContextLines()),
		BaseContent: func(p string) ([]byte, bool) {
			st, ok := base.Files[p]
			if !ok {
				return nil, false
			}
			b, err := os.ReadFile(filepath.Join(blobs, st.SHA256))
			return b, err == nil
		}})
	if err != nil {
		return nil, err
	}
	resp := &sandboxv1.DiffResponse{Base: label, Stats: &typev1.DiffStats{}}
	for _, f := range files {
		if !underAny(f.GetPath(), prefixes) {
			continue
		}
		resp.Files = append(resp.Files, f)
		resp.Stats.FilesChanged++
		resp.Stats.Additions += f.GetAdditions()
		resp.Stats.Deletions += f.GetDeletions()
	}
	return resp, nil
}

// underAny reports whether p is one of prefixes or below one; no prefixes match all.
func underAny(p string, prefixes []string) bool {
	if len(prefixes) == 0 {
		return true
	}
	for _, pre := range prefixes {
		if pre == "." || p == pre || strings.HasPrefix(p, pre+"/") {
			return true
		}
	}
	return false
}
