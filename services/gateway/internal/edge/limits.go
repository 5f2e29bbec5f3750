package edge

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/thefold/thefold/pkg/validate"
)

// DefaultMaxBodyBytes bounds a request body when Limits.MaxBodyBytes is 0.
const DefaultMaxBodyBytes = 4 << 20

// Limits are what the edge refuses before a request reaches a service.
type Limits struct {
	// MaxBodyBytes bounds a request body (413 above it); 0 means DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// RateLimits are the request budgets per user and per client address (none when zero).
	RateLimits RateLimits
	// CORSOrigins are the origins (scheme://host[:port]) whose pages may call the API from
	// a browser; "*" as the only entry allows every origin, without credentials. Empty: no
	// CORS headers, browsers keep other origins out.
	CORSOrigins []string
}

// Validate reports a negative body limit and origins that are not scheme://host[:port].
func (l Limits) Validate() error {
	var errList []error
	if l.MaxBodyBytes < 0 {
		errList = append(errList, fmt.Errorf("body limit: must not be negative, got %d", l.MaxBodyBytes))
	}
	if _, err := newCORSPolicy(l.CORSOrigins); err != nil {
		errList = append(errList, err)
	}
	return errors.Join(errList...)
}

// guard refuses what must not reach grpc-gateway:
//   - a body above the limit: 413, before it is held in memory whole;
//   - header bytes gRPC metadata cannot carry (control or non-ASCII), which grpc-go refuses
//     with an INTERNAL error (a 500 for every such request): Authorization is refused with
//     401, other headers are dropped (withRequestID already replaced a bad X-Request-Id).
//
// (observe marks the request's calls fail-fast, in the one context it makes per request.)
func guard(lim Limits, next http.Handler) http.Handler {
	limit := lim.MaxBodyBytes
	if limit <= 0 {
		limit = DefaultMaxBodyBytes
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for _, v := range r.Header.Values("Authorization") {
			if !validate.PrintableASCII(v, true) {
				writeError(w, http.StatusUnauthorized, codes.Unauthenticated,
					"Authorization header: control or non-ASCII characters are not allowed")
				return
			}
		}
		scrubHeaders(r.Header)
		if r.ContentLength > limit {
			tooLarge(w, limit)
			return
		}
		if r.Body != nil && r.Body != http.NoBody {
			body, err := readBody(r, limit)
			if err != nil {
				writeError(w, http.StatusBadRequest, codes.InvalidArgument, "reading the request body: "+err.Error())
				return
			}
			if int64(len(body)) > limit {
				tooLarge(w, limit)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	})
}

// readBody reads r's body whole, at most limit+1 bytes of it. A declared Content-Length (at
// most limit here; net/http delivers exactly that many bytes or fails) sizes the buffer at
// once; a chunked body has none and is read in growing steps up to the limit.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > 0 {
		body := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, err
		}
		return body, nil
	}
	return io.ReadAll(io.LimitReader(r.Body, limit+1))
}

// streamDeadlines lifts the server's read and write timeouts for Watch routes (AIP custom
// method ":watch"): a stream lives as long as its client wants, the timeouts are for
// ordinary requests. It is the outermost layer, so it sees the connection's own
// ResponseWriter: a wrapper without Unwrap cannot set deadlines.
func streamDeadlines(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if strings.HasSuffix(r.URL.Path, ":watch") {
			rc := http.NewResponseController(w)
			_ = rc.SetWriteDeadline(time.Time{})
			_ = rc.SetReadDeadline(time.Time{})
		}
		next.ServeHTTP(w, r)
	})
}

// scrubHeaders drops header values gRPC metadata cannot carry and Grpc-Metadata-* headers
// whose names are not valid metadata keys.
func scrubHeaders(h http.Header) {
	const prefix = "grpc-metadata-"
	for k, vs := range h {
		// Only a Grpc-Metadata-* name is lowered (an allocation), not every header's.
		if len(k) >= len(prefix) && strings.EqualFold(k[:len(prefix)], prefix) && !validKey(strings.ToLower(k[len(prefix):])) {
			delete(h, k)
			continue
		}
		for _, v := range vs {
			if !validate.PrintableASCII(v, true) {
				delete(h, k)
				break
			}
		}
	}
}

func validKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

func tooLarge(w http.ResponseWriter, max int64) {
	// The client may still be sending; do not keep the connection for its next request.
	w.Header().Set("Connection", "close")
	writeError(w, http.StatusRequestEntityTooLarge, codes.ResourceExhausted,
		fmt.Sprintf("request body too large: at most %d bytes", max))
}
