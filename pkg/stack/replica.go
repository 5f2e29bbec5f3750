package stack

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"

	"github.com/thefold/thefold/pkg/platform"
)

// Replica is one more process of a service beside the stack's own: the same binary,
// database role, identity and peers, with ports, a log and an instance id of its own. The
// services that share their work through PostgreSQL (the agent's and the builder's durable
// queues) spread it over their replicas; nothing routes calls to a replica's own ports.
type Replica struct {
	// Name is the replica's instance id (THEFOLD_<SERVICE>_INSTANCE_ID), e.g. "agent-2".
	Name             string
	GRPCPort, Admin  int
	svc              string
	s                *Stack
	cmd              *exec.Cmd
	done             chan struct{}
	logPath, pidPath string
}

// StartReplica starts another process of svc named name (a replica's instance id, unique in
// the stack) and waits until it is ready.
func (s *Stack) StartReplica(ctx context.Context, svc, name string, timeout time.Duration) (*Replica, error) {
	grpcPort, err := reservePort()
	if err != nil {
		return nil, err
	}
	admin, err := reservePort()
	if err != nil {
		return nil, err
	}
	r := &Replica{Name: name, GRPCPort: grpcPort, Admin: admin, svc: svc, s: s, done: make(chan struct{}),
		logPath: s.LogPath(name), pidPath: s.pidPath(name)}
	logf, err := openLog(r.logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	dbURL, err := s.ServiceDatabaseURL(ctx, svc)
	if err != nil {
		return nil, fmt.Errorf("stack: replica %s: %w", name, err)
	}
	cmd := exec.Command(s.exePath(svc))
	// (exec keeps the last of duplicate keys: the replica's own addresses win.)
	// (The service's THEFOLD_<SERVICE>_INSTANCE_ID names it where it records who did what.)
	cmd.Env = append(s.env(s.InstancesOf(svc)[0]), "THEFOLD_DATABASE_URL="+dbURL, strings.TrimSuffix(platform.AddrEnv(svc), "ADDR")+"INSTANCE_ID="+name,
		fmt.Sprintf("THEFOLD_GRPC_ADDR=127.0.0.1:%d", grpcPort), fmt.Sprintf("THEFOLD_ADMIN_ADDR=127.0.0.1:%d", admin))
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("stack: replica %s: %w", name, err)
	}
	r.cmd = cmd
	go func() { _ = cmd.Wait(); close(r.done) }()
	if err := writePIDFile(r.pidPath, cmd.Process.Pid); err != nil {
		_ = r.Kill()
		return nil, err
	}
	if err := r.waitReady(ctx, timeout); err != nil {
		_ = r.Kill()
		return nil, err
	}
	return r, nil
}

// waitReady polls the replica's /readyz until it answers 200.
func (r *Replica) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: time.Second}
	for {
		select {
		case <-r.done:
			return fmt.Errorf("stack: replica %s exited; see %s:\n%s", r.Name, r.logPath, tail(r.logPath, 15))
		default:
		}
		resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", r.Admin))
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("stack: replica %s not ready after %s; see %s:\n%s", r.Name, timeout, r.logPath, tail(r.logPath, 10))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Kill sends the replica SIGKILL — a crash: nothing it was doing is finished or handed
// over — and waits until it is gone.
func (r *Replica) Kill() error { return r.signal(syscall.SIGKILL, 10*time.Second) }

// Stop ends the replica gracefully (SIGTERM; SIGKILL after timeout).
func (r *Replica) Stop(timeout time.Duration) error {
	if err := r.signal(syscall.SIGTERM, timeout); err == nil {
		return nil
	}
	return r.Kill()
}

func (r *Replica) signal(sig syscall.Signal, wait time.Duration) error {
	defer os.Remove(r.pidPath)
	select {
	case <-r.done:
		return nil
	default:
	}
	if err := r.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stack: replica %s: %w", r.Name, err)
	}
	select {
	case <-r.done:
		return nil
	case <-time.After(wait):
		return fmt.Errorf("stack: replica %s still running %s after %v", r.Name, wait, sig)
	}
}

// LogPath is the replica's log.
func (r *Replica) LogPath() string { return r.logPath }
