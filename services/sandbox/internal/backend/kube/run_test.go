package kube_test

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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/services/sandbox/internal/backend"
	"github.com/thefold/thefold/services/sandbox/internal/backend/kube"
)

func TestFilesRoundTripThroughTar(t *testing.T) {
	t.Parallel()
	f := newFixture(t, kube.Config{})
	ws := f.workspace(t, map[string]string{"a.txt": "alpha\n", "gone.txt": "bye", "sub/dir/b.txt": "beta", ".hidden": "h"})
	if err := os.Symlink("a.txt", filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(ws, "sub/dir/b.txt"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := f.k.Prepare(t.Context(), ws, backend.Identity{ID: "s", Owner: "alice", Dir: f.dir}, "", backend.Limits{}); err != nil {
		t.Fatal(err)
	}
	pod := f.onlyPod(t).Name
	// The command sees the host's files in the pod, and what it changes comes back.
	script := `cat a.txt link .hidden sub/dir/b.txt; test -x sub/dir/b.txt && echo exec; rm gone.txt; mkdir -p new/deep; printf made > new/deep/c.txt; printf changed > a.txt`
	res, err := f.k.Run(t.Context(), ws, backend.Spec{Argv: []string{"sh", "-c", script}}, backend.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(res.Stdout), "alpha\nalpha\nhbetaexec\n"; got != want || res.ExitCode != 0 {
		t.Fatalf("stdout %q (exit %d, stderr %q), want %q", got, res.ExitCode, res.Stderr, want)
	}
	want := map[string]string{"a.txt": "changed", "new/deep/c.txt": "made", "sub/dir/b.txt": "beta", ".hidden": "h"}
	for p, content := range want {
		b, err := os.ReadFile(filepath.Join(ws, p))
		if err != nil || string(b) != content {
			t.Errorf("host %s: %q, %v; want %q", p, b, err, content)
		}
	}
	if _, err := os.Lstat(filepath.Join(ws, "gone.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("gone.txt was deleted in the pod but is still on the host (%v)", err)
	}
	if target, err := os.Readlink(filepath.Join(ws, "link")); err != nil || target != "a.txt" {
		t.Errorf("link: %q, %v", target, err)
	}
	// The pod's /workspace holds the same files: they went through its exec, not a mount.
	if b, err := os.ReadFile(filepath.Join(f.exec.Workspace(pod), "new/deep/c.txt")); err != nil || string(b) != "made" {
		t.Errorf("pod's /workspace/new/deep/c.txt: %q, %v", b, err)
	}
	// A file written on the host between commands reaches the next one; one deleted on the
	// host is gone in the pod.
	if err := os.WriteFile(filepath.Join(ws, "host.txt"), []byte("from the host"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(ws, ".hidden")); err != nil {
		t.Fatal(err)
	}
	res, err = f.k.Run(t.Context(), ws, backend.Spec{Argv: []string{"sh", "-c", "pwd; cat ../../host.txt; ls -A ../.."}, Dir: "sub/dir"}, backend.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(res.Stdout), "\n")
	if len(lines) < 2 || !strings.HasSuffix(lines[0], "/workspace/sub/dir") || !strings.HasPrefix(lines[1], "from the host") || strings.Contains(string(res.Stdout), ".hidden") {
		t.Errorf("second command (in sub/dir) saw %q (stderr %q): want its directory, host.txt's content and no .hidden", res.Stdout, res.Stderr)
	}
	// Every byte moved through exec: a copy in with the archive on stdin, a copy out.
	var in, out int
	for _, c := range f.exec.Calls() {
		switch {
		case slices.Equal(c.Argv, []string{"/bin/sh", "-c", kube.CopyInScript}):
			in++
		case slices.Equal(c.Argv, []string{"/bin/sh", "-c", kube.CopyOutScript}):
			out++
		}
	}
	if in != 2 || out != 2 {
		t.Errorf("copies in %d, out %d; want 2 of each", in, out)
	}
}

func TestOutputStreamsAndIsCapped(t *testing.T) {
	t.Parallel()
	f := newFixture(t, kube.Config{})
	ws := f.workspace(t, nil)
	first := make(chan struct{})
	var once sync.Once
	var mu sync.Mutex
	var streamed bytes.Buffer
	spec := backend.Spec{
		Argv:      []string{"sh", "-c", `echo first; sleep 1; i=0; while [ $i -lt 300 ]; do echo 0123456789; i=$((i+1)); done; echo to-stderr >&2`},
		MaxOutput: 1000,
		Output: func(stream int, p []byte) {
			mu.Lock()
			streamed.Write(p)
			mu.Unlock()
			if stream == 1 && bytes.Contains(p, []byte("first")) {
				once.Do(func() { close(first) })
			}
		},
	}
	type ran struct {
		res *backend.Result
		err error
	}
	done := make(chan ran, 1)
	go func() {
		res, err := f.k.Run(t.Context(), ws, spec, backend.Limits{})
		done <- ran{res, err}
	}()
	select {
	case <-first:
	case r := <-done:
		t.Fatalf("Run returned (%v) before any output was streamed", r.err)
	case <-time.After(30 * time.Second):
		t.Fatal("no output streamed")
	}
	select {
	case r := <-done:
		t.Fatalf("Run had already returned (%v) when the first line came: not streamed", r.err)
	default:
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	kept := len(r.res.Stdout) + len(r.res.Stderr)
	if !r.res.Truncated || kept > 1000+200 || !bytes.Contains(r.res.Stdout, []byte("output truncated")) {
		t.Errorf("truncated %v, kept %d bytes (stdout ends %q): want the cap of 1000 and a marker", r.res.Truncated, kept, r.res.Stdout[max(0, len(r.res.Stdout)-60):])
	}
	if r.res.ExitCode != 0 {
		t.Errorf("exit %d", r.res.ExitCode)
	}
	mu.Lock()
	defer mu.Unlock()
	if got := streamed.Len(); got != kept {
		t.Errorf("streamed %d bytes, kept %d: the stream must carry exactly what is kept", got, kept)
	}
}

func TestExitCodesAreResults(t *testing.T) {
	t.Parallel()
	f := newFixture(t, kube.Config{})
	ws := f.workspace(t, nil)
	cases := []struct {
		argv []string
		code int
		env  map[string]string
		out  string
	}{
		{argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}, code: 3, out: "out\n"},
		{argv: []string{"false"}, code: 1},
		{argv: []string{"no-such-program-here"}, code: 127},
		{argv: []string{"sh", "-c", `printf %s "$GREETING/$OTHER"`}, env: map[string]string{"GREETING": "hello world", "OTHER": "a=b"}, out: "hello world/a=b"},
	}
	for _, tc := range cases {
		res, err := f.k.Run(t.Context(), ws, backend.Spec{Argv: tc.argv, Env: tc.env}, backend.Limits{})
		if err != nil {
			t.Fatalf("%v: an exit is a Result, not an error: %v", tc.argv, err)
		}
		if res.ExitCode != tc.code || res.TimedOut || res.Signal != "" || (tc.out != "" && string(res.Stdout) != tc.out) {
			t.Errorf("%v: exit %d signal %q timed out %v stdout %q; want exit %d stdout %q", tc.argv, res.ExitCode, res.Signal, res.TimedOut, res.Stdout, tc.code, tc.out)
		}
	}
	res, err := f.k.Run(t.Context(), ws, backend.Spec{Argv: []string{"cat"}, Stdin: []byte("from stdin")}, backend.Limits{})
	if err != nil || string(res.Stdout) != "from stdin" {
		t.Errorf("stdin: %v %q", err, res.Stdout)
	}
}

func TestTimeoutKillsTheCommandInThePod(t *testing.T) {
	t.Parallel()
	f := newFixture(t, kube.Config{})
	ws := f.workspace(t, nil)
	start := time.Now()
	// A command whose children would outlive it: only a kill in the pod ends them (the
	// stub, like pods/exec, leaves the process running when the stream is cancelled).
	res, err := f.k.Run(t.Context(), ws, backend.Spec{Argv: []string{"sh", "-c", "sleep 60 & sleep 60; echo never"}, Timeout: 700 * time.Millisecond}, backend.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if !res.TimedOut || res.Signal != "killed" || res.ExitCode != 137 {
		t.Errorf("result %+v: want timed out, killed, exit 137", res)
	}
	if took > 8*time.Second {
		t.Errorf("Run took %s: the kill did not end the command at its timeout", took)
	}
	pod := f.onlyPod(t).Name
	if f.exec.Kills(pod) == 0 {
		t.Error("no kill was sent to the pod")
	}
	if n := f.exec.Running(pod); n != 0 {
		t.Errorf("%d processes of the command still run in the pod", n)
	}
	// The timeout in the pod is the backstop: the command carries one.
	var cmd []string
	for _, c := range f.exec.Calls() {
		if len(c.Argv) > 2 && c.Argv[2] == kube.CommandScript {
			cmd = c.Argv
		}
	}
	if i := slices.Index(cmd, "timeout"); i < 0 || cmd[i+1] != "-s" || cmd[i+2] != "KILL" || cmd[i+3] != "11" {
		t.Errorf("command %q: want it under `timeout -s KILL 11` (its timeout and the grace)", cmd)
	}
}

func TestLeftoversAreKilledAfterTheCommand(t *testing.T) {
	t.Parallel()
	f := newFixture(t, kube.Config{})
	ws := f.workspace(t, nil)
	res, err := f.k.Run(t.Context(), ws, backend.Spec{Argv: []string{"sh", "-c", "sleep 60 >/dev/null 2>&1 & echo started"}}, backend.Limits{})
	if err != nil || res.ExitCode != 0 || string(res.Stdout) != "started\n" {
		t.Fatalf("Run: %v %+v", err, res)
	}
	pod := f.onlyPod(t).Name
	if f.exec.Kills(pod) != 1 {
		t.Errorf("kills %d, want 1 (after the command)", f.exec.Kills(pod))
	}
	if n := f.exec.Running(pod); n != 0 {
		t.Errorf("the command's background process still runs (%d)", n)
	}
}

func TestCallerGoneKillsTheCommand(t *testing.T) {
	t.Parallel()
	f := newFixture(t, kube.Config{})
	ws := f.workspace(t, map[string]string{"keep.txt": "kept"})
	ctx, cancel := context.WithTimeout(t.Context(), 700*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := f.k.Run(ctx, ws, backend.Spec{Argv: []string{"sh", "-c", "rm keep.txt; sleep 60"}}, backend.Limits{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run: %v, want the context's error", err)
	}
	if took := time.Since(start); took > 8*time.Second {
		t.Errorf("Run took %s after its caller went: the command was not killed at once", took)
	}
	pod := f.onlyPod(t).Name
	if f.exec.Kills(pod) == 0 || f.exec.Running(pod) != 0 {
		t.Errorf("kills %d, running %d: the command must be killed in the pod", f.exec.Kills(pod), f.exec.Running(pod))
	}
	if b, err := os.ReadFile(filepath.Join(ws, "keep.txt")); err != nil || string(b) != "kept" {
		t.Errorf("the stopped command's changes were copied back: keep.txt %q, %v", b, err)
	}
}

func TestNetworkCommandIsRefused(t *testing.T) {
	t.Parallel()
	f := newFixture(t, kube.Config{})
	ws := f.workspace(t, nil)
	_, err := f.k.Run(t.Context(), ws, backend.Spec{Argv: []string{"go", "mod", "download"}, Network: true, Allow: []string{"https://proxy.golang.org"}}, backend.Limits{})
	if !errors.Is(err, errs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "no egress proxy") {
		t.Fatalf("Run: %v; want FailedPrecondition saying there is no egress proxy", err)
	}
	if calls := f.exec.Calls(); len(calls) != 0 {
		t.Errorf("execs %v: nothing may run", calls)
	}
	if pods := f.c.Pods(t); len(pods) != 0 {
		t.Errorf("pods %v: nothing may be made", names(pods))
	}
}

func TestBadInputIsRefusedLikeEveryBackend(t *testing.T) {
	t.Parallel()
	f := newFixture(t, kube.Config{})
	ws := f.workspace(t, map[string]string{"sub/a.txt": "a"})
	if err := os.Symlink("/etc", filepath.Join(ws, "out")); err != nil {
		t.Fatal(err)
	}
	cases := []backend.Spec{
		{},
		{Argv: []string{""}},
		{Argv: []string{"echo", "a\x00b"}},
		{Argv: []string{"ls"}, Dir: "../x"},
		{Argv: []string{"ls"}, Dir: "/etc"},
		{Argv: []string{"ls"}, Dir: "out"},
		{Argv: []string{"ls"}, Dir: "missing"},
		{Argv: []string{"ls"}, Dir: "sub/a.txt"},
		{Argv: []string{"ls"}, Env: map[string]string{"A=B": "x"}},
		{Argv: []string{"ls"}, Allow: []string{"example.com:443"}},
	}
	for _, s := range cases {
		_, err := f.k.Run(t.Context(), ws, s, backend.Limits{})
		_, _, want := backend.CheckSpec(ws, s)
		if want == nil {
			t.Fatalf("%+v: CheckSpec accepts it: not a bad-input case", s)
		}
		if !errors.Is(err, errs.ErrInvalid) || err.Error() != want.Error() {
			t.Errorf("%+v: %v; want CheckSpec's %v", s, err, want)
		}
	}
	if _, err := f.k.Run(t.Context(), filepath.Join(f.dir, "nope"), backend.Spec{Argv: []string{"true"}}, backend.Limits{}); !errors.Is(err, errs.ErrFailedPrecondition) {
		t.Errorf("missing workspace: %v, want FailedPrecondition", err)
	}
	if calls := f.exec.Calls(); len(calls) != 0 {
		t.Errorf("execs %v for bad input", calls)
	}
}

func TestAGonePodIsReplaced(t *testing.T) {
	t.Parallel()
	f := newFixture(t, kube.Config{})
	ws := f.workspace(t, map[string]string{"a.txt": "a"})
	// Run without Prepare makes the pod.
	if res, err := f.k.Run(t.Context(), ws, backend.Spec{Argv: []string{"true"}}, backend.Limits{}); err != nil || res.ExitCode != 0 {
		t.Fatalf("Run: %v %+v", err, res)
	}
	first := f.onlyPod(t).Name
	if err := f.c.Core.Pods(f.k.Namespace()).Delete(t.Context(), first, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	res, err := f.k.Run(t.Context(), ws, backend.Spec{Argv: []string{"cat", "a.txt"}}, backend.Limits{})
	if err != nil || string(res.Stdout) != "a" {
		t.Fatalf("Run after the pod was deleted: %v %+v", err, res)
	}
	if p := f.onlyPod(t).Name; p == first {
		t.Errorf("pod %s: want a new one", p)
	}
}
