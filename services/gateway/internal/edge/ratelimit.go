package edge

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/clientaddr"
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
func ParseProxies(list []string) ([]netip.Prefix, error) { return clientaddr.ParsePrefixes(list) }

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
	return clientaddr.FromChain(clientaddr.Host(r.RemoteAddr), r.Header.Values("X-Forwarded-For"),
		func(a string) bool { return clientaddr.InPrefixes(a, trusted) })
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
