// Package clientaddr finds the address of a call's client behind reverse proxies. The REST
// edge (X-Forwarded-For of an HTTP request) and the gateway's gRPC services (the
// x-forwarded-for metadata the edge or another proxy sends) share the one rule: the header
// is believed only as far as trusted proxies vouch for it.
package clientaddr

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// ParsePrefixes reads a list of addresses and CIDR prefixes (entries may be padded; empty
// ones are skipped).
func ParsePrefixes(list []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, s := range list {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if p, err := netip.ParsePrefix(s); err == nil {
			out = append(out, p.Masked())
			continue
		}
		a, err := netip.ParseAddr(s)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: want an IP address or a CIDR prefix", s)
		}
		out = append(out, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
	}
	return out, nil
}

// InPrefixes says whether addr (an IP address without port) is in one of prefixes.
func InPrefixes(addr string, prefixes []netip.Prefix) bool {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range prefixes {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// Host is the IP of a "host:port" address (the address itself when it has no port).
func Host(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}

// FromChain is the client's address given the immediate peer's (peer, without port) and
// the X-Forwarded-For values it sent: the peer itself unless trusted says it is a proxy;
// then the right-most entry that is not a trusted proxy. Each trusted proxy appends the
// address it was called from, so the entries to the left of the right-most untrusted one
// are whatever the client claimed and are never believed. An entry that is not an address
// ends the walk as the answer: the key of whatever was written, not the proxy's.
func FromChain(peer string, xff []string, trusted func(addr string) bool) string {
	if !trusted(peer) {
		return peer
	}
	hops := strings.Split(strings.Join(xff, ","), ",")
	host := peer
	for i := len(hops) - 1; i >= 0; i-- {
		hop := strings.TrimSpace(hops[i])
		if hop == "" {
			continue
		}
		if _, err := netip.ParseAddr(hop); err != nil {
			return hop
		}
		if !trusted(hop) {
			return hop
		}
		host = hop
	}
	return host
}
