package kube_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/services/sandbox/internal/backend"
	"github.com/thefold/thefold/services/sandbox/internal/backend/kube"
	"github.com/thefold/thefold/services/sandbox/internal/backend/kube/kubetest"
)

// fixture is a backend on a fake cluster whose pods the LocalExecutor plays.
type fixture struct {
	k    *kube.Kube
	c    *kubetest.Cluster
	exec *kubetest.LocalExecutor
	dir  string // the service's workspace root
}

func newFixture(t *testing.T, cfg kube.Config, objects ...runtime.Object) *fixture {
	t.Helper()
	c := kubetest.NewCluster(t, objects...)
	ex := kubetest.NewLocalExecutor(t, c)
	if cfg.Namespace == "" {
		cfg.Namespace = kubetest.Namespace
	}
	k, err := kube.New(t.Context(), c.Core, c.Net, ex, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = k.Close() })
	return &fixture{k: k, c: c, exec: ex, dir: t.TempDir()}
}

// workspace makes a host workspace under the fixture's dir with files (path → content).
func (f *fixture) workspace(t *testing.T, files map[string]string) string {
	t.Helper()
	ws, err := os.MkdirTemp(f.dir, "ws-")
	if err != nil {
		t.Fatal(err)
	}
	for p, content := range files {
		full := filepath.Join(ws, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return ws
}

// onlyPod is the one pod of the cluster.
func (f *fixture) onlyPod(t *testing.T) corev1.Pod {
	t.Helper()
	pods := f.c.Pods(t)
	if len(pods) != 1 {
		t.Fatalf("%d pods, want 1: %v", len(pods), names(pods))
	}
	return pods[0]
}

func names(pods []corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestPodHasEveryProtection(t *testing.T) {
	t.Parallel()
	f := newFixture(t, kube.Config{Image: "registry.example/thefold-sandbox:1", RuntimeClass: "gvisor", MaxLifetime: 3 * time.Hour,
		WorkspaceSize: 2 << 30, TmpSize: 512 << 20})
	ws := f.workspace(t, nil)
	who := backend.Identity{ID: "0b7e3c1a-5d2f-4e8b-9c1d-2a3b4c5d6e7f", Owner: "alice", Dir: f.dir}
	if err := f.k.Prepare(t.Context(), ws, who, "go", backend.Limits{MemoryBytes: 768 << 20, CPUs: 1.5}); err != nil {
		t.Fatal(err)
	}
	p := f.onlyPod(t)
	s := p.Spec
	check := func(what string, ok bool) {
		t.Helper()
		if !ok {
			t.Errorf("%s: not so in %s", what, p.Name)
		}
	}
	check("namespace", p.Namespace == kubetest.Namespace)
	check("name names the sandbox", strings.HasPrefix(p.Name, "thefold-sandbox-0b7e3c1a-"))
	check("no service account token", s.AutomountServiceAccountToken != nil && !*s.AutomountServiceAccountToken)
	check("no service links", s.EnableServiceLinks != nil && !*s.EnableServiceLinks)
	check("runtime class", s.RuntimeClassName != nil && *s.RuntimeClassName == "gvisor")
	check("restart never", s.RestartPolicy == corev1.RestartPolicyNever)
	check("deadline", s.ActiveDeadlineSeconds != nil && *s.ActiveDeadlineSeconds == 3*3600)
	check("no host namespaces", !s.HostNetwork && !s.HostPID && !s.HostIPC && (s.ShareProcessNamespace == nil || !*s.ShareProcessNamespace))
	psc := s.SecurityContext
	check("pod runs as non-root", psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot)
	check("pod uid/gid/fsGroup 65534", psc != nil && psc.RunAsUser != nil && *psc.RunAsUser == 65534 &&
		psc.RunAsGroup != nil && *psc.RunAsGroup == 65534 && psc.FSGroup != nil && *psc.FSGroup == 65534)
	check("pod seccomp RuntimeDefault", psc != nil && psc.SeccompProfile != nil && psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault)
	if len(s.Containers) != 1 || len(s.InitContainers) != 0 || len(s.EphemeralContainers) != 0 {
		t.Fatalf("containers %d, init %d, ephemeral %d: want one container", len(s.Containers), len(s.InitContainers), len(s.EphemeralContainers))
	}
	c := s.Containers[0]
	check("container name", c.Name == kube.Container)
	check("image", c.Image == "registry.example/thefold-sandbox:1")
	check("keeper command", slices.Equal(c.Command, []string{"/bin/sh", "-c", kube.Keeper}) && len(c.Args) == 0)
	check("no stdin, no tty", !c.Stdin && !c.TTY)
	check("no environment from the namespace", len(c.Env) == 0 && len(c.EnvFrom) == 0)
	check("no ports", len(c.Ports) == 0)
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("container has no securityContext")
	}
	check("container non-root", sc.RunAsNonRoot != nil && *sc.RunAsNonRoot && sc.RunAsUser != nil && *sc.RunAsUser == 65534)
	check("not privileged", sc.Privileged != nil && !*sc.Privileged)
	check("no privilege escalation", sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation)
	check("read-only root", sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem)
	check("drops ALL capabilities, adds none", sc.Capabilities != nil && slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) && len(sc.Capabilities.Add) == 0)
	check("container seccomp RuntimeDefault", sc.SeccompProfile != nil && sc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault)
	lim, req := c.Resources.Limits, c.Resources.Requests
	check("memory limit = request = the sandbox's", lim.Memory().Value() == 768<<20 && req.Memory().Value() == 768<<20)
	check("cpu limit = the sandbox's", lim.Cpu().MilliValue() == 1500)
	check("cpu request a quarter", req.Cpu().MilliValue() == 375)
	// Volumes: exactly two emptyDirs, size-limited, mounted at /workspace and /tmp.
	wantVol := map[string]int64{"workspace": 2 << 30, "tmp": 512 << 20}
	check("two volumes", len(s.Volumes) == 2)
	for _, v := range s.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil || v.EmptyDir.SizeLimit.Value() != wantVol[v.Name] {
			t.Errorf("volume %s: %+v, want an emptyDir of %d bytes", v.Name, v.VolumeSource, wantVol[v.Name])
		}
	}
	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		mounts[m.MountPath] = m.Name
		check("mount "+m.MountPath+" is writable and private", !m.ReadOnly && m.SubPath == "" && m.MountPropagation == nil)
	}
	check("mounts", len(mounts) == 2 && mounts["/workspace"] == "workspace" && mounts["/tmp"] == "tmp")
	check("works in /workspace", c.WorkingDir == "/workspace")
	// Labels: selected by the NetworkPolicy and the reaper, and whose it is.
	np := kube.NetworkPolicy(kubetest.Namespace, kube.DefaultNetworkPolicy)
	sel, _ := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	check("the NetworkPolicy selects it", sel.Matches(labels.Set(p.Labels)))
	check("labels", p.Labels[kube.LabelSandbox] == "true" && p.Labels[kube.LabelID] == who.ID && p.Labels[kube.LabelOwner] == "alice" &&
		p.Labels[kube.LabelInstance] != "" && p.Labels[kube.LabelWorkspace] != "")
	check("annotations", p.Annotations[kube.AnnotationID] == who.ID && p.Annotations[kube.AnnotationOwner] == "alice" &&
		p.Annotations[kube.AnnotationDir] == f.dir && p.Annotations[kube.AnnotationWorkspace] == ws)
	// The sandbox pods must not look like the services': NetworkPolicies of deploy/k8s
	// allow traffic from and to app.kubernetes.io/component=service.
	check("not a service's labels", p.Labels["app.kubernetes.io/component"] == "" && p.Labels["app.kubernetes.io/name"] == "")
}

