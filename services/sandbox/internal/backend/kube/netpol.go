package kube

import (
	"context"
	"fmt"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/thefold/thefold/pkg/errs"
)

// NetworkPolicy is the sandbox pods' policy: it selects every sandbox pod and, naming both
// policy types and no rule, lets nothing in and nothing out (DNS included). It takes effect
// only where the cluster's network plugin enforces NetworkPolicy (Calico, Cilium, ...).
func NetworkPolicy(namespace, name string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{LabelManagedBy: ManagedBy}},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: SelectorLabels()},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		},
	}
}

// ensureNetworkPolicy checks that the deny-all policy is there and denies everything, and
// that no other policy of the namespace lets traffic reach or leave a sandbox pod (policies
// add up: one allow is enough). A missing policy is made when the service may create
// policies (deploy/k8s ships it and grants only reading them). Anything else stops the
// backend: a sandbox pod with a network is a sandbox that is not one.
func (k *Kube) ensureNetworkPolicy(ctx context.Context) error {
	name := k.cfg.NetworkPolicy
	want := NetworkPolicy(k.cfg.Namespace, name)
	got, err := k.net.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		got, err = k.net.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsForbidden(err) {
			return fmt.Errorf("the sandbox pods' deny-all NetworkPolicy %s/%s is missing and this service may not create it (apply deploy/k8s, which ships it, or grant create on networkpolicies): %w", k.cfg.Namespace, name, errs.ErrFailedPrecondition)
		}
		if err == nil {
			k.cfg.Logger.InfoContext(ctx, "kubernetes: made the sandbox pods' deny-all NetworkPolicy", "namespace", k.cfg.Namespace, "name", name)
		}
	}
	if err != nil {
		return fmt.Errorf("the kubernetes API (namespace %s): %w: %w", k.cfg.Namespace, err, kubeUnavailable(err))
	}
	if why := notDenyAll(got); why != "" {
		return fmt.Errorf("NetworkPolicy %s/%s must select every sandbox pod (%s=true) and deny all ingress and egress, but %s: %w", k.cfg.Namespace, name, LabelSandbox, why, errs.ErrFailedPrecondition)
	}
	list, err := k.net.List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list the NetworkPolicies of namespace %s: %w: %w", k.cfg.Namespace, err, kubeUnavailable(err))
	}
	sandbox := labels.Set{LabelSandbox: "true", LabelManagedBy: ManagedBy}
	var opens []string
	for _, np := range list.Items {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err != nil || !sel.Matches(sandbox) {
			continue
		}
		if len(np.Spec.Ingress) > 0 && hasType(&np, networkingv1.PolicyTypeIngress) {
			opens = append(opens, np.Name+" (ingress)")
		}
		if len(np.Spec.Egress) > 0 && hasType(&np, networkingv1.PolicyTypeEgress) {
			opens = append(opens, np.Name+" (egress)")
		}
	}
	if len(opens) > 0 {
		return fmt.Errorf("NetworkPolicies of namespace %s let traffic reach or leave the sandbox pods: %s; sandboxes have no network (scope those policies away from %s=true): %w", k.cfg.Namespace, strings.Join(opens, ", "), LabelSandbox, errs.ErrFailedPrecondition)
	}
	return nil
}

// notDenyAll says why np is not the sandbox pods' deny-all policy ("" when it is).
func notDenyAll(np *networkingv1.NetworkPolicy) string {
	sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	switch {
	case err != nil:
		return "its podSelector is invalid"
	case !sel.Matches(labels.Set(SelectorLabels())):
		return "its podSelector " + sel.String() + " does not select them"
	case !hasType(np, networkingv1.PolicyTypeIngress) || !hasType(np, networkingv1.PolicyTypeEgress):
		return fmt.Sprintf("its policyTypes are %v", np.Spec.PolicyTypes)
	case len(np.Spec.Ingress) > 0 || len(np.Spec.Egress) > 0:
		return "it has allow rules"
	}
	return ""
}

// hasType says whether np applies to traffic of type t. Without policyTypes a policy is
// about ingress, and about egress too when it has egress rules.
func hasType(np *networkingv1.NetworkPolicy, t networkingv1.PolicyType) bool {
	if len(np.Spec.PolicyTypes) == 0 {
		return t == networkingv1.PolicyTypeIngress || len(np.Spec.Egress) > 0
	}
	for _, p := range np.Spec.PolicyTypes {
		if p == t {
			return true
		}
	}
	return false
}

// kubeUnavailable classes an API error: a right the service lacks, or an object the API
// server refuses, is the operator's to fix (FailedPrecondition), the rest the cluster's
// (Unavailable).
func kubeUnavailable(err error) error {
	if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsInvalid(err) {
		return errs.ErrFailedPrecondition
	}
	return errs.ErrUnavailable
}
