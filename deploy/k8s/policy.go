package k8s

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Policy is a rule the rendered manifests must keep. Check returns one line per violation,
// none when the objects keep the rule.
type Policy struct {
	Name  string
	Check func(objs []Object) []string
}

// CommonPolicies hold for every overlay.
func CommonPolicies() []Policy {
	return []Policy{
		{"no-host-access", NoHostAccess},
		{"resources", Resources},
		{"probes", Probes},
		{"hardening", Hardening},
		{"service-account-tokens", ServiceAccountTokens},
		{"rbac", RBAC},
		{"network-policy-coverage", NetworkPolicyCoverage},
		{"sandbox-pods-isolated", SandboxPodsIsolated},
		{"only-gateway-exposed", OnlyGatewayExposed},
		{"signing-key-gateway-only", SigningKeyGatewayOnly},
		{"secrets-owned", SecretsOwned},
		{"migrations-job", MigrationsJob},
		{"wiring", Wiring},
		{"references-resolve", ReferencesResolve},
	}
}

// DevPolicies hold for overlays/dev, ProdPolicies for overlays/prod, beside CommonPolicies.
func DevPolicies() []Policy  { return []Policy{{"dev-postgres", DevPostgres}} }
func ProdPolicies() []Policy { return []Policy{{"prod-availability", ProdAvailability}} }

// NoHostAccess: no privileged container, no host namespaces, host paths or host ports, no
// added capabilities.
func NoHostAccess(objs []Object) []string {
	var out []string
	for _, w := range Workloads(objs) {
		if w.Spec.HostNetwork || w.Spec.HostPID || w.Spec.HostIPC {
			out = append(out, fmt.Sprintf("%s: uses a host namespace (hostNetwork/hostPID/hostIPC)", w))
		}
		for _, v := range w.Spec.Volumes {
			if v.HostPath != nil {
				out = append(out, fmt.Sprintf("%s: volume %s is a hostPath", w, v.Name))
			}
		}
		for _, c := range w.Containers() {
			if sc := c.SecurityContext; sc != nil {
				if sc.Privileged != nil && *sc.Privileged {
					out = append(out, fmt.Sprintf("%s: container %s is privileged", w, c.Name))
				}
				if sc.Capabilities != nil && len(sc.Capabilities.Add) > 0 {
					out = append(out, fmt.Sprintf("%s: container %s adds capabilities %v", w, c.Name, sc.Capabilities.Add))
				}
			}
			for _, p := range c.Ports {
				if p.HostPort != 0 {
					out = append(out, fmt.Sprintf("%s: container %s uses host port %d", w, c.Name, p.HostPort))
				}
			}
		}
	}
	return out
}

// Resources: every container asks for and is limited in cpu and memory.
func Resources(objs []Object) []string {
	var out []string
	for _, w := range Workloads(objs) {
		for _, c := range w.Containers() {
			for _, r := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if q, ok := c.Resources.Requests[r]; !ok || q.IsZero() {
					out = append(out, fmt.Sprintf("%s: container %s has no %s request", w, c.Name, r))
				}
				if q, ok := c.Resources.Limits[r]; !ok || q.IsZero() {
					out = append(out, fmt.Sprintf("%s: container %s has no %s limit", w, c.Name, r))
				}
			}
		}
	}
	return out
}

// Probes: every container of a Deployment or StatefulSet has a readiness and a liveness
// probe; a service's are on its admin port, /healthz for liveness and /readyz for readiness.
func Probes(objs []Object) []string {
	var out []string
	for _, w := range Workloads(objs) {
		if w.GVK.Kind != "Deployment" && w.GVK.Kind != "StatefulSet" {
			continue
		}
		for _, c := range w.Spec.Containers {
			if c.ReadinessProbe == nil {
				out = append(out, fmt.Sprintf("%s: container %s has no readiness probe", w, c.Name))
			}
			if c.LivenessProbe == nil {
				out = append(out, fmt.Sprintf("%s: container %s has no liveness probe", w, c.Name))
			}
			if w.Service() == "" {
				continue
			}
			for _, p := range []struct {
				kind  string
				probe *corev1.Probe
				path  string
			}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
				if p.probe == nil {
					continue
				}
				if g := p.probe.HTTPGet; g == nil || g.Path != p.path || !isPort(c, g.Port, "admin") {
					out = append(out, fmt.Sprintf("%s: container %s: the %s probe is not GET %s on the admin port", w, c.Name, p.kind, p.path))
				}
			}
		}
	}
	return out
}

// isPort reports whether p names or numbers c's port called name.
func isPort(c corev1.Container, p intstr.IntOrString, name string) bool {
	for _, cp := range c.Ports {
		if cp.Name == name {
			return (p.Type == intstr.String && p.StrVal == name) || (p.Type == intstr.Int && p.IntVal == cp.ContainerPort)
		}
	}
	return false
}

