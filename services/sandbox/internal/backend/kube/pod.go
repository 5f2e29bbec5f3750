package kube

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/services/sandbox/internal/backend"
	"github.com/thefold/thefold/services/sandbox/internal/backend/tarsync"
)

// The labels of a sandbox pod. LabelSandbox selects every sandbox pod (the NetworkPolicy,
// the reaper); the others say whose it is. Label values are short and restricted, so the
// service instance (its workspace dir) and the workspace are digests, and an owner that is
// not a valid label value is one too; the annotations hold them as they are.
const (
	LabelSandbox   = "sandbox.thefold.org/sandbox"
	LabelID        = "sandbox.thefold.org/id"
	LabelOwner     = "sandbox.thefold.org/owner"
	LabelInstance  = "sandbox.thefold.org/instance"
	LabelWorkspace = "sandbox.thefold.org/workspace"
	LabelManagedBy = "app.kubernetes.io/managed-by"

	AnnotationID        = "sandbox.thefold.org/id"
	AnnotationOwner     = "sandbox.thefold.org/owner"
	AnnotationDir       = "sandbox.thefold.org/dir"
	AnnotationWorkspace = "sandbox.thefold.org/workspace"
)

// ManagedBy is the managed-by label of what the backend makes.
const ManagedBy = "thefold-sandbox"

// SelectorLabels are the labels every sandbox pod has: the NetworkPolicy selects them.
func SelectorLabels() map[string]string { return map[string]string{LabelSandbox: "true"} }

// Container is the name of the sandbox container in the pod.
const Container = "sandbox"

// UID is the user (and group) commands run as, and owns the workspace's files.
const UID = tarsync.Owner

// Keeper is what the pod's container runs: a shell that waits forever. As PID 1 of the
// container's PID namespace it survives every `kill -9 -1` of a command (the kernel spares
// a namespace's init), reaps the processes commands orphan (its wait collects any child),
// and ends at once on SIGTERM.
const Keeper = `trap 'exit 0' TERM; while :; do sleep 3600 & wait; done`

// podName is a new pod's name: the sandbox id's start, for people reading kubectl get
// pods, and a random part, so a name is never reused while an earlier pod of the same
// sandbox is still being deleted.
func podName(who backend.Identity) string {
	name := "thefold-sandbox-"
	if id := strings.ToLower(who.ID); len(id) >= 8 && len(validation.IsDNS1123Label(id[:8])) == 0 {
		name += id[:8] + "-"
	}
	return name + randomHex(5)
}

// labelValue is v when it is a valid label value, else its digest.
func labelValue(v string) string {
	if len(validation.IsValidLabelValue(v)) == 0 {
		return v
	}
	return "h-" + digest(v)
}

// podLabels are the labels of b's next pod.
func (k *Kube) podLabels(b *box) map[string]string {
	who := k.identity(b)
	return map[string]string{
		LabelSandbox:   "true",
		LabelManagedBy: ManagedBy,
		LabelID:        labelValue(who.ID),
		LabelOwner:     labelValue(who.Owner),
		LabelInstance:  digest(who.Dir),
		LabelWorkspace: digest(b.ws),
	}
}

// identity is b's identity with the dir of the last Reconcile when it has none.
func (k *Kube) identity(b *box) backend.Identity {
	who := b.who
	if who.Dir == "" {
		k.mu.Lock()
		who.Dir = k.dir
		k.mu.Unlock()
	}
	return who
}

