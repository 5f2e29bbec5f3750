package auth

import (
	"context"
	"errors"
	"io"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

// taskProbe answers GetTask and CreateTask with the principal its handler sees (owner_id
// the user, id the API key id, labels the scopes), and WatchTasks with an empty stream.
type taskProbe struct {
	tasksv1.UnimplementedTaskServiceServer
}

func probeTask(ctx context.Context) (*tasksv1.Task, error) {
	p, err := MustFromContext(ctx)
	if err != nil {
		return nil, err
	}
	return &tasksv1.Task{OwnerId: p.UserID, Id: p.APIKeyID, Labels: p.Scopes}, nil
}

func (taskProbe) GetTask(ctx context.Context, _ *tasksv1.GetTaskRequest) (*tasksv1.GetTaskResponse, error) {
	task, err := probeTask(ctx)
	return &tasksv1.GetTaskResponse{Task: task}, err
}

func (taskProbe) CreateTask(ctx context.Context, _ *tasksv1.CreateTaskRequest) (*tasksv1.CreateTaskResponse, error) {
	task, err := probeTask(ctx)
	return &tasksv1.CreateTaskResponse{Task: task}, err
}

func (taskProbe) WatchTasks(_ *tasksv1.WatchTasksRequest, stream grpc.ServerStreamingServer[tasksv1.WatchTasksResponse]) error {
	_, err := probeTask(stream.Context())
	return err
}

// startTaskProbe serves the probe behind a's interceptors on a loopback listener.
func startTaskProbe(t *testing.T, a *Authenticator) tasksv1.TaskServiceClient {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.UnaryInterceptor(a.UnaryServerInterceptor()), grpc.StreamInterceptor(a.StreamServerInterceptor()))
	tasksv1.RegisterTaskServiceServer(gs, taskProbe{})
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return tasksv1.NewTaskServiceClient(conn)
}

func bearer(t *testing.T, tok string) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

func wantCode(t *testing.T, err error, code codes.Code) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("err = %v, want %v", err, code)
	}
}

// fakeGateway is a KeyExchanger over a fixed set of keys, counting exchanges per key.
type fakeGateway struct {
	signer *Signer
	mu     sync.Mutex
	calls  map[string]int
	keys   map[string]Extra // secret → the key's id and scopes
}

func (g *fakeGateway) exchange(_ context.Context, secret string) (string, error) {
	g.mu.Lock()
	g.calls[secret]++
	k, ok := g.keys[secret]
	g.mu.Unlock()
	switch secret {
	case "tfk_down":
		return "", status.Error(codes.Unavailable, "gateway down")
	case "tfk_broken":
		return "", errors.New("connection reset by peer")
	case "tfk_garbage":
		return "not.a.token", nil
	}
	if !ok {
		return "", status.Error(codes.Unauthenticated, "no such key k-secret-detail")
	}
	tok, _, err := g.signer.IssueExtra("u1", []string{RoleUser}, 5*time.Minute, k)
	return tok, err
}

func (g *fakeGateway) count(secret string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.calls[secret]
}

func (g *fakeGateway) revoke(secret string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.keys, secret)
}

func newFakeGateway(t *testing.T, clock *testClock) (*fakeGateway, *Verifier) {
	t.Helper()
	pub, priv := newKeys(t)
	g := &fakeGateway{signer: NewSigner(priv, clock.Option()), calls: map[string]int{}, keys: map[string]Extra{
		"tfk_reader": {APIKeyID: "k1", Scopes: []string{"tasks:read"}},
		"tfk_writer": {APIKeyID: "k2", Scopes: []string{"tasks:write"}},
		"tfk_agent":  {APIKeyID: "k3", Scopes: []string{"agent:read"}},
		"tfk_all":    {APIKeyID: "k4"},
	}}
	return g, NewVerifier(pub, clock.Option())
}

