package service_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	"github.com/thefold/thefold/pkg/grpctest"
)

// count is the number of rows of table.
func (e *hookEnv) count(t *testing.T, table string) int {
	t.Helper()
	var n int
	if err := e.pool.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// A connection's monitor is off unless asked for, takes its defaults, and is turned on,
// tuned and off again with UpdateRepoConnection; fields not named keep their values.
func TestRepoHealthSettings(t *testing.T) {
	e := newHookEnv(t, nil)
	ctx := e.ctx(alice)
	off := e.connect(t, alice, "local/r")
	if h := off.GetHealth(); h.GetEnabled() || h.GetInterval().AsDuration() != 24*time.Hour || h.GetTodoThreshold() != 200 || h.GetNextCheckTime() != nil {
		t.Fatalf("a connection without settings: %v", h)
	}
	on, err := e.events.ConnectRepository(ctx, &agentv1.ConnectRepositoryRequest{Repo: "local/s",
		Health: &agentv1.RepoHealthSettings{Enabled: true, Interval: durationpb.New(2 * time.Hour), TodoThreshold: 5, AutoStart: true}})
	if err != nil {
		t.Fatal(err)
	}
	h := on.Connection.GetHealth()
	if !h.Enabled || h.Interval.AsDuration() != 2*time.Hour || h.TodoThreshold != 5 || !h.AutoStart || h.NextCheckTime == nil {
		t.Fatalf("settings asked for: %v", h)
	}
	if due := h.NextCheckTime.AsTime(); time.Until(due) > time.Minute {
		t.Errorf("the first check of a monitored connection is due at %s, not now", due)
	}

	// Only the named field changes.
	up, err := e.events.UpdateRepoConnection(ctx, &agentv1.UpdateRepoConnectionRequest{Id: off.Id,
		Connection: &agentv1.RepoConnection{Health: &agentv1.RepoHealthSettings{Enabled: true, TodoThreshold: 999}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"health.enabled"}}})
	if err != nil {
		t.Fatal(err, e.logs.String())
	}
	if h := up.Connection.GetHealth(); !h.Enabled || h.TodoThreshold != 200 || h.NextCheckTime == nil {
		t.Fatalf("after health.enabled: %v", h)
	}
	up, err = e.events.UpdateRepoConnection(ctx, &agentv1.UpdateRepoConnectionRequest{Id: off.Id,
		Connection: &agentv1.RepoConnection{IssueLabels: []string{"thefold"}, Health: &agentv1.RepoHealthSettings{TodoThreshold: 10}},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"issue_labels", "health.todo_threshold"}}})
	if err != nil {
		t.Fatal(err)
	}
	if c := up.Connection; !c.Health.Enabled || c.Health.TodoThreshold != 10 || strings.Join(c.IssueLabels, ",") != "thefold" {
		t.Fatalf("after issue_labels and health.todo_threshold: %v", c)
	}
	// "health" replaces the whole message: off, with defaults.
	up, err = e.events.UpdateRepoConnection(ctx, &agentv1.UpdateRepoConnectionRequest{Id: off.Id, Connection: &agentv1.RepoConnection{},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"health"}}})
	if err != nil {
		t.Fatal(err)
	}
	if h := up.Connection.GetHealth(); h.Enabled || h.TodoThreshold != 200 || h.NextCheckTime != nil {
		t.Fatalf("after health: %v", h)
	}
	// Another user's connection is not there for them.
	_, err = e.events.UpdateRepoConnection(e.ctx(bob), &agentv1.UpdateRepoConnectionRequest{Id: off.Id, Connection: &agentv1.RepoConnection{},
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"poll"}}})
	if status.Code(err) != codes.NotFound {
		t.Fatalf("bob updates alice's connection: %v", err)
	}
}

// CheckRepoHealth queues one check per connection at a time: a second call returns the
// queued one, a retry with the request_id returns the first, and GetRepoHealth shows it.
func TestCheckRepoHealthQueuesOne(t *testing.T) {
	e := newHookEnv(t, nil)
	ctx := e.ctx(alice)
	c := e.connect(t, alice, "local/r")
	first, err := e.health.CheckRepoHealth(ctx, &agentv1.CheckRepoHealthRequest{ConnectionId: c.Id, RequestId: "check-1"})
	if err != nil {
		t.Fatal(err)
	}
	r := first.Report
	if r.State != agentv1.RepoHealthState_REPO_HEALTH_STATE_QUEUED || !r.Manual || r.Repo != "local/r" || r.ConnectionId != c.Id {
		t.Fatalf("queued report: %v", r)
	}
	for _, id := range []string{"check-1", "check-2", ""} {
		again, err := e.health.CheckRepoHealth(ctx, &agentv1.CheckRepoHealthRequest{ConnectionId: c.Id, RequestId: id})
		if err != nil {
			t.Fatal(err)
		}
		if again.Report.Id != r.Id {
			t.Errorf("request_id %q queued a second check %s beside %s", id, again.Report.Id, r.Id)
		}
	}
	if n := e.count(t, "repo_health_reports"); n != 1 {
		t.Fatalf("%d reports stored, want 1", n)
	}
	got, err := e.health.GetRepoHealth(ctx, &agentv1.GetRepoHealthRequest{ConnectionId: c.Id})
	if err != nil {
		t.Fatal(err)
	}
	if got.Latest.GetId() != r.Id || got.Repo != "local/r" || len(got.Trend) != 0 || got.Settings == nil {
		t.Fatalf("GetRepoHealth: %v", got)
	}
	if _, err := e.health.GetRepoHealth(e.ctx(bob), &agentv1.GetRepoHealthRequest{ConnectionId: c.Id}); status.Code(err) != codes.NotFound {
		t.Fatalf("bob reads alice's health: %v", err)
	}
	if _, err := e.health.CheckRepoHealth(e.ctx(bob), &agentv1.CheckRepoHealthRequest{ConnectionId: c.Id}); status.Code(err) != codes.NotFound {
		t.Fatalf("bob checks alice's repository: %v", err)
	}
}

