package service_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"log/slog"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/db/dbtest"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/sandbox/internal/backend"
	"github.com/thefold/thefold/services/sandbox/internal/service"
	"github.com/thefold/thefold/services/sandbox/internal/store"
	"github.com/thefold/thefold/services/sandbox/migrations"
)

// env is a sandbox server on its own database and workspace directory, reached over
// loopback gRPC, with the most isolating host backend that works here (bwrap, else local).
type env struct {
	srv    *service.Server
	client sandboxv1.SandboxServiceClient
	alice  context.Context
	bob    context.Context
	anon   context.Context
	kind   sandboxv1.SandboxBackend
	// st is the server's store (its command log), where a test reads it.
	st *store.Store
}

func start(t *testing.T, cfg service.Config) *env {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "sandbox", migrations.FS)
	if cfg.Dir == "" {
		cfg.Dir = t.TempDir()
	}
	quiet := slog.New(slog.DiscardHandler)
	opts := []backend.Option{backend.WithLogger(quiet), backend.WithStateDir(t.TempDir())}
	var (
		b    backend.Backend
		kind = sandboxv1.SandboxBackend_SANDBOX_BACKEND_BWRAP
	)
	// The machine's warm Go build cache, as the service's own bwrap has (and startPolicy's):
	// without it each sandbox compiles the standard library for go vet, build and test
	// itself, about half a minute of CPU per Go validation. TestMain has made it.
	if bw, err := backend.NewBwrap(append(opts, backend.WithWarmGoCache(backend.DefaultWarmDir()))...); err == nil {
		b = bw
	} else {
		t.Logf("bwrap does not work here (%v): the local backend runs the commands", err)
		b, kind = backend.NewLocal(opts...), sandboxv1.SandboxBackend_SANDBOX_BACKEND_LOCAL
	}
	t.Cleanup(func() { _ = b.Close() })
	st := store.New(pool)
	srv, err := service.New(cfg, st, service.WithBackend(kind, b), service.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	e := grpctest.Start(t, func(s *grpc.Server) { sandboxv1.RegisterSandboxServiceServer(s, srv) })
	return &env{srv: srv, client: sandboxv1.NewSandboxServiceClient(e.Conn), alice: e.Context(t, "alice"),
		bob: e.Context(t, "bob"), anon: t.Context(), kind: kind, st: st}
}

// create makes one of alice's sandboxes.
func (e *env) create(t *testing.T, req *sandboxv1.CreateSandboxRequest) *sandboxv1.Sandbox {
	t.Helper()
	if req == nil {
		req = &sandboxv1.CreateSandboxRequest{}
	}
	resp, err := e.client.CreateSandbox(e.alice, req)
	if err != nil {
		t.Fatalf("CreateSandbox: %v", err)
	}
	if resp.Sandbox.Status != sandboxv1.SandboxStatus_SANDBOX_STATUS_READY {
		t.Fatalf("sandbox %v", resp.Sandbox)
	}
	return resp.Sandbox
}

func (e *env) write(t *testing.T, id, path, content string) {
	t.Helper()
	if _, err := e.client.WriteFile(e.alice, &sandboxv1.WriteFileRequest{SandboxId: id, Path: path, Content: []byte(content)}); err != nil {
		t.Fatalf("WriteFile %s: %v", path, err)
	}
}

func (e *env) read(t *testing.T, id, path string) string {
	t.Helper()
	resp, err := e.client.ReadFile(e.alice, &sandboxv1.ReadFileRequest{SandboxId: id, Path: path})
	if err != nil {
		t.Fatalf("ReadFile %s: %v", path, err)
	}
	return string(resp.Content)
}

// result is a command's collected stream.
type result struct {
	stdout, stderr string
	res            *sandboxv1.CommandResult
}

func (e *env) run(t *testing.T, id string, argv ...string) (*result, error) {
	t.Helper()
	return e.runReq(t, &sandboxv1.RunCommandRequest{SandboxId: id, Command: argv})
}

func (e *env) runReq(t *testing.T, req *sandboxv1.RunCommandRequest) (*result, error) {
	t.Helper()
	return runIn(e.alice, e.client, req)
}

// wantCode fails unless err is a status with code whose message contains every part.
func wantCode(t *testing.T, err error, code codes.Code, parts ...string) {
	t.Helper()
	st, _ := status.FromError(err)
	if st.Code() != code {
		t.Fatalf("got %v (%q), want %v", st.Code(), st.Message(), code)
	}
	for _, p := range parts {
		if !strings.Contains(st.Message(), p) {
			t.Fatalf("message %q does not contain %q", st.Message(), p)
		}
	}
}

// tarGz packs files (path → content; a value starting with "->" is a symlink) as .tar.gz.
func tarGz(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	tw := tar.NewWriter(gz)
	for name, content := range files {
		h := &tar.Header{Name: name, Mode: 0o644, Size: int64(len(content)), Typeflag: tar.TypeReg}
		if target, ok := strings.CutPrefix(content, "->"); ok {
			h = &tar.Header{Name: name, Typeflag: tar.TypeSymlink, Linkname: target}
		}
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Typeflag == tar.TypeReg {
			if _, err := tw.Write([]byte(content)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := gz.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
