package e2e

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// The skills acceptance probe through the gateway: the built-in skills resolved for "add a
// SQL migration for users" on a Go repository are the migration and Go skills, within the
// budget; a post-run check of a file with an AWS-style key and InsecureSkipVerify: true
// reports both.
func TestSkillsThroughTheGateway(t *testing.T) {
	parallel(t)
	code, body := rest(t, http.MethodPost, "/v1/skills:resolve", token, map[string]any{
		"context":      map[string]any{"description": "add a SQL migration for users", "repo": "local/demo", "languages": []string{"go"}},
		"phase":        "SKILL_PHASE_INJECT",
		"token_budget": 3000,
	})
	if code != http.StatusOK {
		t.Fatalf("resolve: %d %v", code, body)
	}
	var got []string
	for _, s := range body["selected"].([]any) {
		got = append(got, s.(map[string]any)["name"].(string))
	}
	for _, want := range []string{"sql-migrations", "go-service-conventions", "go-error-handling"} {
		if !slices.Contains(got, want) {
			t.Errorf("%s not selected: %v", want, got)
		}
	}
	if used, _ := body["tokens_used"].(float64); used <= 0 || used > 3000 || slices.Contains(got, "typescript-strictness") {
		t.Fatalf("selected %v with %v tokens", got, body["tokens_used"])
	}

	file := "package cfg\n\nimport \"crypto/tls\"\n\nconst awsKey = \"AKIAQ3EGRJ7XKZ4P2WNM\"\n\nvar TLS = &tls.Config{InsecureSkipVerify: true}\n"
	code, body = rest(t, http.MethodPost, "/v1/skills:executePostRun", token, map[string]any{
		"context": map[string]any{"description": "add a TLS client", "repo": "local/demo"},
		"files":   []map[string]any{{"path": "internal/cfg/cfg.go", "content": file}},
	})
	if code != http.StatusOK || body["passed"] == true {
		t.Fatalf("post-run: %d %v", code, body)
	}
	var rules []string
	for _, d := range body["diagnostics"].([]any) {
		rules = append(rules, fmt.Sprint(d.(map[string]any)["rule"]))
	}
	all := strings.Join(rules, " ")
	if !strings.Contains(all, "secrets/") || !strings.Contains(all, "insecure-skip-verify") {
		t.Fatalf("post-run rules %v", rules)
	}

	// Bad input is a 400 naming the field.
	code, body = rest(t, http.MethodPost, "/v1/skills:resolve", token, map[string]any{"context": map[string]any{"description": "x"}, "token_budget": -1})
	if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(body["message"]), "token_budget") {
		t.Fatalf("negative budget: %d %v", code, body)
	}
}
