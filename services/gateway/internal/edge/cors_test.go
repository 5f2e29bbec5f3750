package edge

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestCORSPolicyConfig(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		origins []string
		wantErr string
		allowed []string
		refused []string
	}{
		{name: "none", origins: nil},
		{name: "blank entries are none", origins: []string{"", " "}},
		{name: "exact origins, normalized", origins: []string{"https://App.Example.com", " http://localhost:5173 ", "https://b.example.com:443", "http://[::1]:8080"},
			allowed: []string{"https://app.example.com", "http://localhost:5173", "https://b.example.com", "http://[::1]:8080"},
			refused: []string{"http://app.example.com", "https://app.example.com:8443", "https://evil.example.com", "http://localhost:5174", "null"}},
		{name: "wildcard alone", origins: []string{"*"}, allowed: []string{"https://anything.example", "null"}},
		{name: "wildcard with others", origins: []string{"*", "https://a.example"}, wantErr: `"*" must be the only entry`},
		{name: "path", origins: []string{"https://a.example/"}, wantErr: "scheme://host[:port] only"},
		{name: "query", origins: []string{"https://a.example?x=1"}, wantErr: "scheme://host[:port] only"},
		{name: "user", origins: []string{"https://u@a.example"}, wantErr: "scheme://host[:port] only"},
		{name: "no scheme", origins: []string{"a.example"}, wantErr: "want http://host"},
		{name: "other scheme", origins: []string{"ftp://a.example"}, wantErr: "want http://host"},
		{name: "wildcard host", origins: []string{"https://*.example.com"}, wantErr: "no wildcards"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := Limits{CORSOrigins: tc.origins}.Validate()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Validate() = %v, want an error containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			p, _ := newCORSPolicy(tc.origins)
			if len(tc.allowed) == 0 && len(tc.refused) == 0 {
				if p != nil {
					t.Fatalf("policy = %+v, want none", p)
				}
				return
			}
			for _, o := range tc.allowed {
				if !p.allows(o) {
					t.Errorf("%q refused", o)
				}
			}
			for _, o := range tc.refused {
				if p.allows(o) {
					t.Errorf("%q allowed", o)
				}
			}
		})
	}
}

// corsServe runs one request through cors (origins) in front of a handler that answers 200
// "next" with the X-Request-Id a real edge would have set.
func corsServe(t *testing.T, origins []string, req *http.Request) (*httptest.ResponseRecorder, bool) {
	t.Helper()
	reached := false
	next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached = true
		_, _ = w.Write([]byte("next"))
	})
	rec := httptest.NewRecorder()
	rec.Header().Set("X-Request-Id", "rid-1")
	cors(origins, next).ServeHTTP(rec, req)
	return rec, reached
}

func preflight(origin, method, headers string) *http.Request {
	req := httptest.NewRequest(http.MethodOptions, "/v1/tasks", nil)
	req.Header.Set("Origin", origin)
	req.Header.Set("Access-Control-Request-Method", method)
	if headers != "" {
		req.Header.Set("Access-Control-Request-Headers", headers)
	}
	return req
}

