// Package stack runs TheFold's nine services as local processes: it builds the binaries,
// creates the signing key pair and an admin token on first start, starts each service with
// its ports and the addresses of the others, waits until all report ready, and stops them.
// `thefold up` / `thefold down` and the end-to-end tests use it.
package stack

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/thefold/thefold/pkg/platform"
)

// Ports are the listen ports of one stack: every service's first process, and the
// replicas' (SetReplicas).
type Ports struct {
	GRPC        map[string]int
	Admin       map[string]int
	GatewayHTTP int
	// Replicas are the ports of each service's further processes ("agent-2", "agent-3", …).
	Replicas map[string][]ReplicaPorts `json:",omitempty"`
}

// DefaultPorts are the documented defaults (gateway 8080, tasks 9101, …; admin = gRPC+100).
func DefaultPorts() Ports {
	p := Ports{GRPC: map[string]int{}, Admin: map[string]int{}, GatewayHTTP: platform.GatewayHTTPPort}
	for _, s := range platform.ServiceNames {
		p.GRPC[s] = platform.GRPCPorts[s]
		p.Admin[s] = platform.AdminPort(s)
	}
	return p
}

// FreePorts picks unused loopback ports for a stack (tests run beside a stack on the
// default ports, and several stacks at once: the e2e shards, the launcher's tests). The
// ports are below the kernel's ephemeral range, so that no outgoing connection takes one
// while its service restarts, and each is reserved for the rest of this process's life by a
// lock file, so that stacks started at once by several processes never pick the same one.
func FreePorts() (Ports, error) {
	p := Ports{GRPC: map[string]int{}, Admin: map[string]int{}}
	var err error
	for _, s := range platform.ServiceNames {
		if p.GRPC[s], err = reservePort(); err != nil {
			return p, err
		}
		if p.Admin[s], err = reservePort(); err != nil {
			return p, err
		}
	}
	p.GatewayHTTP, err = reservePort()
	return p, err
}

var (
	reserveMu sync.Mutex
	// reserved holds the lock files of the ports this process took, open until it exits.
	reserved []*os.File
)

// reservePort returns a loopback port that is free now and that no other process using
// reservePort holds.
func reservePort() (int, error) {
	reserveMu.Lock()
	defer reserveMu.Unlock()
	lo, hi := portRange()
	dir := filepath.Join(os.TempDir(), "thefold-ports")
	if err := os.MkdirAll(dir, 0o777); err != nil {
		return 0, err
	}
	n := hi - lo + 1
	start := rand.IntN(n)
	for i := 0; i < n; i++ {
		port := lo + (start+i)%n
		f, err := os.OpenFile(filepath.Join(dir, strconv.Itoa(port)), os.O_CREATE|os.O_RDWR, 0o666)
		if err != nil {
			return 0, err
		}
		if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
			f.Close() // another process holds it
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			f.Close() // in use by something else
			continue
		}
		_ = l.Close()
		reserved = append(reserved, f)
		return port, nil
	}
	return 0, fmt.Errorf("stack: no free port in %d-%d", lo, hi)
}

// portRange is where reservePort looks: below the kernel's ephemeral ports (32768 and up
// unless the system says otherwise), from 20000.
func portRange() (lo, hi int) {
	lo, hi = 20000, 32767
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if eph, err := strconv.Atoi(f[0]); err == nil && eph-1 < hi {
				hi = eph - 1
			}
		}
	}
	if hi-lo < 1000 {
		lo = max(hi-10000, 1024)
	}
	return lo, hi
}

// Stack is one local deployment.
type Stack struct {
	// DataDir holds bin/, keys/, logs/, run/ and admin.token.
	DataDir     string
	DatabaseURL string
	Ports       Ports
	// Env is added to the services' environments (e.g. THEFOLD_LOG_LEVEL), each variable
	// to the services that need it, as the launcher's own environment is (serviceEnv).
	Env []string
	// AdminTokenTTL is the admin token's lifetime (0: DefaultAdminTokenTTL); it may not
	// exceed MaxTokenLifetime (0: auth.DefaultMaxLifetime), which services are given too.
	AdminTokenTTL    time.Duration
	MaxTokenLifetime time.Duration
}