// containerPort is c's port called name, 0 when it has none.
func containerPort(c corev1.Container, name string) int32 {
	for _, p := range c.Ports {
		if p.Name == name {
			return p.ContainerPort
		}
	}
	return 0
}

// Hardening: every container runs as non-root on a read-only root file system, cannot gain
// privileges, has every capability dropped and the RuntimeDefault (or a node-local) seccomp
// profile, and gets a writable emptyDir at /tmp; TheFold's own images run as 65532.
func Hardening(objs []Object) []string {
	var out []string
	for _, w := range Workloads(objs) {
		psc := w.Spec.SecurityContext
		if psc == nil {
			psc = &corev1.PodSecurityContext{}
		}
		for _, c := range w.Containers() {
			sc := c.SecurityContext
			if sc == nil {
				sc = &corev1.SecurityContext{}
			}
			bad := func(what string) { out = append(out, fmt.Sprintf("%s: container %s %s", w, c.Name, what)) }
			nonRoot, uid := psc.RunAsNonRoot, psc.RunAsUser
			if sc.RunAsNonRoot != nil {
				nonRoot = sc.RunAsNonRoot
			}
			if sc.RunAsUser != nil {
				uid = sc.RunAsUser
			}
			if nonRoot == nil || !*nonRoot {
				bad("does not set runAsNonRoot")
			}
			if uid != nil && *uid == 0 {
				bad("runs as user 0")
			}
			if w.ContainerService(c) != "" && (uid == nil || *uid != 65532) {
				bad("does not run as 65532, the user of deploy/Dockerfile's images")
			}
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				bad("has a writable root file system")
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				bad("does not set allowPrivilegeEscalation: false")
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
				bad("does not drop ALL capabilities")
			}
			seccomp := psc.SeccompProfile
			if sc.SeccompProfile != nil {
				seccomp = sc.SeccompProfile
			}
			if seccomp == nil || (seccomp.Type != corev1.SeccompProfileTypeRuntimeDefault && seccomp.Type != corev1.SeccompProfileTypeLocalhost) {
				bad("has no RuntimeDefault seccomp profile")
			}
			if !mountsEmptyDir(w.Spec, c, "/tmp") {
				bad("has no emptyDir at /tmp")
			}
		}
	}
	return out
}

func mountsEmptyDir(spec *corev1.PodSpec, c corev1.Container, path string) bool {
	for _, m := range c.VolumeMounts {
		if m.MountPath != path {
			continue
		}
		for _, v := range spec.Volumes {
			if v.Name == m.Name && v.EmptyDir != nil {
				return true
			}
		}
	}
	return false
}

// sandboxAccount is the one ServiceAccount whose token may be mounted, the sandbox
// service's (its kubernetes backend makes the sandbox pods, base/sandbox.yaml).
const sandboxAccount = "sandbox"

// ServiceAccountTokens: no pod gets a service account token, and every ServiceAccount says
// so, except the sandbox service's.
func ServiceAccountTokens(objs []Object) []string {
	var out []string
	accounts := map[string]*corev1.ServiceAccount{}
	for _, o := range objs {
		if sa, ok := o.Obj.(*corev1.ServiceAccount); ok {
			accounts[sa.Name] = sa
			if sa.Name != sandboxAccount && (sa.AutomountServiceAccountToken == nil || *sa.AutomountServiceAccountToken) {
				out = append(out, fmt.Sprintf("%s: does not set automountServiceAccountToken: false", o))
			}
		}
	}
	for _, w := range Workloads(objs) {
		account := w.Spec.ServiceAccountName
		if account == "" {
			account = "default"
		}
		mount := true // Kubernetes' default
		if sa := accounts[account]; sa != nil && sa.AutomountServiceAccountToken != nil {
			mount = *sa.AutomountServiceAccountToken
		}
		if w.Spec.AutomountServiceAccountToken != nil {
			mount = *w.Spec.AutomountServiceAccountToken
		}
		if mount && (w.Service() != "sandbox" || account != sandboxAccount) {
			out = append(out, fmt.Sprintf("%s: its pods get a service account token (%s)", w, account))
		}
	}
	return out
}

// roleRights are all a Role may grant, by API group and resource: what the kubernetes
// sandbox backend needs (services/sandbox/internal/backend/kube), nothing more.
var roleRights = map[string][]string{
	"/pods":                             {"get", "list", "create", "delete"},
	"/pods/exec":                        {"create", "get"},
	"networking.k8s.io/networkpolicies": {"get", "list"},
}