// Every new RPC names the field of malformed input and stores nothing.
func TestRepoHealthMalformedInput(t *testing.T) {
	e := newHookEnv(t, nil)
	ctx := e.ctx(alice)
	c := e.connect(t, alice, "local/r")
	update := func(paths []string, conn *agentv1.RepoConnection) func() error {
		return func() error {
			_, err := e.events.UpdateRepoConnection(ctx, &agentv1.UpdateRepoConnectionRequest{Id: c.Id, Connection: conn,
				UpdateMask: &fieldmaskpb.FieldMask{Paths: paths}})
			return err
		}
	}
	health := func(h *agentv1.RepoHealthSettings) *agentv1.RepoConnection { return &agentv1.RepoConnection{Health: h} }
	cases := []struct {
		method, field string
		call          func() error
	}{
		{"ConnectRepository", "health.interval", func() error {
			_, err := e.events.ConnectRepository(ctx, &agentv1.ConnectRepositoryRequest{Repo: "local/s",
				Health: &agentv1.RepoHealthSettings{Interval: durationpb.New(time.Minute)}})
			return err
		}},
		{"ConnectRepository", "health.todo_threshold", func() error {
			_, err := e.events.ConnectRepository(ctx, &agentv1.ConnectRepositoryRequest{Repo: "local/s",
				Health: &agentv1.RepoHealthSettings{TodoThreshold: -1}})
			return err
		}},
		{"UpdateRepoConnection", "id", func() error {
			_, err := e.events.UpdateRepoConnection(ctx, &agentv1.UpdateRepoConnectionRequest{Id: "nope", Connection: &agentv1.RepoConnection{},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"poll"}}})
			return err
		}},
		{"UpdateRepoConnection", "connection", update([]string{"poll"}, nil)},
		{"UpdateRepoConnection", "connection.id", update([]string{"poll"}, &agentv1.RepoConnection{Id: "6f1d2f9e-0000-4000-8000-000000000000"})},
		{"UpdateRepoConnection", "update_mask", update(nil, &agentv1.RepoConnection{})},
		{"UpdateRepoConnection", "update_mask.paths[1]", update([]string{"poll", "repo"}, &agentv1.RepoConnection{})},
		{"UpdateRepoConnection", "update_mask", update([]string{"health", "health.enabled"}, health(&agentv1.RepoHealthSettings{}))},
		{"UpdateRepoConnection", "connection.issue_labels", update([]string{"issue_labels"}, &agentv1.RepoConnection{IssueLabels: []string{strings.Repeat("l", 51)}})},
		{"UpdateRepoConnection", "connection.poll", update([]string{"poll"}, &agentv1.RepoConnection{Poll: true})},
		{"UpdateRepoConnection", "connection.health.interval", update([]string{"health.interval"},
			health(&agentv1.RepoHealthSettings{Interval: durationpb.New(31 * 24 * time.Hour)}))},
		{"UpdateRepoConnection", "connection.health.interval", update([]string{"health"},
			health(&agentv1.RepoHealthSettings{Interval: &durationpb.Duration{Seconds: 1, Nanos: -1}}))},
		{"UpdateRepoConnection", "connection.health.todo_threshold", update([]string{"health.todo_threshold"},
			health(&agentv1.RepoHealthSettings{TodoThreshold: 1_000_001}))},
		{"CheckRepoHealth", "connection_id", func() error {
			_, err := e.health.CheckRepoHealth(ctx, &agentv1.CheckRepoHealthRequest{})
			return err
		}},
		{"CheckRepoHealth", "connection_id", func() error {
			_, err := e.health.CheckRepoHealth(ctx, &agentv1.CheckRepoHealthRequest{ConnectionId: "12"})
			return err
		}},
		{"CheckRepoHealth", "request_id", func() error {
			_, err := e.health.CheckRepoHealth(ctx, &agentv1.CheckRepoHealthRequest{ConnectionId: c.Id, RequestId: strings.Repeat("k", 200)})
			return err
		}},
		{"GetRepoHealth", "connection_id", func() error {
			_, err := e.health.GetRepoHealth(ctx, &agentv1.GetRepoHealthRequest{ConnectionId: "x"})
			return err
		}},
		{"GetRepoHealth", "trend_size", func() error {
			_, err := e.health.GetRepoHealth(ctx, &agentv1.GetRepoHealthRequest{ConnectionId: c.Id, TrendSize: 101})
			return err
		}},
		{"GetRepoHealth", "trend_size", func() error {
			_, err := e.health.GetRepoHealth(ctx, &agentv1.GetRepoHealthRequest{ConnectionId: c.Id, TrendSize: -1})
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.method+"/"+tc.field, func(t *testing.T) {
			grpctest.WantInvalid(t, tc.call(), tc.field)
		})
	}
	if n := e.count(t, "repo_health_reports"); n != 0 {
		t.Errorf("%d reports stored from refused requests", n)
	}
	if n := e.count(t, "repo_connections"); n != 1 {
		t.Errorf("%d connections after refused requests, want 1", n)
	}
	got, err := e.events.ListRepoConnections(ctx, &agentv1.ListRepoConnectionsRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if h := got.Connections[0].Health; h.Enabled || h.TodoThreshold != 200 || got.Connections[0].Poll || len(got.Connections[0].IssueLabels) != 0 {
		t.Errorf("a refused update changed the connection: %v", got.Connections[0])
	}
}
