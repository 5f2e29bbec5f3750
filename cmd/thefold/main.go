// Command thefold runs and manages a local TheFold stack:
//
//	thefold up         build the nine services, start whatever is not running under a
//	                   supervisor that restarts a service that dies, wait until healthy
//	thefold demo       the main job end to end: up, a task to a reviewed pull request (the
//	                   scripted model, labelled as such, when no provider key is set)
//	thefold eval       up, then the eval's tasks (eval/tasks) through the mesh, each judged by
//	                   hidden tests in a sandbox; a Markdown and an HTML report
//	thefold down       stop the supervisor, then the services, gracefully
//	thefold status     show which services run and which are down
//	thefold supervise  the supervisor itself (thefold up starts it in the background)
//	thefold token      issue, save and print a fresh admin token (revoking the previous one)
//	thefold init       create the signing keys and the admin token only (for docker compose)
//	thefold rotate-key replace the token signing key; tokens signed with the old one stay
//	                   valid until they expire
//
// and talks to a running one through the Go client (pkg/client) as a logged-in user:
//
//	thefold login      keep credentials in a profile (one-time code, API key or token)
//	thefold whoami     who the profile is
//	thefold logout     forget them
//	thefold tasks      list, get, create
//	thefold jobs       list, get, start, watch
//
// The command tree is cobra's (cli.go); the stack commands keep their Go-style flags (run).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/thefold/thefold/pkg/logging"
	"github.com/thefold/thefold/pkg/platform"
	"github.com/thefold/thefold/pkg/seal"
	"github.com/thefold/thefold/pkg/stack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	os.Exit(execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

const usage = `usage: thefold <command> [flags]

commands:
  up       build and start whatever is not running (a supervisor restarts a service
           that dies), wait until all nine are healthy.
           -replicas agent=3,builder=2,gateway=2 runs more processes of those services
           (kept for later ups; name a service =1 to go back): callers spread their calls
           over every process of a service, agents and builders share the queued work,
           each gateway replica has its own REST port. sandbox and github run as one.
  demo     the main job end to end: start the stack, a repository and the task "Add a health
           endpoint", the job through planning, a sandboxed build and validation to the review
           gate, approval, the pull request; without a provider key the model is fakellm
           replaying deploy/fakellm/demo.json (labelled SCRIPTED MODEL) and the stack stops after
  eval     start the stack and run the eval: each task of eval/tasks (Go, TypeScript, Python
           bug fixes and features) on a repository of its own, through the job to the review
           gate; its hidden tests then run in a fresh sandbox on the review's files and the
           review is rejected. Prints a summary and writes report.md, report.html and
           results.json to -out. Without a provider key the model is fakellm replaying
           eval/tasks/*/fakellm.json (REPLAYED ANSWERS, not a model) and the stack stops after.
           Exit status 0 when the eval ran, whatever passed; 1 when it could not run.
           Flags: -tasks IDS (comma-separated ids or globs, e.g. 'go-*,py-version-compare';
           default all), -out DIR (default <src>/eval/out), -dir DIR (the tasks; default
           <src>/eval/tasks), -timeout D (per task, to its review; default 15m),
           -parallel N (tasks at once; default 2)
           e.g. thefold eval -tasks 'ts-*' -out /tmp/eval
  down     stop the supervisor, then the services
  status   show which services are running and which are down
  token    issue, save and print a fresh admin token; the previous one is revoked
  init     create the signing keys and admin token only (docker compose uses them)
  rotate-key
           replace the token signing key: the old public key keeps verifying the tokens
           it signed until they expire; running services pick the change up within
           seconds (containers: restart them); the admin token is reissued

flags:
  -data-dir DIR   where binaries, keys, logs and pids live (THEFOLD_DATA_DIR; default <src>/.thefold)
  -src DIR        source tree holding go.work (default: found from the working directory)
  -token-ttl D    admin token lifetime (THEFOLD_ADMIN_TOKEN_TTL; default 12h, at most
                  THEFOLD_AUTH_MAX_TOKEN_LIFETIME, default 720h); up reissues it (revoking the old one) when it
                  is missing, expired or has less than a quarter of its lifetime left
`

