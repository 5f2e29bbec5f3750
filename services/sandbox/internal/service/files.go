package service

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/errs"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/textedit"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/sandbox/internal/store"
	"github.com/thefold/thefold/services/sandbox/internal/workspace"
)

const (
	maxPath           = 1024
	maxEdits          = 200
	maxFilesPage      = 10000
	defaultFilesPage  = 1000
	filesTokenVersion = "f1"
)

// use checks the caller and the sandbox id, marks the sandbox used (its idle expiry moves)
// and opens its workspace under the sandbox's lock. done releases both.
func (s *Server) use(ctx context.Context, field, sandboxID string) (sb *store.Sandbox, ws *workspace.Workspace, done func(), err error) {
	owner, id, err := ownedID(ctx, field, sandboxID)
	if err != nil {
		return nil, nil, nil, err
	}
	if sb, err = s.store.Use(ctx, owner, id); err != nil {
		return nil, nil, nil, err
	}
	unlock := s.lock(id)
	// Destroyed while this call waited for the lock.
	if cur, err := s.store.Get(ctx, owner, id); err != nil || cur.Status != sandboxv1.SandboxStatus_SANDBOX_STATUS_READY {
		unlock()
		if err == nil {
			err = fmt.Errorf("sandbox %s was destroyed: %w", id, errs.ErrFailedPrecondition)
		}
		return nil, nil, nil, err
	}
	if ws, err = s.open(sb); err != nil {
		unlock()
		return nil, nil, nil, err
	}
	return sb, ws, func() { ws.Close(); unlock() }, nil
}

// checkPath validates a workspace path before it reaches the disk.
func checkPath(field, p string, required bool) (string, error) {
	if p == "" && !required {
		return ".", nil
	}
	if p == "" {
		return "", errs.Invalid(field, "required")
	}
	if err := validate.MaxLen(field, p, maxPath); err != nil {
		return "", err
	}
	clean, err := workspace.CleanPath(p)
	if err != nil {
		return "", errs.Invalid(field, "%s", publicText(err))
	}
	return clean, nil
}

