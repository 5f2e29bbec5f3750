package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/fakellm"
	"github.com/thefold/thefold/pkg/platform"
)

var (
	cliOnce sync.Once
	cliPath string
	cliErr  error
)

// cliBinary is cmd/thefold: the one the mesh was built with (stack.Build links it beside
// the services, go build -trimpath, as this would), else built once per test process.
// Linking it again in each of the three shards' processes took a minute or two of a CI run
// under load, which every CLI test waited for (TestPrefsOverREST: 142 s).
func cliBinary(t testing.TB) string {
	t.Helper()
	cliOnce.Do(func() {
		if mesh != nil {
			if p := filepath.Join(mesh.BinDir(), "thefold"); isFile(p) {
				cliPath = p
				return
			}
		}
		dir, err := os.MkdirTemp("", "thefold-cli-")
		if err != nil {
			cliErr = err
			return
		}
		cliPath = filepath.Join(dir, "thefold")
		out, err := exec.Command("go", "build", "-trimpath", "-o", cliPath, "../../cmd/thefold").CombinedOutput()
		if err != nil {
			cliErr = fmt.Errorf("build the CLI: %v\n%s", err, out)
		}
	})
	if cliErr != nil {
		t.Fatal(cliErr)
	}
	return cliPath
}

// cli runs the thefold binary against the mesh with env (THEFOLD_TOKEN etc.) and a config
// directory of its own; it returns stdout, stderr and the exit code.
func cli(t testing.TB, configDir string, env []string, args ...string) (string, string, int) {
	t.Helper()
	return cliWithInput(t, configDir, env, "", args...)
}

// cliWithInput is cli with input as what a person types.
func cliWithInput(t testing.TB, configDir string, env []string, input string, args ...string) (string, string, int) {
	t.Helper()
	cmd := exec.Command(cliBinary(t), args...)
	cmd.Stdin = strings.NewReader(input)
	cmd.Env = append(os.Environ(), "THEFOLD_CONFIG_DIR="+configDir, "THEFOLD_TOKEN=", "THEFOLD_API_KEY=", "THEFOLD_PROFILE=")
	for _, s := range platform.ServiceNames {
		cmd.Env = append(cmd.Env, platform.AddrEnv(s)+"="+mesh.GRPCAddr(s))
	}
	cmd.Env = append(cmd.Env, env...)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// The command line against the mesh: create and list tasks as JSON, clear errors with the
// documented exit codes (bad input by field, not found, not logged in, a refused login),
// and a login kept in a profile.
func TestCLI(t *testing.T) {
	parallel(t)
	cfg := t.TempDir()
	repo := agentRepo(t, fmt.Sprintf("cli-%d", time.Now().UnixNano()))
	tok := []string{"THEFOLD_TOKEN=" + token}
	out, errOut, code := cli(t, cfg, tok, "tasks", "create", "--repo", repo, "--title", "Made by the CLI", "-o", "json")
	if code != 0 {
		t.Fatalf("create: %d %s", code, errOut)
	}
	var task map[string]any
	if err := json.Unmarshal([]byte(out), &task); err != nil || task["title"] != "Made by the CLI" {
		t.Fatalf("create printed %q (%v)", out, err)
	}
	out, errOut, code = cli(t, cfg, tok, "tasks", "list", "--repo", repo, "-o", "json")
	var tasks []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &tasks) != nil || len(tasks) != 1 || tasks[0]["id"] != task["id"] {
		t.Fatalf("list: %d %q %s", code, out, errOut)
	}
	if out, _, code = cli(t, cfg, tok, "tasks", "list", "--repo", repo); code != 0 || !strings.Contains(out, "Made by the CLI") || !strings.HasPrefix(out, "ID") {
		t.Fatalf("table: %d %q", code, out)
	}
	if out, _, code = cli(t, cfg, tok, "tasks", "get", task["id"].(string), "-o", "yaml"); code != 0 || !strings.Contains(out, "title: Made by the CLI") {
		t.Fatalf("yaml: %d %q", code, out)
	}
	for _, c := range []struct {
		args   []string
		env    []string
		code   int
		stderr string
	}{
		{[]string{"tasks", "create", "--repo", "no-slash", "--title", "x"}, tok, 2, "repo:"},
		{[]string{"tasks", "get", "00000000-0000-4000-8000-000000000000"}, tok, 4, "not found"},
		{[]string{"tasks", "list", "--bogus"}, tok, 2, "unknown flag"},
		{[]string{"tasks", "list"}, nil, 3, "not logged in"},
		{[]string{"tasks", "list"}, []string{"THEFOLD_TOKEN=not.a.token"}, 3, "thefold login"},
		{[]string{"tasks", "list"}, []string{"THEFOLD_TOKEN=" + expiredToken(t)}, 3, "thefold login"},
	} {
		if _, errOut, code := cli(t, cfg, c.env, c.args...); code != c.code || !strings.Contains(errOut, c.stderr) {
			t.Errorf("%v: exit %d, stderr %q; want %d and %q", c.args, code, errOut, c.code, c.stderr)
		}
	}
	if _, errOut, code := cli(t, cfg, nil, "login", "--token", token); code != 0 {
		t.Fatalf("login: %d %s", code, errOut)
	}
	out, errOut, code = cli(t, cfg, nil, "whoami", "-o", "json")
	var who map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &who) != nil || who["user_id"] == nil {
		t.Fatalf("whoami from the profile: %d %q %s", code, out, errOut)
	}
	if fi, err := os.Stat(filepath.Join(cfg, "profiles.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the credentials file: %v %v", fi, err)
	}
	if _, _, code := cli(t, cfg, nil, "logout"); code != 0 {
		t.Fatal("logout")
	}
	if _, errOut, code := cli(t, cfg, nil, "whoami"); code != 3 {
		t.Fatalf("after logout: %d %s", code, errOut)
	}
}

