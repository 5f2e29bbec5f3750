package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/fakellm"
	"github.com/thefold/thefold/pkg/stack"
)

// replicaJobs is how many jobs TestReplicasShareTheWorkAndSurviveKills runs; job i writes
// notes/rNN.md.
const replicaJobs = 30

func replicaMarker(i int) string { return fmt.Sprintf("[REPLICA-%02d]", i) }
func replicaPath(i int) string   { return fmt.Sprintf("notes/r%02d.md", i) }

// replicaScript is prepended to the e2e script (TestMain).
func replicaScript() []fakellm.Response {
	var rs []fakellm.Response
	for i := range replicaJobs {
		rs = append(rs,
			fakellm.Response{Match: planMatch(replicaMarker(i)), Text: planAnswer("Write "+replicaPath(i)+".", replicaPath(i))},
			// A file takes a second to write, so a build is held long enough to be killed in.
			fakellm.Response{Match: genMatch(replicaPath(i)), Latency: fakellm.Duration(time.Second), Text: content(fmt.Sprintf("# r%02d\n\nA note.\n", i))})
	}
	return rs
}

// replicaStack is a second stack beside the mesh — its own database, keys and ports, the
// mesh's binaries and fakellm — running agent×3, builder×2 and gateway×2.
func replicaStack(t *testing.T, ctx context.Context) *stack.Stack {
	t.Helper()
	dbURL, drop, err := freshDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(drop)
	ports, err := stack.FreePorts()
	if err != nil {
		t.Fatal(err)
	}
	// The mesh's settings, but the default task rate (20 an hour per user), and few jobs
	// and builds per process so that the work has to spread over the replicas.
	env := slices.DeleteFunc(slices.Clone(mesh.Env), func(kv string) bool {
		return strings.HasPrefix(kv, "THEFOLD_AGENT_TASKS_PER_HOUR=") || strings.HasPrefix(kv, "THEFOLD_AGENT_MAX_JOBS=") ||
			strings.HasPrefix(kv, "THEFOLD_BUILDER_MAX_BUILDS=")
	})
	env = append(env, "THEFOLD_AGENT_MAX_JOBS=3", "THEFOLD_BUILDER_MAX_BUILDS=3")
	rs := &stack.Stack{DataDir: t.TempDir(), DatabaseURL: dbURL, Ports: ports, Env: env}
	if err := rs.SetReplicas(map[string]int{"agent": 3, "builder": 2, "gateway": 2}); err != nil {
		t.Fatal(err)
	}
	// The mesh's binaries, linked (the same build).
	if err := os.MkdirAll(rs.BinDir(), 0o755); err != nil {
		t.Fatal(err)
	}
	bins, _ := os.ReadDir(mesh.BinDir())
	for _, b := range bins {
		if err := os.Link(filepath.Join(mesh.BinDir(), b.Name()), filepath.Join(rs.BinDir(), b.Name())); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rs.EnsureCredentials(); err != nil {
		t.Fatal(err)
	}
	if err := rs.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := rs.Stop(20 * time.Second); err != nil {
			t.Errorf("stop the replica stack: %v", err)
		}
	})
	if err := rs.WaitReady(ctx, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
	if n := len(rs.Instances()); n != 13 || rs.Running() != 13 {
		t.Fatalf("%d processes configured, %d running; want 13", n, rs.Running())
	}
	return rs
}