func run(ctx context.Context, args []string, out io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "help" || args[0] == "--help" {
		fmt.Fprint(out, usage)
		return nil
	}
	cmd := args[0]
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	dataDir := fs.String("data-dir", os.Getenv("THEFOLD_DATA_DIR"), "data directory")
	src := fs.String("src", "", "source tree (holds go.work)")
	timeoutDefault, timeoutUsage := 90*time.Second, "how long up waits for health"
	if cmd == "eval" {
		// The eval's -timeout is per task; up waits for health as long as for the others.
		timeoutDefault, timeoutUsage = 15*time.Minute, "per task: how long its job may take to reach review"
	}
	timeout := fs.Duration("timeout", timeoutDefault, timeoutUsage)
	replicas := ""
	if cmd == "up" {
		fs.StringVar(&replicas, "replicas", "", "processes per service, e.g. agent=3,builder=2,gateway=2")
	}
	var ev evalFlags
	if cmd == "eval" {
		fs.StringVar(&ev.tasks, "tasks", "", "comma-separated task ids or globs (default: all)")
		fs.StringVar(&ev.out, "out", "", "report directory (default <src>/eval/out)")
		fs.StringVar(&ev.dir, "dir", "", "tasks directory (default <src>/eval/tasks)")
		fs.IntVar(&ev.parallel, "parallel", 2, "tasks run at once")
	}
	defaultTTL, err := envDuration("THEFOLD_ADMIN_TOKEN_TTL")
	if err != nil {
		return err
	}
	maxLifetime, err := envDuration("THEFOLD_AUTH_MAX_TOKEN_LIFETIME")
	if err != nil {
		return err
	}
	tokenTTL := fs.Duration("token-ttl", defaultTTL, "admin token lifetime (0: 12h or the maximum lifetime if smaller)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *tokenTTL < 0 {
		return fmt.Errorf("-token-ttl: want a positive duration, got %s", *tokenTTL)
	}
	if *src == "" {
		root, err := findSourceRoot()
		if err != nil && (cmd == "up" || cmd == "demo" || cmd == "eval" || *dataDir == "") {
			return err
		}
		*src = root
	}
	if *dataDir == "" {
		*dataDir = filepath.Join(*src, ".thefold")
	}
	abs, err := filepath.Abs(*dataDir)
	if err != nil {
		return err
	}
	st := &stack.Stack{DataDir: abs, DatabaseURL: os.Getenv("THEFOLD_DATABASE_URL"), Ports: stack.DefaultPorts(),
		AdminTokenTTL: *tokenTTL, MaxTokenLifetime: maxLifetime}
	if saved, err := stack.Load(abs); err == nil {
		// The stack as it was started: its ports and extra environment. The environment's
		// database URL, when set, still wins.
		if st.DatabaseURL == "" {
			st.DatabaseURL = saved.DatabaseURL
		}
		st.Ports, st.Env = saved.Ports, saved.Env
	}
	if replicas != "" {
		counts, err := stack.ParseReplicas(replicas)
		if err != nil {
			return fmt.Errorf("-replicas: %w", err)
		}
		if changed(st.Replicas(), counts) && st.SupervisorRunning() {
			return fmt.Errorf("-replicas: the stack runs with %s; stop it first (thefold down)", replicaList(st.Replicas()))
		}
		if err := st.SetReplicas(counts); err != nil {
			return err
		}
	}

	switch cmd {
	case "up":
		return up(ctx, st, *src, *timeout, out)
	case "demo":
		return demo(ctx, st, *src, *timeout, out)
	case "eval":
		ev.taskTimeout = *timeout
		return runEval(ctx, st, *src, ev, out)
	case "down":
		if err := st.Stop(20 * time.Second); err != nil {
			return err
		}
		fmt.Fprintln(out, "stopped")
		return nil
	case "status":
		return status(st, out)
	case "supervise":
		return supervise(ctx, abs, out)
	case "init":
		if _, err := st.EnsureCredentials(); err != nil {
			return err
		}
		// The key that seals people's own GitHub tokens in the github service's database
		// (docker compose mounts it; the local stack's github service makes the same file).
		if _, err := seal.LoadKeyFile(filepath.Join(st.KeyDir(), "github-secret.key"), true); err != nil {
			return err
		}
		// The key that seals people's integration secrets (Slack and Discord webhooks and
		// signing secrets) in the agent's database, likewise.
		if _, err := seal.LoadKeyFile(filepath.Join(st.KeyDir(), "agent-secret.key"), true); err != nil {
			return err
		}
		// The local forge's repositories: docker-compose mounts this directory into the
		// github container, which runs as the user who ran init.
		repos := filepath.Join(st.DataDir, "repos")
		if err := os.MkdirAll(repos, 0o750); err != nil {
			return err
		}
		fmt.Fprintf(out, "signing keys  %s\nadmin token   %s\nrepositories  %s\n", st.KeyDir(), st.TokenPath(), repos)
		return nil
	case "rotate-key":
		kid, err := st.RotateSigningKey()
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "new signing key %s\nadmin token     %s\n", kid, st.TokenPath())
		return nil
	case "token":
		tok, err := st.IssueAdminToken()
		if err != nil {
			return err
		}
		fmt.Fprintln(out, tok)
		return nil
	default:
		return fmt.Errorf("unknown command %q\n%s", cmd, usage)
	}
}

