package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"

	"github.com/thefold/thefold/services/sandbox/internal/store"
	sbvalidate "github.com/thefold/thefold/services/sandbox/internal/validate"
	"github.com/thefold/thefold/services/sandbox/internal/workspace"
)

// Populating a workspace: an uploaded archive or a repository checked out through the github service.

// populate makes the workspace directory and fills it (archive or repository), detects the
// language when none was asked for, and records the base the Diff RPC compares against.
// It returns the commit checked out.
func (s *Server) populate(ctx context.Context, sb *store.Sandbox, req *sandboxv1.CreateSandboxRequest) (string, error) {
	if err := os.MkdirAll(sb.Workspace, 0o755); err != nil {
		return "", fmt.Errorf("workspace: %w", err)
	}
	ws, err := s.open(sb)
	if err != nil {
		return "", err
	}
	defer ws.Close()
	commit := ""
	switch {
	case len(req.GetArchive()) > 0:
		if err := workspace.Extract(ws, bytes.NewReader(req.GetArchive()), workspace.ExtractOptions{Format: archiveFormat(req.GetArchive())}); err != nil {
			return "", archiveError(err)
		}
	case req.GetRepo() != "":
		if commit, err = s.checkout(ctx, ws, req); err != nil {
			return "", err
		}
	}
	if sb.Language == "" {
		if langs := sbvalidate.Detect(ws.Root()); len(langs) > 0 {
			sb.Language = string(langs[0])
		}
	}
	snap, err := ws.Snapshot()
	if err != nil {
		return "", fmt.Errorf("base snapshot: %w", err)
	}
	if err := s.keepBlobs(sb, ws, snap); err != nil {
		return "", err
	}
	b, _ := snap.MarshalBinary()
	if err := os.WriteFile(filepath.Join(sandboxDir(sb), "base.json"), b, 0o600); err != nil {
		return "", fmt.Errorf("base snapshot: %w", err)
	}
	return commit, nil
}

// archiveError names the field of a refused archive.
func archiveError(err error) error {
	if errors.Is(err, errs.ErrInvalid) {
		return errs.Invalid("archive", "%s", publicText(err))
	}
	return err
}

// publicText is an error's text with the sentinel's suffix dropped, for messages that name
// a field.
func publicText(err error) string {
	msg := err.Error()
	for _, sentinel := range []error{errs.ErrInvalid, errs.ErrNotFound, errs.ErrFailedPrecondition, errs.ErrUnavailable} {
		if errors.Is(err, sentinel) {
			msg, _ = cutSuffix(msg, ": "+sentinel.Error())
		}
	}
	return msg
}

func cutSuffix(s, suffix string) (string, bool) {
	if len(s) >= len(suffix) && s[len(s)-len(suffix):] == suffix {
		return s[:len(s)-len(suffix)], true
	}
	return s, false
}

// archiveFormat tells gzip and zip from their first bytes; anything else is read as tar.
func archiveFormat(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte{0x1f, 0x8b}):
		return workspace.FormatTarGz
	case bytes.HasPrefix(b, []byte("PK\x03\x04")):
		return workspace.FormatZip
	}
	return workspace.FormatTar
}

// checkout streams the repository's archive from the github service into ws.
func (s *Server) checkout(ctx context.Context, ws *workspace.Workspace, req *sandboxv1.CreateSandboxRequest) (string, error) {
	if s.github == nil {
		return "", errs.Public(codes.FailedPrecondition, "no github service is configured (THEFOLD_GITHUB_ADDR): create the sandbox empty or from an archive")
	}
	ref := req.GetRef()
	if req.GetBaseCommit() != "" {
		ref = req.GetBaseCommit()
	}
	stream, err := s.github.GetArchive(ctx, &githubv1.GetArchiveRequest{Repo: req.GetRepo(), Ref: ref})
	if err != nil {
		return "", githubError(req.GetRepo(), err)
	}
	first, err := stream.Recv()
	if err != nil {
		return "", githubError(req.GetRepo(), err)
	}
	meta := first.GetMetadata()
	if meta == nil {
		return "", fmt.Errorf("github GetArchive: the first message is not metadata: %w", errs.ErrUnavailable)
	}
	pr, pw := io.Pipe()
	go func() {
		for {
			m, err := stream.Recv()
			if err == io.EOF {
				pw.Close()
				return
			}
			if err != nil {
				pw.CloseWithError(githubError(req.GetRepo(), err))
				return
			}
			if _, err := pw.Write(m.GetChunk()); err != nil {
				return
			}
		}
	}()
	err = workspace.Extract(ws, pr, workspace.ExtractOptions{Format: workspace.FormatTar})
	pr.CloseWithError(err)
	if err != nil {
		if errors.Is(err, errs.ErrInvalid) {
			return "", errs.Public(codes.FailedPrecondition, "the archive of %s is not one a workspace accepts: %s", req.GetRepo(), publicText(err)).Wrap(err)
		}
		return "", err
	}
	return meta.GetCommitSha(), nil
}

// githubError says what a failed GetArchive means for the caller of CreateSandbox: the
// github service's code is mapped on purpose and its text is not passed on.
func githubError(repo string, err error) error {
	code := errs.DownstreamCode(err)
	if code == codes.OK {
		// A stream's Recv may hand back the peer's status unmarked.
		if st, ok := status.FromError(err); ok {
			code = st.Code()
		}
	}
	switch code {
	case codes.NotFound:
		return errs.Public(codes.FailedPrecondition, "the github service found no repository %s at that ref", repo).Wrap(err)
	case codes.InvalidArgument:
		return errs.Public(codes.InvalidArgument, "repo: the github service refused %s or its ref", repo).Wrap(err)
	case codes.Unimplemented:
		return errs.Public(codes.FailedPrecondition, "the github service cannot serve repository archives yet: create the sandbox empty or from an archive").Wrap(err)
	case codes.PermissionDenied, codes.Unauthenticated:
		return errs.Public(codes.FailedPrecondition, "the github service refused access to %s", repo).Wrap(err)
	case codes.OK:
		return err
	case codes.Canceled, codes.DeadlineExceeded:
		return errs.Public(code, "fetching %s from the github service: %s", repo, code).Wrap(err)
	}
	return errs.Public(codes.Unavailable, "the github service could not provide %s", repo).Wrap(err)
}
