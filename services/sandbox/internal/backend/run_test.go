package backend

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/errs"
)

func TestRunBasics(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b Backend) {
		ws := workspace(t)
		if err := os.Mkdir(filepath.Join(ws, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name     string
			spec     Spec
			exit     int
			stdout   string
			stderrIn string
		}{
			{name: "exit code", spec: Spec{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 7"}}, exit: 7, stdout: "out\n", stderrIn: "err"},
			{name: "dir", spec: Spec{Argv: []string{"sh", "-c", "basename $(pwd)"}, Dir: "sub"}, stdout: "sub\n"},
			{name: "stdin", spec: Spec{Argv: []string{"cat"}, Stdin: []byte("fed in")}, stdout: "fed in"},
			{name: "env added", spec: Spec{Argv: []string{"sh", "-c", "echo $GREETING"}, Env: map[string]string{"GREETING": "hello"}}, stdout: "hello\n"},
			{name: "not found", spec: Spec{Argv: []string{"no-such-command-here"}}, exit: -1, stderrIn: "no-such-command-here"},
			{name: "go toolchain on PATH", spec: Spec{Argv: []string{"go", "env", "GOTOOLCHAIN"}}, stdout: "local\n"},
		}
		for _, c := range cases {
			res, err := b.Run(context.Background(), ws, c.spec, Limits{})
			if err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			if c.exit == -1 {
				if res.ExitCode == 0 {
					t.Errorf("%s: exit 0, want a failure", c.name)
				}
			} else if res.ExitCode != c.exit {
				t.Errorf("%s: exit %d, want %d (stderr %q)", c.name, res.ExitCode, c.exit, res.Stderr)
			}
			if c.stdout != "" && string(res.Stdout) != c.stdout {
				t.Errorf("%s: stdout %q, want %q", c.name, res.Stdout, c.stdout)
			}
			if !strings.Contains(string(res.Stderr), c.stderrIn) {
				t.Errorf("%s: stderr %q does not contain %q", c.name, res.Stderr, c.stderrIn)
			}
			if res.TimedOut || res.Truncated || res.Signal != "" {
				t.Errorf("%s: unexpected %+v", c.name, res)
			}
		}
	})
}

func TestRunRejectsBadInput(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b Backend) {
		ws := workspace(t)
		outside := t.TempDir()
		if err := os.Symlink(outside, filepath.Join(ws, "link")); err != nil {
			t.Fatal(err)
		}
		cases := []struct {
			name string
			spec Spec
			want error
		}{
			{"empty argv", Spec{}, errs.ErrInvalid},
			{"dot-dot dir", Spec{Argv: []string{"true"}, Dir: "../x"}, errs.ErrInvalid},
			{"absolute dir", Spec{Argv: []string{"true"}, Dir: "/etc"}, errs.ErrInvalid},
			{"symlinked dir outside", Spec{Argv: []string{"true"}, Dir: "link"}, errs.ErrInvalid},
			{"missing dir", Spec{Argv: []string{"true"}, Dir: "nope"}, errs.ErrInvalid},
			{"bad env name", Spec{Argv: []string{"true"}, Env: map[string]string{"A=B": "x"}}, errs.ErrInvalid},
			{"NUL in argv", Spec{Argv: []string{"echo", "a\x00b"}}, errs.ErrInvalid},
		}
		for _, c := range cases {
			_, err := b.Run(context.Background(), ws, c.spec, Limits{})
			if !errors.Is(err, c.want) {
				t.Errorf("%s: err %v, want %v", c.name, err, c.want)
			}
		}
		if _, err := b.Run(context.Background(), filepath.Join(ws, "missing"), Spec{Argv: []string{"true"}}, Limits{}); !errors.Is(err, errs.ErrFailedPrecondition) {
			t.Errorf("missing workspace: err %v, want ErrFailedPrecondition", err)
		}
	})
}

func TestRunEnvironmentIsScrubbed(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b Backend) {
		ws := workspace(t)
		res, err := b.Run(context.Background(), ws, Spec{Argv: []string{"./helper", "env"}}, Limits{})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("run: %v %+v", err, res)
		}
		env := string(res.Stdout)
		if os.Getenv(secretEnv) == "" {
			t.Fatal("the test's host secret is not set")
		}
		if strings.Contains(env, secretEnv) || strings.Contains(env, "hunter2") {
			t.Errorf("host secret visible in the sandbox:\n%s", env)
		}
		for _, want := range []string{"GOTOOLCHAIN=local", "LANG=C.UTF-8", "GOCACHE="} {
			if !strings.Contains(env, want) {
				t.Errorf("env lacks %s:\n%s", want, env)
			}
		}
		// Offline: no proxy, or (bwrap) the host's module cache read as a file:// proxy.
		if !strings.Contains(env, "GOPROXY=off\n") && !strings.Contains(env, "GOPROXY=file:///gomodcache/cache/download\n") {
			t.Errorf("env has a GOPROXY that is not offline:\n%s", env)
		}
		res, err = b.Run(context.Background(), ws, Spec{Argv: []string{"./helper", "env"}, Network: true}, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(res.Stdout), "GOPROXY=off") || strings.Contains(string(res.Stdout), "GOPROXY=file:") {
			t.Errorf("an offline GOPROXY with Network")
		}
	})
}

