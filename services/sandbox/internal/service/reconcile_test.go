package service_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"
	"google.golang.org/grpc"

	"github.com/thefold/thefold/pkg/db/dbtest"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/sandbox/internal/backend"
	"github.com/thefold/thefold/services/sandbox/internal/backend/docker"
	"github.com/thefold/thefold/services/sandbox/internal/service"
	"github.com/thefold/thefold/services/sandbox/internal/store"
	"github.com/thefold/thefold/services/sandbox/migrations"
)

// The labels the docker backend puts on its containers.
const (
	labelID    = "org.thefold.sandbox.id"
	labelOwner = "org.thefold.sandbox.owner"
	labelDir   = "org.thefold.sandbox.dir"
)

// dockerImages are the images of the servers below: the built-in Go image.
var dockerImages = map[string]string{"go": docker.DefaultGoImage}

// buildImage builds the Go sandbox image once per test binary (nothing when it is there).
var buildImage = sync.OnceValue(func() error {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	d, err := docker.New(ctx)
	if err != nil {
		return err
	}
	defer d.Close()
	return docker.BuildGoImage(ctx, d.Client(), docker.DefaultGoImage, docker.GoImageSource{})
})

// newDocker is a fresh docker backend, as a new process of the service has: it knows no
// container. It skips the test when no engine answers.
func newDocker(t *testing.T) *docker.Docker {
	t.Helper()
	d, err := docker.New(context.Background(), docker.WithLogger(slog.New(slog.DiscardHandler)), docker.WithImages(dockerImages))
	if err != nil {
		t.Skipf("no docker engine answers, so the docker backend cannot be tested here: %v", err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if err := buildImage(); err != nil {
		t.Fatalf("build the sandbox image %s: %v", docker.DefaultGoImage, err)
	}
	return d
}

// dockerEnv is a sandbox server with the docker backend: one process of the service.
type dockerEnv struct {
	*env
	grpc *grpctest.Env
	d    *docker.Docker
	st   *store.Store
	dir  string
}

// startDocker starts a server over pool whose workspaces are under dir, with a new docker
// backend. Two of them on the same pool and dir are a process of the service and the one
// that replaced it after a crash.
func startDocker(t *testing.T, pool *pgxpool.Pool, dir string) *dockerEnv {
	t.Helper()
	d := newDocker(t)
	st := store.New(pool)
	cfg := service.Config{Dir: dir, Images: dockerImages, AllowExtra: []string{"sleep"}}
	srv, err := service.New(cfg, st, service.WithBackend(sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER, d),
		service.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	e := grpctest.Start(t, func(s *grpc.Server) { sandboxv1.RegisterSandboxServiceServer(s, srv) })
	return &dockerEnv{
		env: &env{srv: srv, client: sandboxv1.NewSandboxServiceClient(e.Conn), alice: e.Context(t, "alice"),
			bob: e.Context(t, "bob"), anon: t.Context(), kind: sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER},
		grpc: e, d: d, st: st, dir: dir,
	}
}

// fresh renews alice's credentials (a context of grpctest lasts 30 s) for a later phase
// of a test.
func (e *dockerEnv) fresh(t *testing.T) *dockerEnv {
	t.Helper()
	e.alice = e.grpc.Context(t, "alice")
	return e
}

// containers lists the containers, running or not, that carry label=value.
func (e *dockerEnv) containers(t *testing.T, label, value string) []container.Summary {
	t.Helper()
	res, err := e.d.Client().ContainerList(context.Background(), client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", label+"="+value)})
	if err != nil {
		t.Fatal(err)
	}
	return res.Items
}

// containerOf is the one container of sandbox id.
func (e *dockerEnv) containerOf(t *testing.T, id string) container.Summary {
	t.Helper()
	list := e.containers(t, labelID, id)
	if len(list) != 1 {
		t.Fatalf("sandbox %s has %d containers, want 1", id, len(list))
	}
	return list[0]
}

func (e *dockerEnv) exists(t *testing.T, containerID string) bool {
	t.Helper()
	_, err := e.d.Client().ContainerInspect(context.Background(), containerID, client.ContainerInspectOptions{})
	return err == nil
}

// reap runs one reaper round, which must destroy no sandbox (none has expired).
func (e *dockerEnv) reap(t *testing.T) {
	t.Helper()
	if n, err := e.srv.Reap(context.Background()); err != nil || n != 0 {
		t.Fatalf("Reap: %d destroyed, %v; want 0, nil", n, err)
	}
}

// startCommand runs argv in sandbox id in the background (without the test helpers'
// t.Fatal) and returns what the command's stream ended with, and a channel that is
// closed once the command's process is seen running in the container.
func (e *dockerEnv) startCommand(t *testing.T, id string, argv ...string) <-chan error {
	t.Helper()
	ctx := e.grpc.Context(t, "alice")
	done := make(chan error, 1)
	go func() {
		stream, err := e.client.RunCommand(ctx, &sandboxv1.RunCommandRequest{SandboxId: id, Command: argv})
		for err == nil {
			var m *sandboxv1.RunCommandResponse
			if m, err = stream.Recv(); err == nil {
				if r := m.GetResult(); r != nil {
					if r.ExitCode == 0 {
						done <- nil
					} else {
						done <- errors.New("exit " + r.String())
					}
					return
				}
			}
		}
		if err == io.EOF {
			err = errors.New("the stream ended without a result")
		}
		done <- err
	}()
	want := strings.Join(argv, " ")
	deadline := time.Now().Add(time.Minute)
	for {
		for _, c := range e.containers(t, labelID, id) {
			top, err := e.d.Client().ContainerTop(context.Background(), c.ID, client.ContainerTopOptions{})
			if err != nil {
				continue
			}
			for _, p := range top.Processes {
				if slices.ContainsFunc(p, func(col string) bool { return strings.HasSuffix(col, want) }) {
					return done
				}
			}
		}
		select {
		case err := <-done:
			t.Fatalf("%q ended before it was seen running: %v", want, err)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%q was not seen running in the sandbox's container within a minute", want)
		}
	}
}

// endsSoon waits for a command started with startCommand to end, with an error.
func endsSoon(t *testing.T, done <-chan error, why string) {
	t.Helper()
	select {
	case err := <-done:
		if err == nil {
			t.Fatalf("the command succeeded; want it to fail: %s", why)
		}
		t.Logf("the command ended as wanted (%s): %v", why, err)
	case <-time.After(15 * time.Second):
		t.Fatalf("the command still runs 15 s later: %s", why)
	}
}

// A process of the service killed after making a container but before its table said so
// (or after the sandbox was destroyed, or with the container never recorded) leaves the
// container running; the next reaper round of a server on the same workspace root removes
// it. The containers of live sandboxes and those of another server stay.
func TestReapRemovesContainersNoLiveSandboxUses(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDatabase(t, "sandbox", migrations.FS)
	dir := t.TempDir()
	e := startDocker(t, pool, dir)
	killed := newDocker(t) // the backend of the process that was killed
	ctx := context.Background()

	live := e.create(t, nil)
	row := func(mark func(id string) error) string {
		sb, _, err := e.st.Create(ctx, &store.Sandbox{Sandbox: &sandboxv1.Sandbox{OwnerId: "alice",
			Backend: sandboxv1.SandboxBackend_SANDBOX_BACKEND_DOCKER, Limits: &sandboxv1.ResourceLimits{}},
			TTL: time.Hour, Workspace: filepath.Join(dir, "gone", "ws")}, 0, nil)
		if err != nil {
			t.Fatal(err)
		}
		if mark != nil {
			if err := mark(sb.Id); err != nil {
				t.Fatal(err)
			}
		}
		return sb.Id
	}
	destroyed := row(func(id string) error { return e.st.Destroyed(ctx, id) })
	failed := row(func(id string) error { return e.st.MarkFailed(ctx, id, "the backend broke") })
	creating := row(nil)
	const unknown = "5d0c2a4e-6f0b-4c55-9d4e-0f6a7b3c2d1e"

	cases := []struct {
		name string
		by   *docker.Docker
		who  docker.Identity
		gone bool
	}{
		{"unknown sandbox (killed before the row was written)", e.d, docker.Identity{ID: unknown, Owner: "alice", Dir: dir}, true},
		{"destroyed sandbox", e.d, docker.Identity{ID: destroyed, Owner: "alice", Dir: dir}, true},
		{"failed sandbox, of the killed process", killed, docker.Identity{ID: failed, Owner: "alice", Dir: dir}, true},
		{"creating sandbox (killed before it was ready), of the killed process", killed, docker.Identity{ID: creating, Owner: "alice", Dir: dir}, true},
		{"no sandbox id, of the killed process", killed, docker.Identity{Dir: dir}, true},
		{"no sandbox id, of this process (a Run without Prepare)", e.d, docker.Identity{Dir: dir}, false},
		{"unknown sandbox of another server", killed, docker.Identity{ID: unknown, Owner: "alice", Dir: t.TempDir()}, false},
	}
	made := make([]string, len(cases))
	for i, c := range cases {
		ws, err := filepath.EvalSymlinks(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		if err := c.by.Prepare(ctx, ws, c.who, "go", backend.Limits{}); err != nil {
			t.Fatalf("%s: Prepare: %v", c.name, err)
		}
		list := e.containers(t, "org.thefold.sandbox.workspace", ws)
		if len(list) != 1 {
			t.Fatalf("%s: %d containers for the workspace, want 1", c.name, len(list))
		}
		if got := list[0].Labels; got[labelID] != c.who.ID || got[labelOwner] != c.who.Owner || got[labelDir] != c.who.Dir ||
			got["org.thefold.sandbox"] != "1" {
			t.Fatalf("%s: labels %v", c.name, got)
		}
		made[i] = list[0].ID
	}
	liveContainer := e.containerOf(t, live.Id)
	if l := liveContainer.Labels; l[labelOwner] != "alice" || l[labelDir] != dir {
		t.Errorf("the live sandbox's container is labelled %v", l)
	}

	e.fresh(t).reap(t)
	for i, c := range cases {
		if gone := !e.exists(t, made[i]); gone != c.gone {
			t.Errorf("%s: container removed %v, want %v", c.name, gone, c.gone)
		}
	}
	if !e.exists(t, liveContainer.ID) {
		t.Fatal("the live sandbox's container was removed")
	}
	res, err := e.run(t, live.Id, "echo", "still here")
	if err != nil || res.stdout != "still here\n" {
		t.Fatalf("RunCommand in the live sandbox after the reap: %v %+v", err, res)
	}
	if got := e.containerOf(t, live.Id).ID; got != liveContainer.ID {
		t.Errorf("the live sandbox's container changed from %.12s to %.12s", liveContainer.ID, got)
	}
}

// The service is killed while a command runs; the sandbox is destroyed (here: its row says
// so, as after a DestroySandbox served by the new process while the old container was
// unknown to it). The new process's reaper removes the container, which ends the command.
func TestReapAfterACrashRemovesTheContainerOfADestroyedSandbox(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDatabase(t, "sandbox", migrations.FS)
	dir := t.TempDir()
	old := startDocker(t, pool, dir)
	sb := old.create(t, nil)
	running := old.startCommand(t, sb.Id, "sleep", "60")
	c := old.containerOf(t, sb.Id)

	restarted := startDocker(t, pool, dir) // same database and workspace root, empty state
	if _, err := restarted.client.DestroySandbox(restarted.grpc.Context(t, "alice"), &sandboxv1.DestroySandboxRequest{Id: sb.Id}); err != nil {
		t.Fatal(err)
	}
	if !restarted.exists(t, c.ID) {
		t.Fatal("the container went with DestroySandbox; the crash was not simulated (the new backend should not know it)")
	}
	restarted.reap(t)
	if restarted.exists(t, c.ID) {
		t.Fatalf("container %.12s of destroyed sandbox %s survived the reap", c.ID, sb.Id)
	}
	endsSoon(t, running, "its container was removed")
	if left := restarted.containers(t, labelDir, dir); len(left) != 0 {
		t.Errorf("%d containers of the workspace root are left", len(left))
	}
}

// A live sandbox outlives the crash of its service: the new process's reaper removes the
// container the old one made (ending the old process's command), and the next command
// runs in a new container, over the workspace the sandbox kept, labelled as the old one.
func TestALiveSandboxOutlivesTheCrashOfItsService(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDatabase(t, "sandbox", migrations.FS)
	dir := t.TempDir()
	old := startDocker(t, pool, dir)
	sb := old.create(t, nil)
	old.write(t, sb.Id, "notes.txt", "kept\n")
	running := old.startCommand(t, sb.Id, "sleep", "60")
	c := old.containerOf(t, sb.Id)

	restarted := startDocker(t, pool, dir)
	restarted.fresh(t).reap(t)
	if restarted.exists(t, c.ID) {
		t.Fatal("the container the killed process made survived the reap")
	}
	endsSoon(t, running, "the killed process's container was removed")

	res, err := restarted.run(t, sb.Id, "cat", "notes.txt")
	if err != nil || res.stdout != "kept\n" {
		t.Fatalf("RunCommand after the restart: %v %+v", err, res)
	}
	now := restarted.containerOf(t, sb.Id)
	if now.ID == c.ID || now.Labels[labelOwner] != "alice" || now.Labels[labelDir] != dir {
		t.Errorf("the new container %.12s (old %.12s) is labelled %v", now.ID, c.ID, now.Labels)
	}
	restarted.reap(t)
	if !restarted.exists(t, now.ID) {
		t.Fatal("the reaper removed the container of a live sandbox this process uses")
	}

	if _, err := restarted.client.DestroySandbox(restarted.fresh(t).alice, &sandboxv1.DestroySandboxRequest{Id: sb.Id}); err != nil {
		t.Fatal(err)
	}
	if left := restarted.containers(t, labelDir, dir); len(left) != 0 {
		t.Errorf("%d containers of the workspace root are left after DestroySandbox", len(left))
	}
}

// A live sandbox whose container was removed behind the service's back gets a new one at
// its next command, which succeeds over the same workspace.
func TestAVanishedContainerIsMadeAgain(t *testing.T) {
	t.Parallel()
	pool, _ := dbtest.NewDatabase(t, "sandbox", migrations.FS)
	e := startDocker(t, pool, t.TempDir())
	sb := e.create(t, nil)
	e.write(t, sb.Id, "notes.txt", "kept\n")
	if res, err := e.run(t, sb.Id, "true"); err != nil || res.res.ExitCode != 0 {
		t.Fatalf("first command: %v %+v", err, res)
	}
	c := e.containerOf(t, sb.Id)
	if _, err := e.d.Client().ContainerRemove(context.Background(), c.ID, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true}); err != nil {
		t.Fatal(err)
	}

	res, err := e.fresh(t).run(t, sb.Id, "cat", "notes.txt")
	if err != nil || res.stdout != "kept\n" {
		t.Fatalf("RunCommand after the container vanished: %v %+v", err, res)
	}
	if now := e.containerOf(t, sb.Id); now.ID == c.ID {
		t.Errorf("the command ran in the removed container %.12s?", c.ID)
	}
}
