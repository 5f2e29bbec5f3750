package engine_test

// Fakes at the gRPC boundary for the engine's build tests (build_test.go): a sandbox that
// keeps a workspace in memory and checks it with a rule the test gives, and an ai service
// whose answers the test scripts. Both record what they were asked.

import (
	"context"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

const sandboxID = "11111111-1111-4111-8111-111111111111"

// serve starts a gRPC server on a loopback port with register's services and returns a
// connection to it.
func serve(t *testing.T, register func(*grpc.Server)) *grpc.ClientConn {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// fakeSandbox is a READY Go sandbox over an in-memory workspace. Its validations run
// check over the whole workspace: ValidateIncremental answers the diagnostics in the
// files asked about in its steps and the other files' errors as dependent diagnostics,
// and passes when the files asked about have no error (the contract) or, when strict,
// when no file has one (a sandbox that fails a file for the dependents it breaks: the
// engine must give the same answer with both).
type fakeSandbox struct {
	sandboxv1.UnimplementedSandboxServiceServer
	check  func(files map[string]string) []*typev1.Diagnostic
	strict bool
	// validated, when set, is called as each ValidateIncremental answers.
	validated func()

	mu    sync.Mutex
	files map[string]string
	reads map[string]int
}

func newSandbox(files map[string]string, check func(map[string]string) []*typev1.Diagnostic) *fakeSandbox {
	return &fakeSandbox{files: maps.Clone(files), check: check, reads: map[string]int{}}
}

func (f *fakeSandbox) GetSandbox(_ context.Context, req *sandboxv1.GetSandboxRequest) (*sandboxv1.GetSandboxResponse, error) {
	if req.GetId() != sandboxID {
		return nil, status.Error(codes.NotFound, "no such sandbox")
	}
	return &sandboxv1.GetSandboxResponse{Sandbox: &sandboxv1.Sandbox{Id: sandboxID, Status: sandboxv1.SandboxStatus_SANDBOX_STATUS_READY, Language: "go"}}, nil
}

func (f *fakeSandbox) ListFiles(context.Context, *sandboxv1.ListFilesRequest) (*sandboxv1.ListFilesResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &sandboxv1.ListFilesResponse{}
	for _, p := range slices.Sorted(maps.Keys(f.files)) {
		resp.Files = append(resp.Files, &sandboxv1.FileInfo{Path: p, Size: int64(len(f.files[p]))})
	}
	return resp, nil
}

func (f *fakeSandbox) ReadFile(_ context.Context, req *sandboxv1.ReadFileRequest) (*sandboxv1.ReadFileResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads[req.GetPath()]++
	c, ok := f.files[req.GetPath()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "%s: no such file", req.GetPath())
	}
	return &sandboxv1.ReadFileResponse{Content: []byte(c), Size: int64(len(c))}, nil
}

func (f *fakeSandbox) WriteFile(_ context.Context, req *sandboxv1.WriteFileRequest) (*sandboxv1.WriteFileResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.files[req.GetPath()] = string(req.GetContent())
	return &sandboxv1.WriteFileResponse{}, nil
}

func (f *fakeSandbox) DeleteFile(_ context.Context, req *sandboxv1.DeleteFileRequest) (*sandboxv1.DeleteFileResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.files, req.GetPath())
	return &sandboxv1.DeleteFileResponse{}, nil
}

func (f *fakeSandbox) ValidateIncremental(_ context.Context, req *sandboxv1.ValidateIncrementalRequest) (*sandboxv1.ValidateIncrementalResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	resp := &sandboxv1.ValidateIncrementalResponse{Passed: true, Toolchain: "go"}
	step := &sandboxv1.StepResult{Kind: sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TYPECHECK, Status: sandboxv1.StepStatus_STEP_STATUS_PASSED}
	for _, d := range f.check(f.files) {
		if slices.Contains(req.GetPaths(), d.Path) {
			step.Diagnostics = append(step.Diagnostics, d)
			resp.Passed = false
		} else {
			resp.DependentDiagnostics = append(resp.DependentDiagnostics, d)
			resp.OtherErrors++
			resp.Passed = resp.Passed && !f.strict
		}
	}
	if len(step.Diagnostics)+len(resp.DependentDiagnostics) > 0 {
		step.Status, step.Output = sandboxv1.StepStatus_STEP_STATUS_FAILED, "type errors"
	}
	resp.Steps = []*sandboxv1.StepResult{step}
	if f.validated != nil {
		f.validated()
	}
	return resp, nil
}

func (f *fakeSandbox) Validate(context.Context, *sandboxv1.ValidateRequest) (*sandboxv1.ValidateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	step := &sandboxv1.StepResult{Kind: sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TYPECHECK, Command: []string{"go", "vet", "./..."}, Status: sandboxv1.StepStatus_STEP_STATUS_PASSED,
		Diagnostics: f.check(f.files)}
	if len(step.Diagnostics) > 0 {
		step.Status = sandboxv1.StepStatus_STEP_STATUS_FAILED
	}
	return &sandboxv1.ValidateResponse{Passed: len(step.Diagnostics) == 0, Toolchain: "go", Steps: []*sandboxv1.StepResult{step}}, nil
}

