package service

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/errs"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/sandbox/internal/store"
	"github.com/thefold/thefold/services/sandbox/internal/workspace"
)

const (
	maxRef        = 255
	maxJobID      = 200
	maxImage      = 255
	maxPageSize   = 200
	defaultPage   = 50
	pageTokenVer  = "s1"
	localWarning  = "local backend: commands run on the host without isolation (no namespaces, no network block); use kubernetes, docker or bwrap for code you do not trust"
	languageUnset = ""
)

// languages a sandbox may ask for.
var languages = []string{"go", "typescript", "javascript", "python"}

// CreateSandbox creates a workspace (empty, from an uploaded archive, or from a repository
// through the github service) and readies its backend.
func (s *Server) CreateSandbox(ctx context.Context, req *sandboxv1.CreateSandboxRequest) (*sandboxv1.CreateSandboxResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	sb, err := s.newSandbox(owner, req)
	if err != nil {
		return nil, err
	}
	kind, warnings, err := s.chooseBackend(ctx, req.GetBackend(), sb.GetLanguage())
	if err != nil {
		return nil, err
	}
	sb.Backend = kind
	switch {
	case kind == sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER && sb.Image == "":
		sb.Image = s.cfg.Images[imageLanguage(sb.GetLanguage())]
	case kind == sandboxv1.SandboxBackend_SANDBOX_BACKEND_KUBERNETES:
		sb.Image = s.cfg.KubeImage // one image, every language's toolchain
	}
	var creq *store.CreateRequest
	if req.GetRequestId() != "" {
		creq = &store.CreateRequest{ID: req.GetRequestId(), Fingerprint: fingerprint(req)}
	}
	name := make([]byte, 12)
	_, _ = rand.Read(name)
	sb.Workspace = filepath.Join(s.cfg.Dir, hex.EncodeToString(name), "ws")
	out, existing, err := s.store.Create(ctx, sb, s.cfg.MaxPerOwner, creq)
	if err != nil {
		return nil, err
	}
	if existing {
		return &sandboxv1.CreateSandboxResponse{Sandbox: out.Sandbox, Warnings: warnings}, nil
	}
	unlock := s.lock(out.Id)
	defer unlock()
	// The sandbox is made to the end even when the caller goes away: a half-made
	// workspace would only wait for the reaper.
	mctx := context.WithoutCancel(ctx)
	baseCommit, err := s.populate(ctx, out, req)
	if err == nil {
		err = s.prepare(mctx, out)
	}
	if err != nil {
		s.cleanup(mctx, out)
		if ferr := s.store.MarkFailed(mctx, out.Id, publicText(err)); ferr != nil {
			s.log.ErrorContext(ctx, "sandbox: mark failed", "sandbox", out.Id, "err", ferr)
		}
		s.log.WarnContext(ctx, "sandbox: create failed", "sandbox", out.Id, "err", err)
		return nil, err
	}
	if err := s.store.MarkReady(mctx, out.Id, "", baseCommit, out.Language); err != nil {
		return nil, err
	}
	ready, err := s.store.Get(mctx, owner, out.Id)
	if err != nil {
		return nil, err
	}
	if kind == sandboxv1.SandboxBackend_SANDBOX_BACKEND_LOCAL {
		s.log.WarnContext(ctx, "SANDBOX WITHOUT ISOLATION: "+localWarning, "sandbox", out.Id)
	}
	return &sandboxv1.CreateSandboxResponse{Sandbox: ready.Sandbox, Warnings: warnings}, nil
}

