package backend

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
)

// The tests in this file try to leave a bwrap sandbox; each must fail to. Each also has a
// control run (with the door opened, or on the local backend) that succeeds, so a test
// that cannot observe an escape cannot pass by accident.

func cgroupWarning(res *Result, ctrl string) (string, bool) {
	for _, w := range res.Warnings {
		if strings.HasPrefix(w, ctrl+" limit not enforced") {
			return w, true
		}
	}
	return "", false
}

func TestBwrapBlocksNetwork(t *testing.T) {
	t.Parallel()
	b := newBwrap(t)
	ws := workspace(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
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
	for _, addr := range []string{ln.Addr().String(), "1.1.1.1:53"} {
		res, err := b.Run(context.Background(), ws, Spec{Argv: []string{"./helper", "dial", addr}, Timeout: 30 * time.Second}, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		if res.ExitCode == 0 || !strings.Contains(string(res.Stdout), "dial failed") {
			t.Errorf("dial %s from the sandbox: exit %d %q, want a failure", addr, res.ExitCode, res.Stdout)
		}
	}
	// Network opens a proxy to the allowlist, not the host's network: the direct dial fails
	// even to an allowed address.
	res, err := b.Run(context.Background(), ws, Spec{Argv: []string{"./helper", "dial", ln.Addr().String()}, Network: true,
		Allow: []string{"127.0.0.2:1"}}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || !strings.Contains(string(res.Stdout), "dial failed") {
		t.Errorf("dial %s from a Network sandbox: exit %d %q %q, want a failure", ln.Addr(), res.ExitCode, res.Stdout, res.Stderr)
	}
	if n := accepted.Load(); n != 0 {
		t.Fatalf("the host listener accepted %d connections from the sandbox", n)
	}
	// Control: on the local backend the same dial reaches the host's loopback.
	res, err = newLocal(t).Run(context.Background(), ws, Spec{Argv: []string{"./helper", "dial", ln.Addr().String()}}, Limits{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("control dial on local: %v %+v", err, res)
	}
	waitUntil(t, "the control connection", func() bool { return accepted.Load() == 1 })
}

func TestBwrapConfinesWrites(t *testing.T) {
	t.Parallel()
	b := newBwrap(t)
	ws := workspace(t)
	hostDir := t.TempDir()
	hostFile := filepath.Join(hostDir, "escaped")
	etcFile := fmt.Sprintf("/etc/thefold-escape-%d", time.Now().UnixNano())
	usrFile := fmt.Sprintf("/usr/thefold-escape-%d", time.Now().UnixNano())
	// The host temp dir does not exist in the sandbox; /tmp is the sandbox's own tmpfs.
	script := `echo x > "$1"; echo etc=$?; echo x > "$2"; echo usr=$?; echo x > /top; echo top=$?; mkdir -p "$(dirname "$3")" && echo x > "$3"; echo host=$?; echo x > inside; echo ws=$?`
	res, err := b.Run(context.Background(), ws, Spec{Argv: []string{"sh", "-c", script, "sh", etcFile, usrFile, hostFile}}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	out := string(res.Stdout)
	for _, want := range []string{"etc=", "usr=", "top="} {
		if strings.Contains(out, want+"0\n") {
			t.Errorf("sandbox wrote under %s: %q", want, out)
		}
	}
	for _, p := range []string{etcFile, usrFile, hostFile} {
		if _, err := os.Stat(p); err == nil {
			os.Remove(p)
			t.Errorf("%s was created on the host", p)
		}
	}
	// Control: the workspace is writable, and the write lands on the host.
	if !strings.Contains(out, "ws=0") {
		t.Errorf("workspace write failed: %q %q", out, res.Stderr)
	}
	if _, err := os.Stat(filepath.Join(ws, "inside")); err != nil {
		t.Errorf("workspace write not visible on the host: %v", err)
	}
}

func TestBwrapHidesHostFiles(t *testing.T) {
	t.Parallel()
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("the host's secret"), 0o644); err != nil {
		t.Fatal(err)
	}
	argv := []string{"sh", "-c", `cat "$1"; cat /etc/passwd; ls /root`, "sh", secret}
	b := newBwrap(t)
	res, err := b.Run(context.Background(), workspace(t), Spec{Argv: argv}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || strings.Contains(string(res.Stdout), "secret") || strings.Contains(string(res.Stdout), "root:") {
		t.Fatalf("host files readable in the sandbox: exit %d %q", res.ExitCode, res.Stdout)
	}
	// Control: the same command on the local backend reads the file.
	res, err = newLocal(t).Run(context.Background(), workspace(t), Spec{Argv: argv}, Limits{})
	if err != nil || !strings.Contains(string(res.Stdout), "the host's secret") {
		t.Fatalf("control on local: %v %+v", err, res)
	}
}

func TestBwrapRunsUnprivileged(t *testing.T) {
	t.Parallel()
	b := newBwrap(t)
	res, err := b.Run(context.Background(), workspace(t), Spec{Argv: []string{"sh", "-c", "id -u; grep CapEff /proc/self/status"}}, Limits{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	if want := "65534\nCapEff:\t0000000000000000\n"; string(res.Stdout) != want {
		t.Fatalf("got %q, want %q", res.Stdout, want)
	}
}

func TestBwrapBoundsForkBomb(t *testing.T) {
	t.Parallel()
	b := newBwrap(t)
	const pids = 48
	res, err := b.Run(context.Background(), workspace(t), Spec{Argv: []string{"./helper", "forkbomb"}, Timeout: time.Minute}, Limits{Pids: pids})
	if err != nil {
		t.Fatal(err)
	}
	if w, ok := cgroupWarning(res, "pids"); ok {
		t.Skipf("no pids cgroup on this machine (RLIMIT_NPROC does not bind root): %s", w)
	}
	var n int
	if _, err := fmt.Sscanf(string(res.Stdout), "fork refused after %d children", &n); err != nil || res.ExitCode == 0 {
		t.Fatalf("fork bomb not refused: exit %d %q %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	if n >= pids {
		t.Fatalf("%d children started under a limit of %d tasks", n, pids)
	}
}

func TestBwrapKillsMemoryHog(t *testing.T) {
	t.Parallel()
	b := newBwrap(t)
	ws := workspace(t)
	l := Limits{MemoryBytes: 128 << 20}
	res, err := b.Run(context.Background(), ws, Spec{Argv: []string{"./helper", "hog", fmt.Sprint(1 << 30)}, Timeout: time.Minute}, l)
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode == 0 || strings.Contains(string(res.Stdout), "survived") {
		t.Fatalf("1 GiB allocated under a 128 MiB limit: exit %d %q", res.ExitCode, res.Stdout)
	}
	if _, noCg := cgroupWarning(res, "memory"); !noCg && !res.OOMKilled {
		t.Errorf("memory cgroup in place but OOMKilled not reported: %+v", res)
	}
	// Control: a small allocation under the same limit works.
	res, err = b.Run(context.Background(), ws, Spec{Argv: []string{"./helper", "hog", fmt.Sprint(16 << 20)}}, l)
	if err != nil || res.ExitCode != 0 || res.OOMKilled {
		t.Fatalf("16 MiB under 128 MiB: %v %+v", err, res)
	}
}
