package e2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// The memory acceptance probe through the gateway: store a few hundred memories over REST
// (embedded by the ai service's local embedder), search them with and without filters, and
// get decayed, explained, integrity-checked results (a memory changed in SQL is left out
// and counted).
func TestMemoryThroughTheGateway(t *testing.T) {
	parallel(t)
	topics := []string{"database connection pool", "authentication token refresh", "flaky watcher test", "docker image build", "css colour tokens"}
	var authIDs []string
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
		if i%len(topics) == 1 {
			authIDs = append(authIDs, body["memory"].(map[string]any)["id"].(string))
		}
	}
	start := time.Now()
	code, body := rest(t, http.MethodPost, "/v1/memories:search", token, map[string]any{"query": "authentication token refresh", "repo": "local/memories", "limit": 5})
	took := time.Since(start)
	if code != http.StatusOK {
		t.Fatalf("search: %d %v", code, body)
	}
	results, _ := body["results"].([]any)
	if len(results) != 5 || body["embedding_model"] != "local@2" {
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
	// Integrity: a memory whose content is changed behind the service's back (here in SQL)
	// is never returned, and is counted.
	db, err := pgx.Connect(t.Context(), mesh.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close(context.Background())
	tampered := authIDs[0]
	if _, err := db.Exec(t.Context(), "UPDATE memory.memories SET content = content || ' (edited)' WHERE id = $1", tampered); err != nil {
		t.Fatal(err)
	}
	code, body = rest(t, http.MethodPost, "/v1/memories:search", token, map[string]any{"query": "authentication token refresh", "repo": "local/memories", "limit": 50})
	if code != http.StatusOK || body["integrity_failures"] == nil {
		t.Fatalf("search after tampering: %d %v", code, body)
	}
	for _, r := range body["results"].([]any) {
		if id := r.(map[string]any)["memory"].(map[string]any)["id"]; id == tampered {
			t.Fatalf("the tampered memory %s was returned", id)
		}
	}
	code, body = rest(t, http.MethodGet, "/v1/memories:stats?repo=local/memories", token, nil)
	if code != http.StatusOK || body["total"] != "200" || body["integrity_failures"] != "1" {
		t.Fatalf("stats: %d %v", code, body)
	}
	// The vectors name the built-in embedder's version, and nothing waits to be re-embedded.
	if emb, _ := body["memory_embedding"].(map[string]any); emb["active_model"] != "local@2" || emb["target_model"] != "local@2" ||
		emb["reembedded"] != "200" || emb["total"] != "200" || emb["reembed_enabled"] != true {
		t.Fatalf("stats: embedding status %v", body["memory_embedding"])
	}
	// Bad input is a 400 naming the field.
	code, body = rest(t, http.MethodPost, "/v1/memories", token, map[string]any{"content": "   "})
	if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body["message"]), "content") {
		t.Fatalf("empty content: %d %v", code, body)
	}
}
