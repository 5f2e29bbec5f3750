package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/auth"
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
	a := map[string]any{"category": category, "reason": reason, "recommended_recovery": "scripted"}
	if category == "missing_context" {
		a["context_requests"] = []string{"go.mod"}
	}
	b, _ := json.Marshal(a)
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
func agentRepo(t testing.TB, name string) string {
	t.Helper()
	return localRepo(t, name, "go.mod", agentGoMod)
}

// localRepo makes the local repository local/<name>, owned by the test user, with a first
// commit on main that adds path.
func localRepo(t testing.TB, name, path, content string) string {
	t.Helper()
	return localRepoAs(t, token, name, path, content)
}

// localRepoAs is localRepo owned by the user of tok.
func localRepoAs(t testing.TB, tok, name, path, content string) string {
	t.Helper()
	repo := "local/" + name
	if code, body := rest(t, http.MethodPost, "/v1/repos", tok, map[string]any{"repo": repo, "auto_init": true}); code != http.StatusOK {
		t.Fatalf("create repo: %d %v", code, body)
	}
	code, body := rest(t, http.MethodPost, "/v1/repos/"+repo+"/commits", tok, map[string]any{
		"branch": "main", "message": "Add " + path,
		"files": []map[string]any{{"path": path, "action": "FILE_ACTION_CREATE", "content": content}},
	})
	if code != http.StatusOK {
		t.Fatalf("commit %s: %d %v", path, code, body)
	}
	return repo
}

// startJob creates a task over REST and starts a job for it; it returns the job's id.
func startJob(t testing.TB, repo, title, description string) (taskID, jobID string) {
	t.Helper()
	return startJobWith(t, repo, title, description, nil)
}

// startJobWith is startJob with more StartTask fields.
func startJobWith(t testing.TB, repo, title, description string, extra map[string]any) (taskID, jobID string) {
	t.Helper()
	code, task := rest(t, http.MethodPost, "/v1/tasks", token, map[string]any{"title": title, "repo": repo, "description": description})
	if code != http.StatusOK {
		t.Fatalf("create task: %d %v", code, task)
	}
	taskID = task["task"].(map[string]any)["id"].(string)
	req := map[string]any{"task_id": taskID}
	for k, v := range extra {
		req[k] = v
	}
	code, job := rest(t, http.MethodPost, "/v1/jobs", token, req)
	if code != http.StatusOK {
		t.Fatalf("start job: %d %v", code, job)
	}
	return taskID, job["job"].(map[string]any)["id"].(string)
}

