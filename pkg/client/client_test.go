package client

import (
	"context"
	"errors"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

func TestWithRequestID(t *testing.T) {
	req := &tasksv1.CreateTaskRequest{Title: "t"}
	got := withRequestID(req).(*tasksv1.CreateTaskRequest)
	if got.RequestId == "" || got.Title != "t" {
		t.Fatalf("filled %v", got)
	}
	if req.RequestId != "" {
		t.Fatal("the caller's message was changed")
	}
	if again := withRequestID(req).(*tasksv1.CreateTaskRequest); again.RequestId == got.RequestId {
		t.Fatal("two calls got the same request_id")
	}
	mine := &agentv1.StartTaskRequest{RequestId: "mine", TaskId: "x"}
	if withRequestID(mine) != mine {
		t.Fatal("a request_id the caller set was replaced")
	}
	get := &tasksv1.GetTaskRequest{Id: "x"}
	if withRequestID(get) != get {
		t.Fatal("a request without request_id was copied")
	}
}

func TestAddrs(t *testing.T) {
	c := Config{}
	if got := c.Addr("tasks"); got != "127.0.0.1:9101" {
		t.Fatalf("tasks at %s", got)
	}
	c = Config{Host: "thefold.internal", Addrs: map[string]string{"agent": "10.0.0.8:7000"}}
	if c.Addr("agent") != "10.0.0.8:7000" || c.Addr("memory") != "thefold.internal:9102" {
		t.Fatalf("agent %s, memory %s", c.Addr("agent"), c.Addr("memory"))
	}
	t.Setenv("THEFOLD_TOKEN", "tok")
	t.Setenv("THEFOLD_GATEWAY_ADDR", "gw:1")
	if e := FromEnv(); e.Token != "tok" || e.Addr("gateway") != "gw:1" {
		t.Fatalf("from the environment: %+v", e)
	}
	if _, err := New(Config{Token: "a", APIKey: "b"}); err == nil {
		t.Fatal("a token and an API key together were taken")
	}
}

// An API key is exchanged once for a token, which is used until a minute before it expires.
func TestTokenSourceRenewsBeforeExpiry(t *testing.T) {
	calls := 0
	expiry := time.Now().Add(time.Hour)
	ts := &tokenSource{apiKey: "key", exchange: func(_ context.Context, key string) (*gatewayv1.ExchangeAPIKeyResponse, error) {
		calls++
		if key != "key" {
			return nil, errors.New("wrong key")
		}
		return &gatewayv1.ExchangeAPIKeyResponse{AccessToken: "t" + string(rune('0'+calls)), ExpireTime: timestamppb.New(expiry)}, nil
	}}
	for range 3 {
		if tok, err := ts.get(context.Background()); err != nil || tok != "t1" {
			t.Fatalf("token %q, %v", tok, err)
		}
	}
	expiry = time.Now().Add(30 * time.Second)
	ts.expires = expiry
	if tok, _ := ts.get(context.Background()); tok != "t2" || calls != 2 {
		t.Fatalf("near its expiry the token was not renewed: %q after %d exchanges", tok, calls)
	}
	static := &tokenSource{static: "s"}
	if tok, _ := static.get(context.Background()); tok != "s" {
		t.Fatalf("static %q", tok)
	}
}
