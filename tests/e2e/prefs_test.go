package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// memberToken is a member's token for a user of its own (signed with the mesh's key), so
// that what a test changes of its preferences touches no other test's jobs.
func memberToken(t *testing.T, user string) string {
	t.Helper()
	return stackToken(t, mesh, user, false)
}

// Preferences over REST through the gateway: the defaults, a PATCH under a mask that
// changes what it names and nothing else, a bad mask refused naming its path, another
// member's NOT_FOUND and an admin's view of them.
func TestPrefsOverREST(t *testing.T) {
	parallel(t)
	user := fmt.Sprintf("prefs-%d", time.Now().UnixNano())
	tok := memberToken(t, user)
	code, body := rest(t, http.MethodGet, "/v1/preferences", tok, nil)
	p, _ := body["preferences"].(map[string]any)
	n, _ := p["notifications"].(map[string]any)
	if code != http.StatusOK || p["user_id"] != user || p["sub_agents_enabled"] != nil || p["budget_mode"] != "BUDGET_MODE_BALANCED" ||
		p["sub_agent_merge"] != "MERGE_STRATEGY_CONCATENATE" || p["update_time"] != nil ||
		n["review_ready"] != true || n["job_completed"] != true || n["job_failed"] != true || n["clarification"] != true {
		t.Fatalf("defaults: %d %v", code, body)
	}

	code, body = rest(t, http.MethodPatch, "/v1/preferences?update_mask=sub_agents_enabled", tok,
		map[string]any{"sub_agents_enabled": true, "budget_mode": "BUDGET_MODE_AGGRESSIVE_SAVE"})
	if p, _ := body["preferences"].(map[string]any); code != http.StatusOK || p["sub_agents_enabled"] != true || p["update_time"] == nil {
		t.Fatalf("patch: %d %v", code, body)
	}
	code, body = rest(t, http.MethodGet, "/v1/preferences", tok, nil)
	p, _ = body["preferences"].(map[string]any)
	if code != http.StatusOK || p["sub_agents_enabled"] != true || p["budget_mode"] != "BUDGET_MODE_BALANCED" {
		t.Fatalf("after the patch (only sub_agents_enabled changes): %d %v", code, body)
	}
	// Without a mask the body's fields are the mask.
	code, body = rest(t, http.MethodPatch, "/v1/preferences", tok, map[string]any{"job_budget": map[string]any{"max_cost_micros": "2500000"},
		"notifications": map[string]any{"review_ready": false}})
	p, _ = body["preferences"].(map[string]any)
	n, _ = p["notifications"].(map[string]any)
	if b, _ := p["job_budget"].(map[string]any); code != http.StatusOK || b["max_cost_micros"] != "2500000" || n["review_ready"] != nil ||
		n["job_failed"] != true || p["sub_agents_enabled"] != true {
		t.Fatalf("patch from the body: %d %v", code, body)
	}

	code, body = rest(t, http.MethodPatch, "/v1/preferences?update_mask=colour", tok, map[string]any{"sub_agents_enabled": false})
	raw, _ := json.Marshal(body)
	if code != http.StatusBadRequest || body["status"] != "INVALID_ARGUMENT" || !strings.Contains(string(raw), `\"colour\"`) ||
		!strings.Contains(string(raw), "update_mask") {
		t.Fatalf("a bad mask: %d %s", code, raw)
	}
	code, body = rest(t, http.MethodPatch, "/v1/preferences?update_mask=default_models.coding", tok,
		map[string]any{"default_models": map[string]any{"coding": "two words"}})
	fv, _ := body["field_violations"].([]any)
	if code != http.StatusBadRequest || len(fv) != 1 || fv[0].(map[string]any)["field"] != "preferences.default_models.coding" {
		t.Fatalf("a bad model id: %d %v", code, body)
	}

	// Another member's are not found; the admin reads them.
	other := memberToken(t, user+"-other")
	if code, body := rest(t, http.MethodGet, "/v1/preferences?user_id="+user, other, nil); code != http.StatusNotFound {
		t.Fatalf("another member reads them: %d %v", code, body)
	}
	if code, body := rest(t, http.MethodPatch, "/v1/preferences?update_mask=sub_agents_enabled", other,
		map[string]any{"user_id": user, "sub_agents_enabled": false}); code != http.StatusNotFound {
		t.Fatalf("another member changes them: %d %v", code, body)
	}
	code, body = rest(t, http.MethodGet, "/v1/preferences?user_id="+user, token, nil)
	if p, _ := body["preferences"].(map[string]any); code != http.StatusOK || p["user_id"] != user || p["sub_agents_enabled"] != true {
		t.Fatalf("the admin reads them: %d %v", code, body)
	}

	// The command line: get as JSON, set only what the flags name, and the API's refusal
	// by field with exit code 2.
	cfg := t.TempDir()
	env := []string{"THEFOLD_TOKEN=" + tok}
	out, errOut, exit := cli(t, cfg, env, "prefs", "get", "-o", "json")
	var got map[string]any
	if exit != 0 || json.Unmarshal([]byte(out), &got) != nil || got["user_id"] != user || got["sub_agents_enabled"] != true {
		t.Fatalf("prefs get -o json: %d %q %s", exit, out, errOut)
	}
	out, errOut, exit = cli(t, cfg, env, "prefs", "set", "--sub-agents", "off", "--model", "coding=claude-sonnet-4-5", "--notify", "job_failed=off", "-o", "json")
	got = nil
	if exit != 0 || json.Unmarshal([]byte(out), &got) != nil || got["sub_agents_enabled"] != nil ||
		got["default_models"].(map[string]any)["coding"] != "claude-sonnet-4-5" || got["job_budget"].(map[string]any)["max_cost_micros"] != "2500000" {
		t.Fatalf("prefs set: %d %q %s", exit, out, errOut)
	}
	if n, _ := got["notifications"].(map[string]any); n["job_failed"] != nil || n["job_completed"] != true {
		t.Fatalf("prefs set notifications: %v", got["notifications"])
	}
	if out, _, exit := cli(t, cfg, env, "prefs", "get"); exit != 0 || !strings.Contains(out, "claude-sonnet-4-5") || !strings.Contains(out, "$2.5000") {
		t.Fatalf("prefs get as a table: %d %q", exit, out)
	}
	if _, errOut, exit := cli(t, cfg, env, "prefs", "set", "--model", "review=two words"); exit != 2 || !strings.Contains(errOut, "preferences.default_models.review") {
		t.Fatalf("a model id the API refuses: %d %s", exit, errOut)
	}
	if _, errOut, exit := cli(t, cfg, env, "prefs", "get", "--user", user+"-other"); exit != 4 {
		t.Fatalf("another member's from the command line: %d %s", exit, errOut)
	}
}
