package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/fetch"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// TestConsoleSignInTasksAndSignOut drives the web console in headless Chromium as a person
// would: the page sends them to sign in, a code from the mailer signs them in (the session
// cookie is HttpOnly: the page cannot read it), a task created from the form whose title is
// markup shows as text — no element made, no script run — on its page and in the list, a
// reload keeps the session, and signing out ends it.
func TestConsoleSignInTasksAndSignOut(t *testing.T) {
	parallel(t)
	_, email := newUser(t, "console")
	repo := fmt.Sprintf("local/console-%d", time.Now().UnixNano())
	const hostile = `<img src=x onerror="window.pwned=1">`
	b := newConsoleBrowser(t, 3*time.Minute)
	run, text, eval := b.run, b.text, b.eval

	// Not signed in: the console sends the person to sign in.
	run("open the console", chromedp.Navigate(mesh.GatewayURL()+"/tasks"), chromedp.WaitVisible(chromedp.CSS(`input[name=email]`)))
	if path := eval(`location.pathname`); path != "/signin" {
		t.Fatalf("signed out, /tasks went to %q; want /signin", path)
	}
	// The first page load's budget: everything it transferred, page and assets.
	kb := eval(`String(Math.ceil(performance.getEntriesByType("navigation").concat(performance.getEntriesByType("resource")).reduce((n, e) => n + (e.transferSize || 0), 0) / 1024))`)
	if n, err := strconv.Atoi(kb); err != nil || n <= 0 || n > 300 {
		t.Fatalf("the first page load transferred %s KB; want at most 300", kb)
	}
	t.Logf("the first page load transferred %s KB", kb)
	run("ask for a code", chromedp.SendKeys(chromedp.CSS(`input[name=email]`), email),
		chromedp.Click(chromedp.CSS(`#signin-email button`)),
		chromedp.WaitVisible(chromedp.CSS(`input[name=code]`)))
	code := mailedCode(t, email, 0)
	run("sign in", chromedp.SendKeys(chromedp.CSS(`input[name=code]`), code),
		chromedp.Click(chromedp.CSS(`#signin-code button`)),
		chromedp.WaitVisible(chromedp.CSS(`input[name=title]`)))
	if who := text(`#who`); who != email {
		t.Fatalf("signed in as %q; want %q", who, email)
	}
	if c := eval(`document.cookie`); c != "" {
		t.Fatalf("the page can read cookies %q: the session cookie must be HttpOnly", c)
	}

	// A task titled with markup: created from the form, shown as text.
	run("create a task", chromedp.SendKeys(chromedp.CSS(`input[name=title]`), hostile),
		chromedp.SetValue(chromedp.CSS(`#new-task input[name=repo]`), repo),
		chromedp.SendKeys(chromedp.CSS(`textarea[name=description]`), "<b>not bold</b>"),
		chromedp.Click(chromedp.CSS(`#new-task button`)),
		chromedp.WaitVisible(chromedp.CSS(`h1.task-title`)))
	if got := text(`h1.task-title`); got != hostile {
		t.Fatalf("the task page's title %q; want the markup as text %q", got, hostile)
	}
	if got := text(`pre.description`); got != "<b>not bold</b>" {
		t.Fatalf("the description %q; want it as text", got)
	}
	if n := eval(`String(document.querySelectorAll("main img, main b").length) + (window.pwned ? " pwned" : "")`); n != "0" {
		t.Fatalf("the task's markup made elements or ran: %q", n)
	}
	// The task is the person's own: another user (the admin) does not list it.
	if status, body := rest(t, http.MethodGet, "/v1/tasks?repo="+repo, token, nil); status != http.StatusOK || body["tasks"] != nil {
		t.Fatalf("another user's listing of the repository: %d %v", status, body)
	}

	// The list, filtered by repository, shows it as text too.
	run("list the repository's tasks", chromedp.Navigate(mesh.GatewayURL()+"/tasks?repo="+repo), chromedp.WaitVisible(chromedp.CSS(`a.task-title`)))
	if got := text(`a.task-title`); got != hostile {
		t.Fatalf("the list's title %q", got)
	}
	if n := eval(`String(document.querySelectorAll("main img").length) + (window.pwned ? " pwned" : "")`); n != "0" {
		t.Fatalf("the list's markup made elements or ran: %q", n)
	}
	b.shot("tasks")
	// A reload (a new page: nothing in memory) keeps the session through the cookie.
	run("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`a.task-title`)))
	if who := text(`#who`); who != email {
		t.Fatalf("after a reload signed in as %q", who)
	}
	// A reload while the server fails the session's refresh twice (503, at the wire) keeps
	// the session too: a failure that may pass is tried again, not taken for a signed-out
	// person.
	var mu sync.Mutex
	refreshes := 0
	if err := chromedp.Listen(b.ctx, func(ev any) {
		e, ok := ev.(*fetch.EventRequestPaused)
		if !ok {
			return
		}
		mu.Lock()
		refreshes++
		n := refreshes
		mu.Unlock()
		go func() {
			if n <= 2 {
				_, _ = chromedp.Call(b.ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: e.RequestID, ResponseCode: 503, Body: []byte("overloaded")})
				return
			}
			_, _ = chromedp.Call(b.ctx, fetch.ContinueRequest, fetch.ContinueRequestParams{RequestID: e.RequestID})
		}()
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(b.ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*/console/session/refresh"}}}); err != nil {
		t.Fatal(err)
	}
	run("reload through two failed refreshes", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`a.task-title`)))
	if _, err := chromedp.Call(b.ctx, fetch.Disable, cdp.Empty{}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if refreshes != 3 {
		t.Errorf("the page asked for a refresh %d times, want 3 (two failed, one answered)", refreshes)
	}
	mu.Unlock()
	if who := text(`#who`); who != email {
		t.Fatalf("after a reload through failed refreshes signed in as %q", who)
	}

	// Phone width: the page still fits (no horizontal scroll).
	run("phone width", chromedp.EmulateViewport(390, 844), chromedp.WaitVisible(chromedp.CSS(`a.task-title`)))
	if w := eval(`String(document.documentElement.scrollWidth <= window.innerWidth)`); w != "true" {
		t.Fatalf("at 390 px the page scrolls sideways")
	}
	b.shot("phone")
	run("desktop width", chromedp.EmulateViewport(1280, 900))

	// Signing out ends the session: back to sign in, and a reload stays there.
	run("sign out", chromedp.Click(chromedp.CSS(`#signout`)), chromedp.WaitVisible(chromedp.CSS(`input[name=email]`)))
	run("reload signed out", chromedp.Navigate(mesh.GatewayURL()+"/tasks"), chromedp.WaitVisible(chromedp.CSS(`input[name=email]`)))
	if path := eval(`location.pathname`); path != "/signin" {
		t.Fatalf("after signing out /tasks went to %q", path)
	}
	b.noDialogs()
}

// TestConsoleTaskToPullRequest runs the README's demo in the browser: a task created and
// started from the console, its job page following the job live (no reload) to the review
// gate, the review page showing the diff, and an approval that shows the pull request.
func TestConsoleTaskToPullRequest(t *testing.T) {
	parallel(t)
	access, b := signedInUser(t, "console-demo", 12*time.Minute)
	repo := fmt.Sprintf("local/console-demo-%d", time.Now().UnixNano())

	// The README's tour, in the browser: a repository on the local forge with a Go module.
	b.run("create the repository", chromedp.Click(chromedp.CSS(`#nav a[href="/repos"]`)), chromedp.WaitVisible(chromedp.CSS(`#new-repo`)),
		chromedp.SendKeys(chromedp.CSS(`#new-repo input[name=repo-name]`), repo),
		chromedp.Click(chromedp.CSS(`#new-repo button`)), chromedp.WaitVisible(chromedp.CSS(`#tree`)))
	for _, f := range []struct{ path, content string }{
		{"go.mod", "module example.com/demo\n\ngo 1.22\n"},
		{"main.go", "package main\n\nfunc main() {}\n"},
	} {
		b.run("add "+f.path, chromedp.Navigate(mesh.GatewayURL()+"/repos/"+repo+"?tab=files"), chromedp.WaitVisible(chromedp.CSS(`#tree`)),
			chromedp.Click(chromedp.CSS(`details.edit summary`)),
			chromedp.SendKeys(chromedp.CSS(`#commit-file input[name=file-path]`), f.path))
		b.eval(fmt.Sprintf(`document.querySelector("#commit-file textarea").value = %q, ""`, f.content))
		b.run("commit "+f.path, chromedp.Click(chromedp.CSS(`#commit-file button`)), chromedp.WaitVisible(chromedp.CSS(`#file-view`)))
	}
	code, files := rest(t, http.MethodGet, "/v1/repos/"+repo+"/files?paths=go.mod&paths=main.go", access, nil)
	if got, _ := files["files"].([]any); code != http.StatusOK || len(got) != 2 {
		t.Fatalf("the committed files: %d %v", code, files)
	}

	b.run("open the tasks", chromedp.Click(chromedp.CSS(`#nav a[href="/tasks"]`)), chromedp.WaitVisible(chromedp.CSS(`#new-task`)))
	b.run("create the task", chromedp.SendKeys(chromedp.CSS(`input[name=title]`), "Add a health endpoint"),
		chromedp.SetValue(chromedp.CSS(`#new-task input[name=repo]`), repo),
		chromedp.Click(chromedp.CSS(`#new-task button`)),
		chromedp.WaitVisible(chromedp.CSS(`#start-task`)))
	b.run("start it", chromedp.Click(chromedp.CSS(`#start-task`)), chromedp.WaitVisible(chromedp.CSS(`#job-events`)))
	if !strings.HasPrefix(b.eval(`location.pathname`), "/jobs/") {
		b.fail("starting went to %s", b.eval(`location.pathname`))
	}
	// The page is not reloaded from here on: the marker stays only if the page updates itself.
	b.eval(`window.stayed = "yes"`)
	b.waitFor("the job page to show pending review", `String(document.getElementById("job-status")?.textContent.startsWith("pending review"))`, 3*time.Minute)
	if b.eval(`String(window.stayed)`) != "yes" {
		b.fail("the job page was reloaded")
	}
	events := b.eval(`Array.from(document.querySelectorAll("#job-events li")).map(li => li.dataset.type + " " + li.dataset.id).join("\n")`)
	seen := map[string]bool{}
	for _, line := range strings.Split(events, "\n") {
		if seen[line] {
			b.fail("the timeline shows %q twice", line)
		}
		seen[line] = true
	}
	for _, want := range []string{"JOB_EVENT_TYPE_PHASE_CHANGED", "JOB_EVENT_TYPE_PROGRESS", "JOB_EVENT_TYPE_REVIEW_SUBMITTED"} {
		if !strings.Contains(events, want) {
			b.fail("the live timeline has no %s: %q", want, events)
		}
	}
	b.shot("job")

	b.run("open the review", chromedp.Click(chromedp.CSS(`#job-review`)), chromedp.WaitVisible(chromedp.CSS(`#approve`)))
	diff := b.eval(`Array.from(document.querySelectorAll("pre.diff .add")).map(s => s.textContent).join("\n")`)
	if !strings.Contains(diff, "+") || !strings.Contains(b.eval(`document.querySelector("details.file summary").textContent`), ".go") {
		b.fail("the review shows no added Go lines: %q", diff)
	}
	b.shot("review")
	b.run("approve", chromedp.Click(chromedp.CSS(`#approve`)))
	b.waitFor("the pull request link", `String(!!document.querySelector("#review-result a.pr-link"))`, 5*time.Minute)
	href := b.eval(`document.querySelector("#review-result a.pr-link").href`)
	if !strings.HasPrefix(href, "http") || b.text(`#review-status`) != "approved" {
		b.fail("after approval: link %q, status %q", href, b.text(`#review-status`))
	}
	b.shot("approved")
	b.noDialogs()
}

// TestConsoleChatToPullRequest is the issue's walk through the console: a person signs in,
// asks in a new conversation for a health endpoint, follows the job the model started from
// the conversation to its page, which updates live (no reload) to pending review, reads the
// diff on the review page, approves, and sees the pull request's link.
func TestConsoleChatToPullRequest(t *testing.T) {
	parallel(t)
	access, b := signedInUser(t, "console-chat", 12*time.Minute)
	repo := localRepoAs(t, access, fmt.Sprintf("console-chat-%d", time.Now().UnixNano()), "go.mod", agentGoMod)

	b.run("open the chat", chromedp.Click(chromedp.CSS(`#nav a[href="/chat"]`)), chromedp.WaitVisible(chromedp.CSS(`#new-conversation input[name=repo]`)))
	b.run("start a conversation", chromedp.SetValue(chromedp.CSS(`#new-conversation input[name=repo]`), repo),
		chromedp.Click(chromedp.CSS(`#new-conversation button`)), chromedp.WaitVisible(chromedp.CSS(`#compose textarea`)))
	b.run("ask", chromedp.SendKeys(chromedp.CSS(`#compose textarea`), "Add a health endpoint to "+repo+" [CHAT-1]"),
		chromedp.Click(chromedp.CSS(`#send`)))
	// The reply streams in; its tool calls show compactly; the started job's link appears.
	b.waitFor("the reply and the job's link", `String(!!document.querySelector("#chat-log a.notice-job") && Array.from(document.querySelectorAll("#chat-log li.msg.assistant .text")).some(e => e.textContent.includes("health endpoint")))`, 5*time.Minute)
	if n := b.eval(`String(document.querySelectorAll("#chat-log li.msg.tool details").length)`); n == "0" {
		b.fail("no tool call shown")
	}
	b.shot("chat")
	b.run("open the job", chromedp.Click(chromedp.CSS(`#chat-log a.notice-job`)), chromedp.WaitVisible(chromedp.CSS(`#job-events`)))
	b.eval(`window.stayed = "yes"`)
	b.waitFor("the job page to show pending review", `String(document.getElementById("job-status")?.textContent.startsWith("pending review"))`, 3*time.Minute)
	if b.eval(`String(window.stayed)`) != "yes" {
		b.fail("the job page was reloaded")
	}
	b.run("open the review", chromedp.Click(chromedp.CSS(`#job-review`)), chromedp.WaitVisible(chromedp.CSS(`#approve`)))
	if diff := b.eval(`document.querySelector("pre.diff")?.textContent || ""`); !strings.Contains(diff, "func Status") {
		b.fail("the review's diff has no func Status: %q", diff)
	}
	b.run("approve", chromedp.Click(chromedp.CSS(`#approve`)))
	b.waitFor("the pull request link", `String(!!document.querySelector("#review-result a.pr-link"))`, 5*time.Minute)
	b.shot("approved")

	// The model calls of the chat and the job, on the usage page: a bar for today, a row per model.
	b.run("open the usage", chromedp.Click(chromedp.CSS(`#nav a[href="/usage"]`)), chromedp.WaitVisible(chromedp.CSS(`#usage-models`)))
	if n := b.eval(`String(document.querySelectorAll("#usage-chart g.bar").length) + " " + document.querySelectorAll("#usage-models tbody tr").length`); n == "0 0" || strings.HasPrefix(n, "0 ") || strings.HasSuffix(n, " 0") {
		b.fail("the usage page has bars and models %q", n)
	}
	if total := b.text(`#usage-total`); !strings.Contains(total, "Calls") || strings.Contains(total, "Calls0") {
		b.fail("the usage totals read %q", total)
	}
	if n := b.eval(`String(document.querySelectorAll("#usage-jobs tbody tr").length)`); n == "0" {
		b.fail("the usage page lists no job")
	}
	b.shot("usage")
	b.noDialogs()
}

// TestConsoleCrewProject plans a crew project from the console, edits its plan (a task's
// description, saved with the project's etag), starts it, and watches the workers' tabs
// stream their jobs' events live until the project completes.
func TestConsoleCrewProject(t *testing.T) {
	parallel(t)
	access, b := signedInUser(t, "console-crew", 10*time.Minute)
	repo, _ := crewRepoAs(t, access, fmt.Sprintf("console-crew-%d", time.Now().UnixNano()),
		[]crewIssue{crewDiamond[0], crewDiamond[4]}, 0)

	b.run("open the projects", chromedp.Click(chromedp.CSS(`#nav a[href="/projects"]`)), chromedp.WaitVisible(chromedp.CSS(`#plan-project`)))
	b.run("plan a crew", chromedp.SetValue(chromedp.CSS(`#plan-project input[name=repo]`), repo),
		chromedp.SetValue(chromedp.CSS(`#plan-project select[name=mode]`), "PROJECT_MODE_CREW"),
		chromedp.SetValue(chromedp.CSS(`#plan-project input[name=max_workers]`), "2"),
		chromedp.Click(chromedp.CSS(`#plan-project button[type=submit]`)),
		chromedp.WaitVisible(chromedp.CSS(`#start-project`)))
	if n := b.eval(`String(document.querySelectorAll("#project-plan li[data-task]").length)`); n != "2" {
		b.fail("the plan shows %s tasks; want the repository's 2 issues", n)
	}
	// Edit the plan: a task's description, saved; a reload shows it stored.
	b.run("edit a task", chromedp.SendKeys(chromedp.CSS(`#project-plan textarea[name=task-description]`), " Keep it short."),
		chromedp.WaitVisible(chromedp.CSS(`#save-plan`)), chromedp.Click(chromedp.CSS(`#save-plan`)))
	b.waitFor("the plan to be saved", `String(document.getElementById("save-plan")?.hidden === true)`, 30*time.Second)
	b.run("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#start-project`)))
	if !strings.Contains(b.eval(`Array.from(document.querySelectorAll("#project-plan textarea[name=task-description]")).map(e => e.value).join("|")`), "Keep it short.") {
		b.fail("the edited description was not stored")
	}
	// A dependency: the second task starts after the first, stored; then taken off again so
	// the two workers run side by side.
	projectID := strings.TrimPrefix(b.eval(`location.pathname`), "/projects/")
	dependsOn := func() [][]any {
		t.Helper()
		code, body := rest(t, http.MethodGet, "/v1/projects/"+projectID, access, nil)
		if code != http.StatusOK {
			t.Fatalf("get the project: %d %v", code, body)
		}
		var deps [][]any
		for _, ph := range body["project"].(map[string]any)["phases"].([]any) {
			for _, task := range ph.(map[string]any)["tasks"].([]any) {
				d, _ := task.(map[string]any)["depends_on"].([]any)
				deps = append(deps, d)
			}
		}
		return deps
	}
	toggle := func(what string) {
		b.t.Helper()
		b.run(what, chromedp.Click(chromedp.CSS(`#project-plan li[data-task]:last-of-type input[name=depends-on]`)),
			chromedp.WaitVisible(chromedp.CSS(`#save-plan`)), chromedp.Click(chromedp.CSS(`#save-plan`)))
		b.waitFor("the plan to be saved", `String(document.getElementById("save-plan")?.hidden === true)`, 30*time.Second)
	}
	toggle("make the second task wait for the first")
	if deps := dependsOn(); len(deps) != 2 || len(deps[0])+len(deps[1]) != 1 {
		t.Fatalf("after adding a dependency the tasks depend on %v", deps)
	}
	b.run("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#start-project`)))
	if n := b.eval(`String(document.querySelectorAll("#project-plan input[name=depends-on]:checked").length)`); n != "1" {
		b.fail("after a reload %s dependencies are ticked, want 1", n)
	}
	toggle("take the dependency off")
	if deps := dependsOn(); len(deps[0])+len(deps[1]) != 0 {
		t.Fatalf("after taking it off the tasks depend on %v", deps)
	}
	b.shot("plan")

	b.run("start it", chromedp.Click(chromedp.CSS(`#start-project`)))
	b.eval(`window.stayed = "yes"`)
	b.waitFor("two worker tabs", `String(document.querySelectorAll("#project-pool [role=tab]").length === 2)`, 2*time.Minute)
	// The workers' streams fill live; the project completes without a reload.
	b.waitFor("the project to complete", `String(document.getElementById("project-status")?.textContent.startsWith("completed"))`, 6*time.Minute)
	if b.eval(`String(window.stayed)`) != "yes" {
		b.fail("the project page was reloaded")
	}
	streamed := b.eval(`String(Array.from(document.querySelectorAll("#project-pool ol.worker-log")).map(l => l.children.length).reduce((a, n) => a + n, 0))`)
	if n, _ := strconv.Atoi(streamed); n < 4 {
		b.fail("the workers' tabs streamed %s events", streamed)
	}
	b.shot("crew")
	b.noDialogs()
}

// TestConsoleJobPageAcrossAGatewayRestart opens a running job's page, kills the gateway
// and starts it again while the job goes on: the page reconnects by itself with the last
// event id it saw and shows every event of the job exactly once — those that happened while
// the gateway was down too — and reaches pending review without a reload.
func TestConsoleJobPageAcrossAGatewayRestart(t *testing.T) {
	alone(t)
	access, b := signedInUser(t, "console-restart", 10*time.Minute)
	repo := fmt.Sprintf("local/console-restart-%d", time.Now().UnixNano())
	demoRepoAs(t, access, repo)
	code, task := rest(t, http.MethodPost, "/v1/tasks", access, map[string]any{"title": "Add a health endpoint", "repo": repo})
	if code != http.StatusOK {
		t.Fatalf("create task: %d %v", code, task)
	}
	code, job := rest(t, http.MethodPost, "/v1/jobs", access, map[string]any{"task_id": task["task"].(map[string]any)["id"]})
	if code != http.StatusOK {
		t.Fatalf("start: %d %v", code, job)
	}
	jobID := job["job"].(map[string]any)["id"].(string)
	b.run("open the job", chromedp.Navigate(mesh.GatewayURL()+"/jobs/"+jobID), chromedp.WaitVisible(chromedp.CSS(`#job-events`)))
	b.eval(`window.stayed = "yes"`)
	b.waitFor("the stream to be live", `String(document.getElementById("job-live")?.textContent === "Live" && document.querySelectorAll("#job-events li").length > 0)`, time.Minute)

	if err := mesh.Kill("gateway"); err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() {
		if !restarted {
			_ = mesh.Start()
		}
	}()
	b.waitFor("the page to notice", `String(document.getElementById("job-live")?.textContent.startsWith("Reconnecting"))`, 30*time.Second)
	time.Sleep(2 * time.Second) // the job goes on without the gateway
	startAgain(t)
	restarted = true

	b.waitFor("the job page to show pending review", `String(document.getElementById("job-status")?.textContent.startsWith("pending review"))`, 5*time.Minute)
	b.waitFor("the review event on the timeline", `String(!!document.querySelector('#job-events li[data-type="JOB_EVENT_TYPE_REVIEW_SUBMITTED"]'))`, 30*time.Second)
	if b.eval(`String(window.stayed)`) != "yes" {
		b.fail("the job page was reloaded")
	}
	shown := strings.Fields(b.eval(`Array.from(document.querySelectorAll("#job-events li")).map(li => li.dataset.id).join(" ")`))
	// The job's events as the API has them: the stream's history, read until it goes quiet.
	want := jobEventIDs(t, access, jobID)
	if strings.Join(shown, " ") != strings.Join(want, " ") {
		b.fail("the page shows events %v; the job has %v", shown, want)
	}
	b.noDialogs()
}

// jobEventIDs are the ids of a job's events, in order, from its NDJSON stream (heartbeats
// left out), read until no event comes for two seconds.
func jobEventIDs(t *testing.T, tok, jobID string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), liveness(30*time.Second))
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, mesh.GatewayURL()+"/v1/jobs/"+jobID+":watch?after_id=0", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	var ids []string
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				return ids
			}
			var m struct {
				Result struct {
					ID   string `json:"id"`
					Type string `json:"type"`
				} `json:"result"`
			}
			if json.Unmarshal([]byte(line), &m) == nil && m.Result.ID != "" && m.Result.ID != "0" && m.Result.Type != "" && m.Result.Type != "JOB_EVENT_TYPE_UNSPECIFIED" {
				ids = append(ids, m.Result.ID)
			}
		case <-time.After(2 * time.Second):
			return ids
		}
	}
}

