package egress

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
)

// ForwardArg is the forwarder's argv[1]: a word no other command of the binary takes.
const ForwardArg = "thefold-egress-forward"

// forwarderFailed is the forwarder's exit code when it cannot run the command at all (as
// env(1) and docker run use 125 for their own failures).
const forwarderFailed = 125

var hooked atomic.Bool

// MaybeRunForwarder runs the in-sandbox forwarder and exits when this process was started
// as one (argv[1] is ForwardArg), and returns otherwise. Call it first thing in main, and
// in the TestMain of a test binary that runs network commands in a bwrap sandbox: the bwrap
// backend re-executes the running binary inside the sandbox as the forwarder.
func MaybeRunForwarder() {
	hooked.Store(true)
	if len(os.Args) > 1 && os.Args[1] == ForwardArg {
		os.Exit(runForwarder(os.Args[2:]))
	}
}

// Hooked says whether this process called MaybeRunForwarder, so its executable can serve as
// the forwarder.
func Hooked() bool { return hooked.Load() }

// ForwarderArgv is the command line running argv under the forwarder: exe is this binary
// and socket the proxy's socket, both as paths inside the sandbox; expose lists the
// allowlist's loopback entries (Allowlist.Loopback), which clients may dial directly.
func ForwarderArgv(exe, socket string, expose, argv []string) []string {
	a := []string{exe, ForwardArg, "--socket", socket}
	for _, e := range expose {
		a = append(a, "--expose", e)
	}
	return append(append(a, "--"), argv...)
}

type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(s string) error { *l = append(*l, s); return nil }

// runForwarder listens on 127.0.0.1 (and on each exposed loopback address), starts the
// command as its child with the proxy variables pointing at the listener, relays
// connections to the proxy's socket, and returns the command's exit code (128+n when signal n
// ended it) once the command has exited.
func runForwarder(args []string) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(os.Stderr, "thefold egress forwarder: "+format+"\n", a...)
		return forwarderFailed
	}
	fl := flag.NewFlagSet(ForwardArg, flag.ContinueOnError)
	fl.SetOutput(io.Discard)
	socket := fl.String("socket", "", "the proxy's unix socket")
	listen := fl.String("listen", "127.0.0.1:0", "where the proxy variables point")
	var expose listFlag
	fl.Var(&expose, "expose", "host:port to listen on and tunnel to itself through the proxy")
	if err := fl.Parse(args); err != nil {
		return fail("%v", err)
	}
	argv := fl.Args()
	if *socket == "" || len(argv) == 0 {
		return fail("usage: %s --socket path [--listen addr] [--expose host:port]... -- command [args...]", ForwardArg)
	}
	// The exposed addresses first: the proxy's own port is then picked among the free ones.
	for _, target := range expose {
		host, port, err := net.SplitHostPort(target)
		if err != nil {
			return fail("--expose %q: %v", target, err)
		}
		addrs := []string{target}
		if host == "localhost" {
			addrs = []string{net.JoinHostPort("127.0.0.1", port), net.JoinHostPort("::1", port)}
		}
		for i, a := range addrs {
			ln, err := net.Listen("tcp", a)
			if err != nil {
				if i == 0 {
					fmt.Fprintf(os.Stderr, "thefold egress forwarder: %s not reachable directly (through the proxy only): %v\n", target, err)
				}
				continue
			}
			go accept(ln, func(c net.Conn) { tunnel(c, *socket, target) })
		}
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return fail("%v", err)
	}
	go accept(ln, func(c net.Conn) { relay(c, *socket) })

	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = proxyEnv(os.Environ(), "http://"+ln.Addr().String())
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		// What a shell answers: 127 not found, 126 found but not runnable.
		fmt.Fprintf(os.Stderr, "%s: %v\n", argv[0], err)
		if errors.Is(err, exec.ErrNotFound) || errors.Is(err, fs.ErrNotExist) {
			return 127
		}
		return 126
	}
	// The command shares this process group, so a signal to the group reaches it directly;
	// one sent to the forwarder alone is passed on.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2)
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	_ = cmd.Wait()
	signal.Stop(sigs)
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		// bwrap reports a command ended by a signal the same way.
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

func accept(ln net.Listener, handle func(net.Conn)) {
	for {
		c, err := ln.Accept()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return
		}
		go handle(c)
	}
}

// relay pipes a client of the proxy variables to the proxy, which speaks HTTP to it.
func relay(c net.Conn, socket string) {
	defer c.Close()
	u, err := net.Dial("unix", socket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "thefold egress forwarder: proxy: %v\n", err)
		return
	}
	defer u.Close()
	pipe(c, u, 0)
}

// tunnel pipes a direct connection to an exposed address through a CONNECT to that address.
func tunnel(c net.Conn, socket, target string) {
	defer c.Close()
	u, err := net.Dial("unix", socket)
	if err != nil {
		fmt.Fprintf(os.Stderr, "thefold egress forwarder: proxy: %v\n", err)
		return
	}
	defer u.Close()
	if _, err := fmt.Fprintf(u, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", target, target); err != nil {
		return
	}
	br := bufio.NewReader(u)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		return
	}
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		fmt.Fprintf(os.Stderr, "thefold egress forwarder: %s: %s %s\n", target, resp.Status, strings.TrimSpace(string(b)))
		return
	}
	if n := br.Buffered(); n > 0 {
		b, _ := br.Peek(n)
		if _, err := c.Write(b); err != nil {
			return
		}
	}
	pipe(c, u, 0)
}

// ProxyVars point a command's HTTP clients (curl, Go, pip, npm) at proxyURL for every
// host: NO_PROXY is set, empty.
func ProxyVars(proxyURL string) map[string]string {
	m := map[string]string{"NO_PROXY": "", "no_proxy": ""}
	for _, k := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "npm_config_proxy", "npm_config_https_proxy"} {
		m[k] = proxyURL
	}
	return m
}

// proxyEnv is env with ProxyVars(proxyURL) and without any other spelling of a proxy
// setting (ALL_PROXY, npm's noproxy…).
func proxyEnv(env []string, proxyURL string) []string {
	drop := map[string]bool{"all_proxy": true, "ftp_proxy": true, "npm_config_noproxy": true, "npm_config_no_proxy": true}
	vars := ProxyVars(proxyURL)
	for k := range vars {
		drop[strings.ToLower(k)] = true
	}
	out := make([]string, 0, len(env)+len(vars))
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if !drop[strings.ToLower(k)] {
			out = append(out, kv)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(vars)) {
		out = append(out, k+"="+vars[k])
	}
	return out
}