func TestPodDefaultsAndOddOwners(t *testing.T) {
	t.Parallel()
	f := newFixture(t, kube.Config{})
	ws := f.workspace(t, nil)
	owner := "user@example.com/with spaces"
	if err := f.k.Prepare(t.Context(), ws, backend.Identity{ID: "Not_A/UUID!", Owner: owner, Dir: f.dir}, "", backend.Limits{}); err != nil {
		t.Fatal(err)
	}
	p := f.onlyPod(t)
	if p.Spec.RuntimeClassName != nil {
		t.Errorf("runtimeClassName %q without one configured", *p.Spec.RuntimeClassName)
	}
	if img := p.Spec.Containers[0].Image; img != kube.DefaultImage {
		t.Errorf("image %q, want %q", img, kube.DefaultImage)
	}
	lim := p.Spec.Containers[0].Resources.Limits
	if lim.Memory().Value() != backend.DefaultMemoryBytes || lim.Cpu().MilliValue() != 500 {
		t.Errorf("limits %v, want the defaults (%d bytes, 500m)", lim, backend.DefaultMemoryBytes)
	}
	if *p.Spec.ActiveDeadlineSeconds != int64(kube.DefaultMaxLifetime/time.Second) {
		t.Errorf("deadline %d", *p.Spec.ActiveDeadlineSeconds)
	}
	if got := p.Labels[kube.LabelOwner]; !strings.HasPrefix(got, "h-") || p.Annotations[kube.AnnotationOwner] != owner {
		t.Errorf("owner label %q (annotation %q): want a digest label and the owner in the annotation", got, p.Annotations[kube.AnnotationOwner])
	}
	if !strings.HasPrefix(p.Name, "thefold-sandbox-") || strings.ContainsAny(p.Name, "_/!") {
		t.Errorf("name %q", p.Name)
	}
}

