package service_test

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/seal"

	"github.com/thefold/thefold/services/agent/internal/service"
)

// readableRepos is a github RepoService where every caller can read the repositories it
// holds and no other.
type readableRepos struct {
	githubv1.UnimplementedRepoServiceServer
	repos []string
}

func (r *readableRepos) GetRepo(_ context.Context, req *githubv1.GetRepoRequest) (*githubv1.GetRepoResponse, error) {
	for _, n := range r.repos {
		if n == req.Repo {
			return &githubv1.GetRepoResponse{Repo: &githubv1.Repo{Repo: n}}, nil
		}
	}
	return nil, status.Errorf(codes.NotFound, "repository %q not found", req.Repo)
}

// lateRepos is a github client whose connection is set after the server that uses it is
// made.
type lateRepos struct{ githubv1.RepoServiceClient }

// hookEnv serves RepoEventService over real gRPC on a fresh agent schema, with a secret key
// and a github service that holds local/r and local/s.
type hookEnv struct {
	*inboundEnv
	events agentv1.RepoEventServiceClient
	health agentv1.RepoHealthServiceClient
}

func newHookEnv(t *testing.T, disabled func(string) bool) *hookEnv {
	t.Helper()
	st, pool := testStore(t)
	key := make([]byte, seal.KeySize)
	_, _ = rand.Read(key)
	box, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	logs := &logBuffer{}
	q, sp := &queue{}, &stops{}
	repos := &lateRepos{}
	srv := service.New(st, service.Options{Queue: q, Heartbeat: time.Second, MaxWatches: 8, Secrets: box, Disabled: disabled,
		Repos: repos, Log: slog.New(slog.NewJSONHandler(logs, nil))})
	// The github service is served beside the agent, so the caller's token (which the
	// agent passes on) verifies there too.
	e := grpctest.Start(t, func(s *grpc.Server) {
		agentv1.RegisterAgentServiceServer(s, srv)
		agentv1.RegisterChatServiceServer(s, srv.Chat(q, sp))
		agentv1.RegisterRepoEventServiceServer(s, srv.RepoEvents())
		agentv1.RegisterRepoHealthServiceServer(s, srv.RepoHealth())
		githubv1.RegisterRepoServiceServer(s, &readableRepos{repos: []string{"local/r", "local/s"}})
	})
	repos.RepoServiceClient = githubv1.NewRepoServiceClient(e.Conn)
	gctx, gcancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(gcancel)
	return &hookEnv{
		inboundEnv: &inboundEnv{
			chatEnv: &chatEnv{st: st, q: q, stops: sp, chat: agentv1.NewChatServiceClient(e.Conn), agent: agentv1.NewAgentServiceClient(e.Conn),
				ctx: func(user string) context.Context { return e.Context(t, user) }},
			pool: pool, box: box, logs: logs, grpc: e, gateway: auth.AsService(gctx, e.ServiceSigner(t, "gateway")),
		},
		events: agentv1.NewRepoEventServiceClient(e.Conn),
		health: agentv1.NewRepoHealthServiceClient(e.Conn),
	}
}

// connect connects owner's repo and returns the connection with its secret.
func (e *hookEnv) connect(t *testing.T, owner, repo string, labels ...string) *agentv1.RepoConnection {
	t.Helper()
	resp, err := e.events.ConnectRepository(e.ctx(owner), &agentv1.ConnectRepositoryRequest{Repo: repo, IssueLabels: labels})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Connection
}

// delivery is GitHub's delivery id of event with payload, signed with secret ("" unsigned).
func delivery(id, event, secret string, payload any) *agentv1.HandleGitHubWebhookRequest {
	body, _ := json.Marshal(payload)
	h := map[string]string{"content-type": "application/json", "x-github-event": event, "x-github-delivery": id}
	if secret != "" {
		h["x-hub-signature-256"] = sign(secret, body)
	}
	return &agentv1.HandleGitHubWebhookRequest{Headers: h, Body: body}
}

