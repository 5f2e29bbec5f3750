package docker

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/thefold/thefold/services/sandbox/internal/backend"
)

// Each test here is an attempt to get out of the sandbox; each must fail.

// hostIP is an address of this host other than loopback (loopback inside the container is
// the container's own), so a listener on it is what a sandbox with network would reach.
func hostIP(t *testing.T) string {
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range addrs {
		if ipn, ok := a.(*net.IPNet); ok && !ipn.IP.IsLoopback() && ipn.IP.To4() != nil {
			return ipn.IP.String()
		}
	}
	t.Skip("this host has no non-loopback IPv4 address to listen on")
	return ""
}

func TestEscapeNetwork(t *testing.T) {
	t.Parallel()
	d, ws := sandbox(t, nil)
	ln, err := net.Listen("tcp", hostIP(t)+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var accepted atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			c.Close()
		}
	}()
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, target := range [][2]string{{host, port}, {"1.1.1.1", "53"}} {
		res := run(t, d, ws, backend.Spec{Argv: sh(fmt.Sprintf(`nc -w 3 %s %s </dev/null && echo CONNECTED`, target[0], target[1])), Timeout: 20 * time.Second}, backend.Limits{})
		if strings.Contains(string(res.Stdout), "CONNECTED") || res.ExitCode == 0 {
			t.Errorf("connected to %s:%s: exit %d, stdout %q", target[0], target[1], res.ExitCode, res.Stdout)
		}
	}
	res := run(t, d, ws, backend.Spec{Argv: sh(`cat /proc/net/dev`)}, backend.Limits{})
	if strings.Contains(string(res.Stdout), "eth0") {
		t.Errorf("the container has an interface besides loopback:\n%s", res.Stdout)
	}
	if n := accepted.Load(); n != 0 {
		t.Errorf("the host listener accepted %d connections from the sandbox", n)
	}
}

func TestEscapeWriteOutsideWorkspace(t *testing.T) {
	t.Parallel()
	d, ws := sandbox(t, nil)
	marker := fmt.Sprintf("thefold-escape-%d", time.Now().UnixNano())
	for _, path := range []string{"/etc/" + marker, "/" + marker, "/usr/local/go/" + marker, "/bin/" + marker} {
		res := run(t, d, ws, backend.Spec{Argv: sh("echo x > " + path + " && echo WROTE")}, backend.Limits{})
		if res.ExitCode == 0 || strings.Contains(string(res.Stdout), "WROTE") {
			t.Errorf("wrote %s in the container: exit %d", path, res.ExitCode)
		}
		if _, err := os.Stat(path); err == nil {
			t.Errorf("%s appeared on the host", path)
		}
	}
	// /tmp is writable, but it is the container's own.
	res := run(t, d, ws, backend.Spec{Argv: sh("echo x > /tmp/" + marker + " && echo WROTE")}, backend.Limits{})
	if !strings.Contains(string(res.Stdout), "WROTE") {
		t.Errorf("the sandbox /tmp is not writable: exit %d, stderr %q", res.ExitCode, res.Stderr)
	}
	if _, err := os.Stat(filepath.Join(os.TempDir(), marker)); err == nil {
		t.Errorf("a write to the sandbox /tmp landed in the host's %s", os.TempDir())
	}
}