func TestNetworkPolicyIsMadeAndDeniesAll(t *testing.T) {
	t.Parallel()
	f := newFixture(t, kube.Config{})
	np, err := f.c.Net.NetworkPolicies(kubetest.Namespace).Get(t.Context(), kube.DefaultNetworkPolicy, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the backend made no NetworkPolicy: %v", err)
	}
	types := np.Spec.PolicyTypes
	if !slices.Contains(types, networkingv1.PolicyTypeIngress) || !slices.Contains(types, networkingv1.PolicyTypeEgress) {
		t.Errorf("policyTypes %v: want Ingress and Egress", types)
	}
	if len(np.Spec.Ingress) != 0 || len(np.Spec.Egress) != 0 {
		t.Errorf("rules: ingress %v egress %v: a deny-all policy has none", np.Spec.Ingress, np.Spec.Egress)
	}
	// It selects the pods the backend makes, and nothing else of the namespace.
	ws := f.workspace(t, nil)
	if err := f.k.Prepare(t.Context(), ws, backend.Identity{ID: "a", Owner: "alice", Dir: f.dir}, "", backend.Limits{}); err != nil {
		t.Fatal(err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		t.Fatal(err)
	}
	if p := f.onlyPod(t); !sel.Matches(labels.Set(p.Labels)) {
		t.Errorf("selector %s does not select the sandbox pod (labels %v)", sel, p.Labels)
	}
	if sel.Empty() || sel.Matches(labels.Set{"app.kubernetes.io/name": "sandbox", "app.kubernetes.io/component": "service"}) {
		t.Errorf("selector %s selects the services' pods too", sel)
	}
}

func TestNetworkPolicyChecks(t *testing.T) {
	t.Parallel()
	deny := kube.NetworkPolicy(kubetest.Namespace, kube.DefaultNetworkPolicy)
	egressOpen := deny.DeepCopy()
	egressOpen.Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
	ingressOnly := deny.DeepCopy()
	ingressOnly.Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
	otherSelector := deny.DeepCopy()
	otherSelector.Spec.PodSelector = metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}
	allowAll := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-everything", Namespace: kubetest.Namespace},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}}
	servicesOnly := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "sandbox-service", Namespace: kubetest.Namespace},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": "sandbox"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}, Ingress: []networkingv1.NetworkPolicyIngressRule{{}}}}
	defaultDenyIngress := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default-deny-ingress", Namespace: kubetest.Namespace},
		Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}}}
	cases := []struct {
		name      string
		objects   []runtime.Object
		forbidden bool
		wantErr   string
	}{
		{name: "there and right", objects: []runtime.Object{deny, servicesOnly, defaultDenyIngress}},
		{name: "allows egress", objects: []runtime.Object{egressOpen}, wantErr: "has allow rules"},
		{name: "ingress only", objects: []runtime.Object{ingressOnly}, wantErr: "policyTypes"},
		{name: "selects other pods", objects: []runtime.Object{otherSelector}, wantErr: "does not select them"},
		{name: "another policy lets traffic in", objects: []runtime.Object{deny, allowAll}, wantErr: "allow-everything (ingress)"},
		{name: "missing, may not create", forbidden: true, wantErr: "apply deploy/k8s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := kubetest.NewCluster(t, tc.objects...)
			if tc.forbidden {
				c.Fake.PrependReactor("create", "networkpolicies", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "networking.k8s.io", Resource: "networkpolicies"}, "x", errors.New("RBAC"))
				})
			}
			k, err := kube.New(t.Context(), c.Core, c.Net, kubetest.NewLocalExecutor(t, c), kube.Config{Namespace: kubetest.Namespace})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				k.Close()
				return
			}
			if err == nil {
				k.Close()
				t.Fatalf("New accepted it, want an error containing %q", tc.wantErr)
			}
			if !errors.Is(err, errs.ErrFailedPrecondition) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("New: %v; want FailedPrecondition containing %q", err, tc.wantErr)
			}
		})
	}
}

