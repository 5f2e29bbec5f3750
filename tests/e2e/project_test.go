package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/fakellm"
)

// The project tests' requests and task titles carry markers; the scripted answers match
// them, so each scenario gets its own plan, files and review.

// projectPlanMatch matches the planning prompt of the project task whose title holds
// marker (a task's prompt also names the tasks it depends on, further down).
func projectPlanMatch(marker string) string {
	return `(?s)# Job: plan a task.*Title: [^\n]*` + regexp.QuoteMeta(marker)
}

// projTask is a task of a scripted project plan: its title carries its marker, and its
// job writes pkg/<pkg>.go.
type projTask struct {
	key, title, pkg string
	deps            []string
}

// decomposeAnswer is a DecomposeProject answer with phases of tasks.
func decomposeAnswer(summary string, phases ...[]projTask) string {
	var ps []map[string]any
	for i, ph := range phases {
		var ts []map[string]any
		for _, t := range ph {
			deps := t.deps
			if deps == nil {
				deps = []string{}
			}
			ts = append(ts, map[string]any{"key": t.key, "title": t.title, "description": "Write package " + t.pkg + ".", "depends_on": deps, "complexity": 2})
		}
		ps = append(ps, map[string]any{"name": fmt.Sprintf("Phase %d", i+1), "description": "scripted", "tasks": ts})
	}
	b, _ := json.Marshal(map[string]any{"summary": summary, "conventions": "One package per directory, each with one exported function.", "phases": ps})
	return string(b)
}

// taskScript scripts the job of a project task: its plan writes pkg/<pkg>.go, which
// compiles (or, broken, never does and its diagnosis says impossible).
func taskScript(t projTask, broken bool) []fakellm.Response {
	path := t.pkg + "/" + t.pkg + ".go"
	marker := t.title[strings.Index(t.title, "["):]
	src := fmt.Sprintf("package %s\n\n// F is one.\nfunc F() int { return 1 }\n", t.pkg)
	rs := []fakellm.Response{{Match: projectPlanMatch(marker), Text: planAnswer("Write "+path+".", path)}}
	if broken {
		bad := fmt.Sprintf(brokenGo, t.pkg)
		return append(rs,
			fakellm.Response{Match: both(`# Job: diagnose a failed attempt`, regexp.QuoteMeta(marker)), Text: diagnosisAnswer("impossible_task", "scripted: cannot be done")},
			fakellm.Response{Match: genMatch(path), Text: content(bad)},
			fakellm.Response{Match: fixMatch(path), Text: fixed(bad)})
	}
	return append(rs, fakellm.Response{Match: genMatch(path), Text: content(src)})
}

// The request-text project: three phases; task 2 of phase 1 fails, so its dependents in
// phases 2 and 3 are skipped; the plan is edited before it starts (x removed, f made to
// depend on a too); the revision before phase 2 rewrites c's description.
var (
	projA  = projTask{"a", "Write package pa [PROJ-A-1]", "pa", nil}
	projB  = projTask{"b", "Write package pb [PROJ-A-2]", "pb", nil}
	projX  = projTask{"x", "Write package px [PROJ-A-X]", "px", nil}
	projC  = projTask{"c", "Write package pc [PROJ-A-3]", "pc", []string{"a"}}
	projD  = projTask{"d", "Write package pd [PROJ-A-4]", "pd", []string{"b"}}
	projE  = projTask{"e", "Write package pe [PROJ-A-5]", "pe", []string{"d"}}
	projF  = projTask{"f", "Write package pf [PROJ-A-6]", "pf", []string{"c"}}
	projAs = [][]projTask{{projA, projB, projX}, {projC, projD}, {projE, projF}}
)

// projectScript is prepended to the e2e script (TestMain).
func projectScript() []fakellm.Response {
	rs := []fakellm.Response{
		{Match: both(`# Job: decompose a project`, regexp.QuoteMeta("[PROJ-A]")), Text: decomposeAnswer("Packages pa to pf [PROJ-A]", projAs...)},
		// The revision before phase 2 rewrites pc's description; the one before phase 3
		// changes nothing.
		{Match: both(`# Job: revise the next project phase`, regexp.QuoteMeta("[PROJ-A]")), Times: 1, Text: reviseAnswer(projC, projD)},
		{Match: both(`# Job: revise the next project phase`, regexp.QuoteMeta("[PROJ-A]")), Text: `{"reasoning": "still right", "changed": false}`},
		{Match: both(`# Job: review a project`, regexp.QuoteMeta("[PROJ-A]")), Text: `{"summary": "Five packages.", "concerns": [], "documentation": "Adds packages pa, pc and pf.",
			"architectural_decisions": ["one package per task"], "memories_extracted": ["Projects here keep one package per directory."], "quality_score": 8}`},
	}
	for _, ph := range projAs {
		for _, t := range ph {
			rs = append(rs, taskScript(t, t.key == "b")...)
		}
	}
	return rs
}

