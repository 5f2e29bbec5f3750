package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/fakellm"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
)

// The agent tests' tasks carry a marker in their titles; the scripted answers of their
// plans and files match it, so each scenario gets its own answers.

// planAnswer is a PlanTask answer creating files (path → description).
func planAnswer(summary string, paths ...string) string {
	var steps []map[string]any
	for i, p := range paths {
		steps = append(steps, map[string]any{"id": fmt.Sprintf("s%d", i+1), "action": "create", "path": p, "description": "write " + p, "depends_on": []string{}})
	}
	b, _ := json.Marshal(map[string]any{"summary": summary, "steps": steps})
	return string(b)
}

func diagnosisAnswer(category, reason string) string {
	b, _ := json.Marshal(map[string]any{"category": category, "reason": reason, "recommended_recovery": "scripted"})
	return string(b)
}

// planMatch matches the planning prompt of the task whose title holds marker.
func planMatch(marker string) string { return `(?s)# Job: plan a task.*` + regexp.QuoteMeta(marker) }

// The acceptance task's files.
const (
	agentGoMod = "module example.com/agentdemo\n\ngo 1.22\n"
	greetGo    = "package greet\n\n// Hello greets name.\nfunc Hello(name string) string { return \"Hello, \" + name }\n"
	byeGo      = "package greet\n\n// Bye says goodbye to name.\nfunc Bye(name string) string { return \"Bye, \" + name }\n"
)

// agentScript is prepended to the e2e script (TestMain): the answers of the agent's
// scenarios, and generic complexity and review answers for every job.
func agentScript() []fakellm.Response {
	return []fakellm.Response{
		{Match: planMatch("[AGENT-ACCEPT-1]"), Text: planAnswer("Add Hello to package greet.", "greet/greet.go")},
		{Match: genMatch("greet/greet.go"), Text: content(greetGo)},
		{Match: planMatch("[AGENT-ACCEPT-2]"), Text: planAnswer("Add Bye to package greet.", "greet/bye.go")},
		{Match: genMatch("greet/bye.go"), Text: content(byeGo)},
		{Match: "# Job: assess complexity", Text: `{"complexity": 3, "tier": 1, "tags": ["coding"], "budget_mode": "balanced", "estimated_tokens": 4000, "reasoning": "one small file"}`},
		{Match: "# Job: review code", Text: `{"quality_score": 8, "concerns": [], "documentation": "Adds the function with a doc comment.", "summary": "Small, correct change.", "memories_extracted": ["Package greet keeps one exported function per file."]}`},
	}
}

// agentRepo creates a local-forge repository holding a Go module on main.
func agentRepo(t *testing.T, name string) string {
	t.Helper()
	repo := "local/" + name
	if code, body := rest(t, http.MethodPost, "/v1/repos", token, map[string]any{"repo": repo, "auto_init": true}); code != http.StatusOK {
		t.Fatalf("create repo: %d %v", code, body)
	}
	code, body := rest(t, http.MethodPost, "/v1/repos/"+repo+"/commits", token, map[string]any{
		"branch": "main", "message": "Go module",
		"files": []map[string]any{{"path": "go.mod", "action": "FILE_ACTION_CREATE", "content": agentGoMod}},
	})
	if code != http.StatusOK {
		t.Fatalf("commit go.mod: %d %v", code, body)
	}
	return repo
}

// startJob creates a task over REST and starts a job for it; it returns the job's id.
func startJob(t *testing.T, repo, title, description string) (taskID, jobID string) {
	t.Helper()
	code, task := rest(t, http.MethodPost, "/v1/tasks", token, map[string]any{"title": title, "repo": repo, "description": description})
	if code != http.StatusOK {
		t.Fatalf("create task: %d %v", code, task)
	}
	taskID = task["task"].(map[string]any)["id"].(string)
	code, job := rest(t, http.MethodPost, "/v1/jobs", token, map[string]any{"task_id": taskID})
	if code != http.StatusOK {
		t.Fatalf("start job: %d %v", code, job)
	}
	return taskID, job["job"].(map[string]any)["id"].(string)
}

