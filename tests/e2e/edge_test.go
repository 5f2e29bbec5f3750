package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
)

// TestRESTProbes are the probes a new user ran against the REST edge: bad bytes and a huge
// body are 4xx answers with a clear message (or a fresh request id), never a 500.
func TestRESTProbes(t *testing.T) {
	parallel(t)
	cases := []struct {
		name, method, path string
		body               io.Reader
		header             map[string]string
		code               int
		in                 string // in the body
	}{
		{"NUL in a title", "POST", "/v1/tasks", strings.NewReader(`{"title":"a\u0000b","repo":"local/demo"}`), nil, 400, "title"},
		{"invalid UTF-8 in a path", "GET", "/v1/tasks/%FF", nil, nil, 400, "id"},
		{"tab in X-Request-Id", "GET", "/v1/tasks?page_size=1", nil, map[string]string{"X-Request-Id": "abc\tdef"}, 200, "{"},
		{"non-ASCII Authorization", "GET", "/v1/tasks", nil, map[string]string{"Authorization": "Bearer " + token + "\xc3\xa9"}, 401, "Authorization header"},
		{"50 MB body", "POST", "/v1/tasks", strings.NewReader(`{"title":"` + strings.Repeat("x", 50<<20) + `","repo":"local/demo"}`), nil, 413, "request body too large"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, err := http.NewRequest(tc.method, mesh.GatewayURL()+tc.path, tc.body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+token)
			for k, v := range tc.header {
				req.Header[k] = []string{v}
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code || !strings.Contains(string(raw), tc.in) {
				t.Fatalf("%d %.300s; want %d containing %q", resp.StatusCode, raw, tc.code, tc.in)
			}
			if !json.Valid(raw) {
				t.Errorf("not JSON: %.300s", raw)
			}
			if id := resp.Header.Get("X-Request-Id"); tc.header["X-Request-Id"] != "" && len(id) != 36 {
				t.Errorf("request id %q, want a fresh one", id)
			}
		})
	}
}
