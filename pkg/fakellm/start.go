package fakellm

import (
	"net/http/httptest"
	"testing"
)

// Start serves s on a loopback port for the test's lifetime and returns the server and its
// base URL without /v1 (Anthropic and Gemini SDKs take it as is; OpenAI's takes base+"/v1").
// An invalid script fails the test at once instead of answering 500 later.
func Start(tb testing.TB, s *Script, opts ...Option) (*Server, string) {
	tb.Helper()
	if s != nil {
		if err := s.Validate(); err != nil {
			tb.Fatalf("fakellm: %v", err)
		}
	}
	srv := New(s, opts...)
	ts := httptest.NewServer(srv)
	tb.Cleanup(ts.Close)
	return srv, ts.URL
}