// waitJob polls the job over REST until its status is one of want (any terminal status or
// HUMAN_NEEDED otherwise fails the test).
func waitJob(t *testing.T, id string, timeout time.Duration, want ...string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var job map[string]any
	for {
		code, got := rest(t, http.MethodGet, "/v1/jobs/"+id, token, nil)
		if code != http.StatusOK {
			t.Fatalf("get job: %d %v", code, got)
		}
		job = got["job"].(map[string]any)
		st, _ := job["status"].(string)
		for _, w := range want {
			if st == w {
				return job
			}
		}
		switch st {
		case "JOB_STATUS_COMPLETED", "JOB_STATUS_FAILED", "JOB_STATUS_CANCELLED", "JOB_STATUS_SKIPPED", "JOB_STATUS_REJECTED", "JOB_STATUS_HUMAN_NEEDED":
			t.Fatalf("job %s is %s (%v), want %v; error %v", id, st, job["status_reason"], want, job["error"])
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s still %s in phase %v after %s, want %v", id, st, job["phase"], timeout, want)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// planPrompts are the recorded planning prompts that mention marker.
func planPrompts(marker string) []string {
	var out []string
	for _, r := range llm.Requests() {
		if b := string(r.Body); strings.Contains(b, "# Job: plan a task") && strings.Contains(b, marker) {
			out = append(out, b)
		}
	}
	return out
}

// TestAgentAcceptance is the acceptance through the gateway: a task on a local
// repository reaches PENDING_REVIEW with a diff that builds; approving it opens a pull
// request whose branch plain git clones and builds; the next task of the same kind gets a
// strategy hint in its plan.
func TestAgentAcceptance(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	repo := agentRepo(t, "agent-accept")
	taskID, jobID := startJob(t, repo, "Add a Hello function to the greet package [AGENT-ACCEPT-1]", "Hello(name) returns a greeting for name.")
	job := waitJob(t, jobID, 3*time.Minute, "JOB_STATUS_PENDING_REVIEW")
	reviewID := job["review_id"].(string)
	code, got := rest(t, http.MethodGet, "/v1/reviews/"+reviewID, token, nil)
	if code != http.StatusOK {
		t.Fatalf("get review: %d %v", code, got)
	}
	review := got["review"].(map[string]any)
	files, _ := review["files"].([]any)
	if len(files) != 1 {
		t.Fatalf("review files = %v", files)
	}
	f := files[0].(map[string]any)
	diff := f["diff"].(map[string]any)
	if diff["path"] != "greet/greet.go" || !strings.Contains(diff["unified_diff"].(string), "+func Hello(name string) string") || f["content"] != greetGo {
		t.Fatalf("review file = %v", f)
	}
	if review["quality_score"].(float64) != 8 || review["status"] != "REVIEW_STATUS_PENDING" {
		t.Fatalf("review = %v", review)
	}
	// The task waits in review.
	if code, task := rest(t, http.MethodGet, "/v1/tasks/"+taskID, token, nil); code != http.StatusOK || task["task"].(map[string]any)["status"] != "TASK_STATUS_IN_REVIEW" {
		t.Fatalf("task during review: %d %v", code, task)
	}

	if code, body := rest(t, http.MethodPost, "/v1/reviews/"+reviewID+":approve", token, map[string]any{"comment": "ship it"}); code != http.StatusOK {
		t.Fatalf("approve: %d %v", code, body)
	}
	job = waitJob(t, jobID, 2*time.Minute, "JOB_STATUS_COMPLETED")
	pr, _ := job["pull_request"].(map[string]any)
	branch, _ := job["branch"].(string)
	if pr == nil || pr["number"] == nil || !strings.HasPrefix(branch, "thefold/") {
		t.Fatalf("completed job without a pull request: %v", job)
	}
	// Plain git shows the branch, and it builds.
	code, rp := rest(t, http.MethodGet, "/v1/repos/"+repo, token, nil)
	if code != http.StatusOK {
		t.Fatalf("get repo: %d %v", code, rp)
	}
	cloneURL := rp["repo"].(map[string]any)["clone_url"].(string)
	dst := filepath.Join(t.TempDir(), "clone")
	if out, err := exec.Command("git", "clone", "--quiet", "--branch", branch, cloneURL, dst).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "greet", "greet.go")); err != nil || string(b) != greetGo {
		t.Fatalf("the clone's greet/greet.go: %q, %v", b, err)
	}
	build := exec.Command("go", "build", "./...")
	build.Dir, build.Env = dst, append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in the clone: %v\n%s", err, out)
	}
	if code, task := rest(t, http.MethodGet, "/v1/tasks/"+taskID, token, nil); code != http.StatusOK || task["task"].(map[string]any)["status"] != "TASK_STATUS_DONE" {
		t.Fatalf("task after approval: %d %v", code, task)
	}
	// The audit log has every side effect, once.
	code, audit := rest(t, http.MethodGet, "/v1/audit-log?job_id="+jobID+"&page_size=500", token, nil)
	if code != http.StatusOK {
		t.Fatalf("audit log: %d %v", code, audit)
	}
	seen := map[string]int{}
	for _, e := range audit["entries"].([]any) {
		seen[e.(map[string]any)["action"].(string)]++
	}
	for _, a := range []string{"plan_created", "sandbox_created", "build_started", "review_submitted", "review_approved", "branch_created",
		"commit_created", "pull_request_opened", "memory_stored", "sandbox_destroyed"} {
		if seen[a] == 0 {
			t.Errorf("audit log lacks %s: %v", a, seen)
		}
	}
	for _, a := range []string{"branch_created", "commit_created", "pull_request_opened"} {
		if seen[a] != 1 {
			t.Errorf("audit log has %d %s, want 1", seen[a], a)
		}
	}
	// Metrics per phase add up to the job's usage.
	code, metrics := rest(t, http.MethodGet, "/v1/jobs/"+jobID+"/metrics", token, nil)
	if code != http.StatusOK || len(metrics["phases"].([]any)) < 5 {
		t.Fatalf("metrics: %d %v", code, metrics)
	}

	// The same kind of task next: its plan gets the strategy the first one earned.
	_, job2 := startJob(t, repo, "Add a Bye function to the greet package [AGENT-ACCEPT-2]", "Bye(name) says goodbye to name.")
	waitJob(t, job2, 3*time.Minute, "JOB_STATUS_PENDING_REVIEW")
	prompts := planPrompts("[AGENT-ACCEPT-2]")
	if len(prompts) == 0 || !strings.Contains(prompts[0], "STRATEGY HINT") || !strings.Contains(prompts[0], "greet/greet.go") {
		t.Fatalf("the second plan got no strategy hint: %d prompts\n%.3000s", len(prompts), strings.Join(prompts, "\n---\n"))
	}
	if len(planPrompts("[AGENT-ACCEPT-1]")) == 0 || strings.Contains(planPrompts("[AGENT-ACCEPT-1]")[0], "STRATEGY HINT") {
		t.Error("the first plan had a strategy hint before any strategy was learned")
	}
	_ = agentv1.JobStatus_JOB_STATUS_COMPLETED
}