// BenchmarkCLITasksList: `thefold tasks list` of 100 tasks, from process start to exit
// (target ≤ 50 ms: a command line must feel instant), as hyperfine would run it.
func BenchmarkCLITasksList(b *testing.B) {
	repo := agentRepo(b, fmt.Sprintf("cli-bench-%d", time.Now().UnixNano()))
	for i := range 100 {
		if code, body := rest(b, "POST", "/v1/tasks", token, map[string]any{"title": fmt.Sprintf("task %d", i), "repo": repo}); code != 200 {
			b.Fatalf("create: %d %v", code, body)
		}
	}
	cfg := b.TempDir()
	env := []string{"THEFOLD_TOKEN=" + token}
	if out, errOut, code := cli(b, cfg, env, "tasks", "list", "--repo", repo, "-o", "json"); code != 0 || strings.Count(out, `"id"`) != 100 {
		b.Fatalf("warm-up: %d %s", code, errOut)
	}
	var runs []time.Duration
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if _, errOut, code := cli(b, cfg, env, "tasks", "list", "--repo", repo, "-o", "json"); code != 0 {
			b.Fatalf("list: %d %s", code, errOut)
		}
		runs = append(runs, time.Since(start))
	}
	b.StopTimer()
	slices.Sort(runs)
	b.ReportMetric(float64(runs[len(runs)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(runs[len(runs)*9/10].Microseconds())/1000, "p90-ms")
}

// `thefold mcp` over stdio, as an agent (Claude Code, Cursor) runs it: the SDK's own client
// starts the binary, lists the tools and calls one as the logged-in user.
func TestCLIServesMCPOverStdio(t *testing.T) {
	parallel(t)
	repo := agentRepo(t, fmt.Sprintf("cli-mcp-%d", time.Now().UnixNano()))
	cmd := exec.Command(cliBinary(t), "mcp")
	cmd.Env = append(os.Environ(), "THEFOLD_CONFIG_DIR="+t.TempDir(), "THEFOLD_TOKEN="+token, "THEFOLD_API_KEY=", "THEFOLD_PROFILE=")
	for _, s := range platform.ServiceNames {
		cmd.Env = append(cmd.Env, platform.AddrEnv(s)+"="+mesh.GRPCAddr(s))
	}
	ctx, cancel := context.WithTimeout(context.Background(), liveness(time.Minute))
	defer cancel()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "e2e-stdio", Version: "e2e"}, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range tools.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, "create_and_start_task") || slices.Contains(names, "approve_review") {
		t.Fatalf("tools over stdio: %v", names)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_repos", Arguments: map[string]any{"owner": "local"}})
	if err != nil || res.IsError {
		t.Fatalf("list_repos: %v, %v", res, err)
	}
	b, _ := json.Marshal(res.StructuredContent)
	if !strings.Contains(string(b), repo) {
		t.Fatalf("list_repos over stdio does not show %s: %s", repo, b)
	}
}

