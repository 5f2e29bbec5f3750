package server_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/config"
	"github.com/thefold/thefold/pkg/errs"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/server"
)

// limitProbe answers CreateTask with the caller and holds WatchTasks open until the
// client goes away, telling started when it has begun.
type limitProbe struct {
	tasksv1.UnimplementedTaskServiceServer
	started chan struct{}
}

func (limitProbe) CreateTask(ctx context.Context, req *tasksv1.CreateTaskRequest) (*tasksv1.CreateTaskResponse, error) {
	p, _ := auth.FromContext(ctx)
	return &tasksv1.CreateTaskResponse{Task: &tasksv1.Task{OwnerId: p.UserID, Title: req.GetTitle()[:min(len(req.GetTitle()), 8)]}}, nil
}

func (p limitProbe) WatchTasks(_ *tasksv1.WatchTasksRequest, s grpc.ServerStreamingServer[tasksv1.WatchTasksResponse]) error {
	p.started <- struct{}{}
	<-s.Context().Done()
	return s.Context().Err()
}

func startLimited(t *testing.T, lim server.Limits, public ...string) (*grpctest.Env, tasksv1.TaskServiceClient, limitProbe) {
	t.Helper()
	p := limitProbe{started: make(chan struct{}, 16)}
	env := grpctest.StartConfig(t, server.Config{Limits: lim}, func(s *grpc.Server) { tasksv1.RegisterTaskServiceServer(s, p) }, public...)
	return env, tasksv1.NewTaskServiceClient(env.Conn), p
}

// wantRateLimited fails unless err is RESOURCE_EXHAUSTED naming who, with a RetryInfo
// delay in (0, most].
func wantRateLimited(t *testing.T, err error, who string, most time.Duration) time.Duration {
	t.Helper()
	grpctest.WantCode(t, err, codes.ResourceExhausted, "rate limit exceeded for this "+who)
	d, ok := errs.RetryAfter(err)
	if !ok || d <= 0 || d > most {
		t.Fatalf("RetryInfo delay = %v (present %v), want in (0, %v]", d, ok, most)
	}
	return d
}

// TestRateLimitPerCaller: a burst beyond a user's bucket is refused with a RetryInfo delay
// that matches the rate, while another user, the agent acting for the same user, and
// health checks go on.
func TestRateLimitPerCaller(t *testing.T) {
	t.Parallel()
	// One token a minute: nothing refills while the test runs, so the counts are exact.
	env, c, _ := startLimited(t, server.Limits{RatePerUser: "1/m", BurstPerUser: 3, RatePerService: "1/m", BurstPerService: 5})
	alice, bob := env.Context(t, "alice"), env.Context(t, "bob")
	for i := range 3 {
		if _, err := c.CreateTask(alice, &tasksv1.CreateTaskRequest{}); err != nil {
			t.Fatalf("call %d within alice's burst: %v", i+1, err)
		}
	}
	_, err := c.CreateTask(alice, &tasksv1.CreateTaskRequest{})
	if d := wantRateLimited(t, err, "user", time.Minute); d < 59*time.Second {
		t.Errorf("retry delay %v, want about a minute (one token a minute, none left)", d)
	}
	// A stream's start spends from the same bucket.
	w, err := c.WatchTasks(alice, &tasksv1.WatchTasksRequest{})
	if err == nil {
		_, err = w.Recv()
	}
	wantRateLimited(t, err, "user", time.Minute)

	if resp, err := c.CreateTask(bob, &tasksv1.CreateTaskRequest{}); err != nil || resp.GetTask().GetOwnerId() != "bob" {
		t.Fatalf("bob limited by alice's calls: %v %v", resp, err)
	}
	agent := env.ServiceContext(t, "agent", "alice")
	for i := range 5 {
		if resp, err := c.CreateTask(agent, &tasksv1.CreateTaskRequest{}); err != nil || resp.GetTask().GetOwnerId() != "alice" {
			t.Fatalf("call %d of the agent for alice, whose own budget is spent: %v %v", i+1, resp, err)
		}
	}
	_, err = c.CreateTask(agent, &tasksv1.CreateTaskRequest{})
	wantRateLimited(t, err, "service acting for this user", time.Minute)
	for range 20 {
		if _, err := healthpb.NewHealthClient(env.Conn).Check(t.Context(), &healthpb.HealthCheckRequest{}); err != nil {
			t.Fatalf("health check limited: %v", err)
		}
	}
}

