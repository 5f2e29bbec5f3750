package e2e

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The memory acceptance probe through the gateway: store a few hundred memories over REST
// (embedded by the ai service's local embedder), search them with and without filters, and
// get decayed, explained, integrity-checked results.
func TestMemoryThroughTheGateway(t *testing.T) {
	topics := []string{"database connection pool", "authentication token refresh", "flaky watcher test", "docker image build", "css colour tokens"}
	for i := range 200 {
		topic := topics[i%len(topics)]
		typ := []string{"MEMORY_TYPE_DECISION", "MEMORY_TYPE_ERROR_PATTERN", "MEMORY_TYPE_SESSION", "MEMORY_TYPE_GENERAL"}[i%4]
		code, body := rest(t, http.MethodPost, "/v1/memories", token, map[string]any{
			"content": fmt.Sprintf("Note %d on the %s: finding %d about %s in the mesh.", i, topic, i*7, topic),
			"repo":    "local/memories", "type": typ, "tags": []string{fmt.Sprintf("t%d", i%3)},
		})
		if code != http.StatusOK {
			t.Fatalf("store %d: %d %v", i, code, body)
		}
	}
	start := time.Now()
	code, body := rest(t, http.MethodPost, "/v1/memories:search", token, map[string]any{"query": "authentication token refresh", "repo": "local/memories", "limit": 5})
	took := time.Since(start)
	if code != http.StatusOK {
		t.Fatalf("search: %d %v", code, body)
	}
	results, _ := body["results"].([]any)
	if len(results) != 5 {
		t.Fatalf("results %v", body)
	}
	for _, r := range results {
		m := r.(map[string]any)["memory"].(map[string]any)
		s := r.(map[string]any)["score"].(map[string]any)
		if !strings.Contains(m["content"].(string), "authentication token refresh") || s["reason"] == "" || s["decay"] == nil || m["content_hash"] == "" {
			t.Fatalf("result %v", r)
		}
	}
	t.Logf("search of 200 memories through the gateway: %s", took)

	// Filters: only decisions with tag t0.
	code, body = rest(t, http.MethodPost, "/v1/memories:search", token, map[string]any{"query": "authentication token refresh", "repo": "local/memories",
		"types": []string{"MEMORY_TYPE_DECISION"}, "tags": []string{"t0"}, "limit": 50})
	if code != http.StatusOK {
		t.Fatalf("filtered search: %d %v", code, body)
	}
	for _, r := range body["results"].([]any) {
		m := r.(map[string]any)["memory"].(map[string]any)
		if m["type"] != "MEMORY_TYPE_DECISION" || !strings.Contains(fmt.Sprint(m["tags"]), "t0") {
			t.Fatalf("filter let through %v", m)
		}
	}
	code, body = rest(t, http.MethodGet, "/v1/memories:stats?repo=local/memories", token, nil)
	if code != http.StatusOK || body["total"] != "200" {
		t.Fatalf("stats: %d %v", code, body)
	}
	// Bad input is a 400 naming the field.
	code, body = rest(t, http.MethodPost, "/v1/memories", token, map[string]any{"content": "   "})
	if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body["message"]), "content") {
		t.Fatalf("empty content: %d %v", code, body)
	}
}
