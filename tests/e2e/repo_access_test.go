package e2e

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
)

// Many people, one TheFold: a member cannot write to a repository an admin created
// (the REST probe, then git clone shows nothing of theirs), cannot squat another member's
// namespace, gets the same answers over gRPC, and the agent working for them cannot push
// where they may not.
func TestRepositoryAccessAcrossPeople(t *testing.T) {
	parallel(t)
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	n := time.Now().UnixNano()
	theirs := fmt.Sprintf("local/admins-%d", n)
	code, created := rest(t, http.MethodPost, "/v1/repos", token, map[string]any{"repo": theirs, "auto_init": true})
	if code != http.StatusOK {
		t.Fatalf("create repo: %d %v", code, created)
	}
	_, aliceEmail := newUser(t, "alice")
	alice, _ := login(t, aliceEmail, 0)
	bobID, bobEmail := newUser(t, "bob")
	bob, _ := login(t, bobEmail, 0)

	commit := map[string]any{"branch": "main", "message": "mine now",
		"files": []map[string]any{{"path": "owned.txt", "action": "FILE_ACTION_CREATE", "content": "alice was here\n"}}}
	if code, body := rest(t, http.MethodPost, "/v1/repos/"+theirs+"/commits", alice, commit); code != http.StatusForbidden {
		t.Fatalf("a member's commit to an admin's main = %d %v, want 403", code, body)
	}
	dir := filepath.Join(t.TempDir(), "clone")
	cloneURL := created["repo"].(map[string]any)["clone_url"].(string)
	if out, err := exec.Command("git", "clone", "-q", cloneURL, dir).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "owned.txt")); err == nil {
		t.Fatal("git clone shows the member's commit")
	}
	for _, probe := range []struct {
		method, path string
		body         map[string]any
	}{
		{http.MethodPost, "/v1/repos/" + theirs + "/branches", map[string]any{"branch": "b"}},
		{http.MethodPost, "/v1/repos/" + theirs + "/issues", map[string]any{"title": "t"}},
		{http.MethodPut, "/v1/repos/" + theirs + "/collaborators/" + bobID, map[string]any{"role": "REPO_ROLE_ADMIN"}},
	} {
		if code, got := rest(t, probe.method, probe.path, alice, probe.body); code != http.StatusForbidden {
			t.Fatalf("%s %s as a member = %d %v, want 403", probe.method, probe.path, code, got)
		}
	}

	// Namespaces: bob claims his; alice cannot create under it.
	ns := fmt.Sprintf("bob-%d", n%1_000_000)
	if code, body := rest(t, http.MethodPost, "/v1/namespaces", bob, map[string]any{"name": ns, "kind": "NAMESPACE_KIND_USER"}); code != http.StatusOK {
		t.Fatalf("claim namespace: %d %v", code, body)
	}
	if code, body := rest(t, http.MethodPost, "/v1/repos", alice, map[string]any{"repo": ns + "/squat"}); code != http.StatusForbidden {
		t.Fatalf("squatting another's namespace = %d %v, want 403", code, body)
	}
	if code, body := rest(t, http.MethodPost, "/v1/repos", bob, map[string]any{"repo": ns + "/app", "private": true, "auto_init": true}); code != http.StatusOK {
		t.Fatalf("bob creates in his namespace: %d %v", code, body)
	}
	if code, body := rest(t, http.MethodGet, "/v1/repos/"+ns+"/app", alice, nil); code != http.StatusNotFound {
		t.Fatalf("another's private repository = %d %v, want 404", code, body)
	}

	// The same over gRPC.
	repos := githubv1.NewRepoServiceClient(dial(t, "github"))
	_, err := repos.CreatePullRequest(bearer(t.Context(), alice), &githubv1.CreatePullRequestRequest{Repo: theirs, Head: "main", Title: "x"})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("CreatePullRequest over gRPC as a member: %v, want PermissionDenied", err)
	}

	// The agent acts with its task owner's rights: alice's job on the admin's repository
	// fails, saying why, and pushes nothing.
	code, task := rest(t, http.MethodPost, "/v1/tasks", alice, map[string]any{"title": "Take over", "repo": theirs})
	if code != http.StatusOK {
		t.Fatalf("create task: %d %v", code, task)
	}
	code, job := rest(t, http.MethodPost, "/v1/jobs", alice, map[string]any{"task_id": task["task"].(map[string]any)["id"]})
	if code != http.StatusOK {
		t.Fatalf("start job: %d %v", code, job)
	}
	id := job["job"].(map[string]any)["id"].(string)
	deadline := time.Now().Add(liveness(3 * time.Minute))
	for {
		code, got := rest(t, http.MethodGet, "/v1/jobs/"+id, alice, nil)
		if code != http.StatusOK {
			t.Fatalf("get job: %d %v", code, got)
		}
		j := got["job"].(map[string]any)
		st, _ := j["status"].(string)
		if st == "JOB_STATUS_FAILED" {
			if msg := fmt.Sprint(j["error"], j["status_reason"]); !strings.Contains(msg, "may not write to "+theirs) {
				t.Fatalf("the job failed for another reason: %v", msg)
			}
			break
		}
		if st == "JOB_STATUS_COMPLETED" || st == "JOB_STATUS_HUMAN_NEEDED" || st == "JOB_STATUS_CANCELLED" {
			t.Fatalf("alice's job on the admin's repository ended %s", st)
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s after 3 minutes", id, st)
		}
		time.Sleep(200 * time.Millisecond)
	}
	code, pulls := rest(t, http.MethodGet, "/v1/repos/"+theirs+"/pulls", token, nil)
	if prs, _ := pulls["pull_requests"].([]any); code != http.StatusOK || len(prs) != 0 {
		t.Fatalf("pull requests on the admin's repository: %d %v", code, pulls)
	}
}
