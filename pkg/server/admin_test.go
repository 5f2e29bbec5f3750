package server

import (
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/thefold/thefold/pkg/auth"
)

// TestProfilingIsOptIn: /debug/pprof/ is on the admin port only with THEFOLD_PPROF, and then
// serves the runtime's profiles.
func TestProfilingIsOptIn(t *testing.T) {
	t.Parallel()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, on := range []bool{false, true} {
		s, err := New(Options{
			Name: "test", Auth: auth.NewAuthenticator(auth.NewVerifier(pub)),
			Logger: slog.New(slog.DiscardHandler), Config: Config{Profiling: on},
		})
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(s.adminHandler())
		for path, want := range map[string]string{"/debug/pprof/": "goroutine", "/debug/pprof/goroutine?debug=1": "goroutine profile"} {
			resp, err := http.Get(srv.URL + path)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			switch {
			case on && (resp.StatusCode != http.StatusOK || !strings.Contains(string(body), want)):
				t.Errorf("profiling on: GET %s = %d, want 200 with %q", path, resp.StatusCode, want)
			case !on && resp.StatusCode != http.StatusNotFound:
				t.Errorf("profiling off: GET %s = %d, want 404", path, resp.StatusCode)
			}
		}
		srv.Close()
	}
}