func up(ctx context.Context, st *stack.Stack, src string, timeout time.Duration, out io.Writer) error {
	// Every up leaves a usable admin token behind, also when the stack is already running.
	if _, err := st.EnsureCredentials(); err != nil {
		return err
	}
	down := downServices(st)
	supervised := st.SupervisorRunning()
	switch {
	case len(down) == 0 && supervised:
		// Already up: running `make run` twice is not an error, and it is quick.
		if err := st.WaitReady(ctx, timeout); err != nil {
			return err
		}
		fmt.Fprintln(out, "already running (thefold down stops it)")
	default:
		// Start whatever is not running: a crashed service, a dead supervisor, or all of it.
		fresh := len(down) == len(st.Instances())
		if _, err := os.Stat(filepath.Join(st.BinDir(), stack.SupervisorExe)); len(down) > 0 || err != nil {
			fmt.Fprintf(out, "building services from %s …\n", src)
			if err := st.Build(ctx, src); err != nil {
				return err
			}
		}
		if !fresh && len(down) > 0 {
			fmt.Fprintf(out, "starting %s (the other services are running)\n", strings.Join(down, ", "))
		}
		if !supervised {
			fmt.Fprintf(out, "starting the supervisor (restarts a service that dies; log %s)\n", st.SupervisorLogPath())
		}
		if err := st.StartSupervisor(); err != nil {
			return err
		}
		fmt.Fprintln(out, "waiting for health …")
		if err := st.WaitReady(ctx, timeout); err != nil {
			if fresh {
				_ = st.Stop(10 * time.Second) // no half-started stack left behind
			}
			return err
		}
	}
	admin := os.Getenv("THEFOLD_ADMIN_EMAIL")
	if admin == "" {
		admin = "admin@localhost"
	}
	if more := len(st.Instances()) - len(platform.ServiceNames); more > 0 {
		fmt.Fprintf(out, "\nreplicas: %s (%d processes)\n", replicaList(st.Replicas()), len(st.Instances()))
		for _, u := range st.GatewayURLs()[1:] {
			fmt.Fprintf(out, "  another gateway  %s\n", u)
		}
	}
	fmt.Fprintf(out, `
TheFold is up: %d services healthy.
  web console      %s/   (sign in as %s; without a mail server the code is the last line of %s)
  gateway (REST)   %s   (OpenAPI: %s/openapi.json)
  gRPC             tasks %s, agent %s, … (reflection enabled)
  admin token      %s
  signing keys     %s
  logs             %s
Try:
  TOKEN=$(cat %s)
  curl -H "Authorization: Bearer $TOKEN" -d '{"title":"x","repo":"local/demo"}' %s/v1/tasks
Stop with: thefold down
`, len(platform.ServiceNames), st.GatewayURL(), admin, st.MailSinkPath(), st.GatewayURL(), st.GatewayURL(), st.GRPCAddr("tasks"), st.GRPCAddr("agent"),
		st.TokenPath(), st.KeyDir(), filepath.Dir(st.LogPath("x")), st.TokenPath(), st.GatewayURL())
	return nil
}

