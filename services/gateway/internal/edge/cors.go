package edge

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"google.golang.org/grpc/codes"
)

// The CORS answers' fixed parts. Methods are those of the REST mapping; headers are those a
// page sends beyond the CORS-safelisted ones (Content-Type: application/json is not one);
// exposed are the response headers a page may read besides the safelisted ones.
const (
	corsAllowMethods  = "GET, POST, PATCH, PUT, DELETE"
	corsAllowHeaders  = "Authorization, Content-Type, Last-Event-ID, X-Request-Id"
	corsExposeHeaders = "X-Request-Id, Retry-After, WWW-Authenticate"
	// corsMaxAge is how long a browser may reuse a preflight's answer, in seconds.
	corsMaxAge = "600"
)

// corsPolicy is the set of origins allowed to call the API from a browser.
type corsPolicy struct {
	any     bool            // "*": every origin, without credentials
	origins map[string]bool // exact serialized origins, e.g. https://app.example.com
}

// newCORSPolicy checks and normalizes the configured origins: each exactly
// scheme://host[:port] (http or https, no path, query or user), lower case, without the
// scheme's default port, as browsers send them in Origin; or "*" as the only entry. It
// returns nil for none.
func newCORSPolicy(origins []string) (*corsPolicy, error) {
	var entries []string
	for _, o := range origins {
		if o = strings.TrimSpace(o); o != "" {
			entries = append(entries, o)
		}
	}
	if len(entries) == 0 {
		return nil, nil
	}
	p := &corsPolicy{origins: map[string]bool{}}
	for _, o := range entries {
		if o == "*" {
			if len(entries) > 1 {
				return nil, fmt.Errorf("CORS origins: \"*\" must be the only entry, got %q", entries)
			}
			p.any = true
			continue
		}
		norm, err := normalizeOrigin(o)
		if err != nil {
			return nil, fmt.Errorf("CORS origins: %q: %w", o, err)
		}
		p.origins[norm] = true
	}
	return p, nil
}

func normalizeOrigin(o string) (string, error) {
	u, err := url.Parse(o)
	if err != nil {
		return "", err
	}
	scheme := strings.ToLower(u.Scheme)
	switch {
	case scheme != "http" && scheme != "https":
		return "", fmt.Errorf("want http://host[:port] or https://host[:port]")
	case u.Host == "" || u.Hostname() == "":
		return "", fmt.Errorf("no host")
	case strings.Contains(u.Host, "*"):
		return "", fmt.Errorf("no wildcards in an origin: name each one, or \"*\" alone for every origin")
	case u.User != nil, u.Path != "", u.RawQuery != "", u.Fragment != "", u.ForceQuery, strings.HasSuffix(o, "#"):
		return "", fmt.Errorf("an origin is scheme://host[:port] only: no user, path, query or fragment")
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if strings.Contains(host, ":") {
		host = "[" + host + "]" // IPv6
	}
	if port == "" || scheme == "http" && port == "80" || scheme == "https" && port == "443" {
		return scheme + "://" + host, nil
	}
	return scheme + "://" + host + ":" + port, nil
}

// allows reports whether a request's Origin header is allowed. Browsers send the origin
// serialized (lower case, no default port), so the match is exact.
func (p *corsPolicy) allows(origin string) bool {
	return p.any || p.origins[origin]
}

// cors lets pages of the configured origins call the API from a browser. A preflight
// (OPTIONS with Access-Control-Request-Method) from an allowed origin is answered 204 with
// the methods, headers and max age; from any other origin 403 in the one error shape.
// Other requests with an allowed Origin get the origin echoed ("*" when every origin is
// allowed, and then no credentials), Vary: Origin and the headers a page may read; with
// another Origin they go on without CORS headers (the browser keeps the answer from the
// page). Requests without Origin are untouched. The policy is checked by Limits.Validate.
func cors(origins []string, next http.Handler) http.Handler {
	p, err := newCORSPolicy(origins)
	if err != nil || p == nil {
		return next
	}
	allowOrigin := func(h http.Header, origin string) {
		if p.any {
			h.Set("Access-Control-Allow-Origin", "*")
			return
		}
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		origin := r.Header.Get("Origin")
		if origin == "" {
			next.ServeHTTP(w, r)
			return
		}
		h := w.Header()
		h.Add("Vary", "Origin")
		if r.Method == http.MethodOptions && r.Header.Get("Access-Control-Request-Method") != "" {
			h.Add("Vary", "Access-Control-Request-Method")
			h.Add("Vary", "Access-Control-Request-Headers")
			if !p.allows(origin) {
				writeError(w, http.StatusForbidden, codes.PermissionDenied,
					fmt.Sprintf("CORS: origin %q is not allowed to call this API", origin))
				return
			}
			allowOrigin(h, origin)
			h.Set("Access-Control-Allow-Methods", corsAllowMethods)
			h.Set("Access-Control-Allow-Headers", corsAllowHeaders)
			h.Set("Access-Control-Max-Age", corsMaxAge)
			w.WriteHeader(http.StatusNoContent)
			return
		}
		if p.allows(origin) {
			allowOrigin(h, origin)
			h.Set("Access-Control-Expose-Headers", corsExposeHeaders)
		}
		next.ServeHTTP(w, r)
	})
}
