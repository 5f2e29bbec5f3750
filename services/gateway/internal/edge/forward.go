package edge

import (
	"net"
	"net/http"
	"net/netip"
)

// forwardClient makes the client's address, as the edge established it (clientAddress:
// the connection's, or behind the edge's trusted proxies the right-most untrusted
// X-Forwarded-For entry), the one X-Forwarded-For the services receive. grpc-gateway
// forwards the request's X-Forwarded-For with the connection's address appended; left as
// it is, a service would see whatever a client wrote there, followed by the address of
// the edge's own proxy, which the service has no reason to trust. The services trust the
// edge's word (its connection to them is local, or a proxy the operator lists in
// THEFOLD_GATEWAY_TRUSTED_PROXIES), so the word has to be the edge's alone: the request
// goes on as if the client had connected directly, without X-Forwarded-For.
func forwardClient(trusted []netip.Prefix, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		client := clientAddress(r, trusted)
		if client == "" {
			next.ServeHTTP(w, r)
			return
		}
		// Without X-Forwarded-For and with the connection's address as the client's (no
		// trusted proxy in between), grpc-gateway forwards exactly that address already:
		// the request goes on as it is, without a copy of it and its headers.
		if _, fwd := r.Header["X-Forwarded-For"]; !fwd {
			if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil && host == client {
				next.ServeHTTP(w, r)
				return
			}
		}
		fwd := r.WithContext(r.Context()) // a shallow copy: the caller's request stays as it was
		fwd.Header = r.Header.Clone()
		fwd.Header.Del("X-Forwarded-For")
		fwd.RemoteAddr = net.JoinHostPort(client, "0")
		next.ServeHTTP(w, fwd)
	})
}