// RBAC: no cluster-wide rights; Roles grant only roleRights (the kubernetes sandbox
// backend's: its pods, exec into them, reading NetworkPolicies), name every group, resource
// and verb (no wildcard), and are bound to the sandbox's account only.
func RBAC(objs []Object) []string {
	var out []string
	for _, o := range objs {
		switch x := o.Obj.(type) {
		case *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding:
			out = append(out, fmt.Sprintf("%s: no cluster-wide rights", o))
		case *rbacv1.Role:
			for _, r := range x.Rules {
				if len(r.NonResourceURLs) > 0 {
					out = append(out, fmt.Sprintf("%s: grants non-resource URLs %v", o, r.NonResourceURLs))
				}
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						allowed, ok := roleRights[g+"/"+res]
						if !ok {
							out = append(out, fmt.Sprintf("%s: grants %s (group %q; only %s)", o, res, g, strings.Join(slices.Sorted(maps.Keys(roleRights)), ", ")))
							continue
						}
						for _, v := range r.Verbs {
							if !slices.Contains(allowed, v) {
								out = append(out, fmt.Sprintf("%s: grants %s on %s (only %v)", o, v, res, allowed))
							}
						}
					}
				}
			}
		case *rbacv1.RoleBinding:
			for _, s := range x.Subjects {
				if s.Kind != rbacv1.ServiceAccountKind || s.Name != sandboxAccount {
					out = append(out, fmt.Sprintf("%s: binds %s %s (only the %s ServiceAccount)", o, s.Kind, s.Name, sandboxAccount))
				}
			}
		}
	}
	return out
}

func networkPolicies(objs []Object) []*networkingv1.NetworkPolicy {
	var out []*networkingv1.NetworkPolicy
	for _, o := range objs {
		if np, ok := o.Obj.(*networkingv1.NetworkPolicy); ok {
			out = append(out, np)
		}
	}
	return out
}

func hasIngress(np *networkingv1.NetworkPolicy) bool {
	return len(np.Spec.PolicyTypes) == 0 || slices.Contains(np.Spec.PolicyTypes, networkingv1.PolicyTypeIngress)
}

func isDefaultDeny(np *networkingv1.NetworkPolicy) bool {
	sel := np.Spec.PodSelector
	return hasIngress(np) && len(sel.MatchLabels) == 0 && len(sel.MatchExpressions) == 0 && len(np.Spec.Ingress) == 0
}

// NetworkPolicyCoverage: a default deny of ingress for the whole namespace, and a policy of
// its own selecting each of the nine services.
func NetworkPolicyCoverage(objs []Object) []string {
	var out []string
	nps := networkPolicies(objs)
	if !slices.ContainsFunc(nps, isDefaultDeny) {
		out = append(out, "no default deny-all ingress NetworkPolicy (empty podSelector, no ingress rules)")
	}
	for _, s := range Services {
		w, ok := ServiceDeployment(objs, s)
		if !ok {
			out = append(out, fmt.Sprintf("service %s: no Deployment", s))
			continue
		}
		if !slices.ContainsFunc(nps, func(np *networkingv1.NetworkPolicy) bool {
			return !isDefaultDeny(np) && hasIngress(np) && Selects(&np.Spec.PodSelector, w.PodLabels)
		}) {
			out = append(out, fmt.Sprintf("service %s: no NetworkPolicy selects it", s))
		}
	}
	return out
}

// ruleCovers reports whether an ingress rule admits TCP port (or the container port called
// name) of a pod.
func ruleCovers(r networkingv1.NetworkPolicyIngressRule, port int32, name string) bool {
	if len(r.Ports) == 0 {
		return true
	}
	for _, p := range r.Ports {
		if p.Protocol != nil && *p.Protocol != corev1.ProtocolTCP {
			continue
		}
		switch {
		case p.Port == nil:
			return true
		case p.Port.Type == intstr.String:
			if p.Port.StrVal == name {
				return true
			}
		case p.EndPort != nil:
			if port >= p.Port.IntVal && port <= *p.EndPort {
				return true
			}
		case p.Port.IntVal == port:
			return true
		}
	}
	return false
}

// fromOutside reports whether a rule admits pods of other namespaces or addresses outside
// the cluster: no peers at all, an ipBlock, or a namespaceSelector.
func fromOutside(r networkingv1.NetworkPolicyIngressRule) bool {
	if len(r.From) == 0 {
		return true
	}
	for _, p := range r.From {
		if p.IPBlock != nil || p.NamespaceSelector != nil {
			return true
		}
	}
	return false
}

// Callers are who may connect to port (the container port called name) of the pods of
// target: the workloads of objs (services by name, others by object name), and whether
// anything from outside the namespace may.
func Callers(objs []Object, target Workload, port int32, name string) (callers []string, outside bool) {
	seen := map[string]bool{}
	for _, np := range networkPolicies(objs) {
		if !hasIngress(np) || !Selects(&np.Spec.PodSelector, target.PodLabels) {
			continue
		}
		for _, r := range np.Spec.Ingress {
			if !ruleCovers(r, port, name) {
				continue
			}
			if fromOutside(r) {
				outside = true
			}
			for _, w := range Workloads(objs) {
				if len(r.From) == 0 || slices.ContainsFunc(r.From, func(p networkingv1.NetworkPolicyPeer) bool {
					switch {
					case p.IPBlock != nil:
						return false // addresses, not pods of the namespace
					case p.NamespaceSelector != nil:
						return p.PodSelector == nil || Selects(p.PodSelector, w.PodLabels) // may include this namespace
					}
					return Selects(p.PodSelector, w.PodLabels)
				}) {
					who := w.Service()
					if who == "" {
						who = w.Name
					}
					seen[who] = true
				}
			}
		}
	}
	for s := range seen {
		callers = append(callers, s)
	}
	slices.Sort(callers)
	return callers, outside
}

