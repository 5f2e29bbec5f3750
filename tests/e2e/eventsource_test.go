package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

// chromiumPath finds Debian's chromium (scripts/setup.sh installs it). Without it the test
// skips, except in CI, where a missing browser is a defect of the machine, not a reason.
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH: scripts/setup.sh installs it (apt-get install chromium); CI must run the EventSource test")
	}
	t.Skip("no chromium on PATH: install it (scripts/setup.sh, or apt-get install chromium) to run the real-EventSource test")
	return ""
}

// esState is what the page's EventSource saw.
type esState struct {
	Events     []esEvent `json:"events"`
	Opens      int       `json:"opens"`
	Errors     int       `json:"errors"`
	Failures   int       `json:"failures"`
	Gaps       int       `json:"gaps"`
	Heartbeats int       `json:"heartbeats"`
	ReadyState int       `json:"readyState"`
}

type esEvent struct {
	ID     string `json:"id"`
	TaskID string `json:"taskId"`
}

// TestEventSourceReconnectsAcrossAGatewayRestart follows a repository's tasks with a real
// EventSource in headless Chromium, kills the gateway, creates a task while it is down, and
// starts it again: the browser reconnects by itself with its Last-Event-ID and sees every
// task exactly once, in order — nothing lost, nothing repeated.
func TestEventSourceReconnectsAcrossAGatewayRestart(t *testing.T) {
	alone(t)
	exe := chromiumPath(t)
	repo := fmt.Sprintf("local/eventsource-%d", time.Now().UnixNano())
	create := func(title string) string {
		t.Helper()
		code, body := rest(t, http.MethodPost, "/v1/tasks", token, map[string]any{"title": title, "repo": repo})
		if code != http.StatusOK {
			t.Fatalf("create %q = %d %v", title, code, body)
		}
		return body["task"].(map[string]any)["id"].(string)
	}
	var want []string
	want = append(want, create("before the page"))

	ctx, cancel := context.WithTimeout(context.Background(), liveness(3*time.Minute))
	defer cancel()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Flag("disable-gpu", true))...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()

	// EventSource cannot set headers: the test's browser adds the bearer token to every
	// request (a console would hold a session instead). The page is the gateway's own
	// origin, so no CORS is involved; its CSP (default-src 'none') is bypassed, as a page of
	// the console would be allowed to connect to its own origin.
	open := fmt.Sprintf(`(() => {
		const s = {events: [], opens: 0, errors: 0, failures: 0, gaps: 0, heartbeats: 0};
		window.esState = s;
		const es = new EventSource(%q);
		window.es = es;
		es.onopen = () => s.opens++;
		es.onerror = () => s.errors++;
		es.addEventListener("TASK_EVENT_TYPE_CREATED", e => s.events.push({id: e.lastEventId, taskId: JSON.parse(e.data).task_id}));
		es.addEventListener("heartbeat", () => s.heartbeats++);
		es.addEventListener("failure", () => s.failures++);
		es.addEventListener("gap", () => s.gaps++);
		return true;
	})()`, "/v1/tasks:watch?repo="+repo)
	setup := []func() error{
		func() error { _, err := chromedp.Call(browser, network.Enable, network.EnableParams{}); return err },
		func() error {
			_, err := chromedp.Call(browser, network.SetExtraHTTPHeaders, network.SetExtraHTTPHeadersParams{
				Headers: network.Headers{"Authorization": "Bearer " + token}})
			return err
		},
		func() error {
			_, err := chromedp.Call(browser, page.SetBypassCSP, page.SetBypassCSPParams{Enabled: true})
			return err
		},
		func() error { return chromedp.Do(browser, chromedp.Navigate(mesh.GatewayURL()+"/healthz")) },
		func() error { _, err := chromedp.Run(browser, chromedp.Evaluate[bool](open)); return err },
	}
	for _, step := range setup {
		if err := step(); err != nil {
			t.Fatalf("chromium: %v", err)
		}
	}
	state := func() esState {
		t.Helper()
		var s esState
		raw, err := chromedp.Run(browser, chromedp.Evaluate[string](`JSON.stringify(Object.assign({}, window.esState, {readyState: window.es.readyState}))`))
		if err != nil {
			t.Fatalf("read the page: %v", err)
		}
		if err := json.Unmarshal([]byte(raw), &s); err != nil {
			t.Fatalf("page state %q: %v", raw, err)
		}
		return s
	}
	// waitFor polls the page until cond holds.
	waitFor := func(what string, cond func(esState) bool) esState {
		t.Helper()
		deadline := time.Now().Add(liveness(90 * time.Second))
		for {
			s := state()
			if cond(s) {
				return s
			}
			if time.Now().After(deadline) {
				t.Fatalf("waiting for %s: page saw %+v", what, s)
			}
			time.Sleep(100 * time.Millisecond) // polling a condition under a deadline
		}
	}
	seen := func(n int) func(esState) bool { return func(s esState) bool { return len(s.Events) >= n } }

	waitFor("the history", seen(1))
	want = append(want, create("while watching"))
	waitFor("a live event", seen(2))

	if err := mesh.Kill("gateway"); err != nil {
		t.Fatal(err)
	}
	started := false
	defer func() {
		if !started {
			_ = mesh.Start()
		}
	}()
	waitFor("the browser to notice the gateway is gone", func(s esState) bool { return s.Errors > 0 })
	// A task created while the gateway is down (straight to the tasks service): the
	// reconnected stream must deliver it.
	rctx, rcancel := context.WithTimeout(authed(context.Background()), liveness(30*time.Second))
	defer rcancel()
	down, err := tasksv1.NewTaskServiceClient(dial(t, "tasks")).CreateTask(rctx, &tasksv1.CreateTaskRequest{Title: "while the gateway is down", Repo: repo})
	if err != nil {
		t.Fatal(err)
	}
	want = append(want, down.GetTask().GetId())
	if err := mesh.Start(); err != nil {
		t.Fatal(err)
	}
	started = true
	if err := mesh.WaitReady(ctx, time.Minute); err != nil {
		t.Fatal(err)
	}
	waitFor("the reconnection", func(s esState) bool { return s.Opens >= 2 && len(s.Events) >= 3 })
	want = append(want, create("after the restart"))
	s := waitFor("an event after the restart", seen(4))

	var got []string
	var last int64
	for _, e := range s.Events {
		got = append(got, e.TaskID)
		id, err := strconv.ParseInt(e.ID, 10, 64)
		if err != nil || id <= last {
			t.Errorf("event ids not increasing: %+v", s.Events)
		}
		last = id
	}
	if !slices.Equal(got, want) {
		t.Errorf("the page saw tasks %v, want %v once each, in order (events %+v)", got, want, s.Events)
	}
	if s.ReadyState != 1 || s.Failures != 0 || s.Gaps != 0 {
		t.Errorf("EventSource state %+v: want it open, without failures or gaps", s)
	}
	t.Logf("EventSource: %d opens, %d transport errors, %d heartbeats, events %+v", s.Opens, s.Errors, s.Heartbeats, s.Events)
}
