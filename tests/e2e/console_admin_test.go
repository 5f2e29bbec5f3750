package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestConsoleRepositoryFilesPullsAndIssues walks a repository in the console: a folder and
// a file (line numbers, highlighted keywords), a pull request's diff unified and side by
// side, and the open issues imported into tasks with their blocked-by link kept.
func TestConsoleRepositoryFilesPullsAndIssues(t *testing.T) {
	parallel(t)
	access, b := signedInUser(t, "console-repo", 4*time.Minute)
	repo := localRepoAs(t, access, fmt.Sprintf("console-repo-%d", time.Now().UnixNano()), "go.mod", "module example.com/r\n\ngo 1.22\n")
	commit := func(branch, path, content string) {
		t.Helper()
		if code, body := rest(t, http.MethodPost, "/v1/repos/"+repo+"/commits", access, map[string]any{"branch": branch, "message": "Add " + path,
			"files": []map[string]any{{"path": path, "action": "FILE_ACTION_CREATE", "content": content}}}); code != http.StatusOK {
			t.Fatalf("commit %s: %d %v", path, code, body)
		}
	}
	commit("main", "api/health.go", "package api\n\n// Health says the service is up.\nfunc Health() string { return \"ok <b>\" }\n")
	if code, body := rest(t, http.MethodPost, "/v1/repos/"+repo+"/branches", access, map[string]any{"branch": "feature/status"}); code != http.StatusOK {
		t.Fatalf("branch: %d %v", code, body)
	}
	if code, body := rest(t, http.MethodPost, "/v1/repos/"+repo+"/commits", access, map[string]any{"branch": "feature/status", "message": "Status",
		"files": []map[string]any{{"path": "api/health.go", "action": "FILE_ACTION_MODIFY", "content": "package api\n\n// Health says the service is up.\nfunc Health() string { return \"up\" }\n\nfunc Status() int { return 200 }\n"}}}); code != http.StatusOK {
		t.Fatalf("commit on the branch: %d %v", code, body)
	}
	if code, body := rest(t, http.MethodPost, "/v1/repos/"+repo+"/pulls", access, map[string]any{"head": "feature/status", "title": "A status <i>endpoint</i>"}); code != http.StatusOK {
		t.Fatalf("pull request: %d %v", code, body)
	}
	issue := func(title string, labels []string, blockedBy ...float64) float64 {
		t.Helper()
		code, body := rest(t, http.MethodPost, "/v1/repos/"+repo+"/issues", access, map[string]any{"title": title, "body": "Do " + title, "labels": labels, "blocked_by": blockedBy})
		if code != http.StatusOK {
			t.Fatalf("issue %q: %d %v", title, code, body)
		}
		return body["issue"].(map[string]any)["number"].(float64)
	}
	first := issue("Add a status endpoint", []string{"thefold"})
	issue("Document the status endpoint", []string{"thefold", "docs"}, first)
	issue("Someone else's idea", []string{"later"})

	b.run("open the repository", chromedp.Click(chromedp.CSS(`#nav a[href="/repos"]`)), chromedp.WaitVisible(chromedp.CSS(`#repos`)),
		chromedp.Click(chromedp.CSS(`#repos a.repo-link[href="/repos/`+repo+`"]`)), chromedp.WaitVisible(chromedp.CSS(`#tree`)))
	if got := b.text(`#tree tbody`); !strings.Contains(got, "api/") || !strings.Contains(got, "go.mod") {
		b.fail("the root folder lists %q", got)
	}
	b.run("open the folder and the file", chromedp.Click(chromedp.CSS(`#tree a.tree-dir`)), chromedp.WaitVisible(chromedp.CSS(`#tree a.tree-file[href$="api%2Fhealth.go"]`)),
		chromedp.Click(chromedp.CSS(`#tree a.tree-file[href$="api%2Fhealth.go"]`)), chromedp.WaitVisible(chromedp.CSS(`#file-view`)))
	if got := b.eval(`Array.from(document.querySelectorAll("#file-view .tok-k")).map(e => e.textContent).join(" ")`); !strings.Contains(got, "package") || !strings.Contains(got, "func") {
		b.fail("the file's keywords highlighted: %q", got)
	}
	// The file's text is text: its "<b>" makes no element.
	if got := b.eval(`String(document.querySelectorAll("#file-view b").length) + " " + document.querySelector("#file-view").textContent.includes("ok <b>")`); got != "0 true" {
		b.fail("the file's markup: %q", got)
	}
	if got := b.eval(`document.querySelector("#file-view tr:last-child td.ln").textContent`); got != "4" {
		b.fail("the file's last line number is %q, want 4", got)
	}

	b.run("open the pull request", chromedp.Click(chromedp.CSS(`#tab-pulls`)), chromedp.WaitVisible(chromedp.CSS(`#pulls`)),
		chromedp.Click(chromedp.CSS(`#pulls a.pr-title`)), chromedp.WaitVisible(chromedp.CSS(`.file-diffs`)))
	if got := b.text(`main h1`); got != "#1 A status <i>endpoint</i>" {
		b.fail("the pull request's title reads %q", got)
	}
	b.eval(`localStorage.removeItem("thefold-diff"), ""`)
	if diff := b.eval(`document.querySelector("pre.diff")?.textContent || ""`); !strings.Contains(diff, "+func Status() int") || !strings.Contains(diff, `-func Health() string { return "ok <b>" }`) {
		b.fail("the unified diff: %q", diff)
	}
	b.run("side by side", chromedp.Click(chromedp.CSS(`button[data-diff-mode=split]`)), chromedp.WaitVisible(chromedp.CSS(`table.split`)))
	// The changed line faces its replacement: one row with the old line left, the new right.
	row := b.eval(`Array.from(document.querySelectorAll("table.split tr")).map(r => Array.from(r.querySelectorAll("td.src")).map(c => c.className.replace("src", "").trim() + ":" + c.textContent).join(" | ")).find(r => r.startsWith("del:")) || ""`)
	if !strings.Contains(row, `del:func Health() string { return "ok <b>" }`) || !strings.Contains(row, `add:func Health() string { return "up" }`) {
		b.fail("the side-by-side row of the change: %q", row)
	}
	b.run("the choice is kept", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`table.split`)))
	b.shot("pull-request")

	b.run("import the issues", chromedp.Navigate(mesh.GatewayURL()+"/repos/"+repo+"?tab=issues"), chromedp.WaitVisible(chromedp.CSS(`#issues`)),
		chromedp.SendKeys(chromedp.CSS(`#import-issues input[name=labels]`), "thefold"),
		chromedp.Click(chromedp.CSS(`#import-issues button`)))
	b.waitFor("the import's result", `String(document.getElementById("import-result").textContent.startsWith("2 tasks created"))`, 30*time.Second)
	code, list := rest(t, http.MethodGet, "/v1/tasks?repo="+repo, access, nil)
	if code != http.StatusOK {
		t.Fatalf("list tasks: %d %v", code, list)
	}
	tasks, _ := list["tasks"].([]any)
	byTitle := map[string]map[string]any{}
	for _, x := range tasks {
		task := x.(map[string]any)
		byTitle[task["title"].(string)] = task
	}
	add, doc := byTitle["Add a status endpoint"], byTitle["Document the status endpoint"]
	if len(tasks) != 2 || add == nil || doc == nil {
		t.Fatalf("imported tasks %v", byTitle)
	}
	if blocked, _ := doc["blocked_by"].([]any); len(blocked) != 1 || blocked[0] != add["id"] {
		t.Fatalf("the second task is blocked by %v, want [%v]", doc["blocked_by"], add["id"])
	}
	b.run("their graph", chromedp.Click(chromedp.CSS(`#import-result a[href*="view=graph"]`)), chromedp.WaitVisible(chromedp.CSS(`#task-graph`)))
	if n := b.eval(`String(document.querySelectorAll("#task-graph path.edge").length)`); n != "1" {
		b.fail("the imported tasks' graph has %s edges, want 1", n)
	}
	b.noDialogs()
}

