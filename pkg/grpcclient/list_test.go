package grpcclient_test

import (
	"context"
	"strings"
	"testing"

	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/grpcclient"
)

// A comma-separated target is one connection over several replicas: calls go round-robin,
// and a replica that is down is skipped.
func TestAddressListSpreadsCallsOverReplicas(t *testing.T) {
	a, b := &flaky{}, &flaky{}
	addrA, addrB := serve(t, a), serve(t, b)
	conn, err := grpcclient.Dial(addrA+","+addrB, grpcclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	c := tasksv1.NewTaskServiceClient(conn)
	ctx := context.Background()
	for range 20 {
		if _, err := c.GetTask(ctx, &tasksv1.GetTaskRequest{Id: "t"}); err != nil {
			t.Fatal(err)
		}
	}
	// round_robin starts once both subchannels are ready; the first calls may all go to one.
	if a.getCalls.Load() == 0 || b.getCalls.Load() == 0 || a.getCalls.Load()+b.getCalls.Load() != 20 {
		t.Fatalf("calls: %d to the first replica, %d to the second; want both used, 20 in all", a.getCalls.Load(), b.getCalls.Load())
	}
	// A list naming a dead replica still serves every call from the live one.
	dead := "127.0.0.1:1"
	conn2, err := grpcclient.Dial(dead+","+addrA, grpcclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	before := a.getCalls.Load()
	c2 := tasksv1.NewTaskServiceClient(conn2)
	for range 5 {
		if _, err := c2.GetTask(ctx, &tasksv1.GetTaskRequest{Id: "t"}); err != nil {
			t.Fatalf("with one replica down: %v", err)
		}
	}
	if got := a.getCalls.Load() - before; got != 5 {
		t.Fatalf("the live replica answered %d of 5 calls", got)
	}
}

func TestAddressListRefusesMalformedEntries(t *testing.T) {
	for _, target := range []string{"127.0.0.1:9101,", "127.0.0.1:9101,,127.0.0.1:9102", "127.0.0.1:9101,tasks"} {
		_, err := grpcclient.Dial(target, grpcclient.Options{})
		if err == nil || !strings.Contains(err.Error(), "address list") {
			t.Errorf("Dial(%q) = %v, want an address list error", target, err)
		}
	}
}
