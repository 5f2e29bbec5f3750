package k8s

import (
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
)

// TestSecretsKustomizationReplacesEveryPlaceholder: secrets.kustomization.yaml, copied next
// to the keys `thefold init` writes (the README's steps), with its commented entries taken
// in (a provider key, the sandbox pods' image and RuntimeClass, a database URL) and the operator's
// registry added (`images:`), builds; it replaces every placeholder Secret and ConfigMap
// value with the files' contents, moves the image in the Deployment and the migrations Job
// alike, and the result still keeps every policy (each Secret still reaches only its
// service).
func TestSecretsKustomizationReplacesEveryPlaceholder(t *testing.T) {
	t.Parallel()
	fsys := copyTree(t, "/repo/deploy/k8s")
	tmpl, err := fsys.ReadFile("/repo/deploy/k8s/secrets.kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// Uncomment the commented entries ("  # - name: ...", "  #   ..."), not the prose.
	lines := strings.Split(string(tmpl), "\n")
	for i, l := range lines {
		if rest, ok := strings.CutPrefix(l, "  # "); ok && (strings.HasPrefix(rest, "- ") || strings.HasPrefix(rest, "  ")) {
			lines[i] = "  " + rest
		}
	}
	write(t, fsys, "/repo/.thefold/kustomization.yaml", strings.Join(lines, "\n")+`
images:
  - name: thefold/tasks
    newName: registry.example.com/thefold/tasks
    newTag: v1.2.3
`)
	// The layout of .thefold/keys (pkg/auth/keys.go, cmd/thefold init), with stand-ins, and
	// the operator's own files.
	files := map[string]string{
		"keys/signing-key.pem":       "-----BEGIN PRIVATE KEY-----\nsigning\n-----END PRIVATE KEY-----\n",
		"keys/signing-key.pub.pem":   "-----BEGIN PUBLIC KEY-----\nsigning\n-----END PUBLIC KEY-----\n",
		"keys/replaced-admin-tokens": "tok1 1999999999\n",
		"keys/github-secret.key":     strings.Repeat("ab", 32) + "\n",
		"keys/agent-secret.key":      strings.Repeat("cd", 32) + "\n",
		"ai.env":                     "ANTHROPIC_API_KEY=sk-stand-in\n",
		"db/tasks.env":               "THEFOLD_DATABASE_URL=postgres://thefold_tasks:dev-tasks@postgres:5432/thefold?sslmode=disable\n",
	}
	for _, s := range Services {
		files["keys/service-keys/"+s+".pub.pem"] = "-----BEGIN PUBLIC KEY-----\n" + s + "\n-----END PUBLIC KEY-----\n"
		files["keys/service-private/"+s+".pem"] = "-----BEGIN PRIVATE KEY-----\n" + s + "\n-----END PRIVATE KEY-----\n"
	}
	for p, c := range files {
		write(t, fsys, "/repo/.thefold/"+p, c)
	}
	b, err := Render(fsys, "/repo/.thefold")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{ // Secret or ConfigMap name prefix, key -> content
		"gateway-signing-key/signing-key.pem":                 files["keys/signing-key.pem"],
		"gateway-replaced-admin-tokens/replaced-admin-tokens": files["keys/replaced-admin-tokens"],
		"github-secret-key/github-secret.key":                 files["keys/github-secret.key"],
		"agent-secret-key/agent-secret.key":                   files["keys/agent-secret.key"],
		"thefold-public-keys/signing-key.pub.pem":             files["keys/signing-key.pub.pem"],
		"sandbox-config/THEFOLD_SANDBOX_KUBE_IMAGE":           "registry.example.com/thefold/sandbox-image:v1",
		"sandbox-config/THEFOLD_SANDBOX_KUBE_RUNTIME_CLASS":   "gvisor",
		"sandbox-config/THEFOLD_SANDBOX_BACKENDS":             "kubernetes",
		"ai-provider-keys/ANTHROPIC_API_KEY":                  "sk-stand-in",
		"tasks-db/THEFOLD_DATABASE_URL":                       "postgres://thefold_tasks:dev-tasks@postgres:5432/thefold?sslmode=disable",
	}
	for _, s := range Services {
		want[s+"-service-key/service-key.pem"] = files["keys/service-private/"+s+".pem"]
		want["thefold-public-keys/"+s+".pub.pem"] = files["keys/service-keys/"+s+".pub.pem"]
	}
	got := map[string]string{}
	for _, o := range objs {
		switch x := o.Obj.(type) {
		case *corev1.Secret:
			for k, v := range x.Data {
				got[trimHash(x.Name)+"/"+k] = string(v)
				if strings.Contains(string(v), "REPLACE-ME") {
					t.Errorf("%s: %s is still a placeholder", o, k)
				}
			}
		case *corev1.ConfigMap:
			for k, v := range x.Data {
				got[trimHash(x.Name)+"/"+k] = v
				if strings.Contains(v, "REPLACE-ME") {
					t.Errorf("%s: %s is still a placeholder", o, k)
				}
			}
		}
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %q, want the file's %q", k, got[k], v)
		}
	}
	for _, p := range slices.Concat(CommonPolicies(), DevPolicies()) {
		for _, v := range p.Check(objs) {
			t.Errorf("%s: %s", p.Name, v)
		}
	}
	// The image moved to the operator's registry, in the Deployment and the Job alike.
	const image = "registry.example.com/thefold/tasks:v1.2.3"
	seen := 0
	for _, o := range objs {
		var cs []corev1.Container
		switch x := o.Obj.(type) {
		case *appsv1.Deployment:
			cs = x.Spec.Template.Spec.Containers
		case *batchv1.Job:
			cs = x.Spec.Template.Spec.Containers
		}
		for _, c := range cs {
			if imageRepo(c.Image) == "tasks" {
				seen++
				if c.Image != image {
					t.Errorf("%s: container %s: image %s, want %s", o, c.Name, c.Image, image)
				}
			}
		}
	}
	if seen != 2 {
		t.Errorf("%d containers run the tasks image, want 2 (Deployment and migrations Job)", seen)
	}
}

// trimHash drops the content hash kustomize appends to a generated name.
func trimHash(name string) string {
	if i := strings.LastIndexByte(name, '-'); i > 0 && len(name)-i-1 == 10 {
		return name[:i]
	}
	return name
}
