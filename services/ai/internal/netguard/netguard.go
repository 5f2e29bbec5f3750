// Package netguard keeps the ai service's provider clients off the networks a provider's
// base_url must not reach: loopback, private (RFC 1918, fc00::/7), link-local (169.254/16 —
// the cloud metadata endpoint 169.254.169.254 — and fe80::/10), unspecified, shared, reserved
// and documentation ranges, unless the operator allows them. A base URL is checked twice:
// when an admin registers it (CheckURL: a literal address, and the addresses its name
// resolves to then) and on every connection (Transport: a net.Dialer Control function sees
// the address actually dialled, so a name that resolved to a public address at
// registration and to 127.0.0.1 later — DNS rebinding — is still refused).
package netguard

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// ErrBlocked is wrapped by every refusal of this package.
var ErrBlocked = errors.New("address not allowed for a provider base URL")

// BlockedError names the host and the address that was refused.
type BlockedError struct {
	Host string
	Addr netip.Addr
}

func (e *BlockedError) Error() string {
	if e.Host != "" && e.Host != e.Addr.String() {
		return fmt.Sprintf("%s resolves to %s, a %s address: %v", e.Host, e.Addr, Describe(e.Addr), ErrBlocked)
	}
	return fmt.Sprintf("%s is a %s address: %v", e.Addr, Describe(e.Addr), ErrBlocked)
}

func (e *BlockedError) Unwrap() error { return ErrBlocked }

// Policy says which non-global addresses provider connections may reach. The zero value (and
// nil) allows none: only global unicast addresses.
type Policy struct {
	all      bool
	prefixes []netip.Prefix
	hosts    map[string]bool
}

// Parse reads the operator's allow-list (THEFOLD_AI_ALLOW_PRIVATE_BASE_URLS): empty or
// "false" allows nothing beyond global addresses; "true" (or "*") allows every address; else
// each entry is a CIDR prefix ("10.0.0.0/8", "fd00::/8"), an address ("127.0.0.1") or a host
// name ("ollama.internal", "localhost") whose connections are not checked.
func Parse(entries []string) (*Policy, error) {
	p := &Policy{hosts: map[string]bool{}}
	var problems []error
	for _, raw := range entries {
		e := strings.TrimSpace(raw)
		switch strings.ToLower(e) {
		case "", "false":
			continue
		case "true", "*":
			p.all = true
			continue
		}
		if pre, err := netip.ParsePrefix(e); err == nil {
			p.prefixes = append(p.prefixes, pre.Masked())
			continue
		}
		if a, err := netip.ParseAddr(e); err == nil {
			p.prefixes = append(p.prefixes, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		if validHost(e) {
			p.hosts[strings.ToLower(strings.TrimSuffix(e, "."))] = true
			continue
		}
		problems = append(problems, fmt.Errorf("%q is not a CIDR prefix, an address or a host name", e))
	}
	return p, errors.Join(problems...)
}

// MustParse is Parse for constants (tests).
func MustParse(entries ...string) *Policy {
	p, err := Parse(entries)
	if err != nil {
		panic(err)
	}
	return p
}

func validHost(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, r := range h {
		if !(r == '-' || r == '.' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			return false
		}
	}
	return true
}

// AllowsAll reports whether the policy lets provider connections reach any address.
func (p *Policy) AllowsAll() bool { return p != nil && p.all }

// AllowsHost reports whether connections to host (a name, as in the URL) go unchecked.
func (p *Policy) AllowsHost(host string) bool {
	if p == nil {
		return false
	}
	return p.all || p.hosts[strings.ToLower(strings.TrimSuffix(host, "."))]
}

// AllowsAddr reports whether a connection to a may be made: a is a global address, or the
// operator allowed it.
func (p *Policy) AllowsAddr(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() {
		return false
	}
	if Global(a) {
		return true
	}
	if p == nil {
		return false
	}
	if p.all {
		return true
	}
	for _, pre := range p.prefixes {
		if pre.Contains(a) {
			return true
		}
	}
	return false
}

// Resolver finds the addresses of a host name (net.DefaultResolver.LookupNetIP).
type Resolver func(ctx context.Context, host string) ([]netip.Addr, error)

// SystemResolver resolves with the system's resolver.
func SystemResolver(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}

// resolveTimeout bounds CheckURL's lookup: registration must not hang on a slow resolver.
const resolveTimeout = 3 * time.Second

// CheckURL is the registration-time check of a base URL: a literal address must be allowed,
// and so must every address its host name resolves to now. A name that does not resolve is
// accepted (an offline registration is not an error): the connection-time check stands
// either way. resolve nil uses the system's resolver.
func (p *Policy) CheckURL(ctx context.Context, raw string, resolve Resolver) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	host := u.Hostname()
	if host == "" || p.AllowsHost(host) {
		return nil
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if !p.AllowsAddr(a) {
			return &BlockedError{Host: host, Addr: a.Unmap()}
		}
		return nil
	}
	if resolve == nil {
		resolve = SystemResolver
	}
	rctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := resolve(rctx, host)
	if err != nil {
		return nil
	}
	for _, a := range addrs {
		if !p.AllowsAddr(a) {
			return &BlockedError{Host: host, Addr: a.Unmap()}
		}
	}
	return nil
}

// Control is a net.Dialer Control function that refuses connections to addresses the policy
// does not allow. It runs after name resolution, on the address about to be connected.
func (p *Policy) Control(network, address string, _ syscall.RawConn) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		return fmt.Errorf("netguard: %q: %w", address, err)
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("netguard: %q is not an address: %w", host, ErrBlocked)
	}
	if !p.AllowsAddr(a) {
		return &BlockedError{Addr: a.Unmap()}
	}
	return nil
}

