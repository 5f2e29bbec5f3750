package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// TestConsoleSignInTasksAndSignOut drives the web console in headless Chromium as a person
// would: the page sends them to sign in, a code from the mailer signs them in (the session
// cookie is HttpOnly: the page cannot read it), a task created from the form whose title is
// markup shows as text — no element made, no script run — on its page and in the list, a
// reload keeps the session, and signing out ends it.
func TestConsoleSignInTasksAndSignOut(t *testing.T) {
	t.Parallel()
	exe := chromiumPath(t)
	_, email := newUser(t, "console")
	repo := fmt.Sprintf("local/console-%d", time.Now().UnixNano())
	const hostile = `<img src=x onerror="window.pwned=1">`

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	alloc, cancelAlloc := chromedp.NewExecAllocator(ctx, append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.Flag("disable-gpu", true), chromedp.WindowSize(1280, 900))...)
	defer cancelAlloc()
	browser, cancelBrowser := chromedp.NewContext(alloc)
	defer cancelBrowser()
	var mu sync.Mutex
	var dialogs []string
	if err := chromedp.Listen(browser, func(ev any) {
		if d, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			mu.Lock()
			dialogs = append(dialogs, d.Message)
			mu.Unlock()
			go func() {
				_, _ = chromedp.Call(browser, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: false})
			}()
		}
	}); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	run := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		step, cancel := context.WithTimeout(browser, 30*time.Second)
		defer cancel()
		if err := chromedp.Do(step, actions...); err != nil {
			shot(t, browser, "failed")
			page, _ := chromedp.Run(browser, chromedp.Evaluate[string](`location.pathname + " | " + document.body.innerText`))
			t.Fatalf("%s: %v; the page: %q", what, err, page)
		}
	}
	text := func(sel string) string {
		t.Helper()
		s, err := chromedp.Run(browser, chromedp.TextContent(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("read %s: %v", sel, err)
		}
		return strings.TrimSpace(s)
	}
	eval := func(js string) string {
		t.Helper()
		s, err := chromedp.Run(browser, chromedp.Evaluate[string](js))
		if err != nil {
			t.Fatalf("evaluate %s: %v", js, err)
		}
		return s
	}

	// Not signed in: the console sends the person to sign in.
	run("open the console", chromedp.Navigate(mesh.GatewayURL()+"/tasks"), chromedp.WaitVisible(chromedp.CSS(`input[name=email]`)))
	if path := eval(`location.pathname`); path != "/signin" {
		t.Fatalf("signed out, /tasks went to %q; want /signin", path)
	}
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
	shot(t, browser, "tasks")
	// A reload (a new page: nothing in memory) keeps the session through the cookie.
	run("reload", chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`a.task-title`)))
	if who := text(`#who`); who != email {
		t.Fatalf("after a reload signed in as %q", who)
	}

	// Phone width: the page still fits (no horizontal scroll).
	run("phone width", chromedp.EmulateViewport(390, 844), chromedp.WaitVisible(chromedp.CSS(`a.task-title`)))
	if w := eval(`String(document.documentElement.scrollWidth <= window.innerWidth)`); w != "true" {
		t.Fatalf("at 390 px the page scrolls sideways")
	}
	shot(t, browser, "phone")
	run("desktop width", chromedp.EmulateViewport(1280, 900))

	// Signing out ends the session: back to sign in, and a reload stays there.
	run("sign out", chromedp.Click(chromedp.CSS(`#signout`)), chromedp.WaitVisible(chromedp.CSS(`input[name=email]`)))
	run("reload signed out", chromedp.Navigate(mesh.GatewayURL()+"/tasks"), chromedp.WaitVisible(chromedp.CSS(`input[name=email]`)))
	if path := eval(`location.pathname`); path != "/signin" {
		t.Fatalf("after signing out /tasks went to %q", path)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(dialogs) > 0 {
		t.Fatalf("the pages opened dialogs: %q", dialogs)
	}
}

// shot saves a screenshot of the page as <name>.png under THEFOLD_E2E_SHOTS, when set.
func shot(t *testing.T, browser context.Context, name string) {
	t.Helper()
	dir := os.Getenv("THEFOLD_E2E_SHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(browser, chromedp.FullScreenshot(100))
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return
	}
	_ = os.MkdirAll(dir, 0o755)
	_ = os.WriteFile(filepath.Join(dir, t.Name()+"-"+name+".png"), png, 0o644)
}