// newSandbox validates a create request into the row to insert.
func (s *Server) newSandbox(owner string, req *sandboxv1.CreateSandboxRequest) (*store.Sandbox, error) {
	if err := validate.RequestID("request_id", req.GetRequestId()); err != nil {
		return nil, err
	}
	hasArchive := len(req.GetArchive()) > 0
	if err := validate.Repo("repo", req.GetRepo(), false); err != nil {
		return nil, err
	}
	if hasArchive && (req.GetRef() != "" || req.GetBaseCommit() != "") {
		return nil, errs.Invalid("ref", "ref and base_commit must be empty with an archive (nothing is fetched)")
	}
	if !hasArchive && req.GetRepo() == "" && (req.GetRef() != "" || req.GetBaseCommit() != "") {
		return nil, errs.Invalid("repo", "required with ref or base_commit")
	}
	for field, v := range map[string]string{"ref": req.GetRef(), "base_commit": req.GetBaseCommit()} {
		if err := validate.MaxLen(field, v, maxRef); err != nil {
			return nil, err
		}
		if v != "" && !validate.PrintableASCII(v, false) {
			return nil, errs.Invalid(field, "must be printable ASCII without spaces")
		}
	}
	if err := validate.MaxLen("job_id", req.GetJobId(), maxJobID); err != nil {
		return nil, err
	}
	if err := validate.Enum("backend", req.GetBackend(), true); err != nil {
		return nil, err
	}
	if l := req.GetLanguage(); l != languageUnset && !slices.Contains(languages, l) {
		return nil, errs.Invalid("language", "%q: want one of %v, or empty to detect it", validate.Truncate(l, 40), languages)
	}
	if err := s.checkImage(req); err != nil {
		return nil, err
	}
	limits, err := s.limits(req.GetLimits())
	if err != nil {
		return nil, err
	}
	ttl := s.cfg.TTL
	if req.GetTtl() != nil {
		if err := req.GetTtl().CheckValid(); err != nil {
			return nil, errs.Invalid("ttl", "%v", err)
		}
		if d := req.GetTtl().AsDuration(); d < 0 || d > s.cfg.MaxTTL || (d > 0 && d < time.Second) {
			return nil, errs.Invalid("ttl", "want 1s to %s, or 0 for the default %s (pin with KeepAliveSandbox to keep one longer)", s.cfg.MaxTTL, s.cfg.TTL)
		} else if d > 0 {
			ttl = d
		}
	}
	return &store.Sandbox{Sandbox: &sandboxv1.Sandbox{
		OwnerId: owner, Repo: req.GetRepo(), Ref: req.GetRef(), BaseCommit: req.GetBaseCommit(),
		Limits: limits, JobId: req.GetJobId(), Language: req.GetLanguage(), Image: req.GetImage(),
	}, TTL: ttl}, nil
}

// fingerprint identifies a create request without its request_id.
func fingerprint(req *sandboxv1.CreateSandboxRequest) []byte {
	c := proto.Clone(req).(*sandboxv1.CreateSandboxRequest)
	c.RequestId = ""
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	h := sha256.Sum256(b)
	return h[:]
}

// prepare makes the backend's per-sandbox resources (a container) ahead of the first command.
func (s *Server) prepare(ctx context.Context, sb *store.Sandbox) error {
	p, ok := s.backends[sb.Backend].(preparer)
	if !ok {
		return nil
	}
	if err := p.Prepare(ctx, sb.Workspace, s.identity(sb), imageLanguage(sb.Language), limitsOf(sb.Limits)); err != nil {
		return s.backendError(ctx, sb, "make the sandbox", err)
	}
	return nil
}

// open opens a sandbox's workspace with the service's limits.
func (s *Server) open(sb *store.Sandbox) (*workspace.Workspace, error) {
	ws, err := workspace.Open(sb.Workspace, workspace.Limits{MaxFileBytes: s.cfg.MaxFileBytes, MaxTotalBytes: s.cfg.MaxArchiveBytes,
		SkipDirs: skipDirs})
	if err != nil {
		return nil, errs.Public(codes.FailedPrecondition, "sandbox %s has lost its workspace; destroy it and create another", sb.Id).Wrap(err)
	}
	return ws, nil
}

// skipDirs are left out of listings (unless asked for), snapshots and diffs: version
// control and dependency folders.
var skipDirs = []string{".git", "node_modules", "vendor", ".venv", "venv", "__pycache__", ".pytest_cache", ".mypy_cache"}

// cleanup frees what a sandbox holds: its backend resources and its directory.
func (s *Server) cleanup(ctx context.Context, sb *store.Sandbox) {
	b := s.backends[sb.Backend]
	if d, ok := b.(destroyer); ok {
		if err := d.Destroy(ctx, sb.Workspace); err != nil {
			s.log.WarnContext(ctx, "sandbox: backend destroy", "sandbox", sb.Id, "err", err)
		}
	}
	if r, ok := b.(releaser); ok {
		if err := r.Release(sb.Workspace); err != nil {
			s.log.WarnContext(ctx, "sandbox: backend release", "sandbox", sb.Id, "err", err)
		}
	}
	if sb.Workspace != "" && filepath.Dir(sandboxDir(sb)) == filepath.Clean(s.cfg.Dir) {
		// Files a command left read-only must not stop the removal.
		_ = filepath.WalkDir(sandboxDir(sb), func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				_ = os.Chmod(p, 0o700)
			}
			return nil
		})
		if err := os.RemoveAll(sandboxDir(sb)); err != nil {
			s.log.WarnContext(ctx, "sandbox: remove workspace", "sandbox", sb.Id, "err", err)
		}
	}
}

// ownedID is the caller and the sandbox id the request names in field.
func ownedID(ctx context.Context, field, id string) (owner, uuid string, err error) {
	if owner, err = caller(ctx); err != nil {
		return "", "", err
	}
	if uuid, err = validate.UUID(field, id, true); err != nil {
		return "", "", err
	}
	return owner, uuid, nil
}