const cliGo = "package cli\n\n// Name is the command's name.\nfunc Name() string { return \"thefold\" }\n"

// cliScript answers the jobs `thefold run` starts.
func cliScript() []fakellm.Response {
	return []fakellm.Response{
		{Match: planMatch("[CLI-RUN]"), Text: planAnswer("Add package cli.", "cli/cli.go")},
		{Match: genMatch("cli/cli.go"), Text: content(cliGo)},
	}
}

// `thefold run … --yes` does the main job in one command: a task to a pull request, its
// progress as plain lines when the output is not a terminal; under a pseudo-terminal the
// progress line is redrawn in place and the diff is coloured.
func TestCLIRunReachesAPullRequest(t *testing.T) {
	parallel(t)
	repo := agentRepo(t, fmt.Sprintf("cli-run-%d", time.Now().UnixNano()))
	tok := []string{"THEFOLD_TOKEN=" + token}
	out, errOut, code := cli(t, t.TempDir(), tok, "run", "Add package cli", "--repo", repo, "--description", "Package cli names the command. [CLI-RUN]", "--yes")
	if code != 0 || !strings.Contains(out, "Pull request:") || !strings.Contains(out, "is done") || strings.Contains(out, "\x1b[") {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	if !strings.Contains(out, "+func Name() string") || !strings.Contains(out, "Ready for review:") {
		t.Fatalf("the review was not shown:\n%s", out)
	}
	if _, _, code := cli(t, t.TempDir(), tok, "run", "No repo"); code != 2 {
		t.Fatalf("run without --repo: exit %d", code)
	}

	// The same under a pseudo-terminal (script(1)): the progress is redrawn in place, and
	// the diff goes through the pager (here one that keeps a copy).
	paged := filepath.Join(t.TempDir(), "paged")
	env := []string{"THEFOLD_TOKEN=" + token, "THEFOLD_CONFIG_DIR=" + t.TempDir(), "THEFOLD_PAGER=tee " + paged}
	for _, s := range platform.ServiceNames {
		env = append(env, platform.AddrEnv(s)+"="+mesh.GRPCAddr(s))
	}
	line := fmt.Sprintf("%s run 'Add package cli' --repo %s --description 'Again. [CLI-RUN]' --yes", cliBinary(t), repo)
	cmd := exec.Command("script", "-qec", line, "/dev/null")
	cmd.Env = append(os.Environ(), env...)
	tty, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("under a pty: %v\n%s", err, tty)
	}
	if s := string(tty); !strings.Contains(s, "\r\x1b[2K") || !strings.Contains(s, "\x1b[32m+func Name()") || !strings.Contains(s, "Pull request:") {
		t.Fatalf("the terminal display:\n%q", s)
	}
	if b, err := os.ReadFile(paged); err != nil || !strings.Contains(string(b), "\x1b[32m+func Name()") {
		t.Fatalf("the pager was given %q (%v), want the coloured diff", b, err)
	}
}

// thefold run asks the job's question inline and the review's decision, reading the
// person's answers: the answer reaches the job, the approval opens the pull request.
func TestCLIRunAsksInline(t *testing.T) {
	parallel(t)
	repo := agentRepo(t, fmt.Sprintf("cli-ask-%d", time.Now().UnixNano()))
	out, errOut, code := cliWithInput(t, t.TempDir(), []string{"THEFOLD_TOKEN=" + token}, "use blue\na\n",
		"run", "Write package clarify [AGENT-CLARIFY]", "--repo", repo, "--description", "F returns a colour.")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s\n%s", code, out, errOut)
	}
	for _, want := range []string{"The job asks: Which colour should F use?", "[a]pprove, [c]hange (with feedback), or [r]eject?", "Pull request:", "is done"} {
		if !strings.Contains(out, want) {
			t.Errorf("the run did not show %q:\n%s", want, out)
		}
	}
	id := regexp.MustCompile(`job ([0-9a-f-]{36}) on`).FindStringSubmatch(out)
	if id == nil {
		t.Fatalf("no job id in %q", out)
	}
	if code, body := rest(t, "GET", "/v1/jobs/"+id[1], token, nil); code != 200 || body["job"].(map[string]any)["clarification_answer"] != "use blue" {
		t.Errorf("the job's answer: %d %v", code, body)
	}
}

