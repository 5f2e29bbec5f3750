package repoevents_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/events"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/agent/internal/repoevents"
	"github.com/thefold/thefold/services/agent/internal/store"
	"github.com/thefold/thefold/services/agent/migrations"
)

// feed is a github service whose ReadRepoEventFeed answers the next of its answers, recording
// each request with its caller.
type feed struct {
	githubv1.UnimplementedRepoServiceServer
	mu      sync.Mutex
	answers []func(req *githubv1.ReadRepoEventFeedRequest) (*githubv1.ReadRepoEventFeedResponse, error)
	reqs    []*githubv1.ReadRepoEventFeedRequest
	callers []auth.Principal
}

func (f *feed) ReadRepoEventFeed(ctx context.Context, req *githubv1.ReadRepoEventFeedRequest) (*githubv1.ReadRepoEventFeedResponse, error) {
	p, _ := auth.FromContext(ctx)
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reqs, f.callers = append(f.reqs, req), append(f.callers, p)
	a := f.answers[0]
	f.answers = f.answers[1:]
	return a(req)
}

func event(id, typ, action, payload string) *githubv1.RepoEvent {
	return &githubv1.RepoEvent{Id: id, Type: typ, Action: action, Payload: []byte(payload)}
}

// The first read starts the feed without replaying it; an unchanged feed (read with the last
// ETag) adds nothing; new events become deliveries, oldest first, triaged as the webhook's
// (an issue's event pending, a push ignored); a failed read is recorded and waits; the feed
// is read as the connection's owner; a connection that does not poll is never read.
func TestPollerTurnsTheFeedIntoDeliveries(t *testing.T) {
	pool, _ := dbtest.NewDatabase(t, "agent", migrations.FS)
	st := store.New(pool, events.NewHub(pool))
	f := &feed{}
	g := grpctest.Start(t, func(s *grpc.Server) { githubv1.RegisterRepoServiceServer(s, f) })
	cfg := repoevents.DefaultPollConfig
	cfg.MinInterval, cfg.Backoff = 0, 0
	p := repoevents.NewPoller(st, githubv1.NewRepoServiceClient(g.Conn), g.ServiceSigner(t, "agent"), cfg, nil)
	ctx := context.Background()
	conn, _, err := st.CreateConnection(ctx, &agentv1.RepoConnection{OwnerId: "user-alice", Repo: "acme/api", Poll: true}, []byte("s"), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.CreateConnection(ctx, &agentv1.RepoConnection{OwnerId: "user-bob", Repo: "acme/api"}, []byte("s"), ""); err != nil {
		t.Fatal(err)
	}
	issue := `{"action":"opened","issue":{"number":5},"repository":{"full_name":"acme/api"}}`
	zero := durationpb.New(0)
	f.answers = []func(*githubv1.ReadRepoEventFeedRequest) (*githubv1.ReadRepoEventFeedResponse, error){
		func(*githubv1.ReadRepoEventFeedRequest) (*githubv1.ReadRepoEventFeedResponse, error) {
			return &githubv1.ReadRepoEventFeedResponse{Etag: "A", PollInterval: zero,
				Events: []*githubv1.RepoEvent{event("12", "issues", "opened", issue), event("11", "push", "", `{}`)}}, nil
		},
		func(*githubv1.ReadRepoEventFeedRequest) (*githubv1.ReadRepoEventFeedResponse, error) {
			return &githubv1.ReadRepoEventFeedResponse{Etag: "A", NotModified: true, PollInterval: zero}, nil
		},
		func(*githubv1.ReadRepoEventFeedRequest) (*githubv1.ReadRepoEventFeedResponse, error) {
			return &githubv1.ReadRepoEventFeedResponse{Etag: "B", PollInterval: zero, Events: []*githubv1.RepoEvent{
				event("14", "issues", "opened", issue), event("13", "push", "", `{"repository":{"full_name":"acme/api"}}`),
				event("12", "issues", "opened", issue), event("11", "push", "", `{}`)}}, nil
		},
		func(*githubv1.ReadRepoEventFeedRequest) (*githubv1.ReadRepoEventFeedResponse, error) {
			return nil, status.Error(codes.Unavailable, "GitHub rate limit exhausted; resets at 12:00:00 UTC")
		},
	}
	deliveries := func() []*agentv1.RepoDelivery {
		list, _, err := st.ListRepoDeliveries(ctx, conn.Id, 100, "")
		if err != nil {
			t.Fatal(err)
		}
		return list
	}
	polled := func() *store.ConnectionRecord {
		c, err := st.GetConnection(ctx, "user-alice", conn.Id)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for i, want := range []string{"started", "unchanged", "2 new events", "read failed (Unavailable): GitHub rate limit"} {
		if n, err := p.Once(ctx); err != nil || n != 1 {
			t.Fatalf("read %d: %d %v", i, n, err)
		}
		if c := polled(); !strings.Contains(c.PollStatus, want) || c.LastPollTime == nil {
			t.Fatalf("read %d: status %q, want %q", i, c.PollStatus, want)
		}
		if i == 0 && len(deliveries()) != 0 {
			t.Fatalf("the first read replayed the feed: %v", deliveries())
		}
	}
	if f.reqs[0].Etag != "" || f.reqs[1].Etag != "A" || f.reqs[2].Etag != "A" || f.reqs[3].Etag != "B" || f.reqs[0].Repo != "acme/api" {
		t.Fatalf("requests %v", f.reqs)
	}
	if c := f.callers[0]; c.UserID != "user-alice" || c.Service != "agent" {
		t.Fatalf("read as %+v", c)
	}
	got := map[string]*agentv1.RepoDelivery{}
	for _, d := range deliveries() {
		got[d.DeliveryId] = d
	}
	if len(got) != 2 || got["event-14"].GetState() != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_PENDING ||
		got["event-13"].GetState() != agentv1.RepoDeliveryState_REPO_DELIVERY_STATE_IGNORED || got["event-14"].GetAction() != "opened" {
		t.Fatalf("deliveries %v", got)
	}
	if c := polled(); c.PollLastEvent != 14 || c.PollETag != "B" {
		t.Fatalf("feed state %d %q", c.PollLastEvent, c.PollETag)
	}
	// The pending one is the processor's, like a webhook's.
	claimed, err := st.ClaimRepoDeliveries(ctx, 10, 0)
	if err != nil || len(claimed) != 1 || claimed[0].DeliveryId != "event-14" || !strings.Contains(string(claimed[0].Payload), `"number":5`) {
		t.Fatalf("claimed %v %v", claimed, err)
	}
	if len(f.reqs) != 4 {
		t.Fatalf("%d reads, want 4 (bob's connection does not poll)", len(f.reqs))
	}
}
