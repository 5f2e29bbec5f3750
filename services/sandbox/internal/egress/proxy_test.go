package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestParseAllowlist(t *testing.T) {
	t.Parallel()
	a, err := ParseAllowlist([]string{"https://Proxy.Golang.org/", "http://127.0.0.1:3000/simple", "registry.npmjs.org:443",
		"[0::1]:8080", "localhost:4000", "mirror.example.:8443"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"127.0.0.1:3000", "[::1]:8080", "localhost:4000", "mirror.example:8443", "proxy.golang.org:443", "registry.npmjs.org:443"}
	if got := a.Entries(); !slices.Equal(got, want) {
		t.Fatalf("entries %q, want %q", got, want)
	}
	if got, want := a.Loopback(), []string{"127.0.0.1:3000", "[::1]:8080", "localhost:4000"}; !slices.Equal(got, want) {
		t.Fatalf("loopback %q, want %q", got, want)
	}
	cases := []struct {
		target string
		want   bool
	}{
		{"proxy.golang.org:443", true},
		{"PROXY.golang.ORG:443", true},
		{"proxy.golang.org.:443", true},
		{"proxy.golang.org:80", false}, // the port is part of the entry
		{"golang.org:443", false},      // no suffix match
		{"evil.proxy.golang.org:443", false},
		{"proxy.golang.org.evil.com:443", false},
		{"127.0.0.1:3000", true},
		{"127.0.0.1:3001", false},
		{"[::1]:8080", true},
		{"[::ffff:127.0.0.1]:3000", true}, // the same address
		{"mirror.example:8443", true},
		{"proxy.golang.org", false}, // no port: not guessed
		{"", false},
	}
	for _, c := range cases {
		if got := a.Allows(c.target); got != c.want {
			t.Errorf("Allows(%q) = %v, want %v", c.target, got, c.want)
		}
	}
	for _, bad := range []string{"proxy.golang.org", "ftp://mirror.example/", "host:0", "host:65536", "host:http", ":443", "a b:80", "[fe80::1%eth0]:80"} {
		if _, err := ParseAllowlist([]string{bad}); err == nil {
			t.Errorf("ParseAllowlist(%q) accepted", bad)
		}
	}
	var none *Allowlist
	if none.Allows("proxy.golang.org:443") {
		t.Error("a nil allowlist allows")
	}
}

func TestPublicAddr(t *testing.T) {
	t.Parallel()
	cases := []struct {
		addr string
		want bool
	}{
		{"151.101.1.1", true},
		{"2a04:4e42::1", true},
		{"127.0.0.1", false},
		{"127.8.9.10", false},
		{"::1", false},
		{"::ffff:127.0.0.1", false},
		{"10.1.2.3", false},
		{"172.16.0.1", false},
		{"192.168.1.1", false},
		{"169.254.169.254", false}, // cloud metadata
		{"fe80::1", false},
		{"fd00::1", false},
		{"0.0.0.0", false},
		{"0.1.2.3", false},
		{"::", false},
		{"100.100.100.200", false},
		{"224.0.0.1", false},
		{"64:ff9b::7f00:1", false}, // NAT64 of 127.0.0.1
		{"64:ff9b::9765:101", true},
	}
	for _, c := range cases {
		if got := publicAddr(netip.MustParseAddr(c.addr)); got != c.want {
			t.Errorf("publicAddr(%s) = %v, want %v", c.addr, got, c.want)
		}
	}
}

// syncBuffer is a log destination safe for the proxy's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startProxy serves a proxy with cfg on a unix socket; the client it returns sends every
// request through it.
func startProxy(t *testing.T, cfg Config) (*Proxy, string, *http.Client) {
	t.Helper()
	dir, err := os.MkdirTemp("", "egress-") // short: a socket path is at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "proxy.sock")
	p, err := Listen(sock, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	proxyURL, _ := url.Parse("http://egress.invalid")
	tr := &http.Transport{
		Proxy: http.ProxyURL(proxyURL),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
		TLSClientConfig:   &tls.Config{InsecureSkipVerify: true},
		DisableKeepAlives: true,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return p, sock, &http.Client{Transport: tr, Timeout: 10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}

// counting is an upstream that counts its requests and answers with the Host it saw.
func counting(t *testing.T, tlsToo bool) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		if r.URL.Path == "/redirect" {
			http.Redirect(w, r, "http://elsewhere.example/", http.StatusFound)
			return
		}
		fmt.Fprintf(w, "hello from %s%s", r.Host, r.URL.Path)
	})
	var s *httptest.Server
	if tlsToo {
		s = httptest.NewTLSServer(h)
	} else {
		s = httptest.NewServer(h)
	}
	t.Cleanup(s.Close)
	return s, &n
}

func get(t *testing.T, c *http.Client, u string) (int, string) {
	t.Helper()
	resp, err := c.Get(u)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestProxyAllowlist(t *testing.T) {
	t.Parallel()
	allowed, allowedHits := counting(t, false)
	other, otherHits := counting(t, false)
	secure, secureHits := counting(t, true)
	allowedAddr, secureAddr := allowed.Listener.Addr().String(), secure.Listener.Addr().String()
	_, allowedPort, _ := net.SplitHostPort(allowedAddr)
	list, err := ParseAllowlist([]string{"http://" + allowedAddr, secureAddr,
		"sneaky.example:" + allowedPort, "mixed.example:" + allowedPort, "public.example:" + allowedPort})
	if err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	var resolved atomic.Int32
	resolve := func(_ context.Context, host string) ([]netip.Addr, error) {
		resolved.Add(1)
		switch host {
		case "sneaky.example": // a name the sandbox's author pointed at the host's loopback
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		case "mixed.example":
			return []netip.Addr{netip.MustParseAddr("151.101.1.1"), netip.MustParseAddr("10.0.0.7")}, nil
		case "public.example":
			return []netip.Addr{netip.MustParseAddr("192.0.2.1")}, nil // TEST-NET: public, unreachable
		}
		return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
	}
	_, sock, c := startProxy(t, Config{Allow: list, Resolve: resolve, DialTimeout: 500 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logs, nil))})

	// Plain http to the allowed source, with the Host header it was asked for.
	code, body := get(t, c, "http://"+allowedAddr+"/mod/@v/list")
	if code != 200 || body != "hello from "+allowedAddr+"/mod/@v/list" {
		t.Fatalf("allowed GET: %d %q", code, body)
	}
	// A Host header naming another site does not reach it (no fronting on a shared address).
	raw, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	fmt.Fprintf(raw, "GET http://%s/x HTTP/1.1\r\nHost: intranet.example\r\n\r\n", allowedAddr)
	resp, err := http.ReadResponse(bufio.NewReader(raw), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "hello from "+allowedAddr+"/x" {
		t.Fatalf("GET with another Host: %d %q", resp.StatusCode, b)
	}
	// A redirect goes back to the client, which is refused when it follows it elsewhere.
	if code, _ := get(t, c, "http://"+allowedAddr+"/redirect"); code != http.StatusFound {
		t.Fatalf("redirect: %d, want 302 passed back", code)
	}
	// https through a CONNECT tunnel.
	if code, body := get(t, c, "https://"+secureAddr+"/pkg"); code != 200 || !strings.HasSuffix(body, "/pkg") {
		t.Fatalf("allowed CONNECT: %d %q", code, body)
	}
	if allowedHits.Load() != 3 || secureHits.Load() != 1 {
		t.Fatalf("upstream hits %d, %d; want 3, 1", allowedHits.Load(), secureHits.Load())
	}

	refused := []struct {
		name, url, reason string
	}{
		{"other port on the same address", other.URL + "/", "allowlist"},
		{"other host", "http://example.com/", "allowlist"},
		{"https to other host", "https://example.com/", "Forbidden"},
		{"name resolving to loopback", "http://sneaky.example:" + allowedPort + "/", "resolves to 127.0.0.1"},
		{"https to a name resolving to loopback", "https://sneaky.example:" + allowedPort + "/", "Forbidden"},
		{"name resolving to one private address among public ones", "http://mixed.example:" + allowedPort + "/", "10.0.0.7"},
		{"the proxy's own loopback, as localhost", "http://localhost:" + allowedPort + "/", "allowlist"},
	}
	for _, r := range refused {
		code, body := get(t, c, r.url)
		if (code != http.StatusForbidden && !strings.Contains(body, "Forbidden")) || !strings.Contains(body, r.reason) {
			t.Errorf("%s: %d %q, want 403 naming %q", r.name, code, body, r.reason)
		}
	}
	if n := otherHits.Load(); n != 0 {
		t.Errorf("the listener off the allowlist got %d requests", n)
	}
	if allowedHits.Load() != 3 || secureHits.Load() != 1 {
		t.Errorf("a refused request reached an allowed upstream: %d, %d", allowedHits.Load(), secureHits.Load())
	}
	// An allowed public name passes the policy; the dial then fails (502, not 403).
	if code, body := get(t, c, "http://public.example:"+allowedPort+"/"); code != http.StatusBadGateway {
		t.Errorf("public name: %d %q, want 502", code, body)
	}
	if !strings.Contains(logs.String(), "egress refused") || !strings.Contains(logs.String(), "target=sneaky.example:"+allowedPort) {
		t.Errorf("refusals not logged:\n%s", logs.String())
	}
	// A name off the list is never even resolved.
	if n := resolved.Load(); n != 4 {
		t.Errorf("%d resolutions, want 4 (sneaky twice, mixed, public)", n)
	}
}

// connect opens a CONNECT tunnel to target through the proxy at sock.
func connect(t *testing.T, sock, target string) (net.Conn, *bufio.Reader, int) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	return c, br, resp.StatusCode
}

