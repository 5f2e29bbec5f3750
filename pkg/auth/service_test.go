package auth

import (
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
)

func serviceClaims(now time.Time, edit func(c *Claims)) Claims {
	c := Claims{RegisteredClaims: jwt.RegisteredClaims{
		Issuer:    ServiceIssuer,
		Audience:  jwt.ClaimStrings{Audience},
		Subject:   "service:agent",
		ID:        "s1",
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ServiceTokenLifetime)),
	}, OnBehalfOf: "owner-1"}
	if edit != nil {
		edit(&c)
	}
	return c
}

func TestServiceTokens(t *testing.T) {
	t.Parallel()
	userPub, userPriv := newKeys(t)
	agentPub, agentPriv := newKeys(t)
	builderPub, builderPriv := newKeys(t)
	_, strayPriv := newKeys(t)
	v := NewVerifier(userPub, WithServiceKeys(map[string]ed25519.PublicKey{"agent": agentPub, "builder": builderPub}))
	now := time.Now()
	ed := jwt.SigningMethodEdDSA

	agent, err := NewServiceSigner("agent", agentPriv)
	if err != nil {
		t.Fatal(err)
	}
	tok, issued, err := agent.Issue("owner-1")
	if err != nil {
		t.Fatal(err)
	}
	p, err := v.Verify(tok)
	if err != nil {
		t.Fatal(err)
	}
	if p.UserID != "owner-1" || p.Service != "agent" || p.HasRole(RoleAdmin) || !p.HasRole(RoleUser) || p.TokenID != issued.TokenID {
		t.Fatalf("principal = %+v", p)
	}
	if life := p.ExpiresAt.Sub(now); life > ServiceTokenLifetime+time.Second {
		t.Fatalf("service token lives %s", life)
	}

	past, _ := NewServiceSigner("agent", agentPriv, WithClock(func() time.Time { return now.Add(-ServiceTokenLifetime - time.Minute) }))
	expired, _, _ := past.Issue("owner-1")
	cases := []struct {
		name  string
		v     *Verifier
		token string
		want  string
	}{
		{"expired", v, expired, "token is expired"},
		{"signed by the user key", v, craft(t, ed, userPriv, serviceClaims(now, nil)), "signature is invalid"},
		{"signed by another service's key", v, craft(t, ed, builderPriv, serviceClaims(now, nil)), "signature is invalid"},
		{"signed by a stray key", v, craft(t, ed, strayPriv, serviceClaims(now, nil)), "signature is invalid"},
		{"unknown service", v, craft(t, ed, strayPriv, serviceClaims(now, func(c *Claims) { c.Subject = "service:intruder" })), "not a known service"},
		{"subject without the service prefix", v, craft(t, ed, agentPriv, serviceClaims(now, func(c *Claims) { c.Subject = "agent" })), "not a known service"},
		{"verifier without service keys", NewVerifier(userPub), tok, "not a known service"},
		{"self token with roles", v, craft(t, ed, agentPriv, serviceClaims(now, func(c *Claims) { c.OnBehalfOf, c.Roles = "", []string{RoleAdmin} })), "carries roles"},
		{"self token over five minutes", v, craft(t, ed, agentPriv, serviceClaims(now, func(c *Claims) {
			c.OnBehalfOf, c.ExpiresAt = "", jwt.NewNumericDate(now.Add(time.Hour))
		})), "exceeds the maximum"},
		{"on behalf of a service", v, craft(t, ed, agentPriv, serviceClaims(now, func(c *Claims) { c.OnBehalfOf = "service:builder" })), "on behalf of a service"},
		{"roles", v, craft(t, ed, agentPriv, serviceClaims(now, func(c *Claims) { c.Roles = []string{RoleAdmin} })), "carries roles"},
		{"over five minutes", v, craft(t, ed, agentPriv, serviceClaims(now, func(c *Claims) { c.ExpiresAt = jwt.NewNumericDate(now.Add(time.Hour)) })), "exceeds the maximum"},
		{"missing exp", v, craft(t, ed, agentPriv, serviceClaims(now, func(c *Claims) { c.ExpiresAt = nil })), "exp claim is required"},
		{"wrong audience", v, craft(t, ed, agentPriv, serviceClaims(now, func(c *Claims) { c.Audience = jwt.ClaimStrings{"x"} })), "invalid audience"},
		{"HS256", v, craft(t, jwt.SigningMethodHS256, []byte(agentPub), serviceClaims(now, nil)), "signing method HS256 is invalid"},
		{"user token with on_behalf_of", v, craft(t, ed, userPriv, userClaims(now, func(c *Claims) { c.OnBehalfOf = "owner-1" })), "on_behalf_of"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := tc.v.Verify(tc.token)
			if !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalidToken mentioning %q", err, tc.want)
			}
		})
	}

	for _, owner := range []string{"", "service:builder"} {
		if _, _, err := agent.Issue(owner); err == nil {
			t.Errorf("Issue(%q) accepted", owner)
		}
	}
	for _, name := range []string{"", "Agent", "a/b", "../x"} {
		if _, err := NewServiceSigner(name, agentPriv); err == nil {
			t.Errorf("service name %q accepted", name)
		}
	}
}

