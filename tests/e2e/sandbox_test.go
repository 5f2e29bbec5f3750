package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
)

// The sandbox acceptance probe through the mesh: a broken Go module uploaded as an archive,
// validated by the real toolchain in the sandbox's backend; the diagnostics name the file
// and line a developer would see. The sandbox is then listed and diffed over REST, and
// destroyed.
func TestSandboxValidatesABrokenGoModule(t *testing.T) {
	parallel(t)
	ctx, cancel := context.WithTimeout(authed(context.Background()), liveness(2*time.Minute))
	defer cancel()
	sb := sandboxv1.NewSandboxServiceClient(dial(t, "sandbox"))
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for name, content := range map[string]string{
		"go.mod":    "module example.com/broken\n\ngo 1.22\n",
		"main.go":   "package main\n\nfunc main() {\n\tvar n int = \"x\"\n\t_ = n\n}\n",
		"README.md": "broken on purpose\n",
	} {
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(content))})
		_, _ = tw.Write([]byte(content))
	}
	_ = tw.Close()
	created, err := sb.CreateSandbox(ctx, &sandboxv1.CreateSandboxRequest{Repo: "e2e/broken", Archive: buf.Bytes(), Ttl: nil})
	if err != nil {
		t.Fatal(err)
	}
	id := created.Sandbox.Id
	t.Logf("sandbox %s on %s (warnings %q)", id, created.Sandbox.Backend, created.Warnings)
	defer sb.DestroySandbox(context.WithoutCancel(ctx), &sandboxv1.DestroySandboxRequest{Id: id})

	resp, err := sb.Validate(ctx, &sandboxv1.ValidateRequest{SandboxId: id, Steps: []sandboxv1.ValidationStepKind{sandboxv1.ValidationStepKind_VALIDATION_STEP_KIND_TYPECHECK}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Passed || len(resp.Steps) != 1 || len(resp.Steps[0].Diagnostics) == 0 {
		t.Fatalf("validate %v", resp)
	}
	d := resp.Steps[0].Diagnostics[0]
	if d.Path != "main.go" || d.Line != 4 || !strings.Contains(d.Message, "cannot use") {
		t.Fatalf("diagnostic %v", d)
	}

	// Fix it with an edit, run the program, and see the change in the diff over REST.
	if _, err := sb.WriteFile(ctx, &sandboxv1.WriteFileRequest{SandboxId: id, Path: "main.go",
		Content: []byte("package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"fixed\") }\n")}); err != nil {
		t.Fatal(err)
	}
	stream, err := sb.RunCommand(ctx, &sandboxv1.RunCommandRequest{SandboxId: id, Command: []string{"go", "run", "."}})
	if err != nil {
		t.Fatal(err)
	}
	var out string
	var result *sandboxv1.CommandResult
	for {
		m, err := stream.Recv()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		out += string(m.GetOutput().GetData())
		if r := m.GetResult(); r != nil {
			result = r
		}
	}
	if result == nil || result.ExitCode != 0 || out != "fixed\n" {
		t.Fatalf("go run: %q %v", out, result)
	}
	code, body := rest(t, "GET", "/v1/sandboxes/"+id+":diff", token, nil)
	files, _ := body["files"].([]any)
	if code != http.StatusOK || len(files) != 1 || !strings.Contains(files[0].(map[string]any)["unified_diff"].(string), "+func main() { fmt.Println(\"fixed\") }") {
		t.Fatalf("diff: %d %v", code, body)
	}
	code, body = rest(t, "GET", "/v1/sandboxes?repo=e2e/broken", token, nil)
	if list, _ := body["sandboxes"].([]any); code != http.StatusOK || len(list) == 0 {
		t.Fatalf("list: %d %v", code, body)
	}
	code, _ = rest(t, "GET", "/v1/sandboxes/not-a-uuid", token, nil)
	if code != http.StatusBadRequest {
		t.Fatalf("malformed id: %d, want 400", code)
	}
}
