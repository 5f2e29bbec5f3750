package e2e

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/fakegithub"
	"github.com/thefold/thefold/pkg/fakellm"
)

// The crew on GitHub: the owner ghcrew's repositories are on ghFake (TestMain), GitHub's
// REST API in memory, reached by the github service's GitHub provider as GitHub Enterprise.
// The crew works the issues there as it does on the local forge; the test checks what the
// provider sent GitHub.

// The GitHub scenario: 2 waits on 1 (through GitHub's issue dependencies); 3 fails its CI
// once.
var crewGitHub = []crewIssue{
	{"1", "Write note gh1 [CREW-GH-1]", "gh1", nil},
	{"2", "Write note gh2 [CREW-GH-2]", "gh2", []string{"1"}},
	{"3", "Write note gh3 [CREW-GH-3]", "gh3", nil},
}

// crewGitHubScript is prepended to the e2e script (TestMain): each issue's plan and file;
// issue 3's first file carries the marker CHECKFAIL, which the fake's CI fails, and its fix
// (a second job, told the failing check) writes it without.
func crewGitHubScript() []fakellm.Response {
	var rs []fakellm.Response
	for _, is := range crewGitHub {
		path := is.path()
		marker := is.title[strings.Index(is.title, "["):]
		rs = append(rs, fakellm.Response{Match: projectPlanMatch(marker), Text: planAnswer("Write "+path+".", path)})
		if is.key == "3" {
			rs = append(rs, fakellm.Response{Match: genMatch(path), Times: 1, Text: content(crewSrc(is.pkg, true))})
		}
		rs = append(rs, fakellm.Response{Match: genMatch(path), Text: content(crewSrc(is.pkg, false))})
	}
	return rs
}

// ghCI is the fake's CI for one repository: a commit with a file holding CHECKFAIL gets a
// failing check run, the head of issue 2's branch a successful commit status (a CI that
// reports statuses, not check runs), any other commit a successful check run. It keeps
// what it was asked.
type ghCI struct {
	repo string
	mu   sync.Mutex
	seen []fakegithub.CheckTarget
}

func (ci *ghCI) rule(c fakegithub.CheckTarget) ([]fakegithub.CheckRun, []fakegithub.Status) {
	if c.Repo != ci.repo {
		return nil, nil
	}
	ci.mu.Lock()
	ci.seen = append(ci.seen, c)
	ci.mu.Unlock()
	for _, p := range slices.Sorted(maps.Keys(c.Files)) {
		if strings.Contains(c.Files[p], "CHECK"+"FAIL") {
			return []fakegithub.CheckRun{{Name: "ci/test", Status: "completed", Conclusion: "failure",
				Title: "CHECKFAIL marker found in " + p, DetailsURL: "https://ci.example/" + c.SHA[:10]}}, nil
		}
	}
	if slices.ContainsFunc(c.Branches, func(b string) bool { return strings.HasPrefix(b, "thefold/issue-2-") }) {
		return nil, []fakegithub.Status{{Context: "ci/legacy", State: "success", Description: "Passed"}}
	}
	return []fakegithub.CheckRun{{Name: "ci/test", Status: "completed", Conclusion: "success", Title: "Tests passed"}}, nil
}

// asked is what the CI was asked about commits on branches with prefix.
func (ci *ghCI) asked(prefix string) []fakegithub.CheckTarget {
	ci.mu.Lock()
	defer ci.mu.Unlock()
	var out []fakegithub.CheckTarget
	for _, c := range ci.seen {
		if slices.ContainsFunc(c.Branches, func(b string) bool { return strings.HasPrefix(b, prefix) }) {
			out = append(out, c)
		}
	}
	return out
}