// reviseAnswer keeps the phase's tasks, c with a new description.
func reviseAnswer(c, d projTask) string {
	b, _ := json.Marshal(map[string]any{"reasoning": "pa exists now: pc can use it", "changed": true, "phase": map[string]any{
		"name": "Phase 2", "description": "scripted", "tasks": []map[string]any{
			{"key": "c", "title": c.title, "description": "Write package pc; pa exists now.", "depends_on": []string{"a"}, "complexity": 2},
			{"key": "d", "title": d.title, "description": "Write package pd.", "depends_on": []string{"b"}, "complexity": 2},
		}}})
	return string(b)
}

// waitProject polls the project over REST until its status is one of want.
func waitProject(t *testing.T, id string, timeout time.Duration, want ...string) map[string]any {
	t.Helper()
	deadline := time.Now().Add(liveness(timeout))
	for {
		code, got := rest(t, http.MethodGet, "/v1/projects/"+id, token, nil)
		if code != http.StatusOK {
			t.Fatalf("get project: %d %v", code, got)
		}
		p := got["project"].(map[string]any)
		st, _ := p["status"].(string)
		if slices.Contains(want, st) {
			return p
		}
		switch st {
		case "PROJECT_STATUS_FAILED", "PROJECT_STATUS_CANCELLED", "PROJECT_STATUS_REJECTED", "PROJECT_STATUS_COMPLETED", "PROJECT_STATUS_HUMAN_NEEDED":
			t.Fatalf("project %s is %s (%v), want %v", id, st, p["status_reason"], want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("project %s still %s after %s, want %v: %v", id, st, timeout, want, p)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// projectTasks maps a project's tasks by the marker in their titles.
func projectTasks(p map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, ph := range p["phases"].([]any) {
		for _, t := range ph.(map[string]any)["tasks"].([]any) {
			tm := t.(map[string]any)
			title := tm["title"].(string)
			if i := strings.Index(title, "["); i >= 0 {
				out[title[i:]] = tm
			}
		}
	}
	return out
}

func TestProjectFromARequestToOnePullRequest(t *testing.T) {
	parallel(t)
	repo := agentRepo(t, "project-a")
	code, body := rest(t, http.MethodPost, "/v1/projects", token, map[string]any{"repo": repo, "request": "Build packages pa to pf [PROJ-A]", "request_id": "proj-a"})
	if code != http.StatusOK {
		t.Fatalf("plan: %d %v", code, body)
	}
	p := body["project"].(map[string]any)
	id := p["id"].(string)
	if p["status"] != "PROJECT_STATUS_PLANNED" || len(p["phases"].([]any)) != 3 {
		t.Fatalf("planned project: %v", p)
	}
	// A retry of the request returns the same project, planned once.
	if code, again := rest(t, http.MethodPost, "/v1/projects", token, map[string]any{"repo": repo, "request": "Build packages pa to pf [PROJ-A]", "request_id": "proj-a"}); code != http.StatusOK || again["project"].(map[string]any)["id"] != id {
		t.Fatalf("retried plan: %d %v", code, again)
	}
	// The person edits the plan: x removed, f also depends on a. The tasks get ids of the
	// person's choosing (a new task may), which the scripted revision names.
	var phases []any
	for i, ph := range projAs {
		var ts []any
		for _, tk := range ph {
			if tk.key == "x" {
				continue
			}
			deps := slices.Clone(tk.deps)
			if tk.key == "f" {
				deps = append(deps, "a")
			}
			ts = append(ts, map[string]any{"id": tk.key, "title": tk.title, "description": "Write package " + tk.pkg + ".", "depends_on": deps})
		}
		phases = append(phases, map[string]any{"name": fmt.Sprintf("Phase %d", i+1), "tasks": ts})
	}
	code, body = rest(t, http.MethodPatch, "/v1/projects/"+id+"?update_mask=phases", token, map[string]any{"phases": phases, "etag": p["etag"]})
	if code != http.StatusOK {
		t.Fatalf("edit: %d %v", code, body)
	}
	edited := body["project"].(map[string]any)
	if _, ok := projectTasks(edited)["[PROJ-A-X]"]; ok || edited["etag"] == p["etag"] {
		t.Fatalf("edited plan: %v", edited)
	}
	// The same edit on the old etag is stale.
	if code, body := rest(t, http.MethodPatch, "/v1/projects/"+id+"?update_mask=phases", token, map[string]any{"phases": phases, "etag": p["etag"]}); code != http.StatusConflict {
		t.Fatalf("stale edit: %d %v, want 409", code, body)
	}
	// A cycle is refused, naming it.
	bad := []any{map[string]any{"name": "one", "tasks": []any{
		map[string]any{"id": "a", "title": "a", "depends_on": []any{"c"}},
		map[string]any{"id": "c", "title": "c", "depends_on": []any{"a"}}}}}
	if code, body := rest(t, http.MethodPatch, "/v1/projects/"+id+"?update_mask=phases", token, map[string]any{"phases": bad}); code != http.StatusBadRequest ||
		!strings.Contains(fmt.Sprint(body), "cycle") {
		t.Fatalf("cycle: %d %v, want 400 naming the cycle", code, body)
	}

	if code, body := rest(t, http.MethodPost, "/v1/projects/"+id+":start", token, map[string]any{"request_id": "start-a"}); code != http.StatusOK {
		t.Fatalf("start: %d %v", code, body)
	}
	p = waitProject(t, id, 6*time.Minute, "PROJECT_STATUS_PENDING_REVIEW")
	got := projectTasks(p)
	want := map[string]string{"[PROJ-A-1]": "COMPLETED", "[PROJ-A-2]": "FAILED", "[PROJ-A-3]": "COMPLETED", "[PROJ-A-4]": "SKIPPED",
		"[PROJ-A-5]": "SKIPPED", "[PROJ-A-6]": "COMPLETED"}
	for m, st := range want {
		if got[m]["status"] != "PROJECT_TASK_STATUS_"+st {
			t.Errorf("task %s is %v (%v %v), want %s", m, got[m]["status"], got[m]["status_reason"], got[m]["error"], st)
		}
	}
	if r, _ := got["[PROJ-A-4]"]["status_reason"].(string); !strings.Contains(r, "which failed") {
		t.Errorf("skipped task's reason: %q", r)
	}
	if got["[PROJ-A-3]"]["description"] != "Write package pc; pa exists now." {
		t.Errorf("the revision did not change pc: %v", got["[PROJ-A-3]"])
	}
	// A task is told what the tasks it depends on built, file contents included: f runs
	// right after c (phase 3's revision between them) and depends on it and on a.
	if ps := planPrompts("[PROJ-A-6]"); len(ps) == 0 {
		t.Error("no plan prompt of [PROJ-A-6]")
	} else {
		for _, want := range []string{`pc/pc.go (by \"Write package pc [PROJ-A-3]\")`, "package pc", "package pa"} {
			if !strings.Contains(ps[0], want) {
				t.Errorf("the plan prompt of [PROJ-A-6], which depends on pc and pa, lacks %q:\n%s", want, ps[0])
			}
		}
	}
	revs, _ := p["revisions"].([]any)
	if len(revs) != 1 || revs[0].(map[string]any)["phase_number"] != float64(2) {
		t.Errorf("revisions: %v", revs)
	}
	// Every task is a real task of the project in the tasks service.
	code, list := rest(t, http.MethodGet, "/v1/tasks?project_id="+id, token, nil)
	if code != http.StatusOK || len(list["tasks"].([]any)) != 6 {
		t.Fatalf("the project's tasks: %d %v", code, list)
	}
	// One review of every file.
	code, rv := rest(t, http.MethodGet, "/v1/reviews/"+p["review_id"].(string), token, nil)
	if code != http.StatusOK {
		t.Fatalf("review: %d %v", code, rv)
	}
	var paths []string
	for _, f := range rv["review"].(map[string]any)["files"].([]any) {
		paths = append(paths, f.(map[string]any)["diff"].(map[string]any)["path"].(string))
	}
	slices.Sort(paths)
	if !slices.Equal(paths, []string{"pa/pa.go", "pc/pc.go", "pf/pf.go"}) {
		t.Fatalf("the review's files: %v", paths)
	}
	p, pr := approveToOnePullRequest(t, repo, id, p["review_id"].(string), 2*time.Minute)
	prBody := fmt.Sprint(pr)
	for _, s := range []string{"Phase 1", "which failed", "[PROJ-A-2]"} {
		if !strings.Contains(prBody, s) {
			t.Errorf("the pull request does not mention %q: %s", s, prBody)
		}
	}
	// The branch clones, holds every finished task's files and builds.
	dst := cloneBranch(t, repo, p["branch"].(string))
	for _, f := range []string{"pa/pa.go", "pc/pc.go", "pf/pf.go"} {
		if _, err := os.Stat(filepath.Join(dst, f)); err != nil {
			t.Errorf("the clone lacks %s: %v", f, err)
		}
	}
	build := exec.Command("go", "build", "./...")
	build.Dir, build.Env = dst, append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build in the clone: %v\n%s", err, out)
	}
	code, list = rest(t, http.MethodGet, "/v1/tasks/"+got["[PROJ-A-1]"]["task_id"].(string), token, nil)
	if code != http.StatusOK || list["task"].(map[string]any)["status"] != "TASK_STATUS_DONE" {
		t.Errorf("a finished task after approval: %d %v", code, list)
	}
}

// The issues project (session mode): issues 1 and 3 first, 2 blocked by 1.
var projIssues = []projTask{
	{"1", "Write package sa [PROJ-S-1]", "sa", nil},
	{"2", "Write package sb [PROJ-S-2]", "sb", []string{"1"}},
	{"3", "Write package sc [PROJ-S-3]", "sc", nil},
}

// The resumed project: two phases of slow tasks, so the agent can be killed in phase 2.
var projKill = [][]projTask{
	{{"k1", "Write package ka [PROJ-K-1]", "ka", nil}, {"k2", "Write package kb [PROJ-K-2]", "kb", nil}},
	{{"k3", "Write package kc [PROJ-K-3]", "kc", []string{"k1"}}, {"k4", "Write package kd [PROJ-K-4]", "kd", []string{"k2"}}},
}

// moreProjectScripts are the issues and the resumed projects' answers.
func moreProjectScripts() []fakellm.Response {
	var rs []fakellm.Response
	for _, t := range projIssues {
		rs = append(rs, taskScript(t, false)...)
	}
	rs = append(rs,
		fakellm.Response{Match: both(`# Job: revise the next project phase`, regexp.QuoteMeta("[PROJ-S-")), Text: `{"reasoning": "fine", "changed": false}`},
		fakellm.Response{Match: both(`# Job: review a project`, regexp.QuoteMeta("[PROJ-S-")), Text: `{"summary": "Three packages.", "concerns": [], "documentation": "Issues 1 to 3.", "quality_score": 8}`},
	)
	return append(rs, slowProjectScript("[PROJ-K]", projKill, 700*time.Millisecond)...)
}

// slowProjectScript scripts the project whose request holds marker: its plan (phases), a
// revision that changes nothing, its review, and each task's plan and file, the file
// answered after latency (so a service can be killed while it builds).
func slowProjectScript(marker string, phases [][]projTask, latency time.Duration) []fakellm.Response {
	q := regexp.QuoteMeta(marker)
	rs := []fakellm.Response{
		{Match: both(`# Job: decompose a project`, q), Text: decomposeAnswer("Packages "+marker, phases...)},
		{Match: both(`# Job: revise the next project phase`, q), Text: `{"reasoning": "fine", "changed": false}`},
		{Match: both(`# Job: review a project`, q), Text: `{"summary": "Packages.", "concerns": [], "documentation": "The packages.", "quality_score": 8}`},
	}
	for _, ph := range phases {
		for _, t := range ph {
			path := t.pkg + "/" + t.pkg + ".go"
			marker := t.title[strings.Index(t.title, "["):]
			rs = append(rs, fakellm.Response{Match: projectPlanMatch(marker), Text: planAnswer("Write "+path+".", path)},
				fakellm.Response{Match: genMatch(path), Latency: fakellm.Duration(latency),
					Text: content(fmt.Sprintf("package %s\n\n// F is one.\nfunc F() int { return 1 }\n", t.pkg))})
		}
	}
	return rs
}

// cloneBranch clones repo's branch into a temporary directory.
func cloneBranch(t *testing.T, repo, branch string) string {
	t.Helper()
	code, rp := rest(t, http.MethodGet, "/v1/repos/"+repo, token, nil)
	if code != http.StatusOK {
		t.Fatalf("get repo: %d %v", code, rp)
	}
	dst := filepath.Join(t.TempDir(), "clone")
	if out, err := exec.Command("git", "clone", "--quiet", "--branch", branch, rp["repo"].(map[string]any)["clone_url"].(string), dst).CombinedOutput(); err != nil {
		t.Fatalf("git clone: %v\n%s", err, out)
	}
	return dst
}

func TestProjectFromImportedIssuesCommitsEachTask(t *testing.T) {
	parallel(t)
	repo := agentRepo(t, "project-issues")
	numbers := map[string]float64{}
	for _, it := range projIssues {
		var blocked []any
		for _, d := range it.deps {
			blocked = append(blocked, numbers[d])
		}
		code, body := rest(t, http.MethodPost, "/v1/repos/"+repo+"/issues", token, map[string]any{"title": it.title, "body": "Write package " + it.pkg + ".", "blocked_by": blocked})
		if code != http.StatusOK {
			t.Fatalf("create issue: %d %v", code, body)
		}
		numbers[it.key] = body["issue"].(map[string]any)["number"].(float64)
	}
	code, body := rest(t, http.MethodPost, "/v1/projects", token, map[string]any{"repo": repo, "import_issues": true, "mode": "PROJECT_MODE_SESSION"})
	if code != http.StatusOK {
		t.Fatalf("plan from issues: %d %v", code, body)
	}
	p := body["project"].(map[string]any)
	id := p["id"].(string)
	phases := p["phases"].([]any)
	if len(phases) != 2 || len(phases[0].(map[string]any)["tasks"].([]any)) != 2 {
		t.Fatalf("the issues' layers: %v", phases)
	}
	for _, tk := range projectTasks(p) {
		if tk["task_id"] == "" || tk["task_id"] == nil {
			t.Fatalf("a task planned from an issue has no task: %v", tk)
		}
	}
	if code, body := rest(t, http.MethodPost, "/v1/projects/"+id+":start", token, map[string]any{}); code != http.StatusOK {
		t.Fatalf("start: %d %v", code, body)
	}
	p = waitProject(t, id, 5*time.Minute, "PROJECT_STATUS_PENDING_REVIEW")
	// While it ran, each task was committed on the project branch.
	dst := cloneBranch(t, repo, p["branch"].(string))
	out, err := exec.Command("git", "-C", dst, "log", "--format=%s", "origin/main..HEAD").CombinedOutput()
	if err != nil {
		t.Fatalf("git log: %v\n%s", err, out)
	}
	commits := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(commits) != 3 {
		t.Fatalf("commits on the project branch: %q, want one per task", commits)
	}
	approveToOnePullRequest(t, repo, id, p["review_id"].(string), 2*time.Minute)
}

// planCount counts the answered planning requests of the task whose title holds marker.
func planCount(marker string) int {
	n := 0
	for _, r := range llm.Requests() {
		// The body is JSON: the prompt's newlines are escaped there.
		title := regexp.MustCompile(`Title: [^\\]*` + regexp.QuoteMeta(marker))
		if b := string(r.Body); r.Status == http.StatusOK && strings.Contains(b, "# Job: plan a task") && title.MatchString(b) {
			n++
		}
	}
	return n
}

func TestProjectResumesAfterTheAgentIsKilledAndRerunsWhatTheReviewNames(t *testing.T) {
	alone(t)
	repo := agentRepo(t, "project-kill")
	code, body := rest(t, http.MethodPost, "/v1/projects", token, map[string]any{"repo": repo, "request": "Build ka to kd [PROJ-K]"})
	if code != http.StatusOK {
		t.Fatalf("plan: %d %v", code, body)
	}
	id := body["project"].(map[string]any)["id"].(string)
	if code, body := rest(t, http.MethodPost, "/v1/projects/"+id+":start", token, map[string]any{}); code != http.StatusOK {
		t.Fatalf("start: %d %v", code, body)
	}
	// Kill the agent once phase 2 runs.
	deadline := time.Now().Add(liveness(4 * time.Minute))
	for {
		code, got := rest(t, http.MethodGet, "/v1/projects/"+id, token, nil)
		if code != http.StatusOK {
			t.Fatalf("get project: %d %v", code, got)
		}
		if p := got["project"].(map[string]any); p["current_phase"] == float64(2) && projectTasks(p)["[PROJ-K-3]"]["status"] == "PROJECT_TASK_STATUS_RUNNING" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("phase 2 never ran: %v", got)
		}
		time.Sleep(100 * time.Millisecond)
	}
	restart(t, "agent")
	p := waitProject(t, id, 5*time.Minute, "PROJECT_STATUS_PENDING_REVIEW")
	for f, n := range generations("ka/ka.go", "kb/kb.go", "kc/kc.go", "kd/kd.go") {
		if n != 1 {
			t.Errorf("%s generated %d times, want once", f, n)
		}
	}
	for m, st := range projectTasks(p) {
		if st["status"] != "PROJECT_TASK_STATUS_COMPLETED" {
			t.Errorf("task %s is %v after the resume: %v %v", m, st["status"], st["error"], st["status_reason"])
		}
	}
	// Changes asked of one task (named in the feedback) run only that task again.
	before := map[string]int{}
	for _, m := range []string{"[PROJ-K-1]", "[PROJ-K-2]", "[PROJ-K-3]", "[PROJ-K-4]"} {
		before[m] = planCount(m)
	}
	first := p["review_id"].(string)
	kb := projectTasks(p)["[PROJ-K-2]"]["id"].(string)
	if code, body := rest(t, http.MethodPost, "/v1/reviews/"+first+":requestChanges", token, map[string]any{"feedback": "kb needs a doc comment that says more", "project_task_ids": []string{kb}}); code != http.StatusOK {
		t.Fatalf("request changes: %d %v", code, body)
	}
	p = waitProject(t, id, 3*time.Minute, "PROJECT_STATUS_PENDING_REVIEW")
	for m, n := range before {
		want := n
		if m == "[PROJ-K-2]" {
			want = n + 1
		}
		if got := planCount(m); got != want {
			t.Errorf("task %s planned %d times after the changes, want %d", m, got, want)
		}
	}
	code, rv := rest(t, http.MethodGet, "/v1/reviews/"+p["review_id"].(string), token, nil)
	if code != http.StatusOK || p["review_id"] == first || rv["review"].(map[string]any)["previous_review_id"] != first {
		t.Fatalf("the new review does not link the first (%s): %d %v", first, code, rv)
	}
	approveToOnePullRequest(t, repo, id, p["review_id"].(string), 2*time.Minute)
	code, br := rest(t, http.MethodGet, "/v1/repos/"+repo+"/branches", token, nil)
	if code == http.StatusOK {
		n := 0
		for _, b := range br["branches"].([]any) {
			if strings.HasPrefix(fmt.Sprint(b.(map[string]any)["name"]), "thefold/project-") {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d project branches, want 1: %v", n, br)
		}
	}
}

// TestProjectDemo runs the README tour's project: the request against the demo script
// (deploy/fakellm/demo.json), through the watch stream, the one review and the pull
// request.
func TestProjectDemo(t *testing.T) {
	parallel(t)
	repo := "local/project-demo"
	demoRepo(t, repo)
	code, body := rest(t, http.MethodPost, "/v1/projects", token, map[string]any{"repo": repo, "request": "Report the server version over HTTP"})
	if code != http.StatusOK {
		t.Fatalf("plan: %d %v", code, body)
	}
	id := body["project"].(map[string]any)["id"].(string)
	if code, body := rest(t, http.MethodPost, "/v1/projects/"+id+":start", token, map[string]any{}); code != http.StatusOK {
		t.Fatalf("start: %d %v", code, body)
	}
	p := waitProject(t, id, 5*time.Minute, "PROJECT_STATUS_PENDING_REVIEW")
	code, rv := rest(t, http.MethodGet, "/v1/reviews/"+p["review_id"].(string), token, nil)
	if code != http.StatusOK || len(rv["review"].(map[string]any)["files"].([]any)) != 3 {
		t.Fatalf("the project's review: %d %v", code, rv)
	}
	if code, body := rest(t, http.MethodPost, "/v1/reviews/"+p["review_id"].(string)+":approve", token, map[string]any{}); code != http.StatusOK {
		t.Fatalf("approve: %d %v", code, body)
	}
	p = waitProject(t, id, 2*time.Minute, "PROJECT_STATUS_COMPLETED")
	if p["pull_request"] == nil {
		t.Fatalf("completed project without a pull request: %v", p)
	}
	// The watch stream of the finished project replays its events and ends: phases, tasks,
	// the task jobs' events relayed, the review and the pull request.
	types := projectEventTypes(t, id)
	for _, want := range []string{"PROJECT_EVENT_TYPE_CREATED", "PROJECT_EVENT_TYPE_PHASE_STARTED", "PROJECT_EVENT_TYPE_TASK_STARTED",
		"PROJECT_EVENT_TYPE_JOB_EVENT", "PROJECT_EVENT_TYPE_TASK_COMPLETED", "PROJECT_EVENT_TYPE_PHASE_COMPLETED", "PROJECT_EVENT_TYPE_REVIEW_SUBMITTED",
		"PROJECT_EVENT_TYPE_PULL_REQUEST_OPENED"} {
		if !slices.Contains(types, want) {
			t.Errorf("the project's stream lacks %s: %v", want, types)
		}
	}
	if types[len(types)-1] != "PROJECT_EVENT_TYPE_STATUS_CHANGED" {
		t.Errorf("the stream ends with %s, want the status change to completed", types[len(types)-1])
	}
}

// projectEventTypes reads a finished project's events over REST (the stream ends after the
// event that finished it), heartbeats left out.
func projectEventTypes(t *testing.T, id string) []string {
	return streamTypes(t, "/v1/projects/"+id+":watch", "PROJECT_EVENT_TYPE_UNSPECIFIED")
}

// The budget project: two independent tasks.
var projBudget = []projTask{
	{"b1", "Write package ba [PROJ-B-1]", "ba", nil},
	{"b2", "Write package bb [PROJ-B-2]", "bb", nil},
}

func budgetProjectScript() []fakellm.Response {
	rs := []fakellm.Response{
		{Match: both(`# Job: decompose a project`, regexp.QuoteMeta("[PROJ-B]")), Text: decomposeAnswer("Packages ba and bb [PROJ-B]", projBudget)},
		{Match: both(`# Job: review a project`, regexp.QuoteMeta("[PROJ-B]")), Text: `{"summary": "Two packages.", "concerns": [], "documentation": "ba and bb.", "quality_score": 8}`},
	}
	for _, t := range projBudget {
		rs = append(rs, taskScript(t, false)...)
	}
	return rs
}

// TestProjectBudgetStopsItForAPerson starts a project with a budget of one token, which its
// planning already spent: the project is HUMAN_NEEDED with what it spent (and a
// BUDGET_EXHAUSTED event); resumed with a larger budget, it reaches its review.
func TestProjectBudgetStopsItForAPerson(t *testing.T) {
	parallel(t)
	repo := agentRepo(t, "project-budget")
	code, body := rest(t, http.MethodPost, "/v1/projects", token, map[string]any{"repo": repo, "request": "Build ba and bb [PROJ-B]"})
	if code != http.StatusOK {
		t.Fatalf("plan: %d %v", code, body)
	}
	id := body["project"].(map[string]any)["id"].(string)
	if code, body := rest(t, http.MethodPost, "/v1/projects/"+id+":start", token, map[string]any{"budget": map[string]any{"max_tokens": 1}}); code != http.StatusOK {
		t.Fatalf("start: %d %v", code, body)
	}
	p := waitProject(t, id, 3*time.Minute, "PROJECT_STATUS_HUMAN_NEEDED")
	if r, _ := p["status_reason"].(string); !strings.Contains(r, "budget exhausted") {
		t.Fatalf("the project stopped for %q, want the budget", r)
	}
	if types := streamTypesUntil(t, id); !slices.Contains(types, "PROJECT_EVENT_TYPE_BUDGET_EXHAUSTED") {
		t.Errorf("no BUDGET_EXHAUSTED event: %v", types)
	}
	// The plan's own model call spent the budget (planning counts): no task ran. A task that
	// had run and failed on its share would be retried with room.
	var failed []string
	for _, tk := range projectTasks(p) {
		switch tk["status"] {
		case "PROJECT_TASK_STATUS_FAILED":
			failed = append(failed, tk["id"].(string))
		case "PROJECT_TASK_STATUS_COMPLETED":
			t.Errorf("a task completed within a budget of one token: %v", tk)
		}
	}
	for _, ptID := range failed {
		if code, body := rest(t, http.MethodPost, "/v1/projects/"+id+"/tasks/"+ptID+":retry", token, map[string]any{"request_id": "retry-" + ptID}); code != http.StatusOK {
			t.Fatalf("retry: %d %v", code, body)
		}
	}
	if code, body := rest(t, http.MethodPost, "/v1/projects/"+id+":resume", token, map[string]any{"budget": map[string]any{"max_tokens": 50_000_000}}); code != http.StatusOK {
		t.Fatalf("resume: %d %v", code, body)
	}
	p = waitProject(t, id, 3*time.Minute, "PROJECT_STATUS_PENDING_REVIEW")
	for m, tk := range projectTasks(p) {
		if tk["status"] != "PROJECT_TASK_STATUS_COMPLETED" {
			t.Errorf("task %s is %v after the resume: %v", m, tk["status"], tk["error"])
		}
	}
}

// streamTypesUntil reads the events of an unfinished project from the start for a few
// seconds, heartbeats left out.
func streamTypesUntil(t *testing.T, id string) []string {
	t.Helper()
	return readStream(t, "/v1/projects/"+id+":watch", "PROJECT_EVENT_TYPE_UNSPECIFIED", 3*time.Second, false)
}

// The restart project: two phases of slow tasks, so the builder and the sandbox service can
// be killed while a task builds.
var projRestart = [][]projTask{
	{{"r1", "Write package ra [PROJ-R-1]", "ra", nil}, {"r2", "Write package rb [PROJ-R-2]", "rb", nil}},
	{{"r3", "Write package rc [PROJ-R-3]", "rc", []string{"r1"}}},
}

func restartProjectScript() []fakellm.Response {
	return slowProjectScript("[PROJ-R]", projRestart, 1500*time.Millisecond)
}

// waitTaskRunning waits until the project task whose title holds marker is RUNNING.
func waitTaskRunning(t *testing.T, id, marker string) {
	t.Helper()
	deadline := time.Now().Add(liveness(4 * time.Minute))
	for {
		code, got := rest(t, http.MethodGet, "/v1/projects/"+id, token, nil)
		if code != http.StatusOK {
			t.Fatalf("get project: %d %v", code, got)
		}
		if projectTasks(got["project"].(map[string]any))[marker]["status"] == "PROJECT_TASK_STATUS_RUNNING" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s never ran: %v", marker, got)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// restart kills service and starts it again.
func restart(t *testing.T, service string) {
	t.Helper()
	if err := mesh.Kill(service); err != nil {
		t.Fatal(err)
	}
	startAgain(t)
}

// startAgain starts the mesh's stopped services and waits until all are ready.
func startAgain(t *testing.T) {
	t.Helper()
	if err := mesh.Start(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), liveness(time.Minute))
	defer cancel()
	if err := mesh.WaitReady(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
}

// TestProjectSurvivesABuilderAndASandboxRestart kills the builder while phase 1 builds and
// the sandbox service while phase 2 builds: the project goes on to its one review and one
// pull request, with every task's files.
func TestProjectSurvivesABuilderAndASandboxRestart(t *testing.T) {
	alone(t)
	repo := agentRepo(t, "project-restart")
	code, body := rest(t, http.MethodPost, "/v1/projects", token, map[string]any{"repo": repo, "request": "Build ra to rc [PROJ-R]"})
	if code != http.StatusOK {
		t.Fatalf("plan: %d %v", code, body)
	}
	id := body["project"].(map[string]any)["id"].(string)
	if code, body := rest(t, http.MethodPost, "/v1/projects/"+id+":start", token, map[string]any{}); code != http.StatusOK {
		t.Fatalf("start: %d %v", code, body)
	}
	waitTaskRunning(t, id, "[PROJ-R-1]")
	time.Sleep(time.Second) // into its build
	restart(t, "builder")
	waitTaskRunning(t, id, "[PROJ-R-3]")
	time.Sleep(time.Second)
	restart(t, "sandbox")
	p := waitProject(t, id, 6*time.Minute, "PROJECT_STATUS_PENDING_REVIEW")
	for m, tk := range projectTasks(p) {
		if tk["status"] != "PROJECT_TASK_STATUS_COMPLETED" {
			t.Errorf("task %s is %v after the restarts: %v", m, tk["status"], tk["error"])
		}
	}
	p, _ = approveToOnePullRequest(t, repo, id, p["review_id"].(string), 3*time.Minute)
	dst := cloneBranch(t, repo, p["branch"].(string))
	for _, f := range []string{"ra/ra.go", "rb/rb.go", "rc/rc.go"} {
		if _, err := os.Stat(filepath.Join(dst, f)); err != nil {
			t.Errorf("the clone lacks %s: %v", f, err)
		}
	}
}

// approveToOnePullRequest approves the project's review, waits (at most timeout) until the
// project is COMPLETED and checks that repo has exactly one pull request; it returns the
// project and that pull request.
func approveToOnePullRequest(t *testing.T, repo, id, reviewID string, timeout time.Duration) (project, pr map[string]any) {
	t.Helper()
	if code, body := rest(t, http.MethodPost, "/v1/reviews/"+reviewID+":approve", token, map[string]any{}); code != http.StatusOK {
		t.Fatalf("approve: %d %v", code, body)
	}
	project = waitProject(t, id, timeout, "PROJECT_STATUS_COMPLETED")
	code, prs := rest(t, http.MethodGet, "/v1/repos/"+repo+"/pulls", token, nil)
	if code != http.StatusOK || len(prs["pull_requests"].([]any)) != 1 {
		t.Fatalf("pull requests: %d %v, want exactly one", code, prs)
	}
	return project, prs["pull_requests"].([]any)[0].(map[string]any)
}