// The resource commands: a streamed chat turn (the demo script lists the repositories with
// a tool), repositories, memory search, reviews, and API keys made and revoked.
func TestCLIResources(t *testing.T) {
	parallel(t)
	cfg := t.TempDir()
	tok := []string{"THEFOLD_TOKEN=" + token}
	repo := agentRepo(t, fmt.Sprintf("cli-res-%d", time.Now().UnixNano()))
	out, errOut, code := cli(t, cfg, tok, "chat", "-m", "Which repositories do I have?")
	if code != 0 || !strings.Contains(out, "↳ list_repos") || !strings.Contains(out, "✓") || !strings.Contains(out, "scripted demo model") {
		t.Fatalf("chat: exit %d\n%s\n%s", code, out, errOut)
	}
	if out, _, code = cli(t, cfg, tok, "repos", "list", "-o", "json"); code != 0 || !strings.Contains(out, repo) {
		t.Fatalf("repos: %d %q", code, out)
	}
	// A repository's webhook connected, listed, its (empty) deliveries, disconnected.
	out, errOut, code = cli(t, cfg, tok, "repos", "connect", repo, "--label", "thefold", "-o", "json")
	var conn map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &conn) != nil {
		t.Fatalf("repos connect: %d %q %s", code, out, errOut)
	}
	cn := conn["connection"].(map[string]any)
	connID, _ := cn["id"].(string)
	if secret, _ := cn["webhook_secret"].(string); len(secret) != 64 {
		t.Fatalf("repos connect: %v", cn)
	}
	if out, _, code = cli(t, cfg, tok, "repos", "connections"); code != 0 || !strings.Contains(out, connID) || !strings.Contains(out, "thefold") {
		t.Fatalf("repos connections: %d %q", code, out)
	}
	if out, errOut, code = cli(t, cfg, tok, "repos", "deliveries", connID); code != 0 || !strings.Contains(out, "DELIVERY") {
		t.Fatalf("repos deliveries: %d %q %s", code, out, errOut)
	}
	if _, errOut, code = cli(t, cfg, tok, "repos", "deliveries", "not-an-id"); code == 0 || !strings.Contains(errOut, "connection_id") {
		t.Fatalf("repos deliveries of a bad id: %d %s", code, errOut)
	}
	// Its health checks: turned on and tuned, refused out of bounds, asked for, shown.
	if out, errOut, code = cli(t, cfg, tok, "repos", "monitor", connID, "--on", "--todo-threshold", "7"); code != 0 ||
		!strings.Contains(out, "true") || !strings.Contains(out, "7") {
		t.Fatalf("repos monitor: %d %q %s", code, out, errOut)
	}
	if _, errOut, code = cli(t, cfg, tok, "repos", "monitor", connID, "--interval", "1m"); code == 0 || !strings.Contains(errOut, "health.interval") {
		t.Fatalf("repos monitor with a one-minute interval: %d %s", code, errOut)
	}
	if out, errOut, code = cli(t, cfg, tok, "repos", "check", connID, "-o", "json"); code != 0 || !strings.Contains(out, `"report"`) {
		t.Fatalf("repos check: %d %q %s", code, out, errOut)
	}
	if out, errOut, code = cli(t, cfg, tok, "repos", "health", connID); code != 0 || !strings.Contains(out, repo) || !strings.Contains(out, "todo threshold") {
		t.Fatalf("repos health: %d %q %s", code, out, errOut)
	}
	if _, errOut, code = cli(t, cfg, tok, "repos", "disconnect", connID); code != 0 {
		t.Fatalf("repos disconnect: %d %s", code, errOut)
	}
	if _, errOut, code = cli(t, cfg, tok, "memory", "search", "health endpoint", "-o", "json"); code != 0 {
		t.Fatalf("memory search: %d %s", code, errOut)
	}
	if _, errOut, code = cli(t, cfg, tok, "reviews", "list", "-o", "json"); code != 0 {
		t.Fatalf("reviews: %d %s", code, errOut)
	}
	if _, errOut, code = cli(t, cfg, tok, "reviews", "approve", "00000000-0000-4000-8000-000000000000"); code != 4 {
		t.Fatalf("approving a missing review: %d %s", code, errOut)
	}
	_, email := newUser(t, "cli-keys")
	access, _ := login(t, email, 0)
	person := []string{"THEFOLD_TOKEN=" + access}
	out, errOut, code = cli(t, cfg, person, "keys", "create", "ci", "-o", "json")
	var key map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &key) != nil || key["secret"] == nil {
		t.Fatalf("keys create: %d %q %s", code, out, errOut)
	}
	id := key["api_key"].(map[string]any)["id"].(string)
	if out, _, code = cli(t, cfg, []string{"THEFOLD_API_KEY=" + key["secret"].(string)}, "whoami", "-o", "json"); code != 0 {
		t.Fatalf("whoami by the new key: %d %q", code, out)
	}
	if out, _, code = cli(t, cfg, person, "keys", "list"); code != 0 || !strings.Contains(out, id) {
		t.Fatalf("keys list: %d %q", code, out)
	}
	if _, errOut, code = cli(t, cfg, person, "keys", "revoke", id); code != 0 {
		t.Fatalf("keys revoke: %d %s", code, errOut)
	}
}

