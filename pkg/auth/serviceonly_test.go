package auth

import (
	"context"
	"crypto/ed25519"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"

	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
)

// TestSelfTokens: a service's own token (no on_behalf_of) verifies to a principal with
// the service and no owner, which owner-scoped handlers refuse and service-only ones
// accept; nothing else passes RequireService.
func TestSelfTokens(t *testing.T) {
	t.Parallel()
	userPub, userPriv := newKeys(t)
	memPub, memPriv := newKeys(t)
	agentPub, agentPriv := newKeys(t)
	v := NewVerifier(userPub, WithServiceKeys(map[string]ed25519.PublicKey{"memory": memPub, "agent": agentPub}))
	mem, err := NewServiceSigner("memory", memPriv)
	if err != nil {
		t.Fatal(err)
	}
	agent, err := NewServiceSigner("agent", agentPriv)
	if err != nil {
		t.Fatal(err)
	}
	self, issued, err := mem.IssueSelf()
	if err != nil {
		t.Fatal(err)
	}
	p, err := v.Verify(self)
	if err != nil {
		t.Fatal(err)
	}
	if p.Service != "memory" || p.UserID != "" || len(p.Roles) != 0 || p.TokenID != issued.TokenID {
		t.Fatalf("self principal = %+v", p)
	}
	if life := p.ExpiresAt.Sub(p.IssuedAt); life > ServiceTokenLifetime {
		t.Fatalf("self token lives %s", life)
	}

	users := NewSigner(userPriv)
	userTok, _, _ := users.Issue("u1", []string{RoleAdmin}, time.Hour)
	keyTok, _, _ := users.IssueExtra("u1", nil, time.Hour, Extra{APIKeyID: "k1", Scopes: []string{"*:read"}})
	forOwner, _, _ := agent.Issue("u1")
	principal := func(tok string) context.Context {
		t.Helper()
		p, err := v.Verify(tok)
		if err != nil {
			t.Fatal(err)
		}
		return WithPrincipal(context.Background(), p)
	}
	cases := []struct {
		name          string
		ctx           context.Context
		owner, svcErr codes.Code // codes.OK: accepted
	}{
		{"no principal", context.Background(), codes.Unauthenticated, codes.Unauthenticated},
		{"service as itself", principal(self), codes.PermissionDenied, codes.OK},
		{"a person (an admin)", principal(userTok), codes.OK, codes.PermissionDenied},
		{"an API key", principal(keyTok), codes.OK, codes.PermissionDenied},
		{"a service acting for an owner", principal(forOwner), codes.OK, codes.PermissionDenied},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := MustFromContext(tc.ctx)
			wantCodeOrOK(t, "MustFromContext", err, tc.owner)
			_, err = RequireRole(tc.ctx, RoleUser)
			if tc.owner != codes.OK {
				wantCodeOrOK(t, "RequireRole", err, tc.owner)
			}
			_, err = RequireService(tc.ctx)
			wantCodeOrOK(t, "RequireService", err, tc.svcErr)
		})
	}

	// Through the interceptor: a self token authenticates, and the handler decides.
	a := NewAuthenticator(v)
	ctx, err := a.Authenticate(metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+self)), "/thefold.tasks.v1.TaskService/ListTasks")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := MustFromContext(ctx); err == nil {
		t.Fatal("a service's own token reached an owner-scoped handler as an owner")
	}
}

func wantCodeOrOK(t *testing.T, what string, err error, code codes.Code) {
	t.Helper()
	if code == codes.OK {
		if err != nil {
			t.Fatalf("%s: %v, want accepted", what, err)
		}
		return
	}
	wantCode(t, err, code)
}