func TestEscapeReadHostFile(t *testing.T) {
	t.Parallel()
	d, ws := sandbox(t, nil)
	secretDir := t.TempDir()
	secret := filepath.Join(secretDir, "secret.txt")
	if err := os.WriteFile(secret, []byte("THE-HOST-SECRET"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A symlink in the workspace pointing at the secret is copied in as a symlink: it
	// points at a path that does not exist in the container.
	if err := os.Symlink(secret, filepath.Join(ws, "link")); err != nil {
		t.Fatal(err)
	}
	res := run(t, d, ws, backend.Spec{Argv: sh("cat " + secret + "; cat link; ls " + secretDir)}, backend.Limits{})
	if strings.Contains(string(res.Stdout), "THE-HOST-SECRET") || strings.Contains(string(res.Stdout), "secret.txt") {
		t.Errorf("read the host's secret: %q", res.Stdout)
	}
}

func TestEscapeForkBomb(t *testing.T) {
	t.Parallel()
	d, ws := sandbox(t, nil)
	// The bomb runs in the background while the command itself spins until the timeout.
	res := run(t, d, ws, backend.Spec{Argv: sh(`b() { b | b & }; b; while :; do :; done`), Timeout: 5 * time.Second}, backend.Limits{Pids: 64})
	// Killed at the timeout — or, when the bomb took every pid first, the command's own
	// shell fails a fork and exits 2; either way it does not succeed.
	if res.ExitCode == 0 {
		t.Errorf("fork bomb run: exit %d timedOut %v, want it killed at the timeout or failing to fork", res.ExitCode, res.TimedOut)
	}
	// The image's shell is dash ("Cannot fork"); busybox's says "can't fork".
	if !strings.Contains(string(res.Stderr), "Cannot fork") && !strings.Contains(string(res.Stderr), "can't fork") {
		t.Errorf("the pids limit never stopped a fork: stderr %q", res.Stderr)
	}
	t.Logf("fork bomb: exit %d signal %q timedOut %v warnings %q", res.ExitCode, res.Signal, res.TimedOut, res.Warnings)
	// The sandbox is usable again: nothing of the bomb is left to hold the pids. Every
	// process but the container's init (pid 1) and its keeper (a sleep under init) must be
	// the listing shell or its children (a forked child shows as "sh" until it execs, so
	// counting names would race).
	res = run(t, d, ws, backend.Spec{Argv: sh(`echo $$; ps -o pid,ppid,comm`)}, backend.Limits{Pids: 64})
	if res.ExitCode != 0 {
		t.Fatalf("the sandbox is broken after the fork bomb: exit %d stderr %q", res.ExitCode, res.Stderr)
	}
	lines := strings.Split(strings.TrimSpace(string(res.Stdout)), "\n")
	self := strings.TrimSpace(lines[0])
	var left []string
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 3 || f[0] == "PID" || f[0] == "1" || f[0] == self || f[1] == self ||
			(f[1] == "1" && f[2] == "sleep") {
			continue
		}
		left = append(left, l)
	}
	if len(left) > 0 {
		t.Errorf("processes left after the fork bomb: %q", left)
	}
}

func TestEscapeMemoryHog(t *testing.T) {
	t.Parallel()
	d, ws := sandbox(t, nil)
	// The shell holds 300 MB in one variable; the limit is 64 MiB.
	res := run(t, d, ws, backend.Spec{Argv: sh(`x=$(head -c 300000000 /dev/zero | tr '\0' a); echo ${#x}`), Timeout: time.Minute}, backend.Limits{MemoryBytes: 64 << 20})
	if res.ExitCode == 0 || strings.Contains(string(res.Stdout), "300000000") {
		t.Fatalf("allocated 300 MB under a 64 MiB limit: %+v", res)
	}
	if res.TimedOut {
		t.Errorf("the hog was not killed for its memory but at the timeout")
	}
	t.Logf("memory hog: exit %d signal %q oomKilled %v", res.ExitCode, res.Signal, res.OOMKilled)
}

func TestEscapeEndlessLoopKilledWithItsTree(t *testing.T) {
	t.Parallel()
	d, ws := sandbox(t, nil)
	// A grandchild in its own session ignores the process group; it must die too.
	res, err := d.Run(context.Background(), ws, backend.Spec{
		Argv:    sh(`setsid sh -c 'trap "" TERM; while :; do sleep 1; done' & while :; do :; done`),
		Timeout: 2 * time.Second,
	}, backend.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.Signal != "killed" {
		t.Errorf("timedOut %v signal %q exit %d, want a kill at the timeout", res.TimedOut, res.Signal, res.ExitCode)
	}
	b, _ := d.box(ws)
	b.mu.Lock()
	out, err := d.execOutput(context.Background(), b.id, []string{"ps", "-o", "pid,user,comm"})
	b.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	// Only the container's own processes (init and its keeper, not the sandbox user's) and
	// ps itself may be there.
	for line := range strings.Lines(string(out)) {
		f := strings.Fields(line)
		if len(f) == 3 && (f[1] == "nobody" || f[1] == "65534") && f[2] != "ps" {
			t.Errorf("process left after the timeout: %s", line)
		}
	}
}