// OnlyGatewayExposed: only the gateway's pods admit traffic from outside the namespace —
// through NetworkPolicies, Services of type NodePort or LoadBalancer, and Ingresses.
func OnlyGatewayExposed(objs []Object) []string {
	var out []string
	services := map[string]*corev1.Service{}
	for _, o := range objs {
		if s, ok := o.Obj.(*corev1.Service); ok {
			services[s.Name] = s
		}
	}
	// selectsOnlyGateway: every workload matched is the gateway.
	selectsOnlyGateway := func(match func(Workload) bool) (bool, []string) {
		var others []string
		for _, w := range Workloads(objs) {
			if match(w) && w.Service() != "gateway" {
				others = append(others, w.String())
			}
		}
		return len(others) == 0, others
	}
	for _, np := range networkPolicies(objs) {
		if !hasIngress(np) || !slices.ContainsFunc(np.Spec.Ingress, fromOutside) {
			continue
		}
		if ok, others := selectsOnlyGateway(func(w Workload) bool { return Selects(&np.Spec.PodSelector, w.PodLabels) }); !ok {
			out = append(out, fmt.Sprintf("NetworkPolicy/%s admits traffic from outside the namespace to %v", np.Name, others))
		}
	}
	svcSelects := func(s *corev1.Service) func(Workload) bool {
		return func(w Workload) bool {
			return len(s.Spec.Selector) > 0 && Selects(&metav1.LabelSelector{MatchLabels: s.Spec.Selector}, w.PodLabels)
		}
	}
	for _, s := range services {
		if s.Spec.Type != corev1.ServiceTypeNodePort && s.Spec.Type != corev1.ServiceTypeLoadBalancer && len(s.Spec.ExternalIPs) == 0 {
			continue
		}
		if ok, others := selectsOnlyGateway(svcSelects(s)); !ok || len(s.Spec.Selector) == 0 {
			out = append(out, fmt.Sprintf("Service/%s (%s) exposes %v", s.Name, s.Spec.Type, others))
		}
	}
	for _, o := range objs {
		ing, ok := o.Obj.(*networkingv1.Ingress)
		if !ok {
			continue
		}
		var backends []*networkingv1.IngressBackend
		if ing.Spec.DefaultBackend != nil {
			backends = append(backends, ing.Spec.DefaultBackend)
		}
		for _, r := range ing.Spec.Rules {
			if r.HTTP != nil {
				for i := range r.HTTP.Paths {
					backends = append(backends, &r.HTTP.Paths[i].Backend)
				}
			}
		}
		for _, b := range backends {
			if b.Service == nil {
				out = append(out, fmt.Sprintf("%s: a backend that is not a Service", o))
				continue
			}
			s := services[b.Service.Name]
			if s == nil {
				out = append(out, fmt.Sprintf("%s: backend Service %s does not exist", o, b.Service.Name))
				continue
			}
			if ok, others := selectsOnlyGateway(svcSelects(s)); !ok || len(s.Spec.Selector) == 0 {
				out = append(out, fmt.Sprintf("%s: backend Service %s exposes %v", o, s.Name, others))
			}
		}
	}
	return out
}

// SigningKeyGatewayOnly: the private key that signs people's tokens (a Secret holding
// signing-key.pem) reaches the gateway's containers and no other; no ConfigMap holds a
// private key.
func SigningKeyGatewayOnly(objs []Object) []string {
	var out []string
	signing := map[string]bool{}
	for _, o := range objs {
		switch x := o.Obj.(type) {
		case *corev1.Secret:
			if _, ok := secretValue(x, "signing-key.pem"); ok {
				signing[x.Name] = true
			}
		case *corev1.ConfigMap:
			for k, v := range x.Data {
				if k == "signing-key.pem" || strings.Contains(v, "PRIVATE KEY") {
					out = append(out, fmt.Sprintf("%s: key %s holds a private key; private keys belong in Secrets", o, k))
				}
			}
		}
	}
	if len(signing) == 0 {
		out = append(out, "no Secret holds signing-key.pem (the gateway's token signing key)")
	}
	gatewayHasIt := false
	for _, w := range Workloads(objs) {
		for _, c := range w.Containers() {
			for _, ref := range SecretRefs(w.Spec, c) {
				if !signing[ref] {
					continue
				}
				if w.ContainerService(c) != "gateway" {
					out = append(out, fmt.Sprintf("%s: container %s is given the signing key Secret %s", w, c.Name, ref))
				} else if w.Service() == "gateway" {
					gatewayHasIt = true
				}
			}
		}
	}
	if len(signing) > 0 && !gatewayHasIt {
		out = append(out, "the gateway's Deployment is not given the signing key Secret")
	}
	return out
}