// TestOnBehalfOfOnlyFromAllowedServices: by default only the agent and the builder may
// act for an owner; another service's key, even a known one, speaks only for itself.
func TestOnBehalfOfOnlyFromAllowedServices(t *testing.T) {
	t.Parallel()
	userPub, _ := newKeys(t)
	keys := map[string]ed25519.PublicKey{}
	signers := map[string]*ServiceSigner{}
	for _, name := range []string{"agent", "builder", "memory", "tasks", "gateway"} {
		pub, priv := newKeys(t)
		keys[name] = pub
		s, err := NewServiceSigner(name, priv)
		if err != nil {
			t.Fatal(err)
		}
		signers[name] = s
	}
	def := NewVerifier(userPub, WithServiceKeys(keys))
	custom := NewVerifier(userPub, WithServiceKeys(keys), WithOnBehalfOfServices("memory"))
	cases := []struct {
		v       *Verifier
		service string
		ok      bool
	}{
		{def, "agent", true}, {def, "builder", true}, {def, "memory", false}, {def, "tasks", false}, {def, "gateway", false},
		{custom, "memory", true}, {custom, "agent", false},
	}
	for _, tc := range cases {
		tok, _, err := signers[tc.service].Issue("owner-1")
		if err != nil {
			t.Fatal(err)
		}
		p, err := tc.v.Verify(tok)
		switch {
		case tc.ok && (err != nil || p.UserID != "owner-1" || p.Service != tc.service):
			t.Errorf("%s on behalf of owner-1: %+v, %v; want accepted", tc.service, p, err)
		case !tc.ok && (!errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "may not act on behalf")):
			t.Errorf("%s on behalf of owner-1: %v; want refused", tc.service, err)
		}
		// Every known service is accepted as itself.
		self, _, _ := signers[tc.service].IssueSelf()
		if p, err := tc.v.Verify(self); err != nil || p.Service != tc.service || p.UserID != "" {
			t.Errorf("%s as itself: %+v, %v", tc.service, p, err)
		}
	}

	// The setting: a bad name is named; none keeps the default.
	cfg := Config{PublicKeyFile: "x", MaxTokenLifetime: time.Hour, OnBehalfOfServices: []string{"agent", "Bad Name"}}
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "THEFOLD_AUTH_ON_BEHALF_OF_SERVICES") {
		t.Errorf("Validate = %v, want THEFOLD_AUTH_ON_BEHALF_OF_SERVICES named", err)
	}
}

// TestDisabledOwner: while a user is disabled no service token acts for them, however
// fresh; their own older tokens are refused; enabling them again lifts the first, not the
// second. Other owners are untouched, and a cached verification is refused too.
func TestDisabledOwner(t *testing.T) {
	t.Parallel()
	userPub, userPriv := newKeys(t)
	agentPub, agentPriv := newKeys(t)
	v := NewVerifier(userPub, WithServiceKeys(map[string]ed25519.PublicKey{"agent": agentPub}))
	agent, _ := NewServiceSigner("agent", agentPriv)
	users := NewSigner(userPriv)
	forU1, _, _ := agent.Issue("u1")
	forU2, _, _ := agent.Issue("u2")
	own, _, _ := users.Issue("u1", nil, time.Hour)
	wantValid(t, v, forU1) // cached
	wantValid(t, v, own)

	now := time.Now().Add(time.Second) // after every token above
	forever := now.Add(24 * time.Hour)
	v.Revoke(Revocation{Type: RevokeUser, Subject: "u1", NotBefore: now, Expire: forever})
	v.Revoke(Revocation{Type: RevokeUserDisabled, Subject: "u1", NotBefore: now, Expire: forever})
	wantRevoked(t, v, forU1, "owner disabled")
	wantRevoked(t, v, own, "issued before")
	wantValid(t, v, forU2)
	// A token minted after the disabling is refused as well: the job must not go on.
	later, _ := NewServiceSigner("agent", agentPriv, WithClock(func() time.Time { return now.Add(10 * time.Second) }))
	fresh, _, _ := later.Issue("u1")
	wantRevoked(t, v, fresh, "owner disabled")

	v.Revoke(Revocation{Type: RevokeUserEnabled, Subject: "u1"})
	wantValid(t, v, fresh)
	wantRevoked(t, v, own, "issued before")
}

// TestOwnersDisabled: the hook sees the revocations held before it was set and those
// applied after; OwnersDisabled stops each disabled owner's work, and again when they are
// disabled again.
func TestOwnersDisabled(t *testing.T) {
	t.Parallel()
	pub, _ := newKeys(t)
	v := NewVerifier(pub)
	forever := time.Now().Add(time.Hour)
	v.Revoke(Revocation{Type: RevokeUserDisabled, Subject: "before", Expire: forever})
	v.Revoke(Revocation{Type: RevokeToken, Subject: "jti", Expire: forever})

	var mu sync.Mutex
	var seen []RevocationType
	v.OnRevoke(func(r Revocation) {
		mu.Lock()
		seen = append(seen, r.Type)
		mu.Unlock()
	})
	mu.Lock()
	if len(seen) != 2 {
		t.Fatalf("hook saw %v of what v held, want both", seen)
	}
	mu.Unlock()

	stopped := make(chan string, 8)
	var fails atomic.Int32
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- OwnersDisabled(ctx, v, slog.New(slog.DiscardHandler), func(_ context.Context, owner string) error {
			if owner == "flaky" && fails.Add(1) == 1 {
				return errors.New("database away")
			}
			stopped <- owner
			return nil
		})
	}()
	next := func() string {
		t.Helper()
		select {
		case o := <-stopped:
			return o
		case <-time.After(10 * time.Second):
			t.Fatal("no owner stopped")
			return ""
		}
	}
	if got := next(); got != "before" {
		t.Fatalf("stopped %q, want the owner disabled before the hook", got)
	}
	v.Revoke(Revocation{Type: RevokeUser, Subject: "role-change", NotBefore: time.Now(), Expire: forever})
	v.Revoke(Revocation{Type: RevokeUserDisabled, Subject: "flaky", Expire: forever})
	if got := next(); got != "flaky" {
		t.Fatalf("stopped %q, want flaky (after a retry); a role change stops nothing", got)
	}
	v.Revoke(Revocation{Type: RevokeUserEnabled, Subject: "before"})
	v.Revoke(Revocation{Type: RevokeUserDisabled, Subject: "before", Expire: forever})
	if got := next(); got != "before" {
		t.Fatalf("stopped %q, want before again", got)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("OwnersDisabled = %v", err)
	}
}