// both matches a prompt holding a and b, in either order (regular expressions).
func both(a, b string) string { return `(?s)(?:` + a + `.*` + b + `|` + b + `.*` + a + `)` }

const brokenGo = "package %s\n\n// F is not an int.\nfunc F() int { return \"x\" }\n"
const goodGo = "package %s\n\n// F is one.\nfunc F() int { return 1 }\n"

// failOnceScript scripts a scenario whose first attempt fails (the file never compiles)
// and whose diagnosis is category; the attempt after it writes the file right.
func failOnceScript(marker, pkg, category string) []fakellm.Response {
	path := pkg + "/f.go"
	q := regexp.QuoteMeta(marker)
	return []fakellm.Response{
		{Match: both(`# Job: diagnose a failed attempt`, q), Text: diagnosisAnswer(category, "scripted "+category)},
		{Match: planMatch(marker), Text: planAnswer("Write "+path+".", path)},
		{Match: both(`previous attempt \(1\) failed`, `File to create: "?`+regexp.QuoteMeta(path)), Text: content(fmt.Sprintf(goodGo, pkg))},
		{Match: genMatch(path), Text: content(fmt.Sprintf(brokenGo, pkg))},
		{Match: fixMatch(path), Text: fixed(fmt.Sprintf(brokenGo, pkg))},
	}
}

