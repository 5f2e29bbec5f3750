package kube

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/services/sandbox/internal/backend"
)

// Reconcile deletes the sandbox pods of the service instance of dir (its workspace root)
// that no live sandbox of this backend uses, and says how many it deleted: the reaper's
// other half, after the service destroyed its expired sandboxes (which deletes their pods).
// live answers which of the sandbox ids found in the labels are live; it is asked once per
// call. As docker.Reconcile does with containers, deleted are the pods
//
//   - without a sandbox id, or whose sandbox is not live (destroyed, expired, failed,
//     unknown), unless this backend made it for a workspace without an identity;
//   - of a live sandbox whose workspace this backend does not know: a process of the
//     service that was killed made it, and a command of that process may still run in it.
//     The next command of the sandbox makes a new pod (its workspace is on the host);
//   - of a known workspace that is not the workspace's pod, or that no longer runs (its
//     activeDeadlineSeconds passed, it was evicted): the next command makes a new one.
//
// A workspace busy with a command is looked at in a later call. Pods of another dir (another
// installation sharing the namespace) are never touched.
func (k *Kube) Reconcile(ctx context.Context, dir string, live func(ctx context.Context, ids []string) (map[string]bool, error)) (int, error) {
	dir = backend.CleanDir(dir)
	if dir == "" {
		return 0, fmt.Errorf("reconcile: no workspace dir: %w", errs.ErrInvalid)
	}
	k.mu.Lock()
	closed := k.closed
	k.dir = dir
	k.mu.Unlock()
	if closed {
		return 0, fmt.Errorf("kubernetes backend is closed: %w", errs.ErrFailedPrecondition)
	}
	sel := labels.SelectorFromSet(labels.Set{LabelSandbox: "true", LabelInstance: digest(dir)})
	list, err := k.pods.List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return 0, apiError("list the sandbox pods", err)
	}
	var pods []corev1.Pod
	var ids []string
	for _, p := range list.Items {
		if p.Annotations[AnnotationDir] != dir {
			continue // another dir of the same digest
		}
		pods = append(pods, p)
		if id := p.Annotations[AnnotationID]; id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	keep := map[string]bool{}
	if len(ids) > 0 {
		if keep, err = live(ctx, ids); err != nil {
			return 0, fmt.Errorf("reconcile: which sandboxes are live: %w", err)
		}
	}
	removed := 0
	var problems []error
	for _, p := range pods {
		ok, err := k.reconcileOne(ctx, p, keep)
		if err != nil {
			problems = append(problems, err)
		}
		if ok {
			removed++
		}
	}
	return removed, errors.Join(problems...)
}

// reconcileOne deletes p when nothing live uses it (see Reconcile) and reports whether it
// did.
func (k *Kube) reconcileOne(ctx context.Context, p corev1.Pod, keep map[string]bool) (bool, error) {
	if p.DeletionTimestamp != nil {
		return false, nil // going already
	}
	id, ws := p.Annotations[AnnotationID], p.Annotations[AnnotationWorkspace]
	dead := id != "" && !keep[id]
	k.mu.Lock()
	b := k.boxes[ws]
	k.mu.Unlock()
	if b == nil {
		switch {
		case id == "":
			return k.removePod(ctx, p, "it names no sandbox and no workspace of this process")
		case dead:
			return k.removePod(ctx, p, "its sandbox is not live")
		}
		k.learn(ws, p)
		return k.removePod(ctx, p, "an earlier process of the service made it")
	}
	if !b.mu.TryLock() {
		return false, nil // a command or Prepare holds it
	}
	defer b.mu.Unlock()
	why := "its sandbox is not live"
	switch {
	case b.pod != p.Name:
		why = "it is not its workspace's pod"
		if !dead && id != "" && b.who == (backend.Identity{}) {
			b.who = identityOf(p)
		}
	case p.Status.Phase == corev1.PodFailed || p.Status.Phase == corev1.PodSucceeded:
		if !dead {
			why = "it stopped (" + podStatus(&p) + "); the next command makes another"
		}
	case !dead:
		return false, nil
	}
	ok, err := k.removePod(ctx, p, why)
	if ok && b.pod == p.Name {
		b.pod = ""
	}
	if ok && dead {
		k.mu.Lock()
		if k.boxes[ws] == b {
			delete(k.boxes, ws)
		}
		k.mu.Unlock()
	}
	return ok, err
}

// learn keeps the identity of a live sandbox's pod from an earlier process for the pod its
// next command makes.
func (k *Kube) learn(ws string, p corev1.Pod) {
	if ws == "" {
		return
	}
	b, err := k.box(ws)
	if err != nil || !b.mu.TryLock() {
		return
	}
	if b.who == (backend.Identity{}) {
		b.who = identityOf(p)
	}
	b.mu.Unlock()
}

func identityOf(p corev1.Pod) backend.Identity {
	return backend.Identity{ID: p.Annotations[AnnotationID], Owner: p.Annotations[AnnotationOwner], Dir: p.Annotations[AnnotationDir]}
}

// removePod deletes p; one already gone is not an error, but not counted either.
func (k *Kube) removePod(ctx context.Context, p corev1.Pod, why string) (bool, error) {
	err := k.pods.Delete(ctx, p.Name, metav1.DeleteOptions{})
	if err != nil {
		if isNotFound(err) {
			return false, nil
		}
		return false, apiError("delete the sandbox pod "+p.Name, err)
	}
	k.cfg.Logger.InfoContext(ctx, "kubernetes: deleted a sandbox pod", "pod", p.Name, "sandbox", p.Annotations[AnnotationID],
		"owner", p.Annotations[AnnotationOwner], "phase", p.Status.Phase, "why", why)
	return true, nil
}