// TestConsoleAdminSkillsModelsAndSettings: an admin creates, edits and deletes a skill and
// adds a provider and a model and turns the model off; a person saves preferences and adds
// and removes a Slack integration. Each change is read back over the API.
func TestConsoleAdminSkillsModelsAndSettings(t *testing.T) {
	parallel(t)
	name := fmt.Sprintf("console-admin-%d", time.Now().UnixNano())
	email := name + "@example.com"
	if code, body := rest(t, http.MethodPost, "/v1/users", token, map[string]any{"email": email, "display_name": "admin", "role": "ROLE_ADMIN"}); code != http.StatusOK {
		t.Fatalf("create the admin: %d %v", code, body)
	}
	access, _ := login(t, email, 0)
	b := newConsoleBrowser(t, 4*time.Minute)
	b.signIn(email, 1)

	skill := "console-skill-" + name[len(name)-9:]
	b.run("create a skill", chromedp.Click(chromedp.CSS(`#nav a[href="/skills"]`)), chromedp.WaitVisible(chromedp.CSS(`#new-skill form`)),
		chromedp.SendKeys(chromedp.CSS(`#new-skill input[name=skill-name]`), skill),
		chromedp.SendKeys(chromedp.CSS(`#new-skill textarea[name=skill-prompt]`), "Wrap every error with its operation."),
		chromedp.SendKeys(chromedp.CSS(`#new-skill input[name=skill-keywords]`), "errors, wrapping"),
		chromedp.SendKeys(chromedp.CSS(`#new-skill input[name=skill-languages]`), "go"),
		chromedp.Click(chromedp.CSS(`#new-skill button[type=submit]`)))
	row := fmt.Sprintf(`#skills tr[data-skill=%q]`, skill)
	b.waitFor("the new skill in the list", fmt.Sprintf(`String(!!document.querySelector(%q))`, row), 30*time.Second)
	findSkill := func() map[string]any {
		t.Helper()
		code, body := rest(t, http.MethodGet, "/v1/skills?page_size=200", access, nil)
		if code != http.StatusOK {
			t.Fatalf("list skills: %d %v", code, body)
		}
		for _, x := range body["skills"].([]any) {
			if s := x.(map[string]any); s["name"] == skill {
				return s
			}
		}
		return nil
	}
	s := findSkill()
	routing, _ := s["routing"].(map[string]any)
	if s == nil || s["prompt_fragment"] != "Wrap every error with its operation." || fmt.Sprint(routing["keywords"]) != "[errors wrapping]" || fmt.Sprint(routing["languages"]) != "[go]" || s["enabled"] != true {
		t.Fatalf("the created skill: %v", s)
	}
	b.run("turn it off", chromedp.Click(chromedp.CSS(row+` summary`)), chromedp.Click(chromedp.CSS(row+` input[name=skill-enabled]`)),
		chromedp.Click(chromedp.CSS(row+` button[type=submit]`)))
	b.waitFor("the saved notice", `String(document.getElementById("notice").textContent.includes("is saved"))`, 30*time.Second)
	if s := findSkill(); s == nil || s["enabled"] == true || s["version"].(float64) != 2 {
		t.Fatalf("the skill after the edit: %v", s)
	}
	b.run("delete it", chromedp.Click(chromedp.CSS(row+` summary`)), chromedp.Click(chromedp.CSS(row+` button.secondary`)))
	b.waitFor("the skill to leave the list", fmt.Sprintf(`String(!document.querySelector(%q))`, row), 30*time.Second)
	if s := findSkill(); s != nil {
		t.Fatalf("the deleted skill is still listed: %v", s)
	}

	provider := "console-" + name[len(name)-9:]
	b.run("add a provider", chromedp.Click(chromedp.CSS(`#nav a[href="/models"]`)), chromedp.WaitVisible(chromedp.CSS(`#new-provider`)),
		chromedp.SendKeys(chromedp.CSS(`#new-provider input[name=provider-name]`), provider),
		chromedp.SendKeys(chromedp.CSS(`#new-provider input[name=provider-url]`), "https://llm.example.com/v1"),
		chromedp.SendKeys(chromedp.CSS(`#new-provider input[name=provider-key]`), "env:CONSOLE_E2E_NO_SUCH_API_KEY"),
		chromedp.Click(chromedp.CSS(`#new-provider button`)))
	section := fmt.Sprintf(`section[data-provider=%q]`, provider)
	b.waitFor("the provider's section", fmt.Sprintf(`String(!!document.querySelector(%q))`, section), 30*time.Second)
	if got := b.text(section); !strings.Contains(got, "not found") {
		b.fail("the provider's key is shown as %q", got)
	}
	b.run("add a model", chromedp.SetValue(chromedp.CSS(`#new-model select[name=model-provider]`), b.eval(fmt.Sprintf(
		`Array.from(document.querySelectorAll("#new-model select[name=model-provider] option")).find(o => o.textContent === %q).value`, provider))),
		chromedp.SendKeys(chromedp.CSS(`#new-model input[name=model-name]`), "tiny-1"),
		chromedp.SendKeys(chromedp.CSS(`#new-model input[name=model-input]`), "0.5"),
		chromedp.SendKeys(chromedp.CSS(`#new-model input[name=model-output]`), "1.5"),
		chromedp.Click(chromedp.CSS(`#new-model button`)))
	model := section + ` tr[data-model="tiny-1"]`
	b.waitFor("the model's row", fmt.Sprintf(`String(!!document.querySelector(%q))`, model), 30*time.Second)
	if got := b.text(model); !strings.Contains(got, "$0.5000") || !strings.Contains(got, "$1.5000") {
		b.fail("the model's prices read %q", got)
	}
	b.run("turn the model off", chromedp.Click(chromedp.CSS(model+` input[type=checkbox]`)))
	b.waitFor("the model turned off", fmt.Sprintf(`String(document.querySelector(%q)?.checked === false && document.getElementById("notice").textContent.includes("disabled"))`, model+` input[type=checkbox]`), 30*time.Second)
	code, models := rest(t, http.MethodGet, "/v1/ai/models?name=tiny-1&page_size=200", access, nil)
	found := false
	for _, x := range models["models"].([]any) {
		m := x.(map[string]any)
		if m["name"] == "tiny-1" && m["input_micros_per_mtok"] == "500000" {
			found = true
			if m["enabled"] == true {
				t.Fatalf("the model is still enabled: %v", m)
			}
		}
	}
	if code != http.StatusOK || !found {
		t.Fatalf("the model over the API: %d %v", code, models)
	}
	b.shot("models")

	b.run("save preferences", chromedp.Click(chromedp.CSS(`#nav a[href="/settings"]`)), chromedp.WaitVisible(chromedp.CSS(`#preferences`)),
		chromedp.SetValue(chromedp.CSS(`#preferences select[name=budget-mode]`), "BUDGET_MODE_AGGRESSIVE_SAVE"),
		chromedp.Click(chromedp.CSS(`#preferences input[name=sub-agents]`)),
		chromedp.Click(chromedp.CSS(`#preferences input[name=notify-job_completed]`)),
		chromedp.SendKeys(chromedp.CSS(`#preferences input[name=max-cost]`), "2.5"),
		chromedp.Click(chromedp.CSS(`#preferences button[type=submit]`)))
	b.waitFor("the saved notice", `String(document.getElementById("notice").textContent.includes("preferences are saved"))`, 30*time.Second)
	code, prefs := rest(t, http.MethodGet, "/v1/preferences", access, nil)
	p, _ := prefs["preferences"].(map[string]any)
	n, _ := p["notifications"].(map[string]any)
	jb, _ := p["job_budget"].(map[string]any)
	if code != http.StatusOK || p["budget_mode"] != "BUDGET_MODE_AGGRESSIVE_SAVE" || p["sub_agents_enabled"] != true || n["job_completed"] == true || n["review_ready"] != true || jb["max_cost_micros"] != "2500000" {
		t.Fatalf("the preferences over the API: %d %v", code, prefs)
	}

	b.run("add a Slack integration", chromedp.SendKeys(chromedp.CSS(`#new-integration input[name=integration-name]`), "team"),
		chromedp.SendKeys(chromedp.CSS(`#new-integration input[name=integration-url]`), "https://hooks.slack.com/services/T0/B0/console-secret-part"),
		chromedp.Click(chromedp.CSS(`#new-integration button`)))
	b.waitFor("the integration's row", `String(!!document.querySelector('#integrations tr[data-integration="team"]'))`, 30*time.Second)
	if strings.Contains(b.eval(`document.body.innerText`), "console-secret-part") {
		b.fail("the webhook URL is shown back")
	}
	b.run("remove it", chromedp.Click(chromedp.CSS(`#integrations tr[data-integration="team"] button:last-child`)))
	b.waitFor("the integration to go", `String(!document.querySelector('#integrations tr[data-integration="team"]'))`, 30*time.Second)
	if code, body := rest(t, http.MethodGet, "/v1/integrations", access, nil); code != http.StatusOK || body["integrations"] != nil {
		t.Fatalf("integrations over the API: %d %v", code, body)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.dialogs) != 2 || !strings.Contains(b.dialogs[0], "Delete the skill") || !strings.Contains(b.dialogs[1], `Remove the integration "team"`) {
		t.Fatalf("dialogs %q; want the two confirmations", b.dialogs)
	}
}