func TestDestroyDeletesThePod(t *testing.T) {
	t.Parallel()
	f := newFixture(t, kube.Config{})
	ws, other := f.workspace(t, nil), f.workspace(t, nil)
	for i, w := range []string{ws, other} {
		if err := f.k.Prepare(t.Context(), w, backend.Identity{ID: []string{"a", "b"}[i], Owner: "alice", Dir: f.dir}, "", backend.Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.k.Destroy(t.Context(), ws); err != nil {
		t.Fatal(err)
	}
	pods := f.c.Pods(t)
	if len(pods) != 1 || pods[0].Annotations[kube.AnnotationWorkspace] != other {
		t.Fatalf("pods after Destroy: %v, want only the other workspace's", names(pods))
	}
	if err := f.k.Destroy(t.Context(), ws); err != nil {
		t.Errorf("second Destroy: %v", err)
	}
	// A later process of the service (a backend that never made the pod, and has not
	// reconciled yet) destroys it too: it finds the pod by its labels.
	later, err := kube.New(t.Context(), f.c.Core, f.c.Net, f.exec, kube.Config{Namespace: kubetest.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer later.Close()
	if err := later.Destroy(t.Context(), other); err != nil {
		t.Fatal(err)
	}
	if pods := f.c.Pods(t); len(pods) != 0 {
		t.Errorf("a later process's Destroy left %v", names(pods))
	}
}

func TestStartFailures(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		start func(*corev1.Pod)
		want  error
		text  string
	}{
		{name: "image cannot be pulled", start: func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: kube.Container, State: corev1.ContainerState{
				Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff", Message: "not found"}}}}
		}, want: errs.ErrFailedPrecondition, text: "ImagePullBackOff"},
		{name: "never scheduled", start: func(p *corev1.Pod) {
			p.Status.Phase = corev1.PodPending
			p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable", Message: "0/3 nodes"}}
		}, want: errs.ErrUnavailable, text: "Unschedulable"},
		{name: "ends at once", start: func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }, want: errs.ErrUnavailable, text: "ended"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t, kube.Config{StartTimeout: 600 * time.Millisecond})
			f.c.Start = tc.start
			ws := f.workspace(t, nil)
			err := f.k.Prepare(t.Context(), ws, backend.Identity{ID: "a", Owner: "alice", Dir: f.dir}, "", backend.Limits{})
			if !errors.Is(err, tc.want) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("Prepare: %v; want %v containing %q", err, tc.want, tc.text)
			}
			if pods := f.c.Pods(t); len(pods) != 0 {
				t.Errorf("the pod that did not start is still there: %v", names(pods))
			}
		})
	}
}

