package authsvc

import (
	"context"
	"net/netip"

	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/thefold/thefold/pkg/clientaddr"
	"github.com/thefold/thefold/services/gateway/internal/store"
)

// maxCallerLen bounds what the audit keeps of a caller (a proxy vouches for the address,
// but the header's bytes are still a stranger's).
const maxCallerLen = 200

// caller is where a login call came from: the connection's peer, or, when the peer is a
// proxy the gateway trusts, the client it forwards for (x-forwarded-for, the right-most
// entry that is not a trusted proxy: clientaddr.FromChain). The REST edge forwards the
// client's address as it established it, with its own trusted proxies
// (THEFOLD_HTTP_TRUSTED_PROXIES) already applied, over a connection from this host.
//
// Without the trust rule a caller could name any address in the header: escape its own
// per-client limits, fill another's, and write what it likes into the audit.
func (c *Core) caller(ctx context.Context) store.Caller {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return store.Caller{}
	}
	peerAddr := p.Addr.String()
	host := clientaddr.Host(peerAddr)
	var xff []string
	if md, ok := metadata.FromIncomingContext(ctx); ok {
		xff = md.Get("x-forwarded-for")
	}
	proxies, _ := clientaddr.ParsePrefixes(c.cfg.Login.TrustedProxies) // checked by Validate
	local := ""
	if p.LocalAddr != nil {
		local = clientaddr.Host(p.LocalAddr.String())
	}
	trusted := func(addr string) bool {
		return (c.cfg.Login.TrustLocalProxy && fromThisHost(addr, local)) || clientaddr.InPrefixes(addr, proxies)
	}
	client := clientaddr.FromChain(host, xff, trusted)
	if client == host {
		return store.Caller{Client: truncate(host, maxCallerLen), Peer: truncate(peerAddr, maxCallerLen)}
	}
	client = truncate(client, maxCallerLen/2)
	return store.Caller{Client: client, Peer: truncate(client+" via "+peerAddr, maxCallerLen)}
}

// fromThisHost says whether a connection from addr to local comes from this host: over
// loopback, or from one of the host's own addresses to itself — the REST edge dialing its
// own gRPC server by the service's name (docker compose's gateway:9100) arrives so. A packet
// from elsewhere cannot carry the host's own source address through a TCP handshake.
func fromThisHost(addr, local string) bool {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	a = a.Unmap()
	if a.IsLoopback() {
		return true
	}
	l, err := netip.ParseAddr(local)
	return err == nil && !l.IsUnspecified() && l.Unmap() == a
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n]
}
