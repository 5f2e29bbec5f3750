package service_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"

	"github.com/thefold/thefold/services/sandbox/internal/service"
)

func TestSandboxLifecycle(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := start(t, service.Config{Dir: dir})
	sb := e.create(t, &sandboxv1.CreateSandboxRequest{JobId: "job-1"})
	if sb.Backend != e.kind || sb.OwnerId != "alice" || sb.ExpireTime == nil || sb.Limits.GetMemoryBytes() != 512<<20 || sb.Limits.GetPids() != 256 {
		t.Fatalf("sandbox %v", sb)
	}
	// The default idle TTL is 30 minutes, not forever.
	if ttl := sb.ExpireTime.AsTime().Sub(sb.CreateTime.AsTime()); ttl < 29*time.Minute || ttl > 31*time.Minute {
		t.Fatalf("expires after %s", ttl)
	}
	got, err := e.client.GetSandbox(e.alice, &sandboxv1.GetSandboxRequest{Id: sb.Id})
	if err != nil || got.Sandbox.Id != sb.Id || got.Sandbox.JobId != "job-1" {
		t.Fatalf("GetSandbox: %v %v", got, err)
	}
	// Someone else's sandbox does not exist for them.
	_, err = e.client.GetSandbox(e.bob, &sandboxv1.GetSandboxRequest{Id: sb.Id})
	wantCode(t, err, codes.NotFound)
	_, err = e.client.WriteFile(e.bob, &sandboxv1.WriteFileRequest{SandboxId: sb.Id, Path: "x", Content: []byte("x")})
	wantCode(t, err, codes.NotFound)

	pinned, err := e.client.KeepAliveSandbox(e.alice, &sandboxv1.KeepAliveSandboxRequest{Id: sb.Id, Pin: true})
	if err != nil || !pinned.Sandbox.Pinned || pinned.Sandbox.ExpireTime != nil {
		t.Fatalf("pin: %v %v", pinned, err)
	}
	kept, err := e.client.KeepAliveSandbox(e.alice, &sandboxv1.KeepAliveSandboxRequest{Id: sb.Id, Ttl: durationpb.New(2 * time.Hour)})
	if err != nil || kept.Sandbox.Pinned || time.Until(kept.Sandbox.ExpireTime.AsTime()) < 119*time.Minute {
		t.Fatalf("keep alive: %v %v", kept, err)
	}

	e.write(t, sb.Id, "a.txt", "a")
	if _, err := e.client.DestroySandbox(e.alice, &sandboxv1.DestroySandboxRequest{Id: sb.Id}); err != nil {
		t.Fatal(err)
	}
	// Destroy frees everything: nothing of the sandbox is left under the directory.
	if left, _ := os.ReadDir(dir); len(left) > 1 || (len(left) == 1 && left[0].Name() != ".state") {
		t.Fatalf("left behind: %v", left)
	}
	if _, err := e.client.DestroySandbox(e.alice, &sandboxv1.DestroySandboxRequest{Id: sb.Id}); err != nil {
		t.Fatalf("destroying twice: %v", err)
	}
	got, _ = e.client.GetSandbox(e.alice, &sandboxv1.GetSandboxRequest{Id: sb.Id})
	if got.Sandbox.Status != sandboxv1.SandboxStatus_SANDBOX_STATUS_DESTROYED || got.Sandbox.DestroyTime == nil {
		t.Fatalf("after destroy: %v", got.Sandbox)
	}
	_, err = e.client.ReadFile(e.alice, &sandboxv1.ReadFileRequest{SandboxId: sb.Id, Path: "a.txt"})
	wantCode(t, err, codes.FailedPrecondition, "destroyed")
	_, err = e.client.KeepAliveSandbox(e.alice, &sandboxv1.KeepAliveSandboxRequest{Id: sb.Id})
	wantCode(t, err, codes.FailedPrecondition)
}