// SecretsOwned: every Secret of a service (labelled with its name) reaches only that
// service's containers; every database URL Secret belongs to a service and names that
// service's own role, thefold_<service>; every service's Deployment reads its own.
func SecretsOwned(objs []Object) []string {
	var out []string
	secrets := secretsByName(objs)
	for name, s := range secrets {
		u, ok := secretValue(s, "THEFOLD_DATABASE_URL")
		if !ok {
			continue
		}
		owner := s.Labels[labelName]
		if !isService(owner) {
			out = append(out, fmt.Sprintf("Secret/%s holds a database URL but no service owns it (label %s)", name, labelName))
			continue
		}
		if p, err := url.Parse(u); err != nil || p.User == nil || p.User.Username() != "thefold_"+owner {
			out = append(out, fmt.Sprintf("Secret/%s: the database URL is not the role thefold_%s's", name, owner))
		}
	}
	for _, w := range Workloads(objs) {
		for _, c := range w.Containers() {
			who := w.ContainerService(c)
			for _, ref := range SecretRefs(w.Spec, c) {
				s := secrets[ref]
				if s == nil {
					continue
				}
				if owner := s.Labels[labelName]; isService(owner) && owner != who {
					out = append(out, fmt.Sprintf("%s: container %s (service %q) is given %s's Secret %s", w, c.Name, who, owner, ref))
				}
			}
		}
	}
	for _, svc := range Services {
		w, ok := ServiceDeployment(objs, svc)
		if !ok {
			continue // NetworkPolicyCoverage reports it
		}
		for _, c := range w.Spec.Containers {
			if !readsOwnDatabaseURL(c, secrets, svc) {
				out = append(out, fmt.Sprintf("%s: container %s does not take THEFOLD_DATABASE_URL from a Secret of %s's", w, c.Name, svc))
			}
		}
	}
	return out
}

func readsOwnDatabaseURL(c corev1.Container, secrets map[string]*corev1.Secret, svc string) bool {
	for _, e := range c.Env {
		if e.Name == "THEFOLD_DATABASE_URL" && e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			s := secrets[e.ValueFrom.SecretKeyRef.Name]
			return s != nil && s.Labels[labelName] == svc
		}
	}
	return false
}

// MigrationsJob: a Job runs every service's `migrate` subcommand with that service's own
// database URL.
func MigrationsJob(objs []Object) []string {
	secrets := secretsByName(objs)
	best := []string{"no migrations Job (a Job labelled " + labelComponent + "=migrations)"}
	for _, w := range Workloads(objs) {
		if _, ok := w.Obj.(*batchv1.Job); !ok || w.PodLabels[labelComponent] != "migrations" {
			continue
		}
		var out []string
		for _, svc := range Services {
			i := slices.IndexFunc(w.Spec.Containers, func(c corev1.Container) bool { return c.Name == svc })
			if i < 0 {
				out = append(out, fmt.Sprintf("%s: no container migrates %s", w, svc))
				continue
			}
			c := w.Spec.Containers[i]
			if imageRepo(c.Image) != svc || len(c.Command) > 0 || !slices.Equal(c.Args, []string{"migrate"}) {
				out = append(out, fmt.Sprintf("%s: container %s does not run thefold/%s's migrate subcommand", w, svc, svc))
			}
			if !readsOwnDatabaseURL(c, secrets, svc) {
				out = append(out, fmt.Sprintf("%s: container %s does not take THEFOLD_DATABASE_URL from a Secret of %s's", w, svc, svc))
			}
		}
		if len(out) == 0 {
			return nil
		}
		best = out
	}
	return best
}