func TestServiceSignerReusesTokensForHalfTheirLife(t *testing.T) {
	t.Parallel()
	_, priv := newKeys(t)
	now := time.Now()
	s, err := NewServiceSigner("builder", priv, WithClock(func() time.Time { return now }))
	if err != nil {
		t.Fatal(err)
	}
	first, _ := s.token("o1")
	if again, _ := s.token("o1"); again != first {
		t.Fatal("a fresh token was not reused")
	}
	if other, _ := s.token("o2"); other == first {
		t.Fatal("token reused for another owner")
	}
	now = now.Add(ServiceTokenLifetime/2 + time.Second)
	if later, _ := s.token("o1"); later == first {
		t.Fatal("a token past half its life was reused")
	}
}

func TestOnBehalfOfReplacesTheCallersToken(t *testing.T) {
	t.Parallel()
	userPub, userPriv := newKeys(t)
	agentPub, agentPriv := newKeys(t)
	v := NewVerifier(userPub, WithServiceKeys(map[string]ed25519.PublicKey{"agent": agentPub}))
	agent, _ := NewServiceSigner("agent", agentPriv)
	userTok, person, _ := NewSigner(userPriv).Issue("someone", nil, time.Hour)

	// A job's context may still hold the (possibly expired) principal that started it, and
	// even explicit metadata: the service identity wins, and only one token is sent.
	ctx := WithPrincipal(context.Background(), person)
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+userTok)
	ctx, err := outgoing(OnBehalfOf(ctx, agent, "owner-1"))
	if err != nil {
		t.Fatal(err)
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	got := md.Get("authorization")
	if len(got) != 1 {
		t.Fatalf("authorization = %v", got)
	}
	p, err := v.Verify(strings.TrimPrefix(got[0], "Bearer "))
	if err != nil || p.UserID != "owner-1" || p.Service != "agent" {
		t.Fatalf("forwarded principal = %+v, %v", p, err)
	}

	if _, err := outgoing(OnBehalfOf(context.Background(), nil, "owner-1")); err == nil {
		t.Fatal("OnBehalfOf without a signer sent something")
	}
	if _, err := outgoing(OnBehalfOf(context.Background(), agent, "")); err == nil {
		t.Fatal("OnBehalfOf without an owner sent something")
	}
}

func TestServiceKeyFilesAndConfig(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, _, err := EnsureKeyPair(dir); err != nil {
		t.Fatal(err)
	}
	agentKey, created, err := EnsureServiceKeyPair(dir, "agent")
	if err != nil || !created {
		t.Fatalf("agent: created=%v err=%v", created, err)
	}
	if again, created, err := EnsureServiceKeyPair(dir, "agent"); err != nil || created || !again.Equal(agentKey) {
		t.Fatalf("agent again: created=%v err=%v", created, err)
	}
	if _, _, err := EnsureServiceKeyPair(dir, "builder"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := EnsureServiceKeyPair(dir, "../escape"); err == nil {
		t.Fatal("bad service name accepted")
	}
	for path, want := range map[string]os.FileMode{
		filepath.Join(dir, ServicePrivateDir):               0o700,
		ServicePrivateKeyPath(dir, "agent"):                 0o600,
		filepath.Join(dir, ServiceKeysDir):                  0o755,
		filepath.Join(dir, ServiceKeysDir, "agent.pub.pem"): 0o644,
	} {
		if st, err := os.Stat(path); err != nil || st.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", path, st.Mode().Perm(), err, want)
		}
	}

	cfg := Config{
		PublicKeyFile:    filepath.Join(dir, PublicKeyFile),
		MaxTokenLifetime: time.Hour,
		ServiceKeysDir:   filepath.Join(dir, ServiceKeysDir),
		ServiceKeyFile:   ServicePrivateKeyPath(dir, "agent"),
	}
	v, err := cfg.NewVerifier()
	if err != nil {
		t.Fatal(err)
	}
	signer, err := cfg.NewServiceSigner("agent")
	if err != nil {
		t.Fatal(err)
	}
	tok, _, _ := signer.Issue("owner-1")
	if p, err := v.Verify(tok); err != nil || p.Service != "agent" {
		t.Fatalf("configured service token: %+v, %v", p, err)
	}
	// The configured maximum reaches the verifier.
	userPriv, _ := LoadPrivateKey(filepath.Join(dir, PrivateKeyFile))
	long, _, _ := NewSigner(userPriv).Issue("u1", nil, 2*time.Hour)
	if _, err := v.Verify(long); !errors.Is(err, ErrInvalidToken) {
		t.Fatalf("token over THEFOLD_AUTH_MAX_TOKEN_LIFETIME accepted: %v", err)
	}
	// A service without a key file has no service identity.
	if s, err := (Config{}).NewServiceSigner("tasks"); s != nil || err != nil {
		t.Fatalf("no key file: %v, %v", s, err)
	}
	if err := (&Config{PublicKeyFile: "x"}).Validate(); err == nil || !strings.Contains(err.Error(), "THEFOLD_AUTH_MAX_TOKEN_LIFETIME") {
		t.Fatalf("zero maximum lifetime: %v", err)
	}
}

