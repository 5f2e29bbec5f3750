package k8s

import (
	"bytes"
	"os"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// overlays are the kustomizations `kubectl apply -k` is pointed at, with their own policies.
var overlays = []struct {
	dir      string
	policies []Policy
}{
	{"overlays/dev", DevPolicies()},
	{"overlays/prod", ProdPolicies()},
}

var rendered sync.Map // dir -> renderResult

type renderResult struct {
	yaml []byte
	objs []Object
	err  error
}

// render renders and decodes the kustomization in dir once per test binary.
func render(t *testing.T, dir string) ([]byte, []Object) {
	t.Helper()
	v, _ := rendered.LoadOrStore(dir, sync.OnceValue(func() renderResult {
		b, err := Render(filesys.MakeFsOnDisk(), dir)
		if err != nil {
			return renderResult{err: err}
		}
		objs, err := Decode(b)
		return renderResult{yaml: b, objs: objs, err: err}
	}))
	r := v.(func() renderResult)()
	if r.err != nil {
		t.Fatalf("%s: %v", dir, r.err)
	}
	return r.yaml, r.objs
}

// TestOverlaysRenderAndDecodeStrictly: both overlays build (what `kubectl kustomize` and
// `kubectl apply -k` do first, with the same kustomize API), and every object they produce
// is a known kind that decodes into its Kubernetes API type with no unknown field.
func TestOverlaysRenderAndDecodeStrictly(t *testing.T) {
	t.Parallel()
	for _, o := range overlays {
		t.Run(o.dir, func(t *testing.T) {
			t.Parallel()
			_, objs := render(t, o.dir)
			kinds := map[string]int{}
			for _, obj := range objs {
				kinds[obj.GVK.Kind]++
				if obj.GVK.Kind != "Namespace" && obj.Namespace != "thefold" {
					t.Errorf("%s: namespace %q, want thefold", obj, obj.Namespace)
				}
			}
			t.Logf("%d objects: %v", len(objs), kinds)
			for kind, min := range map[string]int{"Deployment": 10, "Service": 10, "NetworkPolicy": 11, "Job": 1, "Ingress": 1, "Namespace": 1} {
				if kinds[kind] < min {
					t.Errorf("%d %s objects, want at least %d", kinds[kind], kind, min)
				}
			}
		})
	}
}

// TestStrictDecodingRejects shows the decoding can fail: what a cluster with strict field
// validation would refuse (or, worse, silently drop) is an error here.
func TestStrictDecodingRejects(t *testing.T) {
	t.Parallel()
	_, objs := render(t, "overlays/prod")
	// A rendered Deployment as plain data, to plant mistakes in.
	var deployment map[string]any
	for _, o := range objs {
		if o.GVK.Kind == "Deployment" && o.Name == "tasks" {
			b, err := yaml.Marshal(o.Obj)
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(b, &deployment); err != nil {
				t.Fatal(err)
			}
		}
	}
	if deployment == nil {
		t.Fatal("no Deployment/tasks rendered")
	}
	container := func(d map[string]any) map[string]any {
		spec := d["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
		return spec["containers"].([]any)[0].(map[string]any)
	}
	cases := []struct {
		name  string
		plant func(d map[string]any)
		want  string
	}{
		{"unknown field in a container", func(d map[string]any) { container(d)["imagePullPolicyy"] = "Always" }, `unknown field "spec.template.spec.containers[0].imagePullPolicyy"`},
		{"field in the wrong case", func(d map[string]any) { d["spec"].(map[string]any)["Replicas"] = 3 }, `unknown field "spec.Replicas"`},
		{"field at the wrong level", func(d map[string]any) { d["spec"].(map[string]any)["containers"] = []any{} }, `unknown field "spec.containers"`},
		{"unknown kind", func(d map[string]any) { d["kind"] = "Deploymnt" }, `no kind "Deploymnt" is registered`},
		{"unknown API version", func(d map[string]any) { d["apiVersion"] = "apps/v1beta9" }, `no kind "Deployment" is registered for version "apps/v1beta9"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b, err := yaml.Marshal(deployment)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := DecodeObject(b); err != nil {
				t.Fatalf("the unchanged Deployment does not decode: %v", err)
			}
			var d map[string]any
			if err := yaml.Unmarshal(b, &d); err != nil {
				t.Fatal(err)
			}
			c.plant(d)
			if b, err = yaml.Marshal(d); err != nil {
				t.Fatal(err)
			}
			_, err = DecodeObject(b)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got error %v, want one saying %s", err, c.want)
			}
		})
	}
}

// TestStrictDecodingRejectsAMistakeInAnOverlay: a misspelt field in an overlay's patch
// renders (kustomize does not know the API's schema) and is caught by the decoding.
func TestStrictDecodingRejectsAMistakeInAnOverlay(t *testing.T) {
	t.Parallel()
	fsys := copyTree(t, "/repo/deploy/k8s")
	write(t, fsys, "/repo/deploy/k8s/overlays/typo/kustomization.yaml", `
resources: [../prod]
patches:
  - target: {kind: Deployment, name: tasks}
    patch: |-
      - op: add
        path: /spec/template/spec/containers/0/resource
        value: {limits: {cpu: "4"}}
`)
	b, err := Render(fsys, "/repo/deploy/k8s/overlays/typo")
	if err != nil {
		t.Fatalf("render: %v", err)
	}
	_, err = Decode(b)
	if err == nil || !strings.Contains(err.Error(), `Deployment/tasks: strict decoding error: unknown field "spec.template.spec.containers[0].resource"`) {
		t.Fatalf("got %v, want the misspelt field reported", err)
	}
}

// TestPolicies runs every policy over both overlays.
func TestPolicies(t *testing.T) {
	t.Parallel()
	callers := sourceCallGraph(t)
	for _, o := range overlays {
		_, objs := render(t, o.dir)
		for _, p := range slices.Concat(CommonPolicies(), []Policy{CallerGraph(callers)}, o.policies) {
			t.Run(o.dir+"/"+p.Name, func(t *testing.T) {
				for _, v := range p.Check(objs) {
					t.Error(v)
				}
			})
		}
	}
}

// TestDevInitScriptIsDeployDBRoles: the dev overlay's copy of deploy/db-roles.sh (kustomize
// reads no file outside the overlay) is the script itself.
func TestDevInitScriptIsDeployDBRoles(t *testing.T) {
	t.Parallel()
	want, err := os.ReadFile("../db-roles.sh")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("overlays/dev/db-roles.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("deploy/k8s/overlays/dev/db-roles.sh differs from deploy/db-roles.sh: cp deploy/db-roles.sh deploy/k8s/overlays/dev/")
	}
	_, objs := render(t, "overlays/dev")
	for _, o := range objs {
		if cm, ok := o.Obj.(*corev1.ConfigMap); ok && strings.HasPrefix(cm.Name, "postgres-initdb") {
			if cm.Data["db-roles.sh"] != string(want) {
				t.Fatalf("%s does not hold deploy/db-roles.sh", o)
			}
			return
		}
	}
	t.Fatal("no postgres-initdb ConfigMap in overlays/dev")
}

// TestNoRealKeysCommitted: the committed Secrets hold placeholders or laptop defaults, never
// a key.
func TestNoRealKeysCommitted(t *testing.T) {
	t.Parallel()
	for _, o := range overlays {
		_, objs := render(t, o.dir)
		for _, obj := range objs {
			s, ok := obj.Obj.(*corev1.Secret)
			if !ok {
				continue
			}
			for k, v := range s.Data {
				if strings.Contains(string(v), "PRIVATE KEY") || (strings.HasSuffix(k, ".pem") || strings.HasSuffix(k, ".key")) && !strings.HasPrefix(string(v), "REPLACE-ME") {
					t.Errorf("%s: %s: %s key %s is not a REPLACE-ME placeholder", o.dir, obj, s.Name, k)
				}
			}
		}
	}
}
