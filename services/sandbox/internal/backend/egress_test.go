package backend

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/errs"

	"github.com/thefold/thefold/services/sandbox/internal/sandboxtest"
)

// The tests in this file run Network commands in a bwrap sandbox, with a package source
// (allowed) and other services (not allowed) listening on the host's loopback.

var (
	netprobeOnce sync.Once
	netprobeBin  string
	netprobeErr  error
)

// netprobe builds testdata/netprobe once (static, no race detector) and copies it into ws.
func netprobe(t *testing.T, ws string) {
	t.Helper()
	netprobeOnce.Do(func() {
		dir, err := os.MkdirTemp("", "backend-netprobe-")
		if err != nil {
			netprobeErr = err
			return
		}
		netprobeBin = filepath.Join(dir, "netprobe")
		cmd := exec.Command("go", "build", "-o", netprobeBin, "./testdata/netprobe")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			netprobeErr = fmt.Errorf("building netprobe: %v\n%s", err, out)
		}
	})
	if netprobeErr != nil {
		t.Fatal(netprobeErr)
	}
	b, err := os.ReadFile(netprobeBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(ws, "netprobe"), b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// waitUntil polls cond until it holds or a few seconds pass.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// hitCounter is an HTTP server on the host's loopback that counts its requests.
func hitCounter(t *testing.T, body string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		fmt.Fprint(w, body)
	}))
	t.Cleanup(s.Close)
	return s, &n
}

// postgres is an address standing for the host's database: 127.0.0.1:5432 when something
// listens there, else a listener of this test that counts connections.
func postgres(t *testing.T) (string, func() int32) {
	t.Helper()
	if c, err := net.DialTimeout("tcp", "127.0.0.1:5432", time.Second); err == nil {
		c.Close()
		return "127.0.0.1:5432", func() int32 { return 0 }
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	var n atomic.Int32
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			c.Close()
		}
	}()
	return ln.Addr().String(), n.Load
}

func TestBwrapEgress(t *testing.T) {
	t.Parallel()
	b := newBwrap(t)
	ws := workspace(t)
	netprobe(t, ws)
	source, sourceHits := hitCounter(t, "from the package source")
	other, otherHits := hitCounter(t, "from another service")
	pg, pgHits := postgres(t)
	sourceAddr := source.Listener.Addr().String()
	_, curlErr := os.Stat("/usr/bin/curl")

	type probe struct {
		name string
		argv []string
		ok   bool   // exit 0
		want string // in stdout+stderr
	}
	cases := []probe{
		// Go dials a loopback package source directly, without its proxy: the forwarder listens
		// on that address inside the namespace and tunnels through the proxy.
		{"allowed source, direct", []string{"./netprobe", "get", source.URL + "/mod/@v/list"}, true, "status 200 from the package source"},
		{"allowed source, through the proxy", []string{"./netprobe", "pget", source.URL + "/x"}, true, "status 200 from the package source"},
		{"allowed source, CONNECT", []string{"./netprobe", "connect", sourceAddr}, true, "status 200"},
		{"database, direct", []string{"./netprobe", "dial", pg}, false, "connection refused"},
		{"database, CONNECT", []string{"./netprobe", "connect", pg}, false, "status 403"},
		{"database, through the proxy", []string{"./netprobe", "pget", "http://" + pg + "/"}, false, "status 403"},
		{"other service, direct", []string{"./netprobe", "dial", other.Listener.Addr().String()}, false, "connection refused"},
		{"other service, through the proxy", []string{"./netprobe", "pget", other.URL + "/"}, false, "status 403"},
		{"other service, as localhost", []string{"./netprobe", "pget", strings.Replace(other.URL, "127.0.0.1", "localhost", 1)}, false, "status 403"},
		{"other host, through the proxy", []string{"./netprobe", "get", "http://example.com/"}, false, "status 403"},
		{"other host, https", []string{"./netprobe", "get", "https://example.com/"}, false, "Forbidden"},
		{"other host, direct", []string{"./netprobe", "dial", "1.1.1.1:443"}, false, "network is unreachable"},
		// No interface but loopback, no route, no resolver.
		{"interfaces", []string{"./netprobe", "ifaces"}, true, "lo [127.0.0.1/8 ::1/128]\n"},
		{"routes", []string{"sh", "-c", `tail -n +2 /proc/net/route | wc -l; grep -v ' lo$' /proc/net/ipv6_route | wc -l; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '`}, true, "0\n0\nlo\n"},
		{"no resolver", []string{"sh", "-c", "test -e /etc/resolv.conf; echo $?; getent hosts localhost"}, true, "1\n::1             localhost"},
	}
	if curlErr == nil {
		cases = append(cases,
			probe{"curl, allowed", []string{"curl", "-sSf", source.URL + "/curl"}, true, "from the package source"},
			probe{"curl, other service", []string{"curl", "-sS", other.URL + "/"}, true, "refused: not on the sandbox's egress allowlist"},
		)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			res, err := b.Run(context.Background(), ws, Spec{Argv: c.argv, Network: true, Allow: []string{source.URL}, Timeout: time.Minute}, Limits{})
			if err != nil {
				t.Fatal(err)
			}
			out := string(res.Stdout) + string(res.Stderr)
			if (res.ExitCode == 0) != c.ok || !strings.Contains(out, c.want) {
				t.Fatalf("exit %d, output %q; want ok=%v and %q", res.ExitCode, out, c.ok, c.want)
			}
		})
	}
	t.Cleanup(func() {
		if otherHits.Load() != 0 || pgHits() != 0 {
			t.Errorf("a service off the allowlist was reached: %d requests, %d connections", otherHits.Load(), pgHits())
		}
		if sourceHits.Load() == 0 {
			t.Errorf("the package source was never reached")
		}
	})
}