// Pod is the pod of a sandbox with limits l, labelled for b: everything the isolation of a
// sandbox rests on is here.
func (k *Kube) pod(b *box, l backend.Limits) *corev1.Pod {
	who := k.identity(b)
	cpus := l.CPUs
	if cpus <= 0 {
		cpus = k.cfg.CPUs
	}
	milli := int64(math.Ceil(cpus * 1000))
	mem := resource.NewQuantity(l.MemoryBytes, resource.BinarySI)
	uid := int64(UID)
	deadline := int64(k.cfg.MaxLifetime / time.Second)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      podName(who),
			Namespace: k.cfg.Namespace,
			Labels:    k.podLabels(b),
			Annotations: map[string]string{
				AnnotationID:        who.ID,
				AnnotationOwner:     who.Owner,
				AnnotationDir:       who.Dir,
				AnnotationWorkspace: b.ws,
			},
		},
		Spec: corev1.PodSpec{
			// The pod talks to nothing and nothing talks to it: no token to reach the API
			// server with, no environment naming the namespace's services.
			AutomountServiceAccountToken: new(false),
			EnableServiceLinks:           new(false),
			// A pod whose keeper stopped is done: the reaper deletes it and the next command
			// makes another (the host workspace is the source of truth).
			RestartPolicy:                 corev1.RestartPolicyNever,
			ActiveDeadlineSeconds:         &deadline,
			TerminationGracePeriodSeconds: new(int64(1)),
			SecurityContext: &corev1.PodSecurityContext{
				RunAsNonRoot:   new(true),
				RunAsUser:      &uid,
				RunAsGroup:     &uid,
				FSGroup:        &uid,
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
			},
			Containers: []corev1.Container{{
				Name:       Container,
				Image:      k.cfg.Image,
				Command:    []string{"/bin/sh", "-c", Keeper},
				WorkingDir: Workspace,
				SecurityContext: &corev1.SecurityContext{
					RunAsNonRoot:             new(true),
					RunAsUser:                &uid,
					RunAsGroup:               &uid,
					Privileged:               new(false),
					AllowPrivilegeEscalation: new(false),
					ReadOnlyRootFilesystem:   new(true),
					Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
					SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
				},
				// Memory is requested as much as its limit (it cannot be taken back); CPU a
				// quarter of it: a sandbox is idle between commands, and CPU is shared.
				Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{
						corev1.ResourceMemory: *mem,
						corev1.ResourceCPU:    *resource.NewMilliQuantity(milli, resource.DecimalSI),
					},
					Requests: corev1.ResourceList{
						corev1.ResourceMemory: *mem,
						corev1.ResourceCPU:    *resource.NewMilliQuantity(max(milli/4, 10), resource.DecimalSI),
					},
				},
				VolumeMounts: []corev1.VolumeMount{
					{Name: "workspace", MountPath: Workspace},
					{Name: "tmp", MountPath: "/tmp"},
				},
			}},
			Volumes: []corev1.Volume{
				{Name: "workspace", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
					SizeLimit: resource.NewQuantity(k.cfg.WorkspaceSize, resource.BinarySI)}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
					SizeLimit: resource.NewQuantity(k.cfg.TmpSize, resource.BinarySI)}}},
			},
		},
	}
	if k.cfg.RuntimeClass != "" {
		p.Spec.RuntimeClassName = new(k.cfg.RuntimeClass)
	}
	return p
}

// ensure gives b a running pod: the one it has when that still runs, else a new one. A pod
// keeps the limits it was made with (the service gives a sandbox the same limits at every
// command).
func (k *Kube) ensure(ctx context.Context, b *box, l backend.Limits) error {
	if b.pod != "" {
		p, err := k.pods.Get(ctx, b.pod, metav1.GetOptions{})
		switch {
		case err == nil && running(p):
			return nil
		case err == nil:
			// Ended (its deadline, an eviction, its keeper killed): a new one below.
			k.cfg.Logger.WarnContext(ctx, "kubernetes: the sandbox pod is not running; making a new one", "pod", b.pod, "phase", p.Status.Phase, "sandbox", b.who.ID)
			if err := k.deletePod(ctx, b.pod); err != nil {
				return err
			}
		case apierrors.IsNotFound(err):
			k.cfg.Logger.WarnContext(ctx, "kubernetes: the sandbox pod is gone; making a new one", "pod", b.pod, "sandbox", b.who.ID)
		default:
			return apiError("look at the sandbox pod", err)
		}
		b.pod = ""
	}
	p := k.pod(b, l)
	created, err := k.pods.Create(ctx, p, metav1.CreateOptions{})
	if err != nil {
		return apiError("create the sandbox pod", err)
	}
	b.pod, b.limits, b.oomKills = created.Name, l, 0
	if err := k.waitRunning(ctx, created.Name); err != nil {
		_ = k.deletePod(context.WithoutCancel(ctx), created.Name)
		b.pod = ""
		return err
	}
	return nil
}

