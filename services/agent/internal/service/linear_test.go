package service_test

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/fakelinear"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/seal"

	"github.com/thefold/thefold/services/agent/internal/linearsync"
	"github.com/thefold/thefold/services/agent/internal/service"
)

const linearKey = "lin_api_alice000000000000"

// linearEnv serves LinearService over real gRPC with a fake Linear behind the real client.
type linearEnv struct {
	lin     *fakelinear.Server
	team    string
	client  agentv1.LinearServiceClient
	ctx     func(user string) context.Context
	gateway context.Context
	count   func(t *testing.T, table string) int
}

func newLinearEnv(t *testing.T) *linearEnv {
	t.Helper()
	st, pool := testStore(t)
	key := make([]byte, seal.KeySize)
	_, _ = rand.Read(key)
	box, err := seal.New(key)
	if err != nil {
		t.Fatal(err)
	}
	lin := fakelinear.New()
	lin.AddAPIKey(linearKey, "Alice")
	team := lin.AddTeam("ENG", "Engineering")
	lin.AddState(team, "Todo", "unstarted")
	srv := httptest.NewServer(lin)
	t.Cleanup(srv.Close)
	repos := &lateRepos{}
	cfg := linearsync.DefaultConfig
	cfg.BaseURL = srv.URL + "/graphql"
	tasks := &lateTasks{}
	svcSyncer := linearsync.New(st, tasks, box, nil, nil, cfg, nil)
	srvAgent := service.New(st, service.Options{Heartbeat: time.Second, MaxWatches: 8, Secrets: box, Repos: repos, Linear: svcSyncer,
		Log: slog.New(slog.DiscardHandler)})
	// The github service is served beside the agent, so the caller's token (which the
	// agent passes on) verifies there too.
	a := grpctest.Start(t, func(s *grpc.Server) {
		agentv1.RegisterLinearServiceServer(s, srvAgent.Linear())
		githubv1.RegisterRepoServiceServer(s, &readableRepos{repos: []string{"local/r"}})
	})
	repos.RepoServiceClient = githubv1.NewRepoServiceClient(a.Conn)
	tasks.TaskServiceClient = tasksv1.NewTaskServiceClient(a.Conn)
	gctx, gcancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(gcancel)
	return &linearEnv{lin: lin, team: team, client: agentv1.NewLinearServiceClient(a.Conn),
		ctx:     func(user string) context.Context { return a.Context(t, user) },
		gateway: auth.AsService(gctx, a.ServiceSigner(t, "gateway")),
		count: func(t *testing.T, table string) int {
			var n int
			if err := pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		},
	}
}

// lateTasks is a tasks client whose connection is set after the syncer that uses it.
type lateTasks struct{ tasksv1.TaskServiceClient }

func (e *linearEnv) connect(t *testing.T, user string) *agentv1.LinearConnection {
	t.Helper()
	resp, err := e.client.ConnectLinear(e.ctx(user), &agentv1.ConnectLinearRequest{Connection: &agentv1.LinearConnection{ApiKey: linearKey,
		Repo: "local/r", TeamIds: []string{e.team}}})
	if err != nil {
		t.Fatal(err)
	}
	return resp.Connection
}