// Paths inside the data directory.
func (s *Stack) BinDir() string          { return filepath.Join(s.DataDir, "bin") }
func (s *Stack) KeyDir() string          { return filepath.Join(s.DataDir, "keys") }
func (s *Stack) LogPath(n string) string { return filepath.Join(s.DataDir, "logs", n+".log") }
func (s *Stack) pidPath(n string) string { return filepath.Join(s.DataDir, "run", n+".pid") }
func (s *Stack) exePath(n string) string { return filepath.Join(s.BinDir(), n) }
func (s *Stack) TokenPath() string       { return filepath.Join(s.DataDir, "admin.token") }

// MailSinkPath is where the gateway's log mailer appends the mail it would send (login
// codes), one JSON object per line.
func (s *Stack) MailSinkPath() string { return filepath.Join(s.DataDir, "mail", "outbox.jsonl") }
func (s *Stack) GatewayURL() string {
	return fmt.Sprintf("http://127.0.0.1:%d", s.Ports.GatewayHTTP)
}

// GRPCAddr is a service's gRPC address.
func (s *Stack) GRPCAddr(svc string) string { return fmt.Sprintf("127.0.0.1:%d", s.Ports.GRPC[svc]) }

// Build compiles the nine binaries and the launcher (bin/thefold) from the source tree at srcRoot (which holds go.work).
func (s *Stack) Build(ctx context.Context, srcRoot string) error {
	if err := os.MkdirAll(s.BinDir(), 0o755); err != nil {
		return err
	}
	// -trimpath: no checkout path in the binaries, and a build in another checkout of the
	// same source (a fresh clone) reuses the build cache.
	args := []string{"build", "-trimpath", "-o", s.BinDir() + string(os.PathSeparator)}
	for _, svc := range platform.ServiceNames {
		args = append(args, "./services/"+svc)
	}
	// The supervisor runs from bin/thefold: a stable path its pid file can be checked
	// against (`go run` deletes its binary when it exits).
	args = append(args, "./cmd/thefold")
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = srcRoot
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("stack: go build: %w\n%s", err, out)
	}
	return nil
}

// env is in's environment: what its service needs of the launcher's environment and Env
// (serviceEnv), then its addresses, data directory, identity and the others' addresses
// (every process of each, comma-separated: the callers spread their calls over them).
func (s *Stack) env(in Instance) []string {
	svc := in.Service
	env := serviceEnv(svc, os.Environ(), s.Env)
	env = append(env,
		"THEFOLD_GRPC_ADDR="+in.Addr(),
		"THEFOLD_ADMIN_ADDR="+fmt.Sprintf("127.0.0.1:%d", in.Admin),
		"THEFOLD_HTTP_ADDR="+fmt.Sprintf("127.0.0.1:%d", cmp.Or(in.HTTP, s.Ports.GatewayHTTP)),
		"THEFOLD_DATA_DIR="+s.DataDir,
	)
	// A replicated service's processes name themselves where they record who did what
	// (the agent's audit log, the builder's builds).
	if len(s.Ports.Replicas[svc]) > 0 {
		env = append(env, strings.TrimSuffix(platform.AddrEnv(svc), "ADDR")+"INSTANCE_ID="+in.Name)
	}
	// THEFOLD_DATABASE_URL is the service's own role, added by startOne (dbroles.go): the
	// administrator's URL is never given to a service.
	env = append(env, s.authEnv(svc)...)
	// The local forge's pull-request links point at this stack's gateway, wherever its port
	// is, unless a public URL is configured (behind a proxy).
	if svc == "github" && !slices.ContainsFunc(env, func(kv string) bool { return strings.HasPrefix(kv, "THEFOLD_GITHUB_PUBLIC_URL=") }) {
		env = append(env, "THEFOLD_GITHUB_PUBLIC_URL="+s.GatewayURL())
	}
	for _, other := range platform.ServiceNames {
		env = append(env, platform.AddrEnv(other)+"="+s.AddrList(other))
	}
	return env
}

// Start launches every process of the stack (Instances) that is not running, each in its
// own session, so it outlives the launcher, logging to logs/<name>.log and recording its
// pid in run/<name>.pid.
func (s *Stack) Start() error {
	if err := s.privateDirs(); err != nil {
		return err
	}
	started := false
	defer func() {
		if !started {
			_ = s.Stop(5 * time.Second) // no half-started stack left behind
		}
	}()
	for _, in := range s.Instances() {
		if _, ok := s.runningPID(in.Name); ok {
			continue
		}
		cmd, err := s.startOne(in.Name)
		if err != nil {
			return err
		}
		go func() { _ = cmd.Wait() }() // reap if it dies while we still run
	}
	started = true
	return nil
}

