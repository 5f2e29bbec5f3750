// Package kube is the sandbox backend that confines commands in a Kubernetes pod: one pod per
// sandbox workspace (made by Prepare, or by the first command), with no service account
// token, no service links, a deny-all NetworkPolicy (ingress and egress), a read-only root,
// emptyDir volumes for /workspace and /tmp, memory and CPU limits, every capability dropped,
// no privilege escalation, the RuntimeDefault seccomp profile, a non-root user and, when
// configured, a RuntimeClass (gVisor, Kata). As with the docker backend the host workspace
// is the source of truth: each command copies it into the pod (tar through pods/exec), runs
// there (pods/exec, output streamed) and copies /workspace back. Nothing is mounted from the
// service's host, so the service may run anywhere that reaches the API server.
//
// The cluster is reached through two small typed clients (core/v1 for pods, networking/v1
// for the policy) and an Executor for pods/exec, so the tests run against client-go's fake
// clients and an exec stub; only a real cluster runs a pod.
package kube

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	networkingv1client "k8s.io/client-go/kubernetes/typed/networking/v1"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/services/sandbox/internal/backend"
)

// Defaults of Config.
const (
	DefaultImage         = "thefold-sandbox:local"
	DefaultStartTimeout  = 2 * time.Minute
	DefaultMaxLifetime   = 24 * time.Hour
	DefaultWorkspaceSize = 1 << 30
	DefaultTmpSize       = 1 << 30
	DefaultCPUs          = 0.5
	// DefaultNetworkPolicy names the deny-all NetworkPolicy of the sandbox pods.
	DefaultNetworkPolicy = "thefold-sandbox-deny-all"
)

// ServiceAccountNamespace is where a pod finds its own namespace: the namespace of the
// sandbox pods when Config.Namespace is empty.
const ServiceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// Config is what New needs besides the clients. Zero fields take the defaults.
type Config struct {
	// Namespace holds the sandbox pods; empty: the namespace of the pod the service runs in.
	Namespace string
	// Image is the sandbox image (every language's toolchain, `make images` builds it). It
	// must have /bin/sh, tar, kill, timeout and env.
	Image string
	// RuntimeClass, when set, is the pods' runtimeClassName (gVisor's "gvisor", Kata's).
	RuntimeClass string
	// StartTimeout bounds the wait for a new pod to run (scheduling, image pull).
	StartTimeout time.Duration
	// MaxLifetime is the pods' activeDeadlineSeconds: the cluster ends a pod that lives
	// longer even when the service is gone. A sandbox that outlives it (pinned) gets a new
	// pod at its next command; its workspace lives on the service's host.
	MaxLifetime time.Duration
	// WorkspaceSize and TmpSize bound the emptyDir volumes of /workspace and /tmp.
	WorkspaceSize, TmpSize int64
	// CPUs is a pod's CPU limit when the sandbox's Limits name none.
	CPUs float64
	// NetworkPolicy names the deny-all policy New checks (and makes when it is missing and
	// the service may).
	NetworkPolicy string
	Logger        *slog.Logger
}