// TestConsoleReposMemoryAndKeys: the repositories page lists the person's repository; a
// memory stored over REST is found on the memory page with the reason it ranked; an API key
// made on the settings page is shown once, works within its scope, and stops working when
// it is revoked from the page.
func TestConsoleReposMemoryAndKeys(t *testing.T) {
	parallel(t)
	access, b := signedInUser(t, "console-keys", 5*time.Minute)
	repo := localRepoAs(t, access, fmt.Sprintf("console-keys-%d", time.Now().UnixNano()), "NOTES.md", "# notes\n")
	if code, body := rest(t, http.MethodPost, "/v1/memories", access, map[string]any{"content": "Retry database writes with jittered backoff, at most five times.",
		"repo": repo, "type": "MEMORY_TYPE_DECISION", "summary": "Retries of database writes: jittered backoff, five at most"}); code != http.StatusOK {
		t.Fatalf("store a memory: %d %v", code, body)
	}

	b.run("open the repositories", chromedp.Click(chromedp.CSS(`#nav a[href="/repos"]`)), chromedp.WaitVisible(chromedp.CSS(`#repos`)))
	if got := b.text(`#repos tbody`); !strings.Contains(got, repo) {
		b.fail("the repositories page lists %q; want %s", got, repo)
	}

	b.run("search the memories", chromedp.Click(chromedp.CSS(`#nav a[href="/memory"]`)), chromedp.WaitVisible(chromedp.CSS(`#memory-search`)),
		chromedp.SendKeys(chromedp.CSS(`#memory-search input[name=query]`), "database write retries"),
		chromedp.Click(chromedp.CSS(`#memory-search button`)), chromedp.WaitVisible(chromedp.CSS(`#memory-results`)))
	if got := b.text(`#memory-results`); !strings.Contains(got, "jittered backoff") || !strings.Contains(got, "decision") {
		b.fail("the memory page found %q", got)
	}
	if reason := b.text(`#memory-results .reason`); reason == "" {
		b.fail("no reason shown for the result")
	}

	b.run("create a key", chromedp.Click(chromedp.CSS(`#nav a[href="/settings"]`)), chromedp.WaitVisible(chromedp.CSS(`#new-key`)),
		chromedp.SendKeys(chromedp.CSS(`#new-key input[name=key-name]`), "ci"),
		chromedp.SetValue(chromedp.CSS(`#new-key select[name=key-area]`), "tasks"),
		chromedp.Click(chromedp.CSS(`#new-key button`)), chromedp.WaitVisible(chromedp.CSS(`pre.secret-value`)))
	secret := b.text(`pre.secret-value`)
	if code, body := rest(t, http.MethodGet, "/v1/tasks", secret, nil); code != http.StatusOK {
		t.Fatalf("the new key reads tasks: %d %v", code, body)
	}
	if code, _ := rest(t, http.MethodPost, "/v1/tasks", secret, map[string]any{"title": "x", "repo": repo}); code != http.StatusForbidden {
		t.Fatalf("a tasks:read key created a task: %d", code)
	}
	// Shown once: after a reload the secret is nowhere on the page.
	b.run("reload the settings", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#keys`)))
	if strings.Contains(b.eval(`document.body.innerText`), secret) {
		b.fail("the secret is still shown after a reload")
	}
	b.run("revoke it", chromedp.Click(chromedp.CSS(`#keys tbody button`)))
	b.waitFor("the revoked key to leave the list", `String(!document.querySelector("#keys tbody tr"))`, 30*time.Second)
	deadline := time.Now().Add(liveness(30 * time.Second))
	for {
		code, _ := rest(t, http.MethodGet, "/v1/tasks", secret, nil)
		if code == http.StatusUnauthorized {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the revoked key still answers %d", code)
		}
		time.Sleep(200 * time.Millisecond)
	}
	b.shot("settings")
	b.run("open the skills", chromedp.Click(chromedp.CSS(`#nav a[href="/skills"]`)))
	b.waitFor("the skills page", `String(document.querySelector("main h1")?.textContent === "Skills")`, 30*time.Second)
	if got := b.eval(`document.querySelector("#skills") ? "table" : document.querySelector("main .empty")?.textContent || ""`); got != "table" && got != "No skills." {
		b.fail("the skills page shows %q", got)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.dialogs) != 1 || !strings.Contains(b.dialogs[0], `Revoke the key "ci"`) {
		t.Fatalf("dialogs %q; want the one confirmation", b.dialogs)
	}
}

// TestConsoleTaskGraph draws a repository's tasks as their dependency graph: a node per
// task in a column after everything blocking it, an edge per blocked-by link, and a click on
// a node opens its task.
func TestConsoleTaskGraph(t *testing.T) {
	parallel(t)
	access, br := signedInUser(t, "console-graph", 3*time.Minute)
	repo := fmt.Sprintf("local/console-graph-%d", time.Now().UnixNano())
	create := func(title string, blockedBy ...string) string {
		t.Helper()
		code, body := rest(t, http.MethodPost, "/v1/tasks", access, map[string]any{"title": title, "repo": repo, "blocked_by": blockedBy})
		if code != http.StatusOK {
			t.Fatalf("create %q: %d %v", title, code, body)
		}
		return body["task"].(map[string]any)["id"].(string)
	}
	a := create("Design the store")
	b := create("Write the API", a)
	c := create("Build the dashboard", a, b)
	br.run("open the graph", chromedp.Navigate(mesh.GatewayURL()+"/tasks?repo="+repo+"&view=graph"), chromedp.WaitVisible(chromedp.CSS(`#task-graph svg`)))
	if n := br.eval(`String(document.querySelectorAll("#task-graph a.node").length) + " " + document.querySelectorAll("#task-graph path.edge").length`); n != "3 3" {
		br.fail("nodes and edges %q; want 3 3", n)
	}
	x := func(id string) string {
		return br.eval(`document.querySelector('#task-graph a.node[data-task="` + id + `"] rect').getAttribute("x")`)
	}
	xa, _ := strconv.Atoi(x(a))
	xb, _ := strconv.Atoi(x(b))
	xc, _ := strconv.Atoi(x(c))
	if !(xa < xb && xb < xc) {
		br.fail("columns a %d, b %d, c %d: each task must stand right of what blocks it", xa, xb, xc)
	}
	br.shot("graph")
	br.run("open a node", chromedp.Click(chromedp.CSS(`#task-graph a.node[data-task="`+c+`"] rect`)), chromedp.WaitVisible(chromedp.CSS(`h1.task-title`)))
	if got := br.text(`h1.task-title`); got != "Build the dashboard" {
		br.fail("the node opened %q", got)
	}
	br.noDialogs()
}

// TestConsoleJobPageRendersFiveHundredEvents measures the job page's own rendering of a
// long stream: the network answers the page's two requests for one job (the job, and its
// event stream of 500 build steps) at once, at the wire, so the page's real code parses and
// renders them all. It checks every event is shown once and in order, and prints the time
// the browser took to show them and to answer a click afterwards (figures, not bounds).
func TestConsoleJobPageRendersFiveHundredEvents(t *testing.T) {
	parallel(t)
	_, email := newUser(t, "console-perf")
	b := newConsoleBrowser(t, 3*time.Minute)
	b.signIn(email, 0)
	const jobID = "0b0e5000-0000-4000-8000-000000000500"
	job := `{"job":{"id":"` + jobID + `","status":"JOB_STATUS_RUNNING","phase":"JOB_PHASE_BUILDING","repo":"local/perf","attempt":1}}`
	var stream strings.Builder
	stream.WriteString("retry: 3000\n\n")
	for i := 1; i <= 500; i++ {
		fmt.Fprintf(&stream, "id: %d\nevent: JOB_EVENT_TYPE_PROGRESS\ndata: {\"id\":\"%d\",\"time\":\"2026-11-29T10:00:00Z\",\"type\":\"JOB_EVENT_TYPE_PROGRESS\",\"job_id\":\"%s\",\"progress\":{\"current_step\":%d,\"total_steps\":500,\"file_path\":\"pkg/f%d.go\"}}\n\n", i, i, jobID, i, i)
	}
	stream.WriteString("event: end\ndata: {}\n\n")
	if err := chromedp.Listen(b.ctx, func(ev any) {
		e, ok := ev.(*fetch.EventRequestPaused)
		if !ok {
			return
		}
		body, ctype := []byte(job), "application/json"
		if strings.Contains(e.Request.URL, ":watch") {
			body, ctype = []byte(stream.String()), "text/event-stream"
		}
		go func() {
			_, _ = chromedp.Call(b.ctx, fetch.FulfillRequest, fetch.FulfillRequestParams{RequestID: e.RequestID, ResponseCode: 200,
				ResponseHeaders: []*fetch.HeaderEntry{{Name: "Content-Type", Value: ctype}}, Body: body})
		}()
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := chromedp.Call(b.ctx, fetch.Enable, fetch.EnableParams{Patterns: []*fetch.RequestPattern{{URLPattern: "*/v1/jobs/" + jobID + "*"}}}); err != nil {
		t.Fatal(err)
	}
	b.run("open the job", chromedp.Navigate(mesh.GatewayURL()+"/jobs/"+jobID), chromedp.WaitVisible(chromedp.CSS(`#job-events`)))
	b.waitFor("500 events", `String(document.querySelectorAll("#job-events li").length >= 500)`, time.Minute)
	rendered := b.eval(`String(Math.round(performance.now()))`)
	ids := b.eval(`Array.from(document.querySelectorAll("#job-events li")).map(li => li.dataset.id).join(" ")`)
	want := make([]string, 500)
	for i := range want {
		want[i] = strconv.Itoa(i + 1)
	}
	if ids != strings.Join(want, " ") {
		b.fail("the page shows %d events, not 1…500 once each in order", len(strings.Fields(ids)))
	}
	if last := b.text(`#job-events li:last-child`); !strings.Contains(last, "step 500/500: pkg/f500.go") {
		b.fail("the last event reads %q", last)
	}
	// Still usable: a click on the theme switch takes effect by the next frame.
	click, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`new Promise(r => { const t0 = performance.now(); document.getElementById("theme").click(); requestAnimationFrame(() => r(String(Math.round(performance.now() - t0)))); })`, chromedp.EvalAwaitPromise))
	if err != nil {
		b.fail("click the theme switch: %v", err)
	}
	t.Logf("the job page showed 500 live events %s ms after navigation started; a click after them took %s ms to the next frame", rendered, click)
	b.noDialogs()
}

// signedInUser makes a user named after name, logs it in over REST (its access token, for
// set-up calls as that user) and signs it in in a new browser whose steps all end within
// timeout.
func signedInUser(t *testing.T, name string, timeout time.Duration) (string, *consoleBrowser) {
	t.Helper()
	_, email := newUser(t, name)
	access, _ := login(t, email, 0)
	b := newConsoleBrowser(t, timeout)
	b.signIn(email, 1)
	return access, b
}

// consoleBrowser is a headless Chromium tab for the console tests, with helpers that fail
// the test (with a screenshot and the page's text) when a step does not happen.
type consoleBrowser struct {
	t       *testing.T
	ctx     context.Context
	mu      sync.Mutex
	dialogs []string
}

// browsers bounds the Chromium instances open at once: the parallel shard runs the console
// tests beside each other and beside the mesh's own work, and on two cores more browsers
// only slow every one of them past its steps' bounds.
var browsers = make(chan struct{}, 3)

func newConsoleBrowser(t *testing.T, timeout time.Duration) *consoleBrowser {
	t.Helper()
	exe := chromiumPath(t)
	browsers <- struct{}{}
	t.Cleanup(func() { <-browsers })
	ctx, cancel := context.WithTimeout(context.Background(), liveness(timeout))
	t.Cleanup(cancel)
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1280, 900))...)
	t.Cleanup(cancelAlloc)
	browser, cancelBrowser := chromedp.NewContext(alloc)
	t.Cleanup(cancelBrowser)
	b := &consoleBrowser{t: t, ctx: browser}
	// A dialog the pages open is answered (so nothing hangs) and remembered: the tests
	// check none opened that they did not ask for.
	if err := chromedp.Listen(browser, func(ev any) {
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			b.mu.Lock()
			b.dialogs = append(b.dialogs, d.Message)
			b.mu.Unlock()
			go func() {
				_, _ = chromedp.Call(browser, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
			}()
		}
	}); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	return b
}

