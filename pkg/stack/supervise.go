package stack

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/thefold/thefold/pkg/platform"
)

// Restart backoff: a service that keeps dying is started again after 1s, 2s, 4s … at most
// 30s apart; one that stayed up for a minute starts over at 1s.
const (
	minBackoff   = time.Second
	maxBackoff   = 30 * time.Second
	stableUptime = time.Minute
)

// SupervisorExe is the launcher binary in bin/ that runs `thefold supervise`.
const SupervisorExe = "thefold"

func (s *Stack) supervisorPIDPath() string { return filepath.Join(s.DataDir, "run", "supervisor.pid") }
func (s *Stack) configPath() string        { return filepath.Join(s.DataDir, "run", "stack.json") }

// SupervisorLogPath is where the supervisor logs the restarts and their reasons.
func (s *Stack) SupervisorLogPath() string { return s.LogPath("supervisor") }

// Save records the stack's configuration (ports, database, environment) in the data
// directory, for the supervisor and for later commands on the same stack. It can hold the
// database password, so only the owner reads it.
func (s *Stack) Save() error {
	if err := os.MkdirAll(filepath.Dir(s.configPath()), 0o755); err != nil {
		return err
	}
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(s.configPath(), b, 0o600)
}

// Load reads the configuration Save recorded in dataDir.
func Load(dataDir string) (*Stack, error) {
	s := &Stack{DataDir: dataDir}
	b, err := os.ReadFile(s.configPath())
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, fmt.Errorf("stack: %s: %w", s.configPath(), err)
	}
	s.DataDir = dataDir
	return s, nil
}

// SupervisorRunning reports whether this stack's supervisor process is alive.
func (s *Stack) SupervisorRunning() bool {
	pf, err := readPIDFile(s.supervisorPIDPath())
	return err == nil && liveProcess(pf, s.exePath(SupervisorExe))
}

// wakeSupervisor asks the supervisor to start whatever is down now, skipping its backoff.
func (s *Stack) wakeSupervisor() {
	if pf, err := readPIDFile(s.supervisorPIDPath()); err == nil {
		_ = signalOwn(pf, s.exePath(SupervisorExe), syscall.SIGHUP)
	}
}

func (s *Stack) stopSupervisor(deadline time.Time) error {
	return stopProcess(s.supervisorPIDPath(), s.exePath(SupervisorExe), deadline)
}

// StartSupervisor saves the configuration and starts `bin/thefold supervise` in its own
// session, so it outlives the command that started it; the supervisor starts every service
// that is not running and restarts any that dies. A supervisor already running is woken
// instead. Build first: the supervisor runs from bin/.
func (s *Stack) StartSupervisor() error {
	if s.SupervisorRunning() {
		s.wakeSupervisor()
		return nil
	}
	if err := s.Save(); err != nil {
		return err
	}
	if err := s.privateDirs(); err != nil {
		return err
	}
	logf, err := openLog(s.SupervisorLogPath())
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(s.exePath(SupervisorExe), "supervise", "-data-dir", s.DataDir)
	cmd.Env = os.Environ()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("stack: start supervisor: %w", err)
	}
	if err := writePIDFile(s.supervisorPIDPath(), cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return err
	}
	go func() { _ = cmd.Wait() }() // reap it if it ends while we still run (tests)
	return nil
}

// Supervise starts every service that is not running and restarts any that exits, with
// backoff, logging why it ended (exit status or signal, last log lines). A value on wake
// (SIGHUP) starts what is down at once. When ctx ends, Supervise returns and leaves the
// services running: `thefold down` stops the supervisor first, then them.
func (s *Stack) Supervise(ctx context.Context, log *slog.Logger, wake <-chan os.Signal) error {
	if err := s.privateDirs(); err != nil {
		return err
	}
	w := &waker{ch: make(chan struct{})}
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-wake:
				log.Info("woken: starting whatever is down")
				w.wake()
			}
		}
	}()
	instances := s.Instances()
	log.Info("supervising", "services", len(platform.ServiceNames), "processes", len(instances))
	var wg sync.WaitGroup
	for _, in := range instances {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.superviseOne(ctx, in.Name, log.With("svc", in.Name), w)
		}()
	}
	wg.Wait()
	log.Info("supervisor stopped; services left running")
	return nil
}

func (s *Stack) superviseOne(ctx context.Context, svc string, log *slog.Logger, w *waker) {
	backoff := minBackoff
	for {
		started := time.Now()
		why := s.runOnce(ctx, svc, log)
		if ctx.Err() != nil {
			return
		}
		if time.Since(started) >= stableUptime {
			backoff = minBackoff
		}
		log.Warn("service ended; restarting", "why", why, "restart_in", backoff.String(),
			"log", s.LogPath(svc), "last_lines", tail(s.LogPath(svc), 10))
		woken := w.wait()
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
			backoff = min(backoff*2, maxBackoff)
		case <-woken:
			backoff = minBackoff
		}
	}
}

// runOnce starts svc (or adopts it if it already runs) and returns when it has ended,
// saying why, or when ctx ends.
func (s *Stack) runOnce(ctx context.Context, svc string, log *slog.Logger) string {
	if pid, ok := s.runningPID(svc); ok {
		// Started before this supervisor (by an older one): not our child, so no exit
		// status; watch it through /proc.
		log.Info("adopted running service", "pid", pid)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return ""
			case <-tick.C:
			}
			if _, ok := s.runningPID(svc); !ok {
				return fmt.Sprintf("pid %d is gone (not started by this supervisor: exit status unknown)", pid)
			}
		}
	}
	cmd, err := s.startOne(svc)
	if err != nil {
		return err.Error()
	}
	log.Info("started", "pid", cmd.Process.Pid)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case <-ctx.Done():
		return ""
	case <-exited:
		_ = os.Remove(s.pidPath(svc))
		return cmd.ProcessState.String() // "exit status 1", "signal: killed"
	}
}

// waker broadcasts a wake-up to every service loop waiting out its backoff.
type waker struct {
	mu sync.Mutex
	ch chan struct{}
}

func (w *waker) wait() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ch
}

func (w *waker) wake() {
	w.mu.Lock()
	defer w.mu.Unlock()
	close(w.ch)
	w.ch = make(chan struct{})
}
