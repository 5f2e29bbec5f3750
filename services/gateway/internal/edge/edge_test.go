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
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
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
		{"not implemented by the service", "GET", "/v1/tasks/t1", "Bearer " + tok, "", 501, ""},
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

// recordingTasks answers GetTask with the id asked for and hands the call's incoming
// metadata to the test.
type recordingTasks struct {
	tasksv1.UnimplementedTaskServiceServer
	md chan metadata.MD
}

func (s *recordingTasks) GetTask(ctx context.Context, req *tasksv1.GetTaskRequest) (*tasksv1.GetTaskResponse, error) {
	md, _ := metadata.FromIncomingContext(ctx)
	select {
	case s.md <- md:
	default:
	}
	return &tasksv1.GetTaskResponse{Task: &tasksv1.Task{Id: req.GetId()}}, nil
}

// newRecordingEdge serves the edge with lim in front of a recordingTasks.
func newRecordingEdge(t *testing.T, lim edge.Limits) (url, tok string, svc *recordingTasks) {
	t.Helper()
	svc = &recordingTasks{md: make(chan metadata.MD, 1)}
	env := grpctest.Start(t, func(s *grpc.Server) { tasksv1.RegisterTaskServiceServer(s, svc) })
	conns := map[string]*grpc.ClientConn{}
	for _, s := range edge.Services() {
		conns[s] = env.Conn
	}
	h, err := edge.New(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry(), conns, lim)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	tok, _, err = env.Signer.Issue("u7", []string{"user"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return srv.URL, tok, svc
}

// TestForwardedMetadata: the services get the token, the request id, Grpc-Metadata-*
// headers and the forwarded-for address, not grpc-gateway's copies of every permanent HTTP
// header; the response does not echo the transport's metadata back as headers.
func TestForwardedMetadata(t *testing.T) {
	t.Parallel()
	url, tok, svc := newRecordingEdge(t, edge.Limits{})
	req, _ := http.NewRequest("GET", url+"/v1/tasks/t1", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("X-Request-Id", "rid-42")
	req.Header.Set("Grpc-Metadata-Tenant", "acme")
	req.Header.Set("Cookie", "session=secret")
	req.Header.Set("User-Agent", "edge-test")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"id":"t1"`) {
		t.Fatalf("GET = %d %s", resp.StatusCode, body)
	}
	md := <-svc.md
	for k, want := range map[string]string{"authorization": "Bearer " + tok, "x-request-id": "rid-42", "tenant": "acme", "x-forwarded-for": "127.0.0.1"} {
		if got := md.Get(k); len(got) != 1 || got[0] != want {
			t.Errorf("metadata %s = %q, want [%q]", k, got, want)
		}
	}
	for k := range md {
		if strings.HasPrefix(k, "grpcgateway-") {
			t.Errorf("metadata %s forwarded", k)
		}
	}
	for k := range resp.Header {
		if strings.HasPrefix(k, "Grpc-Metadata-") {
			t.Errorf("response header %s", k)
		}
	}
	if resp.Header.Get("X-Request-Id") != "rid-42" {
		t.Errorf("X-Request-Id = %q", resp.Header.Get("X-Request-Id"))
	}
}

// TestTracing: with a tracer provider installed (telemetry.Setup does it), every request
// gets a server span named by its route that continues the caller's trace, and the
// service's call carries that trace on.
func TestTracing(t *testing.T) {
	// Not parallel: it installs the global tracer provider and propagator.
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	prevTP, prevProp := otel.GetTracerProvider(), otel.GetTextMapPropagator()
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.TraceContext{})
	t.Cleanup(func() {
		otel.SetTracerProvider(prevTP)
		otel.SetTextMapPropagator(prevProp)
		_ = tp.Shutdown(context.Background())
	})

	url, tok, svc := newRecordingEdge(t, edge.Limits{})
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	req, _ := http.NewRequest("GET", url+"/v1/tasks/t1", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	req.Header.Set("Traceparent", "00-"+traceID+"-00f067aa0ba902b7-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET = %d", resp.StatusCode)
	}
	if tp := (<-svc.md).Get("traceparent"); len(tp) != 1 || !strings.Contains(tp[0], traceID) {
		t.Errorf("the service's call carries traceparent %q, want trace %s", tp, traceID)
	}
	var server sdktrace.ReadOnlySpan
	for _, s := range spans.Ended() {
		if s.SpanKind() == trace.SpanKindServer && s.InstrumentationScope().Name == "github.com/thefold/thefold/services/gateway/internal/edge" {
			server = s
		}
	}
	if server == nil {
		t.Fatalf("no server span among %d", len(spans.Ended()))
	}
	if server.Name() != "GET /v1/tasks/{id=*}" || server.SpanContext().TraceID().String() != traceID || server.Parent().SpanID().String() != "00f067aa0ba902b7" {
		t.Errorf("server span %q trace %s parent %s", server.Name(), server.SpanContext().TraceID(), server.Parent().SpanID())
	}
	attrs := map[attribute.Key]attribute.Value{}
	for _, kv := range server.Attributes() {
		attrs[kv.Key] = kv.Value
	}
	if attrs["http.route"].AsString() != "/v1/tasks/{id=*}" || attrs["http.response.status_code"].AsInt64() != 200 || attrs["http.request.method"].AsString() != "GET" {
		t.Errorf("server span attributes %v", attrs)
	}
}

// TestCORSThroughTheEdge: a preflight is answered before the guard and the routes, with
// the request id; an actual request's answer (an error, here) carries the CORS headers.
func TestCORSThroughTheEdge(t *testing.T) {
	t.Parallel()
	url, _, _ := newRecordingEdge(t, edge.Limits{CORSOrigins: []string{"https://app.example.com"}})
	req, _ := http.NewRequest("OPTIONS", url+"/v1/tasks/t1", nil)
	req.Header.Set("Origin", "https://app.example.com")
	req.Header.Set("Access-Control-Request-Method", "GET")
	req.Header.Set("Access-Control-Request-Headers", "authorization")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		!strings.Contains(resp.Header.Get("Access-Control-Allow-Headers"), "Authorization") || resp.Header.Get("X-Request-Id") == "" {
		t.Fatalf("preflight = %d %v", resp.StatusCode, resp.Header)
	}

	req, _ = http.NewRequest("GET", url+"/v1/tasks/t1", nil) // no token: 401 from the service
	req.Header.Set("Origin", "https://app.example.com")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("Access-Control-Allow-Origin") != "https://app.example.com" ||
		!strings.Contains(resp.Header.Get("Access-Control-Expose-Headers"), "WWW-Authenticate") {
		t.Fatalf("actual request = %d %v", resp.StatusCode, resp.Header)
	}

	req, _ = http.NewRequest("OPTIONS", url+"/v1/tasks/t1", nil)
	req.Header.Set("Origin", "https://evil.example.com")
	req.Header.Set("Access-Control-Request-Method", "DELETE")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(b), `"status":"PERMISSION_DENIED"`) || !strings.Contains(string(b), `"request_id":"`) {
		t.Fatalf("refused preflight = %d %s", resp.StatusCode, b)
	}
}

func TestBadCORSConfigRefused(t *testing.T) {
	t.Parallel()
	_, err := edge.New(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry(),
		map[string]*grpc.ClientConn{}, edge.Limits{CORSOrigins: []string{"*", "https://a.example"}})
	if err == nil || !strings.Contains(err.Error(), "CORS") {
		t.Fatalf("New with a bad CORS list: %v", err)
	}
}
