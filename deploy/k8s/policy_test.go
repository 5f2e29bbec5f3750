package k8s

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// TestPoliciesReportBadObjects shows every policy can fail: each case plants one mistake
// in a copy of a rendered overlay (which keeps the policy), and the policy must name it.
func TestPoliciesReportBadObjects(t *testing.T) {
	t.Parallel()
	callers := sourceCallGraph(t)
	cases := []struct {
		name    string
		overlay string
		policy  Policy
		plant   func(t *testing.T, objs *[]Object)
		want    string
	}{
		{"privileged container", "prod", policyNamed("no-host-access"), func(t *testing.T, objs *[]Object) {
			c := container(t, *objs, "tasks")
			c.SecurityContext.Privileged = ptr(true)
		}, "Deployment/tasks: container server is privileged"},
		{"host network", "prod", policyNamed("no-host-access"), func(t *testing.T, objs *[]Object) {
			deployment(t, *objs, "memory").Spec.Template.Spec.HostNetwork = true
		}, "Deployment/memory: uses a host namespace"},
		{"hostPath volume", "dev", policyNamed("no-host-access"), func(t *testing.T, objs *[]Object) {
			spec := &deployment(t, *objs, "github").Spec.Template.Spec
			spec.Volumes = append(spec.Volumes, corev1.Volume{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/var/run/docker.sock"}}})
		}, "Deployment/github: volume host is a hostPath"},
		{"Deployment without limits", "prod", policyNamed("resources"), func(t *testing.T, objs *[]Object) {
			container(t, *objs, "skills").Resources.Limits = nil
		}, "Deployment/skills: container server has no cpu limit"},
		{"Job container without a memory request", "dev", policyNamed("resources"), func(t *testing.T, objs *[]Object) {
			delete(job(t, *objs).Spec.Template.Spec.Containers[0].Resources.Requests, corev1.ResourceMemory)
		}, "container tasks has no memory request"},
		{"Deployment without a readiness probe", "prod", policyNamed("probes"), func(t *testing.T, objs *[]Object) {
			container(t, *objs, "agent").ReadinessProbe = nil
		}, "Deployment/agent: container server has no readiness probe"},
		{"liveness probe on /readyz", "prod", policyNamed("probes"), func(t *testing.T, objs *[]Object) {
			container(t, *objs, "builder").LivenessProbe.HTTPGet.Path = "/readyz"
		}, "Deployment/builder: container server: the liveness probe is not GET /healthz"},
		{"writable root file system", "prod", policyNamed("hardening"), func(t *testing.T, objs *[]Object) {
			container(t, *objs, "ai").SecurityContext.ReadOnlyRootFilesystem = ptr(false)
		}, "Deployment/ai: container server has a writable root file system"},
		{"capabilities kept", "prod", policyNamed("hardening"), func(t *testing.T, objs *[]Object) {
			container(t, *objs, "ai").SecurityContext.Capabilities.Drop = nil
		}, "Deployment/ai: container server does not drop ALL capabilities"},
		{"privilege escalation allowed", "dev", policyNamed("hardening"), func(t *testing.T, objs *[]Object) {
			statefulSet(t, *objs, "postgres").Spec.Template.Spec.Containers[0].SecurityContext.AllowPrivilegeEscalation = ptr(true)
		}, "StatefulSet/postgres: container postgres does not set allowPrivilegeEscalation: false"},
		{"migration as root", "prod", policyNamed("hardening"), func(t *testing.T, objs *[]Object) {
			job(t, *objs).Spec.Template.Spec.Containers[2].SecurityContext.RunAsUser = ptr(int64(0))
		}, "container skills runs as user 0"},
		{"no seccomp profile", "prod", policyNamed("hardening"), func(t *testing.T, objs *[]Object) {
			deployment(t, *objs, "otel-collector").Spec.Template.Spec.SecurityContext.SeccompProfile = nil
		}, "Deployment/otel-collector: container collector has no RuntimeDefault seccomp profile"},
		{"no /tmp", "prod", policyNamed("hardening"), func(t *testing.T, objs *[]Object) {
			c := container(t, *objs, "gateway")
			c.VolumeMounts = c.VolumeMounts[1:]
		}, "Deployment/gateway: container server has no emptyDir at /tmp"},
		{"token mounted in a pod", "prod", policyNamed("service-account-tokens"), func(t *testing.T, objs *[]Object) {
			deployment(t, *objs, "tasks").Spec.Template.Spec.AutomountServiceAccountToken = nil
			object[*corev1.ServiceAccount](t, *objs, "tasks").AutomountServiceAccountToken = nil
		}, "Deployment/tasks: its pods get a service account token (tasks)"},
		{"another pod on the sandbox's account", "prod", policyNamed("service-account-tokens"), func(t *testing.T, objs *[]Object) {
			spec := &deployment(t, *objs, "github").Spec.Template.Spec
			spec.ServiceAccountName, spec.AutomountServiceAccountToken = "sandbox", nil
		}, "Deployment/github: its pods get a service account token (sandbox)"},
		{"cluster-wide rights", "prod", policyNamed("rbac"), func(t *testing.T, objs *[]Object) {
			*objs = append(*objs, obj(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "sandbox-admin"}}, "rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"))
		}, "ClusterRoleBinding/sandbox-admin: no cluster-wide rights"},
		{"Role over secrets", "prod", policyNamed("rbac"), func(t *testing.T, objs *[]Object) {
			r := object[*rbacv1.Role](t, *objs, "sandbox-pods")
			r.Rules[0].Resources = append(r.Rules[0].Resources, "secrets")
		}, "Role/sandbox-pods: grants secrets"},
		{"Role that may write NetworkPolicies", "prod", policyNamed("rbac"), func(t *testing.T, objs *[]Object) {
			r := object[*rbacv1.Role](t, *objs, "sandbox-pods")
			r.Rules[2].Verbs = append(r.Rules[2].Verbs, "create")
		}, "Role/sandbox-pods: grants create on networkpolicies"},
		{"Role over Deployments", "dev", policyNamed("rbac"), func(t *testing.T, objs *[]Object) {
			r := object[*rbacv1.Role](t, *objs, "sandbox-pods")
			r.Rules = append(r.Rules, rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get"}})
		}, `Role/sandbox-pods: grants deployments (group "apps"`},
		{"Role with a wildcard verb", "prod", policyNamed("rbac"), func(t *testing.T, objs *[]Object) {
			object[*rbacv1.Role](t, *objs, "sandbox-pods").Rules[0].Verbs = []string{"*"}
		}, "Role/sandbox-pods: grants * on pods"},
		{"no deny-all for the sandbox pods", "prod", policyNamed("sandbox-pods-isolated"), func(t *testing.T, objs *[]Object) {
			remove(objs, "NetworkPolicy", "thefold-sandbox-deny-all")
		}, "no NetworkPolicy thefold-sandbox-deny-all"},
		{"sandbox pods may reach out", "dev", policyNamed("sandbox-pods-isolated"), func(t *testing.T, objs *[]Object) {
			object[*networkingv1.NetworkPolicy](t, *objs, "thefold-sandbox-deny-all").Spec.Egress = []networkingv1.NetworkPolicyEgressRule{{}}
		}, "NetworkPolicy/thefold-sandbox-deny-all lets traffic out of the sandbox pods"},
		{"sandbox pods' deny-all only about ingress", "prod", policyNamed("sandbox-pods-isolated"), func(t *testing.T, objs *[]Object) {
			object[*networkingv1.NetworkPolicy](t, *objs, "thefold-sandbox-deny-all").Spec.PolicyTypes = []networkingv1.PolicyType{networkingv1.PolicyTypeIngress}
		}, "want Ingress and Egress"},
		{"sandbox pods' deny-all selects other pods", "prod", policyNamed("sandbox-pods-isolated"), func(t *testing.T, objs *[]Object) {
			object[*networkingv1.NetworkPolicy](t, *objs, "thefold-sandbox-deny-all").Spec.PodSelector.MatchLabels = map[string]string{"sandbox": "true"}
		}, "does not select the sandbox pods"},
		{"DNS for every pod, sandboxes too", "prod", policyNamed("sandbox-pods-isolated"), func(t *testing.T, objs *[]Object) {
			*objs = append(*objs, obj(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "allow-dns"},
				Spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
					Egress: []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{{Port: ptr(intstr.FromInt32(53))}}}}}},
				"networking.k8s.io", "v1", "NetworkPolicy"))
		}, "NetworkPolicy/allow-dns lets traffic out of the sandbox pods"},
		{"sandbox service may not exec", "prod", policyNamed("sandbox-pods-isolated"), func(t *testing.T, objs *[]Object) {
			r := object[*rbacv1.Role](t, *objs, "sandbox-pods")
			r.Rules = slices.DeleteFunc(r.Rules, func(p rbacv1.PolicyRule) bool { return slices.Contains(p.Resources, "pods/exec") })
		}, `Deployment/sandbox: runs the kubernetes sandbox backend, but its account "sandbox" may not create /pods/exec`},
		{"no default deny", "prod", policyNamed("network-policy-coverage"), func(t *testing.T, objs *[]Object) {
			remove(objs, "NetworkPolicy", "default-deny-ingress")
		}, "no default deny-all ingress NetworkPolicy"},
		{"service without a NetworkPolicy", "dev", policyNamed("network-policy-coverage"), func(t *testing.T, objs *[]Object) {
			remove(objs, "NetworkPolicy", "memory")
		}, "service memory: no NetworkPolicy selects it"},
		{"tasks open to the world", "prod", policyNamed("only-gateway-exposed"), func(t *testing.T, objs *[]Object) {
			object[*networkingv1.NetworkPolicy](t, *objs, "tasks").Spec.Ingress[0].From = nil
		}, "NetworkPolicy/tasks admits traffic from outside the namespace to [Deployment/tasks]"},
		{"ai reachable from another namespace", "prod", policyNamed("only-gateway-exposed"), func(t *testing.T, objs *[]Object) {
			np := object[*networkingv1.NetworkPolicy](t, *objs, "ai")
			np.Spec.Ingress[0].From[0].NamespaceSelector = &metav1.LabelSelector{}
		}, "NetworkPolicy/ai admits traffic from outside the namespace"},
		{"LoadBalancer for the agent", "prod", policyNamed("only-gateway-exposed"), func(t *testing.T, objs *[]Object) {
			s := object[*corev1.Service](t, *objs, "agent")
			s.Spec.Type, s.Spec.ClusterIP = corev1.ServiceTypeLoadBalancer, ""
		}, "Service/agent (LoadBalancer) exposes [Deployment/agent]"},
		{"Ingress to the builder", "prod", policyNamed("only-gateway-exposed"), func(t *testing.T, objs *[]Object) {
			object[*networkingv1.Ingress](t, *objs, "gateway").Spec.Rules[0].HTTP.Paths[0].Backend.Service.Name = "builder"
		}, "Ingress/gateway: backend Service builder exposes [Deployment/builder]"},
		{"signing key given to the agent", "prod", policyNamed("signing-key-gateway-only"), func(t *testing.T, objs *[]Object) {
			gw := deployment(t, *objs, "gateway").Spec.Template.Spec.Volumes
			var src corev1.VolumeProjection
			for _, v := range gw {
				if v.Projected != nil {
					for _, s := range v.Projected.Sources {
						if s.Secret != nil && strings.HasPrefix(s.Secret.Name, "gateway-signing-key") {
							src = s
						}
					}
				}
			}
			for _, v := range deployment(t, *objs, "agent").Spec.Template.Spec.Volumes {
				if v.Projected != nil {
					v.Projected.Sources = append(v.Projected.Sources, src)
				}
			}
		}, "Deployment/agent: container server is given the signing key Secret gateway-signing-key"},
		{"signing key in a ConfigMap", "dev", policyNamed("signing-key-gateway-only"), func(t *testing.T, objs *[]Object) {
			cm := object[*corev1.ConfigMap](t, *objs, "thefold-public-keys")
			cm.Data["signing-key.pem"] = "-----BEGIN PRIVATE KEY-----"
		}, "key signing-key.pem holds a private key"},
		{"tasks given memory's database URL", "prod", policyNamed("secrets-owned"), func(t *testing.T, objs *[]Object) {
			ref := container(t, *objs, "memory").Env[0].ValueFrom.SecretKeyRef.Name
			container(t, *objs, "tasks").Env[0].ValueFrom.SecretKeyRef.Name = ref
		}, `Deployment/tasks: container server (service "tasks") is given memory's Secret memory-db`},
		{"a database URL with another service's role", "dev", policyNamed("secrets-owned"), func(t *testing.T, objs *[]Object) {
			object[*corev1.Secret](t, *objs, "skills-db").Data["THEFOLD_DATABASE_URL"] = []byte("postgres://thefold:thefold@postgres:5432/thefold")
		}, "the database URL is not the role thefold_skills's"},
		{"the collector given a service key", "prod", policyNamed("secrets-owned"), func(t *testing.T, objs *[]Object) {
			name := object[*corev1.Secret](t, *objs, "ai-provider-keys").Name
			c := &deployment(t, *objs, "otel-collector").Spec.Template.Spec.Containers[0]
			c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}})
		}, `container collector (service "") is given ai's Secret ai-provider-keys`},
		{"no migrations for ai", "prod", policyNamed("migrations-job"), func(t *testing.T, objs *[]Object) {
			spec := &job(t, *objs).Spec.Template.Spec
			spec.Containers = append(spec.Containers[:3], spec.Containers[4:]...)
		}, "no container migrates ai"},
		{"no migrations Job", "dev", policyNamed("migrations-job"), func(t *testing.T, objs *[]Object) {
			remove(objs, "Job", "thefold-migrate")
		}, "no migrations Job"},
		{"wrong peer port", "prod", policyNamed("wiring"), func(t *testing.T, objs *[]Object) {
			object[*corev1.ConfigMap](t, *objs, "thefold-common").Data["THEFOLD_TASKS_ADDR"] = "tasks:9999"
		}, `THEFOLD_TASKS_ADDR="tasks:9999": want tasks:9101`},
		{"admin address off its port", "prod", policyNamed("wiring"), func(t *testing.T, objs *[]Object) {
			object[*corev1.ConfigMap](t, *objs, "github-config").Data["THEFOLD_ADMIN_ADDR"] = ":9299"
		}, `Deployment/github: container server: THEFOLD_ADMIN_ADDR=":9299" but its admin port is 9206`},
		{"no collector", "prod", policyNamed("wiring"), func(t *testing.T, objs *[]Object) {
			remove(objs, "Service", "otel-collector")
		}, `OTEL_EXPORTER_OTLP_ENDPOINT="http://otel-collector:4317" names no collector Service`},
		{"memory open to the builder", "prod", CallerGraph(callers), func(t *testing.T, objs *[]Object) {
			np := object[*networkingv1.NetworkPolicy](t, *objs, "memory")
			np.Spec.Ingress[0].From[0].PodSelector.MatchExpressions[0].Values = append(np.Spec.Ingress[0].From[0].PodSelector.MatchExpressions[0].Values, "builder")
		}, "Deployment/memory: its gRPC port admits [agent builder gateway]; the code's callers are [agent gateway]"},
		{"tasks closed to the agent", "dev", CallerGraph(callers), func(t *testing.T, objs *[]Object) {
			np := object[*networkingv1.NetworkPolicy](t, *objs, "tasks")
			np.Spec.Ingress[0].From[0].PodSelector.MatchExpressions[0].Values = []string{"gateway"}
		}, "Deployment/tasks: its gRPC port admits [gateway]; the code's callers are [agent gateway]"},
		{"policy on the wrong port", "prod", CallerGraph(callers), func(t *testing.T, objs *[]Object) {
			object[*networkingv1.NetworkPolicy](t, *objs, "agent").Spec.Ingress[0].Ports[0].Port = ptr(intstr.FromInt32(9208))
		}, "Deployment/agent: its gRPC port admits []"},
		{"a Secret that is not there", "prod", policyNamed("references-resolve"), func(t *testing.T, objs *[]Object) {
			remove(objs, "Secret", "sandbox-service-key")
		}, "Deployment/sandbox: refers to Secret/sandbox-service-key"},
		{"a key the Secret does not have", "dev", policyNamed("references-resolve"), func(t *testing.T, objs *[]Object) {
			delete(object[*corev1.Secret](t, *objs, "github-secret-key").Data, "github-secret.key")
		}, "Deployment/github: refers to key github-secret.key of Secret/github-secret-key"},
		{"a claim that is not there", "dev", policyNamed("references-resolve"), func(t *testing.T, objs *[]Object) {
			remove(objs, "PersistentVolumeClaim", "github-repos")
		}, "Deployment/github: refers to PersistentVolumeClaim/github-repos, which is not among the objects"},
		{"an autoscaler of nothing", "prod", policyNamed("references-resolve"), func(t *testing.T, objs *[]Object) {
			object[*autoscalingv2.HorizontalPodAutoscaler](t, *objs, "ai").Spec.ScaleTargetRef.Name = "a1"
		}, "HorizontalPodAutoscaler/ai: scales Deployment/a1"},
		{"one ai replica", "prod", policyNamed("prod-availability"), func(t *testing.T, objs *[]Object) {
			deployment(t, *objs, "ai").Spec.Replicas = ptr(int32(1))
		}, "Deployment/ai: 1 replica(s), want at least 2"},
		{"no autoscaler for memory", "prod", policyNamed("prod-availability"), func(t *testing.T, objs *[]Object) {
			remove(objs, "HorizontalPodAutoscaler", "memory")
		}, "Deployment/memory: no HorizontalPodAutoscaler"},
		{"a budget that blocks drains", "prod", policyNamed("prod-availability"), func(t *testing.T, objs *[]Object) {
			object[*policyv1.PodDisruptionBudget](t, *objs, "builder").Spec.MaxUnavailable = ptr(intstr.FromInt32(0))
		}, "Deployment/builder: no PodDisruptionBudget that selects it and lets a drain proceed"},
		{"two sandboxes", "prod", policyNamed("prod-availability"), func(t *testing.T, objs *[]Object) {
			deployment(t, *objs, "sandbox").Spec.Replicas = ptr(int32(2))
		}, "Deployment/sandbox: 2 replicas; its state is the pod's, so one"},
		{"an autoscaler without a floor", "prod", policyNamed("prod-availability"), func(t *testing.T, objs *[]Object) {
			object[*autoscalingv2.HorizontalPodAutoscaler](t, *objs, "gateway").Spec.MinReplicas = ptr(int32(1))
		}, "Deployment/gateway: no HorizontalPodAutoscaler (minReplicas >= 2, with metrics) scales it"},
		{"no PostgreSQL", "dev", DevPolicies()[0], func(t *testing.T, objs *[]Object) {
			remove(objs, "StatefulSet", "postgres")
		}, "no PostgreSQL StatefulSet with the pgvector image"},
		{"PostgreSQL open to everyone", "dev", DevPolicies()[0], func(t *testing.T, objs *[]Object) {
			object[*networkingv1.NetworkPolicy](t, *objs, "postgres").Spec.Ingress[0].From = nil
		}, "StatefulSet/postgres: reachable from outside the namespace"},
		{"PostgreSQL open to the collector", "dev", DevPolicies()[0], func(t *testing.T, objs *[]Object) {
			np := object[*networkingv1.NetworkPolicy](t, *objs, "postgres")
			np.Spec.Ingress[0].From[0].PodSelector.MatchExpressions[0].Values = append(np.Spec.Ingress[0].From[0].PodSelector.MatchExpressions[0].Values, "telemetry")
		}, "StatefulSet/postgres: reachable from otel-collector"},
		{"a password the role does not have", "dev", DevPolicies()[0], func(t *testing.T, objs *[]Object) {
			object[*corev1.Secret](t, *objs, "agent-db").Data["THEFOLD_DATABASE_URL"] = []byte("postgres://thefold_agent:other@postgres:5432/thefold?sslmode=disable")
		}, "the password is not the one PostgreSQL's init script gives thefold_agent"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			_, rendered := render(t, "overlays/"+c.overlay)
			if v := c.policy.Check(rendered); len(v) > 0 {
				t.Fatalf("%s: the rendered overlay already fails: %v", c.policy.Name, v)
			}
			objs := deepCopy(rendered)
			c.plant(t, &objs)
			v := c.policy.Check(objs)
			if !strings.Contains(strings.Join(v, "\n"), c.want) {
				t.Fatalf("%s reported %q, want a violation containing %q", c.policy.Name, v, c.want)
			}
			t.Logf("%s reports: %s", c.policy.Name, strings.Join(v, "; "))
		})
	}
}