// Transport returns an HTTP transport whose connections obey the policy. It uses no proxy
// from the environment: a proxy would be the address dialled, and the address behind it
// could not be checked. Host names the policy allows are dialled without the check.
func (p *Policy) Transport() *http.Transport {
	checked := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: p.Control}
	plain := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.Proxy = nil
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		host, _, err := net.SplitHostPort(addr)
		if err == nil && p.AllowsHost(host) {
			return plain.DialContext(ctx, network, addr)
		}
		conn, err := checked.DialContext(ctx, network, addr)
		if err != nil {
			var be *BlockedError
			if errors.As(err, &be) && be.Host == "" && host != be.Addr.String() {
				be.Host = host
			}
		}
		return conn, err
	}
	return t
}

// nonGlobal are ranges that are not reachable (or not meant to be reached) on the public
// Internet, beyond what netip's predicates cover (IANA special-purpose registries).
var nonGlobal = []netip.Prefix{
	netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
	netip.MustParsePrefix("100.64.0.0/10"),   // shared address space (carrier-grade NAT)
	netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
	netip.MustParsePrefix("192.0.2.0/24"),    // documentation
	netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
	netip.MustParsePrefix("198.51.100.0/24"), // documentation
	netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	netip.MustParsePrefix("240.0.0.0/4"),     // reserved, and the broadcast address
	netip.MustParsePrefix("::/128"),          // unspecified
	netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
	netip.MustParsePrefix("100::/64"),        // discard-only
	netip.MustParsePrefix("2001::/23"),       // IETF protocol assignments (Teredo, ORCHID …)
	netip.MustParsePrefix("2001:db8::/32"),   // documentation
	netip.MustParsePrefix("fec0::/10"),       // site-local (deprecated)
}

// embedded6to4 are IPv6 ranges that carry an IPv4 address, which must itself be global.
var (
	nat64   = netip.MustParsePrefix("64:ff9b::/96")
	sixTo4  = netip.MustParsePrefix("2002::/16")
	v4compt = netip.MustParsePrefix("::/96") // IPv4-compatible (deprecated)
)

// Global reports whether a is a global unicast address: not loopback, private, link-local,
// multicast, unspecified or any other special-purpose range.
func Global(a netip.Addr) bool {
	a = a.Unmap()
	if !a.IsValid() || !a.IsGlobalUnicast() || a.IsPrivate() || a.IsLoopback() || a.IsLinkLocalUnicast() {
		return false
	}
	for _, pre := range nonGlobal {
		if pre.Contains(a) {
			return false
		}
	}
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64.Contains(a), v4compt.Contains(a):
			return Global(netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
		case sixTo4.Contains(a):
			return Global(netip.AddrFrom4([4]byte{b[2], b[3], b[4], b[5]}))
		}
	}
	return true
}

// Describe names the kind of a non-global address for error messages.
func Describe(a netip.Addr) string {
	a = a.Unmap()
	switch {
	case a.IsLoopback():
		return "loopback"
	case a.IsPrivate():
		return "private"
	case a.IsLinkLocalUnicast():
		return "link-local"
	case a.IsUnspecified():
		return "unspecified"
	case a.IsMulticast():
		return "multicast"
	case Global(a):
		return "global"
	}
	return "non-global"
}