// Wiring: each service's image is its own; its listen addresses match its container ports;
// every peer address it is given names a Service that selects that peer's pods on the
// peer's gRPC port; the OTLP endpoint names the collector's Service.
func Wiring(objs []Object) []string {
	var out []string
	services := map[string]*corev1.Service{}
	for _, o := range objs {
		if s, ok := o.Obj.(*corev1.Service); ok {
			services[s.Name] = s
		}
	}
	// serves reports whether Service name selects w's pods on port (to the container port
	// called portName).
	serves := func(name string, w Workload, port int32, portName string) bool {
		s := services[name]
		if s == nil || len(s.Spec.Selector) == 0 || !Selects(&metav1.LabelSelector{MatchLabels: s.Spec.Selector}, w.PodLabels) {
			return false
		}
		for _, p := range s.Spec.Ports {
			if p.Port == port && (p.TargetPort.StrVal == portName || p.TargetPort.IntVal == port || (p.TargetPort.IntVal == 0 && p.TargetPort.StrVal == "")) {
				return true
			}
		}
		return false
	}
	grpc := map[string]int32{}
	deps := map[string]Workload{}
	for _, svc := range Services {
		if w, ok := ServiceDeployment(objs, svc); ok && len(w.Spec.Containers) > 0 {
			deps[svc] = w
			grpc[svc] = containerPort(w.Spec.Containers[0], "grpc")
		}
	}
	for _, svc := range Services {
		w, ok := deps[svc]
		if !ok {
			continue
		}
		for _, c := range w.Spec.Containers {
			env := Env(objs, c)
			bad := func(format string, args ...any) {
				out = append(out, fmt.Sprintf("%s: container %s: ", w, c.Name)+fmt.Sprintf(format, args...))
			}
			if imageRepo(c.Image) != svc {
				bad("image %s is not thefold/%s", c.Image, svc)
			}
			for _, l := range []struct{ env, port string }{{"THEFOLD_GRPC_ADDR", "grpc"}, {"THEFOLD_ADMIN_ADDR", "admin"}} {
				if p := containerPort(c, l.port); p == 0 || env[l.env] != ":"+strconv.Itoa(int(p)) {
					bad("%s=%q but its %s port is %d", l.env, env[l.env], l.port, p)
				}
			}
			if svc == "gateway" {
				if p := containerPort(c, "http"); p == 0 || env["THEFOLD_HTTP_ADDR"] != ":"+strconv.Itoa(int(p)) {
					bad("THEFOLD_HTTP_ADDR=%q but its http port is %d", env["THEFOLD_HTTP_ADDR"], p)
				}
			}
			for _, peer := range Services {
				key := "THEFOLD_" + strings.ToUpper(peer) + "_ADDR"
				want := peer + ":" + strconv.Itoa(int(grpc[peer]))
				if env[key] != want || !serves(peer, deps[peer], grpc[peer], "grpc") {
					bad("%s=%q: want %s, a Service selecting %s's pods on its gRPC port", key, env[key], want, peer)
				}
			}
			endpoint := env["OTEL_EXPORTER_OTLP_ENDPOINT"]
			host, port, found := strings.Cut(strings.TrimPrefix(endpoint, "http://"), ":")
			p, _ := strconv.Atoi(port)
			collector := slices.IndexFunc(Workloads(objs), func(cw Workload) bool { return found && serves(host, cw, int32(p), "otlp-grpc") })
			if !strings.HasPrefix(endpoint, "http://") || collector < 0 {
				bad("OTEL_EXPORTER_OTLP_ENDPOINT=%q names no collector Service", endpoint)
			}
		}
	}
	return out
}

// ProdAvailability: the stateless services run at least two replicas under a
// PodDisruptionBudget and a HorizontalPodAutoscaler; agent and builder at least two under
// a budget; sandbox and github exactly one (their state is the pod's).
func ProdAvailability(objs []Object) []string {
	var out []string
	var pdbs []*policyv1.PodDisruptionBudget
	var hpas []*autoscalingv2.HorizontalPodAutoscaler
	for _, o := range objs {
		switch x := o.Obj.(type) {
		case *policyv1.PodDisruptionBudget:
			pdbs = append(pdbs, x)
		case *autoscalingv2.HorizontalPodAutoscaler:
			hpas = append(hpas, x)
		}
	}
	for _, svc := range Services {
		w, ok := ServiceDeployment(objs, svc)
		if !ok {
			out = append(out, fmt.Sprintf("service %s: no Deployment", svc))
			continue
		}
		stateless := slices.Contains(StatelessServices, svc)
		switch {
		case svc == "sandbox" || svc == "github":
			if w.Replicas != 1 {
				out = append(out, fmt.Sprintf("%s: %d replicas; its state is the pod's, so one", w, w.Replicas))
			}
			continue
		case w.Replicas < 2:
			out = append(out, fmt.Sprintf("%s: %d replica(s), want at least 2", w, w.Replicas))
		}
		if !slices.ContainsFunc(pdbs, func(p *policyv1.PodDisruptionBudget) bool {
			return Selects(p.Spec.Selector, w.PodLabels) && allowsDisruption(p, w.Replicas)
		}) {
			out = append(out, fmt.Sprintf("%s: no PodDisruptionBudget that selects it and lets a drain proceed", w))
		}
		if !stateless {
			continue
		}
		if !slices.ContainsFunc(hpas, func(h *autoscalingv2.HorizontalPodAutoscaler) bool {
			t := h.Spec.ScaleTargetRef
			return t.Kind == "Deployment" && t.Name == w.Name && h.Spec.MinReplicas != nil && *h.Spec.MinReplicas >= 2 &&
				h.Spec.MaxReplicas >= *h.Spec.MinReplicas && len(h.Spec.Metrics) > 0
		}) {
			out = append(out, fmt.Sprintf("%s: no HorizontalPodAutoscaler (minReplicas >= 2, with metrics) scales it", w))
		}
	}
	return out
}

