package edge

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/auth"
)

func TestParseRate(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]Rate{
		"":               {},
		"off":            {},
		"0":              {},
		"10/s":           {PerSecond: 10, Burst: 20},
		"120/m":          {PerSecond: 2, Burst: 4},
		"36/h":           {PerSecond: 0.01, Burst: 1},
		"5/s,burst=50":   {PerSecond: 5, Burst: 50},
		" 5/s, burst=7 ": {PerSecond: 5, Burst: 7},
	} {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %+v, %v; want %+v", in, got, err, want)
		}
	}
	for _, bad := range []string{"10", "10/d", "-1/s", "x/s", "10/s,burst=0", "10/s,bust=3", "NaN/s", "Inf/s"} {
		if _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) accepted", bad)
		}
	}
}

// limited serves ok through rateLimit as the real edge stacks it (request ids first).
func limited(lim RateLimits) http.Handler {
	ok := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	return withRequestID(rateLimit(lim, ok))
}

func get(h http.Handler, path, addr, tok string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodGet, path, nil)
	req.RemoteAddr = addr
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

func TestRateLimitPerUser(t *testing.T) {
	t.Parallel()
	pub, priv, _ := ed25519.GenerateKey(rand.Reader)
	signer := auth.NewSigner(priv)
	alice, _, _ := signer.Issue("alice", []string{auth.RoleUser}, time.Hour)
	alice2, _, _ := signer.Issue("alice", []string{auth.RoleUser}, time.Hour) // another token, same user
	bob, _, _ := signer.Issue("bob", []string{auth.RoleUser}, time.Hour)
	h := limited(RateLimits{PerUser: Rate{PerSecond: 0.5, Burst: 2}, Verifier: auth.NewVerifier(pub)})

	for i := range 2 {
		if rec := get(h, "/v1/tasks", "10.0.0.1:1000", alice); rec.Code != http.StatusOK {
			t.Fatalf("request %d: %d", i, rec.Code)
		}
	}
	// The user's budget is spent, whichever token or address they use.
	rec := get(h, "/v1/tasks", "10.0.0.2:1000", alice2)
	if rec.Code != http.StatusTooManyRequests {
		t.Fatalf("third request of alice = %d, want 429", rec.Code)
	}
	if ra := rec.Header().Get("Retry-After"); ra != "2" {
		t.Errorf("Retry-After = %q, want 2 (one request every 2 s)", ra)
	}
	var body errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.Status != "RESOURCE_EXHAUSTED" || body.Code != 8 ||
		body.RequestID == "" || body.RequestID != rec.Header().Get("X-Request-Id") {
		t.Fatalf("429 body = %s (%v)", rec.Body, err)
	}
	// Another user has their own budget; refused requests spent nothing of it.
	if rec := get(h, "/v1/tasks", "10.0.0.1:1000", bob); rec.Code != http.StatusOK {
		t.Fatalf("bob = %d", rec.Code)
	}
	// Probes are never limited; an invalid token has no user budget (the service refuses it).
	if rec := get(h, "/healthz", "10.0.0.1:1000", alice); rec.Code != http.StatusOK {
		t.Fatalf("/healthz = %d", rec.Code)
	}
	for range 5 {
		if rec := get(h, "/v1/tasks", "10.0.0.1:1000", "garbage"); rec.Code != http.StatusOK {
			t.Fatalf("invalid token = %d, want it passed to the service", rec.Code)
		}
	}
	// API keys are limited by key.
	for i := range 3 {
		rec := get(h, "/v1/tasks", "10.0.0.3:1000", auth.APIKeyPrefix+"abc")
		if want := map[bool]int{true: http.StatusOK, false: http.StatusTooManyRequests}[i < 2]; rec.Code != want {
			t.Fatalf("API key request %d = %d, want %d", i, rec.Code, want)
		}
	}
}

func TestRateLimitPerAddress(t *testing.T) {
	t.Parallel()
	h := limited(RateLimits{PerAddress: Rate{PerSecond: 1, Burst: 3}})
	for i := range 3 {
		if rec := get(h, "/v1/tasks", "192.0.2.7:4000", ""); rec.Code != http.StatusOK {
			t.Fatalf("request %d: %d", i, rec.Code)
		}
	}
	rec := get(h, "/v1/tasks", "192.0.2.7:4001", "") // another port, same address
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") != "1" {
		t.Fatalf("fourth request = %d, Retry-After %q; want 429, 1", rec.Code, rec.Header().Get("Retry-After"))
	}
	if rec := get(h, "/v1/tasks", "192.0.2.8:4000", ""); rec.Code != http.StatusOK {
		t.Fatalf("another address = %d", rec.Code)
	}
	time.Sleep(1100 * time.Millisecond) // the bucket refills
	if rec := get(h, "/v1/tasks", "192.0.2.7:4000", ""); rec.Code != http.StatusOK {
		t.Fatalf("after a second = %d", rec.Code)
	}
}

func TestNoRateLimitsIsThePlainHandler(t *testing.T) {
	t.Parallel()
	h := limited(RateLimits{})
	for range 100 {
		if rec := get(h, "/v1/tasks", "192.0.2.7:4000", ""); rec.Code != http.StatusOK {
			t.Fatalf("%d with no limits", rec.Code)
		}
	}
}

func TestClientAddressBehindTrustedProxies(t *testing.T) {
	t.Parallel()
	trusted, err := ParseProxies([]string{"10.0.0.0/8", " 192.0.2.1 ", ""})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		remote, xff, want string
	}{
		{"203.0.113.9:5000", "198.51.100.1", "203.0.113.9"},                   // not a proxy: the header is the client's word
		{"10.1.2.3:5000", "", "10.1.2.3"},                                     // a proxy without a header
		{"10.1.2.3:5000", "198.51.100.1", "198.51.100.1"},                     // one proxy
		{"10.1.2.3:5000", "6.6.6.6, 198.51.100.1, 192.0.2.1", "198.51.100.1"}, // spoofed left, two proxies
		{"192.0.2.1:5000", "10.9.9.9", "10.9.9.9"},                            // only proxies: the farthest
	} {
		req := httptest.NewRequest(http.MethodGet, "/v1/tasks", nil)
		req.RemoteAddr = tc.remote
		if tc.xff != "" {
			req.Header.Set("X-Forwarded-For", tc.xff)
		}
		if got := clientAddress(req, trusted); got != tc.want {
			t.Errorf("clientAddress(%s, %q) = %s, want %s", tc.remote, tc.xff, got, tc.want)
		}
	}
	if _, err := ParseProxies([]string{"proxy.example.com"}); err == nil {
		t.Error("a host name accepted as a trusted proxy")
	}
	// Behind a trusted proxy, each client has its own budget.
	h := limited(RateLimits{PerAddress: Rate{PerSecond: 1, Burst: 1}, TrustedProxies: trusted})
	for _, client := range []string{"198.51.100.1", "198.51.100.2"} {
		req := httptest.NewRequest(http.MethodGet, "/v1/tasks", nil)
		req.RemoteAddr = "10.1.2.3:5000"
		req.Header.Set("X-Forwarded-For", client)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("client %s behind the proxy = %d", client, rec.Code)
		}
	}
}
