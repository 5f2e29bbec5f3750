package e2e

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/fakellm"
)

// The merge-group scenarios: pull requests queued behind the front of the merge queue are
// checked together in one commit of the base with all of them merged in. The repository's
// check (crewCheck) takes a few seconds here, so later pull requests queue while the first
// is checked.
const crewGroupCheckSleep = 6

// The crew's merge policy is HUMAN, so every pull request waits at its review until the
// test approves it: the first alone, which opens first and is checked alone; then the other
// two, which queue meanwhile and are checked together.
// Passing: p1 alone, then p2 and p3 together. Failing: f1 alone; f2 and f3 (f3's first
// version breaks the check) together, which fails; f2 alone passes; f3 alone fails, is
// fixed on its pull request, and passes.
var (
	crewGroupPass = []crewIssue{
		{"p1", "Write note gp1 [CREW-G-P1]", "gp1", nil},
		{"p2", "Write note gp2 [CREW-G-P2]", "gp2", nil},
		{"p3", "Write note gp3 [CREW-G-P3]", "gp3", nil},
	}
	crewGroupFail = []crewIssue{
		{"f1", "Write note gf1 [CREW-G-F1]", "gf1", nil},
		{"f2", "Write note gf2 [CREW-G-F2]", "gf2", nil},
		{"f3", "Write note gf3 [CREW-G-F3]", "gf3", nil},
	}
)

// crewGroupScript answers the merge-group scenarios; f3's first version holds the marker.
func crewGroupScript() []fakellm.Response {
	var rs []fakellm.Response
	for _, set := range [][]crewIssue{crewGroupPass, crewGroupFail} {
		for _, is := range set {
			path := is.path()
			marker := is.title[strings.Index(is.title, "["):]
			rs = append(rs, fakellm.Response{Match: projectPlanMatch(marker), Text: planAnswer("Write "+path+".", path)})
			if is.key == "f3" {
				rs = append(rs, fakellm.Response{Match: genMatch(path), Times: 1, Text: content(crewSrc(is.pkg, true))})
			}
			rs = append(rs, fakellm.Response{Match: genMatch(path), Text: content(crewSrc(is.pkg, false))})
		}
	}
	return rs
}

// crewGroupRun works one merge-group scenario and returns its project and what the pool's
// merge queue said meanwhile: the status reasons seen, and the most pull requests seen in
// one group. Once all three tasks wait at their reviews it approves the first; once that
// one's pull request is open, the others (and from then on every review that waits).
func crewGroupRun(t *testing.T, name string, issues []crewIssue) (map[string]any, []string, int) {
	t.Helper()
	repo, _ := crewRepo(t, name, issues, crewGroupCheckSleep)
	id := planCrew(t, repo, map[string]any{"check_command": crewCheckCommand, "merge_policy": "MERGE_POLICY_HUMAN"})
	var reasons []string
	most, gate := 0, false
	approved := map[string]bool{}
	deadline := time.Now().Add(liveness(6 * time.Minute))
	for {
		p := getJSON(t, "/v1/projects/"+id)["project"].(map[string]any)
		if p["status"] != "PROJECT_STATUS_RUNNING" {
			return p, reasons, most
		}
		if time.Now().After(deadline) {
			t.Fatalf("project %s still running: %v", id, p)
		}
		// The first review is approved alone; once its pull request is open (and its check
		// runs), the others: they queue behind it.
		tasks := projectTasks(p)
		first := tasks[issues[0].title[strings.Index(issues[0].title, "["):]]
		var waiting []string
		for _, is := range issues {
			tk := tasks[is.title[strings.Index(is.title, "["):]]
			if tk["status"] == "PROJECT_TASK_STATUS_IN_REVIEW" {
				waiting = append(waiting, tk["job_id"].(string))
			}
		}
		gate = gate || len(waiting) == len(issues)
		for i, jobID := range waiting {
			if !gate || (i > 0 && first["status"] == "PROJECT_TASK_STATUS_IN_REVIEW") {
				break
			}
			job := getJSON(t, "/v1/jobs/"+jobID)["job"].(map[string]any)
			review, _ := job["review_id"].(string)
			if review == "" || approved[review] || job["status"] != "JOB_STATUS_PENDING_REVIEW" {
				continue
			}
			if code, body := rest(t, http.MethodPost, "/v1/reviews/"+review+":approve", token, map[string]any{}); code != http.StatusOK {
				t.Fatalf("approve %s: %d %v", review, code, body)
			}
			approved[review] = true
		}
		pool := getJSON(t, "/v1/projects/"+id+"/pool")
		q, _ := pool["merge_queue"].([]any)
		grouped := 0
		for _, e := range q {
			em := e.(map[string]any)
			if r, _ := em["status_reason"].(string); r != "" && !slices.Contains(reasons, r) {
				reasons = append(reasons, r)
			}
			if em["in_group"] == true {
				grouped++
			}
		}
		most = max(most, grouped)
		time.Sleep(100 * time.Millisecond)
	}
}

