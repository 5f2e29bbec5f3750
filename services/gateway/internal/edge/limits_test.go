package edge_test

import (
	"bufio"
	"context"
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
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/grpcclient"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/testenv"
	"github.com/thefold/thefold/services/gateway/internal/authsvc"
	"github.com/thefold/thefold/services/gateway/internal/edge"
)

// slowWatch is a TaskService whose WatchTasks sends one event, waits past the REST
// server's write timeout, sends another and ends.
type slowWatch struct {
	tasksv1.UnimplementedTaskServiceServer
	pause time.Duration
}

func (s slowWatch) WatchTasks(_ *tasksv1.WatchTasksRequest, stream grpc.ServerStreamingServer[tasksv1.WatchTasksResponse]) error {
	if err := stream.Send(&tasksv1.WatchTasksResponse{Id: 1}); err != nil {
		return err
	}
	select {
	case <-time.After(s.pause):
	case <-stream.Context().Done():
		return stream.Context().Err()
	}
	return stream.Send(&tasksv1.WatchTasksResponse{Id: 2})
}

// edgeEnv serves the edge with lim and the given http.Server settings in front of one gRPC
// server with AuthService and a slowWatch TaskService; services named in down get a
// connection to a port where nothing listens.
func edgeEnv(t *testing.T, lim edge.Limits, configure func(*http.Server), down ...string) (string, string) {
	t.Helper()
	env := grpctest.Start(t, func(s *grpc.Server) {
		gatewayv1.RegisterAuthServiceServer(s, &authsvc.Server{})
		tasksv1.RegisterTaskServiceServer(s, slowWatch{pause: 300 * time.Millisecond})
	})
	conns := map[string]*grpc.ClientConn{}
	for _, svc := range edge.Services() {
		conns[svc] = env.Conn
	}
	for _, svc := range down {
		c, err := grpcclient.Dial(testenv.RefusedAddr(t), grpcclient.Options{RetryMethods: grpcclient.ReadOnlyMethods("thefold." + svc + ".v1")})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		conns[svc] = c
	}
	h, err := edge.New(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry(), conns, lim)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	if configure != nil {
		configure(srv.Config)
	}
	srv.Start()
	t.Cleanup(srv.Close)
	tok, _, err := env.Signer.Issue("u7", []string{"user"}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return srv.URL, tok
}

type reply struct {
	code      int
	body      string
	requestID string
}

func do(t *testing.T, req *http.Request) reply {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return reply{resp.StatusCode, string(b), resp.Header.Get("X-Request-Id")}
}

// TestBadBytesAtTheEdge: header and body bytes that gRPC cannot carry are a 4xx with a
// clear message (or a fresh request id), never a 500 with grpc-go's message.
func TestBadBytesAtTheEdge(t *testing.T) {
	t.Parallel()
	url, tok := edgeEnv(t, edge.Limits{}, nil)
	cases := []struct {
		name, method, path, body string
		header                   map[string]string
		code                     int
		in                       string
	}{
		{"tab in X-Request-Id", "GET", "/v1/auth/whoami", "", map[string]string{"X-Request-Id": "abc\tdef"}, 200, `"user_id":"u7"`},
		{"non-ASCII X-Request-Id", "GET", "/v1/auth/whoami", "", map[string]string{"X-Request-Id": "abc\x80"}, 200, `"user_id":"u7"`},
		{"non-ASCII Authorization", "GET", "/v1/auth/whoami", "", map[string]string{"Authorization": "Bearer " + tok + "\xc3\xa9"}, 401, "Authorization header: control or non-ASCII"},
		{"tab in Authorization", "GET", "/v1/auth/whoami", "", map[string]string{"Authorization": "Bearer\t" + tok}, 401, "Authorization header"},
		{"non-ASCII User-Agent dropped", "GET", "/v1/auth/whoami", "", map[string]string{"User-Agent": "caf\xc3\xa9"}, 200, `"user_id":"u7"`},
		{"bad Grpc-Metadata key dropped", "GET", "/v1/auth/whoami", "", map[string]string{"Grpc-Metadata-A!b": "x"}, 200, `"user_id":"u7"`},
		{"NUL in a title", "POST", "/v1/tasks", `{"title":"a\u0000b","repo":"o/r"}`, nil, 400, "title"},
		{"invalid UTF-8 in a path", "GET", "/v1/tasks/%FF", "", nil, 400, "id"},
		{"invalid UTF-8 in a query", "GET", "/v1/tasks?repo=%FF", "", nil, 400, "repo"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, _ := http.NewRequest(tc.method, url+tc.path, strings.NewReader(tc.body))
			req.Header.Set("Authorization", "Bearer "+tok)
			for k, v := range tc.header {
				req.Header[k] = []string{v}
			}
			got := do(t, req)
			if got.code != tc.code || !strings.Contains(got.body, tc.in) {
				t.Fatalf("%d %s; want %d containing %q", got.code, got.body, tc.code, tc.in)
			}
			if id := got.requestID; len(id) != 36 && tc.header["X-Request-Id"] != "" {
				t.Errorf("request id %q, want a fresh one", id)
			}
		})
	}
}