// pathError names the field of a refused path.
func pathError(field string, err error) error {
	if errors.Is(err, errs.ErrInvalid) {
		return errs.Invalid(field, "%s", publicText(err))
	}
	return err
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// WriteFile creates or replaces a file.
func (s *Server) WriteFile(ctx context.Context, req *sandboxv1.WriteFileRequest) (*sandboxv1.WriteFileResponse, error) {
	p, err := checkPath("path", req.GetPath(), true)
	if err != nil {
		return nil, err
	}
	if p == "." {
		return nil, errs.Invalid("path", "is the workspace root, not a file")
	}
	if int64(len(req.GetContent())) > s.cfg.MaxFileBytes {
		return nil, errs.Invalid("content", "%d bytes; at most %d (THEFOLD_SANDBOX_MAX_FILE_BYTES)", len(req.GetContent()), s.cfg.MaxFileBytes)
	}
	_, ws, done, err := s.use(ctx, "sandbox_id", req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	defer done()
	if _, err := ws.WriteFile(p, req.GetContent(), req.GetExecutable()); err != nil {
		return nil, pathError("path", err)
	}
	return &sandboxv1.WriteFileResponse{Size: int64(len(req.GetContent())), Sha256: sum(req.GetContent())}, nil
}

// ReadFile returns a file's content.
func (s *Server) ReadFile(ctx context.Context, req *sandboxv1.ReadFileRequest) (*sandboxv1.ReadFileResponse, error) {
	p, err := checkPath("path", req.GetPath(), true)
	if err != nil {
		return nil, err
	}
	_, ws, done, err := s.use(ctx, "sandbox_id", req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	defer done()
	b, err := ws.ReadFile(p, s.cfg.MaxFileBytes)
	if err != nil {
		return nil, pathError("path", err)
	}
	return &sandboxv1.ReadFileResponse{Content: b, Size: int64(len(b)), Sha256: sum(b)}, nil
}

// DeleteFile deletes a file, or a directory (a non-empty one with recursive).
func (s *Server) DeleteFile(ctx context.Context, req *sandboxv1.DeleteFileRequest) (*sandboxv1.DeleteFileResponse, error) {
	p, err := checkPath("path", req.GetPath(), true)
	if err != nil {
		return nil, err
	}
	if p == "." {
		return nil, errs.Invalid("path", "is the workspace root; destroy the sandbox instead")
	}
	_, ws, done, err := s.use(ctx, "sandbox_id", req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	defer done()
	err = ws.DeleteFile(p)
	if err != nil && errors.Is(err, errs.ErrInvalid) && strings.Contains(err.Error(), "is a directory") {
		err = ws.DeleteDir(p, req.GetRecursive())
	}
	if err != nil {
		return nil, pathError("path", err)
	}
	return &sandboxv1.DeleteFileResponse{}, nil
}

// ListFiles lists entries under a prefix, sorted by path, a page at a time.
func (s *Server) ListFiles(ctx context.Context, req *sandboxv1.ListFilesRequest) (*sandboxv1.ListFilesResponse, error) {
	prefix, err := checkPath("path_prefix", req.GetPathPrefix(), false)
	if err != nil {
		return nil, err
	}
	size, err := validate.PageSize(req.GetPageSize(), defaultFilesPage, maxFilesPage)
	if err != nil {
		return nil, err
	}
	const method = "ListFiles"
	// The token carries the query it continues, so a token is not reused for another.
	// Its parts are hex and base64, since the token's separator may be in a path.
	query := sum(fmt.Appendf(nil, "%s\x00%t\x00%t", prefix, req.GetRecursive(), req.GetIncludeIgnored()))[:16]
	after := ""
	if tok := req.GetPageToken(); tok != "" {
		parts, err := validate.DecodePageToken(tok, filesTokenVersion, 2, method)
		if err != nil {
			return nil, err
		}
		if parts[0] != query {
			return nil, errs.Invalid("page_token", "belongs to a listing with another path_prefix, recursive or include_ignored")
		}
		b, err := base64.RawURLEncoding.DecodeString(parts[1])
		if err != nil {
			return nil, validate.BadPageToken(method)
		}
		after = string(b)
	}
	_, ws, done, err := s.use(ctx, "sandbox_id", req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	defer done()
	entries, err := ws.List(prefix, workspace.ListOptions{Recursive: req.GetRecursive(), Limit: size + 1, After: after,
		IncludeSkipped: req.GetIncludeIgnored()})
	if err != nil {
		return nil, pathError("path_prefix", err)
	}
	resp := &sandboxv1.ListFilesResponse{}
	if len(entries) > size {
		entries = entries[:size]
		resp.NextPageToken = validate.EncodePageToken(filesTokenVersion, query, base64.RawURLEncoding.EncodeToString([]byte(entries[size-1].Path)))
	}
	for _, e := range entries {
		resp.Files = append(resp.Files, &sandboxv1.FileInfo{Path: e.Path, IsDir: e.IsDir, Size: e.Size,
			ModifyTime: timestamppb.New(e.ModTime)})
	}
	return resp, nil
}

// ApplyEdits applies search/replace edits to one file, all or nothing. An edit that does
// not apply is INVALID_ARGUMENT naming it (edits[i]) and why; a dry run answers the same
// as results instead, so a caller can check edits without an error.
func (s *Server) ApplyEdits(ctx context.Context, req *sandboxv1.ApplyEditsRequest) (*sandboxv1.ApplyEditsResponse, error) {
	p, err := checkPath("path", req.GetPath(), true)
	if err != nil {
		return nil, err
	}
	edits := req.GetEdits()
	if len(edits) == 0 {
		return nil, errs.Invalid("edits", "at least one edit")
	}
	if len(edits) > maxEdits {
		return nil, errs.Invalid("edits", "at most %d edits", maxEdits)
	}
	for i, e := range edits {
		if e.GetOldText() == "" {
			return nil, errs.Invalid(fmt.Sprintf("edits[%d].old_text", i), "required (an edit replaces text that is in the file)")
		}
		if e.GetExpectedCount() < 0 {
			return nil, errs.Invalid(fmt.Sprintf("edits[%d].expected_count", i), "must not be negative")
		}
	}
	_, ws, done, err := s.use(ctx, "sandbox_id", req.GetSandboxId())
	if err != nil {
		return nil, err
	}
	defer done()
	cur, err := ws.ReadFile(p, s.cfg.MaxFileBytes)
	if err != nil {
		return nil, pathError("path", err)
	}
	content, results, ok := applyEach(string(cur), edits)
	resp := &sandboxv1.ApplyEditsResponse{Results: results}
	if !ok {
		if !req.GetDryRun() {
			for _, r := range results {
				if !r.Ok {
					return nil, errs.Invalid(fmt.Sprintf("edits[%d]", r.Index), "%s; the file is unchanged", r.Error)
				}
			}
		}
		resp.Content, resp.Sha256 = string(cur), sum(cur)
		return resp, nil
	}
	if !req.GetDryRun() {
		if _, err := ws.ApplyEdits(p, edits); err != nil {
			return nil, pathError("edits", err)
		}
		resp.Applied = true
	}
	resp.Content, resp.Sha256 = content, sum([]byte(content))
	return resp, nil
}

// applyEach applies the edits one by one (each to the result of the ones before, as the
// contract says) and reports each; after the first that fails the rest are not tried.
func applyEach(content string, edits []*typev1.Edit) (string, []*sandboxv1.EditResult, bool) {
	results := make([]*sandboxv1.EditResult, len(edits))
	ok := true
	for i, e := range edits {
		r := &sandboxv1.EditResult{Index: int32(i), MatchCount: int32(strings.Count(content, e.GetOldText()))}
		results[i] = r
		if !ok {
			r.Error = "not tried: an earlier edit did not apply"
			continue
		}
		out, err := textedit.Apply(content, []*typev1.Edit{e})
		if err != nil {
			var ee *textedit.EditError
			if errors.As(err, &ee) {
				r.Error = ee.Problem
				if ee.Hint != "" {
					r.Error += " (" + ee.Hint + ")"
				}
			} else {
				r.Error = err.Error()
			}
			ok = false
			continue
		}
		r.Ok = true
		content = out
	}
	return content, results, ok
}
