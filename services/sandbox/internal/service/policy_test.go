package service_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/db/dbtest"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/sandbox/internal/backend"
	"github.com/thefold/thefold/services/sandbox/internal/backend/docker"
	"github.com/thefold/thefold/services/sandbox/internal/service"
	"github.com/thefold/thefold/services/sandbox/internal/store"
	"github.com/thefold/thefold/services/sandbox/migrations"
)

const (
	bwrapKind  = sandboxv1.SandboxBackend_SANDBOX_BACKEND_BWRAP
	localKind  = sandboxv1.SandboxBackend_SANDBOX_BACKEND_LOCAL
	dockerKind = sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER
)

// policyEnv is a server offering the given backends (the first the default), with a member
// and an admin to call it.
type policyEnv struct {
	client        sandboxv1.SandboxServiceClient
	member, admin context.Context
	// target is the server's own gRPC address (a port the probes must not reach).
	target string
	// dir holds the workspaces on the host.
	dir string
	// long is a member's context good for five minutes.
	long func() context.Context
}

func startPolicy(t *testing.T, cfg service.Config, kinds ...sandboxv1.SandboxBackend) *policyEnv {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "sandbox", migrations.FS)
	cfg.Dir = t.TempDir()
	quiet := slog.New(slog.DiscardHandler)
	hostOpts := []backend.Option{backend.WithLogger(quiet), backend.WithStateDir(t.TempDir())}
	var opts []service.Option
	for _, k := range kinds {
		var b backend.Backend
		switch k {
		case bwrapKind:
			// The machine's warm Go build cache, as the service's own bwrap has.
			bw, err := backend.NewBwrap(append(hostOpts, backend.WithWarmGoCache(backend.DefaultWarmDir()))...)
			if err != nil {
				t.Skipf("bwrap does not work here: %v", err)
			}
			b = bw
		case localKind:
			b = backend.NewLocal(hostOpts...)
		case dockerKind:
			// Two CPUs: the probes compile Go in a cold cache.
			d, err := docker.New(t.Context(), docker.WithLogger(quiet), docker.WithNanoCPUs(2e9))
			if err != nil {
				t.Skipf("no docker engine answers: %v", err)
			}
			b = d
		}
		t.Cleanup(func() { _ = b.Close() })
		opts = append(opts, service.WithBackend(k, b))
	}
	srv, err := service.New(cfg, store.New(pool), append(opts, service.WithLogger(quiet))...)
	if err != nil {
		t.Fatal(err)
	}
	e := grpctest.Start(t, func(s *grpc.Server) { sandboxv1.RegisterSandboxServiceServer(s, srv) })
	return &policyEnv{client: sandboxv1.NewSandboxServiceClient(e.Conn), member: e.Context(t, "member"),
		admin: e.Context(t, "root", auth.RoleAdmin), target: e.Conn.Target(), dir: cfg.Dir,
		long: func() context.Context { return longContext(t, e, "member") }}
}

