package kube_test

import (
	"bytes"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/services/sandbox/internal/backend/kube"
	"github.com/thefold/thefold/services/sandbox/internal/backend/kube/kubetest"
)

// TestRESTExecutorAsksForTheExec checks the request the real Executor makes (a server that
// refuses every upgrade stands in for the API server): pods/exec of the pod's sandbox
// container with the argv, over WebSocket first and SPDY when that is refused. The
// streaming itself needs a real cluster.
func TestRESTExecutorAsksForTheExec(t *testing.T) {
	t.Parallel()
	type request struct {
		method, path string
		query        map[string][]string
	}
	var mu sync.Mutex
	var got []request
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, request{r.Method, r.URL.Path, r.URL.Query()})
		mu.Unlock()
		http.Error(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403}`, http.StatusForbidden)
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ex := kube.NewRESTExecutor(cfg, core.RESTClient())
	argv := []string{"/bin/sh", "-c", "echo 'a b'"}
	err = ex.Exec(t.Context(), "ns1", "pod1", kube.Container, argv, bytes.NewReader([]byte("in")), &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil {
		t.Fatal("an exec the server refused succeeded")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 2 || got[0].method != http.MethodGet || got[1].method != http.MethodPost {
		t.Fatalf("requests %+v: want a WebSocket GET, then the SPDY POST", got)
	}
	for _, r := range got {
		if r.path != "/api/v1/namespaces/ns1/pods/pod1/exec" {
			t.Errorf("%s %s: want pods/exec of ns1/pod1", r.method, r.path)
		}
		if !slices.Equal(r.query["command"], argv) || !slices.Equal(r.query["container"], []string{kube.Container}) ||
			!slices.Equal(r.query["stdin"], []string{"true"}) || !slices.Equal(r.query["stdout"], []string{"true"}) ||
			!slices.Equal(r.query["stderr"], []string{"true"}) || r.query["tty"] != nil {
			t.Errorf("%s query %v: want the argv, the sandbox container, stdin/stdout/stderr and no tty", r.method, r.query)
		}
	}
}

func TestRESTConfig(t *testing.T) {
	// Not parallel: it changes the environment.
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	if _, err := kube.RESTConfig(""); !errors.Is(err, errs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "THEFOLD_SANDBOX_KUBECONFIG") {
		t.Errorf("outside a cluster without a kubeconfig: %v; want an error naming THEFOLD_SANDBOX_KUBECONFIG", err)
	}
	missing := filepath.Join(t.TempDir(), "nope")
	if _, err := kube.RESTConfig(missing); err == nil || !strings.Contains(err.Error(), "THEFOLD_SANDBOX_KUBECONFIG") {
		t.Errorf("missing kubeconfig: %v", err)
	}
	bad := filepath.Join(t.TempDir(), "bad")
	if err := os.WriteFile(bad, []byte("not: [yaml"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RESTConfig(bad); err == nil || !strings.Contains(err.Error(), "THEFOLD_SANDBOX_KUBECONFIG") {
		t.Errorf("malformed kubeconfig: %v", err)
	}
	good := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(good, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://k8s.example:6443"}}]
users: [{name: u, user: {token: t0ken}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := kube.RESTConfig(good)
	if err != nil || cfg.Host != "https://k8s.example:6443" || cfg.BearerToken != "t0ken" {
		t.Fatalf("kubeconfig: %v %+v", err, cfg)
	}
}

func TestNamespaceDefaultsToTheServicesOwn(t *testing.T) {
	t.Parallel()
	if _, err := os.Stat(kube.ServiceAccountNamespace); err == nil {
		t.Skip("this test runs in a pod: its namespace is the default")
	}
	c := kubetest.NewCluster(t)
	_, err := kube.New(t.Context(), c.Core, c.Net, kubetest.NewLocalExecutor(t, c), kube.Config{})
	if !errors.Is(err, errs.ErrFailedPrecondition) || !strings.Contains(err.Error(), "THEFOLD_SANDBOX_KUBE_NAMESPACE") {
		t.Fatalf("New without a namespace outside a pod: %v; want an error naming THEFOLD_SANDBOX_KUBE_NAMESPACE", err)
	}
}
