// Package egress is how a sandboxed dependencies command (go mod download, npm ci, pip
// install) reaches its package sources and nothing else.
//
// The sandbox has its own network namespace holding only a loopback interface: no route
// leaves it. The service runs a Proxy, an HTTP forward proxy (CONNECT for https, absolute-URI
// requests for http) that dials only the host:port pairs of an Allowlist, on a unix socket
// bound into the sandbox. Inside, the forwarder (this same binary, re-executed: see
// MaybeRunForwarder) listens on 127.0.0.1, pipes every connection to that socket, points the
// command's HTTP_PROXY/HTTPS_PROXY at itself and runs the command as its child.
package egress

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// Allowlist is the set of host:port pairs a proxy may dial. Hosts match exactly and without
// regard to case; there are no wildcards and no "any port".
type Allowlist struct {
	entries map[string]entry // by key(host, port)
}

type entry struct {
	host, port string // normalised: lower case, an IP in its canonical form
	// local is set when the operator named the address itself (a literal IP) or localhost:
	// such an entry may reach a loopback or private address. A name resolved through DNS
	// never may, so that a name pointed at 127.0.0.1 cannot open the host's services.
	local bool
}

func (e entry) String() string { return net.JoinHostPort(e.host, e.port) }

// ParseAllowlist reads entries of the forms "host:port", "[v6]:port" and
// "scheme://host[:port][/path]" (http, https: the port defaults from the scheme). An
// entry with neither a port nor a scheme is an error: the port is never guessed.
func ParseAllowlist(list []string) (*Allowlist, error) {
	a := &Allowlist{entries: map[string]entry{}}
	for _, s := range list {
		e, err := parseEntry(s)
		if err != nil {
			return nil, err
		}
		a.entries[e.String()] = e
	}
	return a, nil
}

func parseEntry(s string) (entry, error) {
	hostport := s
	if strings.Contains(s, "://") {
		u, err := url.Parse(s)
		if err != nil {
			return entry{}, fmt.Errorf("egress allowlist entry %q: %v", s, err)
		}
		port := u.Port()
		if port == "" {
			port = defaultPort(u.Scheme)
		}
		if port == "" {
			return entry{}, fmt.Errorf("egress allowlist entry %q: scheme %q has no default port; give one", s, u.Scheme)
		}
		hostport = net.JoinHostPort(u.Hostname(), port)
	}
	host, port, err := splitTarget(hostport)
	if err != nil {
		return entry{}, fmt.Errorf("egress allowlist entry %q: %v", s, err)
	}
	return entry{host: host, port: port, local: isLiteralIP(host) || host == "localhost"}, nil
}

func defaultPort(scheme string) string {
	switch strings.ToLower(scheme) {
	case "http":
		return "80"
	case "https":
		return "443"
	}
	return ""
}

// splitTarget splits and normalises host:port: the port numeric in 1..65535, the host non-empty,
// lower case, without a trailing dot, an IP in canonical form (so [::1] and [0::1] match).
func splitTarget(hostport string) (host, port string, err error) {
	host, port, err = net.SplitHostPort(hostport)
	if err != nil {
		return "", "", err
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 1 || n > 65535 || port[0] == '0' {
		return "", "", fmt.Errorf("port %q: want 1 to 65535", port)
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if ip, err := netip.ParseAddr(host); err == nil {
		if ip.Zone() != "" {
			return "", "", fmt.Errorf("host %q: no zoned addresses", host)
		}
		host = ip.Unmap().String()
	}
	if host == "" || strings.ContainsAny(host, " /\\@%") {
		return "", "", fmt.Errorf("host %q: not a host name or address", host)
	}
	return host, port, nil
}

func isLiteralIP(host string) bool {
	_, err := netip.ParseAddr(host)
	return err == nil
}

// lookup returns the entry allowing target (host:port), if any.
func (a *Allowlist) lookup(target string) (entry, bool) {
	host, port, err := splitTarget(target)
	if err != nil || a == nil {
		return entry{}, false
	}
	e, ok := a.entries[net.JoinHostPort(host, port)]
	return e, ok
}

// Allows says whether target (host:port) is on the list. The proxy also checks where an
// allowed name resolves to before it dials.
func (a *Allowlist) Allows(target string) bool {
	_, ok := a.lookup(target)
	return ok
}

// Entries are the normalised host:port pairs, sorted.
func (a *Allowlist) Entries() []string {
	var out []string
	for k := range a.entries {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Loopback are the entries a sandboxed client may connect to directly, bypassing its proxy
// settings (Go's net/http never proxies a request to localhost or a loopback address): the
// forwarder listens on these inside the sandbox's network namespace and tunnels each
// connection through the proxy.
func (a *Allowlist) Loopback() []string {
	var out []string
	for k, e := range a.entries {
		if ip, err := netip.ParseAddr(e.host); e.host == "localhost" || (err == nil && ip.IsLoopback()) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// publicAddr says whether a name that resolved to ip may be dialled: not loopback, private,
// link-local, multicast, unspecified nor in a range that reaches the host or its network
// without being private in name (0/8 is "this host", 100.64/10 carrier NAT and cloud
// metadata neighbours, 192.0.0/24, 198.18/15, 240/4; NAT64 embeds an IPv4 address).
func publicAddr(ip netip.Addr) bool {
	ip = ip.Unmap()
	if !ip.IsValid() || ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() ||
		ip.IsInterfaceLocalMulticast() || ip.IsMulticast() || ip.IsUnspecified() {
		return false
	}
	for _, p := range nonPublic {
		if p.Contains(ip) {
			return false
		}
	}
	if nat64.Contains(ip) {
		b := ip.As16()
		return publicAddr(netip.AddrFrom4([4]byte(b[12:16])))
	}
	return true
}

var (
	nonPublic = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),
		netip.MustParsePrefix("100.64.0.0/10"),
		netip.MustParsePrefix("192.0.0.0/24"),
		netip.MustParsePrefix("198.18.0.0/15"),
		netip.MustParsePrefix("240.0.0.0/4"),
	}
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
)
