package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/fakellm"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
)

// The Python and TypeScript tasks' files.
const (
	calcPy      = "def add(a, b):\n    \"\"\"Return the sum of a and b.\"\"\"\n    return a + b\n"
	testCalcPy  = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n"
	badTestPy   = "from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 6\n"
	greetTS     = "export function greet(name: string): string {\n  return `Hello, ${name}`;\n}\n"
	badGreetTS  = "export function greet(name: string): string {\n  return name.length;\n}\n"
	tsPackage   = `{"name": "greeter", "version": "1.0.0", "private": true}` + "\n"
	tsConfig    = `{"compilerOptions": {"strict": true, "noEmit": true, "target": "es2020", "module": "commonjs"}, "include": ["src"]}` + "\n"
	tsIndex     = "import { greet } from \"./greet\";\n\nconsole.log(greet(\"world\"));\n"
	pyConftest  = "import os, sys\n\nsys.path.insert(0, os.path.dirname(__file__))\n"
	isolationPy = "[ISOLATION-PY]"
	isolationTS = "[ISOLATION-TS]"
)

// isolationScript answers the Python and TypeScript tasks' plans and files. The first
// version of the test file (Python) and of the module (TypeScript) is wrong, so that only
// pytest and tsc really running in the sandbox, with file:line diagnostics, get the build
// to its fix round and through it.
func isolationScript() []fakellm.Response {
	return []fakellm.Response{
		{Match: planMatch(isolationPy), Text: planAnswer("Add add() to calc with a pytest test.", "calc.py", "test_calc.py")},
		{Match: genMatch("calc.py"), Text: content(calcPy)},
		{Match: genMatch("test_calc.py"), Text: content(badTestPy)},
		{Match: fixMatch("test_calc.py"), Text: fixed(testCalcPy)},
		{Match: planMatch(isolationTS), Text: planAnswer("Add greet() in TypeScript.", "src/greet.ts")},
		{Match: genMatch("src/greet.ts"), Text: content(badGreetTS)},
		{Match: fixMatch("src/greet.ts"), Text: fixed(greetTS)},
	}
}

// languageRepo creates a local-forge repository holding files on main.
func languageRepo(t *testing.T, name string, files map[string]string) string {
	t.Helper()
	repo := "local/" + name
	if code, body := rest(t, http.MethodPost, "/v1/repos", token, map[string]any{"repo": repo, "auto_init": true}); code != http.StatusOK {
		t.Fatalf("create repo: %d %v", code, body)
	}
	var changes []map[string]any
	for p, c := range files {
		changes = append(changes, map[string]any{"path": p, "action": "FILE_ACTION_CREATE", "content": c})
	}
	if code, body := rest(t, http.MethodPost, "/v1/repos/"+repo+"/commits", token, map[string]any{"branch": "main", "message": "project", "files": changes}); code != http.StatusOK {
		t.Fatalf("commit: %d %v", code, body)
	}
	return repo
}

