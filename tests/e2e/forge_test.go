package e2e

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The acceptance probe of the local forge, through the gateway's REST edge: create a
// repository, commit two files on a branch, open a pull request, read its diff, merge it —
// and plain `git clone` shows the merged files; a second pull request whose base moved
// takes the base in with mergeBase.
func TestLocalForgeThroughTheGateway(t *testing.T) {
	parallel(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	code, created := rest(t, http.MethodPost, "/v1/repos", token, map[string]any{"repo": "local/acceptance", "auto_init": true})
	if code != http.StatusOK {
		t.Fatalf("create repo: %d %v", code, created)
	}
	repo := created["repo"].(map[string]any)
	cloneURL, _ := repo["clone_url"].(string)
	if !strings.HasPrefix(cloneURL, "file://") {
		t.Fatalf("clone url %q", cloneURL)
	}
	if code, body := rest(t, http.MethodPost, "/v1/repos/local/acceptance/branches", token, map[string]any{"branch": "feature/health"}); code != http.StatusOK {
		t.Fatalf("branch: %d %v", code, body)
	}
	code, commit := rest(t, http.MethodPost, "/v1/repos/local/acceptance/commits", token, map[string]any{
		"branch": "feature/health", "message": "Add health and its test",
		"files": []map[string]any{
			{"path": "health.go", "action": "FILE_ACTION_CREATE", "content": "package acceptance\n\n// Health reports liveness.\nfunc Health() string { return \"ok\" }\n"},
			{"path": "health_test.go", "action": "FILE_ACTION_CREATE", "content": "package acceptance\n\nimport \"testing\"\n\nfunc TestHealth(t *testing.T) {\n\tif Health() != \"ok\" {\n\t\tt.Fatal(Health())\n\t}\n}\n"},
		},
	})
	if code != http.StatusOK {
		t.Fatalf("commit: %d %v", code, commit)
	}
	code, pr := rest(t, http.MethodPost, "/v1/repos/local/acceptance/pulls", token, map[string]any{"head": "feature/health", "title": "Health check"})
	if code != http.StatusOK {
		t.Fatalf("pull request: %d %v", code, pr)
	}
	number := pr["pull_request"].(map[string]any)["number"].(float64)
	if number != 1 {
		t.Fatalf("pull request number %v", number)
	}
	code, diff := rest(t, http.MethodGet, "/v1/repos/local/acceptance/pulls/1/diff", token, nil)
	if code != http.StatusOK {
		t.Fatalf("diff: %d %v", code, diff)
	}
	stats := diff["stats"].(map[string]any)
	if stats["files_changed"].(float64) != 2 || stats["additions"].(float64) != 13 {
		t.Fatalf("diff stats %v", stats)
	}
	files := diff["files"].([]any)
	if d := files[0].(map[string]any)["unified_diff"].(string); !strings.Contains(d, "+func Health() string") {
		t.Fatalf("diff of health.go:\n%s", d)
	}
	// The local forge runs no checks of its own: none on the head, through the REST edge.
	code, checks := rest(t, http.MethodGet, "/v1/repos/local/acceptance/pulls/1/checks", token, nil)
	if code != http.StatusOK || checks["state"] != "CHECK_STATE_NONE" || checks["head_sha"] == "" || checks["head_sha"] != diff["head_sha"] {
		t.Fatalf("checks: %d %v", code, checks)
	}
	if code, body := rest(t, http.MethodGet, "/v1/repos/local/acceptance/pulls/0/checks", token, nil); code != http.StatusBadRequest {
		t.Fatalf("checks of pull request 0: %d %v", code, body)
	}
	// A second pull request, from main before the first is merged: merging moves its base.
	if code, body := rest(t, http.MethodPost, "/v1/repos/local/acceptance/branches", token, map[string]any{"branch": "feature/docs"}); code != http.StatusOK {
		t.Fatalf("branch: %d %v", code, body)
	}
	if code, body := rest(t, http.MethodPost, "/v1/repos/local/acceptance/commits", token, map[string]any{
		"branch": "feature/docs", "message": "Add docs",
		"files": []map[string]any{{"path": "docs.md", "action": "FILE_ACTION_CREATE", "content": "# Docs\n"}},
	}); code != http.StatusOK {
		t.Fatalf("commit: %d %v", code, body)
	}
	code, docs := rest(t, http.MethodPost, "/v1/repos/local/acceptance/pulls", token, map[string]any{"head": "feature/docs", "title": "Docs"})
	if code != http.StatusOK || docs["pull_request"].(map[string]any)["number"].(float64) != 2 {
		t.Fatalf("second pull request: %d %v", code, docs)
	}
	docsHead := docs["pull_request"].(map[string]any)["head_sha"].(string)

	code, merged := rest(t, http.MethodPost, "/v1/repos/local/acceptance/pulls/1:merge", token, map[string]any{})
	if code != http.StatusOK {
		t.Fatalf("merge: %d %v", code, merged)
	}
	if state := merged["pull_request"].(map[string]any)["state"]; state != "PULL_REQUEST_STATE_MERGED" {
		t.Fatalf("state after merge %v", state)
	}

	dst := filepath.Join(t.TempDir(), "acceptance")
	cmd := exec.Command("git", "clone", "--quiet", cloneURL, dst)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "GIT_CONFIG_NOSYSTEM=1")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	for _, f := range []string{"health.go", "health_test.go", "README.md"} {
		if _, err := os.Stat(filepath.Join(dst, f)); err != nil {
			t.Errorf("the clone lacks %s: %v", f, err)
		}
	}
	log := exec.Command("git", "log", "--format=%s", "-1")
	log.Dir = dst
	out, err := log.Output()
	if err != nil || strings.TrimSpace(string(out)) != "Health check (#1)" {
		t.Fatalf("last commit %q %v", out, err)
	}

	// The base of the second pull request moved: updating its branch merges main into it (a
	// new head holding health.go), and a second update finds nothing to do.
	code, up := rest(t, http.MethodPost, "/v1/repos/local/acceptance/pulls/2:mergeBase", token, map[string]any{"expected_head_sha": docsHead})
	if code != http.StatusOK || up["updated"] != true {
		t.Fatalf("update branch: %d %v", code, up)
	}
	newHead, _ := up["pull_request"].(map[string]any)["head_sha"].(string)
	if newHead == "" || newHead == docsHead {
		t.Fatalf("head after the update %q (was %q)", newHead, docsHead)
	}
	show := exec.Command("git", "ls-remote", cloneURL, "refs/heads/feature/docs")
	show.Env = cmd.Env
	if out, err := show.Output(); err != nil || !strings.HasPrefix(string(out), newHead) {
		t.Fatalf("feature/docs in the repository: %q %v, want %s", out, err, newHead)
	}
	code, again := rest(t, http.MethodPost, "/v1/repos/local/acceptance/pulls/2:mergeBase", token, map[string]any{})
	if code != http.StatusOK || again["updated"] == true || again["pull_request"].(map[string]any)["head_sha"] != newHead {
		t.Fatalf("second update branch: %d %v", code, again)
	}
	if code, body := rest(t, http.MethodPost, "/v1/repos/local/acceptance/pulls/1:mergeBase", token, map[string]any{}); code != http.StatusBadRequest {
		t.Fatalf("update branch of a merged pull request: %d %v, want 400", code, body)
	}

	// Bad input at the edge: a path that escapes the repository is a 400 naming the field;
	// an unknown repository is a 404.
	code, bad := rest(t, http.MethodPost, "/v1/repos/local/acceptance/commits", token, map[string]any{
		"branch": "main", "message": "m", "files": []map[string]any{{"path": "../escape", "action": "FILE_ACTION_CREATE", "content": "x"}}})
	if code != http.StatusBadRequest || !strings.Contains(bad["message"].(string), "files[0].path") {
		t.Fatalf("path traversal: %d %v", code, bad)
	}
	if code, body := rest(t, http.MethodGet, "/v1/repos/local/nope/tree", token, nil); code != http.StatusNotFound {
		t.Fatalf("unknown repository: %d %v", code, body)
	}
}

