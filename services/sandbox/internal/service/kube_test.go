package service_test

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/config"
	"github.com/thefold/thefold/pkg/db/dbtest"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/sandbox/internal/backend/kube"
	"github.com/thefold/thefold/services/sandbox/internal/backend/kube/kubetest"
	"github.com/thefold/thefold/services/sandbox/internal/service"
	"github.com/thefold/thefold/services/sandbox/internal/store"
	"github.com/thefold/thefold/services/sandbox/migrations"
)

const kubeKind = sandboxv1.SandboxBackend_SANDBOX_BACKEND_KUBERNETES

// kubeEnv is a server whose only backend is kubernetes, on client-go's fake clients with the
// pods played on this host (kubetest.LocalExecutor: the service, the store and the backend
// are real; the cluster is the fake).
type kubeEnv struct {
	*env
	cluster *kubetest.Cluster
	exec    *kubetest.LocalExecutor
}

func startKube(t *testing.T, cfg service.Config) *kubeEnv {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "sandbox", migrations.FS)
	cfg.Dir = t.TempDir()
	cfg.Offer, cfg.Backend = []string{"kubernetes"}, "kubernetes"
	quiet := slog.New(slog.DiscardHandler)
	c := kubetest.NewCluster(t)
	ex := kubetest.NewLocalExecutor(t, c)
	k, err := kube.New(t.Context(), c.Core, c.Net, ex, kube.Config{Namespace: kubetest.Namespace, Image: cfg.KubeImage})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Close() })
	srv, err := service.New(cfg, store.New(pool), service.WithBackend(kubeKind, k), service.WithLogger(quiet))
	if err != nil {
		t.Fatal(err)
	}
	e := grpctest.Start(t, func(s *grpc.Server) { sandboxv1.RegisterSandboxServiceServer(s, srv) })
	return &kubeEnv{env: &env{srv: srv, client: sandboxv1.NewSandboxServiceClient(e.Conn), alice: e.Context(t, "alice"),
		bob: e.Context(t, "bob"), anon: t.Context(), kind: kubeKind}, cluster: c, exec: ex}
}

// podsOf lists the pods of the sandbox id.
func (e *kubeEnv) podsOf(t *testing.T, id string) []string {
	t.Helper()
	var out []string
	for _, p := range e.cluster.Pods(t) {
		if p.Labels[kube.LabelID] == id {
			out = append(out, p.Name)
		}
	}
	return out
}