// running says whether p's sandbox container runs.
func running(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.ContainerStatuses {
		if c.Name == Container {
			return c.State.Running != nil
		}
	}
	return false
}

// hopeless are the waiting reasons of a container that will not start by waiting longer.
var hopeless = []string{"ErrImagePull", "ImagePullBackOff", "InvalidImageName", "ErrImageNeverPull",
	"CreateContainerConfigError", "CreateContainerError", "RunContainerError"}

// waitRunning waits for the pod name to run, at most StartTimeout.
func (k *Kube) waitRunning(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, k.cfg.StartTimeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	why := "pending"
	for {
		p, err := k.pods.Get(ctx, name, metav1.GetOptions{})
		switch {
		case err == nil && running(p):
			return nil
		case err == nil:
			why = podStatus(p)
			if p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded {
				return fmt.Errorf("the sandbox pod %s ended before it ran: %s: %w", name, why, errs.ErrUnavailable)
			}
			for _, c := range p.Status.ContainerStatuses {
				if w := c.State.Waiting; w != nil && slices.Contains(hopeless, w.Reason) {
					return fmt.Errorf("the sandbox pod %s cannot start (image %s): %s: %s: %w", name, k.cfg.Image, w.Reason, w.Message, errs.ErrFailedPrecondition)
				}
			}
		case apierrors.IsNotFound(err):
			return fmt.Errorf("the sandbox pod %s was deleted before it ran: %w", name, errs.ErrUnavailable)
		case ctx.Err() == nil:
			return apiError("look at the sandbox pod", err)
		}
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return fmt.Errorf("the sandbox pod %s did not run within %s (THEFOLD_SANDBOX_KUBE_START_TIMEOUT): %s: %w", name, k.cfg.StartTimeout, why, errs.ErrUnavailable)
			}
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// podStatus says in a few words why p does not run.
func podStatus(p *corev1.Pod) string {
	parts := []string{string(p.Status.Phase)}
	if p.Status.Reason != "" {
		parts = append(parts, p.Status.Reason+": "+p.Status.Message)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			parts = append(parts, "not scheduled: "+c.Reason+": "+c.Message)
		}
	}
	for _, c := range p.Status.ContainerStatuses {
		if w := c.State.Waiting; w != nil {
			parts = append(parts, w.Reason+": "+w.Message)
		}
	}
	return strings.Join(parts, "; ")
}

// deletePod deletes the pod name; one already gone (or none) is not an error.
func (k *Kube) deletePod(ctx context.Context, name string) error {
	if name == "" {
		return nil
	}
	err := k.pods.Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return apiError("delete the sandbox pod "+name, err)
	}
	return nil
}

// deleteWorkspacePods deletes the pods of the host workspace ws, whichever process of the
// service made them (workspace paths are unique: a random name under the service's dir).
func (k *Kube) deleteWorkspacePods(ctx context.Context, ws string) error {
	sel := labels.SelectorFromSet(labels.Set{LabelSandbox: "true", LabelWorkspace: digest(ws)})
	list, err := k.pods.List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return apiError("list the sandbox pods", err)
	}
	var problems []error
	for _, p := range list.Items {
		if p.Annotations[AnnotationWorkspace] != ws {
			continue // another workspace of the same digest
		}
		if err := k.deletePod(ctx, p.Name); err != nil {
			problems = append(problems, err)
		}
	}
	return errors.Join(problems...)
}

// apiError is a failed API call, classed by kubeUnavailable.
func apiError(what string, err error) error {
	return fmt.Errorf("%s: %w: %w", what, err, kubeUnavailable(err))
}

func isNotFound(err error) bool { return apierrors.IsNotFound(err) }

// Workspace is where the workspace is in the pod.
const Workspace = "/workspace"