func TestBwrapEgressProcess(t *testing.T) {
	t.Parallel()
	b := newBwrap(t)
	ws := workspace(t)
	// The forwarder's command is the user's: its exit code, its stdio, its signal.
	res, err := b.Run(context.Background(), ws, Spec{Argv: []string{"sh", "-c", `read x; echo "in: $x"; echo "$HTTPS_PROXY|$NO_PROXY" >&2; exit 7`},
		Network: true, Stdin: []byte("stdin line\n")}, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 7 || string(res.Stdout) != "in: stdin line\n" || !strings.HasPrefix(string(res.Stderr), "http://127.0.0.1:") ||
		!strings.HasSuffix(string(res.Stderr), "|\n") {
		t.Fatalf("exit %d stdout %q stderr %q", res.ExitCode, res.Stdout, res.Stderr)
	}
	res, err = b.Run(context.Background(), ws, Spec{Argv: []string{"sh", "-c", "kill -KILL $$"}, Network: true}, Limits{})
	if err != nil || res.ExitCode != 128+9 {
		t.Fatalf("killed command: %v %+v", err, res)
	}
	res, err = b.Run(context.Background(), ws, Spec{Argv: []string{"thefold-no-such-program"}, Network: true}, Limits{})
	if err != nil || res.ExitCode != 127 {
		t.Fatalf("missing program: %v %+v", err, res)
	}
	// A timeout still ends everything.
	start := time.Now()
	res, err = b.Run(context.Background(), ws, Spec{Argv: []string{"sleep", "60"}, Network: true, Timeout: 500 * time.Millisecond}, Limits{})
	if err != nil || !res.TimedOut || time.Since(start) > 20*time.Second {
		t.Fatalf("timeout: %v %+v after %s", err, res, time.Since(start))
	}
	// Bad allowlists are the caller's mistake.
	for _, s := range []Spec{{Argv: []string{"true"}, Allow: []string{"proxy.golang.org:443"}}, {Argv: []string{"true"}, Network: true, Allow: []string{"no-port"}}} {
		if _, err := b.Run(context.Background(), ws, s, Limits{}); !errors.Is(err, errs.ErrInvalid) {
			t.Errorf("%+v: %v, want ErrInvalid", s, err)
		}
	}
	// The proxy's state goes with the run.
	waitUntil(t, "the egress directories to go", func() bool {
		m, _ := filepath.Glob(filepath.Join(b.st.root, "egress-*"))
		return len(m) == 0
	})
}

// A module download as the go command makes it: a fake GOPROXY on the host's loopback,
// allowed; the module lands in the workspace's module cache and then builds offline.
func TestBwrapEgressGoModDownload(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain")
	}
	// The default configuration: the host's module cache is there, read-only, and the
	// download goes into the workspace's own.
	b, err := NewBwrap(WithLogger(quiet()), WithStateDir(t.TempDir()))
	if err != nil {
		t.Skipf("bwrap cannot run on this machine: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	var zipHits atomic.Int32
	goproxy := httptest.NewServer(sandboxtest.ModuleProxy(t, &zipHits))
	t.Cleanup(goproxy.Close)
	ws := t.TempDir()
	files := map[string]string{
		"go.mod":  "module example.com/app\n\ngo 1.22\n\nrequire example.test/dep v1.0.0\n",
		"main.go": "package main\n\nimport \"example.test/dep\"\n\nfunc main() { println(dep.Hello()) }\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	env := map[string]string{"GOPROXY": goproxy.URL, "GOSUMDB": "off", "GOFLAGS": "-mod=mod"}
	res, err := b.Run(context.Background(), ws, Spec{Argv: []string{"go", "mod", "download", "-x"}, Env: env, Network: true,
		Allow: []string{goproxy.URL}, Timeout: 2 * time.Minute}, Limits{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("go mod download: %v exit %d\n%s%s", err, res.ExitCode, res.Stdout, res.Stderr)
	}
	if zipHits.Load() != 1 {
		t.Fatalf("the module zip was fetched %d times\n%s", zipHits.Load(), res.Stderr)
	}
	// Offline now (GOPROXY=off), from the module cache the download filled.
	res, err = b.Run(context.Background(), ws, Spec{Argv: []string{"go", "run", "."}, Env: map[string]string{"GOFLAGS": "-mod=mod", "GOSUMDB": "off"},
		Timeout: 2 * time.Minute}, Limits{})
	if err != nil || res.ExitCode != 0 || string(res.Stderr) != sandboxtest.ModuleOutput+"\n" {
		t.Fatalf("go run: %v %+v\n%s", err, res, res.Stderr)
	}
}

// The local backend cannot block the network, but it points HTTP clients at the same proxy.
func TestLocalEgressProxy(t *testing.T) {
	t.Parallel()
	b := newLocal(t)
	ws := workspace(t)
	netprobe(t, ws)
	source, _ := hitCounter(t, "from the package source")
	other, otherHits := hitCounter(t, "from another service")
	run := func(u string) *Result {
		t.Helper()
		res, err := b.Run(context.Background(), ws, Spec{Argv: []string{"./netprobe", "pget", u}, Network: true, Allow: []string{source.URL}}, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	if res := run(source.URL + "/"); res.ExitCode != 0 || !strings.Contains(string(res.Stdout), "from the package source") {
		t.Fatalf("allowed: %+v", res)
	}
	res := run(other.URL + "/")
	if res.ExitCode == 0 || !strings.Contains(string(res.Stdout), "status 403") || otherHits.Load() != 0 {
		t.Fatalf("not allowed: %q, %d hits", res.Stdout, otherHits.Load())
	}
	if !slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.HasPrefix(w, "network not blocked") }) {
		t.Fatalf("no warning that the network is open: %q", res.Warnings)
	}
}

// No command line the bwrap backend builds shares the host's network namespace.
func TestBwrapNeverSharesNet(t *testing.T) {
	t.Parallel()
	b := newBwrap(t)
	ws := t.TempDir()
	eg, err := startEgress(b.st.root, []string{"https://proxy.golang.org", "127.0.0.1:3000"}, quiet())
	if err != nil {
		t.Fatal(err)
	}
	defer eg.close()
	for _, e := range []*egressRun{nil, eg} {
		argv := b.args(ws, "", t.TempDir(), Spec{Argv: []string{"true"}, Network: e != nil}, e, "", "")
		if !slices.Contains(argv, "--unshare-all") || slices.Contains(argv, "--share-net") {
			t.Errorf("network namespace not unshared: %q", argv)
		}
		if e != nil && !slices.Contains(argv, "127.0.0.1:3000") {
			t.Errorf("the loopback source is not exposed: %q", argv)
		}
	}
}