func TestCrewOnGitHub(t *testing.T) {
	parallel(t)
	const repo = "ghcrew/app"
	ghFake.AddRepo(repo, map[string]string{"checks.py": crewCheck(0)})
	numbers := map[string]int{}
	for _, is := range crewGitHub {
		var blockers []int
		for _, d := range is.deps {
			blockers = append(blockers, numbers[d])
		}
		numbers[is.key] = ghFake.AddIssue(repo, fakegithub.Issue{Title: is.title, Body: "Write " + is.path() + ".", BlockedBy: blockers})
		if got := fmt.Sprint(numbers[is.key]); got != is.key {
			t.Fatalf("issue %s got number %s", is.key, got)
		}
	}
	// The crew's jobs call GitHub for the project's owner, who has no token of their own:
	// the server's token serves them within an allow-list grant, admin to merge.
	code, who := rest(t, http.MethodGet, "/v1/auth/whoami", token, nil)
	if code != http.StatusOK {
		t.Fatalf("whoami: %d %v", code, who)
	}
	if code, body := rest(t, http.MethodPut, "/v1/github/grants", token, map[string]any{"user_id": who["user_id"], "repo": repo, "role": "REPO_ROLE_ADMIN"}); code != http.StatusOK {
		t.Fatalf("grant: %d %v", code, body)
	}
	ci := &ghCI{repo: repo}
	ghFake.SetChecksRule(ci.rule)
	t.Cleanup(func() { ghFake.SetChecksRule(nil) })

	id := planCrew(t, repo, map[string]any{"max_workers": 2})
	p := waitProject(t, id, 5*time.Minute, "PROJECT_STATUS_COMPLETED")
	if p["status_reason"] != "3 merged, 0 skipped" {
		t.Fatalf("the crew's report: %v", p["status_reason"])
	}
	tasks := projectTasks(p)
	for _, is := range crewGitHub {
		tk := tasks[is.title[strings.Index(is.title, "["):]]
		wantFailures, wantAttempts := any(nil), float64(1)
		if is.key == "3" {
			wantFailures, wantAttempts = float64(1), 2
		}
		if tk["status"] != "PROJECT_TASK_STATUS_COMPLETED" || tk["issue_number"] != float64(numbers[is.key]) ||
			tk["check_failures"] != wantFailures || tk["attempts"] != wantAttempts {
			t.Fatalf("task of issue %s: %v (want check_failures %v, attempts %v)", is.key, tk, wantFailures, wantAttempts)
		}
	}

	// What the fake holds: one pull request per issue, merged, closing its issue; every
	// issue closed with a comment that links its pull request.
	pulls := map[string]fakegithub.Issue{} // by issue
	for _, x := range ghFake.Issues(repo) {
		if x.Pull == nil {
			continue
		}
		key := strings.TrimPrefix(x.Pull.Head, "thefold/issue-")
		key, _, _ = strings.Cut(key, "-")
		if _, dup := pulls[key]; dup {
			t.Fatalf("a second pull request for issue %s: #%d", key, x.Number)
		}
		pulls[key] = x
	}
	for _, is := range crewGitHub {
		pr, ok := pulls[is.key]
		if !ok || !pr.Pull.Merged || pr.State != "closed" || pr.Pull.Base != "main" || !strings.Contains(pr.Body, fmt.Sprintf("Closes #%d", numbers[is.key])) {
			t.Fatalf("pull request of issue %s: %+v", is.key, pr)
		}
		issue, _ := ghFake.Issue(repo, numbers[is.key])
		link := fmt.Sprintf("https://github.example/%s/pull/%d", repo, pr.Number)
		if issue.State != "closed" || !slices.ContainsFunc(issue.Comments, func(c string) bool {
			return strings.Contains(c, fmt.Sprintf("#%d", pr.Number)) && strings.Contains(c, link)
		}) {
			t.Fatalf("issue %s after its merge: %+v (want a comment linking %s)", is.key, issue, link)
		}
	}
	if len(pulls) != len(crewGitHub) {
		t.Fatalf("pull requests by issue: %v", pulls)
	}

	// What was sent. Every request carried the token.
	reqs := ghFake.Requests()
	for _, r := range reqs {
		if r.Header.Get("Authorization") != "Bearer "+ghFake.Token() {
			t.Fatalf("%s %s without the token", r.Method, r.Path)
		}
	}
	base := "/repos/" + repo
	// find is the indexes of the requests with method and path.
	find := func(method, path string) []int {
		var out []int
		for i, r := range reqs {
			if r.Method == method && r.Path == path {
				out = append(out, i)
			}
		}
		return out
	}
	body := func(i int) map[string]any {
		var m map[string]any
		if err := json.Unmarshal(reqs[i].Body, &m); err != nil {
			t.Fatalf("%s %s: body %q: %v", reqs[i].Method, reqs[i].Path, reqs[i].Body, err)
		}
		return m
	}
	// Three pull requests opened, one per issue, each closing it.
	opened := find(http.MethodPost, base+"/pulls")
	if len(opened) != 3 {
		t.Fatalf("%d pull requests opened, want 3", len(opened))
	}
	for _, is := range crewGitHub {
		n := 0
		for _, i := range opened {
			b := body(i)
			if strings.HasPrefix(fmt.Sprint(b["head"]), "thefold/issue-"+is.key+"-") {
				n++
				if !strings.Contains(fmt.Sprint(b["body"]), fmt.Sprintf("Closes #%d", numbers[is.key])) || b["base"] != "main" {
					t.Fatalf("the pull request of issue %s was opened with %v", is.key, b)
				}
			}
		}
		if n != 1 {
			t.Fatalf("issue %s's pull request opened %d times", is.key, n)
		}
	}
	// Merged with the sha of the head its checks passed on; #2's after #1's, and #2's
	// branch made only after #1 merged (it was blocked by #1).
	mergedAt := map[string]int{}
	for _, is := range crewGitHub {
		pr := pulls[is.key]
		merges := find(http.MethodPut, fmt.Sprintf("%s/pulls/%d/merge", base, pr.Number))
		if len(merges) == 0 {
			t.Fatalf("no merge of issue %s's pull request #%d", is.key, pr.Number)
		}
		last := merges[len(merges)-1]
		if b := body(last); b["sha"] != pr.Pull.HeadSHA || b["merge_method"] != "squash" {
			t.Fatalf("merge of #%d: %v, want sha %s, squash", pr.Number, b, pr.Pull.HeadSHA)
		}
		mergedAt[is.key] = last
		// Its checks were read on that head: the check runs and the combined status.
		for _, kind := range []string{"check-runs", "status"} {
			if len(find(http.MethodGet, base+"/commits/"+pr.Pull.HeadSHA+"/"+kind)) == 0 {
				t.Fatalf("the %s of #%d's head %s were not read", kind, pr.Number, pr.Pull.HeadSHA)
			}
		}
	}
	if mergedAt["2"] < mergedAt["1"] {
		t.Fatal("issue 2's pull request merged before issue 1's, which blocks it")
	}
	for _, i := range find(http.MethodPost, base+"/git/refs") {
		if strings.Contains(fmt.Sprint(body(i)["ref"]), "thefold/issue-2-") && i < mergedAt["1"] {
			t.Fatal("issue 2's branch was made before issue 1's pull request merged")
		}
	}
	// The checks: #1's head a check run, #2's a commit status, #3 failed on its first
	// head and passed on a later one of the same branch.
	if runs, sts := ghFake.CheckRuns(repo, pulls["1"].Pull.HeadSHA), ghFake.Statuses(repo, pulls["1"].Pull.HeadSHA); len(runs) != 1 || runs[0].Conclusion != "success" || len(sts) != 0 {
		t.Fatalf("checks of #1's head: %v %v", runs, sts)
	}
	if runs, sts := ghFake.CheckRuns(repo, pulls["2"].Pull.HeadSHA), ghFake.Statuses(repo, pulls["2"].Pull.HeadSHA); len(runs) != 0 || len(sts) != 1 || sts[0].State != "success" {
		t.Fatalf("checks of #2's head: %v %v", runs, sts)
	}
	three := ci.asked("thefold/issue-3-")
	if len(three) < 2 || !strings.Contains(three[0].Files["notes/gh3.md"], "CHECKFAIL") || three[len(three)-1].SHA != pulls["3"].Pull.HeadSHA ||
		strings.Contains(three[len(three)-1].Files["notes/gh3.md"], "CHECKFAIL") {
		t.Fatalf("issue 3's heads checked: %d, want a failing first and the merged head last", len(three))
	}
	// #3's fix was a second commit on the same branch: two ref updates, one pull request.
	if n := len(find(http.MethodPatch, base+"/git/refs/heads/"+pulls["3"].Pull.Head)); n < 2 {
		t.Fatalf("%d commits pushed to issue 3's branch, want the first and its fix", n)
	}
	// The fix was told what the failing check said.
	told := false
	for _, r := range llm.Requests() {
		b := string(r.Body)
		if strings.Contains(b, "# Job: plan a task") && strings.Contains(b, "[CREW-GH-3]") && strings.Contains(b, "CHECKFAIL marker found in notes/gh3.md") {
			told = true
		}
	}
	if !told {
		t.Fatal("no fix plan of issue 3 was told the failing check")
	}
	// #1 and #3 started from the same main: whichever merged second was behind its base,
	// found so by a comparison, and brought up to date with update-branch.
	updates := 0
	for _, r := range reqs {
		if r.Method == http.MethodPut && strings.HasPrefix(r.Path, base+"/pulls/") && strings.HasSuffix(r.Path, "/update-branch") {
			updates++
		}
	}
	if updates == 0 || len(ghFake.RequestsMatching(http.MethodGet, base+"/compare/main...")) == 0 {
		t.Fatalf("%d update-branch calls, want at least one", updates)
	}
	// Each issue closed through the issues API, after a comment.
	for _, is := range crewGitHub {
		closes := 0
		for _, i := range find(http.MethodPatch, fmt.Sprintf("%s/issues/%d", base, numbers[is.key])) {
			if body(i)["state"] == "closed" {
				closes++
			}
		}
		comments := find(http.MethodPost, fmt.Sprintf("%s/issues/%d/comments", base, numbers[is.key]))
		if closes != 1 || len(comments) != 1 {
			t.Fatalf("issue %s: %d closes, %d comments; want one of each", is.key, closes, len(comments))
		}
	}
}