// TestRateLimitRefillsAfterRetryDelay: waiting the delay a refusal names is enough.
func TestRateLimitRefillsAfterRetryDelay(t *testing.T) {
	t.Parallel()
	env, c, _ := startLimited(t, server.Limits{RatePerUser: "5/s", BurstPerUser: 1})
	alice := env.Context(t, "alice")
	var retry time.Duration
	for i := 0; retry == 0; i++ {
		_, err := c.CreateTask(alice, &tasksv1.CreateTaskRequest{})
		if err != nil {
			retry = wantRateLimited(t, err, "user", 200*time.Millisecond)
		} else if i > 10 {
			t.Fatal("ten calls at once within a burst of one")
		}
	}
	time.Sleep(retry) // the delay under test
	if _, err := c.CreateTask(alice, &tasksv1.CreateTaskRequest{}); err != nil {
		t.Fatalf("refused after the retry delay it named (%v): %v", retry, err)
	}
}

// TestRateLimitByAddress: calls without a principal spend their client address's bucket;
// behind a trusted proxy the address is the right-most x-forwarded-for entry it did not
// add itself, so a client cannot spend another's budget by writing its address first.
func TestRateLimitByAddress(t *testing.T) {
	t.Parallel()
	public := tasksv1.TaskService_CreateTask_FullMethodName
	env, _, _ := startLimited(t, server.Limits{RatePerAddress: "1/m", BurstPerAddress: 2, TrustedProxies: []string{"127.0.0.2"}}, public)
	from := func(chain string) context.Context {
		return metadata.AppendToOutgoingContext(t.Context(), "x-forwarded-for", chain)
	}
	proxy := tasksv1.NewTaskServiceClient(dialFrom(t, "127.0.0.2", env.Server.Addr()))
	for range 2 {
		if _, err := proxy.CreateTask(from("203.0.113.7"), &tasksv1.CreateTaskRequest{}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := proxy.CreateTask(from("203.0.113.7"), &tasksv1.CreateTaskRequest{})
	wantRateLimited(t, err, "client address", time.Minute)
	_, err = proxy.CreateTask(from("203.0.113.8, 203.0.113.7"), &tasksv1.CreateTaskRequest{})
	wantRateLimited(t, err, "client address", time.Minute)
	if _, err := proxy.CreateTask(from("203.0.113.8"), &tasksv1.CreateTaskRequest{}); err != nil {
		t.Fatalf("another client limited: %v", err)
	}
	// A user's call is the user's, wherever it comes from.
	if _, err := proxy.CreateTask(metadata.AppendToOutgoingContext(env.Context(t, "alice"), "x-forwarded-for", "203.0.113.7"), &tasksv1.CreateTaskRequest{}); err != nil {
		t.Fatalf("an authenticated call spent its address's budget: %v", err)
	}

	// From a peer that is no trusted proxy the header is ignored: every call is the peer's.
	stranger := tasksv1.NewTaskServiceClient(dialFrom(t, "127.0.0.3", env.Server.Addr()))
	for i, chain := range []string{"198.51.100.1", "198.51.100.2"} {
		if _, err := stranger.CreateTask(from(chain), &tasksv1.CreateTaskRequest{}); err != nil {
			t.Fatalf("call %d: %v", i+1, err)
		}
	}
	_, err = stranger.CreateTask(from("198.51.100.3"), &tasksv1.CreateTaskRequest{})
	wantRateLimited(t, err, "client address", time.Minute)

	// A peer on the server's own host (the REST edge calling its own gRPC port) is
	// trusted: its clients are told apart.
	local := tasksv1.NewTaskServiceClient(env.Conn)
	for _, chain := range []string{"192.0.2.1", "192.0.2.1", "192.0.2.2"} {
		if _, err := local.CreateTask(from(chain), &tasksv1.CreateTaskRequest{}); err != nil {
			t.Fatalf("%s through the local edge: %v", chain, err)
		}
	}
	_, err = local.CreateTask(from("192.0.2.1"), &tasksv1.CreateTaskRequest{})
	wantRateLimited(t, err, "client address", time.Minute)
}

// dialFrom connects to addr from the loopback address src (any 127/8 address is this
// host's), so the server sees a peer other than its own address.
func dialFrom(t *testing.T, src, addr string) *grpc.ClientConn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(src)}}
	conn, err := grpc.NewClient("passthrough:///"+addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestMessageSizeLimits: a request over the receive limit is RESOURCE_EXHAUSTED; the
// default takes requests over gRPC's own 4 MiB (whole files and archives).
func TestMessageSizeLimits(t *testing.T) {
	t.Parallel()
	env, c, _ := startLimited(t, server.Limits{MaxRecvMsgBytes: 1024})
	alice := env.Context(t, "alice")
	if _, err := c.CreateTask(alice, &tasksv1.CreateTaskRequest{Title: strings.Repeat("a", 512)}); err != nil {
		t.Fatalf("a request under the limit: %v", err)
	}
	_, err := c.CreateTask(alice, &tasksv1.CreateTaskRequest{Title: strings.Repeat("a", 2048)})
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("a request over the limit: %v, want ResourceExhausted", err)
	}

	env, c, _ = startLimited(t, server.Limits{})
	if _, err := c.CreateTask(env.Context(t, "alice"), &tasksv1.CreateTaskRequest{Title: strings.Repeat("a", 6<<20)}); err != nil {
		t.Fatalf("a 6 MiB request under the default limit: %v", err)
	}
}

