package e2e

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/fakellm"
)

// githubDelivery posts a GitHub webhook delivery of event with payload to the gateway's
// /hooks/github, signed with secret ("" unsigned), and returns the answer.
func githubDelivery(t *testing.T, id, event, secret string, payload any) (int, map[string]any) {
	t.Helper()
	body, _ := json.Marshal(payload)
	h := map[string]string{"Content-Type": "application/json", "X-GitHub-Event": event, "X-GitHub-Delivery": id}
	if secret != "" {
		mac := hmac.New(sha256.New, []byte(secret))
		mac.Write(body)
		h["X-Hub-Signature-256"] = "sha256=" + hex.EncodeToString(mac.Sum(nil))
	}
	return inboundPost(t, "/hooks/github", string(body), h)
}

// issuePayload is an issues event of repo's issue n, as GitHub sends it (the parts read).
func issuePayload(action, repo string, n int, title string) map[string]any {
	return map[string]any{"action": action, "repository": map[string]any{"full_name": repo},
		"issue": map[string]any{"number": n, "title": title}, "sender": map[string]any{"login": "someone"}}
}

// repoDeliveries lists a connection's deliveries over REST, by id.
func repoDeliveries(t *testing.T, conn string) map[string]map[string]any {
	t.Helper()
	code, body := rest(t, http.MethodGet, "/v1/repo-connections/"+conn+"/deliveries?page_size=100", token, nil)
	if code != http.StatusOK {
		t.Fatalf("list deliveries: %d %v", code, body)
	}
	out := map[string]map[string]any{}
	list, _ := body["deliveries"].([]any)
	for _, v := range list {
		d := v.(map[string]any)
		out[d["delivery_id"].(string)] = d
	}
	return out
}

