// Package k8s holds TheFold's Kubernetes manifests (a kustomize tree: base/ and the
// overlays dev/ and prod/) and the code that checks them without a cluster: Render builds
// an overlay in process with the kustomize API that `kubectl kustomize` and
// `kubectl apply -k` use, Decode turns every rendered object into its Kubernetes API type
// and refuses unknown kinds and unknown fields (as the API server's strict field
// validation does), and Policies are the rules the manifests must keep (policy.go).
package k8s

import (
	"bytes"
	"fmt"

	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Render builds the kustomization in dir of fsys, with kustomize's defaults (files only from
// within the kustomization's root, built-in generators and transformers only), and returns
// the objects as one YAML stream.
func Render(fsys filesys.FileSystem, dir string) ([]byte, error) {
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	var out bytes.Buffer
	for i, r := range m.Resources() {
		b, err := r.AsYAML()
		if err != nil {
			return nil, fmt.Errorf("kustomize %s: %s: %w", dir, r.CurId(), err)
		}
		if i > 0 {
			out.WriteString("---\n")
		}
		out.Write(b)
	}
	return out.Bytes(), nil
}