// longContext is a member's context for calls that may take minutes (grpctest's carry 30 s
// from when they were made).
func longContext(t *testing.T, e *grpctest.Env, user string) context.Context {
	t.Helper()
	tok, _, err := e.Signer.Issue(user, []string{auth.RoleUser}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

func (e *policyEnv) create(ctx context.Context, backend sandboxv1.SandboxBackend, language string) (*sandboxv1.CreateSandboxResponse, error) {
	return e.client.CreateSandbox(ctx, &sandboxv1.CreateSandboxRequest{Backend: backend, Language: language})
}

// A member cannot ask for the local backend, whether or not the operator offers it; an
// admin can only where it is offered. Nobody may ask for less isolation than the default.
func TestBackendPolicyLocalIsForAdminsWhereOffered(t *testing.T) {
	t.Run("offered", func(t *testing.T) {
		e := startPolicy(t, service.Config{AllowLocal: true}, bwrapKind, localKind)
		_, err := e.create(e.member, localKind, "")
		grpctest.WantCode(t, err, codes.PermissionDenied, "backend", "admin", "THEFOLD_SANDBOX_ALLOW_LOCAL")
		resp, err := e.create(e.admin, localKind, "")
		if err != nil {
			t.Fatalf("admin asking for local: %v", err)
		}
		if resp.Sandbox.Backend != localKind || !slices.ContainsFunc(resp.Warnings, func(w string) bool { return strings.Contains(w, "without isolation") }) {
			t.Fatalf("admin's local sandbox: %v, warnings %q", resp.Sandbox.Backend, resp.Warnings)
		}
		resp, err = e.create(e.member, sandboxv1.SandboxBackend_SANDBOX_BACKEND_UNSPECIFIED, "")
		if err != nil || resp.Sandbox.Backend != bwrapKind {
			t.Fatalf("a member's default sandbox: %v %v", resp.GetSandbox().GetBackend(), err)
		}
	})
	t.Run("not offered", func(t *testing.T) {
		e := startPolicy(t, service.Config{}, bwrapKind)
		_, err := e.create(e.member, localKind, "")
		grpctest.WantCode(t, err, codes.PermissionDenied, "THEFOLD_SANDBOX_ALLOW_LOCAL")
		_, err = e.create(e.admin, localKind, "")
		grpctest.WantCode(t, err, codes.FailedPrecondition, "backend", "THEFOLD_SANDBOX_ALLOW_LOCAL")
	})
}

// Under a docker default, a member may not ask for bwrap, and a language without an image
// goes to bwrap with a warning, never to local, even where local is offered.
func TestBackendPolicyNoSilentFallback(t *testing.T) {
	cfg := service.Config{AllowLocal: true, Images: map[string]string{"go": docker.DefaultGoImage}}
	t.Run("bwrap beside docker", func(t *testing.T) {
		e := startPolicy(t, cfg, dockerKind, bwrapKind, localKind)
		_, err := e.create(e.member, bwrapKind, "")
		grpctest.WantCode(t, err, codes.PermissionDenied, "backend", "less isolated", "DOCKER")
		resp, err := e.create(e.member, sandboxv1.SandboxBackend_SANDBOX_BACKEND_UNSPECIFIED, "python")
		if err != nil {
			t.Fatal(err)
		}
		if resp.Sandbox.Backend != bwrapKind || !slices.ContainsFunc(resp.Warnings, func(w string) bool { return strings.Contains(w, "uses bwrap") }) {
			t.Fatalf("python without a docker image: %v, warnings %q", resp.Sandbox.Backend, resp.Warnings)
		}
	})
	t.Run("docker alone", func(t *testing.T) {
		e := startPolicy(t, cfg, dockerKind, localKind)
		_, err := e.create(e.member, sandboxv1.SandboxBackend_SANDBOX_BACKEND_UNSPECIFIED, "python")
		grpctest.WantCode(t, err, codes.FailedPrecondition, "THEFOLD_SANDBOX_IMAGES", "python")
		_, err = e.create(e.member, dockerKind, "typescript")
		grpctest.WantCode(t, err, codes.FailedPrecondition, "THEFOLD_SANDBOX_IMAGES")
	})
}

// OpenBackends offers only what the operator named, never local without the opt-in, and
// says why each missing backend is missing.
func TestOpenBackendsOffersOnlyWhatTheOperatorAllows(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	bs, err := service.OpenBackends(t.Context(), service.Config{Backend: "auto", Offer: []string{"bwrap"}, Dir: t.TempDir()}, quiet)
	if err != nil {
		if _, berr := backend.NewBwrap(backend.WithStateDir(t.TempDir())); berr != nil {
			if !strings.Contains(err.Error(), "no isolating backend") || !strings.Contains(err.Error(), "THEFOLD_SANDBOX_ALLOW_LOCAL") {
				t.Fatalf("without bwrap: %v", err)
			}
			t.Skipf("bwrap does not work here: %v", berr)
		}
		t.Fatal(err)
	}
	defer bs.Close()
	if bs.Default != bwrapKind || !slices.Equal(bs.Available, []string{"bwrap"}) {
		t.Fatalf("default %v available %v", bs.Default, bs.Available)
	}
	if !strings.Contains(bs.Missing["local"], "THEFOLD_SANDBOX_ALLOW_LOCAL") || !strings.Contains(bs.Missing["docker"], "THEFOLD_SANDBOX_BACKENDS") {
		t.Fatalf("missing: %q", bs.Missing)
	}

	bs2, err := service.OpenBackends(t.Context(), service.Config{Backend: "bwrap", Offer: []string{"bwrap"}, AllowLocal: true, Dir: t.TempDir()}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer bs2.Close()
	if !slices.Equal(bs2.Available, []string{"bwrap", "local"}) || bs2.Default != bwrapKind {
		t.Fatalf("with local allowed: default %v available %v", bs2.Default, bs2.Available)
	}
}

// Where an engine answers and bwrap works, both are offered side by side, docker the
// default, with the built-in image for every language.
func TestOpenBackendsOffersDockerAndBwrapSideBySide(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	if _, err := docker.New(t.Context()); err != nil {
		t.Skipf("no docker engine answers: %v", err)
	}
	if _, err := backend.NewBwrap(backend.WithStateDir(t.TempDir())); err != nil {
		t.Skipf("bwrap does not work here: %v", err)
	}
	bs, err := service.OpenBackends(t.Context(), service.Config{Backend: "auto", Dir: t.TempDir(), DockerBuildImage: true}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer bs.Close()
	if bs.Default != dockerKind || !slices.Equal(bs.Available, []string{"docker", "bwrap"}) || len(bs.Reasons) != 0 {
		t.Fatalf("default %v, available %v, reasons %q", bs.Default, bs.Available, bs.Reasons)
	}
	for _, lang := range []string{"go", "python", "typescript", "javascript"} {
		if bs.Images[lang] != docker.DefaultImage {
			t.Errorf("%s: image %q", lang, bs.Images[lang])
		}
	}
}

// WarmBwrapCache (`sandbox warm-cache`, which `make setup` runs) makes or finds the shared
// Go build cache where the service's bwrap backend looks for it, and makes none when the
// operator turned it off.
func TestWarmBwrapCacheIsWhereTheServiceLooks(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	if _, err := backend.NewBwrap(backend.WithStateDir(t.TempDir())); err != nil {
		t.Skipf("bwrap does not work here: %v", err)
	}
	dir, err := service.WarmBwrapCache(t.Context(), service.Config{Dir: t.TempDir(), WarmCacheDir: "off"}, quiet)
	if err != nil || dir != "" {
		t.Fatalf("with the cache off: %q, %v; want none", dir, err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Minute)
	defer cancel()
	// The machine's default directory, which every test shares (one of its own would make a
	// second seed: minutes of compiling).
	dir, err = service.WarmBwrapCache(ctx, service.Config{Dir: t.TempDir()}, quiet)
	if err != nil {
		t.Fatal(err)
	}
	if base := backend.DefaultWarmDir(); filepath.Dir(dir) != base {
		t.Fatalf("the cache is %s, not under the service's default %s", dir, base)
	}
	if _, err := os.Stat(filepath.Join(dir, "ready")); err != nil {
		t.Fatalf("%s is not a finished cache: %v", dir, err)
	}
}
