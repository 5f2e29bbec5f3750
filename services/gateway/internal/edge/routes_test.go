package edge

import (
	"encoding/json"
	"testing"

	"github.com/thefold/thefold/pkg/contracts"
	"github.com/thefold/thefold/pkg/gen/openapi"
)

func TestPathPrefix(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"/v1/tasks/0196/x": "/v1/tasks", "/v1/tasks:batchCreate": "/v1/tasks", "/v1/tasks": "/v1/tasks",
		"/v1/jobs/7:watch": "/v1/jobs", "/v1/": "", "/v1": "", "/": "", "": "", "/healthz": "", "v1/tasks": "",
	} {
		if got := pathPrefix(in); got != want {
			t.Errorf("pathPrefix(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestRoutePrefixes: every route of the OpenAPI document has the prefix of the one service
// that serves it, so requests are dispatched to that service's mux.
func TestRoutePrefixes(t *testing.T) {
	t.Parallel()
	got := routePrefixes(openapi.Spec, contracts.All)
	if got == nil {
		t.Fatal("routePrefixes gave up on the OpenAPI document: every request goes through the mux with every route")
	}
	var doc struct {
		Paths map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openapi.Spec, &doc); err != nil {
		t.Fatal(err)
	}
	for path := range doc.Paths {
		if _, ok := got[pathPrefix(path)]; !ok {
			t.Errorf("no service for %s", path)
		}
	}
	for prefix, want := range map[string]string{"/v1/tasks": "tasks", "/v1/ai": "ai", "/v1/jobs": "agent", "/v1/projects": "agent", "/v1/auth": "gateway", "/v1/repos": "github"} {
		if got[prefix] != want {
			t.Errorf("%s → %q, want %q", prefix, got[prefix], want)
		}
	}

	shared := []byte(`{"paths":{"/v1/x/{id}":{"get":{"operationId":"TaskService_GetTask"}},"/v1/x":{"get":{"operationId":"RepoService_ListRepos"}}}}`)
	if got := routePrefixes(shared, contracts.All); got != nil {
		t.Errorf("a prefix two services share: %v, want nil", got)
	}
	variable := []byte(`{"paths":{"/v1/{name=tasks/*}":{"get":{"operationId":"TaskService_GetTask"}}}}`)
	if got := routePrefixes(variable, contracts.All); got != nil {
		t.Errorf("a variable prefix: %v, want nil", got)
	}
	unknown := []byte(`{"paths":{"/v1/x":{"get":{"operationId":"NoService_Get"}}}}`)
	if got := routePrefixes(unknown, contracts.All); got != nil {
		t.Errorf("an unknown operation: %v, want nil", got)
	}
}
