package backend

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/thefold/thefold/pkg/errs"

	"github.com/thefold/thefold/services/sandbox/internal/egress"
)

// Paths inside the bwrap sandbox of a Network run.
const (
	bwrapEgressExe  = "/.thefold/egress"
	bwrapEgressSock = "/.thefold/proxy.sock"
)

// maxSocketPath keeps the proxy's socket path under the kernel's 108-byte limit.
const maxSocketPath = 100

// egressRun is the egress proxy of one Network run in a bwrap sandbox. Its network
// namespace has only a loopback interface; the forwarder (this binary, re-executed inside)
// listens there and relays to the proxy's socket, which the run's directory holds and which
// is bound into the sandbox.
type egressRun struct {
	dir    string // on the host: proxy.sock, hosts, nsswitch.conf
	exe    string // this binary, on the host
	expose []string
	proxy  *egress.Proxy
}

// startEgress starts the proxy of a run allowed to reach allow (checked by CheckSpec), in a
// new directory under base.
func startEgress(base string, allow []string, logger *slog.Logger) (*egressRun, error) {
	if !egress.Hooked() {
		return nil, fmt.Errorf("network run: this program does not call egress.MaybeRunForwarder first thing, so it cannot be the sandbox's egress forwarder: %w", errs.ErrUnavailable)
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("network run: the forwarder binary: %w: %w", err, errs.ErrUnavailable)
	}
	list, err := egress.ParseAllowlist(allow)
	if err != nil {
		return nil, fmt.Errorf("allow: %w: %w", err, errs.ErrInvalid)
	}
	dir, err := os.MkdirTemp(base, "egress-")
	if err == nil && len(filepath.Join(dir, "proxy.sock")) > maxSocketPath {
		os.Remove(dir)
		dir, err = os.MkdirTemp("", "thefold-egress-")
	}
	if err != nil {
		return nil, fmt.Errorf("network run: %w", err)
	}
	e := &egressRun{dir: dir, exe: exe, expose: list.Loopback()}
	// Names resolve from files only: localhost, for an allowed localhost source a client
	// dials directly. Every other name is the proxy's to resolve.
	files := map[string]string{
		"hosts":         "127.0.0.1\tlocalhost\n::1\tlocalhost ip6-localhost ip6-loopback\n",
		"nsswitch.conf": "hosts: files\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("network run: %w", err)
		}
	}
	e.proxy, err = egress.Listen(filepath.Join(dir, "proxy.sock"), egress.Config{Allow: list, Logger: logger.With("component", "egress")})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	return e, nil
}

// bwrapArgs bind the forwarder, the proxy's socket and the name service files.
func (e *egressRun) bwrapArgs() []string {
	return []string{
		"--ro-bind", e.exe, bwrapEgressExe,
		"--ro-bind", filepath.Join(e.dir, "proxy.sock"), bwrapEgressSock,
		"--ro-bind", filepath.Join(e.dir, "hosts"), "/etc/hosts",
		"--ro-bind", filepath.Join(e.dir, "nsswitch.conf"), "/etc/nsswitch.conf",
	}
}

// wrap runs argv under the forwarder.
func (e *egressRun) wrap(argv []string) []string {
	return egress.ForwarderArgv(bwrapEgressExe, bwrapEgressSock, e.expose, argv)
}

func (e *egressRun) close() {
	e.proxy.Close()
	os.RemoveAll(e.dir)
}