// TestBodyLimit: a body above the limit is 413 with a clear message, with or without a
// Content-Length, and is not read whole first.
func TestBodyLimit(t *testing.T) {
	t.Parallel()
	url, tok := edgeEnv(t, edge.Limits{}, nil)
	small, smallTok := edgeEnv(t, edge.Limits{MaxBodyBytes: 1024}, nil)
	big := `{"title":"` + strings.Repeat("x", 50<<20) + `","repo":"o/r"}`
	cases := []struct {
		name, url, tok, body string
		chunked              bool
		code                 int
		in                   string
	}{
		{"50 MB body", url, tok, big, false, 413, "request body too large: at most 4194304 bytes"},
		{"chunked above the limit", small, smallTok, strings.Repeat(" ", 2000) + "{}", true, 413, "at most 1024 bytes"},
		{"under the limit", small, smallTok, `{"title":"a","repo":"o/r"}`, true, 501, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var body io.Reader = strings.NewReader(tc.body)
			if tc.chunked {
				body = io.MultiReader(body) // unknown length: sent chunked
			}
			req, _ := http.NewRequest("POST", tc.url+"/v1/tasks", body)
			req.Header.Set("Authorization", "Bearer "+tc.tok)
			got := do(t, req)
			if got.code != tc.code || !strings.Contains(got.body, tc.in) {
				t.Fatalf("%d %.200s; want %d containing %q", got.code, got.body, tc.code, tc.in)
			}
		})
	}
}

// TestDownServiceFailsFast: the edge answers 503 at once when a service is down, instead of
// waiting for it until the call's deadline (30 s by default).
func TestDownServiceFailsFast(t *testing.T) {
	t.Parallel()
	url, tok := edgeEnv(t, edge.Limits{}, nil, "tasks")
	for _, path := range []string{"/v1/tasks", "/v1/tasks:stats"} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		req, _ := http.NewRequestWithContext(ctx, "GET", url+path, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		start := time.Now()
		got := do(t, req)
		cancel()
		if elapsed := time.Since(start); got.code != 503 || elapsed > 5*time.Second {
			t.Errorf("GET %s = %d %s after %s; want 503 well under the deadline", path, got.code, got.body, elapsed)
		}
	}
}

// TestWatchOutlivesWriteTimeout: the server's write timeout bounds ordinary requests, not a
// Watch stream.
func TestWatchOutlivesWriteTimeout(t *testing.T) {
	t.Parallel()
	url, tok := edgeEnv(t, edge.Limits{}, func(s *http.Server) {
		s.WriteTimeout = 100 * time.Millisecond // the stream pauses 300 ms between events
		s.ReadTimeout = 100 * time.Millisecond
	})
	req, _ := http.NewRequest("GET", url+"/v1/tasks:watch", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) != 2 || !strings.Contains(lines[1], `"id":"2"`) {
		t.Fatalf("stream = %q (%v); want both events", lines, sc.Err())
	}
}
