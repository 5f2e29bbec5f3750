package service_test

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/thefold/thefold/pkg/db/dbtest"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/sandbox/internal/backend/docker"
	"github.com/thefold/thefold/services/sandbox/internal/service"
	"github.com/thefold/thefold/services/sandbox/internal/store"
	"github.com/thefold/thefold/services/sandbox/migrations"
)

// startLangServer is a sandbox server whose only backend is docker, with the built-in image
// for every language (built here when missing or stale). It skips when no engine answers.
func startLangServer(t *testing.T) *env {
	t.Helper()
	quiet := slog.New(slog.DiscardHandler)
	d, err := docker.New(t.Context(), docker.WithLogger(quiet), docker.WithNanoCPUs(2e9))
	if err != nil {
		t.Skip("no docker engine answers: " + err.Error())
	}
	t.Cleanup(func() { _ = d.Close() })
	// A fresh machine builds the image (a minute or two); an up-to-date one is kept, and
	// the docker backend's own tests building it at the same time are waited for.
	bctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if err := docker.BuildImage(bctx, d.Client(), docker.DefaultImage, docker.ImageSource{}); err != nil {
		t.Fatalf("build the sandbox image: %v", err)
	}
	pool, _ := dbtest.NewDatabase(t, "sandbox", migrations.FS)
	cfg := service.Config{Dir: t.TempDir(), Images: docker.DefaultImages()}
	kind := sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER
	srv, err := service.New(cfg, store.New(pool), service.WithBackend(kind, d), service.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	e := grpctest.Start(t, func(s *grpc.Server) { sandboxv1.RegisterSandboxServiceServer(s, srv) })
	return &env{srv: srv, client: sandboxv1.NewSandboxServiceClient(e.Conn), alice: e.Context(t, "alice"),
		bob: e.Context(t, "bob"), anon: t.Context(), kind: kind}
}

// validateLong is Validate with time for a cold toolchain in a container of half a CPU
// (alice's own context has a short deadline that a new context with her token escapes).
func (e *env) validateLong(t *testing.T, id string) *sandboxv1.ValidateResponse {
	t.Helper()
	md, _ := metadata.FromOutgoingContext(e.alice)
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), md), 10*time.Minute)
	defer cancel()
	resp, err := e.client.Validate(ctx, &sandboxv1.ValidateRequest{SandboxId: id})
	if err != nil {
		t.Fatalf("Validate: %v", err)
	}
	return resp
}

// stepDiag is the first diagnostic of a step of kind with path (and line, when not 0).
func stepDiag(t *testing.T, resp *sandboxv1.ValidateResponse, kind sandboxv1.ValidationStepKind, path string, line int32) *typev1.Diagnostic {
	t.Helper()
	for _, st := range resp.Steps {
		for _, d := range st.Diagnostics {
			t.Logf("%s %s: %s:%d:%d %s (%s %s)", st.Kind, st.Status, d.Path, d.Line, d.Column, d.Message, d.Tool, d.Rule)
		}
	}
	for _, st := range resp.Steps {
		if st.Kind != kind {
			continue
		}
		if st.Status != sandboxv1.StepStatus_STEP_STATUS_FAILED {
			t.Errorf("%s step %q: %s (%s), want FAILED; output:\n%s", kind, st.Command, st.Status, st.Message, st.Output)
		}
		for _, d := range st.Diagnostics {
			if d.Path == path && (line == 0 || d.Line == line) {
				return d
			}
		}
	}
	t.Errorf("no %s diagnostic at %s:%d; steps %v", kind, path, line, resp.Steps)
	return nil
}

// A TypeScript project that brings no node_modules is type-checked with the image's tsc.
func TestDockerValidateTypeScript(t *testing.T) {
	t.Parallel()
	e := startLangServer(t)
	sb := e.create(t, &sandboxv1.CreateSandboxRequest{Language: "typescript", Archive: tarGz(t, map[string]string{
		"tsconfig.json": `{"compilerOptions": {"strict": true, "target": "es2020", "module": "commonjs"}, "include": ["src"]}`,
		"src/a.ts":      "export function twice(n: number): number {\n  return n * 2;\n}\n\nexport const s: string = twice(2);\n",
	})})
	if sb.Backend != sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER || sb.Image != docker.DefaultImage {
		t.Fatalf("backend %s image %q, want docker with %s", sb.Backend, sb.Image, docker.DefaultImage)
	}
	resp := e.validateLong(t, sb.Id)
	if resp.Passed || resp.Toolchain != "node" {
		t.Errorf("passed %v toolchain %q, want node, not passed", resp.Passed, resp.Toolchain)
	}
	d := stepDiag(t, resp, sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TYPECHECK, "src/a.ts", 5)
	if d != nil && (d.Tool != "tsc" || d.Rule != "TS2322" || d.Column != 14 || d.Severity != typev1.Severity_SEVERITY_ERROR) {
		t.Errorf("diagnostic %v, want tsc's TS2322 error at column 14", d)
	}
}

// A failing pytest test is reported at its file and line.
func TestDockerValidatePython(t *testing.T) {
	t.Parallel()
	e := startLangServer(t)
	sb := e.create(t, &sandboxv1.CreateSandboxRequest{Language: "python", Archive: tarGz(t, map[string]string{
		"calc.py":   "def add(a, b):\n    return a - b\n",
		"test_x.py": "from calc import add\n\n\ndef test_add():\n    assert add(2, 2) == 4, 'add is broken'\n\n\ndef test_writes():\n    open('artifact.txt', 'w').write('x')\n",
	})})
	resp := e.validateLong(t, sb.Id)
	if resp.Passed || resp.Toolchain != "python" {
		t.Errorf("passed %v toolchain %q, want python, not passed", resp.Passed, resp.Toolchain)
	}
	for _, st := range resp.Steps {
		if st.Kind == sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TYPECHECK && st.Status != sandboxv1.StepStatus_STEP_STATUS_PASSED {
			t.Errorf("python compile of valid files: %s (%s)\n%s", st.Status, st.Message, st.Output)
		}
	}
	d := stepDiag(t, resp, sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TEST, "test_x.py", 5)
	if d != nil && (d.Tool != "pytest" || d.Severity != typev1.Severity_SEVERITY_ERROR) {
		t.Errorf("diagnostic %v, want pytest's error", d)
	}
	// Validation keeps nothing its tools wrote (here a test's file): the workspace, and so
	// the diff, is the code alone.
	files, err := e.client.ListFiles(e.alice, &sandboxv1.ListFilesRequest{SandboxId: sb.Id, Recursive: true, IncludeIgnored: true})
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, f := range files.Files {
		paths = append(paths, f.Path)
	}
	if strings.Join(paths, " ") != "calc.py test_x.py" {
		t.Errorf("the workspace after validation: %v, want calc.py and test_x.py", paths)
	}
}