// stackToken is a token of user on rs (signed with its key); admin adds the admin role.
func stackToken(t *testing.T, rs *stack.Stack, user string, admin bool) string {
	t.Helper()
	priv, err := auth.LoadPrivateKey(filepath.Join(rs.KeyDir(), auth.PrivateKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	roles := []string{auth.RoleUser}
	if admin {
		roles = append(roles, auth.RoleAdmin)
	}
	tok, _, err := auth.NewSigner(priv).Issue(user, roles, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

// TestReplicasShareTheWorkAndSurviveKills: thirty jobs of two users, sent through two
// gateways, run on three agents and two builders sharing their queues; one agent and one
// builder are killed (SIGKILL) while they hold work. Every job still completes exactly
// once — one branch, one commit, one pull request each — the audit log and the builds name
// every replica among those that ran them, and a third user's task quota holds across
// both gateways and all agents. (A stack of its own: it runs beside the mesh, in the
// serial shard, which leaves it the cores the parallel one does not take.)
func TestReplicasShareTheWorkAndSurviveKills(t *testing.T) {
	alone(t)
	ctx := context.Background()
	rs := replicaStack(t, ctx)
	gws := rs.GatewayURLs()
	if len(gws) != 2 {
		t.Fatalf("gateways: %v", gws)
	}
	users := []string{fmt.Sprintf("rep-a-%d", time.Now().UnixNano()), fmt.Sprintf("rep-b-%d", time.Now().UnixNano())}
	toks := []string{stackToken(t, rs, users[0], false), stackToken(t, rs, users[1], false)}
	restOn := func(u int, method, path string, body any) (int, map[string]any) {
		t.Helper()
		return restAt(t, gws[u], method, path, toks[u], body)
	}
	// Each user's repository, with a first commit on main.
	repos := make([]string, 2)
	for u := range 2 {
		repos[u] = "local/replicas-" + users[u]
		if code, body := restOn(u, http.MethodPost, "/v1/repos", map[string]any{"repo": repos[u], "auto_init": true}); code != http.StatusOK {
			t.Fatalf("create repo: %d %v", code, body)
		}
		if code, body := restOn(u, http.MethodPost, "/v1/repos/"+repos[u]+"/commits", map[string]any{
			"branch": "main", "message": "Add notes/README.md",
			"files": []map[string]any{{"path": "notes/README.md", "action": "FILE_ACTION_CREATE", "content": "# notes\n"}},
		}); code != http.StatusOK {
			t.Fatalf("commit: %d %v", code, body)
		}
	}
	// Thirty jobs, alternating users (so gateways).
	jobs := make([]string, replicaJobs)
	for i := range replicaJobs {
		u := i % 2
		code, task := restOn(u, http.MethodPost, "/v1/tasks", map[string]any{"title": "Write note r" + strconv.Itoa(i) + " " + replicaMarker(i), "repo": repos[u], "description": "Write " + replicaPath(i) + "."})
		if code != http.StatusOK {
			t.Fatalf("create task %d: %d %v", i, code, task)
		}
		code, job := restOn(u, http.MethodPost, "/v1/jobs", map[string]any{"task_id": task["task"].(map[string]any)["id"]})
		if code != http.StatusOK {
			t.Fatalf("start job %d: %d %v", i, code, job)
		}
		jobs[i] = job["job"].(map[string]any)["id"].(string)
	}
	owner := func(i int) int { return i % 2 }
	audit := func(i int) []map[string]any {
		_, body := restOn(owner(i), http.MethodGet, "/v1/audit-log?job_id="+jobs[i]+"&page_size=500", nil)
		var out []map[string]any
		entries, _ := body["entries"].([]any)
		for _, e := range entries {
			out = append(out, e.(map[string]any))
		}
		return out
	}
	builds := func(i int) []map[string]any {
		_, body := restOn(owner(i), http.MethodGet, "/v1/builds?job_id="+jobs[i], nil)
		var out []map[string]any
		list, _ := body["builds"].([]any)
		for _, b := range list {
			out = append(out, b.(map[string]any))
		}
		return out
	}

	// Every job reaches its review, is approved and completes; meanwhile agent-2 is killed
	// while it holds a run of a job, and builder-2 while it holds a build, each after some
	// work (each process's thefold_runs_running and _claimed_total say what it holds and
	// did).
	var wg sync.WaitGroup
	errs := make(chan error, replicaJobs)
	for i := range replicaJobs {
		wg.Go(func() { errs <- replicaJobDone(t, gws[(i+1)%2], toks[owner(i)], jobs[i]) })
	}
	killed := map[string]bool{}
	deadline := time.Now().Add(liveness(4 * time.Minute))
	for len(killed) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("killed %v: agent-2 held no job or builder-2 no build in time", killed)
		}
		for name, kind := range map[string]string{"agent-2": "job", "builder-2": "build"} {
			// Once it has done some of the work, so that it shows in the spread: builder-2
			// after three claims (a build it held when killed is finished, and counted, by
			// the other); agent-2 after its first (each run's claim is counted; at three, a
			// fast run could finish every job before agent-2, which the others outpace, held
			// a run after its third: seen once, the loop waiting out its bound).
			least := 3.0
			if kind == "job" {
				least = 1
			}
			if !killed[name] && metricOf(t, rs, name, "thefold_runs_claimed_total", kind) >= least && metricOf(t, rs, name, "thefold_runs_running", kind) > 0 {
				if err := rs.Kill(name); err != nil {
					t.Fatal(err)
				}
				killed[name] = true
				t.Logf("killed %s while it held a %s", name, kind)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}

	// Exactly once, and spread: the audit log names the agent of each run, the builds their
	// builder.
	agents, builders := map[string]int{}, map[string]int{}
	tookOver := 0
	for i := range replicaJobs {
		seen := map[string]int{}
		for _, e := range audit(i) {
			seen[e["action"].(string)]++
			if d, _ := e["details"].(map[string]any); e["action"] == "run_claimed" {
				agents[fmt.Sprint(d["instance"])]++
			}
		}
		for _, a := range []string{"branch_created", "commit_created", "pull_request_opened", "review_approved"} {
			if seen[a] != 1 {
				t.Errorf("job %d has %d %s, want 1: %v", i, seen[a], a, seen)
			}
		}
		for _, b := range builds(i) {
			builders[fmt.Sprint(b["instance"])]++
			if b["status"] != "BUILD_STATUS_COMPLETED" {
				t.Errorf("job %d's build %s is %v", i, b["id"], b["status"])
			}
			// A build builder-2 held when it died was taken over (a second claim) and
			// finished by the builder left.
			if c, _ := b["claims"].(float64); c >= 2 && b["instance"] == "builder" {
				tookOver++
			}
		}
	}
	if tookOver == 0 {
		t.Errorf("no build was taken over from the killed builder-2 (builds per builder: %v)", builders)
	}
	for _, a := range []string{"agent", "agent-2", "agent-3"} {
		if agents[a] == 0 {
			t.Errorf("agent %s ran no job: %v", a, agents)
		}
	}
	for _, b := range []string{"builder", "builder-2"} {
		if builders[b] == 0 {
			t.Errorf("builder %s ran no build: %v", b, builders)
		}
	}
	t.Logf("runs claimed per agent: %v; last claims of builds per builder: %v; builds taken over: %d", agents, builders, tookOver)
	// The survivors' metrics agree that they took work.
	for name, kind := range map[string]string{"agent": "job", "agent-3": "job", "builder": "build"} {
		if n := metricOf(t, rs, name, "thefold_runs_claimed_total", kind); n <= 0 {
			t.Errorf("%s's thefold_runs_claimed_total{kind=%q} is %v", name, kind, n)
		}
	}
	// One pull request per job, none twice.
	for u := range 2 {
		_, body := restOn(u, http.MethodGet, "/v1/repos/"+repos[u]+"/pulls?page_size=100", nil)
		if pulls, _ := body["pull_requests"].([]any); len(pulls) != replicaJobs/2 {
			t.Errorf("%s has %d pull requests, want %d", repos[u], len(pulls), replicaJobs/2)
		}
	}

	// A third user's quota (20 jobs an hour) holds whichever gateway and agent take the
	// start: twenty starts alternate over the gateways (and so the agents), the 21st is
	// refused by one gateway and the 22nd by the other. Each job is cancelled at once.
	third := fmt.Sprintf("rep-c-%d", time.Now().UnixNano())
	tok3 := stackToken(t, rs, third, false)
	repo3 := "local/replicas-" + third
	if code, body := restAt(t, gws[0], http.MethodPost, "/v1/repos", tok3, map[string]any{"repo": repo3, "auto_init": true}); code != http.StatusOK {
		t.Fatalf("create repo: %d %v", code, body)
	}
	start := func(gw, n int) (int, map[string]any) {
		code, task := restAt(t, gws[gw], http.MethodPost, "/v1/tasks", tok3, map[string]any{"title": fmt.Sprintf("Quota %d", n), "repo": repo3})
		if code != http.StatusOK {
			t.Fatalf("create task %d: %d %v", n, code, task)
		}
		return restAt(t, gws[gw], http.MethodPost, "/v1/jobs", tok3, map[string]any{"task_id": task["task"].(map[string]any)["id"]})
	}
	for n := range 20 {
		code, job := start(n%2, n)
		if code != http.StatusOK {
			t.Fatalf("start %d of 20: %d %v", n+1, code, job)
		}
		id := job["job"].(map[string]any)["id"].(string)
		if code, body := restAt(t, gws[n%2], http.MethodPost, "/v1/jobs/"+id+":cancel", tok3, map[string]any{}); code != http.StatusOK {
			t.Fatalf("cancel %s: %d %v", id, code, body)
		}
	}
	for gw := range 2 {
		code, body := start(gw, 20+gw)
		if code != http.StatusTooManyRequests || !strings.Contains(fmt.Sprint(body["message"]), "20") {
			t.Errorf("start %d through gateway %d: %d %v, want 429 naming the limit of 20", 21+gw, gw+1, code, body)
		}
	}
}

// replicaJobDone waits until job id is in review, approves it through gateway base, and
// waits until it completed.
func replicaJobDone(t *testing.T, base, tok, id string) error {
	deadline := time.Now().Add(liveness(6 * time.Minute))
	approved := false
	for time.Now().Before(deadline) {
		code, body := restAt(t, base, http.MethodGet, "/v1/jobs/"+id, tok, nil)
		if code != http.StatusOK {
			return fmt.Errorf("get job %s: %d %v", id, code, body)
		}
		job := body["job"].(map[string]any)
		switch st, _ := job["status"].(string); st {
		case "JOB_STATUS_COMPLETED":
			return nil
		case "JOB_STATUS_PENDING_REVIEW":
			if !approved {
				if code, body := restAt(t, base, http.MethodPost, "/v1/reviews/"+job["review_id"].(string)+":approve", tok, map[string]any{"comment": "ok"}); code != http.StatusOK {
					return fmt.Errorf("approve job %s: %d %v", id, code, body)
				}
				approved = true
			}
		case "JOB_STATUS_FAILED", "JOB_STATUS_CANCELLED", "JOB_STATUS_REJECTED", "JOB_STATUS_HUMAN_NEEDED", "JOB_STATUS_SKIPPED":
			return fmt.Errorf("job %s is %s: %v %v", id, st, job["status_reason"], job["error"])
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("job %s not completed within 6 minutes", id)
}

// metricOf is metric{kind="kind"} on the /metrics of rs's process name; -1 when the process
// does not answer (killed) or has no such series.
func metricOf(t *testing.T, rs *stack.Stack, name, metric, kind string) float64 {
	t.Helper()
	var admin int
	for _, in := range rs.Instances() {
		if in.Name == name {
			admin = in.Admin
		}
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", admin))
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	prefix := metric + `{kind="` + kind + `"} `
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err == nil {
				return f
			}
		}
	}
	return -1
}