// waitJob polls the job over REST until its status is one of want (any terminal status or
// HUMAN_NEEDED otherwise fails the test).
func waitJob(t testing.TB, id string, timeout time.Duration, want ...string) map[string]any {
	t.Helper()
	// timeout is a liveness bound sized for a job alone on a quiet machine (see liveness).
	deadline := time.Now().Add(liveness(timeout))
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
			t.Fatalf("job %s still %s in phase %v after %s, want %v", id, st, job["phase"], liveness(timeout), want)
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

// TestAgentAcceptance is the issue's acceptance through the gateway: a task on a local
// repository reaches PENDING_REVIEW with a diff that builds; approving it opens a pull
// request whose branch plain git clones and builds; once its owner promoted the strategy
// the first task earned, the next task of the same kind gets it as a hint in its plan.
func TestAgentAcceptance(t *testing.T) {
	parallel(t)
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
	// The job's history over REST (NDJSON), from the start to the event that ended it.
	types := jobEventTypes(t, jobID)
	for _, want := range []string{"JOB_EVENT_TYPE_CREATED", "JOB_EVENT_TYPE_PLAN_CREATED", "JOB_EVENT_TYPE_PROGRESS", "JOB_EVENT_TYPE_REVIEW_SUBMITTED", "JOB_EVENT_TYPE_PULL_REQUEST_OPENED"} {
		if !slices.Contains(types, want) {
			t.Errorf("job events lack %s: %v", want, types)
		}
	}
	if len(types) == 0 || types[len(types)-1] != "JOB_EVENT_TYPE_STATUS_CHANGED" {
		t.Errorf("the job's stream did not end at its completion: %v", types)
	}
	// The same history as server-sent events, and resumed from a Last-Event-ID.
	all := jobSSE(t, jobID, "")
	if len(all) != len(types) || len(all) < 4 {
		t.Fatalf("SSE gave %d events, NDJSON %d", len(all), len(types))
	}
	for i, e := range all {
		if e.typ != types[i] || e.id == "" {
			t.Fatalf("SSE event %d = %+v, NDJSON type %s", i, e, types[i])
		}
	}
	if rest := jobSSE(t, jobID, all[2].id); len(rest) != len(all)-3 || rest[0].id != all[3].id {
		t.Fatalf("resumed after %s: %+v", all[2].id, rest)
	}
	// Metrics per phase add up to the job's usage.
	code, metrics := rest(t, http.MethodGet, "/v1/jobs/"+jobID+"/metrics", token, nil)
	if code != http.StatusOK || len(metrics["phases"].([]any)) < 5 {
		t.Fatalf("metrics: %d %v", code, metrics)
	}

	// The strategy the first job earned is the agent's own (AGENT trust), no hint until a
	// person vouches for it: its owner promotes it.
	code, mems := rest(t, http.MethodGet, "/v1/memories?types=MEMORY_TYPE_STRATEGY&trust_levels=MEMORY_TRUST_LEVEL_AGENT&repo="+url.QueryEscape(repo), token, nil)
	strategies, _ := mems["memories"].([]any)
	if code != http.StatusOK || len(strategies) != 1 {
		t.Fatalf("the agent's strategy memory: %d %v", code, mems)
	}
	strategyID := strategies[0].(map[string]any)["id"].(string)
	code, promoted := rest(t, http.MethodPost, "/v1/memories/"+strategyID+":promote", token, map[string]any{})
	if code != http.StatusOK || promoted["memory"].(map[string]any)["trust_level"] != "MEMORY_TRUST_LEVEL_USER" {
		t.Fatalf("promote the strategy: %d %v", code, promoted)
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

// brokenPy and goodPy are the Python scenarios' module, broken (a syntax error) and right.
const (
	brokenPy = "def f(:\n    return 1\n"
	goodPy   = "def f():\n    return 1\n"
)

// failOnceScript scripts a scenario whose first attempt fails (the file never compiles)
// and whose diagnosis is category; the attempt after it writes the file right. The file is
// Go (pkg/f.go) or, with python, a Python module (pkg/f.py): the scenarios of the agent's
// recovery write Python, which validates in a fraction of Go's time — what they test is the
// loop, and the Go toolchain's fix loop has its own scenario ([AGENT-FIX]).
func failOnceScript(marker, pkg, category string, python bool) []fakellm.Response {
	path, broken, good := pkg+"/f.go", fmt.Sprintf(brokenGo, pkg), fmt.Sprintf(goodGo, pkg)
	if python {
		path, broken, good = pkg+"/f.py", brokenPy, goodPy
	}
	q := regexp.QuoteMeta(marker)
	return []fakellm.Response{
		{Match: both(`# Job: diagnose a failed attempt`, q), Text: diagnosisAnswer(category, "scripted "+category)},
		{Match: planMatch(marker), Text: planAnswer("Write "+path+".", path)},
		{Match: both(`previous attempt \(1\) failed`, `File to create: "?`+regexp.QuoteMeta(path)), Text: content(good)},
		{Match: genMatch(path), Text: content(broken)},
		{Match: fixMatch(path), Text: fixed(broken)},
	}
}

// pyRepo makes a local Python project repository (a pyproject.toml) owned by the test user.
func pyRepo(t testing.TB, name string) string {
	t.Helper()
	return localRepo(t, name, "pyproject.toml", "[project]\nname = \""+strings.ReplaceAll(name, "-", "_")+"\"\nversion = \"0.1.0\"\n")
}

// agentScenarios are the failure scenarios' scripts, prepended with agentScript.
func agentScenarios() []fakellm.Response {
	var rs []fakellm.Response
	rs = append(rs, failOnceScript("[AGENT-FIX]", "fixloop", "implementation_error", false)...)
	rs = append(rs, failOnceScript("[AGENT-BADPLAN]", "badplan", "bad_plan", true)...)
	rs = append(rs, failOnceScript("[AGENT-CONTEXT]", "morectx", "missing_context", true)...)
	rs = append(rs, failOnceScript("[AGENT-ENV]", "envfail", "environment_error", true)...)
	rs = append(rs, failOnceScript("[AGENT-IMPOSSIBLE]", "never", "impossible_task", true)...)
	// Stuck: every attempt fails the same way; the loop guard calls for intervention, which
	// gives up.
	rs = append(rs,
		fakellm.Response{Match: both(`# Job: intervene`, regexp.QuoteMeta("[AGENT-STUCK]")), Text: `{"action": "escalate", "reason": "scripted: the same error every time"}`},
		fakellm.Response{Match: both(`# Job: diagnose a failed attempt`, regexp.QuoteMeta("[AGENT-STUCK]")), Text: diagnosisAnswer("implementation_error", "scripted: type error")},
		fakellm.Response{Match: planMatch("[AGENT-STUCK]"), Text: planAnswer("Write stuck/f.py.", "stuck/f.py")},
		fakellm.Response{Match: genMatch("stuck/f.py"), Text: content(brokenPy)},
		fakellm.Response{Match: fixMatch("stuck/f.py"), Text: fixed(brokenPy)},
	)
	// Clarification: the first assessment asks, the one after the answer proceeds.
	rs = append(rs,
		fakellm.Response{Match: both(`# Job: assess confidence`, `Answer: use blue`), Text: `{"confidence": 95, "decision": "proceed", "reasoning": "answered"}`},
		fakellm.Response{Match: both(`# Job: assess confidence`, regexp.QuoteMeta("[AGENT-CLARIFY]")), Text: `{"confidence": 30, "decision": "clarify", "reasoning": "which colour?", "questions": ["Which colour should F use?"]}`},
		fakellm.Response{Match: planMatch("[AGENT-CLARIFY]"), Text: planAnswer("Write clarify/f.go.", "clarify/f.go")},
		fakellm.Response{Match: genMatch("clarify/f.go"), Text: content(fmt.Sprintf(goodGo, "clarify"))},
	)
	// Break down: the task becomes two subtasks, the second blocked by the first.
	rs = append(rs, fakellm.Response{Match: both(`# Job: assess confidence`, regexp.QuoteMeta("[AGENT-SPLIT]")), Text: `{"confidence": 40, "decision": "break_down",
		"reasoning": "two separate changes", "subtasks": [
		{"key": "a", "title": "First half", "description": "Do the first half.", "depends_on": [], "complexity": 2},
		{"key": "b", "title": "Second half", "description": "Do the second half.", "depends_on": ["a"], "complexity": 3}]}`})
	// The breaker test's task, run once ai is back.
	rs = append(rs,
		fakellm.Response{Match: planMatch("[AGENT-BREAKER]"), Text: planAnswer("Write brk/f.go.", "brk/f.go")},
		fakellm.Response{Match: genMatch("brk/f.go"), Text: content(fmt.Sprintf(goodGo, "brk"))},
	)
	// Slow builds, to pause or kill the agent in the middle.
	for _, m := range []struct{ marker, pkg string }{{"[AGENT-PAUSE]", "pause"}, {"[AGENT-KILL]", "kill"}} {
		var paths []string
		for i := 1; i <= 3; i++ {
			paths = append(paths, fmt.Sprintf("%s/f%d.go", m.pkg, i))
		}
		rs = append(rs, fakellm.Response{Match: planMatch(m.marker), Text: planAnswer("Write "+m.pkg+".", paths...)})
		for i, p := range paths {
			rs = append(rs, fakellm.Response{Match: genMatch(p), Latency: fakellm.Duration(800 * time.Millisecond),
				Text: content(fmt.Sprintf("package %s\n\n// F%d is %d.\nfunc F%d() int { return %d }\n", m.pkg, i+1, i+1, i+1, i+1))})
		}
	}
	return rs
}

// diagnosisOf returns the job's last diagnosis category.
func diagnosisOf(job map[string]any) string {
	d, _ := job["last_diagnosis"].(map[string]any)
	c, _ := d["category"].(string)
	return c
}

func TestAgentFixLoopConvergesThenRejected(t *testing.T) {
	parallel(t)
	repo := agentRepo(t, "agent-fix")
	taskID, jobID := startJob(t, repo, "Write package fixloop [AGENT-FIX]", "F returns one.")
	job := waitJob(t, jobID, 3*time.Minute, "JOB_STATUS_PENDING_REVIEW")
	if job["attempt"].(float64) != 2 || diagnosisOf(job) != "DIAGNOSIS_CATEGORY_IMPLEMENTATION_ERROR" {
		t.Fatalf("job after the fix loop: attempt %v, diagnosis %v", job["attempt"], job["last_diagnosis"])
	}
	// The job's progress events carry the build's fix rounds as they end (what thefold run
	// shows), each with its file's step, within the steps known so far.
	rounds := jobFixRounds(t, jobID)
	if len(rounds) == 0 {
		t.Error("no progress event of the job carries a fix round")
	}
	for _, p := range rounds {
		if p.CurrentStep < 1 || p.CurrentStep > p.TotalSteps {
			t.Errorf("fix round progress %v: step outside 1..total", p)
		}
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
	parallel(t)
	repo := pyRepo(t, "agent-badplan")
	_, jobID := startJob(t, repo, "Write module badplan [AGENT-BADPLAN]", "f returns one.")
	job := waitJob(t, jobID, 3*time.Minute, "JOB_STATUS_PENDING_REVIEW")
	if job["plan_revisions"].(float64) != 1 || diagnosisOf(job) != "DIAGNOSIS_CATEGORY_BAD_PLAN" {
		t.Fatalf("job after bad_plan: revisions %v, diagnosis %v", job["plan_revisions"], job["last_diagnosis"])
	}
	if ps := planPrompts("[AGENT-BADPLAN]"); len(ps) < 2 || !strings.Contains(ps[len(ps)-1], "# Previous plan (to revise)") {
		t.Fatalf("no revised plan was asked for: %d plan prompts", len(ps))
	}
	first := job["review_id"].(string)
	code, body := rest(t, http.MethodPost, "/v1/reviews/"+first+":requestChanges", token, map[string]any{"feedback": "FEEDBACK-MARKER please add a doc comment"})
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
	parallel(t)
	for _, c := range []struct{ marker, repo, want string }{
		{"[AGENT-CONTEXT]", "agent-context", "DIAGNOSIS_CATEGORY_MISSING_CONTEXT"},
		{"[AGENT-ENV]", "agent-env", "DIAGNOSIS_CATEGORY_ENVIRONMENT_ERROR"},
	} {
		repo := pyRepo(t, c.repo)
		_, jobID := startJob(t, repo, "Write a module "+c.marker, "f returns one.")
		job := waitJob(t, jobID, 3*time.Minute, "JOB_STATUS_PENDING_REVIEW")
		if job["attempt"].(float64) != 2 || diagnosisOf(job) != c.want {
			t.Fatalf("%s: attempt %v, diagnosis %v", c.marker, job["attempt"], job["last_diagnosis"])
		}
		_, _ = rest(t, http.MethodPost, "/v1/jobs/"+jobID+":cancel", token, map[string]any{"reason": "test done"})
	}
}

func TestAgentImpossibleTaskNeedsAHumanWhoResolvesIt(t *testing.T) {
	parallel(t)
	repo := pyRepo(t, "agent-impossible")
	taskID, jobID := startJob(t, repo, "Write module never [AGENT-IMPOSSIBLE]", "f returns one.")
	job := waitJob(t, jobID, 3*time.Minute, "JOB_STATUS_HUMAN_NEEDED")
	if !strings.Contains(job["error"].(string), "impossible") {
		t.Fatalf("human_needed without the reason: %v", job["error"])
	}
	if code, task := rest(t, http.MethodGet, "/v1/tasks/"+taskID, token, nil); code != http.StatusOK || task["task"].(map[string]any)["status"] != "TASK_STATUS_BLOCKED" {
		t.Fatalf("task of an impossible job: %d %v", code, task)
	}
	if code, body := rest(t, http.MethodPost, "/v1/jobs/"+jobID+":resolveTask", token, map[string]any{"note": "done by hand"}); code != http.StatusOK {
		t.Fatalf("resolve: %d %v", code, body)
	}
	job = waitJob(t, jobID, 30*time.Second, "JOB_STATUS_COMPLETED")
	if code, task := rest(t, http.MethodGet, "/v1/tasks/"+taskID, token, nil); code != http.StatusOK || task["task"].(map[string]any)["status"] != "TASK_STATUS_DONE" {
		t.Fatalf("task after resolve: %d %v", code, task)
	}
}

func TestAgentLoopGuardStopsAStuckJob(t *testing.T) {
	parallel(t)
	repo := pyRepo(t, "agent-stuck")
	taskID, jobID := startJob(t, repo, "Write module stuck [AGENT-STUCK]", "f returns one.")
	job := waitJob(t, jobID, 4*time.Minute, "JOB_STATUS_HUMAN_NEEDED")
	// Attempts 2 and 3 each ended where attempt 1 did: no progress twice in a row, so the
	// loop guard called the intervention (which gave up) instead of attempts 4 and 5.
	recovery, _ := job["last_diagnosis"].(map[string]any)["recovery"].(string)
	if job["attempt"].(float64) != 3 || !strings.Contains(job["error"].(string), "intervention gave up") || !strings.HasPrefix(recovery, "no progress") {
		t.Fatalf("stuck job: attempt %v, error %v, recovery %q", job["attempt"], job["error"], recovery)
	}
	if code, body := rest(t, http.MethodPost, "/v1/jobs/"+jobID+":skipTask", token, map[string]any{"reason": "not worth it"}); code != http.StatusOK {
		t.Fatalf("skip: %d %v", code, body)
	}
	waitJob(t, jobID, 30*time.Second, "JOB_STATUS_SKIPPED")
	if code, task := rest(t, http.MethodGet, "/v1/tasks/"+taskID, token, nil); code != http.StatusOK || task["task"].(map[string]any)["status"] != "TASK_STATUS_CANCELLED" {
		t.Fatalf("task after skip: %d %v", code, task)
	}
}

func TestAgentAsksAndWaitsForAnAnswer(t *testing.T) {
	parallel(t)
	repo := agentRepo(t, "agent-clarify")
	_, jobID := startJob(t, repo, "Write package clarify [AGENT-CLARIFY]", "F returns a colour.")
	job := waitJob(t, jobID, time.Minute, "JOB_STATUS_WAITING_CLARIFICATION")
	if job["clarification_question"] != "Which colour should F use?" {
		t.Fatalf("question %v", job["clarification_question"])
	}
	if code, body := rest(t, http.MethodPost, "/v1/jobs/"+jobID+":respondToClarification", token, map[string]any{"answer": "use blue"}); code != http.StatusOK {
		t.Fatalf("clarify: %d %v", code, body)
	}
	job = waitJob(t, jobID, 2*time.Minute, "JOB_STATUS_PENDING_REVIEW")
	if job["clarification_answer"] != "use blue" {
		t.Fatalf("answer %v", job["clarification_answer"])
	}
	_, _ = rest(t, http.MethodPost, "/v1/jobs/"+jobID+":cancel", token, map[string]any{})
}

func TestAgentBreaksATaskDown(t *testing.T) {
	parallel(t)
	repo := agentRepo(t, "agent-split")
	taskID, jobID := startJob(t, repo, "Do two things [AGENT-SPLIT]", "Both halves.")
	job := waitJob(t, jobID, time.Minute, "JOB_STATUS_COMPLETED")
	subs, _ := job["subtask_ids"].([]any)
	if len(subs) != 2 {
		t.Fatalf("subtasks %v", job["subtask_ids"])
	}
	code, second := rest(t, http.MethodGet, "/v1/tasks/"+subs[1].(string), token, nil)
	st := second["task"].(map[string]any)
	if code != http.StatusOK || st["parent_id"] != taskID || len(st["blocked_by"].([]any)) != 1 || st["blocked_by"].([]any)[0] != subs[0] {
		t.Fatalf("second subtask: %d %v", code, st)
	}
}

func TestAgentBudgetStopsTheJob(t *testing.T) {
	parallel(t)
	repo := agentRepo(t, "agent-budget")
	taskID, jobID := startJobWith(t, repo, "Write package budget [AGENT-BUDGET]", "F returns one.", map[string]any{"budget": map[string]any{"max_tokens": 10}})
	job := waitJob(t, jobID, time.Minute, "JOB_STATUS_HUMAN_NEEDED")
	if !strings.HasPrefix(job["error"].(string), "budget exhausted: spent ") {
		t.Fatalf("error %v", job["error"])
	}
	// Another user sees neither the job nor its task.
	priv, err := auth.LoadPrivateKey(filepath.Join(mesh.KeyDir(), auth.PrivateKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	carol, _, err := auth.NewSigner(priv).Issue("carol", []string{auth.RoleUser}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		method, path string
		body         any
	}{
		{http.MethodGet, "/v1/jobs/" + jobID, nil},
		{http.MethodPost, "/v1/jobs/" + jobID + ":skipTask", map[string]any{}},
		{http.MethodGet, "/v1/jobs/" + jobID + "/metrics", nil},
		{http.MethodPost, "/v1/jobs", map[string]any{"task_id": taskID}},
	} {
		if code, body := rest(t, r.method, r.path, carol, r.body); code != http.StatusNotFound {
			t.Errorf("carol %s %s = %d %v, want 404", r.method, r.path, code, body)
		}
	}
	if code, body := rest(t, http.MethodGet, "/v1/jobs", carol, nil); code != http.StatusOK || body["jobs"] != nil {
		t.Errorf("carol lists %d %v, want nothing", code, body)
	}
	// A missing task and a malformed id are refused with the right codes.
	code, body := rest(t, http.MethodPost, "/v1/jobs", token, map[string]any{"task_id": "00000000-0000-4000-8000-000000000000"})
	if code != http.StatusNotFound {
		t.Fatalf("start a missing task: %d %v", code, body)
	}
	code, body = rest(t, http.MethodGet, "/v1/jobs/not-a-uuid", token, nil)
	fv, _ := body["field_violations"].([]any)
	if code != http.StatusBadRequest || body["status"] != "INVALID_ARGUMENT" || len(fv) != 1 || fv[0].(map[string]any)["field"] != "id" || body["request_id"] == "" {
		t.Fatalf("get a malformed id: %d %v", code, body)
	}
}

// waitPhase polls the job until it is in phase (and has a build when building).
func waitPhase(t *testing.T, id, phase string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(liveness(2 * time.Minute))
	for time.Now().Before(deadline) {
		_, got := rest(t, http.MethodGet, "/v1/jobs/"+id, token, nil)
		job := got["job"].(map[string]any)
		if job["phase"] == phase && (phase != "JOB_PHASE_BUILDING" || job["build_id"] != nil && job["build_id"] != "") {
			return job
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("job %s never reached %s", id, phase)
	return nil
}

// auditCount counts a job's audit entries by action.
func auditCount(t *testing.T, jobID string) map[string]int {
	t.Helper()
	code, audit := rest(t, http.MethodGet, "/v1/audit-log?job_id="+jobID+"&page_size=500", token, nil)
	if code != http.StatusOK {
		t.Fatalf("audit log: %d %v", code, audit)
	}
	seen := map[string]int{}
	for _, e := range audit["entries"].([]any) {
		seen[e.(map[string]any)["action"].(string)]++
	}
	return seen
}

func TestAgentPauseAndResumeMidBuild(t *testing.T) {
	parallel(t)
	repo := agentRepo(t, "agent-pause")
	_, jobID := startJob(t, repo, "Write package pause [AGENT-PAUSE]", "Three functions.")
	building := waitPhase(t, jobID, "JOB_PHASE_BUILDING")
	code, body := rest(t, http.MethodPost, "/v1/jobs/"+jobID+":pause", token, map[string]any{"reason": "coffee"})
	if code != http.StatusOK || body["job"].(map[string]any)["status"] != "JOB_STATUS_PAUSED" {
		t.Fatalf("pause: %d %v", code, body)
	}
	time.Sleep(2 * time.Second)
	if _, got := rest(t, http.MethodGet, "/v1/jobs/"+jobID, token, nil); got["job"].(map[string]any)["status"] != "JOB_STATUS_PAUSED" {
		t.Fatalf("a paused job moved on: %v", got["job"])
	}
	if code, body := rest(t, http.MethodPost, "/v1/jobs/"+jobID+":resume", token, map[string]any{}); code != http.StatusOK {
		t.Fatalf("resume: %d %v", code, body)
	}
	// (Its build of three Go files: beside the parallel shard's crews such a build has
	// taken 4 minutes in CI.)
	job := waitJob(t, jobID, 6*time.Minute, "JOB_STATUS_PENDING_REVIEW")
	if job["build_id"] != building["build_id"] {
		t.Errorf("the resumed job built again: %v, then %v", building["build_id"], job["build_id"])
	}
	if n := auditCount(t, jobID)["build_started"]; n != 1 {
		t.Errorf("%d builds started, want 1", n)
	}
	_, _ = rest(t, http.MethodPost, "/v1/jobs/"+jobID+":cancel", token, map[string]any{})
}

// TestAgentResumesAfterTheAgentIsKilled kills the agent with SIGKILL mid-build and starts
// it again: the job goes on from its checkpoint, follows the same build, and approval opens
// exactly one pull request.
func TestAgentResumesAfterTheAgentIsKilled(t *testing.T) {
	alone(t)
	repo := agentRepo(t, "agent-kill")
	_, jobID := startJob(t, repo, "Write package kill [AGENT-KILL]", "Three functions.")
	building := waitPhase(t, jobID, "JOB_PHASE_BUILDING")
	if err := mesh.Kill("agent"); err != nil {
		t.Fatal(err)
	}
	if err := mesh.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), liveness(time.Minute))
	defer cancel()
	if err := mesh.WaitReady(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	// (Its build of three Go files runs on through the kill; beside the parallel shard's
	// crews it has taken 4 minutes in CI.)
	job := waitJob(t, jobID, 6*time.Minute, "JOB_STATUS_PENDING_REVIEW")
	if job["build_id"] != building["build_id"] {
		t.Errorf("the resumed job built again: %v, then %v", building["build_id"], job["build_id"])
	}
	for p, n := range generations("kill/f1.go", "kill/f2.go", "kill/f3.go") {
		if n != 1 {
			t.Errorf("%s generated %d times, want once", p, n)
		}
	}
	if code, body := rest(t, http.MethodPost, "/v1/reviews/"+job["review_id"].(string)+":approve", token, map[string]any{}); code != http.StatusOK {
		t.Fatalf("approve: %d %v", code, body)
	}
	waitJob(t, jobID, 2*time.Minute, "JOB_STATUS_COMPLETED")
	code, prs := rest(t, http.MethodGet, "/v1/repos/"+repo+"/pulls", token, nil)
	if code != http.StatusOK || len(prs["pull_requests"].([]any)) != 1 {
		t.Fatalf("pull requests after the kill: %d %v", code, prs)
	}
	seen := auditCount(t, jobID)
	for _, a := range []string{"sandbox_created", "build_started", "branch_created", "commit_created", "pull_request_opened"} {
		if seen[a] != 1 {
			t.Errorf("%d %s, want 1", seen[a], a)
		}
	}
}

// jobEventTypes reads a finished job's events over REST (the stream ends after the event
// that finished it), heartbeats left out.
func jobEventTypes(t *testing.T, jobID string) []string {
	return streamTypes(t, "/v1/jobs/"+jobID+":watch", "JOB_EVENT_TYPE_UNSPECIFIED")
}

// streamTypes reads a watch stream of one finished resource over REST to its end and
// returns its events' types, heartbeats (type unspecified) left out.
func streamTypes(t *testing.T, path, unspecified string) []string {
	t.Helper()
	return readStream(t, path, unspecified, 30*time.Second, true)
}

// readStream reads a watch stream over REST for at most d, to its end (which, with mustEnd,
// must come within d) and returns its events' types, heartbeats (type unspecified) left out.
func readStream(t *testing.T, path, unspecified string, d time.Duration, mustEnd bool) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveness(d))
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, mesh.GatewayURL()+path, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var types []string
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 4<<20), 4<<20)
	for sc.Scan() {
		var line struct {
			Result map[string]any `json:"result"`
		}
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("watch line %q: %v", sc.Text(), err)
		}
		if typ, _ := line.Result["type"].(string); typ != "" && typ != unspecified {
			types = append(types, typ)
		}
	}
	if err := sc.Err(); err != nil && (mustEnd || ctx.Err() == nil) {
		t.Fatalf("watch %s: %v (the stream did not end)", path, err)
	}
	return types
}

// demoRepo makes repo the demo's repository: a Go module with an empty main.
func demoRepo(t testing.TB, repo string) { demoRepoAs(t, token, repo) }

// demoRepoAs is demoRepo owned by the user of tok.
func demoRepoAs(t testing.TB, tok, repo string) {
	t.Helper()
	if code, body := rest(t, http.MethodPost, "/v1/repos", tok, map[string]any{"repo": repo, "auto_init": true}); code != http.StatusOK {
		t.Fatalf("create repo: %d %v", code, body)
	}
	code, body := rest(t, http.MethodPost, "/v1/repos/"+repo+"/commits", tok, map[string]any{"branch": "main", "message": "Go module",
		"files": []map[string]any{
			{"path": "go.mod", "action": "FILE_ACTION_CREATE", "content": "module example.com/demo\n\ngo 1.22\n"},
			{"path": "main.go", "action": "FILE_ACTION_CREATE", "content": "package main\n\nfunc main() {}\n"},
		}})
	if code != http.StatusOK {
		t.Fatalf("commit: %d %v", code, body)
	}
}

// TestAgentDemoTask runs the README's demo: the health-endpoint task of the demo script
// (deploy/fakellm/demo.json) on a fresh repository, from task to pull request.
func TestAgentDemoTask(t *testing.T) {
	parallel(t)
	repo := "local/agent-demo"
	demoRepo(t, repo)
	_, jobID := startJob(t, repo, "Add a health endpoint", "")
	job := waitJob(t, jobID, 5*time.Minute, "JOB_STATUS_PENDING_REVIEW")
	if code, body := rest(t, http.MethodPost, "/v1/reviews/"+job["review_id"].(string)+":approve", token, map[string]any{}); code != http.StatusOK {
		t.Fatalf("approve: %d %v", code, body)
	}
	job = waitJob(t, jobID, 2*time.Minute, "JOB_STATUS_COMPLETED")
	if job["pull_request"] == nil || job["attempt"].(float64) != 1 {
		t.Fatalf("demo job: %v", job)
	}
}

// TestAgentPausesWhileAServiceIsDown stops the ai service: the job's calls fail until ai's
// circuit breaker opens, which pauses the job (no attempt spent); once ai is back and the
// breaker's wait is over, the job resumes by itself.
func TestAgentPausesWhileAServiceIsDown(t *testing.T) {
	alone(t)
	repo := agentRepo(t, "agent-breaker")
	if err := mesh.Kill("ai"); err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() {
		if !restarted {
			startAgain(t)
		}
	}()
	_, jobID := startJob(t, repo, "Write package brk [AGENT-BREAKER]", "F returns one.")
	job := waitJob(t, jobID, time.Minute, "JOB_STATUS_PAUSED")
	if reason, _ := job["status_reason"].(string); !strings.Contains(reason, "circuit breaker for ai is open") || job["attempt"] != nil && job["attempt"].(float64) > 0 {
		t.Fatalf("paused job: reason %q, attempt %v", reason, job["attempt"])
	}
	startAgain(t)
	restarted = true
	job = waitJob(t, jobID, 2*time.Minute, "JOB_STATUS_PENDING_REVIEW")
	if job["attempt"].(float64) != 1 {
		t.Errorf("attempts spent while ai was down: %v", job["attempt"])
	}
	seen := auditCount(t, jobID)
	if seen["job_paused"] == 0 || seen["job_resumed"] == 0 || seen["job_paused"] != seen["job_resumed"] {
		t.Errorf("audit: %v", seen)
	}
	_, _ = rest(t, http.MethodPost, "/v1/jobs/"+jobID+":cancel", token, map[string]any{})
}

type sseEvent struct{ id, typ string }

// jobSSE reads a finished job's events as server-sent events, after lastID when set; the
// stream must end with an end event.
func jobSSE(t *testing.T, jobID, lastID string) []sseEvent {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveness(30*time.Second))
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, mesh.GatewayURL()+"/v1/jobs/"+jobID+":watch", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/event-stream")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != http.StatusOK || ct != "text/event-stream" {
		t.Fatalf("SSE answer %d %q", resp.StatusCode, ct)
	}
	var (
		out      []sseEvent
		cur      sseEvent
		lastType string
	)
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 4<<20), 4<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			// Heartbeats (whose id is the cursor) and the end of the stream are not events.
			if (cur.id != "" || cur.typ != "") && cur.typ != "heartbeat" && cur.typ != "end" {
				out = append(out, cur)
			}
			cur = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			cur.id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "event: "):
			cur.typ = strings.TrimPrefix(line, "event: ")
			lastType = cur.typ
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("SSE: %v (the stream did not end)", err)
	}
	if lastType != "end" {
		t.Fatalf("SSE stream ended without an end event (last %q)", lastType)
	}
	return out
}

// jobFixRounds reads the history of a job waiting for review up to its review and returns
// its progress events that report a fix round.
func jobFixRounds(t *testing.T, jobID string) []*agentv1.JobProgress {
	t.Helper()
	ctx, cancel := context.WithTimeout(authed(t.Context()), liveness(30*time.Second))
	defer cancel()
	stream, err := agentv1.NewAgentServiceClient(dial(t, "agent")).WatchJob(ctx, &agentv1.WatchJobRequest{Id: jobID})
	if err != nil {
		t.Fatal(err)
	}
	var out []*agentv1.JobProgress
	for {
		ev, err := stream.Recv()
		if err != nil {
			t.Fatalf("watch %s: %v", jobID, err)
		}
		if p := ev.GetProgress(); p.GetFixRound() > 0 {
			out = append(out, p)
		}
		if ev.GetStatusChange().GetStatus() == agentv1.JobStatus_JOB_STATUS_PENDING_REVIEW {
			return out
		}
	}
}