func TestCORSPreflight(t *testing.T) {
	t.Parallel()
	origins := []string{"https://app.example.com"}

	rec, reached := corsServe(t, origins, preflight("https://app.example.com", "PATCH", "authorization,content-type"))
	if reached || rec.Code != http.StatusNoContent {
		t.Fatalf("allowed preflight: code %d, reached next %v; want 204 answered by cors", rec.Code, reached)
	}
	h := rec.Header()
	for k, want := range map[string]string{
		"Access-Control-Allow-Origin":      "https://app.example.com",
		"Access-Control-Allow-Credentials": "true",
		"Access-Control-Allow-Methods":     "GET, POST, PATCH, PUT, DELETE",
		"Access-Control-Allow-Headers":     "Authorization, Content-Type, Last-Event-ID, X-Request-Id",
		"Access-Control-Max-Age":           corsMaxAge,
	} {
		if got := h.Get(k); got != want {
			t.Errorf("%s = %q, want %q", k, got, want)
		}
	}
	if vary := strings.Join(h.Values("Vary"), ", "); !strings.Contains(vary, "Origin") || !strings.Contains(vary, "Access-Control-Request-Headers") {
		t.Errorf("Vary = %q", vary)
	}

	rec, reached = corsServe(t, origins, preflight("https://evil.example.com", "DELETE", ""))
	if reached || rec.Code != http.StatusForbidden {
		t.Fatalf("refused preflight: code %d, reached next %v; want 403 answered by cors", rec.Code, reached)
	}
	if rec.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Error("refused preflight carries Access-Control-Allow-Origin")
	}
	var body errorBody
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("refused preflight body %q: %v", rec.Body, err)
	}
	if body.Status != "PERMISSION_DENIED" || body.RequestID != "rid-1" || !strings.Contains(body.Message, "https://evil.example.com") {
		t.Errorf("refused preflight body = %+v", body)
	}

	// An OPTIONS without Access-Control-Request-Method is not a preflight: it goes on.
	req := httptest.NewRequest(http.MethodOptions, "/v1/tasks", nil)
	req.Header.Set("Origin", "https://app.example.com")
	if _, reached := corsServe(t, origins, req); !reached {
		t.Error("plain OPTIONS did not reach next")
	}
}

func TestCORSActualRequests(t *testing.T) {
	t.Parallel()
	origins := []string{"https://app.example.com"}
	get := func(origin string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodGet, "/v1/tasks", nil)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		rec, reached := corsServe(t, origins, req)
		if !reached || rec.Code != http.StatusOK {
			t.Fatalf("GET with Origin %q: code %d, reached next %v", origin, rec.Code, reached)
		}
		return rec
	}

	h := get("https://app.example.com").Header()
	if h.Get("Access-Control-Allow-Origin") != "https://app.example.com" || h.Get("Access-Control-Allow-Credentials") != "true" ||
		h.Get("Access-Control-Expose-Headers") != "X-Request-Id, Retry-After, WWW-Authenticate" || h.Get("Vary") != "Origin" {
		t.Errorf("allowed origin: headers %v", h)
	}
	if h.Get("Access-Control-Allow-Methods") != "" {
		t.Error("actual response carries preflight headers")
	}

	h = get("https://evil.example.com").Header()
	if h.Get("Access-Control-Allow-Origin") != "" || h.Get("Access-Control-Expose-Headers") != "" || h.Get("Vary") != "Origin" {
		t.Errorf("other origin: headers %v, want only Vary: Origin", h)
	}

	h = get("").Header()
	for k := range h {
		if k != "X-Request-Id" && k != "Content-Type" {
			t.Errorf("no Origin: header %s set", k)
		}
	}

	// Not configured: untouched, whatever the Origin.
	req := httptest.NewRequest(http.MethodOptions, "/v1/tasks", nil)
	req.Header.Set("Origin", "https://app.example.com")
	req.Header.Set("Access-Control-Request-Method", "GET")
	rec, reached := corsServe(t, nil, req)
	if !reached || rec.Header().Get("Vary") != "" || rec.Header().Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("no origins configured: reached %v, headers %v", reached, rec.Header())
	}
}

func TestCORSWildcard(t *testing.T) {
	t.Parallel()
	rec, _ := corsServe(t, []string{"*"}, preflight("https://anything.example", "POST", "content-type"))
	if rec.Code != http.StatusNoContent || rec.Header().Get("Access-Control-Allow-Origin") != "*" {
		t.Fatalf("wildcard preflight: %d %v", rec.Code, rec.Header())
	}
	req := httptest.NewRequest(http.MethodGet, "/v1/tasks", nil)
	req.Header.Set("Origin", "https://anything.example")
	rec, _ = corsServe(t, []string{"*"}, req)
	h := rec.Header()
	if h.Get("Access-Control-Allow-Origin") != "*" || h.Get("Access-Control-Expose-Headers") == "" {
		t.Errorf("wildcard actual response: %v", h)
	}
	if h.Get("Access-Control-Allow-Credentials") != "" {
		t.Error("wildcard allows credentials")
	}
}
