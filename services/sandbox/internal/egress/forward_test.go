package egress

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// childGetEnv makes the test binary, started as the forwarder's command, GET that URL
// through the proxy the forwarder announced in HTTP_PROXY (even for a loopback address).
const childGetEnv = "EGRESS_TEST_GET"

func TestMain(m *testing.M) {
	MaybeRunForwarder()
	if u := os.Getenv(childGetEnv); u != "" {
		os.Exit(childGet(u))
	}
	os.Exit(m.Run())
}

func childGet(u string) int {
	pu, err := url.Parse(os.Getenv("HTTP_PROXY"))
	if err != nil || pu.Host == "" {
		fmt.Println("no HTTP_PROXY:", err)
		return 2
	}
	c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}}
	resp, err := c.Get(u)
	if err != nil {
		fmt.Println("get:", err)
		return 2
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	fmt.Printf("%d %s", resp.StatusCode, b)
	if resp.StatusCode != http.StatusOK {
		return 1
	}
	return 0
}

// forward runs argv under the forwarder (this test binary) on the host, with no network
// namespace: what is tested here is the process handling and the relay.
func forward(t *testing.T, sock string, env []string, stdin string, argv ...string) (code int, stdout, stderr string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], ForwarderArgv(ForwardArg, sock, nil, argv)[1:]...)
	cmd.Env = append([]string{"PATH=/usr/bin:/bin"}, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), o.String(), e.String()
}

func TestForwarderProcess(t *testing.T) {
	t.Parallel()
	_, sock, _ := startProxy(t, Config{})
	cases := []struct {
		name           string
		argv           []string
		stdin          string
		code           int
		stdout, stderr string
	}{
		{"exit code and stdio", []string{"sh", "-c", `read x; echo "got $x"; echo oops >&2; exit 7`}, "hi\n", 7, "got hi\n", "oops\n"},
		{"success", []string{"true"}, "", 0, "", ""},
		{"killed by a signal", []string{"sh", "-c", "kill -TERM $$"}, "", 128 + 15, "", ""},
		{"not found", []string{"thefold-no-such-program"}, "", 127, "", "thefold-no-such-program: exec: \"thefold-no-such-program\": executable file not found in $PATH\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			code, stdout, stderr := forward(t, sock, nil, c.stdin, c.argv...)
			if code != c.code || stdout != c.stdout || stderr != c.stderr {
				t.Fatalf("exit %d stdout %q stderr %q; want %d %q %q", code, stdout, stderr, c.code, c.stdout, c.stderr)
			}
		})
	}
	// Bad invocations are the forwarder's own failure.
	for _, args := range [][]string{{ForwardArg, "--", "true"}, {ForwardArg, "--socket", sock}, {ForwardArg, "--bogus", "x", "--", "true"}} {
		cmd := exec.Command(os.Args[0], args...)
		out, _ := cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != forwarderFailed || !bytes.Contains(out, []byte("thefold egress forwarder")) {
			t.Errorf("%q: exit %d %q, want %d", args, cmd.ProcessState.ExitCode(), out, forwarderFailed)
		}
	}
}

func TestForwarderEnv(t *testing.T) {
	t.Parallel()
	_, sock, _ := startProxy(t, Config{})
	code, stdout, stderr := forward(t, sock, []string{"KEEP=1", "ALL_PROXY=socks5://elsewhere:1080", "NO_PROXY=*", "no_proxy=*",
		"HTTPS_PROXY=http://elsewhere:3128", "npm_config_noproxy=*"}, "", "env")
	if code != 0 {
		t.Fatalf("env: exit %d %s", code, stderr)
	}
	env := strings.Split(strings.TrimSpace(stdout), "\n")
	proxy := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "HTTP_PROXY="); ok {
			proxy = v
		}
	}
	if !strings.HasPrefix(proxy, "http://127.0.0.1:") {
		t.Fatalf("HTTP_PROXY %q:\n%s", proxy, stdout)
	}
	for _, want := range []string{"KEEP=1", "NO_PROXY=", "no_proxy=", "HTTPS_PROXY=" + proxy, "http_proxy=" + proxy, "https_proxy=" + proxy,
		"npm_config_proxy=" + proxy, "npm_config_https_proxy=" + proxy} {
		if !slices.Contains(env, want) {
			t.Errorf("env lacks %s:\n%s", want, stdout)
		}
	}
	for _, gone := range []string{"ALL_PROXY", "elsewhere", "npm_config_noproxy", "=*"} {
		if strings.Contains(stdout, gone) {
			t.Errorf("env holds %s:\n%s", gone, stdout)
		}
	}
}

func TestForwarderRelaysToProxy(t *testing.T) {
	t.Parallel()
	allowed, _ := counting(t, false)
	other, otherHits := counting(t, false)
	list, _ := ParseAllowlist([]string{allowed.URL})
	_, sock, _ := startProxy(t, Config{Allow: list})
	code, stdout, stderr := forward(t, sock, []string{childGetEnv + "=" + allowed.URL + "/ok"}, "", os.Args[0])
	if code != 0 || stdout != "200 hello from "+allowed.Listener.Addr().String()+"/ok" {
		t.Fatalf("allowed: exit %d %q %q", code, stdout, stderr)
	}
	code, stdout, _ = forward(t, sock, []string{childGetEnv + "=" + other.URL + "/"}, "", os.Args[0])
	if code != 1 || !strings.HasPrefix(stdout, "403 ") || otherHits.Load() != 0 {
		t.Fatalf("not allowed: exit %d %q, %d hits", code, stdout, otherHits.Load())
	}
}
