// Command thefold runs and manages a local TheFold stack:
//
//	thefold up       build the nine services, start them as processes, wait until healthy
//	thefold down     stop them gracefully
//	thefold status   show which services run
//	thefold token    issue, save and print a fresh admin token
//	thefold init     create the signing keys and the admin token only (for docker compose)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/thefold/thefold/pkg/platform"
	"github.com/thefold/thefold/pkg/stack"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "thefold:", err)
		os.Exit(1)
	}
}

const usage = `usage: thefold <command> [flags]

commands:
  up       build and start the nine services, wait until all are healthy
  down     stop the services
  status   show which services are running
  token    issue, save and print a fresh admin token
  init     create the signing keys and admin token only (docker compose uses them)

flags:
  -data-dir DIR   where binaries, keys, logs and pids live (THEFOLD_DATA_DIR; default <src>/.thefold)
  -src DIR        source tree holding go.work (default: found from the working directory)
  -token-ttl D    admin token lifetime (THEFOLD_ADMIN_TOKEN_TTL; default 720h, at most
                  THEFOLD_AUTH_MAX_TOKEN_LIFETIME, default 720h); up reissues it when it
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
	timeout := fs.Duration("timeout", 90*time.Second, "how long up waits for health")
	defaultTTL, err := envDuration("THEFOLD_ADMIN_TOKEN_TTL")
	if err != nil {
		return err
	}
	maxLifetime, err := envDuration("THEFOLD_AUTH_MAX_TOKEN_LIFETIME")
	if err != nil {
		return err
	}
	tokenTTL := fs.Duration("token-ttl", defaultTTL, "admin token lifetime (0: 720h or the maximum lifetime if smaller)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *tokenTTL < 0 {
		return fmt.Errorf("-token-ttl: want a positive duration, got %s", *tokenTTL)
	}
	if *src == "" {
		root, err := findSourceRoot()
		if err != nil && (cmd == "up" || *dataDir == "") {
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

	switch cmd {
	case "up":
		return up(ctx, st, *src, *timeout, out)
	case "down":
		if err := st.Stop(20 * time.Second); err != nil {
			return err
		}
		fmt.Fprintln(out, "stopped")
		return nil
	case "status":
		running := 0
		for _, svc := range platform.ServiceNames {
			pid := st.Status()[svc]
			state := "stopped"
			if pid > 0 {
				state = fmt.Sprintf("running (pid %d)", pid)
				running++
			}
			fmt.Fprintf(out, "%-8s :%-5d %s\n", svc, st.Ports.GRPC[svc], state)
		}
		if running == 0 {
			return errors.New("not running")
		}
		return nil
	case "init":
		if _, err := st.EnsureCredentials(); err != nil {
			return err
		}
		fmt.Fprintf(out, "signing keys  %s\nadmin token   %s\n", st.KeyDir(), st.TokenPath())
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
	switch n := st.Running(); {
	case n == len(platform.ServiceNames):
		// Already up: running `make run` twice is not an error.
		if err := st.WaitReady(ctx, timeout); err != nil {
			return err
		}
		fmt.Fprintln(out, "already running (thefold down stops it)")
	case n > 0:
		return fmt.Errorf("%d of %d services are running; run thefold down first", n, len(platform.ServiceNames))
	default:
		fmt.Fprintf(out, "building services from %s …\n", src)
		if err := st.Build(ctx, src); err != nil {
			return err
		}
		if err := st.Start(); err != nil {
			return err
		}
		fmt.Fprintln(out, "started; waiting for health …")
		if err := st.WaitReady(ctx, timeout); err != nil {
			_ = st.Stop(10 * time.Second)
			return err
		}
	}
	fmt.Fprintf(out, `
TheFold is up: %d services healthy.
  gateway (REST)   %s   (OpenAPI: %s/openapi.json)
  gRPC             tasks %s, agent %s, … (reflection enabled)
  admin token      %s
  signing keys     %s
  logs             %s
Try:
  TOKEN=$(cat %s)
  curl -H "Authorization: Bearer $TOKEN" -d '{"title":"x","repo":"local/demo"}' %s/v1/tasks
Stop with: thefold down
`, len(platform.ServiceNames), st.GatewayURL(), st.GatewayURL(), st.GRPCAddr("tasks"), st.GRPCAddr("agent"),
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
