package docker

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/services/sandbox/internal/backend"
)

func TestRunCopiesTheWorkspaceBothWays(t *testing.T) {
	t.Parallel()
	d, ws := sandbox(t, map[string]string{"in.txt": "hello\n", "gone.txt": "x", "sub/keep.txt": "k"})
	res := run(t, d, ws, backend.Spec{Argv: sh(`cat in.txt; echo out > new.txt; rm gone.txt; mkdir -p d/e; echo deep > d/e/f; id -u`)}, backend.Limits{})
	if res.ExitCode != 0 {
		t.Fatalf("exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	if got, want := string(res.Stdout), "hello\n65534\n"; got != want {
		t.Errorf("stdout = %q, want %q (the file copied in, run as the sandbox user)", got, want)
	}
	for name, want := range map[string]string{"new.txt": "out\n", "d/e/f": "deep\n", "sub/keep.txt": "k", "in.txt": "hello\n"} {
		got, err := os.ReadFile(filepath.Join(ws, name))
		if err != nil || string(got) != want {
			t.Errorf("host %s = %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "gone.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("gone.txt deleted in the container is still on the host: %v", err)
	}

	// A file changed on the host between commands is what the next command sees.
	if err := os.WriteFile(filepath.Join(ws, "in.txt"), []byte("changed\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(ws, "new.txt")); err != nil {
		t.Fatal(err)
	}
	res = run(t, d, ws, backend.Spec{Argv: sh(`cat in.txt; ls`), Dir: "."}, backend.Limits{})
	if got, want := string(res.Stdout), "changed\nd\nin.txt\nsub\n"; got != want {
		t.Errorf("second run stdout = %q, want %q", got, want)
	}
}

// A Discard run (a check) leaves the host workspace as it was, and the next command sees
// the host's files, not what the check wrote or deleted.
func TestDiscardKeepsTheHostWorkspace(t *testing.T) {
	t.Parallel()
	d, ws := sandbox(t, map[string]string{"in.txt": "hello\n", "keep.txt": "k"})
	res := run(t, d, ws, backend.Spec{Argv: sh(`cat in.txt; echo out > new.txt; rm keep.txt; echo x > in.txt`), Discard: true}, backend.Limits{})
	if res.ExitCode != 0 || string(res.Stdout) != "hello\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	for name, want := range map[string]string{"in.txt": "hello\n", "keep.txt": "k"} {
		if got, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(got) != want {
			t.Errorf("host %s = %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the discarded run's new.txt reached the host: %v", err)
	}
	res = run(t, d, ws, backend.Spec{Argv: sh(`cat in.txt; ls`)}, backend.Limits{})
	if got, want := string(res.Stdout), "hello\nin.txt\nkeep.txt\n"; got != want {
		t.Errorf("the next run saw %q, want %q", got, want)
	}
}

func TestRunDirEnvExitCodeStdinAndStreaming(t *testing.T) {
	t.Parallel()
	d, ws := sandbox(t, map[string]string{"sub/x": ""})
	var mu sync.Mutex
	var streamed [3]bytes.Buffer
	res := run(t, d, ws, backend.Spec{
		Argv:  sh(`pwd; echo "$GREETING"; cat; echo oops >&2; exit 3`),
		Dir:   "sub",
		Env:   map[string]string{"GREETING": "hi there"},
		Stdin: []byte("from stdin\n"),
		Output: func(stream int, p []byte) {
			mu.Lock()
			streamed[stream].Write(p)
			mu.Unlock()
		},
	}, backend.Limits{})
	if res.ExitCode != 3 || res.Signal != "" || res.TimedOut {
		t.Errorf("exit %d signal %q timedOut %v, want exit 3", res.ExitCode, res.Signal, res.TimedOut)
	}
	if got, want := string(res.Stdout), "/workspace/sub\nhi there\nfrom stdin\n"; got != want {
		t.Errorf("stdout = %q, want %q", got, want)
	}
	if got := string(res.Stderr); got != "oops\n" {
		t.Errorf("stderr = %q", got)
	}
	if streamed[1].String() != string(res.Stdout) || streamed[2].String() != string(res.Stderr) {
		t.Errorf("streamed %q / %q, result %q / %q", streamed[1].String(), streamed[2].String(), res.Stdout, res.Stderr)
	}
	if res.Duration <= 0 {
		t.Errorf("duration %v", res.Duration)
	}
}

func TestGoVetFindingsComeOut(t *testing.T) {
	t.Parallel()
	d, ws := sandbox(t, map[string]string{
		"go.mod": "module example.com/m\n\ngo 1.22\n",
		"main.go": `package main

import "fmt"

func main() {
	fmt.Printf("%d\n", "not a number")
}
`,
	})
	res := run(t, d, ws, backend.Spec{Argv: []string{"go", "vet", "./..."}}, backend.Limits{})
	if res.ExitCode == 0 {
		t.Fatalf("go vet passed a Printf misuse: stdout %q stderr %q", res.Stdout, res.Stderr)
	}
	if !strings.Contains(string(res.Stderr), "main.go:6:") || !strings.Contains(string(res.Stderr), "%d") {
		t.Errorf("vet's finding with file and line missing from stderr: %q", res.Stderr)
	}
	// The build cache lives in the container's /tmp, never in the workspace.
	if _, err := os.Stat(filepath.Join(ws, "gocache")); err == nil {
		t.Error("a cache directory appeared in the workspace")
	}
}

// go run and go test execute what they build under /tmp: the container's /tmp must allow it.
func TestGoRunExecutesWhatItBuilds(t *testing.T) {
	t.Parallel()
	d, ws := sandbox(t, map[string]string{
		"go.mod":  "module example.com/m\n\ngo 1.22\n",
		"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"ran\") }\n",
	})
	res := run(t, d, ws, backend.Spec{Argv: []string{"go", "run", "."}}, backend.Limits{})
	if res.ExitCode != 0 || string(res.Stdout) != "ran\n" {
		t.Fatalf("go run: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}

func TestOutputFloodIsTruncated(t *testing.T) {
	t.Parallel()
	d, ws := sandbox(t, nil)
	const max = 64 << 10
	res := run(t, d, ws, backend.Spec{Argv: sh(`yes flood | head -c 20000000`), MaxOutput: max}, backend.Limits{})
	if !res.Truncated {
		t.Fatal("20 MB of output not marked truncated")
	}
	if len(res.Stdout) > max+100 {
		t.Errorf("kept %d bytes, cap %d", len(res.Stdout), max)
	}
	if !bytes.Contains(res.Stdout, []byte("[… output truncated: ")) {
		t.Errorf("no truncation marker at the end: %q", res.Stdout[len(res.Stdout)-80:])
	}
}

func TestRunRejectsBadInput(t *testing.T) {
	t.Parallel()
	d, ws := sandbox(t, map[string]string{"f": ""})
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		spec backend.Spec
		want error
	}{
		{"empty argv", backend.Spec{}, errs.ErrInvalid},
		{"dir climbs out", backend.Spec{Argv: []string{"true"}, Dir: "../x"}, errs.ErrInvalid},
		{"absolute dir", backend.Spec{Argv: []string{"true"}, Dir: "/etc"}, errs.ErrInvalid},
		{"dir through a symlink out", backend.Spec{Argv: []string{"true"}, Dir: "link"}, errs.ErrInvalid},
		{"dir is a file", backend.Spec{Argv: []string{"true"}, Dir: "f"}, errs.ErrInvalid},
		{"bad env name", backend.Spec{Argv: []string{"true"}, Env: map[string]string{"A=B": "c"}}, errs.ErrInvalid},
		{"allow without network", backend.Spec{Argv: []string{"true"}, Allow: []string{"http://proxy.golang.org"}}, errs.ErrInvalid},
		{"bad allow entry", backend.Spec{Argv: []string{"true"}, Network: true, Allow: []string{"no port"}}, errs.ErrInvalid},
	}
	for _, c := range cases {
		_, err := d.Run(context.Background(), ws, c.spec, backend.Limits{})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := d.Run(context.Background(), filepath.Join(ws, "missing"), backend.Spec{Argv: []string{"true"}}, backend.Limits{}); !errors.Is(err, errs.ErrFailedPrecondition) {
		t.Errorf("missing workspace: err = %v", err)
	}
	if err := d.Prepare(context.Background(), ws, Identity{}, "cobol", backend.Limits{}); !errors.Is(err, errs.ErrInvalid) || !strings.Contains(err.Error(), "go") {
		t.Errorf("unknown language: err = %v, want ErrInvalid naming the configured ones", err)
	}
}

func TestNewSaysWhyWhenNoEngineAnswers(t *testing.T) {
	t.Parallel()
	cli, err := client.New(client.WithHost("unix://" + filepath.Join(t.TempDir(), "no-docker.sock")))
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	_, err = New(context.Background(), WithClient(cli))
	if !errors.Is(err, errs.ErrUnavailable) || !strings.Contains(err.Error(), "does not answer") {
		t.Errorf("err = %v, want ErrUnavailable saying the engine does not answer", err)
	}
}

func TestDestroyRemovesTheContainer(t *testing.T) {
	t.Parallel()
	d, ws := sandbox(t, nil)
	if err := d.Prepare(context.Background(), ws, Identity{}, "go", backend.Limits{}); err != nil {
		t.Fatal(err)
	}
	b, _ := d.box(ws)
	id := b.id
	if err := d.Destroy(context.Background(), ws); err != nil {
		t.Fatal(err)
	}
	if _, err := d.cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{}); err == nil {
		t.Error("container still there after Destroy")
	}
}

// A container that stops during a command (killed here through the engine, as an OOM kill
// of its init would) ends the command with a result and a warning; the host workspace keeps
// its files (an empty copy-out must not delete them), and the next command runs again.
func TestContainerStoppedDuringACommand(t *testing.T) {
	t.Parallel()
	d, ws := sandbox(t, map[string]string{"keep.txt": "kept"})
	run(t, d, ws, backend.Spec{Argv: []string{"true"}}, backend.Limits{})
	b, err := d.box(ws)
	if err != nil {
		t.Fatal(err)
	}
	b.mu.Lock()
	id := b.id
	b.mu.Unlock()
	go func() {
		time.Sleep(2 * time.Second)
		_, _ = d.cli.ContainerKill(context.Background(), id, client.ContainerKillOptions{Signal: "SIGKILL"})
	}()
	res, err := d.Run(context.Background(), ws, backend.Spec{Argv: sh(`echo > new.txt; sleep 30`), Timeout: time.Minute}, backend.Limits{})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.ExitCode == 0 {
		t.Fatalf("result %+v", res)
	}
	// Either the copy out found the container stopped (the command's changes are lost, and
	// Run says so), or it came just before the engine finished stopping it (the changes
	// came out): a race of the engine's, and both keep the workspace whole.
	stopped := slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, "stopped during the command") })
	if _, err := os.Stat(filepath.Join(ws, "new.txt")); !stopped && err != nil {
		t.Fatalf("no warning, and the command's change did not come out either: %+v", res)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "keep.txt")); err != nil || string(b) != "kept" {
		t.Fatalf("the host workspace lost keep.txt: %q %v", b, err)
	}
	if res := run(t, d, ws, backend.Spec{Argv: []string{"cat", "keep.txt"}}, backend.Limits{}); string(res.Stdout) != "kept" {
		t.Fatalf("the next command: %+v", res)
	}
}

// A sandbox's own CPU share reaches its container, at creation and when it changes; without
// one the backend's default applies.
func TestSandboxCPUsReachTheContainer(t *testing.T) {
	t.Parallel()
	d, ws := sandbox(t, nil)
	nano := func() int64 {
		t.Helper()
		b, err := d.box(ws)
		if err != nil {
			t.Fatal(err)
		}
		b.mu.Lock()
		id := b.id
		b.mu.Unlock()
		got, err := d.cli.ContainerInspect(context.Background(), id, client.ContainerInspectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return got.Container.HostConfig.NanoCPUs
	}
	run(t, d, ws, backend.Spec{Argv: []string{"true"}}, backend.Limits{})
	if got := nano(); got != d.cfg.nanoCPUs {
		t.Fatalf("default share: NanoCPUs %d, want %d", got, d.cfg.nanoCPUs)
	}
	run(t, d, ws, backend.Spec{Argv: []string{"true"}}, backend.Limits{CPUs: 1.5})
	if got := nano(); got != 1_500_000_000 {
		t.Fatalf("the sandbox's 1.5 cores: NanoCPUs %d", got)
	}
}