func (c Config) withDefaults() (Config, error) {
	if c.Namespace == "" {
		b, err := os.ReadFile(ServiceAccountNamespace)
		if err != nil || strings.TrimSpace(string(b)) == "" {
			return c, fmt.Errorf("no namespace for the sandbox pods: THEFOLD_SANDBOX_KUBE_NAMESPACE is not set and this process does not run in a pod (%s: %v): %w", ServiceAccountNamespace, err, errs.ErrFailedPrecondition)
		}
		c.Namespace = strings.TrimSpace(string(b))
	}
	if c.Image == "" {
		c.Image = DefaultImage
	}
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.MaxLifetime <= 0 {
		c.MaxLifetime = DefaultMaxLifetime
	}
	if c.WorkspaceSize <= 0 {
		c.WorkspaceSize = DefaultWorkspaceSize
	}
	if c.TmpSize <= 0 {
		c.TmpSize = DefaultTmpSize
	}
	if c.CPUs <= 0 {
		c.CPUs = DefaultCPUs
	}
	if c.NetworkPolicy == "" {
		c.NetworkPolicy = DefaultNetworkPolicy
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}

// Kube runs commands in one pod per workspace. Commands in the same workspace run one at a
// time (the workspace is synchronised around each); different workspaces run in parallel.
type Kube struct {
	cfg  Config
	pods corev1client.PodInterface
	net  networkingv1client.NetworkPolicyInterface
	exec Executor

	mu     sync.Mutex
	boxes  map[string]*box // by the workspace's absolute path
	dir    string          // the dir of the last Reconcile (see docker.Docker's)
	closed bool
}

// box is one workspace's pod. mu serialises the commands of the workspace.
type box struct {
	mu  sync.Mutex
	ws  string
	who backend.Identity
	// pod is the name of the workspace's pod, "" before it has one.
	pod      string
	limits   backend.Limits
	oomKills int64
}

var _ backend.Backend = (*Kube)(nil)

// New is the backend over the given clients of cfg.Namespace (core/v1 and networking/v1
// clients of any namespace: New scopes them) and pods/exec. It checks that the sandbox
// pods' deny-all NetworkPolicy is there and denies everything, and makes it when it is
// missing and the service may; an API server that does not answer is an error.
func New(ctx context.Context, core corev1client.CoreV1Interface, netv1 networkingv1client.NetworkingV1Interface, ex Executor, cfg Config) (*Kube, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	k := &Kube{cfg: cfg, pods: core.Pods(cfg.Namespace), net: netv1.NetworkPolicies(cfg.Namespace), exec: ex, boxes: map[string]*box{}}
	cctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := k.ensureNetworkPolicy(cctx); err != nil {
		return nil, err
	}
	return k, nil
}

// Name is "kubernetes".
func (k *Kube) Name() string { return "kubernetes" }

// Namespace is where the sandbox pods are.
func (k *Kube) Namespace() string { return k.cfg.Namespace }

// Image is the sandbox pods' image.
func (k *Kube) Image() string { return k.cfg.Image }

// Prepare makes the pod of workspace, labelled with who, and waits for it to run, so that
// the first command does not. A workspace that has a running pod keeps it. The pod has one
// image whatever the language (it has every toolchain).
func (k *Kube) Prepare(ctx context.Context, workspace string, who backend.Identity, _ string, l backend.Limits) error {
	ws, err := backend.Workspace(workspace)
	if err != nil {
		return err
	}
	b, err := k.box(ws)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if who != (backend.Identity{}) {
		who.Dir = backend.CleanDir(who.Dir)
		b.who = who
	}
	return k.ensure(ctx, b, l.WithDefaults())
}

// Identify records whose workspace is when the backend does not know yet (the service
// restarted since Prepare): the pod its next command makes carries who.
func (k *Kube) Identify(workspace string, who backend.Identity) {
	ws, err := backend.Workspace(workspace)
	if err != nil || who == (backend.Identity{}) {
		return
	}
	b, err := k.box(ws)
	if err != nil || !b.mu.TryLock() {
		return // busy: a command or Prepare holds it, which knows
	}
	if b.who == (backend.Identity{}) {
		who.Dir = backend.CleanDir(who.Dir)
		b.who = who
	}
	b.mu.Unlock()
}

// Destroy deletes the pods of workspace: the one this process made and any an earlier
// process of the service left (found by their labels). The host workspace is left alone; a
// workspace without a pod is not an error.
func (k *Kube) Destroy(ctx context.Context, workspace string) error {
	ws, err := backend.Workspace(workspace)
	if err != nil {
		return err
	}
	k.mu.Lock()
	b := k.boxes[ws]
	delete(k.boxes, ws)
	k.mu.Unlock()
	if b != nil {
		b.mu.Lock()
		defer b.mu.Unlock()
		if err := k.deletePod(ctx, b.pod); err != nil {
			return err
		}
		b.pod = ""
	}
	return k.deleteWorkspacePods(ctx, ws)
}

// Close deletes every pod the backend made. The clients need no closing.
func (k *Kube) Close() error {
	k.mu.Lock()
	boxes := k.boxes
	k.boxes, k.closed = map[string]*box{}, true
	k.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var firstErr error
	for _, b := range boxes {
		b.mu.Lock()
		if err := k.deletePod(ctx, b.pod); err != nil && firstErr == nil {
			firstErr = err
		}
		b.pod = ""
		b.mu.Unlock()
	}
	return firstErr
}

func (k *Kube) box(ws string) (*box, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.closed {
		return nil, fmt.Errorf("kubernetes backend is closed: %w", errs.ErrFailedPrecondition)
	}
	b := k.boxes[ws]
	if b == nil {
		b = &box{ws: ws}
		k.boxes[ws] = b
	}
	return b, nil
}

// digest is a short, label-safe digest of s (a path, an id that is not a label value).
func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:8])
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
