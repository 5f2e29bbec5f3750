package egress

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of Config.
const (
	DefaultDialTimeout = 10 * time.Second
	DefaultIdleTimeout = 2 * time.Minute
	DefaultMaxConns    = 64
)

// Config configures a Proxy. Zero fields take the defaults.
type Config struct {
	// Allow is what the proxy may dial; nil allows nothing.
	Allow *Allowlist
	// Logger receives one warning per refusal (default: discard).
	Logger *slog.Logger
	// Resolve looks a host name up (default net.DefaultResolver.LookupNetIP). Tests replace it.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// DialTimeout bounds the resolution and the connection to an upstream.
	DialTimeout time.Duration
	// IdleTimeout closes a tunnel, a forwarded request or a client connection that moved no
	// byte either way for this long.
	IdleTimeout time.Duration
	// MaxConns caps the concurrent upstream connections (tunnels and requests in flight) and,
	// four times over, the client connections; a request waits DialTimeout for a slot, then
	// gets 503.
	MaxConns int
}

// Proxy is an HTTP forward proxy to the hosts of an allowlist: CONNECT tunnels (https, or any
// TCP protocol) and absolute-URI http requests. It never follows a redirect (its client is
// the sandboxed one) and never sends a request to a host other than the one named in it.
type Proxy struct {
	cfg     Config
	slots   chan struct{}
	tr      *http.Transport
	rp      *httputil.ReverseProxy
	srv     *http.Server
	mu      sync.Mutex
	tunnels map[net.Conn]struct{}
	closed  bool
}

// refusal is a request the policy refuses: answered 403, logged.
type refusal struct{ reason string }

func (r *refusal) Error() string { return r.reason }

// New returns a proxy with cfg; Serve starts it.
func New(cfg Config) *Proxy {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Resolve == nil {
		cfg.Resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = DefaultIdleTimeout
	}
	if cfg.MaxConns <= 0 {
		cfg.MaxConns = DefaultMaxConns
	}
	p := &Proxy{cfg: cfg, slots: make(chan struct{}, cfg.MaxConns), tunnels: map[net.Conn]struct{}{}}
	p.tr = &http.Transport{
		Proxy: nil, // never this process's own proxy settings
		DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
			return p.dial(ctx, addr)
		},
		MaxIdleConns:          cfg.MaxConns,
		IdleConnTimeout:       cfg.IdleTimeout,
		ResponseHeaderTimeout: cfg.IdleTimeout,
		DisableCompression:    true,
	}
	p.rp = &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			// The upstream is the URL's host, and so is the Host header: a request cannot
			// name an allowed host to the proxy and another to a server sharing its address.
			r.Out.Host = ""
		},
		Transport:     p.tr,
		FlushInterval: -1,
		ErrorLog:      slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			p.fail(w, r, r.URL.Host, err)
		},
	}
	p.srv = &http.Server{
		Handler:           p,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       cfg.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(cfg.Logger.Handler(), slog.LevelDebug),
	}
	return p
}

// Listen starts a proxy with cfg on a new unix socket at path (mode 0600: only this user, and
// the sandboxes it binds the socket into, may connect) and serves it until Close.
func Listen(path string, cfg Config) (*Proxy, error) {
	ln, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		ln.Close()
		return nil, fmt.Errorf("egress proxy: %w", err)
	}
	p := New(cfg)
	go func() { _ = p.Serve(ln) }()
	return p, nil
}

// Serve answers proxy requests on ln until Close; it returns http.ErrServerClosed then.
func (p *Proxy) Serve(ln net.Listener) error {
	return p.srv.Serve(&limitListener{Listener: ln, sem: make(chan struct{}, 4*p.cfg.MaxConns)})
}

// Close stops the listeners and cuts every connection, tunnels included.
func (p *Proxy) Close() error {
	err := p.srv.Close()
	p.mu.Lock()
	p.closed = true
	for c := range p.tunnels {
		c.Close()
	}
	p.mu.Unlock()
	p.tr.CloseIdleConnections()
	return err
}