// allowsDisruption reports whether p protects something yet lets at least one of n pods go.
func allowsDisruption(p *policyv1.PodDisruptionBudget, n int32) bool {
	switch {
	case p.Spec.MaxUnavailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(p.Spec.MaxUnavailable, int(n), false)
		return err == nil && v >= 1 && int32(v) < n
	case p.Spec.MinAvailable != nil:
		v, err := intstr.GetScaledValueFromIntOrPercent(p.Spec.MinAvailable, int(n), true)
		return err == nil && v >= 1 && int32(v) < n
	}
	return false
}

// DevPostgres: a PostgreSQL with pgvector on a persistent volume, which only the services
// and the migrations Job may reach, that every service's database URL points at with the
// password its role was created with.
func DevPostgres(objs []Object) []string {
	var out []string
	var pg *Workload
	for _, w := range Workloads(objs) {
		if w.GVK.Kind == "StatefulSet" && slices.ContainsFunc(w.Spec.Containers, func(c corev1.Container) bool {
			return strings.Contains(c.Image, "pgvector/pgvector")
		}) {
			pg = &w
		}
	}
	if pg == nil {
		return []string{"no PostgreSQL StatefulSet with the pgvector image"}
	}
	if sts, ok := pg.Obj.(*appsv1.StatefulSet); !ok || len(sts.Spec.VolumeClaimTemplates) == 0 {
		out = append(out, fmt.Sprintf("%s: no volumeClaimTemplates (its data would not outlive the pod)", pg))
	}
	callers, outside := Callers(objs, *pg, 5432, "postgres")
	if outside {
		out = append(out, fmt.Sprintf("%s: reachable from outside the namespace", pg))
	}
	if len(callers) == 0 {
		out = append(out, fmt.Sprintf("%s: no NetworkPolicy admits the services", pg))
	}
	for _, c := range callers {
		if !isService(c) && c != "thefold-migrate" {
			out = append(out, fmt.Sprintf("%s: reachable from %s (only the services and the migrations Job)", pg, c))
		}
	}
	// The passwords the init script gives the roles, and the URLs the services use.
	secrets := secretsByName(objs)
	var pgEnv = map[string]string{}
	for _, c := range pg.Spec.Containers {
		for _, e := range c.EnvFrom {
			if e.SecretRef != nil && secrets[e.SecretRef.Name] != nil {
				for k, v := range secrets[e.SecretRef.Name].Data {
					pgEnv[k] = string(v)
				}
			}
		}
	}
	for _, s := range secrets {
		u, ok := secretValue(s, "THEFOLD_DATABASE_URL")
		owner := s.Labels[labelName]
		if !ok || !isService(owner) {
			continue
		}
		p, err := url.Parse(u)
		if err != nil || p.User == nil {
			out = append(out, fmt.Sprintf("Secret/%s: the database URL does not parse", s.Name))
			continue
		}
		pw, _ := p.User.Password()
		if want := pgEnv["THEFOLD_"+strings.ToUpper(owner)+"_DB_PASSWORD"]; want == "" || pw != want {
			out = append(out, fmt.Sprintf("Secret/%s: the password is not the one PostgreSQL's init script gives thefold_%s", s.Name, owner))
		}
		if p.Hostname() != "postgres" {
			out = append(out, fmt.Sprintf("Secret/%s: the database URL's host is %s, not the in-cluster postgres", s.Name, p.Hostname()))
		}
	}
	return out
}

// CallerGraph: each service other than the gateway admits on its gRPC port exactly the
// services that call it (callers[service], derived from the code), and nothing from
// outside the namespace; the gateway admits everyone on its REST and gRPC ports.
func CallerGraph(callers map[string][]string) Policy {
	return Policy{"caller-graph", func(objs []Object) []string {
		var out []string
		for _, svc := range Services {
			w, ok := ServiceDeployment(objs, svc)
			if !ok || len(w.Spec.Containers) == 0 {
				out = append(out, fmt.Sprintf("service %s: no Deployment", svc))
				continue
			}
			c := w.Spec.Containers[0]
			if svc == "gateway" {
				for _, name := range []string{"http", "grpc"} {
					if _, outside := Callers(objs, w, containerPort(c, name), name); !outside {
						out = append(out, fmt.Sprintf("%s: its %s port is not reachable from outside the namespace", w, name))
					}
				}
				continue
			}
			got, outside := Callers(objs, w, containerPort(c, "grpc"), "grpc")
			want := slices.Sorted(slices.Values(callers[svc]))
			if outside {
				out = append(out, fmt.Sprintf("%s: its gRPC port is reachable from outside the namespace", w))
			}
			if !slices.Equal(got, want) {
				out = append(out, fmt.Sprintf("%s: its gRPC port admits %v; the code's callers are %v", w, got, want))
			}
		}
		return out
	}}
}