// TestMaxConcurrentStreams: a connection holding its streams makes the next call wait.
func TestMaxConcurrentStreams(t *testing.T) {
	t.Parallel()
	env, c, p := startLimited(t, server.Limits{MaxConcurrentStreams: 1})
	alice := env.Context(t, "alice")
	ctx, cancel := context.WithCancel(alice)
	if _, err := c.WatchTasks(ctx, &tasksv1.WatchTasksRequest{}); err != nil {
		t.Fatal(err)
	}
	<-p.started
	short, cancelShort := context.WithTimeout(alice, 300*time.Millisecond)
	defer cancelShort()
	if _, err := c.CreateTask(short, &tasksv1.CreateTaskRequest{}); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("a second stream on a connection allowed one: %v, want DeadlineExceeded", err)
	}
	cancel()
	if _, err := c.CreateTask(alice, &tasksv1.CreateTaskRequest{}); err != nil {
		t.Fatalf("after the first stream ended: %v", err)
	}
}

// TestKeepalivePolicy: a client pinging no more often than the policy allows is kept, also
// without calls in flight; one pinging faster is sent GOAWAY "too_many_pings".
func TestKeepalivePolicy(t *testing.T) {
	t.Parallel()
	env, _, _ := startLimited(t, server.Limits{KeepaliveMinTime: 100 * time.Millisecond})
	h2 := dialH2(t, env.Server.Addr())
	// More than grpc-go's default policy (pings only with calls in flight, 2 strikes)
	// would take without a GOAWAY.
	for i := range 5 {
		h2.ping(t)
		if goaway := h2.awaitPingAck(t); goaway != "" {
			t.Fatalf("ping %d, 150ms after the last: GOAWAY %q", i+1, goaway)
		}
		time.Sleep(150 * time.Millisecond) // the pace under test
	}
	for range 10 {
		h2.ping(t)
	}
	for {
		goaway := h2.awaitPingAck(t)
		if goaway == "too_many_pings" {
			return
		}
		if goaway != "" {
			t.Fatalf("GOAWAY %q, want too_many_pings", goaway)
		}
	}
}

// h2conn speaks just enough HTTP/2 to ping a server.
type h2conn struct {
	c net.Conn
	r *bufio.Reader
}

const (
	frameSettings = 0x4
	framePing     = 0x6
	frameGoAway   = 0x7
	flagAck       = 0x1
)

func dialH2(t *testing.T, addr string) *h2conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	h := &h2conn{c: c, r: bufio.NewReader(c)}
	if _, err := io.WriteString(c, "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	h.write(t, frameSettings, 0, nil)
	return h
}

func (h *h2conn) write(t *testing.T, typ, flags byte, payload []byte) {
	t.Helper()
	hdr := []byte{byte(len(payload) >> 16), byte(len(payload) >> 8), byte(len(payload)), typ, flags, 0, 0, 0, 0}
	if _, err := h.c.Write(append(hdr, payload...)); err != nil {
		t.Fatal(err)
	}
}

