// Package kubetest stands in for a Kubernetes cluster in the kubernetes sandbox backend's
// tests, and only there: client-go's fake core/v1 and networking/v1 clients over one object
// tracker (pods run as soon as they are made: the fake has no kubelet), and Executors that
// play a pod's part in pods/exec — LocalExecutor runs the argv on this host in a directory
// standing for the pod's /workspace (no isolation whatsoever), DockerExecutor in a container
// of the sandbox image made like the pod. Nothing here may serve a real sandbox.
package kubetest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	fakecorev1 "k8s.io/client-go/kubernetes/typed/core/v1/fake"
	fakenetworkingv1 "k8s.io/client-go/kubernetes/typed/networking/v1/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Namespace is the namespace the tests' backends use.
const Namespace = "thefold-test"

// Cluster is the fake API server: Core and Net share Fake (its Actions record every call)
// and Tracker (the objects).
type Cluster struct {
	Fake    *k8stesting.Fake
	Tracker k8stesting.ObjectTracker
	Core    *fakecorev1.FakeCoreV1
	Net     *fakenetworkingv1.FakeNetworkingV1
	// Start sets the status of each pod as it is created (it must not call the Cluster);
	// the default runs it: phase Running, its containers running.
	Start func(*corev1.Pod)
}

// NewCluster is a cluster holding objects.
func NewCluster(t testing.TB, objects ...runtime.Object) *Cluster {
	t.Helper()
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := networkingv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	tracker := k8stesting.NewObjectTracker(scheme, serializer.NewCodecFactory(scheme).UniversalDecoder())
	for _, o := range objects {
		if err := tracker.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	f := &k8stesting.Fake{}
	c := &Cluster{Fake: f, Tracker: tracker, Core: &fakecorev1.FakeCoreV1{Fake: f}, Net: &fakenetworkingv1.FakeNetworkingV1{Fake: f}, Start: Run}
	f.AddReactor("*", "*", k8stesting.ObjectReaction(tracker))
	// Runs before the tracker stores the pod (reactors see the action's own copy).
	f.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if p, ok := a.(k8stesting.CreateAction).GetObject().(*corev1.Pod); ok && c.Start != nil {
			c.Start(p)
		}
		return false, nil, nil
	})
	return c
}

// Run is what a kubelet makes of a pod that starts: phase Running, every container running.
func Run(p *corev1.Pod) {
	p.Status.Phase = corev1.PodRunning
	p.Status.ContainerStatuses = nil
	for _, c := range p.Spec.Containers {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image,
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.Now()}}})
	}
}

// Pods lists the pods of Namespace.
func (c *Cluster) Pods(t testing.TB) []corev1.Pod {
	t.Helper()
	list, err := c.Core.Pods(Namespace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return list.Items
}

// SetPhase sets the phase of the pod name, as a kubelet would (its deadline passed, say).
func (c *Cluster) SetPhase(t testing.TB, name string, phase corev1.PodPhase) {
	t.Helper()
	p, err := c.Core.Pods(Namespace).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Phase = phase
	if phase != corev1.PodRunning {
		for i := range p.Status.ContainerStatuses {
			p.Status.ContainerStatuses[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 137}}
		}
	}
	if _, err := c.Core.Pods(Namespace).UpdateStatus(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}