func TestReconcileDeletesWhatNoLiveSandboxUses(t *testing.T) {
	t.Parallel()
	f := newFixture(t, kube.Config{})
	expired, live, stopped := f.workspace(t, nil), f.workspace(t, nil), f.workspace(t, nil)
	for id, w := range map[string]string{"expired": expired, "live": live, "stopped": stopped} {
		if err := f.k.Prepare(t.Context(), w, backend.Identity{ID: id, Owner: "alice", Dir: f.dir}, "", backend.Limits{}); err != nil {
			t.Fatal(err)
		}
	}
	// Another installation's pod in the same namespace, and a pod of another owner's tool.
	otherDir := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "other-install", Namespace: kubetest.Namespace,
		Labels:      map[string]string{kube.LabelSandbox: "true", kube.LabelInstance: "0123456789abcdef", kube.LabelID: "expired"},
		Annotations: map[string]string{kube.AnnotationID: "expired", kube.AnnotationDir: "/elsewhere"}}}
	unrelated := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "unrelated", Namespace: kubetest.Namespace}}
	for _, p := range []*corev1.Pod{otherDir, unrelated} {
		if err := f.c.Tracker.Add(p); err != nil {
			t.Fatal(err)
		}
	}
	podOf := func(ws string) string {
		for _, p := range f.c.Pods(t) {
			if p.Annotations[kube.AnnotationWorkspace] == ws {
				return p.Name
			}
		}
		return ""
	}
	stoppedPod := podOf(stopped)
	f.c.SetPhase(t, stoppedPod, corev1.PodFailed) // its activeDeadlineSeconds passed
	var asked []string
	n, err := f.k.Reconcile(t.Context(), f.dir, func(_ context.Context, ids []string) (map[string]bool, error) {
		asked = ids
		return map[string]bool{"live": true, "stopped": true}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(asked)
	if !slices.Equal(asked, []string{"expired", "live", "stopped"}) {
		t.Errorf("asked about %v", asked)
	}
	if n != 2 {
		t.Errorf("deleted %d pods, want 2 (the expired sandbox's and the stopped one)", n)
	}
	var left []string
	for _, p := range f.c.Pods(t) {
		left = append(left, p.Name)
	}
	slices.Sort(left)
	want := []string{podOf(live), "other-install", "unrelated"}
	slices.Sort(want)
	if !slices.Equal(left, want) {
		t.Errorf("pods left %v, want %v", left, want)
	}
	// The stopped sandbox's next command gets a new pod.
	res, err := f.k.Run(t.Context(), stopped, backend.Spec{Argv: []string{"true"}}, backend.Limits{})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Run after its pod stopped: %v %+v", err, res)
	}
	if p := podOf(stopped); p == "" || p == stoppedPod {
		t.Errorf("the stopped sandbox's pod is %q (was %q): want a new one", p, stoppedPod)
	}
}

func TestReconcileRemovesAKilledProcessesPods(t *testing.T) {
	t.Parallel()
	f := newFixture(t, kube.Config{})
	ws := f.workspace(t, map[string]string{"a.txt": "a"})
	if err := f.k.Prepare(t.Context(), ws, backend.Identity{ID: "s1", Owner: "alice", Dir: f.dir}, "", backend.Limits{}); err != nil {
		t.Fatal(err)
	}
	old := f.onlyPod(t).Name
	// The service restarts: a new backend finds the pod of a live sandbox it did not make.
	later, err := kube.New(t.Context(), f.c.Core, f.c.Net, f.exec, kube.Config{Namespace: kubetest.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer later.Close()
	n, err := later.Reconcile(t.Context(), f.dir, func(context.Context, []string) (map[string]bool, error) {
		return map[string]bool{"s1": true}, nil
	})
	if err != nil || n != 1 {
		t.Fatalf("Reconcile: %d, %v; want the earlier process's pod deleted", n, err)
	}
	res, err := later.Run(t.Context(), ws, backend.Spec{Argv: []string{"cat", "a.txt"}}, backend.Limits{})
	if err != nil || string(res.Stdout) != "a" {
		t.Fatalf("Run: %v %+v", err, res)
	}
	p := f.onlyPod(t)
	if p.Name == old || p.Annotations[kube.AnnotationID] != "s1" || p.Annotations[kube.AnnotationOwner] != "alice" {
		t.Errorf("new pod %s %v: want a new pod carrying the sandbox's identity", p.Name, p.Annotations)
	}
}
