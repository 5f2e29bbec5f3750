package console

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/status"
)

// inlineHandler finds an inline event handler attribute (onclick=…), which the CSP forbids.
var inlineHandler = regexp.MustCompile(`\son[a-z]+\s*=`)

// unreachable is a connection no request of these tests may use: every answer here comes
// before the session routes would call the AuthService.
type unreachable struct{ grpc.ClientConnInterface }

func newMux(t *testing.T) *http.ServeMux {
	t.Helper()
	h, err := New(unreachable{}, func(w http.ResponseWriter, _ *http.Request, err error) {
		st := status.Convert(err)
		code := map[string]int{"InvalidArgument": 400, "Unauthenticated": 401, "PermissionDenied": 403, "NotFound": 404}[st.Code().String()]
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(map[string]string{"status": st.Code().String(), "message": st.Message()})
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for p, hd := range h.Routes() {
		mux.Handle(p, hd)
	}
	return mux
}

func do(mux http.Handler, method, path, body string, headers map[string]string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	return rec
}

// Every page route answers the application with the strict policy; assets have their types.
func TestPagesAndAssets(t *testing.T) {
	mux := newMux(t)
	for _, p := range []string{"/", "/signin", "/tasks", "/tasks/0b7f6a5e-1", "/repos/local/demo", "/repos/local/demo/pulls/3", "/models", "/skills", "/settings"} {
		rec := do(mux, "GET", p, "", nil)
		if rec.Code != 200 || !strings.Contains(rec.Body.String(), `<script type="module" src="/assets/app.js">`) {
			t.Fatalf("GET %s = %d %.80q", p, rec.Code, rec.Body.String())
		}
		if got := rec.Header().Get("Content-Security-Policy"); got != CSP {
			t.Fatalf("GET %s: CSP %q", p, got)
		}
		if strings.Contains(rec.Body.String(), "<script>") || inlineHandler.MatchString(rec.Body.String()) {
			t.Fatalf("GET %s: inline script in the page", p)
		}
	}
	if !strings.Contains(CSP, "script-src 'self';") || strings.Contains(CSP, "unsafe") {
		t.Fatalf("CSP %q allows more than the console's own scripts", CSP)
	}
	for file, ctype := range map[string]string{"app.js": "text/javascript", "app.css": "text/css"} {
		rec := do(mux, "GET", "/assets/"+file, "", nil)
		if rec.Code != 200 || !strings.HasPrefix(rec.Header().Get("Content-Type"), ctype) || rec.Header().Get("Content-Security-Policy") != CSP {
			t.Fatalf("GET /assets/%s = %d %q", file, rec.Code, rec.Header().Get("Content-Type"))
		}
	}
	for _, p := range []string{"/assets/nope.js", "/assets/index.html", "/assets/..%2fconsole.go"} {
		if rec := do(mux, "GET", p, "", nil); rec.Code != 404 {
			t.Fatalf("GET %s = %d, want 404", p, rec.Code)
		}
	}
}

// The session routes refuse what another site's page could send, before anything else.
func TestSessionRoutesRefuseCrossSiteRequests(t *testing.T) {
	mux := newMux(t)
	body := `{"email":"a@example.com","code":"123456"}`
	for name, headers := range map[string]map[string]string{
		"no console header":  {},
		"wrong header value": {CSRFHeader: "yes"},
		"another origin":     {CSRFHeader: "1", "Origin": "https://evil.example"},
		"a null origin":      {CSRFHeader: "1", "Origin": "null"},
		"cross-site fetch":   {CSRFHeader: "1", "Sec-Fetch-Site": "cross-site"},
		"same-site fetch":    {CSRFHeader: "1", "Sec-Fetch-Site": "same-site"},
	} {
		for _, path := range []string{"/console/session", "/console/session/refresh", "/console/session/sign-out"} {
			rec := do(mux, "POST", path, body, headers)
			if rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), "PermissionDenied") {
				t.Fatalf("%s: POST %s = %d %s", name, path, rec.Code, rec.Body.String())
			}
		}
	}
	if rec := do(mux, "GET", "/console/session", "", nil); rec.Code != http.StatusMethodNotAllowed {
		t.Fatalf("GET /console/session = %d, want 405", rec.Code)
	}
}

// Malformed sign-ins are refused with the field named, before the AuthService is asked.
func TestSignInRefusesMalformedBodies(t *testing.T) {
	mux := newMux(t)
	same := map[string]string{CSRFHeader: "1", "Origin": "http://example.com", "Sec-Fetch-Site": "same-origin"}
	for body, want := range map[string]string{
		``:                                   "JSON object",
		`{`:                                  "body:",
		`[]`:                                 "body:",
		`{"email":"a@example.com"}`:          "code",
		`{"code":"123456"}`:                  "email",
		`{"email":" ","code":"1"}`:           "email",
		`{"email":"a@b.c","code":"1","x":1}`: "unknown field",
		`{"email":"a@b.c","code":"1"} {}`:    "one JSON object",
	} {
		rec := do(mux, "POST", "/console/session", body, same)
		if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), want) {
			t.Fatalf("body %q = %d %s; want 400 naming %q", body, rec.Code, rec.Body.String(), want)
		}
	}
}

// Without the cookie there is no session to refresh (401), and signing out still clears it.
func TestRefreshAndSignOutWithoutACookie(t *testing.T) {
	mux := newMux(t)
	same := map[string]string{CSRFHeader: "1"}
	if rec := do(mux, "POST", "/console/session/refresh", "", same); rec.Code != http.StatusUnauthorized {
		t.Fatalf("refresh without a cookie = %d %s", rec.Code, rec.Body.String())
	}
	rec := do(mux, "POST", "/console/session/sign-out", "", same)
	if rec.Code != http.StatusNoContent {
		t.Fatalf("sign-out without a cookie = %d", rec.Code)
	}
	c := rec.Result().Cookies()
	if len(c) != 1 || c[0].Name != CookieName || c[0].MaxAge >= 0 || !c[0].HttpOnly || !c[0].Secure || c[0].SameSite != http.SameSiteStrictMode || c[0].Path != "/" {
		t.Fatalf("sign-out cookie %+v; want %s cleared, HttpOnly, Secure, SameSite=Strict, Path=/", c, CookieName)
	}
	_, _ = io.Copy(io.Discard, rec.Body)
}