// ConnectLinear checks the key and the teams with Linear, returns the webhook secret once
// and never the key; another user sees nothing of it.
func TestConnectLinear(t *testing.T) {
	e := newLinearEnv(t)
	c := e.connect(t, alice)
	if len(c.WebhookSecret) != 64 || c.ApiKey != "" || c.ApiKeyHint != "…0000" || c.WebhookPath != "/hooks/linear" ||
		strings.Join(c.TeamKeys, ",") != "ENG" || strings.Join(c.StateTypes, ",") != "started,unstarted" || c.SyncInterval.AsDuration() != 10*time.Minute ||
		!strings.Contains(c.LinearUser, "Alice") {
		t.Fatalf("connection: %v", c)
	}
	list, err := e.client.ListLinearConnections(e.ctx(alice), &agentv1.ListLinearConnectionsRequest{})
	if err != nil || len(list.Connections) != 1 {
		t.Fatalf("list: %v %v", list, err)
	}
	raw, _ := json.Marshal(list)
	if strings.Contains(string(raw), c.WebhookSecret) || strings.Contains(string(raw), linearKey) {
		t.Fatal("a list shows the secret or the key")
	}
	if list, _ := e.client.ListLinearConnections(e.ctx(bob), &agentv1.ListLinearConnectionsRequest{}); len(list.GetConnections()) != 0 {
		t.Fatalf("bob lists alice's connection")
	}
	for name, call := range map[string]func() error{
		"sync": func() error {
			_, err := e.client.SyncLinear(e.ctx(bob), &agentv1.SyncLinearRequest{ConnectionId: c.Id})
			return err
		},
		"issues": func() error {
			_, err := e.client.ListLinearIssues(e.ctx(bob), &agentv1.ListLinearIssuesRequest{ConnectionId: c.Id})
			return err
		},
		"delete": func() error {
			_, err := e.client.DeleteLinearConnection(e.ctx(bob), &agentv1.DeleteLinearConnectionRequest{Id: c.Id})
			return err
		},
	} {
		if status.Code(call()) != codes.NotFound {
			t.Errorf("bob's %s of alice's connection: %v", name, call())
		}
	}
	// A key Linear refuses, and a team it does not show, are the caller's input.
	_, err = e.client.ConnectLinear(e.ctx(alice), &agentv1.ConnectLinearRequest{Connection: &agentv1.LinearConnection{ApiKey: "lin_api_wrong00000",
		Repo: "local/r", TeamIds: []string{e.team}}})
	grpctest.WantInvalid(t, err, "connection.api_key")
	_, err = e.client.ConnectLinear(e.ctx(alice), &agentv1.ConnectLinearRequest{Connection: &agentv1.LinearConnection{ApiKey: linearKey,
		Repo: "local/r", TeamIds: []string{"6f1d2f9e-0000-4000-8000-000000000000"}}})
	grpctest.WantInvalid(t, err, "connection.team_ids[0]")
	if n := e.count(t, "linear_connections"); n != 1 {
		t.Fatalf("%d connections after refused ones", n)
	}
	if _, err := e.client.DeleteLinearConnection(e.ctx(alice), &agentv1.DeleteLinearConnectionRequest{Id: c.Id}); err != nil {
		t.Fatal(err)
	}
}

// A Linear webhook delivery is taken when it is signed with the secret of a connection of
// the issue's team and is fresh; a forged, stale or unsigned one is UNAUTHENTICATED and
// stores nothing; a replay is stored once; other types are answered and dropped.
func TestHandleLinearWebhook(t *testing.T) {
	e := newLinearEnv(t)
	c := e.connect(t, alice)
	issue := e.lin.AddIssue(e.team, fakelinear.NewIssue{Title: "Schema"})
	body := fakelinear.WebhookPayload("update", issue)
	deliver := func(id, sig string, body []byte) (*agentv1.HandleLinearWebhookResponse, error) {
		return e.client.HandleLinearWebhook(e.gateway, &agentv1.HandleLinearWebhookRequest{Body: body, Headers: map[string]string{
			"linear-signature": sig, "linear-delivery": id, "linear-event": "Issue", "content-type": "application/json"}})
	}
	got, err := deliver("d-1", fakelinear.SignWebhook(c.WebhookSecret, body), body)
	if err != nil || !got.Accepted || got.Duplicate {
		t.Fatalf("signed delivery: %v %v", got, err)
	}
	if got, err = deliver("d-1", fakelinear.SignWebhook(c.WebhookSecret, body), body); err != nil || !got.Duplicate {
		t.Fatalf("replay: %v %v", got, err)
	}
	stale := []byte(strings.Replace(string(body), `"webhookTimestamp":`, `"webhookTimestamp":1000000,"x":`, 1))
	for name, d := range map[string][2]string{
		"forged":   {"d-2", fakelinear.SignWebhook(strings.Repeat("0", 64), body)},
		"unsigned": {"d-3", ""},
		"stale":    {"d-4", fakelinear.SignWebhook(c.WebhookSecret, stale)},
	} {
		b := body
		if name == "stale" {
			b = stale
		}
		if _, err := deliver(d[0], d[1], b); status.Code(err) != codes.Unauthenticated {
			t.Errorf("%s delivery: %v", name, err)
		}
	}
	if n := e.count(t, "linear_deliveries"); n != 1 {
		t.Fatalf("%d deliveries stored, want 1", n)
	}
	comment := []byte(`{"type":"Comment","action":"create","data":{"id":"c1"}}`)
	if got, err := deliver("d-5", fakelinear.SignWebhook(c.WebhookSecret, comment), comment); err != nil || got.Accepted || got.Reason == "" {
		t.Fatalf("a comment event: %v %v", got, err)
	}
	// Only the gateway may hand deliveries over.
	if _, err := e.client.HandleLinearWebhook(e.ctx(alice), &agentv1.HandleLinearWebhookRequest{Body: body}); status.Code(err) == codes.OK {
		t.Fatal("a user handed a delivery over")
	}
}

