package service_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/protobuf/types/known/durationpb"

	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/sandbox/internal/service"
)

func TestRunCommand(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{MaxOutput: 4096, AllowExtra: []string{"sleep", "sh"}})
	sb := e.create(t, nil)
	e.write(t, sb.Id, "dir/in.txt", "from the workspace\n")

	r, err := e.runReq(t, &sandboxv1.RunCommandRequest{SandboxId: sb.Id, Command: []string{"cat", "in.txt", "-"}, Workdir: "dir",
		Stdin: []byte("from stdin\n")})
	if err != nil || r.res.ExitCode != 0 || r.stdout != "from the workspace\nfrom stdin\n" || r.res.CommandId == "" {
		t.Fatalf("cat: %+v %v", r, err)
	}
	// Arguments are passed as they are: no shell expands them.
	r, err = e.run(t, sb.Id, "echo", "$HOME", "*", "a;b")
	if err != nil || r.stdout != "$HOME * a;b\n" {
		t.Fatalf("echo: %+v %v", r, err)
	}
	r, err = e.run(t, sb.Id, "ls", "no-such-file")
	if err != nil || r.res.ExitCode == 0 || r.stderr == "" {
		t.Fatalf("ls: %+v %v", r, err)
	}
	// Programs off the allowlist are refused before anything runs.
	for _, argv := range [][]string{{"curl", "http://example.com"}, {"/bin/sh", "-c", "id"}, {"bash"}, {"sh -c id"}} {
		_, err := e.run(t, sb.Id, argv...)
		wantCode(t, err, codes.InvalidArgument, "command")
	}
	// The timeout kills the command.
	start := time.Now()
	r, err = e.runReq(t, &sandboxv1.RunCommandRequest{SandboxId: sb.Id, Command: []string{"sleep", "60"}, Timeout: durationpb.New(time.Second)})
	if err != nil || !r.res.TimedOut || r.res.ExitCode == 0 || time.Since(start) > 30*time.Second {
		t.Fatalf("sleep: %+v %v", r, err)
	}
	// An output flood is cut at the cap, with a visible marker.
	r, err = e.run(t, sb.Id, "sh", "-c", "head -c 100000 /dev/zero | tr '\\0' a")
	if err != nil || !r.res.OutputTruncated || len(r.stdout)+len(r.stderr) > 4096+512 || !strings.Contains(r.stdout+r.stderr, "truncated") {
		t.Fatalf("flood: truncated %v, %d bytes, err %v", r.res.GetOutputTruncated(), len(r.stdout)+len(r.stderr), err)
	}
	// Packages need a configured package source.
	_, err = e.runReq(t, &sandboxv1.RunCommandRequest{SandboxId: sb.Id, Command: []string{"go", "mod", "download"}, Network: sandboxv1.NetworkPolicy_NETWORK_POLICY_PACKAGES})
	wantCode(t, err, codes.InvalidArgument, "THEFOLD_SANDBOX_GOPROXY")
	_, err = e.runReq(t, &sandboxv1.RunCommandRequest{SandboxId: sb.Id, Command: []string{"ls"}, Network: sandboxv1.NetworkPolicy_NETWORK_POLICY_PACKAGES})
	wantCode(t, err, codes.InvalidArgument, "network")
}

// A Go module with a type error, a vet error and a failing test: Validate reports each
// where the toolchain does, with file and line.
func TestValidateBrokenGoModule(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{})
	sb := e.create(t, &sandboxv1.CreateSandboxRequest{Archive: tarGz(t, map[string]string{
		"go.mod":            "module example.com/broken\n\ngo 1.22\n",
		"typed/typed.go":    "package typed\n\nfunc N() int {\n\treturn \"not an int\"\n}\n",
		"vetted/vet.go":     "package vetted\n\nimport \"fmt\"\n\nfunc S() string {\n\treturn fmt.Sprintf(\"%d\", \"s\")\n}\n",
		"calc/calc.go":      "package calc\n\nfunc Add(a, b int) int { return a - b }\n",
		"calc/calc_test.go": "package calc\n\nimport \"testing\"\n\nfunc TestAdd(t *testing.T) {\n\tif Add(1, 2) != 3 {\n\t\tt.Fatal(\"Add(1, 2) != 3\")\n\t}\n}\n",
	})})
	// A cold toolchain on a busy machine (the package's tests run in parallel) may need more
	// than the client's default 30 s; the builder gives validations 15 minutes.
	// (e.alice's own deadline, 30 s from the test's start, cannot be extended: a new
	// context carries alice's token.)
	md, _ := metadata.FromOutgoingContext(e.alice)
	ctx, cancel := context.WithTimeout(metadata.NewOutgoingContext(context.Background(), md), 3*time.Minute)
	defer cancel()
	resp, err := e.client.Validate(ctx, &sandboxv1.ValidateRequest{SandboxId: sb.Id})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Passed || resp.Toolchain != "go" {
		t.Fatalf("passed %v toolchain %q", resp.Passed, resp.Toolchain)
	}
	found := map[string]bool{}
	for _, st := range resp.Steps {
		for _, d := range st.Diagnostics {
			t.Logf("%s %s:%d:%d %s (%s)", st.Kind, d.Path, d.Line, d.Column, d.Message, d.Tool)
			switch {
			case d.Path == "typed/typed.go" && d.Line == 4 && d.Severity >= typev1.Severity_SEVERITY_ERROR:
				found["type error"] = true
			case d.Path == "vetted/vet.go" && d.Line == 6:
				found["vet"] = true
			case d.Path == "calc/calc_test.go" && d.Line == 7:
				found["test"] = true
			}
		}
	}
	for _, k := range []string{"type error", "vet", "test"} {
		if !found[k] {
			t.Errorf("no %s diagnostic; steps %v", k, resp.Steps)
		}
	}
}