func TestRunTruncatesOutputFlood(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b Backend) {
		ws := workspace(t)
		const flood, keep = 20 << 20, 64 << 10
		res, err := b.Run(context.Background(), ws, Spec{Argv: []string{"./helper", "flood", fmt.Sprint(flood)}, MaxOutput: keep}, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode != 0 || !res.Truncated {
			t.Fatalf("exit %d truncated %v, want 0 true", res.ExitCode, res.Truncated)
		}
		marker := fmt.Sprintf("[… output truncated: %d bytes dropped]", flood-keep)
		if !strings.HasSuffix(strings.TrimSpace(string(res.Stdout)), marker) {
			t.Errorf("stdout does not end with %q: …%q", marker, res.Stdout[max(0, len(res.Stdout)-80):])
		}
		if n := len(res.Stdout) + len(res.Stderr); n > keep+len(marker)+2 {
			t.Errorf("kept %d bytes, cap %d", n, keep)
		}
	})
}

func TestRunStreamsInOrder(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b Backend) {
		ws := workspace(t)
		var (
			mu       sync.Mutex
			streamed [3]bytes.Buffer
			returned bool
			late     bool
		)
		spec := Spec{Argv: []string{"./helper", "stream", "2000"}, MaxOutput: 16 << 10, Output: func(s int, p []byte) {
			mu.Lock()
			defer mu.Unlock()
			if returned {
				late = true
			}
			streamed[s].Write(p)
		}}
		res, err := b.Run(context.Background(), ws, spec, Limits{})
		mu.Lock()
		returned = true
		mu.Unlock()
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("run: %v %+v", err, res)
		}
		if !bytes.Equal(streamed[1].Bytes(), res.Stdout) || !bytes.Equal(streamed[2].Bytes(), res.Stderr) {
			t.Errorf("streamed output differs from the result's")
		}
		for s, prefix := range map[int]string{1: "out", 2: "err"} {
			lines := strings.Split(streamed[s].String(), "\n")
			for i, l := range lines {
				// The cap may cut the last kept line short: a prefix of the expected line.
				if strings.HasPrefix(l, prefix) && !strings.HasPrefix(fmt.Sprintf("%s %d", prefix, i), l) {
					t.Fatalf("stream %d line %d is %q: out of order", s, i, l)
				}
			}
		}
		if !res.Truncated || !strings.Contains(streamed[1].String()+streamed[2].String(), "output truncated") {
			t.Errorf("marker not streamed (truncated %v)", res.Truncated)
		}
		mu.Lock()
		defer mu.Unlock()
		if late {
			t.Error("callback called after Run returned")
		}
	})
}

func TestRunKillsEndlessLoopAtTimeout(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b Backend) {
		ws := workspace(t)
		res, err := b.Run(context.Background(), ws, Spec{Argv: []string{"./helper", "loop"}, Timeout: time.Second}, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if !res.TimedOut || res.ExitCode == 0 {
			t.Fatalf("timed out %v exit %d, want true and non-zero", res.TimedOut, res.ExitCode)
		}
	})
}

func TestRunCancelledContext(t *testing.T) {
	t.Parallel()
	each(t, func(t *testing.T, b Backend) {
		ws := workspace(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		res, err := b.Run(ctx, ws, Spec{Argv: []string{"./helper", "loop"}}, Limits{})
		if !errors.Is(err, context.Canceled) || res == nil || res.TimedOut {
			t.Fatalf("err %v res %+v, want context.Canceled with a result that did not time out", err, res)
		}
	})
}

// TestBwrapFailureIsTheResult checks that when bwrap cannot make the sandbox (here: a
// build cache directory removed after the backend started), Run answers with bwrap's own exit status and
// message instead of hanging on the handshake or hiding the reason.
func TestBwrapFailureIsTheResult(t *testing.T) {
	t.Parallel()
	cache := filepath.Join(t.TempDir(), "missing")
	if err := os.Mkdir(cache, 0o755); err != nil {
		t.Fatal(err)
	}
	b, err := NewBwrap(WithLogger(quiet()), WithStateDir(t.TempDir()), WithGoCache(cache))
	if err != nil {
		t.Skipf("bwrap cannot run on this machine: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	if err := os.Remove(cache); err != nil {
		t.Fatal(err)
	}
	res, err := b.Run(t.Context(), workspace(t), Spec{Argv: []string{"true"}}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || !strings.Contains(string(res.Stderr), "missing") {
		t.Fatalf("exit %d, stderr %q: want bwrap's failure naming the missing directory", res.ExitCode, res.Stderr)
	}
}
