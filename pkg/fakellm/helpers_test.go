package fakellm

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// answer is one HTTP exchange as a client sees it.
type answer struct {
	status int
	header http.Header
	raw    string
	body   map[string]any
}

func post(t *testing.T, url, path, body string) answer {
	t.Helper()
	return do(t, context.Background(), http.MethodPost, url+path, body)
}

func do(t *testing.T, ctx context.Context, method, url, body string) answer {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	a := answer{status: resp.StatusCode, header: resp.Header, raw: string(b)}
	_ = json.Unmarshal(b, &a.body) // raw and list answers are not objects
	return a
}

// get walks a decoded JSON value: keys for objects, ints for arrays.
func get(t *testing.T, v any, path ...any) any {
	t.Helper()
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				t.Fatalf("at %q: not an object: %v", k, v)
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				t.Fatalf("at [%d]: not an array that long: %v", k, v)
			}
			v = a[k]
		}
	}
	return v
}

// num reads a JSON number as an int.
func num(t *testing.T, v any, path ...any) int {
	t.Helper()
	f, ok := get(t, v, path...).(float64)
	if !ok {
		t.Fatalf("%v: not a number in %v", path, v)
	}
	return int(f)
}

func str(t *testing.T, v any, path ...any) string {
	t.Helper()
	s, ok := get(t, v, path...).(string)
	if !ok {
		t.Fatalf("%v: not a string in %v", path, v)
	}
	return s
}

// waitFor polls cond until it holds or a generous deadline passes: the condition decides,
// never the clock.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// mustJSON marshals v for building request bodies.
func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