func (h *h2conn) ping(t *testing.T) { h.write(t, framePing, 0, []byte("thefold!")) }

// awaitPingAck reads frames until a ping acknowledgement ("") or a GOAWAY (its debug data).
func (h *h2conn) awaitPingAck(t *testing.T) string {
	t.Helper()
	_ = h.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		var hdr [9]byte
		if _, err := io.ReadFull(h.r, hdr[:]); err != nil {
			t.Fatalf("reading frames: %v", err)
		}
		payload := make([]byte, int(hdr[0])<<16|int(hdr[1])<<8|int(hdr[2]))
		if _, err := io.ReadFull(h.r, payload); err != nil {
			t.Fatalf("reading a frame: %v", err)
		}
		switch {
		case hdr[3] == frameSettings && hdr[4]&flagAck == 0:
			h.write(t, frameSettings, flagAck, nil)
		case hdr[3] == framePing && hdr[4]&flagAck != 0 && bytes.Equal(payload, []byte("thefold!")):
			return ""
		case hdr[3] == frameGoAway && len(payload) >= 8:
			if code := binary.BigEndian.Uint32(payload[4:8]); code != 0xb { // ENHANCE_YOUR_CALM
				t.Errorf("GOAWAY code %#x, want ENHANCE_YOUR_CALM", code)
			}
			return string(payload[8:])
		}
	}
}

func TestLimitsValidate(t *testing.T) {
	t.Parallel()
	bad := server.Limits{RatePerUser: "fast", BurstPerService: -1, RatePerService: "5/s", TrustedProxies: []string{"not-an-ip"}, MaxRecvMsgBytes: -1}
	err := bad.Validate()
	for _, name := range []string{"THEFOLD_GRPC_RATE_PER_USER", "THEFOLD_GRPC_BURST_PER_SERVICE", "THEFOLD_GRPC_TRUSTED_PROXIES", "THEFOLD_GRPC_MAX_RECV_MSG_BYTES"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("Validate does not name %s: %v", name, err)
		}
	}
	if err := (server.Limits{}).Validate(); err != nil {
		t.Errorf("zero limits (defaults, no rate limits): %v", err)
	}
	if _, err := server.New(server.Options{Config: server.Config{Limits: bad}, Logger: slog.New(slog.DiscardHandler), Auth: auth.NewAuthenticator(nil)}); err == nil {
		t.Error("server.New accepted limits that do not parse")
	}
}

// TestLimitsFromEnvironment: the defaults a service starts with, and that they parse.
func TestLimitsFromEnvironment(t *testing.T) {
	t.Parallel()
	var c server.Config
	if err := config.Load(t.Context(), &c, config.Map(map[string]string{"THEFOLD_GRPC_ADDR": ":1", "THEFOLD_ADMIN_ADDR": ":2"}, nil)); err != nil {
		t.Fatal(err)
	}
	want := server.Limits{
		MaxConcurrentStreams: server.DefaultMaxConcurrentStreams, MaxRecvMsgBytes: server.DefaultMaxRecvMsgBytes, MaxSendMsgBytes: server.DefaultMaxSendMsgBytes,
		KeepaliveMinTime: server.DefaultKeepaliveMinTime, MaxConnectionIdle: server.DefaultMaxConnectionIdle,
		KeepaliveTime: server.DefaultKeepaliveTime, KeepaliveTimeout: server.DefaultKeepaliveTimeout,
		RatePerUser: "50/s", BurstPerUser: 200, RatePerService: "500/s", BurstPerService: 2000, RatePerAddress: "50/s", BurstPerAddress: 200,
		TrustedProxies: []string{"127.0.0.0/8", "::1"},
	}
	if d := cmp.Diff(want, c.Limits); d != "" {
		t.Errorf("default limits (-want +got):\n%s", d)
	}
	var bad server.Config
	err := config.Load(t.Context(), &bad, config.Map(map[string]string{"THEFOLD_GRPC_ADDR": ":1", "THEFOLD_ADMIN_ADDR": ":2", "THEFOLD_GRPC_RATE_PER_USER": "lots"}, nil))
	if err == nil || !strings.Contains(err.Error(), "THEFOLD_GRPC_RATE_PER_USER") {
		t.Errorf("a bad rate: %v", err)
	}
}
