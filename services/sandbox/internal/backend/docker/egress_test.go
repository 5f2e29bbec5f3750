package docker

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/services/sandbox/internal/backend"
)

// egressProbe connects to each target directly and fetches each url through the proxy the
// environment names, printing one line per attempt.
const egressProbe = `import os, socket, sys, urllib.request
for t in sys.argv[1].split(","):
    if not t:
        continue
    h, p = t.rsplit(":", 1)
    try:
        socket.create_connection((h, int(p)), timeout=3).close()
        print("DIRECT-CONNECTED", t)
    except Exception as e:
        print("direct-blocked", t, e)
for u in sys.argv[2].split(","):
    if not u:
        continue
    try:
        body = urllib.request.urlopen(u, timeout=5).read().decode()
        print("FETCHED", u, body)
    except Exception as e:
        print("fetch-blocked", u, e)
print("proxy", os.environ.get("HTTP_PROXY", ""))
`

// A network run in a container reaches its allowed package source and nothing else: not
// another port on the host's loopback, not PostgreSQL, not another host, whether directly
// or through the proxy; and the proxy is gone when the run ends.
func TestNetworkRunReachesOnlyTheAllowedSource(t *testing.T) {
	t.Parallel()
	d, ws := sandbox(t, map[string]string{"probe.py": egressProbe})
	serve := func(body string) (string, func()) {
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, body) })}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		go srv.Serve(ln)
		return ln.Addr().String(), func() { srv.Close() }
	}
	allowed, stop1 := serve("module-source")
	defer stop1()
	other, stop2 := serve("secret-service")
	defer stop2()

	spec := func(network bool, direct, urls []string) backend.Spec {
		s := backend.Spec{Argv: []string{"python3", "probe.py", strings.Join(direct, ","), strings.Join(urls, ",")}, Timeout: time.Minute}
		if network {
			s.Network, s.Allow = true, []string{"http://" + allowed}
		}
		return s
	}
	res := run(t, d, ws, spec(true, []string{allowed, other, "127.0.0.1:5432", "1.1.1.1:53"},
		[]string{"http://" + allowed + "/m.info", "http://" + other + "/", "http://example.com/"}), backend.Limits{})
	out := string(res.Stdout) + string(res.Stderr)
	t.Logf("network run:\n%s", out)
	for _, want := range []string{"DIRECT-CONNECTED " + allowed, "FETCHED http://" + allowed + "/m.info module-source"} {
		if !strings.Contains(out, want) {
			t.Errorf("the allowed source was not reached (%q missing)", want)
		}
	}
	for _, bad := range []string{"DIRECT-CONNECTED " + other, "DIRECT-CONNECTED 127.0.0.1:5432", "DIRECT-CONNECTED 1.1.1.1", "secret-service", "FETCHED http://example.com"} {
		if strings.Contains(out, bad) {
			t.Errorf("the network run got through: %q", bad)
		}
	}
	proxy := ""
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(line, "proxy http://"); ok {
			proxy = strings.TrimSpace(v)
		}
	}
	if proxy == "" {
		t.Fatalf("the run was not pointed at a proxy:\n%s", out)
	}
	// After the run, nothing listens in the container any more, and a run without network
	// is not pointed at a proxy.
	res = run(t, d, ws, spec(false, []string{proxy, allowed}, nil), backend.Limits{})
	out = string(res.Stdout)
	if strings.Contains(out, "DIRECT-CONNECTED") || !strings.Contains(out, "proxy \n") {
		t.Errorf("after the network run:\n%s", out)
	}
}
