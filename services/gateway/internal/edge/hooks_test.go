package edge_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/grpcclient"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/testenv"
	"github.com/thefold/thefold/services/gateway/internal/edge"
)

// inboundChat is a ChatService whose HandleInbound takes requests only from the gateway
// speaking for itself, as the agent's does, records them, and answers by the body: "forged"
// does not verify, "malformed" is bad input, "broken" is the agent's own failure, "odd"
// an answer no HTTP response can carry; anything else is echoed back as JSON.
type inboundChat struct {
	agentv1.UnimplementedChatServiceServer
	mu    sync.Mutex
	reqs  []*agentv1.HandleInboundRequest
	calls []auth.Principal
}

func (c *inboundChat) HandleInbound(ctx context.Context, req *agentv1.HandleInboundRequest) (*agentv1.HandleInboundResponse, error) {
	p, _ := auth.FromContext(ctx)
	c.mu.Lock()
	c.calls = append(c.calls, p)
	c.reqs = append(c.reqs, req)
	c.mu.Unlock()
	if _, err := auth.RequireService(ctx); err != nil {
		return nil, err
	}
	if p.Service != "gateway" {
		return nil, status.Errorf(codes.PermissionDenied, "only the gateway hands inbound requests to the agent, not service %s", p.Service)
	}
	switch string(req.Body) {
	case "forged":
		return nil, status.Error(codes.Unauthenticated, "the request's signature does not verify")
	case "malformed":
		return nil, errs.Invalid("body", "not a Slack slash command")
	case "broken":
		return nil, status.Error(codes.Internal, `pq: relation "integrations" does not exist`)
	case "odd":
		return &agentv1.HandleInboundResponse{HttpStatus: 1000}, nil
	}
	return &agentv1.HandleInboundResponse{HttpStatus: http.StatusOK, ContentType: "application/json; charset=utf-8", Body: req.Body}, nil
}

func (c *inboundChat) seen() ([]*agentv1.HandleInboundRequest, []auth.Principal) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*agentv1.HandleInboundRequest(nil), c.reqs...), append([]auth.Principal(nil), c.calls...)
}