// GetSandbox returns one of the caller's sandboxes.
func (s *Server) GetSandbox(ctx context.Context, req *sandboxv1.GetSandboxRequest) (*sandboxv1.GetSandboxResponse, error) {
	owner, id, err := ownedID(ctx, "id", req.GetId())
	if err != nil {
		return nil, err
	}
	sb, err := s.store.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return &sandboxv1.GetSandboxResponse{Sandbox: sb.Sandbox}, nil
}

// ListSandboxes lists the caller's sandboxes, newest first.
func (s *Server) ListSandboxes(ctx context.Context, req *sandboxv1.ListSandboxesRequest) (*sandboxv1.ListSandboxesResponse, error) {
	owner, err := caller(ctx)
	if err != nil {
		return nil, err
	}
	f := store.Filter{Owner: owner, Repo: req.GetRepo(), JobID: req.GetJobId()}
	if err := validate.Repo("repo", f.Repo, false); err != nil {
		return nil, err
	}
	if err := validate.MaxLen("job_id", f.JobID, maxJobID); err != nil {
		return nil, err
	}
	for _, st := range req.GetStatuses() {
		if err := validate.Enum("statuses", st, false); err != nil {
			return nil, err
		}
		if !slices.Contains(f.Statuses, st) {
			f.Statuses = append(f.Statuses, st)
		}
	}
	if f.PageSize, err = validate.PageSize(req.GetPageSize(), defaultPage, maxPageSize); err != nil {
		return nil, err
	}
	const method = "ListSandboxes"
	if tok := req.GetPageToken(); tok != "" {
		t, id, err := validate.DecodeTimeIDToken(tok, pageTokenVer, method)
		if err != nil {
			return nil, err
		}
		f.After = &store.Cursor{CreateTime: t, ID: id}
	}
	list, next, err := s.store.List(ctx, f)
	if err != nil {
		return nil, err
	}
	resp := &sandboxv1.ListSandboxesResponse{}
	for _, sb := range list {
		resp.Sandboxes = append(resp.Sandboxes, sb.Sandbox)
	}
	if next != nil {
		resp.NextPageToken = validate.EncodeTimeIDToken(pageTokenVer, next.CreateTime, next.ID)
	}
	return resp, nil
}

// DestroySandbox frees a sandbox; destroying a destroyed one succeeds.
func (s *Server) DestroySandbox(ctx context.Context, req *sandboxv1.DestroySandboxRequest) (*sandboxv1.DestroySandboxResponse, error) {
	owner, id, err := ownedID(ctx, "id", req.GetId())
	if err != nil {
		return nil, err
	}
	sb, err := s.store.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	if err := s.destroy(context.WithoutCancel(ctx), sb); err != nil {
		return nil, err
	}
	return &sandboxv1.DestroySandboxResponse{}, nil
}

// destroy frees sb's resources and records it destroyed. It waits for a command running in
// the sandbox to end (or be killed at its timeout).
func (s *Server) destroy(ctx context.Context, sb *store.Sandbox) error {
	if sb.Status == sandboxv1.SandboxStatus_SANDBOX_STATUS_DESTROYED {
		return nil
	}
	unlock := s.lock(sb.Id)
	s.cleanup(ctx, sb)
	err := s.store.Destroyed(ctx, sb.Id)
	unlock()
	s.forget(sb.Id)
	return err
}

// KeepAliveSandbox extends a live sandbox's life, or pins or unpins it.
func (s *Server) KeepAliveSandbox(ctx context.Context, req *sandboxv1.KeepAliveSandboxRequest) (*sandboxv1.KeepAliveSandboxResponse, error) {
	owner, id, err := ownedID(ctx, "id", req.GetId())
	if err != nil {
		return nil, err
	}
	var ttl time.Duration
	if req.GetTtl() != nil {
		if err := req.GetTtl().CheckValid(); err != nil {
			return nil, errs.Invalid("ttl", "%v", err)
		}
		ttl = req.GetTtl().AsDuration()
		if ttl < 0 || (ttl > 0 && ttl < time.Second) || ttl > s.cfg.MaxTTL {
			return nil, errs.Invalid("ttl", "want 1s to %s, or 0 for the sandbox's own ttl", s.cfg.MaxTTL)
		}
	}
	sb, err := s.store.KeepAlive(ctx, owner, id, ttl, req.GetPin())
	if err != nil {
		return nil, err
	}
	return &sandboxv1.KeepAliveSandboxResponse{Sandbox: sb.Sandbox}, nil
}