// ValidateIncremental reports the file's own problems, and the dependents a change broke.
func TestValidateIncrementalSeesDependents(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{})
	sb := e.create(t, &sandboxv1.CreateSandboxRequest{Archive: tarGz(t, map[string]string{
		"go.mod":     "module example.com/m\n\ngo 1.22\n",
		"lib/lib.go": "package lib\n\nfunc Greet(name string) string { return \"hi \" + name }\n",
		"app/app.go": "package app\n\nimport \"example.com/m/lib\"\n\nfunc Run() string { return lib.Greet(\"x\") }\n",
		"other/o.go": "package other\n\nfunc O() {}\n",
	})})
	ok, err := e.client.ValidateIncremental(e.alice, &sandboxv1.ValidateIncrementalRequest{SandboxId: sb.Id, Paths: []string{"lib/lib.go"}})
	if err != nil || !ok.Passed || ok.OtherErrors != 0 {
		t.Fatalf("clean: %v %v", ok, err)
	}
	// Greet now takes two arguments: lib itself builds, app does not.
	e.write(t, sb.Id, "lib/lib.go", "package lib\n\nfunc Greet(greeting, name string) string { return greeting + \" \" + name }\n")
	resp, err := e.client.ValidateIncremental(e.alice, &sandboxv1.ValidateIncrementalRequest{SandboxId: sb.Id, Paths: []string{"lib/lib.go"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.OtherErrors == 0 || len(resp.DependentDiagnostics) == 0 || resp.DependentDiagnostics[0].Path != "app/app.go" || resp.DependentDiagnostics[0].Line != 5 {
		t.Fatalf("dependents: %v", resp)
	}
	_, err = e.client.ValidateIncremental(e.alice, &sandboxv1.ValidateIncrementalRequest{SandboxId: sb.Id, Paths: []string{"nope.go"}})
	wantCode(t, err, codes.InvalidArgument, "paths")
}

// Where the module is (go env GOMOD) is asked once while its go.mod and go.work files stay
// as they are, and again when one changes or appears.
func TestValidationAsksWhereTheModuleIsOncePerState(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{})
	sb := e.create(t, &sandboxv1.CreateSandboxRequest{Archive: tarGz(t, map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.22\n",
		"a.go":   "package m\n\nfunc A() int { return 1 }\n",
	})})
	asked := func() int {
		t.Helper()
		cmds, err := e.st.Commands(t.Context(), sb.Id, 1000)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, c := range cmds {
			if strings.Join(c.Argv, " ") == "go env GOMOD" {
				n++
			}
		}
		return n
	}
	validate := func() {
		t.Helper()
		resp, err := e.client.ValidateIncremental(e.alice, &sandboxv1.ValidateIncrementalRequest{SandboxId: sb.Id, Paths: []string{"a.go"}})
		if err != nil || !resp.Passed {
			t.Fatalf("validate: %v %v", resp, err)
		}
	}
	validate()
	validate()
	if _, err := e.client.Validate(e.alice, &sandboxv1.ValidateRequest{SandboxId: sb.Id}); err != nil {
		t.Fatal(err)
	}
	if n := asked(); n != 1 {
		t.Fatalf("go env GOMOD asked %d times over three validations of an unchanged module, want 1", n)
	}
	e.write(t, sb.Id, "go.mod", "module example.com/m\n\ngo 1.23\n")
	validate()
	e.write(t, sb.Id, "go.work", "go 1.23\n\nuse .\n")
	validate()
	validate()
	if n := asked(); n != 3 {
		t.Fatalf("go env GOMOD asked %d times, want 3: again after go.mod changed and after go.work appeared", n)
	}
}
