package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"sync"

	"github.com/moby/moby/client"
	"golang.org/x/sys/unix"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/services/sandbox/internal/egress"
)

// containerEgress is the egress proxy of one Network run in a container. The container's
// network namespace holds only a loopback interface and keeps it: the proxy's listener is
// opened inside that namespace (on the container's own 127.0.0.1) by a thread of this
// process that enters it for the socket call only, while the proxy dials out from this
// process's namespace to the allowlist's hosts alone. Nothing else is routable from the
// container, before, during or after the run; the listeners close when the run ends.
//
// Entering the namespace needs this process to see the engine's processes and to hold
// CAP_SYS_ADMIN (the sandbox service on the engine's host as root); elsewhere, a network
// run fails with the reason instead of running with more network.
type containerEgress struct {
	proxy *egress.Proxy
	lns   []net.Listener
	url   string
	wg    sync.WaitGroup
}

// startEgress opens the proxy of a Network run allowed to reach allow in b's container.
func (d *Docker) startEgress(ctx context.Context, b *box, allow []string) (*containerEgress, error) {
	list, err := egress.ParseAllowlist(allow)
	if err != nil {
		return nil, fmt.Errorf("allow: %w: %w", err, errs.ErrInvalid)
	}
	in, err := d.cli.ContainerInspect(ctx, b.id, client.ContainerInspectOptions{})
	if err != nil {
		return nil, fmt.Errorf("network run: inspect the sandbox container: %w: %w", err, errs.ErrUnavailable)
	}
	pid := 0
	if in.Container.State != nil {
		pid = in.Container.State.Pid
	}
	if pid <= 0 {
		return nil, fmt.Errorf("network run: the sandbox container is not running: %w", errs.ErrUnavailable)
	}
	e := &containerEgress{proxy: egress.New(egress.Config{Allow: list, Logger: d.cfg.logger.With("component", "egress", "container", short(b.id))})}
	ln, err := listenInNetns(pid, "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e.lns = append(e.lns, ln)
	e.url = "http://" + ln.Addr().String()
	e.wg.Go(func() { _ = e.proxy.Serve(ln) })
	// Go's net/http never sends a request for a loopback host through a proxy: an allowed
	// loopback source (a local mirror the operator configured) is listened for at its own
	// address inside the namespace and relayed to the same address outside.
	for _, target := range list.Loopback() {
		l, err := listenInNetns(pid, target)
		if err != nil {
			e.close()
			return nil, err
		}
		e.lns = append(e.lns, l)
		e.wg.Go(func() { relayTo(l, target) })
	}
	return e, nil
}

// env points the command's clients at the proxy.
func (e *containerEgress) env() map[string]string { return egress.ProxyVars(e.url) }

func (e *containerEgress) close() {
	for _, l := range e.lns {
		_ = l.Close()
	}
	_ = e.proxy.Close()
	e.wg.Wait()
}

// relayTo pipes every connection accepted on l to target until l is closed.
func relayTo(l net.Listener, target string) {
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		wg.Go(func() {
			defer c.Close()
			up, err := net.Dial("tcp", target)
			if err != nil {
				return
			}
			defer up.Close()
			done := make(chan struct{})
			go func() { _, _ = io.Copy(up, c); closeWrite(up); close(done) }()
			_, _ = io.Copy(c, up)
			closeWrite(c)
			<-done
		})
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// listenInNetns opens a TCP listener on addr inside the network namespace of pid. A socket
// belongs to the namespace it was made in, so the listener stays there after the thread
// returns to this process's namespace.
func listenInNetns(pid int, addr string) (net.Listener, error) {
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		self, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("network run: this process's network namespace: %w: %w", err, errs.ErrUnavailable)}
			return
		}
		defer self.Close()
		target, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", pid))
		if err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("network run: the container's network namespace is not reachable from this process (the sandbox service must run on the engine's host, as root): %w: %w", err, errs.ErrUnavailable)}
			return
		}
		defer target.Close()
		if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
			runtime.UnlockOSThread()
			ch <- result{err: fmt.Errorf("network run: enter the container's network namespace (needs CAP_SYS_ADMIN): %w: %w", err, errs.ErrUnavailable)}
			return
		}
		ln, lerr := net.Listen("tcp", addr)
		if err := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread stays in the container's namespace: leave it locked, so the
			// runtime ends it with this goroutine instead of reusing it.
			if ln != nil {
				_ = ln.Close()
			}
			ch <- result{err: errors.Join(fmt.Errorf("network run: return to this process's network namespace: %w", err), errs.ErrUnavailable)}
			return
		}
		runtime.UnlockOSThread()
		if lerr != nil {
			lerr = fmt.Errorf("network run: listen on %s in the container: %w: %w", addr, lerr, errs.ErrUnavailable)
		}
		ch <- result{ln: ln, err: lerr}
	}()
	r := <-ch
	return r.ln, r.err
}