// run does the actions, each step within a minute (see liveness).
func (b *consoleBrowser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	// A minute a step: a step is several actions (navigate, wait, type, click), and on a
	// machine loaded by the three e2e shards at once (load average 20-27) one of six
	// actions took the whole of 30 s.
	step, cancel := context.WithTimeout(b.ctx, liveness(time.Minute))
	defer cancel()
	if err := chromedp.Do(step, actions...); err != nil {
		b.fail("%s: %v", what, err)
	}
}

func (b *consoleBrowser) fail(format string, args ...any) {
	b.t.Helper()
	b.shot("failed")
	page, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`location.pathname + " | " + document.body.innerText`))
	b.t.Fatalf(format+"; the page: %q", append(args, page)...)
}

// text is the text content of the first element sel matches, waiting (within a minute) for
// one to exist. It is read in one evaluation, not by node id: a page that redraws itself (the
// review page does when the pull request opens) replaces its nodes, and a node id read a
// moment before is gone by the time its text is asked for.
func (b *consoleBrowser) text(sel string) string {
	b.t.Helper()
	quoted, err := json.Marshal(sel)
	if err != nil {
		b.fail("quote %s: %v", sel, err)
	}
	js := `(() => { const e = document.querySelector(` + string(quoted) + `); return e ? "+" + e.textContent : "-"; })()`
	deadline := time.Now().Add(liveness(time.Minute))
	for {
		s := b.eval(js)
		if strings.HasPrefix(s, "+") {
			return strings.TrimSpace(s[1:])
		}
		if time.Now().After(deadline) {
			b.fail("read %s: no element matches", sel)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// eval evaluates js, which must give a string.
func (b *consoleBrowser) eval(js string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		b.fail("evaluate %s: %v", js, err)
	}
	return s
}

// waitFor evaluates js until it gives "true", for at most d.
func (b *consoleBrowser) waitFor(what, js string, d time.Duration) {
	b.t.Helper()
	deadline := time.Now().Add(liveness(d))
	for b.eval(js) != "true" {
		if time.Now().After(deadline) {
			b.fail("waiting for %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// signIn signs email in from the sign-in page with the code mailed after skip earlier ones.
func (b *consoleBrowser) signIn(email string, skip int) {
	b.t.Helper()
	b.run("open the console", chromedp.Navigate(mesh.GatewayURL()+"/signin"), chromedp.WaitVisible(chromedp.CSS(`input[name=email]`)))
	b.run("ask for a code", chromedp.SendKeys(chromedp.CSS(`input[name=email]`), email),
		chromedp.Click(chromedp.CSS(`#signin-email button`)),
		chromedp.WaitVisible(chromedp.CSS(`input[name=code]`)))
	code := mailedCode(b.t, email, skip)
	b.run("sign in", chromedp.SendKeys(chromedp.CSS(`input[name=code]`), code),
		chromedp.Click(chromedp.CSS(`#signin-code button`)),
		chromedp.WaitVisible(chromedp.CSS(`input[name=title]`)))
}

func (b *consoleBrowser) noDialogs() {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.dialogs) > 0 {
		b.t.Fatalf("the pages opened dialogs: %q", b.dialogs)
	}
}

// shot saves a screenshot of the page as <test>-<name>.png under THEFOLD_E2E_SHOTS, when set.
func (b *consoleBrowser) shot(name string) {
	dir := os.Getenv("THEFOLD_E2E_SHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	_ = os.MkdirAll(dir, 0o755)
	_ = os.WriteFile(filepath.Join(dir, b.t.Name()+"-"+name+".png"), png, 0o644)
}