// echo is a TCP echo server.
func echo(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	return ln.Addr().String()
}

func TestProxyTunnelLimits(t *testing.T) {
	t.Parallel()
	addr := echo(t)
	list, _ := ParseAllowlist([]string{addr})
	// The idle timeout leaves each quiet gap below (the second tunnel's wait, then 400 ms
	// between echoes) over a second of slack: at 500 ms against 300 + 150 ms, a loaded CI
	// machine let the first tunnel idle out before its first echo (2026-12-02).
	const idle = 1500 * time.Millisecond
	p, sock, _ := startProxy(t, Config{Allow: list, MaxConns: 1, DialTimeout: 300 * time.Millisecond, IdleTimeout: idle})

	// The first tunnel echoes, and carries bytes the client sent with the CONNECT.
	c1, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	fmt.Fprintf(c1, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\nearly", addr, addr)
	br1 := bufio.NewReader(c1)
	if resp, err := http.ReadResponse(br1, &http.Request{Method: http.MethodConnect}); err != nil || resp.StatusCode != 200 {
		t.Fatalf("first tunnel: %v %v", resp, err)
	}
	buf := make([]byte, 5)
	if _, err := io.ReadFull(br1, buf); err != nil || string(buf) != "early" {
		t.Fatalf("early bytes: %q %v", buf, err)
	}
	// The cap: a second tunnel waits DialTimeout for the slot, then gets 503.
	if _, _, code := connect(t, sock, addr); code != http.StatusServiceUnavailable {
		t.Fatalf("second tunnel over the cap: %d, want 503", code)
	}
	// Traffic keeps a tunnel open past the idle timeout (6 × 400 ms > 1.5 s)...
	for i := 0; i < 6; i++ {
		time.Sleep(idle * 4 / 15)
		fmt.Fprintf(c1, "%d", i)
		if _, err := io.ReadFull(br1, buf[:1]); err != nil || buf[0] != byte('0'+i) {
			t.Fatalf("echo %d: %q %v", i, buf[:1], err)
		}
	}
	// ...and silence closes it, which frees the slot.
	c1.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br1.ReadByte(); err == nil {
		t.Fatal("an idle tunnel stayed open")
	}
	c2, br2, code := connect(t, sock, addr)
	if code != http.StatusOK {
		t.Fatalf("tunnel after the first closed: %d", code)
	}
	// Close cuts the open tunnels.
	p.Close()
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := br2.ReadByte(); err == nil {
		t.Fatal("a tunnel outlived Close")
	}
}

func TestProxyRefusesNonProxyRequests(t *testing.T) {
	t.Parallel()
	_, sock, _ := startProxy(t, Config{})
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// An origin-form request: the proxy is not a web server.
	fmt.Fprint(c, "GET /etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("%v %v", resp, err)
	}
}
