package edge_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"

	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/services/gateway/internal/authsvc"
	"github.com/thefold/thefold/services/gateway/internal/edge"
)

// newEdge serves the edge in front of one real gRPC server that plays every service
// (only AuthService is registered; the rest answer Unimplemented).
func newEdge(t *testing.T) (*httptest.Server, *grpctest.Env) {
	t.Helper()
	srv, env, _ := newEdgeWithRegistry(t)
	return srv, env
}

func newEdgeWithRegistry(t *testing.T) (*httptest.Server, *grpctest.Env, *prometheus.Registry) {
	t.Helper()
	env := grpctest.Start(t, func(s *grpc.Server) { gatewayv1.RegisterAuthServiceServer(s, &authsvc.Server{}) })
	conns := map[string]*grpc.ClientConn{}
	for _, svc := range edge.Services() {
		conns[svc] = env.Conn
	}
	reg := prometheus.NewRegistry()
	h, err := edge.New(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), reg, conns, edge.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, env, reg
}

func TestEdge(t *testing.T) {
	t.Parallel()
	srv, env := newEdge(t)
	tok, _, err := env.Signer.Issue("u7", []string{"user"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, method, path, auth, body string
		wantCode                       int
		wantIn                         string
	}{
		{"whoami with token", "GET", "/v1/auth/whoami", "Bearer " + tok, "", 200, `"user_id":"u7"`},
		{"whoami without token", "GET", "/v1/auth/whoami", "", "", 401, "missing bearer token"},
		{"whoami with garbage token", "GET", "/v1/auth/whoami", "Bearer x.y.z", "", 401, "invalid"},
		{"malformed JSON body", "POST", "/v1/auth/api-keys", "Bearer " + tok, "{not json", 400, ""},
		{"unknown field in body", "POST", "/v1/auth/api-keys", "Bearer " + tok, `{"nope":1}`, 400, ""},
		{"not yet implemented", "GET", "/v1/auth/api-keys", "Bearer " + tok, "", 501, ""},
		{"unknown route", "GET", "/v1/nothing-here", "Bearer " + tok, "", 404, ""},
		{"openapi", "GET", "/openapi.json", "", "", 200, `"/v1/tasks"`},
		{"healthz", "GET", "/healthz", "", "", 200, "ok"},
		{"readyz", "GET", "/readyz", "", "", 200, "ok"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest(tc.method, srv.URL+tc.path, strings.NewReader(tc.body))
			if tc.auth != "" {
				req.Header.Set("Authorization", tc.auth)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.wantCode || !strings.Contains(string(b), tc.wantIn) {
				t.Fatalf("%s %s = %d %s; want %d containing %q", tc.method, tc.path, resp.StatusCode, b, tc.wantCode, tc.wantIn)
			}
			if resp.Header.Get("X-Content-Type-Options") != "nosniff" {
				t.Error("security headers missing")
			}
		})
	}
}

func TestOpenAPIHasOnlyPublicRPCs(t *testing.T) {
	t.Parallel()
	srv, _ := newEdge(t)
	resp, err := http.Get(srv.URL + "/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var spec struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&spec); err != nil {
		t.Fatal(err)
	}
	ops := map[string]bool{}
	for _, methods := range spec.Paths {
		for _, op := range methods {
			ops[op.OperationID] = true
		}
	}
	for _, public := range []string{"TaskService_CreateTask", "TaskService_WatchTasks", "AuthService_WhoAmI", "AgentService_StartTask",
		"ReviewService_ApproveReview", "UserService_CreateUser", "MemoryService_StoreMemory", "SkillService_ResolveSkills",
		"SkillService_ExecutePostRun", "RepoService_CreatePullRequest", "RepoService_GetPullRequestDiff", "BuilderService_StartBuild",
		"AgentService_WatchJob", "BuilderService_WatchBuild"} {
		if !ops[public] {
			t.Errorf("public RPC %s missing", public)
		}
	}
	for _, internal := range []string{"SandboxService_RunCommand", "SandboxService_WriteFile", "AIService_GenerateFile",
		"AIService_Embed", "BuilderService_RetryStep", "SkillService_LogResult"} {
		if ops[internal] {
			t.Errorf("internal RPC %s exposed", internal)
		}
	}
}

func TestRequestIDsAndMetrics(t *testing.T) {
	t.Parallel()
	srv, env, reg := newEdgeWithRegistry(t)
	tok, _, _ := env.Signer.Issue("u7", []string{"user"}, time.Hour)
	get := func(auth, reqID string) *http.Response {
		req, _ := http.NewRequest("GET", srv.URL+"/v1/auth/whoami", nil)
		if auth != "" {
			req.Header.Set("Authorization", "Bearer "+auth)
		}
		if reqID != "" {
			req.Header.Set("X-Request-Id", reqID)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp
	}
	if got := get(tok, "abc-123").Header.Get("X-Request-Id"); got != "abc-123" {
		t.Errorf("request id not echoed: %q", got)
	}
	if got := get(tok, "").Header.Get("X-Request-Id"); len(got) != 36 {
		t.Errorf("no generated request id: %q", got)
	}
	get("", "")

	counts := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "http_server_requests_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			counts[labels["route"]+" "+labels["method"]+" "+labels["code"]] = m.GetCounter().GetValue()
		}
	}
	if counts["/v1/auth/whoami GET 200"] != 2 || counts["/v1/auth/whoami GET 401"] != 1 {
		t.Errorf("request counts = %v", counts)
	}
}