// hookEdge serves the edge with lim in front of a gRPC server playing every service with
// inboundChat as the agent's ChatService; the edge calls as service's identity ("" for
// none). agentDown points the agent's connection at a port where nothing listens.
func hookEdge(t *testing.T, lim edge.Limits, service string, agentDown bool) (string, *inboundChat, *grpctest.Env) {
	t.Helper()
	chat := &inboundChat{}
	env := grpctest.Start(t, func(s *grpc.Server) {
		agentv1.RegisterChatServiceServer(s, chat)
		agentv1.RegisterRepoEventServiceServer(s, &githubEvents{chat: chat})
		agentv1.RegisterLinearServiceServer(s, &linearEvents{chat: chat})
	})
	conns := map[string]*grpc.ClientConn{}
	for _, svc := range edge.Services() {
		conns[svc] = env.Conn
	}
	if agentDown {
		c, err := grpcclient.Dial(testenv.RefusedAddr(t), grpcclient.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		conns["agent"] = c
	}
	var opts []edge.Option
	if service != "" {
		opts = append(opts, edge.WithInboundHooks(env.ServiceSigner(t, service)))
	}
	h, err := edge.New(context.Background(), slog.New(slog.NewTextHandler(io.Discard, nil)), prometheus.NewRegistry(), conns, lim, opts...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL, chat, env
}

// post sends body to url+path with header, chunked when asked (no Content-Length).
func post(t *testing.T, url, path, body string, header map[string]string, chunked bool) (int, string, http.Header) {
	t.Helper()
	var rd io.Reader = strings.NewReader(body)
	if chunked {
		rd = io.MultiReader(rd)
	}
	req, _ := http.NewRequest(http.MethodPost, url+path, rd)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

// hookErrorOf is the {"error": …} body of a failed hook, "" when it is not one.
func hookErrorOf(body string) string {
	var e map[string]string
	if json.Unmarshal([]byte(body), &e) != nil || len(e) != 1 {
		return ""
	}
	return e["error"]
}

// The inbound hooks hand the request to the agent as the gateway itself (no caller's
// token), with only the headers the signature needs, names in lower case; the agent's
// answer goes back as it is; its errors map to 401, 403, 400 and else 502 with
// {"error": …}; a body over 64 KiB is 413 and never reaches the agent.
func TestInboundHooks(t *testing.T) {
	t.Parallel()
	url, chat, env := hookEdge(t, edge.Limits{}, "gateway", false)
	tok, _, err := env.Signer.Issue("u7", []string{auth.RoleUser}, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	slackHeaders := map[string]string{"Content-Type": "application/x-www-form-urlencoded", "X-Slack-Signature": "v0=abc",
		"X-Slack-Request-Timestamp": "1700000000", "X-Signature-Ed25519": "ff", "Authorization": "Bearer " + tok, "Cookie": "c=1"}
	discordHeaders := map[string]string{"Content-Type": "application/json", "X-Signature-Ed25519": "ab12", "X-Signature-Timestamp": "1700000000",
		"X-Slack-Signature": "v0=abc"}
	full := strings.Repeat("x", edge.MaxHookBody)
	cases := []struct {
		name, path, body string
		header           map[string]string
		chunked          bool
		code             int
		errIn            string // the {"error"} text, or "" for the agent's answer echoed
		reaches          bool
	}{
		{"slash command", "/hooks/slack", "user_id=U1&text=hi", slackHeaders, false, 200, "", true},
		{"interaction", "/hooks/discord", `{"type":1}`, discordHeaders, false, 200, "", true},
		{"64 KiB exactly", "/hooks/slack", full, slackHeaders, false, 200, "", true},
		{"64 KiB exactly, chunked", "/hooks/discord", full, discordHeaders, true, 200, "", true},
		{"over 64 KiB", "/hooks/slack", full + "x", slackHeaders, false, 413, "at most 65536 bytes", false},
		{"over 64 KiB, chunked", "/hooks/discord", full + "x", discordHeaders, true, 413, "at most 65536 bytes", false},
		{"signature does not verify", "/hooks/slack", "forged", slackHeaders, false, 401, "the request's signature does not verify", true},
		{"bad input", "/hooks/discord", "malformed", discordHeaders, false, 400, "body: not a Slack slash command", true},
		{"the agent fails", "/hooks/slack", "broken", slackHeaders, false, 502, "TheFold could not take the request now (INTERNAL)", true},
		{"the agent answers what HTTP cannot carry", "/hooks/slack", "odd", slackHeaders, false, 502, "TheFold could not take the request now", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := chat.seen()
			code, body, h := post(t, url, tc.path, tc.body, tc.header, tc.chunked)
			after, calls := chat.seen()
			if code != tc.code {
				t.Fatalf("%d %.300s; want %d", code, body, tc.code)
			}
			if tc.errIn == "" {
				if body != tc.body || h.Get("Content-Type") != "application/json; charset=utf-8" {
					t.Fatalf("answer %q %.100s; want the agent's", h.Get("Content-Type"), body)
				}
			} else if msg := hookErrorOf(body); !strings.Contains(msg, tc.errIn) || strings.Contains(body, "pq:") {
				t.Fatalf("error body %.300s; want {\"error\"} with %q", body, tc.errIn)
			}
			if h.Get("X-Request-Id") == "" {
				t.Error("no X-Request-Id")
			}
			if reached := len(after) > len(before); reached != tc.reaches {
				t.Fatalf("reached the agent: %v, want %v", reached, tc.reaches)
			}
			if !tc.reaches {
				return
			}
			req, p := after[len(after)-1], calls[len(calls)-1]
			if p.Service != "gateway" || p.UserID != "" {
				t.Fatalf("the agent was called as %+v; want the gateway itself", p)
			}
			want := map[string]string{"content-type": tc.header["Content-Type"]}
			kind := agentv1.IntegrationKind_INTEGRATION_KIND_SLACK
			if tc.path == "/hooks/slack" {
				want["x-slack-signature"], want["x-slack-request-timestamp"] = "v0=abc", "1700000000"
			} else {
				kind = agentv1.IntegrationKind_INTEGRATION_KIND_DISCORD
				want["x-signature-ed25519"], want["x-signature-timestamp"] = "ab12", "1700000000"
			}
			if req.Kind != kind || string(req.Body) != tc.body || len(req.Headers) != len(want) {
				t.Fatalf("the agent got kind %v, %d bytes, headers %v; want %v, %d bytes, %v", req.Kind, len(req.Body), req.Headers, kind, len(tc.body), want)
			}
			for k, v := range want {
				if req.Headers[k] != v {
					t.Fatalf("headers %v, want %v", req.Headers, want)
				}
			}
		})
	}
	// Only POST.
	resp, err := http.Get(url + "/hooks/slack")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /hooks/slack = %d, want 405", resp.StatusCode)
	}
}

// The agent refuses the edge when it calls as another service than the gateway (403), and
// the routes answer 503 when the gateway has no service identity, or 502 when the agent is
// down.
func TestInboundHooksIdentityAndAgentDown(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, service string
		down          bool
		code          int
		errIn         string
	}{
		{"as another service", "tasks", false, 403, "only the gateway"},
		{"without a service identity", "", false, 503, "THEFOLD_AUTH_SERVICE_KEY_FILE"},
		{"the agent is down", "gateway", true, 502, "(UNAVAILABLE)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			url, _, _ := hookEdge(t, edge.Limits{}, tc.service, tc.down)
			start := time.Now()
			code, body, _ := post(t, url, "/hooks/slack", "user_id=U1", nil, false)
			if code != tc.code || !strings.Contains(hookErrorOf(body), tc.errIn) {
				t.Fatalf("%d %s; want %d with %q", code, body, tc.code, tc.errIn)
			}
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("answered after %s", d)
			}
		})
	}
}