// Projects from the command line: plan, edit the plan in $EDITOR (here a sed), show it,
// start it (then cancelled: its task has no scripted answers).
func TestCLIProjects(t *testing.T) {
	parallel(t)
	cfg := t.TempDir()
	tok := []string{"THEFOLD_TOKEN=" + token}
	repo := agentRepo(t, fmt.Sprintf("cli-proj-%d", time.Now().UnixNano()))
	out, errOut, code := cli(t, cfg, tok, "projects", "plan", "A status service [PROJ-CHAT]", "--repo", repo, "-o", "json")
	var p map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &p) != nil || p["status"] != "PROJECT_STATUS_PLANNED" {
		t.Fatalf("plan: %d %q %s", code, out, errOut)
	}
	id := p["id"].(string)
	editor := []string{"THEFOLD_TOKEN=" + token, `EDITOR=sed -i 's/Write package status/Write package status with a test/'`, "VISUAL="}
	if out, errOut, code = cli(t, cfg, editor, "projects", "edit", id); code != 0 || !strings.Contains(out, "Write package status with a test") {
		t.Fatalf("edit: %d %q %s", code, out, errOut)
	}
	if out, _, code = cli(t, cfg, []string{"THEFOLD_TOKEN=" + token, "EDITOR=true", "VISUAL="}, "projects", "edit", id); code != 0 || !strings.Contains(out, "unchanged") {
		t.Fatalf("an unchanged edit: %d %q", code, out)
	}
	if out, _, code = cli(t, cfg, tok, "projects", "get", id); code != 0 || !strings.Contains(out, "with a test") || !strings.Contains(out, "phase 1") {
		t.Fatalf("get: %d %q", code, out)
	}
	if out, errOut, code = cli(t, cfg, tok, "projects", "start", id); code != 0 || !strings.Contains(out, "running") {
		t.Fatalf("start: %d %q %s", code, out, errOut)
	}
	rest(t, "POST", "/v1/projects/"+id+":cancel", token, map[string]any{})
	if _, errOut, code = cli(t, cfg, tok, "projects", "start", id); code != 5 {
		t.Fatalf("starting a cancelled project: %d %s", code, errOut)
	}
}

// expiredToken is an admin token signed with the mesh's key that expired a minute ago: a
// login that ran out.
func expiredToken(t *testing.T) string {
	t.Helper()
	priv, err := auth.LoadPrivateKey(filepath.Join(mesh.KeyDir(), auth.PrivateKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	tok, _, err := auth.NewSigner(priv, auth.WithClock(func() time.Time { return time.Now().Add(-time.Hour) })).
		Issue("admin", []string{auth.RoleAdmin}, time.Hour-time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func isFile(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}