func (f *fakeSandbox) Diff(context.Context, *sandboxv1.DiffRequest) (*sandboxv1.DiffResponse, error) {
	return &sandboxv1.DiffResponse{Stats: &typev1.DiffStats{}}, nil
}

func (f *fakeSandbox) content(p string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.files[p]
}

func (f *fakeSandbox) readsOf(p string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.reads[p]
}

// goCheck is the test's type checker: a line holding BROKEN is "undefined: BROKEN", and
// once lib.Greet takes a greeting, a call lib.Greet(name) has too few arguments.
func goCheck(files map[string]string) []*typev1.Diagnostic {
	var out []*typev1.Diagnostic
	twoArgs := strings.Contains(files["lib/greet.go"], "func Greet(greeting, name string)")
	for _, p := range slices.Sorted(maps.Keys(files)) {
		if !strings.HasSuffix(p, ".go") {
			continue
		}
		for i, line := range strings.Split(files[p], "\n") {
			switch {
			case strings.Contains(line, "BROKEN"):
				out = append(out, &typev1.Diagnostic{Path: p, Line: int32(i + 1), Severity: typev1.Severity_SEVERITY_ERROR, Message: "undefined: BROKEN", Tool: "go vet"})
			case twoArgs && strings.Contains(line, "lib.Greet(name)"):
				out = append(out, &typev1.Diagnostic{Path: p, Line: int32(i + 1), Severity: typev1.Severity_SEVERITY_ERROR,
					Message: "not enough arguments in call to lib.Greet\n\thave (string)\n\twant (string, string)", Tool: "go vet"})
			}
		}
	}
	return out
}

// fakeAI answers GenerateFile and FixFile with the test's functions (by path; a fix by
// path and round) and records the requests.
type fakeAI struct {
	aiv1.UnimplementedAIServiceServer
	generate func(req *aiv1.GenerateFileRequest) string
	fix      func(req *aiv1.FixFileRequest) (content, explanation string)
	// fixFull, when set, answers FixFile instead of fix (e.g. with related changes).
	fixFull func(req *aiv1.FixFileRequest) *aiv1.FixFileResponse
	// fail, when set, may fail the n-th call (1-based) of method ("GenerateFile", "FixFile")
	// instead of answering.
	fail func(method string, n int) error
	// hold, when set, is called with the call's context before the n-th GenerateFile
	// answers: it may hold the call (a slow model) and fail it.
	hold func(ctx context.Context, n int) error

	mu        sync.Mutex
	generated []*aiv1.GenerateFileRequest
	fixes     []*aiv1.FixFileRequest
}

func (f *fakeAI) GenerateFile(ctx context.Context, req *aiv1.GenerateFileRequest) (*aiv1.GenerateFileResponse, error) {
	f.mu.Lock()
	f.generated = append(f.generated, proto.CloneOf(req))
	n := len(f.generated)
	f.mu.Unlock()
	if f.hold != nil {
		if err := f.hold(ctx, n); err != nil {
			return nil, err
		}
	}
	if f.fail != nil {
		if err := f.fail("GenerateFile", n); err != nil {
			return nil, err
		}
	}
	c := f.generate(req)
	return &aiv1.GenerateFileResponse{Content: c, Usage: &typev1.Usage{Model: "fake", InputTokens: 10, OutputTokens: 5},
		Change: &typev1.FileChange{Path: req.GetFile().GetPath(), Action: req.GetFile().GetAction(), Content: c}}, nil
}

func (f *fakeAI) FixFile(_ context.Context, req *aiv1.FixFileRequest) (*aiv1.FixFileResponse, error) {
	f.mu.Lock()
	f.fixes = append(f.fixes, proto.CloneOf(req))
	n := len(f.fixes)
	f.mu.Unlock()
	if f.fail != nil {
		if err := f.fail("FixFile", n); err != nil {
			return nil, err
		}
	}
	if f.fixFull != nil {
		r := f.fixFull(req)
		r.Usage = &typev1.Usage{Model: "fake", InputTokens: 10, OutputTokens: 5}
		return r, nil
	}
	if f.fix == nil {
		return nil, status.Error(codes.FailedPrecondition, "fake: no fix scripted")
	}
	c, why := f.fix(req)
	return &aiv1.FixFileResponse{Content: c, Explanation: why, Usage: &typev1.Usage{Model: "fake", InputTokens: 10, OutputTokens: 5}}, nil
}

func (f *fakeAI) calls() ([]*aiv1.GenerateFileRequest, []*aiv1.FixFileRequest) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.generated), slices.Clone(f.fixes)
}