func sign(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

// issueEvent is an issues event's payload of repo's issue n.
func issueEvent(action, repo string, n int) map[string]any {
	return map[string]any{"action": action, "repository": map[string]any{"full_name": repo},
		"issue": map[string]any{"number": n, "title": "t", "state": "open"}}
}

// deliveriesOf counts the rows of repo_deliveries.
func (e *hookEnv) deliveries(t *testing.T) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM repo_deliveries`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A connection's secret is returned once: hex, 64 digits; a retry with the request id
// returns the connection without it; a second connection of the repository is
// ALREADY_EXISTS; a repository the caller cannot read is NOT_FOUND; another user's
// connection is NOT_FOUND to everything.
func TestConnectRepository(t *testing.T) {
	e := newHookEnv(t, nil)
	ctx := e.ctx(alice)
	first, err := e.events.ConnectRepository(ctx, &agentv1.ConnectRepositoryRequest{RequestId: "c-1", Repo: "local/r", IssueLabels: []string{"thefold"}})
	if err != nil {
		t.Fatal(err)
	}
	c := first.Connection
	if len(c.WebhookSecret) != 64 || c.WebhookPath != "/hooks/github" || c.OwnerId != alice || c.Repo != "local/r" || len(c.IssueLabels) != 1 {
		t.Fatalf("connection %v", c)
	}
	if _, err := hex.DecodeString(c.WebhookSecret); err != nil {
		t.Fatalf("secret %q: %v", c.WebhookSecret, err)
	}
	var sealed []byte
	if err := e.pool.QueryRow(context.Background(), `SELECT secret_sealed FROM repo_connections WHERE id = $1`, c.Id).Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sealed), c.WebhookSecret) {
		t.Fatal("the secret is stored in the clear")
	}
	again, err := e.events.ConnectRepository(ctx, &agentv1.ConnectRepositoryRequest{RequestId: "c-1", Repo: "local/r"})
	if err != nil || again.Connection.Id != c.Id || again.Connection.WebhookSecret != "" {
		t.Fatalf("retry: %v %v", again, err)
	}
	_, err = e.events.ConnectRepository(ctx, &agentv1.ConnectRepositoryRequest{Repo: "local/r"})
	grpctest.WantCode(t, err, codes.AlreadyExists, "local/r")
	_, err = e.events.ConnectRepository(ctx, &agentv1.ConnectRepositoryRequest{Repo: "local/nope"})
	grpctest.WantCode(t, err, codes.NotFound, "local/nope")

	list, err := e.events.ListRepoConnections(ctx, &agentv1.ListRepoConnectionsRequest{})
	if err != nil || len(list.Connections) != 1 || list.Connections[0].WebhookSecret != "" || list.Connections[0].Id != c.Id {
		t.Fatalf("list: %v %v", list, err)
	}
	if other, err := e.events.ListRepoConnections(e.ctx(bob), &agentv1.ListRepoConnectionsRequest{}); err != nil || len(other.Connections) != 0 {
		t.Fatalf("bob's list: %v %v", other, err)
	}
	_, err = e.events.ListRepoDeliveries(e.ctx(bob), &agentv1.ListRepoDeliveriesRequest{ConnectionId: c.Id})
	grpctest.WantCode(t, err, codes.NotFound)
	_, err = e.events.DeleteRepoConnection(e.ctx(bob), &agentv1.DeleteRepoConnectionRequest{Id: c.Id})
	grpctest.WantCode(t, err, codes.NotFound)
	if _, err := e.events.DeleteRepoConnection(ctx, &agentv1.DeleteRepoConnectionRequest{Id: c.Id}); err != nil {
		t.Fatal(err)
	}
	_, err = e.events.DeleteRepoConnection(ctx, &agentv1.DeleteRepoConnectionRequest{Id: c.Id})
	grpctest.WantCode(t, err, codes.NotFound)
}

// A signed delivery is stored once, pending; a replay of its id stores nothing and says
// so; forged, unsigned and malformed signatures are UNAUTHENTICATED, store nothing and are
// logged; the secret of another user's connection of the same repository verifies that
// user's delivery, not this one's.
func TestGitHubWebhookDeliveries(t *testing.T) {
	e := newHookEnv(t, nil)
	a := e.connect(t, alice, "local/r")
	b := e.connect(t, bob, "local/r")
	ev := issueEvent("opened", "local/r", 3)

	resp, err := e.events.HandleGitHubWebhook(e.gateway, delivery("d-1", "issues", a.WebhookSecret, ev))
	if err != nil {
		t.Fatal(err)
	}
	d := resp.Delivery
	if resp.Duplicate || d.ConnectionId != a.Id || d.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_PENDING || d.Event != "issues" || d.Action != "opened" {
		t.Fatalf("delivery %v (duplicate %v)", d, resp.Duplicate)
	}
	again, err := e.events.HandleGitHubWebhook(e.gateway, delivery("d-1", "issues", a.WebhookSecret, ev))
	if err != nil || !again.Duplicate || again.Delivery.DeliveryId != "d-1" {
		t.Fatalf("replay: %v %v", again, err)
	}
	if n := e.deliveries(t); n != 1 {
		t.Fatalf("%d deliveries stored, want 1", n)
	}
	// Bob's secret verifies his connection's delivery.
	resp, err = e.events.HandleGitHubWebhook(e.gateway, delivery("d-2", "issues", b.WebhookSecret, ev))
	if err != nil || resp.Delivery.ConnectionId != b.Id {
		t.Fatalf("bob's delivery: %v %v", resp, err)
	}

	forged := delivery("d-3", "issues", "not the secret", ev)
	unsigned := delivery("d-4", "issues", "", ev)
	badForm := delivery("d-5", "issues", a.WebhookSecret, ev)
	badForm.Headers["x-hub-signature-256"] = "sha1=" + strings.TrimPrefix(badForm.Headers["x-hub-signature-256"], "sha256=")
	tampered := delivery("d-6", "issues", a.WebhookSecret, ev)
	tampered.Body = []byte(strings.Replace(string(tampered.Body), `"number":3`, `"number":4`, 1))
	otherRepo := delivery("d-7", "issues", a.WebhookSecret, issueEvent("opened", "local/s", 1))
	for name, req := range map[string]*agentv1.HandleGitHubWebhookRequest{"forged": forged, "unsigned": unsigned, "sha1": badForm,
		"tampered": tampered, "a repository without connections": otherRepo} {
		_, err := e.events.HandleGitHubWebhook(e.gateway, req)
		grpctest.WantCode(t, err, codes.Unauthenticated, "signature does not verify")
		if n := e.deliveries(t); n != 2 {
			t.Fatalf("%s: %d deliveries stored, want 2", name, n)
		}
	}
	if logs := e.logs.String(); strings.Count(logs, "github webhook refused") != 5 || !strings.Contains(logs, "no connection of the repository") ||
		!strings.Contains(logs, "matches none of the repository's 2 connection secrets") {
		t.Fatalf("refusals logged: %s", logs)
	}

	list, err := e.events.ListRepoDeliveries(e.ctx(alice), &agentv1.ListRepoDeliveriesRequest{ConnectionId: a.Id})
	if err != nil || len(list.Deliveries) != 1 || list.Deliveries[0].DeliveryId != "d-1" {
		t.Fatalf("alice's deliveries: %v %v", list, err)
	}
	var last *time.Time
	if err := e.pool.QueryRow(context.Background(), `SELECT last_delivery_time FROM repo_connections WHERE id = $1`, a.Id).Scan(&last); err != nil || last == nil {
		t.Fatalf("last delivery time %v %v", last, err)
	}
}

// A ping is done at once, events and actions TheFold does not follow are ignored saying
// why, a pull request's issues event too; a form-encoded delivery is read from its payload
// field.
func TestGitHubWebhookTriage(t *testing.T) {
	e := newHookEnv(t, nil)
	a := e.connect(t, alice, "local/r")
	repo := map[string]any{"full_name": "local/r"}
	cases := []struct {
		event   string
		payload map[string]any
		state   agentv1.RepoDeliveryState
		outcome string
	}{
		{"ping", map[string]any{"zen": "Keep it simple.", "hook_id": 42, "repository": repo}, agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_DONE, "hook 42"},
		{"push", map[string]any{"ref": "refs/heads/main", "repository": repo}, agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_IGNORED, "push events"},
		{"issues", issueEvent("assigned", "local/r", 1), agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_IGNORED, `"assigned"`},
		{"issues", map[string]any{"action": "opened", "repository": repo, "issue": map[string]any{"number": 5, "pull_request": map[string]any{"url": "u"}}},
			agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_IGNORED, "#5 is a pull request"},
		{"issues", issueEvent("closed", "local/r", 1), agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_PENDING, ""},
		{"pull_request_review", map[string]any{"action": "submitted", "repository": repo, "pull_request": map[string]any{"number": 2},
			"review": map[string]any{"id": 1, "state": "changes_requested", "user": map[string]any{"login": "octo"}}}, agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_PENDING, ""},
		{"pull_request_review", map[string]any{"action": "dismissed", "repository": repo, "pull_request": map[string]any{"number": 2},
			"review": map[string]any{"id": 1, "state": "dismissed"}}, agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_IGNORED, "submitted reviews"},
		{"pull_request_review_comment", map[string]any{"action": "created", "repository": repo, "pull_request": map[string]any{"number": 2},
			"comment": map[string]any{"id": 9, "path": "a.go", "line": 3, "body": "b"}}, agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_PENDING, ""},
		{"pull_request_review_comment", map[string]any{"action": "edited", "repository": repo, "pull_request": map[string]any{"number": 2},
			"comment": map[string]any{"id": 9}}, agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_IGNORED, "new comments"},
		{"pull_request", map[string]any{"action": "closed", "repository": repo, "pull_request": map[string]any{"number": 2, "merged": true}},
			agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_PENDING, ""},
		{"pull_request", map[string]any{"action": "opened", "repository": repo, "pull_request": map[string]any{"number": 3}},
			agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_IGNORED, "close or merge"},
		{"check_run", map[string]any{"action": "completed", "repository": repo, "check_run": map[string]any{"name": "test", "head_sha": "a1",
			"conclusion": "failure", "pull_requests": []map[string]any{{"number": 2}}}}, agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_PENDING, ""},
		{"check_run", map[string]any{"action": "completed", "repository": repo, "check_run": map[string]any{"name": "test", "head_sha": "a1",
			"conclusion": "success", "pull_requests": []map[string]any{{"number": 2}}}}, agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_IGNORED, "ended success"},
		{"status", map[string]any{"repository": repo, "sha": "a1", "state": "error", "context": "ci", "branches": []map[string]any{{"name": "b"}}},
			agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_PENDING, ""},
	}
	for i, tc := range cases {
		resp, err := e.events.HandleGitHubWebhook(e.gateway, delivery(fmt.Sprintf("t-%d", i), tc.event, a.WebhookSecret, tc.payload))
		if err != nil {
			t.Fatalf("%s: %v", tc.event, err)
		}
		if d := resp.Delivery; d.State != tc.state || !strings.Contains(d.Outcome, tc.outcome) {
			t.Fatalf("%s %v: %v %q; want %v %q", tc.event, tc.payload["action"], d.State, d.Outcome, tc.state, tc.outcome)
		}
	}
	body, _ := json.Marshal(issueEvent("edited", "local/r", 2))
	form := []byte(url.Values{"payload": {string(body)}}.Encode())
	resp, err := e.events.HandleGitHubWebhook(e.gateway, &agentv1.HandleGitHubWebhookRequest{Body: form, Headers: map[string]string{
		"content-type": "application/x-www-form-urlencoded", "x-github-event": "issues", "x-github-delivery": "form-1",
		"x-hub-signature-256": sign(a.WebhookSecret, form)}})
	if err != nil || resp.Delivery.State != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_PENDING || resp.Delivery.Action != "edited" {
		t.Fatalf("form-encoded: %v %v", resp, err)
	}
}

// Only the gateway, as itself, hands deliveries over; a disabled owner's delivery is
// refused and stores nothing.
func TestGitHubWebhookCallers(t *testing.T) {
	e := newHookEnv(t, func(u string) bool { return u == bob })
	a := e.connect(t, alice, "local/r")
	b := e.connect(t, bob, "local/s")
	req := delivery("d-1", "issues", a.WebhookSecret, issueEvent("opened", "local/r", 1))
	_, err := e.events.HandleGitHubWebhook(e.ctx(alice), req)
	grpctest.WantCode(t, err, codes.PermissionDenied)
	tasks := auth.AsService(context.Background(), e.grpc.ServiceSigner(t, "tasks"))
	_, err = e.events.HandleGitHubWebhook(tasks, req)
	grpctest.WantCode(t, err, codes.PermissionDenied, "only the gateway")
	_, err = e.events.HandleGitHubWebhook(e.gateway, delivery("d-2", "issues", b.WebhookSecret, issueEvent("opened", "local/s", 1)))
	grpctest.WantCode(t, err, codes.PermissionDenied, "disabled")
	if n := e.deliveries(t); n != 0 {
		t.Fatalf("%d deliveries stored, want 0", n)
	}
}

// Every RPC of RepoEventService names the field of malformed input, and stores nothing.
func TestRepoEventsMalformedInput(t *testing.T) {
	e := newHookEnv(t, nil)
	ctx := e.ctx(alice)
	a := e.connect(t, alice, "local/r")
	ok := issueEvent("opened", "local/r", 1)
	withHeader := func(k, v string) *agentv1.HandleGitHubWebhookRequest {
		r := delivery("m-1", "issues", a.WebhookSecret, ok)
		r.Headers[k] = v
		return r
	}
	signed := func(event string, body []byte, ct string) *agentv1.HandleGitHubWebhookRequest {
		return &agentv1.HandleGitHubWebhookRequest{Body: body, Headers: map[string]string{"content-type": ct, "x-github-event": event,
			"x-github-delivery": "m-2", "x-hub-signature-256": sign(a.WebhookSecret, body)}}
	}
	hook := func(r *agentv1.HandleGitHubWebhookRequest) func() error {
		return func() error { _, err := e.events.HandleGitHubWebhook(e.gateway, r); return err }
	}
	cases := []struct {
		method, field string
		call          func() error
	}{
		{"ConnectRepository", "repo", func() error {
			_, err := e.events.ConnectRepository(ctx, &agentv1.ConnectRepositoryRequest{Repo: "no-slash"})
			return err
		}},
		{"ConnectRepository", "repo", func() error {
			_, err := e.events.ConnectRepository(ctx, &agentv1.ConnectRepositoryRequest{})
			return err
		}},
		{"ConnectRepository", "request_id", func() error {
			_, err := e.events.ConnectRepository(ctx, &agentv1.ConnectRepositoryRequest{Repo: "local/s", RequestId: strings.Repeat("r", 200)})
			return err
		}},
		{"ConnectRepository", "issue_labels", func() error {
			_, err := e.events.ConnectRepository(ctx, &agentv1.ConnectRepositoryRequest{Repo: "local/s", IssueLabels: []string{strings.Repeat("l", 51)}})
			return err
		}},
		{"ConnectRepository", "poll", func() error {
			_, err := e.events.ConnectRepository(ctx, &agentv1.ConnectRepositoryRequest{Repo: "local/s", Poll: true})
			return err
		}},
		{"ListRepoConnections", "page_size", func() error {
			_, err := e.events.ListRepoConnections(ctx, &agentv1.ListRepoConnectionsRequest{PageSize: 101})
			return err
		}},
		{"ListRepoConnections", "page_token", func() error {
			_, err := e.events.ListRepoConnections(ctx, &agentv1.ListRepoConnectionsRequest{PageToken: "garbage"})
			return err
		}},
		{"DeleteRepoConnection", "id", func() error {
			_, err := e.events.DeleteRepoConnection(ctx, &agentv1.DeleteRepoConnectionRequest{Id: "x"})
			return err
		}},
		{"ListRepoDeliveries", "connection_id", func() error {
			_, err := e.events.ListRepoDeliveries(ctx, &agentv1.ListRepoDeliveriesRequest{})
			return err
		}},
		{"ListRepoDeliveries", "page_size", func() error {
			_, err := e.events.ListRepoDeliveries(ctx, &agentv1.ListRepoDeliveriesRequest{ConnectionId: a.Id, PageSize: -1})
			return err
		}},
		{"ListRepoDeliveries", "page_token", func() error {
			_, err := e.events.ListRepoDeliveries(ctx, &agentv1.ListRepoDeliveriesRequest{ConnectionId: a.Id, PageToken: "x"})
			return err
		}},
		{"HandleGitHubWebhook", "x-github-event", hook(withHeader("x-github-event", ""))},
		{"HandleGitHubWebhook", "x-github-event", hook(withHeader("x-github-event", "Issues!"))},
		{"HandleGitHubWebhook", "x-github-delivery", hook(withHeader("x-github-delivery", ""))},
		{"HandleGitHubWebhook", "x-github-delivery", hook(withHeader("x-github-delivery", "a:b"))},
		{"HandleGitHubWebhook", "content-type", hook(withHeader("content-type", "text/plain"))},
		{"HandleGitHubWebhook", "body", hook(signed("issues", []byte("{"), "application/json"))},
		{"HandleGitHubWebhook", "body", hook(signed("issues", []byte("payload=%7B"), "application/x-www-form-urlencoded"))},
		{"HandleGitHubWebhook", "body", hook(signed("issues", make([]byte, service.MaxWebhookBody+1), "application/json"))},
		{"HandleGitHubWebhook", "issue.number", hook(signed("issues", []byte(`{"action":"opened","repository":{"full_name":"local/r"}}`), "application/json"))},
		{"HandleGitHubWebhook", "repository.full_name", hook(signed("ping", []byte(`{"zen":"z"}`), "application/json"))},
		{"HandleGitHubWebhook", "pull_request.number", hook(signed("pull_request", []byte(`{"action":"closed","repository":{"full_name":"local/r"}}`), "application/json"))},
		{"HandleGitHubWebhook", "review", hook(signed("pull_request_review", []byte(`{"action":"submitted","repository":{"full_name":"local/r"},"pull_request":{"number":1}}`), "application/json"))},
		{"HandleGitHubWebhook", "check_run", hook(signed("check_run", []byte(`{"action":"completed","repository":{"full_name":"local/r"}}`), "application/json"))},
		{"HandleGitHubWebhook", "sha", hook(signed("status", []byte(`{"state":"failure","repository":{"full_name":"local/r"}}`), "application/json"))},
		{"HandleGitHubWebhook", "comment", hook(signed("pull_request_review_comment", []byte(`{"action":"created","repository":{"full_name":"local/r"},"pull_request":{"number":1}}`), "application/json"))},
	}
	for _, tc := range cases {
		grpctest.WantInvalid(t, tc.call(), tc.field)
	}
	if n := e.deliveries(t); n != 0 {
		t.Fatalf("%d deliveries stored, want 0", n)
	}
	var conns int
	if err := e.pool.QueryRow(context.Background(), `SELECT count(*) FROM repo_connections`).Scan(&conns); err != nil || conns != 1 {
		t.Fatalf("%d connections, want 1 (%v)", conns, err)
	}
}
