package kubetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilexec "k8s.io/client-go/util/exec"

	"github.com/thefold/thefold/services/sandbox/internal/backend/kube"
)

// LocalExecutor plays the pods of a Cluster on this host, for tests: each pod's /workspace
// is a directory of its own under Root, the argv runs here with every kube.Workspace in it
// replaced by that directory (tar, sh and timeout are this host's), in a process group of its
// own. Like pods/exec, cancelling an exec's context stops its streams but not its process;
// kube.KillArgv kills what the pod's execs started (their process groups) instead of
// running: `kill -9 -1` here would end every process of the test's user. Any other argv
// that mentions kill is refused, so that a script that would kill on this host fails the
// test instead.
type LocalExecutor struct {
	Cluster *Cluster
	Root    string

	mu    sync.Mutex
	procs map[string]map[*os.Process]bool // by pod
	calls []Call
}

// Call is one exec an Executor was asked for.
type Call struct {
	Pod  string
	Argv []string
}

// NewLocalExecutor plays c's pods under a temporary directory of t, and kills what is left
// running when t ends.
func NewLocalExecutor(t testing.TB, c *Cluster) *LocalExecutor {
	e := &LocalExecutor{Cluster: c, Root: t.TempDir(), procs: map[string]map[*os.Process]bool{}}
	t.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, ps := range e.procs {
			for p := range ps {
				_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
			}
		}
	})
	return e
}

// Workspace is the directory standing for the pod's /workspace.
func (e *LocalExecutor) Workspace(pod string) string { return filepath.Join(e.Root, pod, "workspace") }

// Calls are the execs asked for so far, in order.
func (e *LocalExecutor) Calls() []Call {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.calls)
}

// Kills counts the execs of kube.KillArgv in pod.
func (e *LocalExecutor) Kills(pod string) int {
	n := 0
	for _, c := range e.Calls() {
		if c.Pod == pod && slices.Equal(c.Argv, kube.KillArgv) {
			n++
		}
	}
	return n
}

// Running counts the processes groups of pod's execs that have not ended.
func (e *LocalExecutor) Running(pod string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.procs[pod])
}

// Exec implements kube.Executor.
func (e *LocalExecutor) Exec(ctx context.Context, namespace, pod, container string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	e.mu.Lock()
	e.calls = append(e.calls, Call{Pod: pod, Argv: slices.Clone(argv)})
	e.mu.Unlock()
	if err := checkPod(ctx, e.Cluster, namespace, pod, container); err != nil {
		return err
	}
	if slices.Equal(argv, kube.KillArgv) {
		e.mu.Lock()
		for p := range e.procs[pod] {
			_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
		}
		e.mu.Unlock()
		return nil
	}
	for _, a := range argv {
		if strings.Contains(a, "kill") {
			return fmt.Errorf("kubetest: refusing to run %q on this host: it would kill here, not in a pod", argv)
		}
	}
	ws := e.Workspace(pod)
	if err := os.MkdirAll(ws, 0o755); err != nil {
		return err
	}
	local := make([]string, len(argv))
	for i, a := range argv {
		local[i] = strings.ReplaceAll(a, kube.Workspace, ws)
	}
	cmd := exec.Command(local[0], local[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	e.mu.Lock()
	if e.procs[pod] == nil {
		e.procs[pod] = map[*os.Process]bool{}
	}
	e.procs[pod][cmd.Process] = true
	e.mu.Unlock()
	done := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		e.mu.Lock()
		delete(e.procs[pod], cmd.Process)
		e.mu.Unlock()
		done <- err
	}()
	select {
	case err := <-done:
		return exitError(err)
	case <-ctx.Done():
		return ctx.Err() // the process goes on, as in a pod
	}
}

// checkPod fails an exec into a pod that is not there or does not run, as the API server
// and the kubelet do.
func checkPod(ctx context.Context, c *Cluster, namespace, pod, container string) error {
	if container != kube.Container {
		return fmt.Errorf("kubetest: container %q: the sandbox pod has only %q", container, kube.Container)
	}
	p, err := c.Core.Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if p.Status.Phase != "Running" {
		return fmt.Errorf("kubetest: pod %s is %s: cannot exec into a container that is not running", pod, p.Status.Phase)
	}
	return nil
}

// exitError turns a process's end into what remotecommand reports: nil for exit 0, an
// exit error with the code (128+n for a signal n) otherwise.
func exitError(err error) error {
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		return err
	}
	code := ee.ExitCode()
	if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		code = 128 + int(ws.Signal())
	}
	return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with non-zero exit code: %w", err), Code: code}
}
