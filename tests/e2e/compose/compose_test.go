// Package compose runs docker-compose.yml end to end: the images as `make images` builds
// them (no registry: PostgreSQL with pgvector from this machine's Debian packages, see
// scripts/postgres-image.sh), `thefold init`, the ten containers up and healthy, and the
// README's demo task through the REST gateway to a pull request on the local forge, with
// the docker sandbox backend (the engine's socket mounted into the sandbox container) and
// the scripted model (fakellm, compose's "fakellm" profile). `make compose-test` runs it;
// so does scripts/test-e2e.sh (THEFOLD_E2E_SHARD=compose).
package compose

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/stack"
	"github.com/thefold/thefold/pkg/stack/stacktest"
	"github.com/thefold/thefold/pkg/testenv"
)

// services are the ten containers that must be healthy (fakellm, the eleventh, has no
// health check: it answers as soon as it runs).
var services = []string{"postgres", "tasks", "memory", "skills", "ai", "sandbox", "github", "builder", "agent", "gateway"}

// TestComposeStackRunsTheDemoTask: from images to a pull request, as a person following the
// README would, under a compose project and host ports of its own (so it runs beside the
// other end-to-end tests and a developer's own stack). The stack is taken down with its
// volumes afterwards, also when the test fails; then the containers' logs are printed first.
func TestComposeStackRunsTheDemoTask(t *testing.T) {
	if s := os.Getenv("THEFOLD_E2E_SHARD"); s != "" && s != "compose" {
		t.Skipf("runs in the compose shard (THEFOLD_E2E_SHARD=compose; this is %q)", s)
	}
	composeCmd := findCompose(t)
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	// The test's own deadline, ahead of go test's (which would kill the process before the
	// clean-up could take the stack down).
	// Interrupted (^C, SIGTERM), the commands stop and the clean-up below still runs.
	ctx, stop := signal.NotifyContext(t.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if d, ok := t.Deadline(); ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithDeadline(ctx, d.Add(-90*time.Second))
		defer cancel()
	}
	var timings []string
	timed := func(what string, began time.Time) {
		d := time.Since(began).Round(100 * time.Millisecond)
		timings = append(timings, fmt.Sprintf("%s %s", what, d))
		t.Logf("compose: %s took %s", what, d)
	}
	defer func() { t.Logf("compose timings: %s", strings.Join(timings, ", ")) }()

	// 1. The images: the nine services, fakellm, the sandboxes' image and PostgreSQL. The
	// services' binaries are the ones the e2e shards' meshes run (stacktest: linked once
	// per machine and tree, under a lock): linking all nine again beside the shards took
	// minutes of this test on a loaded two-core machine.
	began := time.Now()
	bins := &stack.Stack{DataDir: t.TempDir()}
	if err := stacktest.Prebuild(ctx, bins, root); err != nil {
		t.Fatalf("build the services: %v", err)
	}
	timed("the services' binaries", began)
	began = time.Now()
	run(ctx, t, root, []string{"IMAGE_BIN_DIR=" + bins.BinDir()}, "make", "--no-print-directory", "images")
	timed("make images", began)

	// 2. thefold init: keys, admin token and the forge's directory, in a data directory of
	// this test's own (THEFOLD_DATA_DIR, which the compose file reads too).
	began = time.Now()
	dataDir := t.TempDir()
	// (go run keeps the linked binary in the build cache: a second run links nothing.)
	run(ctx, t, root, nil, "go", "run", "-trimpath", "./cmd/thefold", "init", "-data-dir", dataDir, "-src", root)
	token, err := os.ReadFile(filepath.Join(dataDir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	// The services run as whoever owns the keys (THEFOLD_UID). Run as root (CI), the test
	// still gives them to an unprivileged user, nobody, as a developer's own user would be:
	// then no container reads its key by being root, and the sandbox container (root,
	// without capabilities but DAC_READ_SEARCH) reads another user's key.
	uid, gid := os.Getuid(), os.Getgid()
	if uid == 0 {
		uid, gid = 65534, 65534
		if err := chownAll(dataDir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	timed("thefold init", began)

	// 3. Up, under a project of its own, on free host ports.
	project := "thefold-compose-" + randomHex(4)
	ports := freePorts(t, 10)
	env := []string{
		"COMPOSE_PROJECT_NAME=" + project,
		"THEFOLD_DATA_DIR=" + dataDir,
		"THEFOLD_UID=" + strconv.Itoa(uid), "THEFOLD_GID=" + strconv.Itoa(gid),
		"THEFOLD_HTTP_PORT=" + strconv.Itoa(ports[0]),
		// The scripted model, in the stack: fakellm replays deploy/fakellm/demo.json.
		"THEFOLD_AI_PROVIDER=anthropic", "THEFOLD_AI_BASE_URL=http://fakellm:8090", "THEFOLD_AI_API_KEY=scripted",
		"THEFOLD_AI_MODEL=", "ANTHROPIC_API_KEY=", "OPENAI_API_KEY=", "GEMINI_API_KEY=", "MOONSHOT_API_KEY=",
		"THEFOLD_PG_SHARED_BUFFERS=128MB",
	}
	for i, svc := range services[1:] {
		env = append(env, fmt.Sprintf("THEFOLD_%s_GRPC_PORT=%d", strings.ToUpper(svc), ports[i+1]))
	}
	compose := func(ctx context.Context, args ...string) *exec.Cmd {
		all := slices.Concat(composeCmd[1:], []string{"-p", project, "-f", filepath.Join(root, "docker-compose.yml"),
			"--project-directory", root, "--profile", "fakellm"}, args)
		cmd := exec.CommandContext(ctx, composeCmd[0], all...)
		cmd.Dir, cmd.Env = root, append(os.Environ(), env...)
		return cmd
	}
	t.Cleanup(func() {
		// Always: the stack and its volumes go, and any sandbox container it left behind.
		cctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		began := time.Now()
		if out, err := compose(cctx, "down", "-v", "--remove-orphans", "-t", "10").CombinedOutput(); err != nil {
			t.Errorf("docker-compose down -v: %v\n%s", err, out)
		}
		ids, _ := exec.CommandContext(cctx, "docker", "ps", "-aq", "--filter",
			"label=org.thefold.sandbox.dir=/tmp/sandboxes/"+project).Output()
		if f := strings.Fields(string(ids)); len(f) > 0 {
			_ = exec.CommandContext(cctx, "docker", append([]string{"rm", "-f", "-v"}, f...)...).Run()
		}
		t.Logf("compose: down -v took %s", time.Since(began).Round(100*time.Millisecond))
	})
	t.Cleanup(func() {
		// On failure, first what the containers said.
		if !t.Failed() {
			return
		}
		cctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		out, _ := compose(cctx, "ps").CombinedOutput()
		t.Logf("docker-compose ps:\n%s", out)
		out, _ = compose(cctx, "logs", "--no-color", "--tail", "300").CombinedOutput()
		t.Logf("docker-compose logs:\n%s", out)
	})
	began = time.Now()
	if out, err := compose(ctx, "up", "-d").CombinedOutput(); err != nil {
		t.Fatalf("docker-compose up -d: %v\n%s", err, out)
	}
	waitHealthy(ctx, t, project, testenv.Liveness(2*time.Minute))
	timed("up to ten healthy containers", began)

	// 4. The README's demo task, over REST through the gateway.
	began = time.Now()
	api := &client{base: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), token: strings.TrimSpace(string(token))}
	pr := demoTask(ctx, t, api, dataDir, project)
	timed("demo task to a pull request", began)
	t.Logf("compose: pull request #%v on the local forge, branch %v, %v files", pr["number"], pr["head"], pr["files"])
}

// demoTask is the README's tour: a repository with a Go module on the local forge, the task
// "Add a health endpoint", a job to the review gate, approval, the pull request. It returns
// the pull request as the gateway answers it, after checking its branch is in the forge's
// bare repository on this host. At the review gate it checks that the job's sandbox is a
// docker one, a container of the host's engine made by the sandbox container through the
// mounted socket (labelled with the project's workspace dir).
func demoTask(ctx context.Context, t *testing.T, api *client, dataDir, project string) map[string]any {
	t.Helper()
	const repo = "local/demo"
	api.must(ctx, t, "POST", "/v1/repos", map[string]any{"repo": repo, "auto_init": true})
	api.must(ctx, t, "POST", "/v1/repos/"+repo+"/commits", map[string]any{
		"branch": "main", "message": "Go module",
		"files": []map[string]any{
			{"path": "go.mod", "action": "FILE_ACTION_CREATE", "content": "module example.com/demo\n\ngo 1.22\n"},
			{"path": "main.go", "action": "FILE_ACTION_CREATE", "content": "package main\n\nfunc main() {}\n"},
		},
	})
	task := api.must(ctx, t, "POST", "/v1/tasks", map[string]any{"title": "Add a health endpoint", "repo": repo})
	taskID := str(task, "task", "id")
	job := api.must(ctx, t, "POST", "/v1/jobs", map[string]any{"task_id": taskID})
	jobID := str(job, "job", "id")
	t.Logf("compose: task %s, job %s", taskID, jobID)

	got := waitJob(ctx, t, api, jobID, "JOB_STATUS_PENDING_REVIEW", testenv.Liveness(4*time.Minute))
	sandboxID := str(got, "job", "sandbox_id")
	sb := api.must(ctx, t, "GET", "/v1/sandboxes/"+sandboxID, nil)
	if b := str(sb, "sandbox", "backend"); b != "SANDBOX_BACKEND_DOCKER" {
		t.Fatalf("sandbox %s: backend %q, want SANDBOX_BACKEND_DOCKER: %v", sandboxID, b, sb)
	}
	// Its container: labelled with its id, or, taken from the service's pool of started
	// containers (whose labels were set before any sandbox had it), named after it.
	out, err := exec.CommandContext(ctx, "docker", "ps", "-a", "--filter", "label=org.thefold.sandbox.dir=/tmp/sandboxes/"+project,
		"--format", `{{.Names}}	{{.Label "org.thefold.sandbox.id"}}	{{.Image}}	{{.Status}}`).Output()
	var mine string
	for line := range strings.Lines(string(out)) {
		f := strings.Split(strings.TrimSpace(line), "\t")
		if len(f) == 4 && (f[1] == sandboxID || f[0] == "thefold-sandbox-"+sandboxID) {
			mine = strings.Join(slices.Concat(f[:1], f[2:]), " ")
		}
	}
	if mine == "" {
		t.Fatalf("no container of sandbox %s on the host's engine (docker ps: %v):\n%s", sandboxID, err, out)
	}
	t.Logf("compose: the job's sandbox %s is a container of the host's engine: %s", sandboxID, mine)
	reviewID := str(got, "job", "review_id")
	review := api.must(ctx, t, "GET", "/v1/reviews/"+reviewID, nil)
	t.Logf("compose: at the review gate: review %s, quality %v", reviewID, dig(review, "review", "quality_score"))
	api.must(ctx, t, "POST", "/v1/reviews/"+reviewID+":approve", map[string]any{})
	got = waitJob(ctx, t, api, jobID, "JOB_STATUS_COMPLETED", testenv.Liveness(90*time.Second))

	number, _ := dig(got, "job", "pull_request", "number").(float64)
	if number == 0 {
		t.Fatalf("job %s completed without a pull request: %v", jobID, got)
	}
	pr := api.must(ctx, t, "GET", fmt.Sprintf("/v1/repos/%s/pulls/%d", repo, int(number)), nil)
	pull, _ := pr["pull_request"].(map[string]any)
	if pull == nil {
		pull = pr
	}
	head, _ := pull["head"].(string)
	if head == "" || pull["base"] != "main" {
		t.Fatalf("pull request #%d: head %q base %v: %v", int(number), head, pull["base"], pr)
	}
	diff := api.must(ctx, t, "GET", fmt.Sprintf("/v1/repos/%s/pulls/%d/diff", repo, int(number)), nil)
	files, _ := diff["files"].([]any)
	if len(files) == 0 {
		t.Fatalf("pull request #%d changes no file: %v", int(number), diff)
	}
	pull["files"] = len(files)
	// The forge's repositories are on this host (THEFOLD_DATA_DIR/repos, mounted into
	// github): the pull request's branch is in the bare repository there.
	bare := filepath.Join(dataDir, "repos", filepath.FromSlash(repo)+".git")
	if out, err := exec.CommandContext(ctx, "git", "-c", "safe.directory=*", "--git-dir", bare, "rev-parse", "--verify", "refs/heads/"+head).CombinedOutput(); err != nil {
		matches, _ := filepath.Glob(filepath.Join(dataDir, "repos", "*", "*"))
		t.Fatalf("the branch %s of pull request #%d is not in %s: %v\n%s(the forge holds %v)", head, int(number), bare, err, out, matches)
	}
	return pull
}

// waitJob polls the job until it has status want, failing when it ends in another.
func waitJob(ctx context.Context, t *testing.T, api *client, id, want string, within time.Duration) map[string]any {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	last := ""
	for {
		got, err := api.call(ctx, "GET", "/v1/jobs/"+id, nil)
		if err == nil {
			status := str(got, "job", "status")
			if s := status + " " + str(got, "job", "phase"); s != last {
				t.Logf("compose: job %s: %s", id, s)
				last = s
			}
			switch status {
			case want:
				return got
			case "JOB_STATUS_FAILED", "JOB_STATUS_CANCELLED", "JOB_STATUS_REJECTED", "JOB_STATUS_SKIPPED", "JOB_STATUS_HUMAN_NEEDED":
				t.Fatalf("job %s ended %s waiting for %s: %v", id, status, want, got)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("job %s did not reach %s within %s (last: %s, %v)", id, want, within, last, err)
		case <-time.After(2 * time.Second):
		}
	}
}

// waitHealthy waits until the project's ten service containers report healthy.
func waitHealthy(ctx context.Context, t *testing.T, project string, within time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var state map[string]string
	began, healthyAt := time.Now(), map[string]bool{}
	for {
		out, err := exec.CommandContext(ctx, "docker", "ps", "-a", "--filter", "label=com.docker.compose.project="+project,
			"--format", `{{.Label "com.docker.compose.service"}}	{{.Status}}`).Output()
		if err == nil {
			state = map[string]string{}
			for line := range strings.Lines(string(out)) {
				svc, status, _ := strings.Cut(strings.TrimSpace(line), "\t")
				state[svc] = status
			}
			healthy := 0
			for _, svc := range services {
				if strings.Contains(state[svc], "(healthy)") {
					healthy++
					if !healthyAt[svc] {
						// When each turned healthy: where a slow start's time went.
						healthyAt[svc] = true
						t.Logf("compose: %s healthy after %s", svc, time.Since(began).Round(100*time.Millisecond))
					}
				}
			}
			if healthy == len(services) {
				return
			}
		}
		select {
		case <-ctx.Done():
			keys := make([]string, 0, len(state))
			for k := range state {
				keys = append(keys, k+": "+state[k])
			}
			sort.Strings(keys)
			t.Fatalf("the containers were not all healthy within %s:\n  %s", within, strings.Join(keys, "\n  "))
		case <-time.After(2 * time.Second):
		}
	}
}

// findCompose is docker-compose, or the docker compose plugin; the test is skipped (saying
// why) without either or without an engine.
func findCompose(t *testing.T) []string {
	t.Helper()
	if err := exec.Command("docker", "info").Run(); err != nil {
		t.Skipf("no docker engine answers (docker info: %v): the compose stack needs one", err)
	}
	if exec.Command("docker-compose", "version").Run() == nil {
		return []string{"docker-compose"}
	}
	if exec.Command("docker", "compose", "version").Run() == nil {
		return []string{"docker", "compose"}
	}
	t.Skip("neither docker-compose nor the docker compose plugin is installed (apt-get install docker-compose)")
	return nil
}

// run runs a command in dir, logging its output line by line as it comes, each line with
// the seconds since the command started (where `make images`' time goes: it prints each
// image as it is built); it fails the test when the command fails.
func run(ctx context.Context, t *testing.T, dir string, env []string, name string, args ...string) {
	t.Helper()
	began := time.Now()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	done := make(chan struct{})
	go func() {
		defer close(done)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			t.Logf("%s [%5.1fs]: %s", filepath.Base(name), time.Since(began).Seconds(), sc.Text())
		}
	}()
	err := cmd.Run()
	pw.Close()
	<-done
	if err != nil {
		t.Fatalf("%s %s: %v", name, strings.Join(args, " "), err)
	}
}

// chownAll gives dir and everything under it to uid:gid.
func chownAll(dir string, uid, gid int) error {
	return filepath.WalkDir(dir, func(path string, _ os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
}

// freePorts returns n ports free on this host right now.
func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", ":0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// client calls the REST gateway as the admin.
type client struct {
	base, token string
}

func (c *client) call(ctx context.Context, method, path string, body any) (map[string]any, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, bytes.TrimSpace(b))
	}
	var out map[string]any
	if len(bytes.TrimSpace(b)) > 0 {
		if err := json.Unmarshal(b, &out); err != nil {
			return nil, fmt.Errorf("%s %s: %w: %s", method, path, err, b)
		}
	}
	return out, nil
}

func (c *client) must(ctx context.Context, t *testing.T, method, path string, body any) map[string]any {
	t.Helper()
	out, err := c.call(ctx, method, path, body)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// dig follows keys through nested JSON objects.
func dig(v any, keys ...string) any {
	for _, k := range keys {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[k]
	}
	return v
}

func str(v any, keys ...string) string {
	s, _ := dig(v, keys...).(string)
	return s
}