// TestScopedCallersAreServedOnTheirOwnersBehalf: a call made with a token narrowed by
// scopes (an API key's) is checked against its method; what the service then calls goes
// out with the key's token and the service's own identity beside it, and is served past
// the key's scopes, so a key with memory:write can store a memory although the memory
// service asks ai for the embedding. An unscoped token is passed on as it is, and without
// a service identity so is a scoped one.
func TestScopedCallersAreServedOnTheirOwnersBehalf(t *testing.T) {
	t.Parallel()
	userPub, userPriv := newKeys(t)
	memPub, memPriv := newKeys(t)
	v := NewVerifier(userPub, WithServiceKeys(map[string]ed25519.PublicKey{"memory": memPub}))
	memSigner, err := NewServiceSigner("memory", memPriv)
	if err != nil {
		t.Fatal(err)
	}
	users := NewSigner(userPriv)
	scoped, _, err := users.IssueExtra("u1", nil, time.Hour, Extra{APIKeyID: "k1", Scopes: []string{"memory:write"}})
	if err != nil {
		t.Fatal(err)
	}
	plain, _, err := users.Issue("u1", nil, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	const store = "/thefold.memory.v1.MemoryService/StoreMemory"
	in := func(tok string) context.Context {
		return metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer "+tok))
	}
	// The authorization an outgoing call from ctx would carry.
	sent := func(ctx context.Context) string {
		t.Helper()
		out, err := outgoing(ctx)
		if err != nil {
			t.Fatal(err)
		}
		md, _ := metadata.FromOutgoingContext(out)
		return strings.TrimPrefix(strings.Join(md.Get("authorization"), ","), "Bearer ")
	}

	a := NewAuthenticator(v)
	ctx, err := a.Authenticate(in(scoped), store)
	if err != nil {
		t.Fatal(err)
	}
	if got := sent(ctx); got != scoped {
		t.Errorf("without a service identity the scoped token should be passed on")
	}

	a.SetServiceSigner(memSigner)
	ctx, err = a.Authenticate(in(scoped), store)
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := FromContext(ctx); len(p.Scopes) != 1 || p.APIKeyID != "k1" || p.Service != "" {
		t.Errorf("the handler's principal = %+v, want the key's", p)
	}
	// The call memory makes for it carries the key's own token, and memory's own identity
	// beside it; the callee (ai) serves it past the key's scopes as memory acting for u1.
	if got := sent(ctx); got != scoped {
		t.Errorf("the caller's own token should be passed on")
	}
	out, err := outgoing(ctx)
	if err != nil {
		t.Fatal(err)
	}
	md, _ := metadata.FromOutgoingContext(out)
	via := md.Get(ViaMetadataKey)
	if len(via) != 1 {
		t.Fatalf("%s = %q, want memory's own token", ViaMetadataKey, via)
	}
	if p, err := v.Verify(via[0]); err != nil || p.Service != "memory" || p.UserID != "" {
		t.Fatalf("via token = %+v, %v; want memory as itself", p, err)
	}
	const embed = "/thefold.ai.v1.AIService/Embed"
	ai := NewAuthenticator(v)
	callee, err := ai.Authenticate(metadata.NewIncomingContext(context.Background(), md), embed)
	if err != nil {
		t.Fatalf("ai refused memory's call for the key: %v", err)
	}
	if p, _ := FromContext(callee); p.Service != "memory" || p.UserID != "u1" || p.HasRole(RoleAdmin) {
		t.Errorf("ai's principal = %+v, want memory acting for u1", p)
	}
	// Without memory's token, or with a token that is not a service's own, ai holds the
	// key to its scopes.
	_, err = ai.Authenticate(in(scoped), embed)
	wantCode(t, err, codes.PermissionDenied)
	forged := metadata.Pairs("authorization", "Bearer "+scoped, ViaMetadataKey, plain)
	_, err = ai.Authenticate(metadata.NewIncomingContext(context.Background(), forged), embed)
	wantCode(t, err, codes.Unauthenticated)
	// Memory can no longer act for the key's owner on its own authority.
	onBehalf, _, err := memSigner.Issue("u1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := v.Verify(onBehalf); !errors.Is(err, ErrInvalidToken) || !strings.Contains(err.Error(), "may not act on behalf") {
		t.Errorf("memory's token on behalf of u1: %v, want refused", err)
	}

	ctx, err = a.Authenticate(in(plain), store)
	if err != nil {
		t.Fatal(err)
	}
	if got := sent(ctx); got != plain {
		t.Errorf("an unscoped token should be passed on as it is")
	}
	// Outside its scopes it is still refused.
	_, err = a.Authenticate(in(scoped), "/thefold.tasks.v1.TaskService/CreateTask")
	wantCode(t, err, codes.PermissionDenied)
}