// A Python task and a TypeScript task run through the agent to review, their code and
// tests run by the real toolchains in an isolated sandbox (never the local backend).
func TestAgentPythonAndTypeScriptTasksRunIsolated(t *testing.T) {
	parallel(t)
	cases := []struct {
		name, marker, title string
		files               map[string]string
		wantPaths           []string
		badPath, badLine    string // where the toolchain finds the first version wrong
	}{
		{"python", isolationPy, "Add an add function with a test " + isolationPy,
			map[string]string{"conftest.py": pyConftest}, []string{"calc.py", "test_calc.py"}, "test_calc.py", "5"},
		{"typescript", isolationTS, "Add a greet function " + isolationTS,
			map[string]string{"package.json": tsPackage, "tsconfig.json": tsConfig, "src/index.ts": tsIndex}, []string{"src/greet.ts"}, "src/greet.ts", "2"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			repo := languageRepo(t, "isolation-"+tc.name, tc.files)
			_, jobID := startJob(t, repo, tc.title, "Write it with its test.")
			job := waitJob(t, jobID, 4*time.Minute, "JOB_STATUS_PENDING_REVIEW")

			sandboxID, _ := job["sandbox_id"].(string)
			code, sb := rest(t, http.MethodGet, "/v1/sandboxes/"+sandboxID, token, nil)
			if code != http.StatusOK {
				t.Fatalf("get sandbox %q: %d %v", sandboxID, code, sb)
			}
			backend := sb["sandbox"].(map[string]any)["backend"]
			if backend != "SANDBOX_BACKEND_DOCKER" && backend != "SANDBOX_BACKEND_BWRAP" {
				t.Fatalf("the %s task ran in %v", tc.name, backend)
			}
			t.Logf("%s task: sandbox %s on %v", tc.name, sandboxID, backend)

			code, review := rest(t, http.MethodGet, "/v1/reviews/"+job["review_id"].(string), token, nil)
			if code != http.StatusOK {
				t.Fatalf("get review: %d %v", code, review)
			}
			var got []string
			for _, f := range review["review"].(map[string]any)["files"].([]any) {
				got = append(got, f.(map[string]any)["diff"].(map[string]any)["path"].(string))
			}
			if strings.Join(got, ",") != strings.Join(tc.wantPaths, ",") {
				t.Fatalf("review files %v, want %v", got, tc.wantPaths)
			}
			// The language's checks ran in the sandbox: the first version failed them at
			// its file and line, and the fix round resolved it.
			code, builds := rest(t, http.MethodGet, "/v1/builds?job_id="+jobID, token, nil)
			if code != http.StatusOK {
				t.Fatalf("list builds: %d %v", code, builds)
			}
			list, _ := builds["builds"].([]any)
			if len(list) == 0 {
				t.Fatalf("no build of job %s: %v", jobID, builds)
			}
			var rounds []string
			found := false
			for _, b := range list {
				code, build := rest(t, http.MethodGet, "/v1/builds/"+b.(map[string]any)["id"].(string), token, nil)
				if code != http.StatusOK {
					t.Fatalf("get build: %d %v", code, build)
				}
				steps, _ := build["steps"].([]any)
				for _, s := range steps {
					frs, _ := s.(map[string]any)["fix_rounds"].([]any)
					for _, fr := range frs {
						fr := fr.(map[string]any)
						diags, _ := fr["diagnostics_before"].([]any)
						for _, d := range diags {
							d := d.(map[string]any)
							rounds = append(rounds, fmt.Sprintf("%v:%v %v (resolved %v)", d["path"], d["line"], d["message"], fr["resolved"]))
							if d["path"] == tc.badPath && fmt.Sprint(d["line"]) == tc.badLine && fr["resolved"] == true {
								found = true
							}
						}
					}
				}
			}
			if !found {
				t.Fatalf("no resolved fix round of %s:%s; the fix rounds' diagnostics: %q", tc.badPath, tc.badLine, rounds)
			}
			t.Logf("%s: %q", tc.name, rounds)
		})
	}
}

// sandboxContainers lists the engine's containers (any state) of sandbox id: labelled with
// it, or a pooled container named after it (its labels were set before it had a sandbox).
func sandboxContainers(t *testing.T, id string) []string {
	t.Helper()
	var ids []string
	for _, filter := range []string{"label=org.thefold.sandbox.id=" + id, "name=^thefold-sandbox-" + id + "$"} {
		out, err := exec.Command("docker", "ps", "-aq", "--filter", filter).Output()
		if err != nil {
			t.Fatalf("docker ps: %v", err)
		}
		for _, c := range strings.Fields(string(out)) {
			if !slices.Contains(ids, c) {
				ids = append(ids, c)
			}
		}
	}
	return ids
}