// Every RPC of LinearService names the field of malformed input, and stores nothing.
func TestLinearMalformedInput(t *testing.T) {
	e := newLinearEnv(t)
	ctx := e.ctx(alice)
	c := e.connect(t, alice)
	conn := func(mod func(*agentv1.LinearConnection)) func() error {
		return func() error {
			in := &agentv1.LinearConnection{ApiKey: linearKey, Repo: "local/r", TeamIds: []string{e.team}}
			mod(in)
			_, err := e.client.ConnectLinear(ctx, &agentv1.ConnectLinearRequest{Connection: in})
			return err
		}
	}
	hook := func(h map[string]string, body string) func() error {
		return func() error {
			_, err := e.client.HandleLinearWebhook(e.gateway, &agentv1.HandleLinearWebhookRequest{Headers: h, Body: []byte(body)})
			return err
		}
	}
	sig := strings.Repeat("a", 64)
	cases := []struct {
		method, field string
		call          func() error
	}{
		{"ConnectLinear", "connection", func() error {
			_, err := e.client.ConnectLinear(ctx, &agentv1.ConnectLinearRequest{})
			return err
		}},
		{"ConnectLinear", "request_id", func() error {
			_, err := e.client.ConnectLinear(ctx, &agentv1.ConnectLinearRequest{RequestId: strings.Repeat("r", 200), Connection: &agentv1.LinearConnection{}})
			return err
		}},
		{"ConnectLinear", "connection.api_key", conn(func(c *agentv1.LinearConnection) { c.ApiKey = "" })},
		{"ConnectLinear", "connection.api_key", conn(func(c *agentv1.LinearConnection) { c.ApiKey = "with a space" })},
		{"ConnectLinear", "connection.repo", conn(func(c *agentv1.LinearConnection) { c.Repo = "no-slash" })},
		{"ConnectLinear", "connection.team_ids", conn(func(c *agentv1.LinearConnection) { c.TeamIds = nil })},
		{"ConnectLinear", "connection.team_ids[0]", conn(func(c *agentv1.LinearConnection) { c.TeamIds = []string{"not an id"} })},
		{"ConnectLinear", "connection.project_ids[0]", conn(func(c *agentv1.LinearConnection) { c.ProjectIds = []string{"x/y"} })},
		{"ConnectLinear", "connection.state_types[0]", conn(func(c *agentv1.LinearConnection) { c.StateTypes = []string{"completed"} })},
		{"ConnectLinear", "connection.sync_interval", conn(func(c *agentv1.LinearConnection) { c.SyncInterval = durationpb.New(time.Second) })},
		{"ListLinearConnections", "page_size", func() error {
			_, err := e.client.ListLinearConnections(ctx, &agentv1.ListLinearConnectionsRequest{PageSize: 101})
			return err
		}},
		{"ListLinearConnections", "page_token", func() error {
			_, err := e.client.ListLinearConnections(ctx, &agentv1.ListLinearConnectionsRequest{PageToken: "garbage"})
			return err
		}},
		{"DeleteLinearConnection", "id", func() error {
			_, err := e.client.DeleteLinearConnection(ctx, &agentv1.DeleteLinearConnectionRequest{Id: "x"})
			return err
		}},
		{"SyncLinear", "connection_id", func() error {
			_, err := e.client.SyncLinear(ctx, &agentv1.SyncLinearRequest{})
			return err
		}},
		{"ListLinearIssues", "connection_id", func() error {
			_, err := e.client.ListLinearIssues(ctx, &agentv1.ListLinearIssuesRequest{ConnectionId: "x"})
			return err
		}},
		{"ListLinearIssues", "page_size", func() error {
			_, err := e.client.ListLinearIssues(ctx, &agentv1.ListLinearIssuesRequest{ConnectionId: c.Id, PageSize: -1})
			return err
		}},
		{"ListLinearIssues", "page_token", func() error {
			_, err := e.client.ListLinearIssues(ctx, &agentv1.ListLinearIssuesRequest{ConnectionId: c.Id, PageToken: "garbage"})
			return err
		}},
		{"HandleLinearWebhook", "linear-delivery", hook(map[string]string{"linear-signature": sig}, "{}")},
		{"HandleLinearWebhook", "body", hook(map[string]string{"linear-signature": sig, "linear-delivery": "d"}, "not json")},
		{"HandleLinearWebhook", "body", hook(map[string]string{"linear-signature": sig, "linear-delivery": "d"}, `{"type":"Issue","data":{}}`)},
		{"HandleLinearWebhook", "body", hook(map[string]string{"linear-signature": sig, "linear-delivery": "d"}, strings.Repeat(" ", service.MaxWebhookBody+1))},
	}
	for _, tc := range cases {
		t.Run(tc.method+"/"+tc.field, func(t *testing.T) {
			grpctest.WantInvalid(t, tc.call(), tc.field)
		})
	}
	if n := e.count(t, "linear_connections"); n != 1 {
		t.Errorf("%d connections after refused requests, want 1", n)
	}
	if n := e.count(t, "linear_deliveries"); n != 0 {
		t.Errorf("%d deliveries stored from refused requests", n)
	}
}