func (p *Proxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	target := r.Host
	if r.Method != http.MethodConnect {
		if r.URL.Scheme != "http" || r.URL.Host == "" {
			p.refuse(w, r, r.URL.Host, http.StatusBadRequest, "only CONNECT and absolute http:// requests are proxied")
			return
		}
		if target = r.URL.Host; r.URL.Port() == "" {
			target = net.JoinHostPort(r.URL.Hostname(), "80")
		}
	}
	// Refused at once, without waiting for a slot (dial checks again, and the addresses).
	if !p.cfg.Allow.Allows(target) {
		p.refuse(w, r, target, http.StatusForbidden, notAllowed)
		return
	}
	if r.Method == http.MethodConnect {
		p.connect(w, r, target)
		return
	}
	if r.Header.Get("Upgrade") != "" {
		p.refuse(w, r, target, http.StatusForbidden, "protocol upgrades are not proxied")
		return
	}
	release, ok := p.acquire(r.Context())
	if !ok {
		p.refuse(w, r, target, http.StatusServiceUnavailable, "too many connections")
		return
	}
	defer release()
	p.rp.ServeHTTP(w, r)
}

const notAllowed = "not on the sandbox's egress allowlist"

func (p *Proxy) connect(w http.ResponseWriter, r *http.Request, target string) {
	release, ok := p.acquire(r.Context())
	if !ok {
		p.refuse(w, r, target, http.StatusServiceUnavailable, "too many connections")
		return
	}
	defer release()
	up, err := p.dial(r.Context(), target)
	if err != nil {
		p.fail(w, r, target, err)
		return
	}
	defer up.Close()
	hj, ok := w.(http.Hijacker)
	if !ok {
		p.refuse(w, r, target, http.StatusInternalServerError, "cannot tunnel on this connection")
		return
	}
	c, rw, err := hj.Hijack()
	if err != nil {
		return
	}
	defer c.Close()
	if !p.track(c, true) {
		return
	}
	defer p.track(c, false)
	_ = c.SetDeadline(time.Time{})
	if _, err := io.WriteString(c, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	// What the client sent after the CONNECT line (a TLS hello, often) is in rw's buffer.
	if n := rw.Reader.Buffered(); n > 0 {
		b, _ := rw.Reader.Peek(n)
		if _, err := up.Write(b); err != nil {
			return
		}
	}
	pipe(c, up, p.cfg.IdleTimeout)
}

// acquire takes an upstream slot, waiting at most DialTimeout.
func (p *Proxy) acquire(ctx context.Context) (func(), bool) {
	t := time.NewTimer(p.cfg.DialTimeout)
	defer t.Stop()
	select {
	case p.slots <- struct{}{}:
		return func() { <-p.slots }, true
	case <-t.C:
	case <-ctx.Done():
	}
	return nil, false
}

func (p *Proxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !add {
		delete(p.tunnels, c)
		return true
	}
	if p.closed {
		return false
	}
	p.tunnels[c] = struct{}{}
	return true
}

// dial connects to target (host:port) if the allowlist allows it: a literal IP or localhost
// entry as it is, a name only when every address it resolves to is public. It dials the
// addresses it checked, so a second resolution cannot change the answer.
func (p *Proxy) dial(ctx context.Context, target string) (net.Conn, error) {
	e, ok := p.cfg.Allow.lookup(target)
	if !ok {
		return nil, &refusal{notAllowed}
	}
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	var addrs []netip.Addr
	switch {
	case isLiteralIP(e.host):
		addrs = []netip.Addr{netip.MustParseAddr(e.host)}
	case e.host == "localhost":
		addrs = []netip.Addr{netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback()}
	default:
		var err error
		addrs, err = p.cfg.Resolve(ctx, e.host)
		if err != nil {
			return nil, fmt.Errorf("resolving %s: %w", e.host, err)
		}
		if len(addrs) == 0 {
			return nil, fmt.Errorf("resolving %s: no address", e.host)
		}
		for _, a := range addrs {
			if !publicAddr(a) {
				return nil, &refusal{fmt.Sprintf("%s resolves to %s, a local or private address: only an allowlist entry naming an IP or localhost may reach one", e.host, a)}
			}
		}
	}
	var err error
	for i, a := range addrs {
		var c net.Conn
		if c, err = dialShare(ctx, net.JoinHostPort(a.Unmap().String(), e.port), len(addrs)-i); err == nil {
			return c, nil
		}
	}
	return nil, err
}

// dialShare dials addr within a 1/n share of the time ctx has left, so that an address that
// does not answer leaves the others time (as net.Dialer does for a name).
func dialShare(ctx context.Context, addr string, n int) (net.Conn, error) {
	if deadline, ok := ctx.Deadline(); ok && n > 1 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, time.Now().Add(time.Until(deadline)/time.Duration(n)))
		defer cancel()
	}
	var d net.Dialer
	return d.DialContext(ctx, "tcp", addr)
}

