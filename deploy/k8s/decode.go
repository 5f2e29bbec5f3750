package k8s

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// Object is one rendered Kubernetes object, decoded into its API type (Obj is a
// *appsv1.Deployment, a *corev1.Secret, ...).
type Object struct {
	GVK       schema.GroupVersionKind
	Name      string
	Namespace string
	Labels    map[string]string
	Obj       runtime.Object
}

func (o Object) String() string { return o.GVK.Kind + "/" + o.Name }

// The API groups the manifests may use. A kind outside them fails Decode: adding one is a
// deliberate change here, not a typo in an apiVersion that a cluster would refuse.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		corev1.AddToScheme, appsv1.AddToScheme, batchv1.AddToScheme, networkingv1.AddToScheme,
		rbacv1.AddToScheme, policyv1.AddToScheme, autoscalingv2.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(err) // unreachable: the groups' registrations are static
		}
	}
	return s
}()

// strict decodes YAML as the API server does with strict field validation: an unknown
// field, a field in the wrong case or a duplicated field is an error, not ignored.
var strict = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme, scheme,
	kjson.SerializerOptions{Yaml: true, Strict: true})

// Decode splits a YAML stream into objects and decodes each strictly into its API type.
// It reports every object that fails, not only the first.
func Decode(stream []byte) ([]Object, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var objs []Object
	var errs []error
	for i := 0; ; i++ {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		o, err := DecodeObject(doc)
		if err != nil {
			errs = append(errs, fmt.Errorf("document %d: %w", i, err))
			continue
		}
		objs = append(objs, o)
	}
	return objs, errors.Join(errs...)
}

// DecodeObject strictly decodes one object.
func DecodeObject(doc []byte) (Object, error) {
	obj, gvk, err := strict.Decode(doc, nil, nil)
	if err != nil {
		// A strict decoding error comes with the object decoded anyway: name it.
		if obj != nil {
			if m, merr := meta.Accessor(obj); merr == nil {
				return Object{}, fmt.Errorf("%s/%s: %w", gvk.Kind, m.GetName(), err)
			}
		}
		return Object{}, err
	}
	m, err := meta.Accessor(obj)
	if err != nil {
		return Object{}, fmt.Errorf("%s: %w", gvk, err)
	}
	return Object{GVK: *gvk, Name: m.GetName(), Namespace: m.GetNamespace(), Labels: m.GetLabels(), Obj: obj}, nil
}
