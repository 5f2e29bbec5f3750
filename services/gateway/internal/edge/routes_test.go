package edge

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/contracts"
	"github.com/thefold/thefold/pkg/gen/openapi"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
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

// TestFrontAnswersAsTheRootMux: skipping the root mux for a service's route changes no
// answer — redirects of unclean or escaped paths, the edge's own routes and their 405s,
// and the routes themselves come out as the root mux alone gives them.
func TestFrontAnswersAsTheRootMux(t *testing.T) {
	t.Parallel()
	newFront := func() (*front, *string) {
		reached := new(string)
		root := http.NewServeMux()
		root.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok\n")) })
		root.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ready\n")) })
		root.HandleFunc("GET /openapi.json", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) })
		mux := runtime.NewServeMux()
		_ = mux.HandlePath("GET", "/v1/tasks/{id}", func(w http.ResponseWriter, r *http.Request, p map[string]string) {
			*reached = r.URL.Path
			_, _ = w.Write([]byte("task " + p["id"]))
		})
		rt := &routes{all: mux, byPrefix: map[string]*runtime.ServeMux{"/v1/tasks": mux}}
		root.Handle("/", rt)
		return &front{root: root, routes: rt}, reached
	}
	for _, target := range []string{
		"/v1/tasks/t1", "/v1/tasks/t1?x=1", "/v1//tasks/t1", "/v1/tasks/./t1", "/v1/x/../tasks/t1", "/v1/tasks/t1/",
		"/v1/tasks/t%2F1", "/v1/tasks/t%201", "/v1/tasks/t!1", "/v1/tasks/t'(1)*", "/v1/tasks/t:1@x", "/v1/tasks/.",
		"/healthz", "/readyz", "/openapi.json", "/healthz/", "//healthz", "/health%7A", "/", "/nope", "*",
	} {
		for _, method := range []string{"GET", "POST", "HEAD"} {
			req := httptest.NewRequest(method, "http://edge"+strings.Replace(target, "*", "/", 1), nil)
			if target == "*" {
				req.RequestURI = "*"
			}
			f, fReached := newFront()
			got := httptest.NewRecorder()
			f.ServeHTTP(got, req.Clone(req.Context()))
			r, rReached := newFront()
			want := httptest.NewRecorder()
			r.root.ServeHTTP(want, req.Clone(req.Context()))
			if got.Code != want.Code || got.Body.String() != want.Body.String() || got.Header().Get("Location") != want.Header().Get("Location") ||
				got.Header().Get("Allow") != want.Header().Get("Allow") || *fReached != *rReached {
				t.Errorf("%s %s: front %d %q %v (route saw %q), root mux %d %q %v (route saw %q)", method, target,
					got.Code, got.Body, got.Header(), *fReached, want.Code, want.Body, want.Header(), *rReached)
			}
		}
	}
}

// TestJSONMarshalerAsJSONPb: the edge's marshaler writes what grpc-gateway's JSONPb with the
// same options writes, for messages and for the non-message values a response may carry.
func TestJSONMarshalerAsJSONPb(t *testing.T) {
	t.Parallel()
	opts := protojson.MarshalOptions{UseProtoNames: true}
	ours, theirs := &jsonMarshaler{runtime.JSONPb{MarshalOptions: opts}}, &runtime.JSONPb{MarshalOptions: opts}
	now := timestamppb.New(time.Date(2026, 11, 28, 11, 0, 0, 5, time.UTC))
	for _, v := range []any{
		&tasksv1.GetTaskResponse{Task: &tasksv1.Task{Id: "t1", Title: "a \"title\" <b>", Labels: []string{"x", "y"}, CreateTime: now,
			Status: tasksv1.TaskStatus_TASK_STATUS_BACKLOG}},
		&tasksv1.GetTaskResponse{}, now, []*tasksv1.Task{{Id: "a"}, {Id: "b"}}, map[string]int{"n": 1}, "text", 42, nil,
	} {
		got, gotErr := ours.Marshal(v)
		want, wantErr := theirs.Marshal(v)
		if string(got) != string(want) || (gotErr == nil) != (wantErr == nil) {
			t.Errorf("Marshal(%T) = %s, %v; JSONPb gives %s, %v", v, got, gotErr, want, wantErr)
		}
	}
}