// The hooks carry no token, yet the edge's limits hold for them: the per-address budget
// and the edge's own body limit.
func TestInboundHooksKeepTheEdgeLimits(t *testing.T) {
	t.Parallel()
	url, chat, _ := hookEdge(t, edge.Limits{MaxBodyBytes: 1024, RateLimits: edge.RateLimits{PerAddress: edge.Rate{PerSecond: 0.01, Burst: 2}}}, "gateway", false)
	if code, body, _ := post(t, url, "/hooks/slack", strings.Repeat("x", 2000), nil, false); code != 413 {
		t.Fatalf("over the edge's body limit: %d %s", code, body)
	}
	if code, body, _ := post(t, url, "/hooks/discord", `{"type":1}`, nil, false); code != 200 {
		t.Fatalf("within the budget: %d %s", code, body)
	}
	code, body, h := post(t, url, "/hooks/discord", `{"type":1}`, nil, false)
	if code != http.StatusTooManyRequests || h.Get("Retry-After") == "" {
		t.Fatalf("over the budget: %d %s", code, body)
	}
	if reqs, _ := chat.seen(); len(reqs) != 1 {
		t.Fatalf("%d requests reached the agent, want 1", len(reqs))
	}
}

// githubEvents is a RepoEventService whose HandleGitHubWebhook records its requests with
// chat's and answers by the body as inboundChat does; "pending", "ignored" and "again" are
// a delivery taken to be handled, one ignored, and one seen before.
type githubEvents struct {
	agentv1.UnimplementedRepoEventServiceServer
	chat *inboundChat
}