func TestKubernetesSandboxEndToEnd(t *testing.T) {
	t.Parallel()
	e := startKube(t, service.Config{KubeImage: "registry.example/sandbox:7", GoProxy: "https://proxy.golang.org"})
	sb := e.create(t, &sandboxv1.CreateSandboxRequest{Language: "go"})
	if sb.Backend != kubeKind || sb.Image != "registry.example/sandbox:7" {
		t.Fatalf("sandbox backend %v image %q: want kubernetes and the configured image", sb.Backend, sb.Image)
	}
	pods := e.podsOf(t, sb.Id)
	if len(pods) != 1 {
		t.Fatalf("pods of the sandbox: %v, want the one CreateSandbox made", pods)
	}
	for _, p := range e.cluster.Pods(t) {
		if p.Labels[kube.LabelOwner] != "alice" || p.Spec.Containers[0].Image != "registry.example/sandbox:7" {
			t.Errorf("pod %s: owner %q image %q", p.Name, p.Labels[kube.LabelOwner], p.Spec.Containers[0].Image)
		}
		if lim := p.Spec.Containers[0].Resources.Limits; lim.Memory().Value() != sb.Limits.MemoryBytes {
			t.Errorf("pod memory limit %v, sandbox's %d", lim.Memory(), sb.Limits.MemoryBytes)
		}
	}
	// A file written through the API reaches the pod; what a command makes comes back.
	e.write(t, sb.Id, "pkg/a.txt", "alpha")
	r, err := e.run(t, sb.Id, "cp", "pkg/a.txt", "pkg/b.txt")
	if err != nil || r.res.ExitCode != 0 {
		t.Fatalf("cp: %v %+v %q", err, r.res, r.stderr)
	}
	if got := e.read(t, sb.Id, "pkg/b.txt"); got != "alpha" {
		t.Errorf("b.txt %q", got)
	}
	r, err = e.runReq(t, &sandboxv1.RunCommandRequest{SandboxId: sb.Id, Command: []string{"cat", "a.txt"}, Workdir: "pkg"})
	if err != nil || r.stdout != "alpha" || r.res.ExitCode != 0 {
		t.Fatalf("cat in pkg: %v %q %+v", err, r.stdout, r.res)
	}
	r, err = e.run(t, sb.Id, "false")
	if err != nil || r.res.ExitCode != 1 {
		t.Fatalf("false: %v %+v", err, r.res)
	}
	r, err = e.runReq(t, &sandboxv1.RunCommandRequest{SandboxId: sb.Id, Command: []string{"tail", "-f", "pkg/a.txt"}, Timeout: durationpb.New(time.Second)})
	if err != nil || !r.res.TimedOut {
		t.Fatalf("a command past its timeout: %v %+v", err, r.res)
	}
	// The pod has no network: an install is refused, not run with one.
	_, err = e.runReq(t, &sandboxv1.RunCommandRequest{SandboxId: sb.Id, Command: []string{"go", "mod", "download"},
		Network: sandboxv1.NetworkPolicy_NETWORK_POLICY_PACKAGES})
	wantCode(t, err, codes.FailedPrecondition, "kubernetes", "no egress proxy")
	if _, err := e.client.DestroySandbox(e.alice, &sandboxv1.DestroySandboxRequest{Id: sb.Id}); err != nil {
		t.Fatal(err)
	}
	if pods := e.podsOf(t, sb.Id); len(pods) != 0 {
		t.Errorf("pods after DestroySandbox: %v", pods)
	}
}

func TestKubernetesImageIsNotTheCallers(t *testing.T) {
	t.Parallel()
	e := startKube(t, service.Config{})
	_, err := e.client.CreateSandbox(e.alice, &sandboxv1.CreateSandboxRequest{Backend: kubeKind, Image: "evil/image:latest"})
	wantCode(t, err, codes.InvalidArgument, "image")
	sb := e.create(t, &sandboxv1.CreateSandboxRequest{})
	if sb.Image != kube.DefaultImage {
		t.Errorf("image %q, want the default %q", sb.Image, kube.DefaultImage)
	}
}

func TestKubernetesReaperDeletesExpiredPods(t *testing.T) {
	t.Parallel()
	e := startKube(t, service.Config{})
	live := e.create(t, &sandboxv1.CreateSandboxRequest{})
	expiring := e.create(t, &sandboxv1.CreateSandboxRequest{Ttl: durationpb.New(time.Second)})
	if len(e.podsOf(t, live.Id)) != 1 || len(e.podsOf(t, expiring.Id)) != 1 {
		t.Fatalf("pods: %v", e.cluster.Pods(t))
	}
	deadline := time.Now().Add(20 * time.Second)
	for len(e.podsOf(t, expiring.Id)) > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the expired sandbox's pod is still there")
		}
		if _, err := e.srv.Reap(t.Context()); err != nil {
			t.Fatal(err)
		}
		if len(e.podsOf(t, expiring.Id)) > 0 {
			time.Sleep(200 * time.Millisecond) // the ttl is wall time; nothing to wait on
		}
	}
	if len(e.podsOf(t, live.Id)) != 1 {
		t.Errorf("the live sandbox lost its pod: %v", e.cluster.Pods(t))
	}
	got, err := e.client.GetSandbox(e.alice, &sandboxv1.GetSandboxRequest{Id: expiring.Id})
	if err != nil || got.Sandbox.Status != sandboxv1.SandboxStatus_SANDBOX_STATUS_DESTROYED {
		t.Errorf("expired sandbox: %v %v", got.GetSandbox().GetStatus(), err)
	}
	// A pod no live sandbox uses (a killed process's, for a sandbox since destroyed) goes
	// at the next round too.
	if _, err := e.client.DestroySandbox(e.alice, &sandboxv1.DestroySandboxRequest{Id: live.Id}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.srv.Reap(t.Context()); err != nil {
		t.Fatal(err)
	}
	if pods := e.cluster.Pods(t); len(pods) != 0 {
		t.Errorf("pods left: %v", pods)
	}
}

