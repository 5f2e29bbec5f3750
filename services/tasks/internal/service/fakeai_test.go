package service_test

import (
	"context"
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/auth"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	"github.com/thefold/thefold/pkg/grpcclient"
	"github.com/thefold/thefold/pkg/server"

	"github.com/thefold/thefold/services/tasks/internal/service"
)

// fakeAI is a small working AIService.PlanTaskOrder: it orders tasks by their blocked-by
// links, then by priority, then as listed, and keeps answers by caller and request_id as
// the real service does (a retry is answered from the record and billed once). It can be
// told to fail with a status, or to spoil its answers.
type fakeAI struct {
	aiv1.UnimplementedAIServiceServer
	mu sync.Mutex
	// fail, when set, is returned instead of an answer (and nothing is recorded).
	fail error
	// spoil, when set, turns each answer into a bad one before it is recorded.
	spoil func([]*aiv1.TaskOrder) []*aiv1.TaskOrder
	calls []aiCall
	// answers are the recorded answers by user and request_id.
	answers map[string]*aiv1.PlanTaskOrderResponse
	// billed counts the answers made (not replayed).
	billed int
}

// aiCall is one request the fake received, with the user the request was made for.
type aiCall struct {
	user string
	req  *aiv1.PlanTaskOrderRequest
}

func (f *fakeAI) PlanTaskOrder(ctx context.Context, req *aiv1.PlanTaskOrderRequest) (*aiv1.PlanTaskOrderResponse, error) {
	p, err := auth.MustFromContext(ctx)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, aiCall{user: p.UserID, req: proto.Clone(req).(*aiv1.PlanTaskOrderRequest)})
	if f.fail != nil {
		return nil, f.fail
	}
	key := p.UserID + "\x00" + req.RequestId
	if r, ok := f.answers[key]; ok && req.RequestId != "" {
		return r, nil
	}
	resp := &aiv1.PlanTaskOrderResponse{Tasks: orderTasks(req.Tasks), Reasoning: "blockers first, then the most urgent"}
	if f.spoil != nil {
		resp.Tasks = f.spoil(resp.Tasks)
	}
	f.billed++
	if req.RequestId != "" {
		f.answers[key] = resp
	}
	return resp, nil
}

// set switches the fake's behaviour for the calls that follow.
func (f *fakeAI) set(fail error, spoil func([]*aiv1.TaskOrder) []*aiv1.TaskOrder) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fail, f.spoil = fail, spoil
}

// received returns the calls so far and the number of answers billed.
func (f *fakeAI) received() ([]aiCall, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls), f.billed
}

// orderTasks is Kahn's algorithm picking, among the tasks whose listed blockers are placed,
// the most urgent, then the first listed. A task without a complexity gets 3 plus one per
// blocker; the token estimate is 1,000 per point of complexity.
func orderTasks(tasks []*aiv1.OrderableTask) []*aiv1.TaskOrder {
	index := make(map[string]int, len(tasks))
	for i, t := range tasks {
		index[t.Id] = i
	}
	waiting := make([]int, len(tasks))
	blocks := map[int][]int{}
	for i, t := range tasks {
		for _, b := range t.BlockedBy {
			if j, ok := index[b]; ok {
				waiting[i]++
				blocks[j] = append(blocks[j], i)
			}
		}
	}
	placed := make([]bool, len(tasks))
	var out []*aiv1.TaskOrder
	for len(out) < len(tasks) {
		next := -1
		for i, t := range tasks {
			if !placed[i] && waiting[i] == 0 && (next < 0 || t.Priority > tasks[next].Priority) {
				next = i
			}
		}
		if next < 0 {
			break // a cycle; the real service refuses one as INVALID_ARGUMENT
		}
		placed[next] = true
		for _, k := range blocks[next] {
			waiting[k]--
		}
		t := tasks[next]
		c := t.Complexity
		if c == 0 {
			c = min(3+int32(len(t.BlockedBy)), 10)
		}
		out = append(out, &aiv1.TaskOrder{
			TaskId: t.Id, Order: int32(len(out) + 1), Complexity: c, EstimatedTokens: int64(c) * 1000,
			Reasoning: fmt.Sprintf("%d blockers, %s", len(t.BlockedBy), t.Priority),
		})
	}
	return out
}

// startWithAI is start with the tasks service's ai client pointed at a fake AIService on a
// server of its own. That server trusts the tasks server's signing key, as every service of
// a deployment trusts the one key, so the identity tasks forwards is checked there.
func startWithAI(t *testing.T, opts ...service.Option) (*env, *fakeAI) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Dialled before the fake serves: the connection is lazy, and calls wait for it.
	conn, err := grpcclient.Dial(lis.Addr().String(), grpcclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	e := start(t, append(opts, service.WithAI(aiv1.NewAIServiceClient(conn)))...)
	fake := &fakeAI{answers: map[string]*aiv1.PlanTaskOrderResponse{}}
	srv, err := server.New(server.Options{
		Name:     "ai",
		Config:   server.Config{ShutdownTimeout: 5 * time.Second},
		Logger:   slog.New(slog.DiscardHandler),
		Auth:     auth.NewAuthenticator(auth.NewVerifier(e.server.SigningKey.Public().(ed25519.PublicKey))),
		Listener: lis,
	})
	if err != nil {
		t.Fatal(err)
	}
	aiv1.RegisterAIServiceServer(srv.GRPC(), fake)
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return e, fake
}
