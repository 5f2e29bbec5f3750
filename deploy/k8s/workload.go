package k8s

import (
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Services are TheFold's nine services (pkg/platform.ServiceNames).
var Services = []string{"gateway", "tasks", "memory", "skills", "ai", "sandbox", "github", "builder", "agent"}

// StatelessServices keep no state of their own between requests (it is all in PostgreSQL),
// so any number of replicas serve alike and an autoscaler may add or remove them.
var StatelessServices = []string{"gateway", "tasks", "memory", "skills", "ai"}

// The labels the manifests select by.
const (
	labelName      = "app.kubernetes.io/name"
	labelComponent = "app.kubernetes.io/component"
)

func isService(name string) bool { return slices.Contains(Services, name) }

// Workload is an object that runs pods, with its pod template.
type Workload struct {
	Object
	// PodLabels are the pod template's labels.
	PodLabels map[string]string
	Spec      *corev1.PodSpec
	// Replicas is the Deployment's or StatefulSet's spec.replicas (1 when unset), 0 for
	// other kinds.
	Replicas int32
}

// Service is the TheFold service whose pods these are ("" for none): a Deployment of
// the service's own.
func (w Workload) Service() string {
	if w.PodLabels[labelComponent] == "service" && isService(w.PodLabels[labelName]) {
		return w.PodLabels[labelName]
	}
	return ""
}

// ContainerService is the TheFold service whose binary c runs with that service's
// configuration: every container of a service's pod, and in the migrations Job the
// container named after the service.
func (w Workload) ContainerService(c corev1.Container) string {
	if s := w.Service(); s != "" {
		return s
	}
	if w.PodLabels[labelComponent] == "migrations" && isService(c.Name) {
		return c.Name
	}
	return ""
}

// Containers are the pod's init and regular containers.
func (w Workload) Containers() []corev1.Container {
	return slices.Concat(w.Spec.InitContainers, w.Spec.Containers)
}

func replicas(r *int32) int32 {
	if r == nil {
		return 1
	}
	return *r
}

// Workloads are the objects of objs that run pods.
func Workloads(objs []Object) []Workload {
	var out []Workload
	for _, o := range objs {
		w := Workload{Object: o}
		switch x := o.Obj.(type) {
		case *appsv1.Deployment:
			w.PodLabels, w.Spec, w.Replicas = x.Spec.Template.Labels, &x.Spec.Template.Spec, replicas(x.Spec.Replicas)
		case *appsv1.StatefulSet:
			w.PodLabels, w.Spec, w.Replicas = x.Spec.Template.Labels, &x.Spec.Template.Spec, replicas(x.Spec.Replicas)
		case *appsv1.DaemonSet:
			w.PodLabels, w.Spec = x.Spec.Template.Labels, &x.Spec.Template.Spec
		case *appsv1.ReplicaSet:
			w.PodLabels, w.Spec = x.Spec.Template.Labels, &x.Spec.Template.Spec
		case *batchv1.Job:
			w.PodLabels, w.Spec = x.Spec.Template.Labels, &x.Spec.Template.Spec
		case *batchv1.CronJob:
			w.PodLabels, w.Spec = x.Spec.JobTemplate.Spec.Template.Labels, &x.Spec.JobTemplate.Spec.Template.Spec
		case *corev1.Pod:
			w.PodLabels, w.Spec = x.Labels, &x.Spec
		default:
			continue
		}
		out = append(out, w)
	}
	return out
}

// ServiceDeployment is the Deployment of service, if there is one.
func ServiceDeployment(objs []Object, service string) (Workload, bool) {
	for _, w := range Workloads(objs) {
		if w.GVK.Kind == "Deployment" && w.Service() == service {
			return w, true
		}
	}
	return Workload{}, false
}

// Selects reports whether sel (nil: nothing) selects a pod with podLabels.
func Selects(sel *metav1.LabelSelector, podLabels map[string]string) bool {
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false
	}
	return s.Matches(labels.Set(podLabels))
}

// SecretRefs are the Secrets container c of spec reads: through env, envFrom, and the
// volumes it mounts (secret and projected ones). A Secret volume no container mounts
// counts for every container.
func SecretRefs(spec *corev1.PodSpec, c corev1.Container) []string {
	refs := map[string]bool{}
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil {
			refs[e.ValueFrom.SecretKeyRef.Name] = true
		}
	}
	for _, e := range c.EnvFrom {
		if e.SecretRef != nil {
			refs[e.SecretRef.Name] = true
		}
	}
	mounted := map[string]bool{}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		for _, m := range c.VolumeMounts {
			mounted[m.Name] = true
		}
	}
	mine := map[string]bool{}
	for _, m := range c.VolumeMounts {
		mine[m.Name] = true
	}
	for _, v := range spec.Volumes {
		if !mine[v.Name] && mounted[v.Name] {
			continue
		}
		for _, s := range volumeSecrets(v) {
			refs[s] = true
		}
	}
	return slices.Sorted(maps.Keys(refs))
}

func volumeSecrets(v corev1.Volume) []string {
	var out []string
	if v.Secret != nil {
		out = append(out, v.Secret.SecretName)
	}
	if v.Projected != nil {
		for _, s := range v.Projected.Sources {
			if s.Secret != nil {
				out = append(out, s.Secret.Name)
			}
		}
	}
	return out
}

// Env is container c's environment as far as the manifests say it: literal values and the
// ConfigMaps it reads (envFrom, configMapKeyRef) found in objs. Later entries win, env over
// envFrom, as in Kubernetes.
func Env(objs []Object, c corev1.Container) map[string]string {
	cms := map[string]*corev1.ConfigMap{}
	for _, o := range objs {
		if cm, ok := o.Obj.(*corev1.ConfigMap); ok {
			cms[cm.Name] = cm
		}
	}
	env := map[string]string{}
	for _, e := range c.EnvFrom {
		if e.ConfigMapRef != nil && cms[e.ConfigMapRef.Name] != nil {
			for k, v := range cms[e.ConfigMapRef.Name].Data {
				env[e.Prefix+k] = v
			}
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			env[e.Name] = e.Value
		case e.ValueFrom.ConfigMapKeyRef != nil && cms[e.ValueFrom.ConfigMapKeyRef.Name] != nil:
			env[e.Name] = cms[e.ValueFrom.ConfigMapKeyRef.Name].Data[e.ValueFrom.ConfigMapKeyRef.Key]
		default:
			delete(env, e.Name) // from a Secret: not known here
		}
	}
	return env
}

// imageRepo is the last path segment of an image reference without tag or digest:
// "registry.example.com/thefold/tasks:v1" -> "tasks".
func imageRepo(image string) string {
	if i := strings.IndexByte(image, '@'); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndexByte(image, '/'); i >= 0 {
		image = image[i+1:]
	}
	if i := strings.IndexByte(image, ':'); i >= 0 {
		image = image[:i]
	}
	return image
}

// secretsByName indexes the Secrets of objs.
func secretsByName(objs []Object) map[string]*corev1.Secret {
	out := map[string]*corev1.Secret{}
	for _, o := range objs {
		if s, ok := o.Obj.(*corev1.Secret); ok {
			out[s.Name] = s
		}
	}
	return out
}

// secretValue is key of s, from data or stringData.
func secretValue(s *corev1.Secret, key string) (string, bool) {
	if v, ok := s.StringData[key]; ok {
		return v, true
	}
	v, ok := s.Data[key]
	return string(v), ok
}