func (g *githubEvents) HandleGitHubWebhook(ctx context.Context, req *agentv1.HandleGitHubWebhookRequest) (*agentv1.HandleGitHubWebhookResponse, error) {
	st, dup := agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_PENDING, false
	switch string(req.Body) {
	case "ignored":
		st = agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_IGNORED
	case "again":
		dup = true
	case "pending":
	default:
		_, err := g.chat.HandleInbound(ctx, &agentv1.HandleInboundRequest{Body: req.Body, Headers: req.Headers})
		return nil, err
	}
	p, _ := auth.FromContext(ctx)
	g.chat.mu.Lock()
	g.chat.reqs = append(g.chat.reqs, &agentv1.HandleInboundRequest{Body: req.Body, Headers: req.Headers})
	g.chat.calls = append(g.chat.calls, p)
	g.chat.mu.Unlock()
	return &agentv1.HandleGitHubWebhookResponse{Duplicate: dup, Delivery: &agentv1.RepoDelivery{DeliveryId: req.Headers["x-github-delivery"], State: st, Outcome: "why"}}, nil
}

// POST /hooks/github hands a delivery to the agent's RepoEventService as the gateway
// itself, with GitHub's headers only; a delivery taken to be handled is 202, an ignored or
// repeated one 200, with the delivery as JSON; refusals map as for the other hooks; a body
// over 1 MiB is 413 and never reaches the agent.
func TestGitHubHook(t *testing.T) {
	t.Parallel()
	url, chat, _ := hookEdge(t, edge.Limits{}, "gateway", false)
	header := map[string]string{"Content-Type": "application/json", "X-GitHub-Event": "issues", "X-GitHub-Delivery": "d-1",
		"X-Hub-Signature-256": "sha256=00", "X-Slack-Signature": "v0=abc", "Authorization": "Bearer x"}
	cases := []struct {
		body, state string
		code        int
		dup         bool
		errIn       string
		reaches     bool
	}{
		{"pending", "pending", 202, false, "", true},
		{"ignored", "ignored", 200, false, "", true},
		{"again", "pending", 200, true, "", true},
		{"forged", "", 401, false, "the request's signature does not verify", true},
		{"malformed", "", 400, false, "body: not a Slack slash command", true},
		{"broken", "", 502, false, "TheFold could not take the request now (INTERNAL)", true},
		{strings.Repeat("x", edge.MaxGitHubHookBody+1), "", 413, false, "at most 1048576 bytes", false},
	}
	for _, tc := range cases {
		before, _ := chat.seen()
		code, body, h := post(t, url, "/hooks/github", tc.body, header, false)
		after, calls := chat.seen()
		if code != tc.code {
			t.Fatalf("%.20s: %d %.300s; want %d", tc.body, code, body, tc.code)
		}
		if reached := len(after) > len(before); reached != tc.reaches {
			t.Fatalf("%.20s: reached the agent: %v, want %v", tc.body, reached, tc.reaches)
		}
		if tc.errIn != "" {
			if msg := hookErrorOf(body); !strings.Contains(msg, tc.errIn) {
				t.Fatalf("%.20s: error body %.300s; want {\"error\"} with %q", tc.body, body, tc.errIn)
			}
			continue
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(body), &got); err != nil || h.Get("Content-Type") != "application/json" {
			t.Fatalf("%s: answer %q %s", tc.body, h.Get("Content-Type"), body)
		}
		if got["delivery_id"] != "d-1" || got["state"] != tc.state || got["duplicate"] != tc.dup || got["outcome"] != "why" {
			t.Fatalf("%s: answer %v", tc.body, got)
		}
		req, p := after[len(after)-1], calls[len(calls)-1]
		if p.Service != "gateway" || p.UserID != "" {
			t.Fatalf("the agent was called as %+v; want the gateway itself", p)
		}
		want := map[string]string{"content-type": "application/json", "x-github-event": "issues", "x-github-delivery": "d-1", "x-hub-signature-256": "sha256=00"}
		if len(req.Headers) != len(want) {
			t.Fatalf("headers %v, want %v", req.Headers, want)
		}
		for k, v := range want {
			if req.Headers[k] != v {
				t.Fatalf("headers %v, want %v", req.Headers, want)
			}
		}
	}
	resp, err := http.Get(url + "/hooks/github")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /hooks/github = %d, want 405", resp.StatusCode)
	}
}

// linearEvents is a LinearService whose HandleLinearWebhook records its requests with
// chat's and answers by the body: "taken", "again" (seen before), "comment" (not synced);
// anything else as inboundChat answers.
type linearEvents struct {
	agentv1.UnimplementedLinearServiceServer
	chat *inboundChat
}

