package kubetest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/thefold/thefold/services/sandbox/internal/backend/kube"
)

// DockerExecutor plays the pods of a Cluster as containers of the pod's image on the local
// docker engine (the docker CLI), made as the kubelet would make the pod: its command, its
// user, a read-only root, no capabilities, no new privileges, no network, /workspace and
// /tmp writable, its memory limit, and no init (the pod's keeper is PID 1). It checks what
// the fake cannot: that the backend's scripts work in the real image.
type DockerExecutor struct {
	Cluster *Cluster

	mu         sync.Mutex
	containers map[string]string // pod → container id
	calls      []Call
}

// NewDockerExecutor plays c's pods in containers, or skips t when there is no docker
// engine or no image; the containers go when t ends.
func NewDockerExecutor(t testing.TB, c *Cluster, image string) *DockerExecutor {
	t.Helper()
	if out, err := exec.Command("docker", "image", "inspect", "-f", "{{.Id}}", image).CombinedOutput(); err != nil {
		t.Skipf("no docker engine with the image %s here (%v: %s)", image, err, bytes.TrimSpace(out))
	}
	e := &DockerExecutor{Cluster: c, containers: map[string]string{}}
	t.Cleanup(func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		for _, id := range e.containers {
			_ = exec.Command("docker", "rm", "-f", id).Run()
		}
	})
	return e
}

// Calls are the execs asked for so far, in order.
func (e *DockerExecutor) Calls() []Call {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.calls)
}

// Container is the container playing pod ("" before its first exec).
func (e *DockerExecutor) Container(pod string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.containers[pod]
}

// Exec implements kube.Executor with `docker exec`. Cancelling ctx ends the docker CLI, not
// the process in the container, as with pods/exec.
func (e *DockerExecutor) Exec(ctx context.Context, namespace, pod, container string, argv []string, stdin io.Reader, stdout, stderr io.Writer) error {
	e.mu.Lock()
	e.calls = append(e.calls, Call{Pod: pod, Argv: slices.Clone(argv)})
	e.mu.Unlock()
	if err := checkPod(ctx, e.Cluster, namespace, pod, container); err != nil {
		return err
	}
	id, err := e.start(ctx, namespace, pod)
	if err != nil {
		return err
	}
	args := []string{"exec"}
	if stdin != nil {
		args = append(args, "-i")
	}
	cmd := exec.CommandContext(ctx, "docker", append(append(args, id), argv...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdin, stdout, stderr
	cmd.WaitDelay = 0
	err = cmd.Run()
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return exitError(err)
}

// start makes pod's container the first time.
func (e *DockerExecutor) start(ctx context.Context, namespace, pod string) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if id := e.containers[pod]; id != "" {
		return id, nil
	}
	p, err := e.Cluster.Core.Pods(namespace).Get(ctx, pod, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	c := p.Spec.Containers[0]
	user := fmt.Sprintf("%d:%d", *c.SecurityContext.RunAsUser, *c.SecurityContext.RunAsGroup)
	tmpfs := fmt.Sprintf("rw,exec,nosuid,nodev,size=256m,uid=%d,gid=%d", *c.SecurityContext.RunAsUser, *c.SecurityContext.RunAsGroup)
	args := []string{"run", "-d", "--network", "none", "--user", user, "--cap-drop", "ALL",
		"--security-opt", "no-new-privileges", "--tmpfs", kube.Workspace + ":" + tmpfs, "--tmpfs", "/tmp:" + tmpfs,
		"--workdir", c.WorkingDir, "--entrypoint", c.Command[0], "--label", "org.thefold.kubetest=1"}
	if *c.SecurityContext.ReadOnlyRootFilesystem {
		args = append(args, "--read-only")
	}
	if m, ok := c.Resources.Limits["memory"]; ok {
		args = append(args, "--memory", fmt.Sprint(m.Value()), "--memory-swap", fmt.Sprint(m.Value()))
	}
	args = append(append(args, c.Image), c.Command[1:]...)
	out, err := exec.CommandContext(ctx, "docker", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("kubetest: docker run for pod %s: %v: %s", pod, err, bytes.TrimSpace(out))
	}
	id := strings.TrimSpace(string(out))
	e.containers[pod] = id
	return id, nil
}