func TestOpenBackendsKubernetesMustWork(t *testing.T) {
	// Not parallel: it changes the environment (no in-cluster configuration here).
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	quiet := slog.New(slog.DiscardHandler)
	cases := []struct {
		name string
		cfg  service.Config
		want []string
	}{
		{name: "auto, not in a cluster", cfg: service.Config{Backend: "auto", Offer: []string{"kubernetes"}},
			want: []string{"THEFOLD_SANDBOX_BACKENDS", "kubernetes", "THEFOLD_SANDBOX_KUBECONFIG"}},
		{name: "kubernetes beside bwrap: no fallback", cfg: service.Config{Backend: "auto", Offer: []string{"kubernetes", "bwrap"}},
			want: []string{"THEFOLD_SANDBOX_BACKENDS", "kubernetes"}},
		{name: "missing kubeconfig", cfg: service.Config{Backend: "kubernetes", Offer: []string{"kubernetes"}, Kubeconfig: "/nonexistent/kubeconfig"},
			want: []string{"THEFOLD_SANDBOX_KUBECONFIG", "/nonexistent/kubeconfig"}},
	}
	for _, tc := range cases {
		tc.cfg.Dir = t.TempDir()
		bs, err := service.OpenBackends(t.Context(), tc.cfg, quiet)
		if err == nil {
			bs.Close()
			t.Errorf("%s: the service would start", tc.name)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%s: %v; want it to name %q", tc.name, err, w)
			}
		}
	}
}

func TestConfigKubernetes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		env  map[string]string
		want string // "" for valid
	}{
		{env: map[string]string{"THEFOLD_SANDBOX_BACKEND": "kubernetes", "THEFOLD_SANDBOX_BACKENDS": "kubernetes"}},
		{env: map[string]string{"THEFOLD_SANDBOX_BACKENDS": "kubernetes,docker", "THEFOLD_SANDBOX_KUBE_NAMESPACE": "sandboxes",
			"THEFOLD_SANDBOX_KUBE_RUNTIME_CLASS": "gvisor", "THEFOLD_SANDBOX_KUBE_START_TIMEOUT": "5m"}},
		{env: map[string]string{"THEFOLD_SANDBOX_BACKEND": "kubernetes"}, want: "THEFOLD_SANDBOX_BACKEND: kubernetes is not in THEFOLD_SANDBOX_BACKENDS"},
		{env: map[string]string{"THEFOLD_SANDBOX_BACKEND": "k8s", "THEFOLD_SANDBOX_BACKENDS": "kubernetes"}, want: "want auto, kubernetes, docker, bwrap or local"},
		{env: map[string]string{"THEFOLD_SANDBOX_BACKENDS": "pods"}, want: "want kubernetes, docker and/or bwrap"},
		{env: map[string]string{"THEFOLD_SANDBOX_BACKENDS": "kubernetes", "THEFOLD_SANDBOX_KUBE_START_TIMEOUT": "0s"}, want: "THEFOLD_SANDBOX_KUBE_START_TIMEOUT"},
	}
	for _, tc := range cases {
		var cfg service.Config
		err := config.Load(t.Context(), &cfg, config.Map(tc.env, nil))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%v: %v", tc.env, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%v: %v, want %q", tc.env, err, tc.want)
		}
		if tc.want == "" && (cfg.KubeImage != kube.DefaultImage || cfg.KubeStartTimeout <= 0) {
			t.Errorf("%v: image %q, start timeout %s: want the defaults", tc.env, cfg.KubeImage, cfg.KubeStartTimeout)
		}
	}
}
