package k8s

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
)

// The sandbox pods are not among the manifests: the sandbox service's kubernetes backend
// makes them at run time (services/sandbox/internal/backend/kube). These are its names for
// them; a test reads them from its source and fails when they part.
const (
	// SandboxPodLabel is the label every sandbox pod carries ("true"): its NetworkPolicy
	// selects it.
	SandboxPodLabel = "sandbox.thefold.org/sandbox"
	// SandboxManagedBy is the sandbox pods' app.kubernetes.io/managed-by.
	SandboxManagedBy = "thefold-sandbox"
	// SandboxNetworkPolicy is the sandbox pods' deny-all NetworkPolicy, which the backend
	// checks at start.
	SandboxNetworkPolicy = "thefold-sandbox-deny-all"
)

// SandboxPodLabels are labels a sandbox pod has (it has more: its sandbox, owner and
// workspace, which no policy may select on).
func SandboxPodLabels() map[string]string {
	return map[string]string{SandboxPodLabel: "true", "app.kubernetes.io/managed-by": SandboxManagedBy}
}

// hasEgress reports whether np is about egress.
func hasEgress(np *networkingv1.NetworkPolicy) bool {
	if len(np.Spec.PolicyTypes) == 0 {
		return len(np.Spec.Egress) > 0
	}
	return slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeEgress)
}

// SandboxPodsIsolated: the sandbox pods, where code a model wrote runs, reach nothing and
// nothing reaches them. The NetworkPolicy SandboxNetworkPolicy selects them, is about
// ingress and egress and allows nothing; no other policy with an allow rule selects them
// (policies add up: one allow is enough). When the sandbox service runs the kubernetes
// backend (THEFOLD_SANDBOX_BACKENDS), its account's Roles grant what the backend needs.
func SandboxPodsIsolated(objs []Object) []string {
	var out []string
	pod := SandboxPodLabels()
	nps := networkPolicies(objs)
	i := slices.IndexFunc(nps, func(np *networkingv1.NetworkPolicy) bool { return np.Name == SandboxNetworkPolicy })
	switch {
	case i < 0:
		out = append(out, fmt.Sprintf("no NetworkPolicy %s: the sandbox pods' deny-all (the sandbox service does not start without it)", SandboxNetworkPolicy))
	case !Selects(&nps[i].Spec.PodSelector, pod):
		out = append(out, fmt.Sprintf("NetworkPolicy/%s does not select the sandbox pods (%s=true)", SandboxNetworkPolicy, SandboxPodLabel))
	case !hasIngress(nps[i]) || !hasEgress(nps[i]):
		out = append(out, fmt.Sprintf("NetworkPolicy/%s: policyTypes %v, want Ingress and Egress", SandboxNetworkPolicy, nps[i].Spec.PolicyTypes))
	}
	for _, np := range nps {
		if !Selects(&np.Spec.PodSelector, pod) {
			continue
		}
		if hasIngress(np) && len(np.Spec.Ingress) > 0 {
			out = append(out, fmt.Sprintf("NetworkPolicy/%s admits traffic to the sandbox pods", np.Name))
		}
		if hasEgress(np) && len(np.Spec.Egress) > 0 {
			out = append(out, fmt.Sprintf("NetworkPolicy/%s lets traffic out of the sandbox pods", np.Name))
		}
	}
	w, ok := ServiceDeployment(objs, "sandbox")
	if !ok {
		return out
	}
	for _, c := range w.Spec.Containers {
		if !slices.Contains(strings.Split(Env(objs, c)["THEFOLD_SANDBOX_BACKENDS"], ","), "kubernetes") {
			continue
		}
		granted := sandboxRights(objs, w.Spec.ServiceAccountName)
		for _, key := range slices.Sorted(maps.Keys(roleRights)) {
			for _, v := range roleRights[key] {
				if !granted[key+" "+v] {
					out = append(out, fmt.Sprintf("%s: runs the kubernetes sandbox backend, but its account %q may not %s %s", w, w.Spec.ServiceAccountName, v, key))
				}
			}
		}
	}
	return out
}

// sandboxRights are the "group/resource verb" pairs the Roles bound to account grant.
func sandboxRights(objs []Object, account string) map[string]bool {
	roles := map[string]*rbacv1.Role{}
	for _, o := range objs {
		if r, ok := o.Obj.(*rbacv1.Role); ok {
			roles[r.Name] = r
		}
	}
	out := map[string]bool{}
	for _, o := range objs {
		b, ok := o.Obj.(*rbacv1.RoleBinding)
		if !ok || b.RoleRef.Kind != "Role" || roles[b.RoleRef.Name] == nil ||
			!slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool { return s.Kind == rbacv1.ServiceAccountKind && s.Name == account }) {
			continue
		}
		for _, r := range roles[b.RoleRef.Name].Rules {
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, v := range r.Verbs {
						out[g+"/"+res+" "+v] = true
					}
				}
			}
		}
	}
	return out
}
