package service_test

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	"github.com/thefold/thefold/services/sandbox/internal/service"
)

// RunCommand with a request_id runs the argv once: a retry streams the logged output and
// the first result; a new key runs it again; a key reused for another argv is refused.
func TestRunCommandRequestIDRunsOnce(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{AllowExtra: []string{"sh"}})
	sb := e.create(t, nil)
	appendLine := func(requestID string) (*result, error) {
		return e.runReq(t, &sandboxv1.RunCommandRequest{SandboxId: sb.Id, RequestId: requestID,
			Command: []string{"sh", "-c", "echo ran >> count.txt; cat count.txt"}})
	}

	first, err := appendLine("append-1")
	if err != nil || first.stdout != "ran\n" || first.res.GetCommandId() == "" {
		t.Fatalf("first call: %+v %v", first, err)
	}
	again, err := appendLine("append-1")
	if err != nil || again.stdout != "ran\n" || again.res.GetCommandId() != first.res.GetCommandId() || again.res.GetExitCode() != 0 {
		t.Fatalf("retry: %+v %v, want the first run's output and command_id %s", again, err, first.res.GetCommandId())
	}
	if r, err := e.run(t, sb.Id, "cat", "count.txt"); err != nil || r.stdout != "ran\n" {
		t.Fatalf("after a call and its retry the file holds %q (%v), want one line", r.stdout, err)
	}
	_, err = e.runReq(t, &sandboxv1.RunCommandRequest{SandboxId: sb.Id, RequestId: "append-1", Command: []string{"cat", "count.txt"}})
	wantCode(t, err, codes.InvalidArgument, "request_id")
	if r, err := appendLine("append-2"); err != nil || r.stdout != "ran\nran\n" {
		t.Fatalf("a new key: %+v %v", r, err)
	}
	// A key is per sandbox.
	other := e.create(t, nil)
	r, err := e.runReq(t, &sandboxv1.RunCommandRequest{SandboxId: other.Id, RequestId: "append-1", Command: []string{"sh", "-c", "echo ran >> count.txt; cat count.txt"}})
	if err != nil || r.stdout != "ran\n" || r.res.GetCommandId() == first.res.GetCommandId() {
		t.Fatalf("same key in another sandbox: %+v %v", r, err)
	}
	for _, bad := range []string{"a b", strings.Repeat("r", 200)} {
		_, err := appendLine(bad)
		wantCode(t, err, codes.InvalidArgument, "request_id")
	}
}