// fail answers a dial error: 403 for a refusal, else 502.
func (p *Proxy) fail(w http.ResponseWriter, r *http.Request, target string, err error) {
	var ref *refusal
	if errors.As(err, &ref) {
		p.refuse(w, r, target, http.StatusForbidden, ref.reason)
		return
	}
	p.cfg.Logger.Warn("egress upstream failed", "target", target, "method", r.Method, "err", err)
	http.Error(w, "thefold egress proxy: "+target+": "+err.Error(), http.StatusBadGateway)
}

func (p *Proxy) refuse(w http.ResponseWriter, r *http.Request, target string, code int, reason string) {
	p.cfg.Logger.Warn("egress refused", "target", target, "method", r.Method, "code", code, "reason", reason)
	w.Header().Set("Connection", "close")
	http.Error(w, "thefold egress proxy: "+target+" refused: "+reason, code)
}

// pipe copies a→b and b→a until both directions end, one fails, or no byte moved either way
// for idle (0: no bound). Each side's write half is closed when the other's reading ends.
func pipe(a, b net.Conn, idle time.Duration) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	done := make(chan struct{}, 2)
	half := func(dst, src net.Conn) {
		err := copyIdle(dst, src, &last, idle)
		if err == nil {
			if cw, ok := dst.(interface{ CloseWrite() error }); ok {
				_ = cw.CloseWrite()
			} else {
				dst.Close()
			}
		} else {
			a.Close()
			b.Close()
		}
		done <- struct{}{}
	}
	go half(a, b)
	go half(b, a)
	<-done
	<-done
}

// copyIdle copies src to dst until src ends (nil) or an error or idleness (an error).
func copyIdle(dst, src net.Conn, last *atomic.Int64, idle time.Duration) error {
	buf := make([]byte, 32<<10)
	for {
		if idle > 0 {
			_ = src.SetReadDeadline(time.Now().Add(idle))
		}
		n, err := src.Read(buf)
		if n > 0 {
			last.Store(time.Now().UnixNano())
			if idle > 0 {
				_ = dst.SetWriteDeadline(time.Now().Add(idle))
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return werr
			}
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && time.Since(time.Unix(0, last.Load())) < idle {
				continue // the other direction is busy: the tunnel is not idle
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// limitListener blocks Accept while sem is full; a connection frees its slot on Close.
type limitListener struct {
	net.Listener
	sem chan struct{}
}

func (l *limitListener) Accept() (net.Conn, error) {
	l.sem <- struct{}{}
	c, err := l.Listener.Accept()
	if err != nil {
		<-l.sem
		return nil, err
	}
	return &limitConn{Conn: c, release: sync.OnceFunc(func() { <-l.sem })}, nil
}

type limitConn struct {
	net.Conn
	release func()
}

// CloseWrite half-closes the connection when it can (a tunnel's end of stream), else closes it.
func (c *limitConn) CloseWrite() error {
	if cw, ok := c.Conn.(interface{ CloseWrite() error }); ok {
		return cw.CloseWrite()
	}
	return c.Close()
}

func (c *limitConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}