// agentScenarios are the failure scenarios' scripts, prepended with agentScript.
func agentScenarios() []fakellm.Response {
	var rs []fakellm.Response
	rs = append(rs, failOnceScript("[AGENT-FIX]", "fixloop", "implementation_error")...)
	rs = append(rs, failOnceScript("[AGENT-BADPLAN]", "badplan", "bad_plan")...)
	rs = append(rs, failOnceScript("[AGENT-CONTEXT]", "morectx", "missing_context")...)
	rs = append(rs, failOnceScript("[AGENT-ENV]", "envfail", "environment_error")...)
	rs = append(rs, failOnceScript("[AGENT-IMPOSSIBLE]", "never", "impossible_task")...)
	return rs
}

// diagnosisOf returns the job's last diagnosis category.
func diagnosisOf(job map[string]any) string {
	d, _ := job["last_diagnosis"].(map[string]any)
	c, _ := d["category"].(string)
	return c
}

func TestAgentFixLoopConvergesThenRejected(t *testing.T) {
	repo := agentRepo(t, "agent-fix")
	taskID, jobID := startJob(t, repo, "Write package fixloop [AGENT-FIX]", "F returns one.")
	job := waitJob(t, jobID, 3*time.Minute, "JOB_STATUS_PENDING_REVIEW")
	if job["attempt"].(float64) != 2 || diagnosisOf(job) != "DIAGNOSIS_CATEGORY_IMPLEMENTATION_ERROR" {
		t.Fatalf("job after the fix loop: attempt %v, diagnosis %v", job["attempt"], job["last_diagnosis"])
	}
	code, body := rest(t, http.MethodPost, "/v1/reviews/"+job["review_id"].(string)+":reject", token, map[string]any{"reason": "not needed"})
	if code != http.StatusOK || body["review"].(map[string]any)["status"] != "REVIEW_STATUS_REJECTED" {
		t.Fatalf("reject: %d %v", code, body)
	}
	job = waitJob(t, jobID, 30*time.Second, "JOB_STATUS_REJECTED")
	if code, task := rest(t, http.MethodGet, "/v1/tasks/"+taskID, token, nil); code != http.StatusOK || task["task"].(map[string]any)["status"] != "TASK_STATUS_BACKLOG" {
		t.Fatalf("task after reject: %d %v", code, task)
	}
	// A second decision on the rejected review is refused.
	if code, _ := rest(t, http.MethodPost, "/v1/reviews/"+job["review_id"].(string)+":approve", token, map[string]any{}); code != http.StatusBadRequest && code != http.StatusConflict && code != http.StatusPreconditionFailed {
		t.Fatalf("approve a rejected review: %d", code)
	}
}