// guardedIdentity is the gateway's rule in front of a scripted IdentityService: only a
// service as itself may watch; it records each stream's token id.
type guardedIdentity struct {
	*scriptedIdentity
	tokens chan string
}

func (g *guardedIdentity) WatchRevocations(req *gatewayv1.WatchRevocationsRequest, stream grpc.ServerStreamingServer[gatewayv1.WatchRevocationsResponse]) error {
	p, err := RequireService(stream.Context())
	if err != nil {
		return err
	}
	g.tokens <- p.TokenID
	return g.scriptedIdentity.WatchRevocations(req, stream)
}

// TestFollowRevocationsAsService: the follower authenticates each stream with a token of
// its own minted for it, so a reconnect after the first token expired still gets in, and
// without a service identity it gets nowhere.
func TestFollowRevocationsAsService(t *testing.T) {
	t.Parallel()
	userPub, _ := newKeys(t)
	memPub, memPriv := newKeys(t)
	var clock atomic.Int64
	clock.Store(time.Now().UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	// The gateway's verifier and the follower's signer share a clock the test moves.
	gw := NewVerifier(userPub, WithServiceKeys(map[string]ed25519.PublicKey{"memory": memPub}), WithClock(now))
	signer, _ := NewServiceSigner("memory", memPriv, WithClock(now))
	follower := NewVerifier(userPub)
	later := time.Now().Add(24 * time.Hour)

	id := &guardedIdentity{scriptedIdentity: &scriptedIdentity{afterIDs: make(chan int64, 16)}, tokens: make(chan string, 16)}
	id.script = []func(grpc.ServerStreamingServer[gatewayv1.WatchRevocationsResponse]) error{
		func(st grpc.ServerStreamingServer[gatewayv1.WatchRevocationsResponse]) error {
			if err := sendAll(st, revocationMsg(1, gatewayv1.RevocationType_REVOCATION_TYPE_TOKEN, "t1", time.Time{}, later)); err != nil {
				return err
			}
			// The stream outlives its token; the gateway then restarts.
			clock.Add(int64(ServiceTokenLifetime + time.Minute))
			return errors.New("gateway restarting")
		},
		func(st grpc.ServerStreamingServer[gatewayv1.WatchRevocationsResponse]) error {
			return sendAll(st, revocationMsg(2, gatewayv1.RevocationType_REVOCATION_TYPE_USER_DISABLED, "u1", time.Time{}, later))
		},
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(grpc.StreamInterceptor(NewAuthenticator(gw).StreamServerInterceptor()))
	gatewayv1.RegisterIdentityServiceServer(gs, id)
	go func() { _ = gs.Serve(lis) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(lis.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	client := gatewayv1.NewIdentityServiceClient(conn)

	// Without a service identity: refused before the handler.
	_, err = recvOne(context.Background(), client)
	wantCode(t, err, codes.Unauthenticated)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = FollowRevocations(AsService(ctx, signer), client, follower, slog.New(slog.DiscardHandler)) }()
	var tokens []string
	for range 2 {
		select {
		case tok := <-id.tokens:
			tokens = append(tokens, tok)
		case <-time.After(10 * time.Second):
			t.Fatalf("streams opened: %d, want 2", len(tokens))
		}
	}
	if tokens[0] == tokens[1] {
		t.Fatal("the reconnect reused the expired token")
	}
	deadline := time.Now().Add(10 * time.Second)
	for follower.Revocations() != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("follower holds %d revocations, want 2", follower.Revocations())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func recvOne(ctx context.Context, client gatewayv1.IdentityServiceClient) (*gatewayv1.WatchRevocationsResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	stream, err := client.WatchRevocations(ctx, &gatewayv1.WatchRevocationsRequest{})
	if err != nil {
		return nil, err
	}
	return stream.Recv()
}