func (l *linearEvents) HandleLinearWebhook(ctx context.Context, req *agentv1.HandleLinearWebhookRequest) (*agentv1.HandleLinearWebhookResponse, error) {
	resp := &agentv1.HandleLinearWebhookResponse{Accepted: true}
	switch string(req.Body) {
	case "again":
		resp.Duplicate = true
	case "comment":
		resp.Accepted, resp.Reason = false, "Comment events are not synced"
	case "taken":
	default:
		_, err := l.chat.HandleInbound(ctx, &agentv1.HandleInboundRequest{Body: req.Body, Headers: req.Headers})
		return nil, err
	}
	p, _ := auth.FromContext(ctx)
	l.chat.mu.Lock()
	l.chat.reqs = append(l.chat.reqs, &agentv1.HandleInboundRequest{Body: req.Body, Headers: req.Headers})
	l.chat.calls = append(l.chat.calls, p)
	l.chat.mu.Unlock()
	return resp, nil
}

// POST /hooks/linear hands a delivery to the agent's LinearService as the gateway itself,
// with Linear's headers only, and answers 200 with what the agent said; refusals map as for
// the other hooks; a body over 1 MiB is 413 and never reaches the agent.
func TestLinearHook(t *testing.T) {
	t.Parallel()
	url, chat, _ := hookEdge(t, edge.Limits{}, "gateway", false)
	header := map[string]string{"Content-Type": "application/json", "Linear-Signature": "ab", "Linear-Delivery": "d-1", "Linear-Event": "Issue",
		"X-Hub-Signature-256": "sha256=00", "Authorization": "Bearer x"}
	cases := []struct {
		body          string
		code          int
		accepted, dup bool
		errIn         string
		reaches       bool
	}{
		{"taken", 200, true, false, "", true},
		{"again", 200, true, true, "", true},
		{"comment", 200, false, false, "", true},
		{"forged", 401, false, false, "the request's signature does not verify", true},
		{"malformed", 400, false, false, "body: not a Slack slash command", true},
		{"broken", 502, false, false, "TheFold could not take the request now (INTERNAL)", true},
		{strings.Repeat("x", edge.MaxGitHubHookBody+1), 413, false, false, "at most 1048576 bytes", false},
	}
	for _, tc := range cases {
		before, _ := chat.seen()
		code, body, _ := post(t, url, "/hooks/linear", tc.body, header, false)
		after, calls := chat.seen()
		if code != tc.code {
			t.Fatalf("%.20s: %d %.300s; want %d", tc.body, code, body, tc.code)
		}
		if reached := len(after) > len(before); reached != tc.reaches {
			t.Fatalf("%.20s: reached the agent: %v, want %v", tc.body, reached, tc.reaches)
		}
		if tc.errIn != "" {
			if msg := hookErrorOf(body); !strings.Contains(msg, tc.errIn) {
				t.Fatalf("%.20s: error body %.300s; want {\"error\"} with %q", tc.body, body, tc.errIn)
			}
			continue
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(body), &got); err != nil || got["accepted"] != tc.accepted || got["duplicate"] != tc.dup {
			t.Fatalf("%s: answer %s", tc.body, body)
		}
		req, p := after[len(after)-1], calls[len(calls)-1]
		if p.Service != "gateway" || p.UserID != "" {
			t.Fatalf("the agent was called as %+v; want the gateway itself", p)
		}
		want := map[string]string{"content-type": "application/json", "linear-signature": "ab", "linear-delivery": "d-1", "linear-event": "Issue"}
		if len(req.Headers) != len(want) {
			t.Fatalf("headers %v, want %v", req.Headers, want)
		}
		for k, v := range want {
			if req.Headers[k] != v {
				t.Fatalf("headers %v, want %v", req.Headers, want)
			}
		}
	}
	resp, err := http.Get(url + "/hooks/linear")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Fatalf("GET /hooks/linear = %d, want 405", resp.StatusCode)
	}
}