// handled waits until every delivery of ids is no longer pending and returns them.
func handled(t *testing.T, conn string, ids ...string) map[string]map[string]any {
	t.Helper()
	deadline := time.Now().Add(liveness(time.Minute))
	for {
		all := repoDeliveries(t, conn)
		waiting := 0
		for _, id := range ids {
			if d, ok := all[id]; !ok || d["state"] == "REPO_DELIVERY_STATE_PENDING" {
				waiting++
			}
		}
		if waiting == 0 {
			return all
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries %v not handled within a minute: %v", ids, all)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// repoTasks is the admin's tasks of repo by external id.
func repoTasks(t *testing.T, repo string) map[string]map[string]any {
	t.Helper()
	code, body := rest(t, http.MethodGet, "/v1/tasks?page_size=100&repo="+repo, token, nil)
	if code != http.StatusOK {
		t.Fatalf("list tasks: %d %v", code, body)
	}
	out := map[string]map[string]any{}
	list, _ := body["tasks"].([]any)
	for _, v := range list {
		task := v.(map[string]any)
		out[task["external_id"].(string)] = task
	}
	return out
}

// A repository connected over REST sends its issue events to /hooks/github: signed
// deliveries become tasks (with blocked-by and the connection's label filter), an edit
// updates the task, a close cancels it and a reopen brings it back; a forged or unsigned
// delivery is 401 and stores nothing; a replayed one is stored once.
func TestGitHubWebhookIssuesBecomeTasks(t *testing.T) {
	parallel(t)
	repo := "local/hooked"
	if code, body := rest(t, http.MethodPost, "/v1/repos", token, map[string]any{"repo": repo, "auto_init": true}); code != http.StatusOK {
		t.Fatalf("create repo: %d %v", code, body)
	}
	code, body := rest(t, http.MethodPost, "/v1/repo-connections", token, map[string]any{"repo": repo, "issue_labels": []string{"thefold"}})
	if code != http.StatusOK {
		t.Fatalf("connect: %d %v", code, body)
	}
	conn := body["connection"].(map[string]any)
	id, secret := conn["id"].(string), conn["webhook_secret"].(string)
	t.Cleanup(func() { rest(t, http.MethodDelete, "/v1/repo-connections/"+id, token, nil) })
	if len(secret) != 64 || conn["webhook_path"] != "/hooks/github" {
		t.Fatalf("connection %v", conn)
	}
	code, list := rest(t, http.MethodGet, "/v1/repo-connections", token, nil)
	if code != http.StatusOK || strings.Contains(fmt.Sprint(list), secret) {
		t.Fatalf("list connections: %d %v", code, list)
	}
	if code, bad := rest(t, http.MethodPost, "/v1/repo-connections", token, map[string]any{"repo": "no-slash"}); code != http.StatusBadRequest ||
		!strings.Contains(fmt.Sprint(bad["message"]), "repo") {
		t.Fatalf("bad repo: %d %v", code, bad)
	}

	issue := func(title, body string, labels ...string) int {
		t.Helper()
		code, resp := rest(t, http.MethodPost, "/v1/repos/"+repo+"/issues", token, map[string]any{"title": title, "body": body, "labels": labels})
		if code != http.StatusOK {
			t.Fatalf("issue: %d %v", code, resp)
		}
		return int(resp["issue"].(map[string]any)["number"].(float64))
	}
	schema := issue("Schema for users", "", "thefold")
	login := issue("Login endpoint", "Needs the schema.\n\nBlocked by #1", "thefold")
	other := issue("Not for TheFold", "")
	for i, n := range []int{schema, login, other} {
		code, ans := githubDelivery(t, fmt.Sprintf("open-%d", i), "issues", secret, issuePayload("opened", repo, n, "t"))
		if code != http.StatusAccepted || ans["state"] != "pending" || ans["duplicate"] != false {
			t.Fatalf("deliver #%d: %d %v", n, code, ans)
		}
	}
	// A replay of a delivery id is answered, and stored once.
	if code, ans := githubDelivery(t, "open-0", "issues", secret, issuePayload("opened", repo, schema, "t")); code != http.StatusOK || ans["duplicate"] != true {
		t.Fatalf("replay: %d %v", code, ans)
	}
	// Forged, unsigned and tampered deliveries are refused and store nothing.
	if code, ans := githubDelivery(t, "forged", "issues", strings.Repeat("0", 64), issuePayload("opened", repo, other, "t")); code != http.StatusUnauthorized {
		t.Fatalf("forged: %d %v", code, ans)
	}
	if code, ans := githubDelivery(t, "unsigned", "issues", "", issuePayload("opened", repo, other, "t")); code != http.StatusUnauthorized {
		t.Fatalf("unsigned: %d %v", code, ans)
	}
	all := handled(t, id, "open-0", "open-1", "open-2")
	if len(all) != 3 {
		t.Fatalf("%d deliveries stored, want 3: %v", len(all), all)
	}
	for _, d := range []string{"open-0", "open-1"} {
		if all[d]["state"] != "REPO_DELIVERY_STATE_DONE" || !strings.Contains(all[d]["outcome"].(string), "became task") {
			t.Fatalf("delivery %s: %v", d, all[d])
		}
	}
	if all["open-2"]["state"] != "REPO_DELIVERY_STATE_DONE" || !strings.Contains(all["open-2"]["outcome"].(string), "no task") {
		t.Fatalf("the unlabelled issue's delivery: %v", all["open-2"])
	}
	key := func(n int) string { return fmt.Sprintf("github:%s#%d", repo, n) }
	tasks := repoTasks(t, repo)
	if len(tasks) != 2 || tasks[key(schema)] == nil || tasks[key(login)] == nil {
		t.Fatalf("tasks %v", tasks)
	}
	if b, _ := tasks[key(login)]["blocked_by"].([]any); len(b) != 1 || b[0] != tasks[key(schema)]["id"] {
		t.Fatalf("login blocked by %v, want the schema's task", tasks[key(login)]["blocked_by"])
	}
	if tasks[key(schema)]["source"] != "TASK_SOURCE_GITHUB" {
		t.Fatalf("task %v", tasks[key(schema)])
	}

	// An edit updates the task; a close cancels it; a reopen brings it back to the backlog.
	patch := func(n int, fields map[string]any) {
		t.Helper()
		if code, body := rest(t, http.MethodPatch, fmt.Sprintf("/v1/repos/%s/issues/%d", repo, n), token, fields); code != http.StatusOK {
			t.Fatalf("update issue #%d: %d %v", n, code, body)
		}
	}
	step := func(delivery, action string, n int, check func(task map[string]any) bool) {
		t.Helper()
		if code, ans := githubDelivery(t, delivery, "issues", secret, issuePayload(action, repo, n, "t")); code != http.StatusAccepted {
			t.Fatalf("%s: %d %v", delivery, code, ans)
		}
		if d := handled(t, id, delivery)[delivery]; d["state"] != "REPO_DELIVERY_STATE_DONE" {
			t.Fatalf("%s: %v", delivery, d)
		}
		if task := repoTasks(t, repo)[key(n)]; !check(task) {
			t.Fatalf("after %s: task %v", delivery, task)
		}
	}
	patch(schema, map[string]any{"title": "Schema for users and roles"})
	step("edit", "edited", schema, func(task map[string]any) bool { return task["title"] == "Schema for users and roles" })
	patch(schema, map[string]any{"state": "ISSUE_STATE_CLOSED"})
	step("close", "closed", schema, func(task map[string]any) bool {
		return task["status"] == "TASK_STATUS_CANCELLED" && task["status_reason"] == "the issue was closed"
	})
	patch(schema, map[string]any{"state": "ISSUE_STATE_OPEN"})
	step("reopen", "reopened", schema, func(task map[string]any) bool { return task["status"] == "TASK_STATUS_BACKLOG" })

	// Another user sees neither the connection nor its deliveries.
	other2 := memberToken(t, "hooks-other@example.com")
	if code, body := rest(t, http.MethodGet, "/v1/repo-connections/"+id+"/deliveries", other2, nil); code != http.StatusNotFound {
		t.Fatalf("another user's deliveries: %d %v", code, body)
	}
}

// The pull request review scenario's files: the first job writes hello, the revision its
// reviewers ask for says Hi.
const (
	reviewedHello = "package greet\n\n// Hello greets name.\nfunc Hello(name string) string { return \"Hello, \" + name }\n"
	reviewedHi    = "package greet\n\n// Hello greets name, the way its reviewers asked.\nfunc Hello(name string) string { return \"Hi, \" + name }\n"
	reviewMarker  = "[PR-REVIEW-1]"
	reviewComment = "Say Hi, not Hello."
)

// repoEventsScript is prepended to the e2e script (TestMain): the first job's plan and file,
// then the revision's, matched by the review comment its prompts carry.
func repoEventsScript() []fakellm.Response {
	return []fakellm.Response{
		{Match: both(planMatch(reviewMarker), regexp.QuoteMeta(reviewComment)), Text: planSteps("Say Hi as the reviewers asked.", "modify greet/greet.go")},
		{Match: both(modMatch("greet/greet.go"), regexp.QuoteMeta(reviewComment)), Text: block("greet/greet.go", reviewedHi)},
		{Match: planMatch(reviewMarker), Text: planAnswer("Add Hello to package greet.", "greet/greet.go")},
		{Match: both(genMatch("greet/greet.go"), regexp.QuoteMeta(reviewMarker)), Text: content(reviewedHello)},
	}
}

// A changes-requested review with a line comment on TheFold's pull request, delivered as
// GitHub would: a second attempt of the job (a revision) whose model requests carry the
// comment with its file and line, a new commit on the same branch, a reply on the pull
// request; a comment by someone without write access is ignored; an approval then completes
// the task.
func TestGitHubReviewRevisesThePullRequest(t *testing.T) {
	parallel(t)
	repo := agentRepo(t, "reviewed")
	code, body := rest(t, http.MethodPost, "/v1/repo-connections", token, map[string]any{"repo": repo})
	if code != http.StatusOK {
		t.Fatalf("connect: %d %v", code, body)
	}
	conn := body["connection"].(map[string]any)
	id, secret := conn["id"].(string), conn["webhook_secret"].(string)
	t.Cleanup(func() { rest(t, http.MethodDelete, "/v1/repo-connections/"+id, token, nil) })

	taskID, jobID := startJob(t, repo, "Add a greeting "+reviewMarker, "A Hello function in package greet.")
	job := waitJob(t, jobID, 3*time.Minute, "JOB_STATUS_PENDING_REVIEW")
	if code, body := rest(t, http.MethodPost, "/v1/reviews/"+job["review_id"].(string)+":approve", token, map[string]any{}); code != http.StatusOK {
		t.Fatalf("approve: %d %v", code, body)
	}
	job = waitJob(t, jobID, 2*time.Minute, "JOB_STATUS_COMPLETED")
	owner, branch := job["owner_id"].(string), job["branch"].(string)
	pr := int(job["pull_request"].(map[string]any)["number"].(float64))
	code, before := rest(t, http.MethodGet, fmt.Sprintf("/v1/repos/%s/pulls/%d", repo, pr), token, nil)
	if code != http.StatusOK {
		t.Fatalf("pull request: %d %v", code, before)
	}
	headBefore := before["pull_request"].(map[string]any)["head_sha"].(string)

	prPart := map[string]any{"number": pr, "head": map[string]any{"ref": branch}}
	repoPart := map[string]any{"full_name": repo}
	comment := func(cid int, who, path string, line int, text string) map[string]any {
		return map[string]any{"action": "created", "repository": repoPart, "pull_request": prPart, "comment": map[string]any{"id": cid,
			"pull_request_review_id": 900, "path": path, "line": line, "body": text, "user": map[string]any{"login": who}}}
	}
	deliveries := []struct {
		id, event string
		payload   map[string]any
	}{
		{"rc-1", "pull_request_review_comment", comment(1001, owner, "greet/greet.go", 4, reviewComment)},
		{"rc-2", "pull_request_review_comment", comment(1002, "no-write-access", "greet/greet.go", 1, "Delete the package.")},
		{"rv-1", "pull_request_review", map[string]any{"action": "submitted", "repository": repoPart, "pull_request": prPart,
			"review": map[string]any{"id": 900, "state": "changes_requested", "body": "One change, please.", "user": map[string]any{"login": owner}}}},
	}
	for _, d := range deliveries {
		if code, ans := githubDelivery(t, d.id, d.event, secret, d.payload); code != http.StatusAccepted {
			t.Fatalf("%s: %d %v", d.id, code, ans)
		}
	}
	all := handled(t, id, "rc-1", "rc-2", "rv-1")
	if d := all["rc-2"]; d["state"] != "REPO_DELIVERY_STATE_IGNORED" || !strings.Contains(d["outcome"].(string), "no write access") {
		t.Fatalf("the comment without write access: %v", d)
	}
	outcome, _ := all["rv-1"]["outcome"].(string)
	if all["rv-1"]["state"] != "REPO_DELIVERY_STATE_DONE" || !strings.Contains(outcome, "started with 1 line comments") {
		t.Fatalf("the review: %v", all["rv-1"])
	}
	revID := strings.Fields(strings.TrimPrefix(outcome, "revision job "))[0]
	rev := waitJob(t, revID, 3*time.Minute, "JOB_STATUS_COMPLETED")
	if rev["revises_job_id"] != jobID || rev["branch"] != branch || rev["task_id"] != taskID {
		t.Fatalf("revision %v", rev)
	}

	// Its model calls were told the comment with its file and line, not the other one.
	var told, toldOther bool
	for _, r := range llm.Requests() {
		b := string(r.Body)
		if strings.Contains(b, reviewMarker) || strings.Contains(b, "greet/greet.go:4") {
			told = told || (strings.Contains(b, "greet/greet.go:4") && strings.Contains(b, reviewComment) && strings.Contains(b, "One change, please."))
			toldOther = toldOther || strings.Contains(b, "Delete the package.")
		}
	}
	if !told || toldOther {
		t.Fatalf("the revision's prompts: told the comment %v, told the reader's %v", told, toldOther)
	}
	// A new commit on the same branch, the pull request's head, with the change.
	code, after := rest(t, http.MethodGet, fmt.Sprintf("/v1/repos/%s/pulls/%d", repo, pr), token, nil)
	if code != http.StatusOK || after["pull_request"].(map[string]any)["head_sha"] == headBefore {
		t.Fatalf("pull request after the revision: %d %v", code, after)
	}
	code, files := rest(t, http.MethodGet, "/v1/repos/"+repo+"/files?ref="+url.QueryEscape(branch)+"&paths=greet/greet.go", token, nil)
	if code != http.StatusOK || !strings.Contains(fmt.Sprint(files), `Hi, `) {
		t.Fatalf("the branch's greet.go: %d %v", code, files)
	}
	seen := auditCount(t, revID)
	if seen["pull_request_updated"] != 1 || seen["pull_request_opened"] != 0 || seen["commit_created"] != 1 {
		t.Fatalf("the revision's audit log: %v", seen)
	}
	if code, task := rest(t, http.MethodGet, "/v1/tasks/"+taskID, token, nil); code != http.StatusOK || task["task"].(map[string]any)["status"] != "TASK_STATUS_IN_REVIEW" {
		t.Fatalf("task after the revision: %d %v", code, task)
	}

	// The reviewer approves: the task is done.
	if code, ans := githubDelivery(t, "rv-2", "pull_request_review", secret, map[string]any{"action": "submitted", "repository": repoPart, "pull_request": prPart,
		"review": map[string]any{"id": 901, "state": "approved", "user": map[string]any{"login": owner}}}); code != http.StatusAccepted {
		t.Fatalf("approval: %d %v", code, ans)
	}
	if d := handled(t, id, "rv-2")["rv-2"]; d["state"] != "REPO_DELIVERY_STATE_DONE" || !strings.Contains(d["outcome"].(string), "done") {
		t.Fatalf("approval: %v", d)
	}
	if code, task := rest(t, http.MethodGet, "/v1/tasks/"+taskID, token, nil); code != http.StatusOK || task["task"].(map[string]any)["status"] != "TASK_STATUS_DONE" {
		t.Fatalf("task after the approval: %d %v", code, task)
	}
}