// TestConsoleChatAttachment attaches a text file to a chat message: it is stored with the
// message (the API lists it) and shown on it, its name as text.
func TestConsoleChatAttachment(t *testing.T) {
	parallel(t)
	access, b := signedInUser(t, "console-attach", 3*time.Minute)
	repo := localRepoAs(t, access, fmt.Sprintf("console-attach-%d", time.Now().UnixNano()), "NOTES.md", "# notes\n")
	dir := t.TempDir()
	file := filepath.Join(dir, "spec<x>.md")
	if err := os.WriteFile(file, []byte("# What to build\n\nA status endpoint.\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b.run("start a conversation", chromedp.Click(chromedp.CSS(`#nav a[href="/chat"]`)), chromedp.WaitVisible(chromedp.CSS(`#new-conversation input[name=repo]`)),
		chromedp.SetValue(chromedp.CSS(`#new-conversation input[name=repo]`), repo),
		chromedp.Click(chromedp.CSS(`#new-conversation button`)), chromedp.WaitVisible(chromedp.CSS(`#compose textarea`)))
	b.run("attach and send", chromedp.SetUploadFiles(chromedp.CSS(`#compose input[type=file]`), []string{file}),
		chromedp.SendKeys(chromedp.CSS(`#compose textarea`), "What do you make of the attached spec?"),
		chromedp.Click(chromedp.CSS(`#send`)))
	b.waitFor("the message with its attachment", `String(Array.from(document.querySelectorAll("#chat-log li.msg.user")).some(e => e.textContent.includes("spec<x>.md")))`, 30*time.Second)
	id := strings.TrimPrefix(b.eval(`location.pathname`), "/chat/")
	code, body := rest(t, http.MethodGet, "/v1/conversations/"+id+"/messages?page_size=50", access, nil)
	raw, _ := json.Marshal(body)
	if code != http.StatusOK || !strings.Contains(string(raw), `"name":"spec\u003cx\u003e.md"`) || !strings.Contains(string(raw), `"media_type":"text/markdown"`) {
		t.Fatalf("the stored message: %d %s", code, raw)
	}
	if got := b.eval(`String(document.querySelectorAll("#chat-log x").length)`); got != "0" {
		b.fail("the attachment's name made an element")
	}
}

// TestConsoleAccessibility runs axe-style checks on every main page, in both themes, at
// 1280 px: a language and one main landmark, labelled navigation, one h1 and no skipped
// heading level, a label on every form control, a name on every button and link, labelled
// images and SVG charts, unique ids, no positive tabindex, header cells in data tables, and
// text contrast of at least 4.5:1 (3:1 for large text) against the background it is drawn
// on. The header stays one row at 1280 px, and the first Tab reaches the skip link.
func TestConsoleAccessibility(t *testing.T) {
	parallel(t)
	access, b := signedInUser(t, "console-a11y", 4*time.Minute)
	repo := localRepoAs(t, access, fmt.Sprintf("console-a11y-%d", time.Now().UnixNano()), "main.go", "package main\n\nfunc main() {}\n")
	code, body := rest(t, http.MethodPost, "/v1/tasks", access, map[string]any{"title": "Check the pages", "repo": repo, "description": "Accessible."})
	if code != http.StatusOK {
		t.Fatalf("create task: %d %v", code, body)
	}
	taskID := body["task"].(map[string]any)["id"].(string)
	// One row: no item of the header starts below where another ends.
	if wraps := b.eval(`(() => { const rs = Array.from(document.querySelectorAll("header.bar > *, #nav > a")).map(e => e.getBoundingClientRect()).filter(r => r.height > 0); return String(rs.some(a => rs.some(o => o.top >= a.bottom - 1))); })()`); wraps != "false" {
		b.fail("the header wraps onto a second line at 1280 px")
	}
	// The keyboard: the skip link is the first stop of the tab order, and Enter on it moves
	// the focus to the page's content.
	first := `Array.from(document.querySelectorAll("a[href], button, input, select, textarea, summary, [tabindex]")).find(e => e.tabIndex >= 0 && e.getClientRects().length && !e.disabled)`
	if got := b.eval(first + `.className`); got != "skip" {
		b.fail("the first stop of the tab order is %q, want the skip link", got)
	}
	b.eval(first + `.focus(), ""`)
	b.run("follow the skip link", chromedp.KeyEvent("\r"))
	b.waitFor("the focus on the content", `String(document.activeElement === document.getElementById("main"))`, 5*time.Second)
	pages := []string{"/tasks", "/tasks/" + taskID, "/tasks?view=graph&repo=" + repo, "/chat", "/projects", "/repos", "/repos/" + repo,
		"/repos/" + repo + "?tab=files&file=main.go", "/repos/" + repo + "?tab=issues", "/memory?q=retries", "/skills", "/usage", "/models", "/settings"}
	for _, theme := range []string{"light", "dark"} {
		for _, p := range pages {
			b.run("open "+p, chromedp.Navigate(mesh.GatewayURL()+p))
			b.waitFor(p+" to render", `String(!!document.querySelector("main h1") && document.getElementById("nav").hidden === false)`, 30*time.Second)
			b.eval(fmt.Sprintf(`document.documentElement.dataset.theme = %q, localStorage.setItem("thefold-theme", %q), ""`, theme, theme))
			var problems []string
			if err := json.Unmarshal([]byte(b.eval(a11yAudit)), &problems); err != nil {
				b.fail("the audit's answer: %v", err)
			}
			if len(problems) > 0 {
				b.fail("%s (%s theme): %d problems: %s", p, theme, len(problems), strings.Join(problems, "; "))
			}
			// A screenshot of every page, in each theme, as the issue asks (THEFOLD_E2E_SHOTS).
			b.shot(theme + "-" + strings.Trim(shotName.ReplaceAllString(strings.NewReplacer(repo, "repo", taskID, "task").Replace(p), "-"), "-"))
		}
	}
	// The audit finds what it looks for: planted faults are each reported.
	b.eval(`document.querySelector("main").append(Object.assign(document.createElement("input"), {type: "text"}),
		Object.assign(document.createElement("p"), {textContent: "faint", style: "color: #ccc; background: #fff"}),
		Object.assign(document.createElement("h4"), {textContent: "too deep"}),
		Object.assign(document.createElement("button"), {id: "main"})), ""`)
	var planted []string
	if err := json.Unmarshal([]byte(b.eval(a11yAudit)), &planted); err != nil {
		b.fail("the audit's answer: %v", err)
	}
	got := strings.Join(planted, "; ")
	for _, want := range []string{"input has no label", "contrast 1.6", "H4 'too deep' skips a level", "button#main has no accessible name", "id main is used 2 times"} {
		if !strings.Contains(got, want) {
			b.fail("the audit of planted faults says %q; want it to include %q", got, want)
		}
	}
}

var shotName = regexp.MustCompile(`[^a-zA-Z0-9]+`)

// a11yAudit is the page check TestConsoleAccessibility runs: a JSON list of problems.
const a11yAudit = `(() => {
  const problems = [];
  const visible = (el) => { const s = getComputedStyle(el); return el.getClientRects().length > 0 && s.visibility !== "hidden" && s.display !== "none"; };
  const desc = (el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.getAttribute("name") ? "[name=" + el.getAttribute("name") + "]" : "") +
    (typeof el.className === "string" && el.className ? "." + el.className.split(" ")[0] : "");
  const name = (el) => {
    const label = el.getAttribute("aria-label");
    if (label && label.trim()) return label.trim();
    const by = el.getAttribute("aria-labelledby");
    if (by) return by.split(/\s+/).map((id) => (document.getElementById(id) || {}).textContent || "").join(" ").trim();
    if (el.labels && el.labels.length) return Array.from(el.labels).map((l) => l.textContent).join(" ").trim();
    if (el.tagName === "IMG") return (el.getAttribute("alt") || "").trim();
    return (el.textContent || "").trim() || (el.getAttribute("title") || "").trim();
  };
  if (!document.documentElement.lang) problems.push("the page has no lang");
  if (document.querySelectorAll("main").length !== 1) problems.push("not exactly one main landmark");
  document.querySelectorAll("nav").forEach((n) => { if (!name(n) || !n.getAttribute("aria-label")) problems.push(desc(n) + " has no label"); });
  const heads = Array.from(document.querySelectorAll("main h1, main h2, main h3, main h4, main h5, main h6")).filter(visible);
  const h1s = heads.filter((x) => x.tagName === "H1").length;
  if (h1s !== 1) problems.push("main has " + h1s + " h1");
  let level = 0;
  for (const x of heads) {
    const l = Number(x.tagName[1]);
    if (l > level + 1) problems.push(x.tagName + " '" + x.textContent.slice(0, 40) + "' skips a level");
    level = l;
  }
  document.querySelectorAll("input:not([type=hidden]), select, textarea").forEach((el) => { if (visible(el) && !name(el)) problems.push(desc(el) + " has no label"); });
  document.querySelectorAll("button, a[href], [role=button], [role=tab], summary").forEach((el) => { if (visible(el) && !name(el)) problems.push(desc(el) + " has no accessible name"); });
  document.querySelectorAll("svg[role=img]").forEach((el) => { if (!el.getAttribute("aria-label")) problems.push("an SVG image has no label"); });
  document.querySelectorAll("img").forEach((el) => { if (!el.hasAttribute("alt")) problems.push(desc(el) + " has no alt"); });
  const ids = new Map();
  document.querySelectorAll("[id]").forEach((el) => ids.set(el.id, (ids.get(el.id) || 0) + 1));
  for (const [id, n] of ids) if (n > 1) problems.push("id " + id + " is used " + n + " times");
  document.querySelectorAll("[tabindex]").forEach((el) => { if (Number(el.getAttribute("tabindex")) > 0) problems.push(desc(el) + " has a positive tabindex"); });
  document.querySelectorAll("main table:not(.code)").forEach((el) => { if (!el.querySelector("th")) problems.push(desc(el) + " has no header cells"); });
  // Contrast: each text's colour blended over the backgrounds beneath it, up to an opaque one.
  const parse = (s) => {
    let m = s.match(/^rgba?\(([^)]+)\)/);
    if (m) { const p = m[1].split(/[\s,\/]+/).filter(Boolean).map(Number); return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; }
    m = s.match(/^color\(srgb ([^)]+)\)/);
    if (m) { const [c, a] = m[1].split("/"); const p = c.trim().split(/\s+/).map((v) => Number(v) * 255); return [p[0], p[1], p[2], a ? Number(a) : 1]; }
    return null;
  };
  const background = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; }
    }
    let base = [255, 255, 255];
    for (const c of layers.reverse()) base = base.map((v, i) => c[i] * c[3] + v * (1 - c[3]));
    return base;
  };
  const lum = (rgb) => { const f = (c) => { c /= 255; return c <= 0.03928 ? c / 12.92 : Math.pow((c + 0.055) / 1.055, 2.4); }; return 0.2126 * f(rgb[0]) + 0.7152 * f(rgb[1]) + 0.0722 * f(rgb[2]); };
  const seen = new Set();
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!n.textContent.trim() || !el || seen.has(el) || el.closest("svg, [hidden], :disabled, noscript") || !visible(el)) continue;
    seen.add(el);
    const s = getComputedStyle(el);
    const fg = parse(s.color);
    if (!fg) { problems.push("unreadable colour " + s.color + " of " + desc(el)); continue; }
    const bg = background(el);
    const text = fg.slice(0, 3).map((v, i) => v * fg[3] + bg[i] * (1 - fg[3]));
    const a = lum(text), b = lum(bg);
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    const size = parseFloat(s.fontSize), large = size >= 24 || (Number(s.fontWeight) >= 700 && size >= 18.66);
    if (ratio < (large ? 3 : 4.5)) problems.push("contrast " + ratio.toFixed(2) + " of '" + n.textContent.trim().slice(0, 30) + "' (" + desc(el) + ")");
  }
  return JSON.stringify([...new Set(problems)]);
})()`

// TestConsoleTaskFiltersEditAndDelete filters the task list by source and label, edits a
// task's title, description and labels from its page, and deletes it after a confirmation.
func TestConsoleTaskFiltersEditAndDelete(t *testing.T) {
	parallel(t)
	access, b := signedInUser(t, "console-edit", 3*time.Minute)
	repo := fmt.Sprintf("local/console-edit-%d", time.Now().UnixNano())
	create := func(title string, labels ...string) string {
		t.Helper()
		code, body := rest(t, http.MethodPost, "/v1/tasks", access, map[string]any{"title": title, "repo": repo, "labels": labels})
		if code != http.StatusOK {
			t.Fatalf("create %q: %d %v", title, code, body)
		}
		return body["task"].(map[string]any)["id"].(string)
	}
	bug := create("Fix the crash", "bug")
	create("Write the guide", "docs")
	b.run("filter by label", chromedp.Navigate(mesh.GatewayURL()+"/tasks?repo="+repo), chromedp.WaitVisible(chromedp.CSS(`input[name=label]`)),
		chromedp.SendKeys(chromedp.CSS(`form.filters input[name=label]`), "bug"), chromedp.Click(chromedp.CSS(`form.filters button`)))
	b.waitFor("one task", `String(location.search.includes("label=bug") && document.querySelectorAll("table.tasks tbody tr").length === 1)`, 30*time.Second)
	if got := b.text(`table.tasks tbody`); !strings.Contains(got, "Fix the crash") {
		b.fail("the label filter shows %q", got)
	}
	b.run("filter by source", chromedp.Navigate(mesh.GatewayURL()+"/tasks?repo="+repo+"&source=TASK_SOURCE_CHAT"), chromedp.WaitVisible(chromedp.CSS(`select[name=source]`)))
	b.waitFor("no chat tasks", `String(!!document.querySelector("main p.empty"))`, 30*time.Second)

	b.run("open the editor", chromedp.Navigate(mesh.GatewayURL()+"/tasks/"+bug), chromedp.WaitVisible(chromedp.CSS(`details.edit summary`)),
		chromedp.Click(chromedp.CSS(`details.edit summary`)), chromedp.WaitVisible(chromedp.CSS(`#edit-task input[name=edit-title]`)))
	b.eval(`document.querySelector("#edit-task input[name=edit-title]").value = "", ""`)
	b.run("edit",
		chromedp.SendKeys(chromedp.CSS(`#edit-task input[name=edit-title]`), "Fix the crash on <empty> input"),
		chromedp.SendKeys(chromedp.CSS(`#edit-task textarea`), "It panics on an empty body."),
		chromedp.SetValue(chromedp.CSS(`#edit-task input[name=edit-labels]`), "bug, urgent"),
		chromedp.Click(chromedp.CSS(`#edit-task button[type=submit]`)))
	b.waitFor("the saved title", `String(document.querySelector("h1.task-title")?.textContent === "Fix the crash on <empty> input")`, 30*time.Second)
	code, body := rest(t, http.MethodGet, "/v1/tasks/"+bug, access, nil)
	task, _ := body["task"].(map[string]any)
	if code != http.StatusOK || task["description"] != "It panics on an empty body." || fmt.Sprint(task["labels"]) != "[bug urgent]" {
		t.Fatalf("the edited task over the API: %d %v", code, body)
	}
	b.run("delete", chromedp.Click(chromedp.CSS(`details.edit summary`)), chromedp.Click(chromedp.CSS(`#delete-task`)))
	b.waitFor("the task list", `String(location.pathname === "/tasks")`, 30*time.Second)
	if code, _ := rest(t, http.MethodGet, "/v1/tasks/"+bug, access, nil); code != http.StatusNotFound {
		t.Fatalf("the deleted task answers %d", code)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.dialogs) != 1 || !strings.Contains(b.dialogs[0], `Delete the task "Fix the crash on <empty> input"`) {
		t.Fatalf("dialogs %q; want the one confirmation", b.dialogs)
	}
}

// TestConsoleJobNeedsAPerson: a job stopped by its budget waits for a person. Its page shows
// the cost and tokens per phase and the audit log, and resolving it from the page (with a
// note) ends the job COMPLETED and its task DONE.
func TestConsoleJobNeedsAPerson(t *testing.T) {
	parallel(t)
	access, b := signedInUser(t, "console-human", 4*time.Minute)
	repo := localRepoAs(t, access, fmt.Sprintf("console-human-%d", time.Now().UnixNano()), "go.mod", agentGoMod)
	code, body := rest(t, http.MethodPost, "/v1/tasks", access, map[string]any{"title": "Write package budget [AGENT-BUDGET]", "repo": repo, "description": "F returns one."})
	if code != http.StatusOK {
		t.Fatalf("create task: %d %v", code, body)
	}
	taskID := body["task"].(map[string]any)["id"].(string)
	code, body = rest(t, http.MethodPost, "/v1/jobs", access, map[string]any{"task_id": taskID, "budget": map[string]any{"max_tokens": 10}})
	if code != http.StatusOK {
		t.Fatalf("start: %d %v", code, body)
	}
	jobID := body["job"].(map[string]any)["id"].(string)
	b.run("open the job", chromedp.Navigate(mesh.GatewayURL()+"/jobs/"+jobID), chromedp.WaitVisible(chromedp.CSS(`#job-events`)))
	b.waitFor("the job to ask for a person", `String(!!document.getElementById("human-needed"))`, 2*time.Minute)
	b.waitFor("the cost per phase", `String(document.querySelectorAll("#job-phases tbody tr").length > 0)`, 30*time.Second)
	if got := b.text(`#job-phases tbody`); !strings.Contains(got, "planning") && !strings.Contains(got, "context") {
		b.fail("the phases read %q", got)
	}
	// Opened as a toggle of the details element, not a click at the summary's coordinates:
	// the timeline above it grows as the job's events arrive, and a click computed before
	// the last one lands on whatever moved under it (seen once under heavy load, the log
	// never read).
	b.eval(`document.querySelector("#job-audit").open = true, ""`)
	b.waitFor("the audit log's entries", `String(document.querySelectorAll("#job-audit li code").length > 0)`, 30*time.Second)
	b.run("resolve", chromedp.SendKeys(chromedp.CSS(`#human-needed textarea`), "Wrote F by hand."), chromedp.Click(chromedp.CSS(`#resolve-task`)))
	b.waitFor("the job completed", `String(document.getElementById("job-status")?.textContent.startsWith("completed"))`, 30*time.Second)
	code, body = rest(t, http.MethodGet, "/v1/tasks/"+taskID, access, nil)
	if code != http.StatusOK || body["task"].(map[string]any)["status"] != "TASK_STATUS_DONE" {
		t.Fatalf("the task after resolving: %d %v", code, body)
	}
	b.noDialogs()
}
