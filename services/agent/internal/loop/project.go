package loop

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/agent/internal/store"
)

// A project's job works in the project's one sandbox, where the files of the tasks before it
// accumulate. Each attempt starts from exactly those files: what a failed attempt (or a
// task whose job was cut off) left behind is put back as the project has it, or as the
// base branch has it. A sandbox that is gone (expired, its service restarted without it)
// is made again from the base branch and the project's files.

// projectSandbox brings the job's project sandbox to the project's files, making it again
// when it is gone.
func (r *run) projectSandbox(ctx context.Context) error {
	j := r.job()
	files, err := r.e.store.ProjectFiles(ctx, j.ProjectId)
	if err != nil {
		return err
	}
	var diff *sandboxv1.DiffResponse
	if j.SandboxId != "" {
		diff, err = r.e.c.Sandbox.Diff(ctx, &sandboxv1.DiffRequest{Id: j.SandboxId, StatsOnly: true})
		if status.Code(err) == codes.NotFound {
			r.thought("the project's sandbox %s is gone; making it again from %s and the project's %d files", j.SandboxId, j.BaseBranch, len(files))
			j.SandboxId, err = "", nil
		}
		if err != nil {
			return err
		}
	}
	if j.SandboxId == "" {
		k := r.key("project_sandbox", j.Attempt)
		start := time.Now()
		sctx, cancel := r.modelCall(ctx)
		defer cancel()
		resp, err := r.e.c.Sandbox.CreateSandbox(sctx, &sandboxv1.CreateSandboxRequest{RequestId: k, Repo: j.Repo, Ref: j.BaseBranch, JobId: j.Id,
			Ttl: durationpb.New(r.e.cfg.SandboxTTL)})
		r.audit("sandbox_created", k, map[string]any{"sandbox_id": resp.GetSandbox().GetId(), "project_id": j.ProjectId}, err, time.Since(start))
		if err != nil {
			return err
		}
		j.SandboxId = resp.GetSandbox().GetId()
		diff = &sandboxv1.DiffResponse{}
	}
	want := make(map[string]store.ProjectFile, len(files))
	for _, f := range files {
		want[f.Path] = f
	}
	// What the sandbox has that differs from the base, by its content's hash: a file the
	// project has that is there as the project has it is left alone (no call for it).
	changed := make(map[string]*typev1.FileDiff, len(diff.GetFiles()))
	for _, f := range diff.GetFiles() {
		changed[f.Path] = f
	}
	var fromBase []string
	for _, f := range diff.GetFiles() {
		_, ours := want[f.Path]
		switch {
		case ours:
			// Written below, as the project has it.
		case f.Action == typev1.FileAction_FILE_ACTION_CREATE:
			if err := r.deleteFile(ctx, f.Path); err != nil {
				return err
			}
		default:
			fromBase = append(fromBase, f.Path)
		}
	}
	for _, f := range files {
		var err error
		d := changed[f.Path]
		switch {
		case f.Deleted && d != nil && d.Action == typev1.FileAction_FILE_ACTION_DELETE:
			// Deleted in the sandbox too.
		case f.Deleted:
			err = r.deleteFile(ctx, f.Path)
		case d != nil && d.Action != typev1.FileAction_FILE_ACTION_DELETE && d.Sha256 == sha256Hex(f.Content):
			// There as the project has it.
		default:
			err = r.writeFile(ctx, f.Path, f.Content)
		}
		if err != nil {
			return err
		}
	}
	for len(fromBase) > 0 {
		n := min(len(fromBase), 100)
		resp, err := r.e.c.Repos.GetFiles(ctx, &githubv1.GetFilesRequest{Repo: j.Repo, Ref: j.BaseBranch, Paths: fromBase[:n]})
		if err != nil {
			return err
		}
		for _, f := range resp.Files {
			if err := r.writeFile(ctx, f.Path, []byte(f.Content)); err != nil {
				return err
			}
		}
		fromBase = fromBase[n:]
	}
	return nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func (r *run) writeFile(ctx context.Context, path string, content []byte) error {
	j := r.job()
	cur, err := r.e.c.Sandbox.ReadFile(ctx, &sandboxv1.ReadFileRequest{SandboxId: j.SandboxId, Path: path})
	if err == nil && bytes.Equal(cur.Content, content) {
		return nil
	}
	_, err = r.e.c.Sandbox.WriteFile(ctx, &sandboxv1.WriteFileRequest{SandboxId: j.SandboxId, Path: path, Content: content})
	return err
}

func (r *run) deleteFile(ctx context.Context, path string) error {
	_, err := r.e.c.Sandbox.DeleteFile(ctx, &sandboxv1.DeleteFileRequest{SandboxId: r.job().SandboxId, Path: path})
	if status.Code(err) == codes.NotFound {
		return nil
	}
	return err
}
