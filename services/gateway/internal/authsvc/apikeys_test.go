package authsvc_test

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/auth"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/services/gateway/internal/authsvc"
)

// TestAPIKeys: a key is created once (idempotently), listed without its secret, works as a
// bearer token within its scopes, and stops working when revoked.
func TestAPIKeys(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	user, _, lisa := h.member(t, "lisa@example.com")

	start := time.Now()
	created, err := h.auth.CreateAPIKey(lisa, &gatewayv1.CreateAPIKeyRequest{Name: " ci ", Scopes: []string{"auth:read"}, RequestId: "req-1"})
	if err != nil {
		t.Fatalf("CreateAPIKey: %v", err)
	}
	secret, key := created.GetSecret(), created.GetApiKey()
	if !strings.HasPrefix(secret, "tfk_") || len(secret) < 40 {
		t.Fatalf("secret %q: want tfk_ and 32 random bytes", secret)
	}
	if _, err := uuid.Parse(key.GetId()); err != nil || key.GetName() != "ci" || !strings.HasPrefix(secret, key.GetPrefix()) ||
		len(key.GetPrefix()) >= len(secret)/2 || !slices.Equal(key.GetScopes(), []string{"auth:read"}) || key.GetUserId() != user.GetId() ||
		key.GetCreateTime().AsTime().Before(start.Add(-time.Second)) || key.GetExpireTime() == nil || key.GetRevokeTime() != nil || key.GetLastUsedTime() != nil {
		t.Errorf("CreateAPIKey key = %v", key)
	}

	// A retry with the same request_id is the same key, with its secret, whatever else it says.
	retry, err := h.auth.CreateAPIKey(lisa, &gatewayv1.CreateAPIKeyRequest{Name: "other", Scopes: []string{"tasks:write"}, RequestId: "req-1"})
	if err != nil {
		t.Fatalf("CreateAPIKey retried: %v", err)
	}
	if retry.GetSecret() != secret || !proto.Equal(retry.GetApiKey(), key) {
		t.Errorf("retried CreateAPIKey = %v, want %v with the same secret", retry, created)
	}
	// The request id is the caller's: another user's is another key.
	_, _, mallory := h.member(t, "mallory@example.com")
	theirs, err := h.auth.CreateAPIKey(mallory, &gatewayv1.CreateAPIKeyRequest{Name: "ci", RequestId: "req-1"})
	if err != nil {
		t.Fatalf("CreateAPIKey by another user: %v", err)
	}
	if theirs.GetApiKey().GetId() == key.GetId() || theirs.GetSecret() == secret || theirs.GetSecret() == "" {
		t.Errorf("another user's key with the same request_id = %v", theirs)
	}
	// No scopes means reading every area (TestAPIKeyDefaults).
	if got := theirs.GetApiKey().GetScopes(); !slices.Equal(got, []string{"*:read"}) {
		t.Errorf("default scopes %v, want [*:read]", got)
	}
	// Without a request id every call makes a key.
	w1, err := h.auth.CreateAPIKey(lisa, &gatewayv1.CreateAPIKeyRequest{Name: "writer", Scopes: []string{"auth:write"}})
	if err != nil {
		t.Fatal(err)
	}
	w2, err := h.auth.CreateAPIKey(lisa, &gatewayv1.CreateAPIKeyRequest{Name: "writer", Scopes: []string{"auth:write"}})
	if err != nil {
		t.Fatal(err)
	}
	if w1.GetApiKey().GetId() == w2.GetApiKey().GetId() || w1.GetSecret() == w2.GetSecret() {
		t.Errorf("two keys without request_id are the same: %v, %v", w1, w2)
	}

	// The list: newest first, the owner's only, never a secret.
	list, err := h.auth.ListAPIKeys(lisa, &gatewayv1.ListAPIKeysRequest{})
	if err != nil {
		t.Fatalf("ListAPIKeys: %v", err)
	}
	var ids []string
	for _, k := range list.GetApiKeys() {
		ids = append(ids, k.GetId())
	}
	if want := []string{w2.GetApiKey().GetId(), w1.GetApiKey().GetId(), key.GetId()}; !slices.Equal(ids, want) {
		t.Errorf("ListAPIKeys ids %v, want %v", ids, want)
	}
	text := prototext.Format(list)
	for _, s := range []string{secret, w1.GetSecret(), w2.GetSecret()} {
		if strings.Contains(text, s) || strings.Contains(text, s[len(s)-20:]) {
			t.Errorf("ListAPIKeys shows a secret: %s", text)
		}
	}
	if list.GetNextPageToken() != "" {
		t.Errorf("next_page_token %q on the only page", list.GetNextPageToken())
	}

	// The key is a bearer credential, through the server's authenticator.
	who, err := h.whoAmI(t, secret)
	if err != nil {
		t.Fatalf("WhoAmI with the key: %v", err)
	}
	if who.GetUserId() != user.GetId() || who.GetRole() != gatewayv1.Role_ROLE_MEMBER || !slices.Equal(who.GetScopes(), []string{"auth:read"}) ||
		who.GetTokenId() == "" || who.GetExpireTime() == nil || who.GetExpireTime().AsTime().After(time.Now().Add(h.cfg.KeyTokenTTL+time.Second)) {
		t.Errorf("WhoAmI with the key = %v", who)
	}
	// Its use shows.
	list, err = h.auth.ListAPIKeys(lisa, &gatewayv1.ListAPIKeysRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if k := list.GetApiKeys()[2]; k.GetId() != key.GetId() || k.GetLastUsedTime() == nil {
		t.Errorf("key after use = %v, want last_used_time", k)
	}

	// Scopes: auth:read reads the auth area, and only reads.
	keyCtx := bearer(t, secret)
	if _, err := h.auth.ListAPIKeys(keyCtx, &gatewayv1.ListAPIKeysRequest{}); err != nil {
		t.Errorf("ListAPIKeys with an auth:read key: %v", err)
	}
	if _, err := h.users.GetUser(keyCtx, &gatewayv1.GetUserRequest{Id: user.GetId()}); err != nil {
		t.Errorf("GetUser of self with an auth:read key: %v", err)
	}
	_, err = h.auth.RevokeAPIKey(keyCtx, &gatewayv1.RevokeAPIKeyRequest{Id: w1.GetApiKey().GetId()})
	grpctest.WantCode(t, err, codes.PermissionDenied, "auth:read")
	_, err = h.auth.CreateAPIKey(keyCtx, &gatewayv1.CreateAPIKeyRequest{Name: "child"})
	grpctest.WantCode(t, err, codes.PermissionDenied)
	// An auth:write key passes the scope check, but a key never makes keys.
	_, err = h.auth.CreateAPIKey(bearer(t, w1.GetSecret()), &gatewayv1.CreateAPIKeyRequest{Name: "child"})
	grpctest.WantCode(t, err, codes.PermissionDenied, "an API key cannot create API keys")
	// Another area's key reaches nothing here but WhoAmI.
	tasks, err := h.auth.CreateAPIKey(lisa, &gatewayv1.CreateAPIKeyRequest{Name: "tasks", Scopes: []string{"tasks:read", "memory:write"}})
	if err != nil {
		t.Fatal(err)
	}
	tasksCtx := bearer(t, tasks.GetSecret())
	_, err = h.auth.ListAPIKeys(tasksCtx, &gatewayv1.ListAPIKeysRequest{})
	grpctest.WantCode(t, err, codes.PermissionDenied, "tasks:read")
	_, err = h.users.GetUser(tasksCtx, &gatewayv1.GetUserRequest{Id: user.GetId()})
	grpctest.WantCode(t, err, codes.PermissionDenied)
	if who, err := h.auth.WhoAmI(tasksCtx, &gatewayv1.WhoAmIRequest{}); err != nil || !slices.Equal(who.GetScopes(), []string{"tasks:read", "memory:write"}) {
		t.Errorf("WhoAmI with a tasks key = %v, %v", who, err)
	}

	// The exchange services do.
	ex, err := h.identity.ExchangeAPIKey(h.anon, &gatewayv1.ExchangeAPIKeyRequest{ApiKey: secret})
	if err != nil {
		t.Fatalf("ExchangeAPIKey: %v", err)
	}
	p := h.principal(t, ex.GetAccessToken())
	if p.UserID != user.GetId() || p.APIKeyID != key.GetId() || !slices.Equal(p.Scopes, []string{"auth:read"}) || p.SessionID != "" ||
		!p.ExpiresAt.Equal(ex.GetExpireTime().AsTime()) || p.ExpiresAt.After(time.Now().Add(h.cfg.KeyTokenTTL+time.Second)) {
		t.Errorf("exchanged token principal = %+v (expire_time %v)", p, ex.GetExpireTime().AsTime())
	}

	// Another user's key is not found, and stays active.
	_, err = h.auth.RevokeAPIKey(mallory, &gatewayv1.RevokeAPIKeyRequest{Id: key.GetId()})
	grpctest.WantCode(t, err, codes.NotFound)
	_, err = h.auth.RevokeAPIKey(lisa, &gatewayv1.RevokeAPIKeyRequest{Id: uuid.NewString()})
	grpctest.WantCode(t, err, codes.NotFound)
	if _, err := h.whoAmI(t, secret); err != nil {
		t.Fatalf("WhoAmI with the key after another user's revoke: %v", err)
	}

	// Revoked, the key is refused: a new exchange at once, the tokens already issued for
	// it (the authenticator's cached one included) once the revocation is followed.
	revoked, err := h.auth.RevokeAPIKey(lisa, &gatewayv1.RevokeAPIKeyRequest{Id: key.GetId()})
	if err != nil {
		t.Fatalf("RevokeAPIKey: %v", err)
	}
	if rk := revoked.GetApiKey(); rk.GetId() != key.GetId() || rk.GetRevokeTime() == nil {
		t.Errorf("RevokeAPIKey = %v", rk)
	}
	_, err = h.identity.ExchangeAPIKey(h.anon, &gatewayv1.ExchangeAPIKeyRequest{ApiKey: secret})
	grpctest.WantCode(t, err, codes.Unauthenticated)
	h.waitRefused(t, "the revoked key", secret)
	h.waitRefused(t, "the revoked key's exchanged token", ex.GetAccessToken())
	// Revoking again changes nothing.
	again, err := h.auth.RevokeAPIKey(lisa, &gatewayv1.RevokeAPIKeyRequest{Id: key.GetId()})
	if err != nil || !proto.Equal(again.GetApiKey(), revoked.GetApiKey()) {
		t.Errorf("RevokeAPIKey again = %v, %v; want %v", again, err, revoked.GetApiKey())
	}
	// The retry window does not bring a revoked key's secret back.
	if r, err := h.auth.CreateAPIKey(lisa, &gatewayv1.CreateAPIKeyRequest{Name: "ci", RequestId: "req-1"}); err != nil ||
		r.GetApiKey().GetId() != key.GetId() || r.GetSecret() != "" || r.GetApiKey().GetRevokeTime() == nil {
		t.Errorf("CreateAPIKey retried after revoking = %v, %v; want the revoked key without its secret", r, err)
	}
	// The other keys still work.
	if _, err := h.whoAmI(t, w1.GetSecret()); err != nil {
		t.Errorf("WhoAmI with another key: %v", err)
	}
	// The list hides the revoked key unless asked.
	list, err = h.auth.ListAPIKeys(lisa, &gatewayv1.ListAPIKeysRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range list.GetApiKeys() {
		if k.GetId() == key.GetId() {
			t.Errorf("ListAPIKeys shows the revoked key")
		}
	}
	all, err := h.auth.ListAPIKeys(lisa, &gatewayv1.ListAPIKeysRequest{ShowInactive: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(all.GetApiKeys()); n != len(list.GetApiKeys())+1 {
		t.Errorf("ListAPIKeys show_inactive: %d keys, want %d", n, len(list.GetApiKeys())+1)
	}

	// A service acting for the user does not manage their keys.
	_, err = h.auth.ListAPIKeys(h.env.ServiceContext(t, "agent", user.GetId()), &gatewayv1.ListAPIKeysRequest{})
	grpctest.WantCode(t, err, codes.PermissionDenied)
}

// TestAPIKeySecretWindow: after 15 minutes a retried CreateAPIKey returns the key without
// its secret.
func TestAPIKeySecretWindow(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	_, _, ctx := h.member(t, "mike@example.com")
	first, err := h.auth.CreateAPIKey(ctx, &gatewayv1.CreateAPIKeyRequest{Name: "ci", RequestId: "r"})
	if err != nil {
		t.Fatal(err)
	}
	// Fourteen minutes on, the secret is still shown; sixteen, no longer.
	for _, c := range []struct {
		age    string
		secret string
	}{{"14 minutes", first.GetSecret()}, {"16 minutes", ""}} {
		if _, err := h.pool.Exec(t.Context(), `UPDATE api_keys SET create_time = now() - $1::interval WHERE id = $2`, c.age, first.GetApiKey().GetId()); err != nil {
			t.Fatal(err)
		}
		r, err := h.auth.CreateAPIKey(ctx, &gatewayv1.CreateAPIKeyRequest{Name: "ci", RequestId: "r"})
		if err != nil || r.GetApiKey().GetId() != first.GetApiKey().GetId() || r.GetSecret() != c.secret {
			t.Errorf("created %s ago: CreateAPIKey retried = %v, %v; want the same key with secret %q", c.age, r, err, c.secret)
		}
	}
	// The key itself still works.
	if _, err := h.whoAmI(t, first.GetSecret()); err != nil {
		t.Errorf("WhoAmI with the key: %v", err)
	}
	// Housekeeping drops the held secret.
	if err := h.core.Prune(t.Context()); err != nil {
		t.Fatal(err)
	}
	var held bool
	if err := h.pool.QueryRow(t.Context(), `SELECT secret_enc IS NOT NULL FROM api_keys WHERE id = $1`, first.GetApiKey().GetId()).Scan(&held); err != nil || held {
		t.Errorf("secret held after Prune: %v, %v", held, err)
	}
}

// TestAPIKeyExpires: a key with an expiry works until then, and its tokens do not outlive
// it.
func TestAPIKeyExpires(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	_, _, ctx := h.member(t, "nina@example.com")
	expire := time.Now().Add(3 * time.Second)
	k, err := h.auth.CreateAPIKey(ctx, &gatewayv1.CreateAPIKeyRequest{Name: "short", ExpireTime: timestamppb.New(expire)})
	if err != nil {
		t.Fatalf("CreateAPIKey: %v", err)
	}
	if got := k.GetApiKey().GetExpireTime(); got == nil || got.AsTime().Sub(expire).Abs() > time.Millisecond {
		t.Errorf("expire_time %v, want %v", got, expire)
	}
	who, err := h.whoAmI(t, k.GetSecret())
	if err != nil {
		t.Fatalf("WhoAmI with the key: %v", err)
	}
	if who.GetExpireTime().AsTime().After(expire) {
		t.Errorf("the key's token expires %v, after the key (%v)", who.GetExpireTime().AsTime(), expire)
	}
	time.Sleep(time.Until(expire) + 100*time.Millisecond)
	_, err = h.identity.ExchangeAPIKey(h.anon, &gatewayv1.ExchangeAPIKeyRequest{ApiKey: k.GetSecret()})
	grpctest.WantCode(t, err, codes.Unauthenticated)
	_, err = h.whoAmI(t, k.GetSecret())
	grpctest.WantCode(t, err, codes.Unauthenticated)
	// Listed only among the inactive keys.
	list, err := h.auth.ListAPIKeys(ctx, &gatewayv1.ListAPIKeysRequest{})
	if err != nil || len(list.GetApiKeys()) != 0 {
		t.Errorf("ListAPIKeys = %v, %v; want no active key", list, err)
	}
	list, err = h.auth.ListAPIKeys(ctx, &gatewayv1.ListAPIKeysRequest{ShowInactive: true})
	if err != nil || len(list.GetApiKeys()) != 1 {
		t.Errorf("ListAPIKeys show_inactive = %v, %v; want the expired key", list, err)
	}
}

// TestAPIKeyPages: ListAPIKeys pages through every key, newest first.
func TestAPIKeyPages(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	_, _, ctx := h.member(t, "olga@example.com")
	var want []string
	for i := range 5 {
		k, err := h.auth.CreateAPIKey(ctx, &gatewayv1.CreateAPIKeyRequest{Name: "k" + string(rune('a'+i))})
		if err != nil {
			t.Fatal(err)
		}
		want = append([]string{k.GetApiKey().GetId()}, want...)
	}
	var got []string
	tok := ""
	for page := 0; ; page++ {
		if page > 5 {
			t.Fatal("too many pages")
		}
		resp, err := h.auth.ListAPIKeys(ctx, &gatewayv1.ListAPIKeysRequest{PageSize: 2, PageToken: tok})
		if err != nil {
			t.Fatalf("ListAPIKeys page %d: %v", page, err)
		}
		if n := len(resp.GetApiKeys()); n == 0 || n > 2 {
			t.Fatalf("page %d: %d keys", page, n)
		}
		for _, k := range resp.GetApiKeys() {
			got = append(got, k.GetId())
		}
		if tok = resp.GetNextPageToken(); tok == "" {
			break
		}
	}
	if !slices.Equal(got, want) {
		t.Errorf("pages %v, want %v", got, want)
	}
	// A page token is the caller's position, not a way into another user's keys.
	_, _, other := h.member(t, "pat@example.com")
	first, err := h.auth.ListAPIKeys(ctx, &gatewayv1.ListAPIKeysRequest{PageSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := h.auth.ListAPIKeys(other, &gatewayv1.ListAPIKeysRequest{PageToken: first.GetNextPageToken()})
	if err != nil || len(resp.GetApiKeys()) != 0 {
		t.Errorf("another user's page = %v, %v; want nothing", resp, err)
	}
}

// TestAPIKeyAsAdmin: a key acts with its owner's current role.
func TestAPIKeyAsAdmin(t *testing.T) {
	t.Parallel()
	h := newHarness(t, nil)
	u, _, ctx := h.member(t, "quinn@example.com")
	k, err := h.auth.CreateAPIKey(ctx, &gatewayv1.CreateAPIKeyRequest{Name: "admin-tool", Scopes: []string{"auth:write"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.users.ListUsers(bearer(t, k.GetSecret()), &gatewayv1.ListUsersRequest{})
	grpctest.WantCode(t, err, codes.PermissionDenied)
	if _, err := h.users.UpdateUser(h.admin, &gatewayv1.UpdateUserRequest{Id: u.GetId(), User: &gatewayv1.User{Role: gatewayv1.Role_ROLE_ADMIN},
		UpdateMask: mask("role")}); err != nil {
		t.Fatal(err)
	}
	ex, err := h.identity.ExchangeAPIKey(h.anon, &gatewayv1.ExchangeAPIKeyRequest{ApiKey: k.GetSecret()})
	if err != nil {
		t.Fatal(err)
	}
	if p := h.principal(t, ex.GetAccessToken()); !p.HasRole(auth.RoleAdmin) {
		t.Errorf("the key's token after promotion: roles %v, want admin", p.Roles)
	}
	if _, err := h.users.ListUsers(bearer(t, ex.GetAccessToken()), &gatewayv1.ListUsersRequest{}); err != nil {
		t.Errorf("ListUsers with the promoted owner's key token: %v", err)
	}
}

// TestAPIKeyDefaults: a key created without scopes reads and cannot write; without an
// expiry it expires after the policy's TTL, and one asked for beyond the maximum is
// refused, naming the field.
func TestAPIKeyDefaults(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *authsvc.Config) { c.APIKeys = authsvc.APIKeyPolicy{TTL: 48 * time.Hour, MaxTTL: 72 * time.Hour} })
	_, _, ctx := h.member(t, "olga@example.com")
	start := time.Now()
	k, err := h.auth.CreateAPIKey(ctx, &gatewayv1.CreateAPIKeyRequest{Name: "default"})
	if err != nil {
		t.Fatalf("CreateAPIKey: %v", err)
	}
	if got := k.GetApiKey().GetScopes(); !slices.Equal(got, []string{"*:read"}) {
		t.Errorf("scopes %v, want [*:read]", got)
	}
	if exp := k.GetApiKey().GetExpireTime(); exp == nil || exp.AsTime().Before(start.Add(48*time.Hour-time.Second)) ||
		exp.AsTime().After(time.Now().Add(48*time.Hour+time.Second)) {
		t.Errorf("expire_time %v, want about now + 48h", exp)
	}
	key := bearer(t, k.GetSecret())
	// It reads…
	if list, err := h.auth.ListAPIKeys(key, &gatewayv1.ListAPIKeysRequest{}); err != nil || len(list.GetApiKeys()) != 1 {
		t.Errorf("ListAPIKeys with the read-only key = %v, %v", list, err)
	}
	// …and writes nothing, not even to revoke itself.
	_, err = h.auth.RevokeAPIKey(key, &gatewayv1.RevokeAPIKeyRequest{Id: k.GetApiKey().GetId()})
	grpctest.WantCode(t, err, codes.PermissionDenied)
	_, err = h.auth.RevokeToken(key, &gatewayv1.RevokeTokenRequest{})
	grpctest.WantCode(t, err, codes.PermissionDenied)
	// Writes are named: the same owner's auth:write key may.
	w, err := h.auth.CreateAPIKey(ctx, &gatewayv1.CreateAPIKeyRequest{Name: "writer", Scopes: []string{"auth:write"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.auth.RevokeAPIKey(bearer(t, w.GetSecret()), &gatewayv1.RevokeAPIKeyRequest{Id: k.GetApiKey().GetId()}); err != nil {
		t.Errorf("RevokeAPIKey with an auth:write key: %v", err)
	}
	// An expiry up to the maximum is taken as asked; beyond it is refused.
	want := time.Now().Add(71 * time.Hour).Truncate(time.Second)
	long, err := h.auth.CreateAPIKey(ctx, &gatewayv1.CreateAPIKeyRequest{Name: "long", ExpireTime: timestamppb.New(want)})
	if err != nil || !long.GetApiKey().GetExpireTime().AsTime().Equal(want) {
		t.Errorf("CreateAPIKey expiring in 71h = %v, %v", long, err)
	}
	_, err = h.auth.CreateAPIKey(ctx, &gatewayv1.CreateAPIKeyRequest{Name: "too long", ExpireTime: timestamppb.New(time.Now().Add(73 * time.Hour))})
	grpctest.WantInvalid(t, err, "expire_time")
}
