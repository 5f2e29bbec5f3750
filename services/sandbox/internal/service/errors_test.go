package service_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/sandbox/internal/service"
)

// Every RPC answers malformed input with INVALID_ARGUMENT naming the field, before it
// touches a sandbox; a caller without a token is UNAUTHENTICATED.
func TestEveryRPCRefusesMalformedInput(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{})
	sb := e.create(t, nil).Id
	c := e.client
	run := func(ctx context.Context, req *sandboxv1.RunCommandRequest) error {
		s, err := c.RunCommand(ctx, req)
		if err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	}
	cases := []struct {
		rpc   string
		field string
		call  func(ctx context.Context) error
	}{
		{"CreateSandbox", "limits.memory_bytes", func(ctx context.Context) error {
			_, err := c.CreateSandbox(ctx, &sandboxv1.CreateSandboxRequest{Limits: &sandboxv1.ResourceLimits{MemoryBytes: 1}})
			return err
		}},
		{"CreateSandbox", "limits.network_allowed", func(ctx context.Context) error {
			_, err := c.CreateSandbox(ctx, &sandboxv1.CreateSandboxRequest{Limits: &sandboxv1.ResourceLimits{NetworkAllowed: true}})
			return err
		}},
		{"CreateSandbox", "ttl", func(ctx context.Context) error {
			_, err := c.CreateSandbox(ctx, &sandboxv1.CreateSandboxRequest{Ttl: durationpb.New(-1)})
			return err
		}},
		{"CreateSandbox", "repo", func(ctx context.Context) error {
			_, err := c.CreateSandbox(ctx, &sandboxv1.CreateSandboxRequest{Repo: "no slash"})
			return err
		}},
		{"CreateSandbox", "ref", func(ctx context.Context) error {
			_, err := c.CreateSandbox(ctx, &sandboxv1.CreateSandboxRequest{Repo: "a/b", Ref: "main", Archive: []byte("x")})
			return err
		}},
		{"CreateSandbox", "language", func(ctx context.Context) error {
			_, err := c.CreateSandbox(ctx, &sandboxv1.CreateSandboxRequest{Language: "cobol"})
			return err
		}},
		{"CreateSandbox", "image", func(ctx context.Context) error {
			_, err := c.CreateSandbox(ctx, &sandboxv1.CreateSandboxRequest{Image: "evil:latest"})
			return err
		}},
		{"CreateSandbox", "backend", func(ctx context.Context) error {
			_, err := c.CreateSandbox(ctx, &sandboxv1.CreateSandboxRequest{Backend: 99})
			return err
		}},
		{"CreateSandbox", "request_id", func(ctx context.Context) error {
			_, err := c.CreateSandbox(ctx, &sandboxv1.CreateSandboxRequest{RequestId: strings.Repeat("r", 500)})
			return err
		}},
		{"GetSandbox", "id", func(ctx context.Context) error {
			_, err := c.GetSandbox(ctx, &sandboxv1.GetSandboxRequest{Id: "not-a-uuid"})
			return err
		}},
		{"ListSandboxes", "page_size", func(ctx context.Context) error {
			_, err := c.ListSandboxes(ctx, &sandboxv1.ListSandboxesRequest{PageSize: -1})
			return err
		}},
		{"ListSandboxes", "page_token", func(ctx context.Context) error {
			_, err := c.ListSandboxes(ctx, &sandboxv1.ListSandboxesRequest{PageToken: "garbage"})
			return err
		}},
		{"ListSandboxes", "statuses", func(ctx context.Context) error {
			_, err := c.ListSandboxes(ctx, &sandboxv1.ListSandboxesRequest{Statuses: []sandboxv1.SandboxStatus{0}})
			return err
		}},
		{"DestroySandbox", "id", func(ctx context.Context) error {
			_, err := c.DestroySandbox(ctx, &sandboxv1.DestroySandboxRequest{})
			return err
		}},
		{"KeepAliveSandbox", "ttl", func(ctx context.Context) error {
			_, err := c.KeepAliveSandbox(ctx, &sandboxv1.KeepAliveSandboxRequest{Id: sb, Ttl: durationpb.New(1000 * 3600e9)})
			return err
		}},
		{"WriteFile", "path", func(ctx context.Context) error {
			_, err := c.WriteFile(ctx, &sandboxv1.WriteFileRequest{SandboxId: sb, Path: "../x"})
			return err
		}},
		{"WriteFile", "sandbox_id", func(ctx context.Context) error {
			_, err := c.WriteFile(ctx, &sandboxv1.WriteFileRequest{SandboxId: "x", Path: "a"})
			return err
		}},
		{"ReadFile", "path", func(ctx context.Context) error {
			_, err := c.ReadFile(ctx, &sandboxv1.ReadFileRequest{SandboxId: sb})
			return err
		}},
		{"DeleteFile", "path", func(ctx context.Context) error {
			_, err := c.DeleteFile(ctx, &sandboxv1.DeleteFileRequest{SandboxId: sb, Path: "."})
			return err
		}},
		{"ListFiles", "path_prefix", func(ctx context.Context) error {
			_, err := c.ListFiles(ctx, &sandboxv1.ListFilesRequest{SandboxId: sb, PathPrefix: "/etc"})
			return err
		}},
		{"ListFiles", "page_size", func(ctx context.Context) error {
			_, err := c.ListFiles(ctx, &sandboxv1.ListFilesRequest{SandboxId: sb, PageSize: 20000})
			return err
		}},
		{"ApplyEdits", "edits", func(ctx context.Context) error {
			_, err := c.ApplyEdits(ctx, &sandboxv1.ApplyEditsRequest{SandboxId: sb, Path: "a.go"})
			return err
		}},
		{"ApplyEdits", "edits[0].old_text", func(ctx context.Context) error {
			_, err := c.ApplyEdits(ctx, &sandboxv1.ApplyEditsRequest{SandboxId: sb, Path: "a.go", Edits: []*typev1.Edit{{NewText: "x"}}})
			return err
		}},
		{"RunCommand", "command", func(ctx context.Context) error {
			return run(ctx, &sandboxv1.RunCommandRequest{SandboxId: sb})
		}},
		{"RunCommand", "env", func(ctx context.Context) error {
			return run(ctx, &sandboxv1.RunCommandRequest{SandboxId: sb, Command: []string{"ls"}, Env: map[string]string{"A=B": "c"}})
		}},
		{"RunCommand", "timeout", func(ctx context.Context) error {
			return run(ctx, &sandboxv1.RunCommandRequest{SandboxId: sb, Command: []string{"ls"}, Timeout: durationpb.New(-5)})
		}},
		{"RunCommand", "workdir", func(ctx context.Context) error {
			return run(ctx, &sandboxv1.RunCommandRequest{SandboxId: sb, Command: []string{"ls"}, Workdir: "../.."})
		}},
		{"RunCommand", "network", func(ctx context.Context) error {
			return run(ctx, &sandboxv1.RunCommandRequest{SandboxId: sb, Command: []string{"ls"}, Network: 7})
		}},
		{"Validate", "steps", func(ctx context.Context) error {
			_, err := c.Validate(ctx, &sandboxv1.ValidateRequest{SandboxId: sb, Steps: []sandboxv1.ValidationStepKind{0}})
			return err
		}},
		{"Validate", "sandbox_id", func(ctx context.Context) error {
			_, err := c.Validate(ctx, &sandboxv1.ValidateRequest{})
			return err
		}},
		{"ValidateIncremental", "paths", func(ctx context.Context) error {
			_, err := c.ValidateIncremental(ctx, &sandboxv1.ValidateIncrementalRequest{SandboxId: sb})
			return err
		}},
		{"ValidateIncremental", "paths[0]", func(ctx context.Context) error {
			_, err := c.ValidateIncremental(ctx, &sandboxv1.ValidateIncrementalRequest{SandboxId: sb, Paths: []string{"/abs.go"}})
			return err
		}},
		{"Snapshot", "name", func(ctx context.Context) error {
			_, err := c.Snapshot(ctx, &sandboxv1.SnapshotRequest{SandboxId: sb, Name: "has space"})
			return err
		}},
		{"Diff", "snapshot_id", func(ctx context.Context) error {
			_, err := c.Diff(ctx, &sandboxv1.DiffRequest{Id: sb, SnapshotId: "nope"})
			return err
		}},
		{"Diff", "context_lines", func(ctx context.Context) error {
			_, err := c.Diff(ctx, &sandboxv1.DiffRequest{Id: sb, ContextLines: -1})
			return err
		}},
		{"Diff", "id", func(ctx context.Context) error {
			_, err := c.Diff(ctx, &sandboxv1.DiffRequest{})
			return err
		}},
	}
	covered := map[string]bool{}
	for _, tc := range cases {
		covered[tc.rpc] = true
		t.Run(tc.rpc+"/"+tc.field, func(t *testing.T) {
			wantCode(t, tc.call(e.alice), codes.InvalidArgument, tc.field)
			wantCode(t, tc.call(e.anon), codes.Unauthenticated)
		})
	}
	for _, m := range sandboxv1.SandboxService_ServiceDesc.Methods {
		if !covered[m.MethodName] {
			t.Errorf("%s has no malformed-input case", m.MethodName)
		}
	}
	for _, s := range sandboxv1.SandboxService_ServiceDesc.Streams {
		if !covered[s.StreamName] {
			t.Errorf("%s has no malformed-input case", s.StreamName)
		}
	}
}