// After kill -9 of the sandbox service while a command runs in a docker sandbox, the
// restarted service removes the container the killed process made (its first reaper round
// reconciles the engine with the sandbox table); the live sandbox gets a new container on
// its next command, and destroying it leaves nothing behind.
func TestSandboxServiceKilledLeavesNoContainerBehind(t *testing.T) {
	alone(t)
	if _, err := exec.LookPath("docker"); err != nil {
		t.Skip("no docker command")
	}
	ctx, cancel := context.WithTimeout(authed(context.Background()), liveness(3*time.Minute))
	defer cancel()
	sb := sandboxv1.NewSandboxServiceClient(dial(t, "sandbox"))
	// The admin may ask for a backend other than the default.
	created, err := sb.CreateSandbox(ctx, &sandboxv1.CreateSandboxRequest{Language: "python", Backend: sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER})
	if status.Code(err) == codes.FailedPrecondition {
		t.Skipf("no docker backend here: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	id := created.Sandbox.Id
	if _, err := sb.WriteFile(ctx, &sandboxv1.WriteFileRequest{SandboxId: id, Path: "keep.txt", Content: []byte("kept")}); err != nil {
		t.Fatal(err)
	}
	old := sandboxContainers(t, id)
	if len(old) != 1 {
		t.Fatalf("containers of sandbox %s before the kill: %v", id, old)
	}
	stream, err := sb.RunCommand(ctx, &sandboxv1.RunCommandRequest{SandboxId: id, Command: []string{"python3", "-c", "import time; print('started', flush=True); time.sleep(300)"}})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || !strings.Contains(string(m.GetOutput().GetData()), "started") {
		t.Fatalf("the long command did not start: %v %v", m, err)
	}
	if err := mesh.Kill("sandbox"); err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err == nil {
		t.Fatal("the command's stream went on after its service was killed")
	}
	if err := mesh.Start(); err != nil {
		t.Fatal(err)
	}
	if err := mesh.WaitReady(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(liveness(30 * time.Second))
	for slices.Contains(sandboxContainers(t, id), old[0]) {
		if time.Now().After(deadline) {
			t.Fatalf("the killed process's container %s is still there", old[0])
		}
		time.Sleep(200 * time.Millisecond)
	}
	r, err := sb.RunCommand(ctx, &sandboxv1.RunCommandRequest{SandboxId: id, Command: []string{"cat", "keep.txt"}})
	if err != nil {
		t.Fatal(err)
	}
	var out string
	for {
		m, err := r.Recv()
		if err != nil {
			break
		}
		out += string(m.GetOutput().GetData())
	}
	if out != "kept" {
		t.Fatalf("the sandbox after the restart: %q", out)
	}
	if now := sandboxContainers(t, id); len(now) != 1 || now[0] == old[0] {
		t.Fatalf("containers after the next command: %v (old %s)", now, old[0])
	}
	if _, err := sb.DestroySandbox(ctx, &sandboxv1.DestroySandboxRequest{Id: id}); err != nil {
		t.Fatal(err)
	}
	if left := sandboxContainers(t, id); len(left) != 0 {
		t.Fatalf("containers left after DestroySandbox: %v", left)
	}
}

// The backend policy through the mesh, as a member and the admin call CreateSandbox over
// gRPC: nobody gets the unisolated local backend on a stack that does not offer it (a
// member is refused whatever the stack offers), a member may not step down from the
// default, and a Python sandbox that names no backend gets an isolating one.
func TestSandboxBackendPolicyThroughTheMesh(t *testing.T) {
	parallel(t)
	_, email := newUser(t, "sandbox-member")
	access, _ := login(t, email, 0)
	ctx, cancel := context.WithTimeout(context.Background(), liveness(2*time.Minute))
	defer cancel()
	member, admin := bearer(ctx, access), authed(ctx)
	sb := sandboxv1.NewSandboxServiceClient(dial(t, "sandbox"))

	_, err := sb.CreateSandbox(member, &sandboxv1.CreateSandboxRequest{Backend: sandboxv1.SandboxBackend_SANDBOX_BACKEND_LOCAL})
	if status.Code(err) != codes.PermissionDenied || !strings.Contains(status.Convert(err).Message(), "THEFOLD_SANDBOX_ALLOW_LOCAL") {
		t.Fatalf("a member asking for local: %v", err)
	}
	_, err = sb.CreateSandbox(admin, &sandboxv1.CreateSandboxRequest{Backend: sandboxv1.SandboxBackend_SANDBOX_BACKEND_LOCAL})
	if status.Code(err) != codes.FailedPrecondition || !strings.Contains(status.Convert(err).Message(), "THEFOLD_SANDBOX_ALLOW_LOCAL") {
		t.Fatalf("the admin asking for local where it is off: %v", err)
	}
	created, err := sb.CreateSandbox(member, &sandboxv1.CreateSandboxRequest{Language: "python"})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.DestroySandbox(context.WithoutCancel(member), &sandboxv1.DestroySandboxRequest{Id: created.Sandbox.Id})
	if b := created.Sandbox.Backend; b == sandboxv1.SandboxBackend_SANDBOX_BACKEND_LOCAL || b == sandboxv1.SandboxBackend_SANDBOX_BACKEND_UNSPECIFIED {
		t.Fatalf("a python sandbox got %s (warnings %q)", b, created.Warnings)
	}
	// A member may ask for more isolation than the default, never for less.
	switch created.Sandbox.Backend {
	case sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER:
		_, err = sb.CreateSandbox(member, &sandboxv1.CreateSandboxRequest{Backend: sandboxv1.SandboxBackend_SANDBOX_BACKEND_BWRAP})
		if status.Code(err) != codes.PermissionDenied {
			t.Fatalf("a member asking for bwrap under a docker default: %v", err)
		}
	case sandboxv1.SandboxBackend_SANDBOX_BACKEND_BWRAP:
		more, err := sb.CreateSandbox(member, &sandboxv1.CreateSandboxRequest{Language: "python", Backend: sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER})
		if status.Code(err) == codes.FailedPrecondition {
			break // no docker engine here
		}
		if err != nil || more.Sandbox.Backend != sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER {
			t.Fatalf("a member asking for docker under a bwrap default: %v %v", more, err)
		}
		_, _ = sb.DestroySandbox(context.WithoutCancel(member), &sandboxv1.DestroySandboxRequest{Id: more.Sandbox.Id})
	}
}