func TestAPIKeysThroughGRPC(t *testing.T) {
	t.Parallel()
	clock := newTestClock(time.Now())
	gw, v := newFakeGateway(t, clock)
	a := NewAuthenticator(v)
	a.SetKeyExchanger(gw.exchange)
	c := startTaskProbe(t, a)

	// The key acts as its owner with its scopes; its token is exchanged once and reused.
	for range 3 {
		r, err := c.GetTask(bearer(t, "tfk_reader"), &tasksv1.GetTaskRequest{})
		if err != nil {
			t.Fatal(err)
		}
		if task := r.GetTask(); task.GetOwnerId() != "u1" || task.GetId() != "k1" || !slices.Equal(task.GetLabels(), []string{"tasks:read"}) {
			t.Fatalf("principal seen by the handler: %+v", task)
		}
	}
	if n := gw.count("tfk_reader"); n != 1 {
		t.Fatalf("exchanged %d times, want once", n)
	}

	// Scopes against the method: read-only methods for a read scope, unary and streaming.
	_, err := c.CreateTask(bearer(t, "tfk_reader"), &tasksv1.CreateTaskRequest{})
	wantCode(t, err, codes.PermissionDenied)
	if msg := status.Convert(err).Message(); !strings.Contains(msg, "tasks:read") || !strings.Contains(msg, "CreateTask") {
		t.Fatalf("PermissionDenied message = %q", msg)
	}
	watch := func(key string) error {
		t.Helper()
		st, err := c.WatchTasks(bearer(t, key), &tasksv1.WatchTasksRequest{})
		if err != nil {
			return err
		}
		if _, err := st.Recv(); !errors.Is(err, io.EOF) {
			return err
		}
		return nil
	}
	if err := watch("tfk_reader"); err != nil {
		t.Fatalf("read-only stream with a read scope: %v", err)
	}
	wantCode(t, watch("tfk_agent"), codes.PermissionDenied)
	_, err = c.GetTask(bearer(t, "tfk_agent"), &tasksv1.GetTaskRequest{})
	wantCode(t, err, codes.PermissionDenied)
	if _, err := c.CreateTask(bearer(t, "tfk_writer"), &tasksv1.CreateTaskRequest{}); err != nil {
		t.Fatalf("write scope: %v", err)
	}
	if _, err := c.CreateTask(bearer(t, "tfk_all"), &tasksv1.CreateTaskRequest{}); err != nil {
		t.Fatalf("key without scopes: %v", err)
	}
	if n := gw.count("tfk_reader"); n != 1 {
		t.Fatalf("exchanged %d times, want once", n)
	}

	// A key the gateway refuses, a gateway that cannot answer, a token that does not verify.
	for key, want := range map[string]codes.Code{
		"tfk_unknown": codes.Unauthenticated,
		"tfk_down":    codes.Unavailable,
		"tfk_broken":  codes.Unavailable,
		"tfk_garbage": codes.Unauthenticated,
	} {
		_, err := c.GetTask(bearer(t, key), &tasksv1.GetTaskRequest{})
		if status.Code(err) != want {
			t.Errorf("%s: err = %v, want %v", key, err, want)
		}
		if strings.Contains(status.Convert(err).Message(), "secret-detail") {
			t.Errorf("%s: the gateway's reason reached the caller: %v", key, err)
		}
	}

	// The cached token is used until a minute before it expires, then exchanged afresh.
	clock.Add(4*time.Minute - 2*time.Second)
	if _, err := c.GetTask(bearer(t, "tfk_reader"), &tasksv1.GetTaskRequest{}); err != nil {
		t.Fatal(err)
	}
	if n := gw.count("tfk_reader"); n != 1 {
		t.Fatalf("exchanged %d times before the cached token's last minute, want once", n)
	}
	clock.Add(3 * time.Second)
	for range 2 {
		if _, err := c.GetTask(bearer(t, "tfk_reader"), &tasksv1.GetTaskRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	if n := gw.count("tfk_reader"); n != 2 {
		t.Fatalf("exchanged %d times after the cached token's last minute, want twice", n)
	}

	// A revoked key: its cached token is refused at once.
	v.Revoke(Revocation{Type: RevokeAPIKey, Subject: "k1", Expire: clock.Now().Add(time.Hour)})
	gw.revoke("tfk_reader")
	_, err = c.GetTask(bearer(t, "tfk_reader"), &tasksv1.GetTaskRequest{})
	wantCode(t, err, codes.Unauthenticated)
	if _, err := c.CreateTask(bearer(t, "tfk_writer"), &tasksv1.CreateTaskRequest{}); err != nil {
		t.Fatalf("another key after a revocation: %v", err)
	}
}

func TestAuthenticateScopesAndAPIKeys(t *testing.T) {
	t.Parallel()
	clock := newTestClock(time.Now())
	gw, v := newFakeGateway(t, clock)
	in := func(tok string) context.Context {
		return metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+tok))
	}
	const (
		getTask    = "/thefold.tasks.v1.TaskService/GetTask"
		createTask = "/thefold.tasks.v1.TaskService/CreateTask"
		whoAmI     = "/thefold.gateway.v1.AuthService/WhoAmI"
		login      = "/thefold.gateway.v1.AuthService/RequestLoginCode"
	)

	// Without an exchanger, API keys are not accepted (but public methods stay public).
	a := NewAuthenticator(v, login)
	_, err := a.Authenticate(in("tfk_reader"), getTask)
	wantCode(t, err, codes.Unauthenticated)
	if !strings.Contains(err.Error(), "API keys are not accepted") {
		t.Fatalf("err = %v", err)
	}
	a.SetKeyExchanger(gw.exchange)

	// Asking who you are needs no scope; a public method lets a bad key through anonymously.
	ctx, err := a.Authenticate(in("tfk_agent"), whoAmI)
	if p, ok := FromContext(ctx); err != nil || !ok || p.APIKeyID != "k3" {
		t.Fatalf("WhoAmI with a key of another area: %+v, %v", p, err)
	}
	ctx, err = a.Authenticate(in("tfk_unknown"), login)
	if _, ok := FromContext(ctx); err != nil || ok {
		t.Fatalf("public method with a bad key: principal %v, %v", ok, err)
	}
	_, err = a.Authenticate(in("tfk_down"), login)
	if err != nil {
		t.Fatalf("public method while the gateway is down: %v", err)
	}

	// Scopes narrow an access token presented directly too, not only an exchanged one.
	tok, _, err := gw.signer.IssueExtra("u1", nil, time.Hour, Extra{Scopes: []string{"tasks:read"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Authenticate(in(tok), getTask); err != nil {
		t.Fatal(err)
	}
	_, err = a.Authenticate(in(tok), createTask)
	wantCode(t, err, codes.PermissionDenied)

	// The exchanger sees the caller's context (it may be cancelled) and a deadline.
	var sawDeadline bool
	a.SetKeyExchanger(func(ctx context.Context, key string) (string, error) {
		_, sawDeadline = ctx.Deadline()
		return gw.exchange(ctx, key)
	})
	if _, err := a.Authenticate(in("tfk_writer"), createTask); err != nil || !sawDeadline {
		t.Fatalf("exchange: %v, deadline %v", err, sawDeadline)
	}
}

// A user revocation (a role change, a user disabled then enabled again) refuses the token
// an API key was exchanged for. The key itself still holds, so the next call should
// exchange it again rather than keep presenting the refused token until it expires.
func TestAPIKeyReexchangedAfterItsTokenIsRefused(t *testing.T) {
	t.Parallel()
	start := time.Now().Truncate(time.Second)
	clock := newTestClock(start.Add(200 * time.Millisecond))
	gw, v := newFakeGateway(t, clock)
	a := NewAuthenticator(v)
	a.SetKeyExchanger(gw.exchange)
	c := startTaskProbe(t, a)
	if _, err := c.GetTask(bearer(t, "tfk_reader"), &tasksv1.GetTaskRequest{}); err != nil {
		t.Fatal(err)
	}
	// The gateway's user revocation: not before the next whole second, and it issues no
	// token for the user before then.
	v.Revoke(Revocation{Type: RevokeUser, Subject: "u1", NotBefore: start.Add(time.Second), Expire: start.Add(time.Hour)})
	clock.Set(start.Add(time.Second))
	if _, err := c.GetTask(bearer(t, "tfk_reader"), &tasksv1.GetTaskRequest{}); err != nil {
		t.Fatalf("a valid key after a user revocation: %v", err)
	}
	if n := gw.count("tfk_reader"); n != 2 {
		t.Fatalf("exchanged %d times, want twice", n)
	}
}
