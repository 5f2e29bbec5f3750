package e2e

import (
	"archive/zip"
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/thefold/thefold/pkg/fakevulndb"
)

// The fake Go module proxy the mesh's sandboxes use as their package source
// (THEFOLD_SANDBOX_GOPROXY): example.test/dep at v1.0.0 and a newer v1.1.0.
const (
	depModule = "example.test/dep"
	depGoMod  = "module example.test/dep\n\ngo 1.22\n"
	depSource = "package dep\n\n// Greeting is what the dependency says.\nfunc Greeting() string { return \"hello\" }\n"
)

// depVulnerability is the fake vulnerability database's entry (THEFOLD_SANDBOX_GOVULNDB):
// depModule's Greeting, fixed in v1.1.0.
var depVulnerability = fakevulndb.Entry{ID: "GO-2099-0001", Aliases: []string{"CVE-2099-0001"}, Summary: "Greeting says too much",
	Module: depModule, Package: depModule, Symbols: []string{"Greeting"}, Fixed: "1.1.0"}

// moduleProxy serves the module proxy protocol for depModule's two versions. Only v1.0.0
// has a zip: it is the one the fixture builds with; v1.1.0 exists to be found.
type moduleProxy struct{ zip []byte }

func newModuleProxy() (*moduleProxy, error) {
	var b bytes.Buffer
	zw := zip.NewWriter(&b)
	for _, f := range [][2]string{{"go.mod", depGoMod}, {"dep.go", depSource}} {
		w, err := zw.Create(depModule + "@v1.0.0/" + f[0])
		if err != nil {
			return nil, err
		}
		if _, err := w.Write([]byte(f[1])); err != nil {
			return nil, err
		}
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return &moduleProxy{zip: b.Bytes()}, nil
}

func (p *moduleProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	prefix := "/" + depModule + "/"
	rest, ok := strings.CutPrefix(r.URL.Path, prefix)
	if !ok {
		http.NotFound(w, r)
		return
	}
	info := func(v string) {
		fmt.Fprintf(w, `{"Version":%q,"Time":"2026-01-0%sT00:00:00Z"}`, v, map[string]string{"v1.0.0": "1", "v1.1.0": "2"}[v])
	}
	switch rest {
	case "@v/list":
		fmt.Fprint(w, "v1.0.0\nv1.1.0\n")
	case "@latest", "@v/v1.1.0.info":
		info("v1.1.0")
	case "@v/v1.0.0.info":
		info("v1.0.0")
	case "@v/v1.0.0.mod", "@v/v1.1.0.mod":
		fmt.Fprint(w, depGoMod)
	case "@v/v1.0.0.zip":
		w.Write(p.zip)
	default:
		http.NotFound(w, r)
	}
}

// goSum is the go.sum of a module requiring depModule v1.0.0: the dirhash "h1:" of its
// files and of its go.mod, as the go command computes them.
func goSum() string {
	h1 := func(files map[string]string) string {
		names := make([]string, 0, len(files))
		for n := range files {
			names = append(names, n)
		}
		slices.Sort(names)
		h := sha256.New()
		for _, n := range names {
			fmt.Fprintf(h, "%x  %s\n", sha256.Sum256([]byte(files[n])), n)
		}
		return "h1:" + base64.StdEncoding.EncodeToString(h.Sum(nil))
	}
	zipHash := h1(map[string]string{depModule + "@v1.0.0/go.mod": depGoMod, depModule + "@v1.0.0/dep.go": depSource})
	modHash := h1(map[string]string{"go.mod": depGoMod})
	return fmt.Sprintf("%s v1.0.0 %s\n%s v1.0.0/go.mod %s\n", depModule, zipHash, depModule, modHash)
}

// healthOf reads a connection's health over REST.
func healthOf(t *testing.T, conn string) map[string]any {
	t.Helper()
	code, body := rest(t, http.MethodGet, "/v1/repo-connections/"+conn+"/health", token, nil)
	if code != http.StatusOK {
		t.Fatalf("get health: %d %v", code, body)
	}
	return body
}

// checkHealth asks for a check over REST and waits until it is done, returning the health.
func checkHealth(t *testing.T, conn, requestID string) map[string]any {
	t.Helper()
	code, body := rest(t, http.MethodPost, "/v1/repo-connections/"+conn+"/health:check", token, map[string]any{"request_id": requestID})
	if code != http.StatusOK {
		t.Fatalf("check health: %d %v", code, body)
	}
	id := body["report"].(map[string]any)["id"].(string)
	deadline := time.Now().Add(liveness(5 * time.Minute))
	for {
		h := healthOf(t, conn)
		latest, _ := h["latest"].(map[string]any)
		if latest["id"] == id {
			switch latest["state"] {
			case "REPO_HEALTH_STATE_DONE":
				return h
			case "REPO_HEALTH_STATE_FAILED":
				t.Fatalf("check failed: %v", latest)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("check %s not done within 5 minutes: %v", id, latest)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// checksByName is a report's checks by name.
func checksByName(report map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	list, _ := report["checks"].([]any)
	for _, v := range list {
		c := v.(map[string]any)
		out[c["name"].(string)] = c
	}
	return out
}

// A connected repository with an outdated dependency whose vulnerable function it calls,
// checked by the monitor over REST, in a real sandbox with the fake module proxy as its
// package source and the fake vulnerability database: the check builds and tests the
// default branch, finds the newer release and (with the real govulncheck) the called
// vulnerability, and files one healing task for each; the next check finds the same and
// files none; the trend has both checks.
func TestRepoHealthFilesOneHealingTask(t *testing.T) {
	parallel(t)
	repo := "local/monitored"
	if code, body := rest(t, http.MethodPost, "/v1/repos", token, map[string]any{"repo": repo, "auto_init": true}); code != http.StatusOK {
		t.Fatalf("create repo: %d %v", code, body)
	}
	files := []map[string]any{
		{"path": "go.mod", "content": "module example.com/monitored\n\ngo 1.22\n\nrequire " + depModule + " v1.0.0\n"},
		{"path": "go.sum", "content": goSum()},
		{"path": "greet.go", "content": "package monitored\n\nimport \"" + depModule + "\"\n\n// TODO: greet by name\nfunc Greet() string { return dep.Greeting() }\n"},
		{"path": "greet_test.go", "content": "package monitored\n\nimport \"testing\"\n\nfunc TestGreet(t *testing.T) {\n\tif Greet() != \"hello\" {\n\t\tt.Fatal(Greet())\n\t}\n}\n"},
	}
	for _, f := range files {
		f["action"] = "FILE_ACTION_CREATE"
	}
	if code, body := rest(t, http.MethodPost, "/v1/repos/"+repo+"/commits", token, map[string]any{"branch": "main", "message": "module", "files": files}); code != http.StatusOK {
		t.Fatalf("commit: %d %v", code, body)
	}
	code, body := rest(t, http.MethodPost, "/v1/repo-connections", token, map[string]any{"repo": repo})
	if code != http.StatusOK {
		t.Fatalf("connect: %d %v", code, body)
	}
	conn := body["connection"].(map[string]any)["id"].(string)
	t.Cleanup(func() { rest(t, http.MethodDelete, "/v1/repo-connections/"+conn, token, nil) })
	if h := healthOf(t, conn); h["latest"] != nil || h["settings"].(map[string]any)["enabled"] == true {
		t.Fatalf("a new connection's health: %v", h)
	}
	// Periodic checks on, over REST's PATCH; the first is due at once.
	code, body = rest(t, http.MethodPatch, "/v1/repo-connections/"+conn+"?update_mask=health.enabled,health.todo_threshold", token,
		map[string]any{"health": map[string]any{"enabled": true, "todo_threshold": 5}})
	if code != http.StatusOK {
		t.Fatalf("enable health: %d %v", code, body)
	}
	if h := body["connection"].(map[string]any)["health"].(map[string]any); h["enabled"] != true || h["todo_threshold"] != float64(5) || h["next_check_time"] == nil {
		t.Fatalf("settings after PATCH: %v", h)
	}
	code, bad := rest(t, http.MethodPatch, "/v1/repo-connections/"+conn+"?update_mask=health.interval", token, map[string]any{"health": map[string]any{"interval": "60s"}})
	if code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(bad["message"]), "health.interval") {
		t.Fatalf("a one-minute interval: %d %v", code, bad)
	}

	h := checkHealth(t, conn, "monitored-1")
	latest := h["latest"].(map[string]any)
	checks := checksByName(latest)
	for name, want := range map[string]string{"build": "PASSED", "test": "PASSED", "dependencies": "FAILED", "vulnerabilities": "FAILED", "todos": "PASSED"} {
		if got := checks[name]["status"]; got != "REPO_HEALTH_CHECK_STATUS_"+want {
			t.Errorf("%s: %v, want %s (%v)", name, got, want, checks[name])
		}
	}
	outdated, _ := latest["outdated"].([]any)
	if len(outdated) != 1 || outdated[0].(map[string]any)["name"] != depModule || outdated[0].(map[string]any)["latest"] != "v1.1.0" ||
		outdated[0].(map[string]any)["direct"] != true {
		t.Fatalf("outdated: %v", outdated)
	}
	if latest["todo_count"] != float64(1) || latest["commit"] == "" {
		t.Errorf("todos %v, commit %v", latest["todo_count"], latest["commit"])
	}
	vulns, _ := latest["vulnerabilities"].([]any)
	if len(vulns) != 1 {
		t.Fatalf("vulnerabilities: %v (the part: %v)", vulns, checks["vulnerabilities"])
	}
	if v := vulns[0].(map[string]any); v["id"] != depVulnerability.ID || v["called"] != true || v["function"] != depModule+".Greeting" ||
		v["position"] != "greet.go:6:42" || v["fixed_version"] != "v1.1.0" || v["module"] != depModule || v["version"] != "v1.0.0" {
		t.Fatalf("vulnerability: %v", v)
	}
	findings, _ := latest["findings"].([]any)
	if len(findings) != 2 {
		t.Fatalf("findings: %v", findings)
	}
	taskIDs := map[string]string{}
	for i, want := range []string{"dependency:go:" + depModule, "vulnerability:" + depVulnerability.ID} {
		f := findings[i].(map[string]any)
		taskID, _ := f["task_id"].(string)
		if f["key"] != want || f["new"] != true || taskID == "" {
			t.Fatalf("finding %d: %v, want %s", i, f, want)
		}
		taskIDs[want] = taskID
		code, body = rest(t, http.MethodGet, "/v1/tasks/"+taskID, token, nil)
		if code != http.StatusOK {
			t.Fatalf("get task: %d %v", code, body)
		}
		task := body["task"].(map[string]any)
		if task["source"] != "TASK_SOURCE_HEALING" || task["repo"] != repo || !strings.Contains(task["title"].(string), "v1.1.0") ||
			!strings.Contains(task["description"].(string), depModule+" v1.0.0") {
			t.Fatalf("healing task: %v", task)
		}
		if i == 1 && (task["priority"] != "PRIORITY_HIGH" || !strings.Contains(task["description"].(string), "CVE-2099-0001")) {
			t.Fatalf("the vulnerability's task: %v", task)
		}
	}

	// The next check sees the same findings: they keep their tasks and none is filed.
	h = checkHealth(t, conn, "monitored-2")
	findings, _ = h["latest"].(map[string]any)["findings"].([]any)
	if len(findings) != 2 {
		t.Fatalf("second check's findings: %v", findings)
	}
	for _, f := range findings {
		f := f.(map[string]any)
		if f["task_id"] != taskIDs[f["key"].(string)] || f["new"] == true {
			t.Fatalf("second check's findings: %v", findings)
		}
	}
	healing := 0
	for _, task := range repoTasks(t, repo) {
		if task["source"] == "TASK_SOURCE_HEALING" {
			healing++
		}
	}
	if healing != 2 {
		t.Fatalf("%d healing tasks after two checks, want 2", healing)
	}
	if trend, _ := h["trend"].([]any); len(trend) < 2 || trend[0].(map[string]any)["outdated_count"] != float64(1) ||
		trend[0].(map[string]any)["vulnerability_count"] != float64(1) {
		t.Fatalf("trend: %v", h["trend"])
	}
	if open, _ := h["open_findings"].([]any); len(open) != 2 {
		t.Fatalf("open findings: %v", h["open_findings"])
	}
	// Another user's token does not reach the connection.
	other := memberToken(t, "health-other@example.com")
	if code, _ := rest(t, http.MethodGet, "/v1/repo-connections/"+conn+"/health", other, nil); code != http.StatusNotFound {
		t.Fatalf("another user reads the health: %d", code)
	}
	if code, _ := rest(t, http.MethodGet, "/v1/repo-connections/not-a-uuid/health", token, nil); code != http.StatusBadRequest {
		t.Fatalf("a malformed id: %d", code)
	}
}

// The console's Health tab of a repository: connect it, lower the marker threshold, check
// now, and see the parts, the findings (the markers, and the vulnerability the code calls)
// and a healing task.
func TestConsoleRepoHealth(t *testing.T) {
	parallel(t)
	access, b := signedInUser(t, "console-health", 6*time.Minute)
	repo := localRepoAs(t, access, fmt.Sprintf("console-health-%d", time.Now().UnixNano()), "notes.go",
		"package notes\n\n// TODO: one\n// FIXME: two\n// TODO: three\n")
	if code, body := rest(t, http.MethodPost, "/v1/repos/"+repo+"/commits", access, map[string]any{"branch": "main", "message": "module",
		"files": []map[string]any{
			{"path": "go.mod", "action": "FILE_ACTION_CREATE", "content": "module example.com/notes\n\ngo 1.22\n\nrequire " + depModule + " v1.0.0\n"},
			{"path": "go.sum", "action": "FILE_ACTION_CREATE", "content": goSum()},
			{"path": "greet.go", "action": "FILE_ACTION_CREATE", "content": "package notes\n\nimport \"" + depModule + "\"\n\n// Greet greets.\nfunc Greet() string { return dep.Greeting() }\n"},
		}}); code != http.StatusOK {
		t.Fatalf("commit: %d %v", code, body)
	}
	b.run("open the health tab", chromedp.Navigate(mesh.GatewayURL()+"/repos/"+repo+"?tab=health"), chromedp.WaitVisible(chromedp.CSS(`#connect-repo`)),
		chromedp.Click(chromedp.CSS(`#connect-repo button`)), chromedp.WaitVisible(chromedp.CSS(`#health-settings`)))
	b.run("lower the threshold", chromedp.SetValue(chromedp.CSS(`#health-settings input[name=todo-threshold]`), "2"),
		chromedp.Click(chromedp.CSS(`#health-settings button`)))
	b.waitFor("the settings saved", `String(document.getElementById("notice").textContent.includes("settings are saved"))`, 30*time.Second)
	// Connecting turned the daily check on, its first one due at once: the page looks again
	// until that check is done. It may have started before the lower threshold was saved
	// (then its todos part passes), and a click while it runs would only return it; so the
	// check clicked for below starts after it.
	b.waitFor("the periodic check done", `String(!!document.querySelector("#health-trend tbody tr") && !document.querySelector("#check-due") &&
		!!document.querySelector("#check-now") && !document.querySelector("#check-now").disabled)`, 4*time.Minute)
	// A click through the DOM, not at coordinates: the saved settings' notice shows as the
	// page starts to render again, so the button found may be replaced by the new render
	// while chromedp is still aiming at it ("Could not find node with given id"); the old
	// button's handler queues the check all the same.
	b.eval(`document.querySelector("#check-now").click(), ""`)
	b.waitFor("the clicked check done", `String(document.querySelectorAll("#health-trend tbody tr").length >= 2 && document.querySelector("#check-now").disabled === false)`, 4*time.Minute)
	if got := b.text(`#health-checks tr[data-part=todos] td.status`); got != "failed" {
		b.fail("the todos part is %q, want failed (three markers, at most 2 wanted)", got)
	}
	if got := b.text(`#health-checks tr[data-part=build] td.status`); got != "passed" {
		b.fail("the build part is %q, want passed", got)
	}
	if got := b.text(`#health-findings`); !strings.Contains(got, "Resolve TODO and FIXME markers in "+repo+" (3, over 2)") ||
		!strings.Contains(got, "Fix GO-2099-0001 in "+repo) {
		b.fail("findings: %q", got)
	}
	if got := b.text(`#vulnerabilities li[data-vuln="GO-2099-0001"]`); !strings.Contains(got, "CVE-2099-0001") ||
		!strings.Contains(got, "called: "+depModule+".Greeting from greet.go:6:") {
		b.fail("the vulnerability: %q", got)
	}
	b.shot("repo-health")
	// The markers' finding's link (the first is the outdated dependency's).
	b.eval(`[...document.querySelectorAll("#health-findings li")].find((li) => li.textContent.includes("Resolve TODO")).querySelector("a").click(), ""`)
	b.waitFor("the task page", `String(document.querySelector("main h1")?.textContent.includes("Resolve TODO"))`, 30*time.Second)
}
