package store_test

import (
	"context"
	"testing"
	"time"

	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/db/dbtest"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"

	"github.com/thefold/thefold/services/agent/internal/store"
	"github.com/thefold/thefold/services/agent/migrations"
)

func connection(t *testing.T, st *store.Store, h *agentv1.RepoHealthSettings) *agentv1.RepoConnection {
	t.Helper()
	c, _, err := st.CreateConnection(context.Background(), &agentv1.RepoConnection{OwnerId: "alice", Repo: "local/r", Health: h}, []byte("sealed"), "")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestUpdateConnectionHealth(t *testing.T) {
	pool, _ := dbtest.NewDatabase(t, "agent", migrations.FS)
	st := store.New(pool, nil)
	ctx := context.Background()
	c := connection(t, st, &agentv1.RepoHealthSettings{Interval: durationpb.New(time.Hour), TodoThreshold: 3})
	got, err := st.UpdateConnection(ctx, "alice", c.Id, store.ConnectionUpdate{Health: &agentv1.RepoHealthSettings{Enabled: true,
		Interval: durationpb.New(2 * time.Hour), TodoThreshold: 4}})
	if err != nil {
		t.Fatal(err)
	}
	if h := got.Health; !h.Enabled || h.Interval.AsDuration() != 2*time.Hour || h.TodoThreshold != 4 || time.Until(h.NextCheckTime.AsTime()) > time.Second {
		t.Fatalf("%v", h)
	}
}