func TestCrewChecksQueuedPullRequestsTogether(t *testing.T) {
	parallel(t)
	p, reasons, most := crewGroupRun(t, "crew-group-pass", crewGroupPass)
	if p["status"] != "PROJECT_STATUS_COMPLETED" || p["status_reason"] != "3 merged, 0 skipped" {
		t.Fatalf("project: %v %v\ntasks: %v", p["status"], p["status_reason"], projectTasks(p))
	}
	if most != 2 {
		t.Fatalf("the pool showed at most %d pull requests in a merge group, want 2 (reasons seen: %q)", most, reasons)
	}
	tasks := projectTasks(p)
	p1, p2, p3 := tasks["[CREW-G-P1]"], tasks["[CREW-G-P2]"], tasks["[CREW-G-P3]"]
	if p1["checks"] == nil || strings.Contains(fmt.Sprint(p1["checks"]), "together") {
		t.Fatalf("p1 was not checked alone: %v", p1["checks"])
	}
	for _, tk := range []map[string]any{p2, p3} {
		pr := int(tk["pull_request"].(map[string]any)["number"].(float64))
		if !strings.Contains(fmt.Sprint(tk["checks"]), "checked together with") || tk["check_failures"] != nil {
			t.Fatalf("%v: checks %q, failures %v; want checked in a group", tk["title"], tk["checks"], tk["check_failures"])
		}
		// Each merged, brought up to date first (main moved under it).
		got := getJSON(t, fmt.Sprintf("/v1/repos/%s/pulls/%d", p["repo"], pr))["pull_request"].(map[string]any)
		if got["state"] != "PULL_REQUEST_STATE_MERGED" {
			t.Fatalf("pull request #%d: %v", pr, got["state"])
		}
	}
	// main has all three notes.
	dst := cloneBranch(t, fmt.Sprint(p["repo"]), "main")
	for _, is := range crewGroupPass {
		if _, err := os.Stat(filepath.Join(dst, "notes", is.pkg+".md")); err != nil {
			t.Fatalf("main lacks notes/%s.md after the crew: %v", is.pkg, err)
		}
	}
}

func TestCrewChecksTheFrontAloneWhenItsGroupFails(t *testing.T) {
	parallel(t)
	p, reasons, most := crewGroupRun(t, "crew-group-fail", crewGroupFail)
	if p["status"] != "PROJECT_STATUS_COMPLETED" || p["status_reason"] != "3 merged, 0 skipped" {
		t.Fatalf("project: %v %v\ntasks: %v", p["status"], p["status_reason"], projectTasks(p))
	}
	if most != 2 {
		t.Fatalf("the pool showed at most %d pull requests in a merge group, want 2 (reasons seen: %q)", most, reasons)
	}
	failed := false
	for _, r := range reasons {
		if strings.Contains(r, "together") && strings.Contains(r, "failed; checking #") {
			failed = true
		}
	}
	if !failed {
		t.Fatalf("no failed group seen in the merge queue: %q", reasons)
	}
	tasks := projectTasks(p)
	f2, f3 := tasks["[CREW-G-F2]"], tasks["[CREW-G-F3]"]
	// A group's failure is nobody's: f2 passed alone and was never sent back; f3 failed
	// once (alone), was fixed on the same pull request, and merged.
	if f2["check_failures"] != nil || f2["attempts"] != float64(1) {
		t.Fatalf("f2: %v", f2)
	}
	if f3["check_failures"] != float64(1) || f3["attempts"] != float64(2) {
		t.Fatalf("f3: failures %v, attempts %v; want 1 and 2", f3["check_failures"], f3["attempts"])
	}
}