// ImportIssues reads a repository's open issues from the github service: they become tasks
// with their blocked-by links, and a second import updates instead of duplicating.
func TestImportIssuesThroughTheMesh(t *testing.T) {
	parallel(t)
	if code, body := rest(t, http.MethodPost, "/v1/repos", token, map[string]any{"repo": "local/importing", "auto_init": true}); code != http.StatusOK {
		t.Fatalf("create repo: %d %v", code, body)
	}
	issue := func(title, body string) float64 {
		t.Helper()
		code, resp := rest(t, http.MethodPost, "/v1/repos/local/importing/issues", token, map[string]any{"title": title, "body": body, "labels": []string{"bug"}})
		if code != http.StatusOK {
			t.Fatalf("issue: %d %v", code, resp)
		}
		return resp["issue"].(map[string]any)["number"].(float64)
	}
	first := issue("Schema for users", "")
	issue("Login endpoint", "Needs the schema.\n\nBlocked by #1")
	code, imp := rest(t, http.MethodPost, "/v1/tasks:importIssues", token, map[string]any{"repo": "local/importing"})
	if code != http.StatusOK {
		t.Fatalf("import: %d %v", code, imp)
	}
	created, _ := imp["created"].([]any)
	if len(created) != 2 {
		t.Fatalf("created %v", imp)
	}
	ids := map[string]string{}
	var blocked []any
	for _, c := range created {
		task := c.(map[string]any)
		ids[task["title"].(string)] = task["id"].(string)
		if task["source"] != "TASK_SOURCE_GITHUB" || !strings.HasPrefix(task["external_id"].(string), "github:local/importing#") {
			t.Fatalf("imported task %v", task)
		}
		if task["title"] == "Login endpoint" {
			blocked, _ = task["blocked_by"].([]any)
		}
	}
	if len(blocked) != 1 || blocked[0] != ids["Schema for users"] {
		t.Fatalf("Login endpoint blocked by %v, want [%s]", blocked, ids["Schema for users"])
	}

	// A changed title updates the task; the other is skipped; nothing is duplicated.
	if code, body := rest(t, http.MethodPatch, "/v1/repos/local/importing/issues/1", token, map[string]any{"title": "Schema for users and roles"}); code != http.StatusOK {
		t.Fatalf("update issue %v: %d %v", first, code, body)
	}
	code, again := rest(t, http.MethodPost, "/v1/tasks:importIssues", token, map[string]any{"repo": "local/importing"})
	if code != http.StatusOK {
		t.Fatalf("second import: %d %v", code, again)
	}
	updated, _ := again["updated"].([]any)
	createdAgain, _ := again["created"].([]any)
	if len(createdAgain) != 0 || len(updated) != 1 || again["skipped"] != float64(1) {
		t.Fatalf("second import %v", again)
	}
	if u := updated[0].(map[string]any); u["id"] != ids["Schema for users"] || u["title"] != "Schema for users and roles" {
		t.Fatalf("updated %v", u)
	}
}