func TestAgentBadPlanIsRevisedThenChangesRequested(t *testing.T) {
	repo := agentRepo(t, "agent-badplan")
	_, jobID := startJob(t, repo, "Write package badplan [AGENT-BADPLAN]", "F returns one.")
	job := waitJob(t, jobID, 3*time.Minute, "JOB_STATUS_PENDING_REVIEW")
	if job["plan_revisions"].(float64) != 1 || diagnosisOf(job) != "DIAGNOSIS_CATEGORY_BAD_PLAN" {
		t.Fatalf("job after bad_plan: revisions %v, diagnosis %v", job["plan_revisions"], job["last_diagnosis"])
	}
	if ps := planPrompts("[AGENT-BADPLAN]"); len(ps) < 2 || !strings.Contains(ps[len(ps)-1], "# Previous plan (to revise)") {
		t.Fatalf("no revised plan was asked for: %d plan prompts", len(ps))
	}
	first := job["review_id"].(string)
	code, body := rest(t, http.MethodPost, "/v1/reviews/"+first+":request-changes", token, map[string]any{"feedback": "FEEDBACK-MARKER please add a doc comment"})
	if code != http.StatusOK {
		t.Fatalf("request changes: %d %v", code, body)
	}
	job = waitJob(t, jobID, 3*time.Minute, "JOB_STATUS_PENDING_REVIEW")
	second, _ := job["review_id"].(string)
	if second == first {
		t.Fatal("no new review after the changes were requested")
	}
	code, got := rest(t, http.MethodGet, "/v1/reviews/"+second, token, nil)
	if code != http.StatusOK || got["review"].(map[string]any)["previous_review_id"] != first {
		t.Fatalf("second review: %d %v", code, got)
	}
	if ps := planPrompts("[AGENT-BADPLAN]"); !strings.Contains(ps[len(ps)-1], "FEEDBACK-MARKER") {
		t.Fatal("the feedback did not reach the next plan")
	}
	if code, body := rest(t, http.MethodPost, "/v1/reviews/"+second+":approve", token, map[string]any{}); code != http.StatusOK {
		t.Fatalf("approve: %d %v", code, body)
	}
	job = waitJob(t, jobID, 2*time.Minute, "JOB_STATUS_COMPLETED")
	if job["pull_request"] == nil {
		t.Fatalf("no pull request: %v", job)
	}
}

func TestAgentMissingContextAndEnvironmentErrorRecover(t *testing.T) {
	for _, c := range []struct{ marker, repo, want string }{
		{"[AGENT-CONTEXT]", "agent-context", "DIAGNOSIS_CATEGORY_MISSING_CONTEXT"},
		{"[AGENT-ENV]", "agent-env", "DIAGNOSIS_CATEGORY_ENVIRONMENT_ERROR"},
	} {
		repo := agentRepo(t, c.repo)
		_, jobID := startJob(t, repo, "Write a package "+c.marker, "F returns one.")
		job := waitJob(t, jobID, 3*time.Minute, "JOB_STATUS_PENDING_REVIEW")
		if job["attempt"].(float64) != 2 || diagnosisOf(job) != c.want {
			t.Fatalf("%s: attempt %v, diagnosis %v", c.marker, job["attempt"], job["last_diagnosis"])
		}
		_, _ = rest(t, http.MethodPost, "/v1/jobs/"+jobID+":cancel", token, map[string]any{"reason": "test done"})
	}
}

func TestAgentImpossibleTaskNeedsAHumanWhoResolvesIt(t *testing.T) {
	repo := agentRepo(t, "agent-impossible")
	taskID, jobID := startJob(t, repo, "Write package never [AGENT-IMPOSSIBLE]", "F returns one.")
	job := waitJob(t, jobID, 3*time.Minute, "JOB_STATUS_HUMAN_NEEDED")
	if !strings.Contains(job["error"].(string), "impossible") {
		t.Fatalf("human_needed without the reason: %v", job["error"])
	}
	if code, task := rest(t, http.MethodGet, "/v1/tasks/"+taskID, token, nil); code != http.StatusOK || task["task"].(map[string]any)["status"] != "TASK_STATUS_BLOCKED" {
		t.Fatalf("task of an impossible job: %d %v", code, task)
	}
	if code, body := rest(t, http.MethodPost, "/v1/jobs/"+jobID+":resolve", token, map[string]any{"note": "done by hand"}); code != http.StatusOK {
		t.Fatalf("resolve: %d %v", code, body)
	}
	job = waitJob(t, jobID, 30*time.Second, "JOB_STATUS_COMPLETED")
	if code, task := rest(t, http.MethodGet, "/v1/tasks/"+taskID, token, nil); code != http.StatusOK || task["task"].(map[string]any)["status"] != "TASK_STATUS_DONE" {
		t.Fatalf("task after resolve: %d %v", code, task)
	}
}
