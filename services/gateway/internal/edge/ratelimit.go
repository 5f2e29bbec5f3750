package edge

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/ratelimit"
)

// Rate is a token bucket (pkg/ratelimit, the one kind every gRPC server's budgets use too):
// PerSecond requests a second on average, bursts of Burst. A zero PerSecond means no limit.
type Rate = ratelimit.Rate

// ParseRate reads "<n>/s", "<n>/m" or "<n>/h", optionally ",burst=<b>" (burst defaults to
// twice the per-second rate, at least 1); "0" or "off" is no limit.
func ParseRate(s string) (Rate, error) { return ratelimit.ParseRate(s) }

// RateLimits are the REST edge's request budgets: one bucket per user (the verified
// token's subject; an API key by its hash) and one per client address.
type RateLimits struct {
	PerUser    Rate
	PerAddress Rate
	// Verifier identifies the user of a bearer token; without it only addresses are limited.
	Verifier *auth.Verifier
	// TrustedProxies are the reverse proxies in front of the edge: for a connection from one
	// of them, the client's address is the right-most X-Forwarded-For entry that is not a
	// trusted proxy (the left-most ones are whatever the client claimed).
	TrustedProxies []netip.Prefix
}

// ParseProxies reads a comma-separated list of addresses and CIDR prefixes.
func ParseProxies(list []string) ([]netip.Prefix, error) {
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

// rateLimit refuses a request over its user's or its address's budget with 429, a
// Retry-After and the one error shape. Health probes are not limited.
func rateLimit(lim RateLimits, next http.Handler) http.Handler {
	if lim.PerUser.PerSecond == 0 && lim.PerAddress.PerSecond == 0 {
		return next
	}
	users, addrs := ratelimit.NewBuckets(lim.PerUser), ratelimit.NewBuckets(lim.PerAddress)
	refuse := func(w http.ResponseWriter, who string, r Rate, retry time.Duration) {
		secs := max(int(math.Ceil(retry.Seconds())), 1)
		w.Header().Set("Retry-After", strconv.Itoa(secs))
		writeError(w, http.StatusTooManyRequests, codes.ResourceExhausted,
			fmt.Sprintf("rate limit exceeded for this %s (%s); retry in %ds", who, r, secs))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
			next.ServeHTTP(w, r)
			return
		}
		now := time.Now()
		if lim.PerAddress.PerSecond > 0 {
			if ok, retry := addrs.Take(clientAddress(r, lim.TrustedProxies), now); !ok {
				refuse(w, "address", lim.PerAddress, retry)
				return
			}
		}
		if lim.PerUser.PerSecond > 0 {
			if key := userKey(lim.Verifier, r); key != "" {
				if ok, retry := users.Take(key, now); !ok {
					refuse(w, "user", lim.PerUser, retry)
					return
				}
			}
		}
		next.ServeHTTP(w, r)
	})
}

// clientAddress is the client's address: the connection's, or behind trusted proxies the
// right-most X-Forwarded-For entry that is not one of them. A client can write anything
// into the header, so entries are believed only as far as trusted proxies vouch for them.
func clientAddress(r *http.Request, trusted []netip.Prefix) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	if len(trusted) == 0 || !isTrusted(host, trusted) {
		return host
	}
	hops := strings.Split(strings.Join(r.Header.Values("X-Forwarded-For"), ","), ",")
	for i := len(hops) - 1; i >= 0; i-- {
		hop := strings.TrimSpace(hops[i])
		if hop == "" {
			continue
		}
		if _, err := netip.ParseAddr(hop); err != nil {
			return hop // not an address: the budget of whatever was written, not the proxy's
		}
		if !isTrusted(hop, trusted) {
			return hop
		}
		host = hop
	}
	return host
}

func isTrusted(addr string, trusted []netip.Prefix) bool {
	a, err := netip.ParseAddr(addr)
	if err != nil {
		return false
	}
	a = a.Unmap()
	for _, p := range trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// userKey names the bucket of the request's credential: the user of a valid token, an API
// key by its hash (its owner is known only after the exchange, in the service), "" for
// none or an invalid token (the service refuses it; the address budget still applies).
func userKey(v *auth.Verifier, r *http.Request) string {
	scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	tok = strings.TrimSpace(tok)
	if !ok || !strings.EqualFold(scheme, "bearer") || tok == "" {
		return ""
	}
	if auth.IsAPIKey(tok) {
		h := sha256.Sum256([]byte(tok))
		return "key:" + hex.EncodeToString(h[:12])
	}
	if v == nil {
		return ""
	}
	p, err := v.Verify(tok)
	if err != nil {
		return ""
	}
	return "user:" + p.UserID
}
