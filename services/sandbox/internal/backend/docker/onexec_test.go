package docker

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/services/sandbox/internal/backend"
)

// markLine drops the first line of a stream when it is the marker, however the writes cut
// it, and passes any other stream on whole.
func TestMarkLine(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		writes []string
		seen   bool
		out    string
	}{
		{"marker then output", []string{"N0NCE\nerr\n"}, true, "err\n"},
		{"cut anywhere", []string{"N0", "NC", "E", "\n", "e", "rr\n"}, true, "err\n"},
		{"marker alone", []string{"N0NCE\n"}, true, ""},
		{"no marker", []string{"boom\n"}, false, "boom\n"},
		{"a prefix of the marker, then other bytes", []string{"N0N", "X\n"}, false, "N0NX\n"},
		{"the marker without its newline", []string{"N0NCEX\n"}, false, "N0NCEX\n"},
		{"nothing", nil, false, ""},
		{"the marker cut short at the end", []string{"N0NC"}, false, "N0NC"},
	} {
		var out bytes.Buffer
		m := &markLine{line: []byte("N0NCE\n"), next: &out}
		for _, w := range c.writes {
			if n, err := m.Write([]byte(w)); n != len(w) || err != nil {
				t.Fatalf("%s: Write(%q) = %d, %v", c.name, w, n, err)
			}
		}
		m.flush()
		if m.seen != c.seen || out.String() != c.out {
			t.Errorf("%s: seen %v, passed on %q; want %v, %q", c.name, m.seen, out.String(), c.seen, c.out)
		}
	}
}

// A command without stdin runs in one exec: its output is its own (no trace of the nonce),
// the workspace goes in and comes back out, and what the previous command left running is
// gone.
func TestOneExecRunsTheCommandWithTheWorkspace(t *testing.T) {
	t.Parallel()
	d, ws := sandbox(t, map[string]string{"a.txt": "A\n", "gone.txt": "x\n"})
	res := run(t, d, ws, backend.Spec{Argv: sh(`cat a.txt; echo to-stderr >&2; echo B > b.txt; rm gone.txt; (sleep 300 >/dev/null 2>&1 &)`)}, backend.Limits{})
	if res.ExitCode != 0 || string(res.Stdout) != "A\n" || string(res.Stderr) != "to-stderr\n" {
		t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if b, err := os.ReadFile(filepath.Join(ws, "b.txt")); err != nil || string(b) != "B\n" {
		t.Fatalf("b.txt on the host: %q %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(ws, "gone.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("gone.txt is still on the host: %v", err)
	}
	b := d.boxes[ws]
	if b == nil || b.noTar {
		t.Fatalf("the box took the three-step path: %+v", b)
	}
	// The next command finds the host's workspace and nothing of the sleep. The reset's
	// kill -9 returns before the killed sleep has exited and the container's init has reaped
	// it: a zombie (state Z) is not a survivor, and one still dying gets up to 5 s.
	if err := os.WriteFile(filepath.Join(ws, "c.txt"), []byte("C\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const sleeps = `ps -o user,stat,comm | grep -cE '^nobody +[^Z ]+ +sleep$'`
	res = run(t, d, ws, backend.Spec{Argv: sh(`cat b.txt c.txt; ls; i=0; while [ "$(` + sleeps + `)" != 0 ] && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done; ` + sleeps + ` || true`)}, backend.Limits{})
	if res.ExitCode != 0 || string(res.Stdout) != "B\nC\na.txt\nb.txt\nc.txt\n0\n" || len(res.Stderr) != 0 {
		t.Fatalf("second run: exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
}

// An image without tar: the command runs all the same, through the three steps, and the
// box stays on them.
func TestOneExecWithoutTarTakesThreeSteps(t *testing.T) {
	t.Parallel()
	if shared == nil {
		t.Skip(skipReason)
	}
	d, err := New(context.Background(), WithNanoCPUs(2e9))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	d.tar = "no-such-tar"
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "a.txt"), []byte("A\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Destroy(context.Background(), ws) })
	for i, want := range []string{"A\n", "A\nB\n"} {
		res := run(t, d, ws, backend.Spec{Argv: sh(`cat a.txt; echo B >> a.txt`)}, backend.Limits{})
		if res.ExitCode != 0 || string(res.Stdout) != want || len(res.Stderr) != 0 {
			t.Fatalf("run %d: exit %d stdout %q stderr %q", i+1, res.ExitCode, res.Stdout, res.Stderr)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "a.txt")); string(b) != "A\nB\nB\n" {
		t.Fatalf("a.txt after two runs: %q (a command ran twice, or not at all)", b)
	}
	if !d.boxes[ws].noTar {
		t.Fatal("the box did not note the missing tar")
	}
}

// A workspace larger than the container's /workspace fails its copy in, before the command
// runs, as unavailable.
func TestOneExecWorkspaceTooLarge(t *testing.T) {
	t.Parallel()
	if shared == nil {
		t.Skip(skipReason)
	}
	d, err := New(context.Background(), WithNanoCPUs(2e9), WithWorkspaceSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "big"), bytes.Repeat([]byte("x"), 3<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Destroy(context.Background(), ws) })
	_, err = d.Run(context.Background(), ws, backend.Spec{Argv: sh(`touch ran`)}, backend.Limits{})
	if !errors.Is(err, errs.ErrUnavailable) || !strings.Contains(err.Error(), "copy the workspace into the container") {
		t.Fatalf("Run of a workspace too large: %v, want unavailable naming the copy in", err)
	}
	if _, err := os.Stat(filepath.Join(ws, "ran")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the command ran")
	}
}