func policyNamed(name string) Policy {
	for _, p := range CommonPolicies() {
		if p.Name == name {
			return p
		}
	}
	for _, p := range ProdPolicies() {
		if p.Name == name {
			return p
		}
	}
	panic("no policy " + name)
}

func ptr[T any](v T) *T { return &v }

func deepCopy(objs []Object) []Object {
	out := make([]Object, len(objs))
	for i, o := range objs {
		o.Obj = o.Obj.DeepCopyObject()
		out[i] = o
	}
	return out
}

// obj wraps an object a test adds.
func obj(x interface {
	runtime.Object
	GetName() string
}, group, version, kind string) Object {
	return Object{GVK: schema.GroupVersionKind{Group: group, Version: version, Kind: kind}, Name: x.GetName(), Obj: x}
}

// object is the object of type T named name (a generated name matches without its hash).
func object[T interface{ GetName() string }](t *testing.T, objs []Object, name string) T {
	t.Helper()
	for _, o := range objs {
		if x, ok := o.Obj.(T); ok && (x.GetName() == name || trimHash(x.GetName()) == name) {
			return x
		}
	}
	var zero T
	t.Fatalf("no %T %s", zero, name)
	return zero
}

func deployment(t *testing.T, objs []Object, name string) *appsv1.Deployment {
	return object[*appsv1.Deployment](t, objs, name)
}

func statefulSet(t *testing.T, objs []Object, name string) *appsv1.StatefulSet {
	return object[*appsv1.StatefulSet](t, objs, name)
}

func job(t *testing.T, objs []Object) *batchv1.Job {
	return object[*batchv1.Job](t, objs, "thefold-migrate")
}

// container is the server container of service's Deployment.
func container(t *testing.T, objs []Object, service string) *corev1.Container {
	return &deployment(t, objs, service).Spec.Template.Spec.Containers[0]
}

func remove(objs *[]Object, kind, name string) {
	out := (*objs)[:0]
	for _, o := range *objs {
		if o.GVK.Kind != kind || (o.Name != name && trimHash(o.Name) != name) {
			out = append(out, o)
		}
	}
	*objs = out
}