func TestListSandboxesPages(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{})
	var ids []string
	for range 3 {
		ids = append(ids, e.create(t, &sandboxv1.CreateSandboxRequest{Repo: "acme/web", Archive: tarGz(t, map[string]string{"a": "a"})}).Id)
	}
	e.create(t, nil) // another repository: filtered out
	var seen []string
	tok := ""
	for {
		resp, err := e.client.ListSandboxes(e.alice, &sandboxv1.ListSandboxesRequest{Repo: "acme/web", PageSize: 2, PageToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, sb := range resp.Sandboxes {
			seen = append(seen, sb.Id)
		}
		if tok = resp.NextPageToken; tok == "" {
			break
		}
	}
	if len(seen) != 3 || seen[0] != ids[2] || seen[2] != ids[0] {
		t.Fatalf("listed %v, want %v newest first", seen, ids)
	}
	if resp, _ := e.client.ListSandboxes(e.bob, &sandboxv1.ListSandboxesRequest{}); len(resp.Sandboxes) != 0 {
		t.Fatalf("bob sees %v", resp.Sandboxes)
	}
}

func TestCreateSandboxIsIdempotentAndLimited(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{MaxPerOwner: 2})
	first := e.create(t, &sandboxv1.CreateSandboxRequest{RequestId: "r-1"})
	again := e.create(t, &sandboxv1.CreateSandboxRequest{RequestId: "r-1"})
	if again.Id != first.Id {
		t.Fatalf("a retry created %s, want %s", again.Id, first.Id)
	}
	_, err := e.client.CreateSandbox(e.alice, &sandboxv1.CreateSandboxRequest{RequestId: "r-1", JobId: "other"})
	wantCode(t, err, codes.InvalidArgument, "request_id")
	e.create(t, nil)
	_, err = e.client.CreateSandbox(e.alice, &sandboxv1.CreateSandboxRequest{})
	wantCode(t, err, codes.FailedPrecondition, "2 live sandboxes")
	// Bob has his own allowance.
	if _, err := e.client.CreateSandbox(e.bob, &sandboxv1.CreateSandboxRequest{}); err != nil {
		t.Fatal(err)
	}
}

func TestCreateFromArchive(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{})
	sb := e.create(t, &sandboxv1.CreateSandboxRequest{Repo: "acme/api", Archive: tarGz(t, map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.22\n", "cmd/main.go": "package main\n\nfunc main() {}\n", "link": "->cmd/main.go",
	})})
	if sb.Language != "go" || sb.Repo != "acme/api" {
		t.Fatalf("sandbox %v", sb)
	}
	if got := e.read(t, sb.Id, "cmd/main.go"); got != "package main\n\nfunc main() {}\n" {
		t.Fatalf("cmd/main.go = %q", got)
	}
	// An archive that would write outside the workspace is refused, naming the field.
	for name, files := range map[string]map[string]string{
		"dot-dot":         {"../escape.txt": "x"},
		"absolute":        {"/etc/evil": "x"},
		"link outside":    {"evil": "->/etc/passwd"},
		"link up and out": {"a/evil": "->../../x"},
	} {
		_, err := e.client.CreateSandbox(e.alice, &sandboxv1.CreateSandboxRequest{Archive: tarGz(t, files)})
		if err == nil {
			t.Fatalf("%s: accepted", name)
		}
		wantCode(t, err, codes.InvalidArgument, "archive")
	}
	_, err := e.client.CreateSandbox(e.alice, &sandboxv1.CreateSandboxRequest{Archive: []byte("\x1f\x8bnot gzip")})
	wantCode(t, err, codes.InvalidArgument, "archive")
}

func TestCreateFromRepositoryNeedsGitHub(t *testing.T) {
	t.Parallel()
	e := start(t, service.Config{})
	_, err := e.client.CreateSandbox(e.alice, &sandboxv1.CreateSandboxRequest{Repo: "acme/api", Ref: "main"})
	wantCode(t, err, codes.FailedPrecondition, "github")
}

func TestExpiredSandboxesAreReaped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := start(t, service.Config{Dir: dir})
	short := e.create(t, &sandboxv1.CreateSandboxRequest{Ttl: durationpb.New(time.Second)})
	pinned := e.create(t, &sandboxv1.CreateSandboxRequest{Ttl: durationpb.New(time.Second)})
	if _, err := e.client.KeepAliveSandbox(e.alice, &sandboxv1.KeepAliveSandboxRequest{Id: pinned.Id, Pin: true}); err != nil {
		t.Fatal(err)
	}
	live := e.create(t, nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		n, err := e.srv.Reap(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			break
		}
		if n > 1 || time.Now().After(deadline) {
			t.Fatalf("reaped %d", n)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for id, want := range map[string]sandboxv1.SandboxStatus{short.Id: sandboxv1.SandboxStatus_SANDBOX_STATUS_DESTROYED,
		pinned.Id: sandboxv1.SandboxStatus_SANDBOX_STATUS_READY, live.Id: sandboxv1.SandboxStatus_SANDBOX_STATUS_READY} {
		got, err := e.client.GetSandbox(e.alice, &sandboxv1.GetSandboxRequest{Id: id})
		if err != nil || got.Sandbox.Status != want {
			t.Errorf("%s: %v %v, want %v", id, got, err, want)
		}
	}
	entries, _ := os.ReadDir(dir)
	dirs := 0
	for _, d := range entries {
		if _, err := os.Stat(filepath.Join(dir, d.Name(), "ws")); err == nil {
			dirs++
		}
	}
	if dirs != 2 {
		t.Fatalf("%d workspaces on disk, want 2", dirs)
	}
}