// startOne starts the instance called name and records its pid; the caller waits for
// (reaps) the process.
func (s *Stack) startOne(name string) (*exec.Cmd, error) {
	in, ok := s.instance(name)
	if !ok {
		return nil, fmt.Errorf("stack: no process %q in this stack", name)
	}
	svc := in.Service
	logf, err := openLog(s.LogPath(name))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(s.exePath(svc))
	dbURL, err := s.ServiceDatabaseURL(context.Background(), svc)
	if err != nil {
		fmt.Fprintf(logf, "not started: %v\n", err) // where `thefold up` points when it gives up
		_ = logf.Close()
		return nil, fmt.Errorf("stack: start %s: %w", svc, err)
	}
	cmd.Env = append(s.env(in), "THEFOLD_DATABASE_URL="+dbURL)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = cmd.Start()
	_ = logf.Close()
	if err != nil {
		return nil, fmt.Errorf("stack: start %s: %w", svc, err)
	}
	if err := writePIDFile(s.pidPath(name), cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, err
	}
	return cmd, nil
}

// Restart stops one process (a service's first, "agent", or a replica, "agent-2")
// gracefully (SIGTERM, then SIGKILL after timeout), starts it again and waits until the
// stack is ready; the rest of the stack keeps running. Under a supervisor, the supervisor
// starts it again.
func (s *Stack) Restart(ctx context.Context, svc string, timeout time.Duration) error {
	if err := s.stopOne(svc, time.Now().Add(timeout)); err != nil {
		return err
	}
	if s.SupervisorRunning() {
		s.wakeSupervisor()
	} else {
		cmd, err := s.startOne(svc)
		if err != nil {
			return err
		}
		go func() { _ = cmd.Wait() }()
	}
	return s.WaitReady(ctx, timeout)
}

// Kill sends one process (a service's first, or a replica) SIGKILL — a crash, not a
// shutdown: nothing it was doing is finished or handed over — and waits until the process
// is gone. Start (or a supervisor) starts it again.
func (s *Stack) Kill(svc string) error {
	exe := s.exePath(serviceOf(svc))
	pf, err := readPIDFile(s.pidPath(svc))
	if err != nil {
		return fmt.Errorf("stack: kill %s: %w", svc, err)
	}
	if !liveProcess(pf, exe) {
		return os.Remove(s.pidPath(svc)) // gone, or not ours
	}
	if err := signalOwn(pf, exe, syscall.SIGKILL); err != nil {
		return fmt.Errorf("stack: kill %s: %w", svc, err)
	}
	if !waitGone(pf, exe, time.Now().Add(10*time.Second)) {
		return fmt.Errorf("stack: kill %s: pid %d still alive", svc, pf.pid)
	}
	return os.Remove(s.pidPath(svc))
}

// Running reports how many of the stack's processes are alive.
func (s *Stack) Running() int {
	n := 0
	for _, pid := range s.Status() {
		if pid > 0 {
			n++
		}
	}
	return n
}

// WaitReady polls every process's /readyz until all answer 200. Without a supervisor, a
// process that exits fails the wait at once, naming its log; under one, it is waited for
// (the supervisor starts it again) and the timeout error shows its log.
func (s *Stack) WaitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	pending := map[string]int{}
	for _, in := range s.Instances() {
		pending[in.Name] = in.Admin
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		for svc, admin := range pending {
			if _, ok := s.runningPID(svc); !ok {
				if !s.SupervisorRunning() {
					return fmt.Errorf("stack: %s exited; see %s:\n%s", svc, s.LogPath(svc), tail(s.LogPath(svc), 15))
				}
				continue
			}
			resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", admin))
			if err == nil {
				_ = resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					delete(pending, svc)
				}
			}
		}
		if len(pending) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			var names, logs []string
			for svc := range pending {
				names = append(names, svc)
				logs = append(logs, fmt.Sprintf("%s (%s):\n%s", svc, s.LogPath(svc), tail(s.LogPath(svc), 10)))
			}
			return fmt.Errorf("stack: not ready after %s: %s\n%s", timeout, strings.Join(names, ", "), strings.Join(logs, "\n"))
		case <-tick.C:
		}
	}
}

// Status reports each process's pid (0 when not running), by instance name.
func (s *Stack) Status() map[string]int {
	out := map[string]int{}
	for _, in := range s.Instances() {
		pid, _ := s.runningPID(in.Name)
		out[in.Name] = pid
	}
	return out
}

