package service

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	"github.com/thefold/thefold/pkg/validate"
	"github.com/thefold/thefold/pkg/wait"

	"github.com/thefold/thefold/services/sandbox/internal/store"
	sbvalidate "github.com/thefold/thefold/services/sandbox/internal/validate"
	"github.com/thefold/thefold/services/sandbox/internal/workspace"
)

const (
	maxRef        = 255
	maxJobID      = 200
	maxImage      = 255
	maxPageSize   = 200
	defaultPage   = 50
	pageTokenVer  = "s1"
	localWarning  = "local backend: commands run on the host without isolation (no namespaces, no network block); use docker or bwrap for code you do not trust"
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
	if kind == sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER && sb.Image == "" {
		sb.Image = s.cfg.Images[imageLanguage(sb.GetLanguage())]
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

func (s *Server) checkImage(req *sandboxv1.CreateSandboxRequest) error {
	img := req.GetImage()
	if img == "" {
		return nil
	}
	if err := validate.MaxLen("image", img, maxImage); err != nil {
		return err
	}
	if b := req.GetBackend(); b != sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER {
		return errs.Invalid("image", "only for the docker backend (backend is %s)", backendName(b))
	}
	allowed := slices.Clone(s.cfg.AllowedImages)
	for _, v := range s.cfg.Images {
		allowed = append(allowed, v)
	}
	if !slices.Contains(allowed, img) {
		return errs.Invalid("image", "%q is not one of the configured images (THEFOLD_SANDBOX_IMAGES, THEFOLD_SANDBOX_ALLOWED_IMAGES)", validate.Truncate(img, 80))
	}
	return nil
}

// limits checks a request's limits and fills the defaults: the sandbox's effective limits.
func (s *Server) limits(l *sandboxv1.ResourceLimits) (*sandboxv1.ResourceLimits, error) {
	out := &sandboxv1.ResourceLimits{MemoryBytes: s.cfg.Memory, Cpus: s.cfg.CPUs, Pids: s.cfg.Pids,
		Timeout: durationpb.New(s.cfg.Timeout)}
	if l == nil {
		return out, nil
	}
	if l.NetworkAllowed {
		return nil, errs.Invalid("limits.network_allowed", "a sandbox never has network; a dependencies command asks for NETWORK_POLICY_PACKAGES in RunCommand")
	}
	switch m := l.MemoryBytes; {
	case m < 0 || (m > 0 && m < 16<<20) || m > s.cfg.MaxMemory:
		return nil, errs.Invalid("limits.memory_bytes", "want 16 MiB to %d bytes, or 0 for the default", s.cfg.MaxMemory)
	case m > 0:
		out.MemoryBytes = m
	}
	switch c := l.Cpus; {
	case c < 0 || c > maxCPUs() || c != c:
		return nil, errs.Invalid("limits.cpus", "want 0 to %g cores", maxCPUs())
	case c > 0:
		out.Cpus = c
	}
	switch p := l.Pids; {
	case p < 0 || (p > 0 && p < 8) || p > s.cfg.MaxPids:
		return nil, errs.Invalid("limits.pids", "want 8 to %d, or 0 for the default", s.cfg.MaxPids)
	case p > 0:
		out.Pids = p
	}
	if l.Timeout != nil {
		d, err := s.timeout("limits.timeout", l.Timeout)
		if err != nil {
			return nil, err
		}
		if d > 0 {
			out.Timeout = durationpb.New(d)
		}
	}
	return out, nil
}

// timeout checks a caller's timeout: 0 (the default), or 1 s to the configured maximum.
func (s *Server) timeout(field string, d *durationpb.Duration) (time.Duration, error) {
	if d == nil {
		return 0, nil
	}
	if err := d.CheckValid(); err != nil {
		return 0, errs.Invalid(field, "%v", err)
	}
	v := d.AsDuration()
	if v < 0 || (v > 0 && v < time.Second) || v > s.cfg.MaxTimeout {
		return 0, errs.Invalid(field, "want 1s to %s, or 0 for the default", s.cfg.MaxTimeout)
	}
	return v, nil
}

// chooseBackend picks the backend of a new sandbox. The server's default serves a request
// that names none; a request may name only a backend at least as isolated as the default
// (docker > bwrap > local), and local only an admin, when the operator offers it at all.
// Nothing falls back silently to less isolation: when the default docker backend has no
// image for the language, bwrap serves it (said in the warnings), else the request fails.
func (s *Server) chooseBackend(ctx context.Context, want sandboxv1.SandboxBackend, language string) (sandboxv1.SandboxBackend, []string, error) {
	var warnings []string
	local := sandboxv1.SandboxBackend_SANDBOX_BACKEND_LOCAL
	if want == sandboxv1.SandboxBackend_SANDBOX_BACKEND_UNSPECIFIED {
		want = s.def
		// The default docker backend may lack an image for a language: the next isolating
		// backend serves it, saying so; never local.
		if want == sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER && s.cfg.Images[imageLanguage(language)] == "" {
			if _, ok := s.backends[sandboxv1.SandboxBackend_SANDBOX_BACKEND_BWRAP]; !ok {
				return 0, nil, errs.Public(codes.FailedPrecondition, "the docker backend has no image for language %q and no other isolating backend is available: configure one in THEFOLD_SANDBOX_IMAGES (%s=<image>), or install bubblewrap", language, imageLanguage(language))
			}
			warnings = append(warnings, fmt.Sprintf("docker: no image for language %q (THEFOLD_SANDBOX_IMAGES): this sandbox uses bwrap", language))
			want = sandboxv1.SandboxBackend_SANDBOX_BACKEND_BWRAP
		}
		if want == s.def && want != sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER {
			warnings = append(warnings, s.reasons...)
		}
	} else {
		if want == local && want != s.def && !isAdmin(ctx) {
			return 0, nil, errs.Public(codes.PermissionDenied, "backend: LOCAL runs commands on the host without isolation; only an admin may ask for it, and only where the operator set THEFOLD_SANDBOX_ALLOW_LOCAL=true")
		}
		if isolation[want] < isolation[s.def] && !isAdmin(ctx) {
			return 0, nil, errs.Public(codes.PermissionDenied, "backend: %s is less isolated than this server's default (%s); ask for %s or leave backend unset", backendName(want), backendName(s.def), s.atLeast(s.def))
		}
	}
	if _, ok := s.backends[want]; !ok {
		if want == local {
			return 0, nil, errs.Public(codes.FailedPrecondition, "backend: the local backend is off on this server (THEFOLD_SANDBOX_ALLOW_LOCAL is not set; available: %v)", s.available())
		}
		return 0, nil, errs.Public(codes.FailedPrecondition, "backend: the %s backend is not available on this server (available: %v)", backendName(want), s.available())
	}
	if want == sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER && s.cfg.Images[imageLanguage(language)] == "" {
		return 0, nil, errs.Public(codes.FailedPrecondition, "backend: the docker backend has no image for language %q (THEFOLD_SANDBOX_IMAGES)", language)
	}
	if want == local {
		warnings = append(warnings, localWarning)
	}
	return want, warnings, nil
}

// atLeast lists the offered backends at least as isolated as k.
func (s *Server) atLeast(k sandboxv1.SandboxBackend) string {
	var out []string
	for _, b := range byIsolation {
		if _, ok := s.backends[b]; ok && isolation[b] >= isolation[k] {
			out = append(out, strings.ToUpper(backendName(b)))
		}
	}
	return strings.Join(out, " or ")
}

// isAdmin says whether the caller is an admin (a service acting for a user never is).
func isAdmin(ctx context.Context) bool {
	p, ok := auth.FromContext(ctx)
	return ok && p.HasRole(auth.RoleAdmin)
}

// imageLanguage is the key of a language's docker image; an undetected language takes Go's
// (the image a workspace gets when nothing says otherwise).
func imageLanguage(l string) string {
	if l == "" {
		return "go"
	}
	return l
}

func (s *Server) available() []string {
	var out []string
	for _, k := range []sandboxv1.SandboxBackend{sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER, sandboxv1.SandboxBackend_SANDBOX_BACKEND_BWRAP, sandboxv1.SandboxBackend_SANDBOX_BACKEND_LOCAL} {
		if _, ok := s.backends[k]; ok {
			out = append(out, backendName(k))
		}
	}
	return out
}

// fingerprint identifies a create request without its request_id.
func fingerprint(req *sandboxv1.CreateSandboxRequest) []byte {
	c := proto.Clone(req).(*sandboxv1.CreateSandboxRequest)
	c.RequestId = ""
	b, _ := proto.MarshalOptions{Deterministic: true}.Marshal(c)
	h := sha256.Sum256(b)
	return h[:]
}

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

// RunReaper destroys expired sandboxes every interval until ctx ends. A failing round is
// logged and tried again; only the end of ctx stops it.
func (s *Server) RunReaper(ctx context.Context) error {
	round := func(ctx context.Context) {
		if n, err := s.Reap(ctx); err != nil && ctx.Err() == nil {
			s.log.WarnContext(ctx, "sandbox reaper", "err", err)
		} else if n > 0 {
			s.log.InfoContext(ctx, "sandbox reaper: destroyed expired sandboxes", "count", n)
		}
	}
	round(ctx)
	wait.Every(ctx, s.cfg.ReapInterval, round)
	return nil
}

// Reap destroys the sandboxes whose idle time has run out and returns how many, then
// removes the backend resources no live sandbox uses (reconcile). RunReaper's first round,
// at start, so cleans up after a process of the service that was killed.
func (s *Server) Reap(ctx context.Context) (int, error) {
	n := 0
	for {
		expired, err := s.store.Expired(ctx, 50)
		if err != nil {
			return n, err
		}
		if len(expired) == 0 {
			// Now that the expired ones say destroyed, what no live sandbox uses goes: the
			// containers a killed process of the service left behind.
			return n, s.reconcile(ctx)
		}
		for _, sb := range expired {
			if err := s.destroy(ctx, sb); err != nil {
				return n, err
			}
			n++
		}
	}
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