// envDuration reads a duration variable; unset is 0 (the default applies).
func envDuration(name string) (time.Duration, error) {
	v := os.Getenv(name)
	if v == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s: want a positive duration such as 720h, got %q", name, v)
	}
	return d, nil
}

// findSourceRoot walks up from the working directory to the directory holding go.work.
func findSourceRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.work")); err == nil && strings.Contains(string(b), "./services/tasks") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find TheFold's source tree (go.work) above the working directory; pass -src")
		}
		dir = parent
	}
}

// downServices names the processes (services and replicas) that are not running.
func downServices(st *stack.Stack) []string {
	pids := st.Status()
	var down []string
	for _, in := range st.Instances() {
		if pids[in.Name] == 0 {
			down = append(down, in.Name)
		}
	}
	return down
}

// changed reports whether counts asks for another number of processes of a service than
// now.
func changed(now, counts map[string]int) bool {
	for svc, n := range counts {
		if now[svc] != n {
			return true
		}
	}
	return false
}

// replicaList is "agent=3, builder=2" for the services that run more than one process
// ("one each" when none does).
func replicaList(counts map[string]int) string {
	var parts []string
	for _, svc := range platform.ServiceNames {
		if counts[svc] > 1 {
			parts = append(parts, fmt.Sprintf("%s=%d", svc, counts[svc]))
		}
	}
	if len(parts) == 0 {
		return "one process each"
	}
	return strings.Join(parts, ", ")
}

// status prints each service's state and the supervisor's; it fails when any service is
// down, naming them, so scripts can check the stack with it.
func status(st *stack.Stack, out io.Writer) error {
	pids := st.Status()
	for _, in := range st.Instances() {
		state := "down"
		if pid := pids[in.Name]; pid > 0 {
			state = fmt.Sprintf("running (pid %d)", pid)
		}
		fmt.Fprintf(out, "%-10s :%-5d %s\n", in.Name, in.GRPC, state)
	}
	sup := "not running: a service that dies stays down (thefold up starts it)"
	if st.SupervisorRunning() {
		sup = "running (restarts a service that dies)"
	}
	fmt.Fprintf(out, "%-10s        %s\n", "supervisor", sup)
	down := downServices(st)
	switch {
	case len(down) == len(st.Instances()):
		return errors.New("not running")
	case len(down) > 0:
		return fmt.Errorf("%d of %d processes down: %s (thefold up starts them)", len(down), len(st.Instances()), strings.Join(down, ", "))
	}
	return nil
}

// supervise runs the supervisor in the foreground (thefold up starts it detached): it
// restarts a service that dies until SIGTERM, and starts what is down at once on SIGHUP.
func supervise(ctx context.Context, dataDir string, out io.Writer) error {
	st, err := stack.Load(dataDir)
	if err != nil {
		return fmt.Errorf("supervise: no saved stack in %s (thefold up writes it): %w", dataDir, err)
	}
	wake := make(chan os.Signal, 1)
	signal.Notify(wake, syscall.SIGHUP)
	defer signal.Stop(wake)
	return st.Supervise(ctx, logging.New(out, "supervisor", slog.LevelInfo), wake)
}