// Stop stops the supervisor first (so nothing is restarted), then sends SIGTERM to every
// process (gateways first), waits for graceful shutdown, and kills what is left after
// timeout. Replicas no longer configured (a run with more of them) are stopped too. Only
// processes this stack started are signalled: see pidFile.
func (s *Stack) Stop(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	errList := []error{s.stopSupervisor(deadline)}
	order := s.processNames()
	slices.Reverse(order)
	for _, svc := range order {
		if pf, err := readPIDFile(s.pidPath(svc)); err == nil {
			errList = append(errList, signalOwn(pf, s.exePath(serviceOf(svc)), syscall.SIGTERM))
		}
	}
	for _, svc := range order {
		errList = append(errList, s.stopOne(svc, deadline))
	}
	return errors.Join(errList...)
}

// processNames are the configured instances' names, then those of any other process of a
// service that has a pid file here (a replica of an earlier run with more of them).
func (s *Stack) processNames() []string {
	var names []string
	for _, in := range s.Instances() {
		names = append(names, in.Name)
	}
	files, _ := filepath.Glob(filepath.Join(s.DataDir, "run", "*.pid"))
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".pid")
		if svc := serviceOf(name); svc != name && slices.Contains(platform.ServiceNames, svc) && !slices.Contains(names, name) {
			names = append(names, name)
		}
	}
	return names
}

// stopOne sends one process SIGTERM, waits until deadline for it to exit, then kills it.
// A pid file whose process is gone or is not ours (stale) is removed without signalling
// anything.
func (s *Stack) stopOne(name string, deadline time.Time) error {
	return stopProcess(s.pidPath(name), s.exePath(serviceOf(name)), deadline)
}

func stopProcess(pidPath, exe string, deadline time.Time) error {
	pf, err := readPIDFile(pidPath)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return os.Remove(pidPath) // unreadable: nothing we can safely signal
	}
	defer os.Remove(pidPath)
	if !liveProcess(pf, exe) {
		// Gone, or not ours (a stale pid file): nothing to signal. Or exiting already (Stop
		// sent every service SIGTERM first): a process's exe link goes when its memory is
		// released, before the process is gone, and on a busy machine that stretch is long.
		// The pid and start time still name it while it lasts, so wait for that.
		if pf.start != 0 {
			waitGone(pf, exe, time.Now().Add(killWait))
		}
		return nil
	}
	if err := signalOwn(pf, exe, syscall.SIGTERM); err != nil {
		return err
	}
	waitGone(pf, exe, deadline)
	if exited(pf, exe) {
		return nil
	}
	if err := signalOwn(pf, exe, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill %s: %w", filepath.Base(exe), err)
	}
	// SIGKILL is not instant: the process is torn down after delivery. Return only once it
	// is gone, so its ports and files are free for whatever starts next.
	if !waitGone(pf, exe, time.Now().Add(killWait)) {
		return fmt.Errorf("stop %s: pid %d still exiting %s after SIGKILL", filepath.Base(exe), pf.pid, killWait)
	}
	return nil
}

// killWait bounds the wait for a killed process to finish exiting.
const killWait = 5 * time.Second

// waitGone polls until the process in pf has exited or deadline passes, and reports
// whether it exited.
func waitGone(pf pidFile, exe string, deadline time.Time) bool {
	for !exited(pf, exe) {
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(20 * time.Millisecond)
	}
	return true
}

// runningPID returns the recorded pid of the process called name if it is alive, not a
// zombie, and still the one this stack started (same executable and start time).
func (s *Stack) runningPID(name string) (int, bool) {
	pf, err := readPIDFile(s.pidPath(name))
	if err != nil || !liveProcess(pf, s.exePath(serviceOf(name))) {
		return 0, false
	}
	return pf.pid, true
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// privateDirs makes the data directory and its logs and run directories readable by this
// user only (0700), also where an earlier version made them 0755: logs hold what services
// say about their users, and nobody else on the host has business there.
func (s *Stack) privateDirs() error {
	for _, d := range []string{"", "logs", "run"} {
		p := filepath.Join(s.DataDir, d)
		if err := os.MkdirAll(p, 0o700); err != nil {
			return err
		}
		if err := os.Chmod(p, 0o700); err != nil {
			return err
		}
	}
	return nil
}

// openLog opens a log file for appending, readable by this user only (0600), also where an
// earlier version created it 0644.
func openLog(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}