// ReferencesResolve: every ConfigMap, Secret (and key of one), PersistentVolumeClaim and
// ServiceAccount a pod refers to, the Role a RoleBinding binds and the Deployment an
// autoscaler scales is among the objects (unless the reference is optional), so no pod
// waits for something that is not coming.
func ReferencesResolve(objs []Object) []string {
	var out []string
	keys := map[string]map[string]bool{} // "ConfigMap/name" or "Secret/name" -> keys
	exists := map[string]bool{}
	for _, o := range objs {
		exists[o.GVK.Kind+"/"+o.Name] = true
		switch x := o.Obj.(type) {
		case *corev1.ConfigMap:
			keys[o.String()] = map[string]bool{}
			for k := range x.Data {
				keys[o.String()][k] = true
			}
			for k := range x.BinaryData {
				keys[o.String()][k] = true
			}
		case *corev1.Secret:
			keys[o.String()] = map[string]bool{}
			for k := range x.Data {
				keys[o.String()][k] = true
			}
			for k := range x.StringData {
				keys[o.String()][k] = true
			}
		}
	}
	check := func(w Workload, kind, name string, optional *bool, key ...string) {
		if optional != nil && *optional {
			return
		}
		ref := kind + "/" + name
		if keys[ref] == nil {
			out = append(out, fmt.Sprintf("%s: refers to %s, which is not among the objects", w, ref))
			return
		}
		for _, k := range key {
			if !keys[ref][k] {
				out = append(out, fmt.Sprintf("%s: refers to key %s of %s, which has none", w, k, ref))
			}
		}
	}
	itemKeys := func(items []corev1.KeyToPath) []string {
		var ks []string
		for _, i := range items {
			ks = append(ks, i.Key)
		}
		return ks
	}
	for _, w := range Workloads(objs) {
		for _, c := range w.Containers() {
			for _, e := range c.EnvFrom {
				if e.ConfigMapRef != nil {
					check(w, "ConfigMap", e.ConfigMapRef.Name, e.ConfigMapRef.Optional)
				}
				if e.SecretRef != nil {
					check(w, "Secret", e.SecretRef.Name, e.SecretRef.Optional)
				}
			}
			for _, e := range c.Env {
				if e.ValueFrom == nil {
					continue
				}
				if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
					check(w, "ConfigMap", r.Name, r.Optional, r.Key)
				}
				if r := e.ValueFrom.SecretKeyRef; r != nil {
					check(w, "Secret", r.Name, r.Optional, r.Key)
				}
			}
		}
		for _, v := range w.Spec.Volumes {
			switch {
			case v.ConfigMap != nil:
				check(w, "ConfigMap", v.ConfigMap.Name, v.ConfigMap.Optional, itemKeys(v.ConfigMap.Items)...)
			case v.Secret != nil:
				check(w, "Secret", v.Secret.SecretName, v.Secret.Optional, itemKeys(v.Secret.Items)...)
			case v.Projected != nil:
				for _, src := range v.Projected.Sources {
					if src.ConfigMap != nil {
						check(w, "ConfigMap", src.ConfigMap.Name, src.ConfigMap.Optional, itemKeys(src.ConfigMap.Items)...)
					}
					if src.Secret != nil {
						check(w, "Secret", src.Secret.Name, src.Secret.Optional, itemKeys(src.Secret.Items)...)
					}
				}
			case v.PersistentVolumeClaim != nil:
				if !exists["PersistentVolumeClaim/"+v.PersistentVolumeClaim.ClaimName] {
					out = append(out, fmt.Sprintf("%s: refers to PersistentVolumeClaim/%s, which is not among the objects", w, v.PersistentVolumeClaim.ClaimName))
				}
			}
		}
		if sa := w.Spec.ServiceAccountName; sa != "" && !exists["ServiceAccount/"+sa] {
			out = append(out, fmt.Sprintf("%s: runs as ServiceAccount/%s, which is not among the objects", w, sa))
		}
	}
	for _, o := range objs {
		switch x := o.Obj.(type) {
		case *rbacv1.RoleBinding:
			if !exists[x.RoleRef.Kind+"/"+x.RoleRef.Name] {
				out = append(out, fmt.Sprintf("%s: binds %s/%s, which is not among the objects", o, x.RoleRef.Kind, x.RoleRef.Name))
			}
			for _, sub := range x.Subjects {
				if sub.Kind == rbacv1.ServiceAccountKind && !exists["ServiceAccount/"+sub.Name] {
					out = append(out, fmt.Sprintf("%s: binds ServiceAccount/%s, which is not among the objects", o, sub.Name))
				}
			}
		case *autoscalingv2.HorizontalPodAutoscaler:
			if t := x.Spec.ScaleTargetRef; !exists[t.Kind+"/"+t.Name] {
				out = append(out, fmt.Sprintf("%s: scales %s/%s, which is not among the objects", o, t.Kind, t.Name))
			}
		case *policyv1.PodDisruptionBudget:
			if !slices.ContainsFunc(Workloads(objs), func(w Workload) bool { return Selects(x.Spec.Selector, w.PodLabels) }) {
				out = append(out, fmt.Sprintf("%s: selects no pods", o))
			}
		}
	}
	return out
}
