package authsvc_test

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"

	"github.com/thefold/thefold/pkg/auth"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/services/gateway/internal/authsvc"
)

// from is a context whose calls say, through the harness's loopback connection (a proxy
// the default configuration trusts: this host), that they come from client.
func from(t *testing.T, client string) context.Context {
	return metadata.AppendToOutgoingContext(t.Context(), "x-forwarded-for", client)
}

// TestLockoutIsByClient: a stranger failing codes from one address locks out only
// themselves — the owner, from elsewhere, logs in meanwhile — while the owner's own
// failures still lock the owner out, and failures from many clients together meet the
// address-wide ceiling, which locks everyone out.
func TestLockoutIsByClient(t *testing.T) {
	t.Parallel()
	h := newHarness(t, func(c *authsvc.Config) { c.MaxFailures, c.Login.MaxAddressFailures = 3, 7 })
	h.createUser(t, "olive@example.com", gatewayv1.Role_ROLE_MEMBER)
	const email = "olive@example.com"
	stranger, owner := from(t, "198.51.100.66"), from(t, "203.0.113.10")

	request := func(ctx context.Context) (string, error) {
		t.Helper()
		before := len(h.mailTo(t, email))
		if _, err := h.auth.RequestLoginCode(ctx, &gatewayv1.RequestLoginCodeRequest{Email: email}); err != nil {
			return "", err
		}
		var got []string
		eventually(t, 5*time.Second, "a code", func() bool { got = h.mailTo(t, email); return len(got) > before })
		return got[len(got)-1], nil
	}
	verify := func(ctx context.Context, code string) error {
		_, err := h.auth.VerifyLoginCode(ctx, &gatewayv1.VerifyLoginCodeRequest{Email: email, Code: code})
		return err
	}
	failUntilLocked := func(ctx context.Context, code string) {
		t.Helper()
		for range h.cfg.MaxFailures {
			grpctest.WantCode(t, verify(ctx, wrongCode(code)), codes.Unauthenticated)
		}
		retryDelay(t, verify(ctx, wrongCode(code)))
	}

	code, err := request(owner)
	if err != nil {
		t.Fatal(err)
	}
	failUntilLocked(stranger, code)
	// The stranger is locked out, even with the right code, and cannot ask for codes.
	retryDelay(t, verify(stranger, code))
	_, err = h.auth.RequestLoginCode(stranger, &gatewayv1.RequestLoginCodeRequest{Email: email})
	retryDelay(t, err)
	// The owner is not: they ask for a code and log in.
	if code, err = request(owner); err != nil {
		t.Fatalf("the owner asking for a code while a stranger is locked out: %v", err)
	}
	if err := verify(owner, code); err != nil {
		t.Fatalf("the owner logging in while a stranger is locked out: %v", err)
	}

	// The owner's own failures lock the owner out.
	if code, err = request(owner); err != nil {
		t.Fatal(err)
	}
	failUntilLocked(owner, code)
	retryDelay(t, verify(owner, code))

	// Failures from many clients, none locked out alone, reach the address-wide ceiling
	// (7, counted since the owner's success: the owner's 3, then 2 each from two more).
	// Then a client with no failures of its own is locked out too.
	for _, c := range []string{"192.0.2.1", "192.0.2.2"} {
		for range 2 {
			grpctest.WantCode(t, verify(from(t, c), wrongCode(code)), codes.Unauthenticated)
		}
	}
	if d := retryDelay(t, verify(from(t, "192.0.2.3"), code)); d <= 0 || d > h.cfg.LockoutBase {
		t.Errorf("address-wide lockout: retry in %v, want up to %v", d, h.cfg.LockoutBase)
	}

	// The audit says who failed: each client by its own address, through the proxy.
	rows, err := h.store.LoginAttempts(t.Context(), email, 100)
	if err != nil {
		t.Fatal(err)
	}
	var peers []string
	for _, r := range rows {
		p, _, _ := strings.Cut(r.Peer, " via ")
		if !slices.Contains(peers, p) {
			peers = append(peers, p)
		}
	}
	slices.Sort(peers)
	if want := []string{"192.0.2.1", "192.0.2.2", "192.0.2.3", "198.51.100.66", "203.0.113.10"}; !slices.Equal(peers, want) {
		t.Errorf("audited clients %v, want %v", peers, want)
	}
}

// TestLoginCodeRequestLimits: code requests over gRPC beyond the limit for an address from
// one client, for an address from all clients, and from one client for any addresses are
// refused with RESOURCE_EXHAUSTED and a RetryInfo, known address or not, and send nothing.
func TestLoginCodeRequestLimits(t *testing.T) {
	t.Parallel()
	const window = time.Hour
	h := newHarness(t, func(c *authsvc.Config) {
		c.Login.CodeWindow, c.Login.CodesPerAddressClient, c.Login.CodesPerAddress, c.Login.CodesPerClient = window, 2, 3, 4
	})
	h.createUser(t, "paula@example.com", gatewayv1.Role_ROLE_MEMBER)
	ask := func(client, email string) error {
		_, err := h.auth.RequestLoginCode(from(t, client), &gatewayv1.RequestLoginCodeRequest{Email: email})
		return err
	}
	refused := func(err error, limit string) {
		t.Helper()
		if d := retryDelay(t, err); d <= window-time.Minute || d > window {
			t.Errorf("retry in %v, want about %v", d, window)
		}
		grpctest.WantCode(t, err, codes.ResourceExhausted, "too many login codes requested "+limit)
	}

	for _, email := range []string{"paula@example.com", "nobody@example.com"} {
		t.Run(email, func(t *testing.T) {
			// Two from one client; the third from it is one too many for the address.
			for range 2 {
				if err := ask("198.51.100.1", email); err != nil {
					t.Fatalf("RequestLoginCode: %v", err)
				}
			}
			refused(ask("198.51.100.1", email), "for this address from this client")
			// Another client still may, once: then the address has had its three.
			if err := ask("198.51.100.2", email); err != nil {
				t.Fatalf("RequestLoginCode from another client: %v", err)
			}
			refused(ask("198.51.100.3", email), "for this address")
		})
	}
	// Paula got three codes, no more.
	eventually(t, 5*time.Second, "three codes", func() bool { return len(h.mailTo(t, "paula@example.com")) == 3 })
	time.Sleep(100 * time.Millisecond)
	if got := h.mailTo(t, "paula@example.com"); len(got) != 3 {
		t.Errorf("codes mailed %d, want 3", len(got))
	}

	// One client asking for many addresses: four, then refused (198.51.100.2 asked twice
	// above, once for each address).
	for i := range 2 {
		if err := ask("198.51.100.2", "someone"+string(rune('a'+i))+"@example.com"); err != nil {
			t.Fatalf("RequestLoginCode %d: %v", i, err)
		}
	}
	refused(ask("198.51.100.2", "someone-else@example.com"), "from this client")
	// Other clients are not held back by it.
	if err := ask("198.51.100.9", "someone-else@example.com"); err != nil {
		t.Fatalf("RequestLoginCode from another client: %v", err)
	}
}

// TestForwardedForNeedsATrustedProxy: x-forwarded-for from a peer that is not a trusted
// proxy is ignored, in the audit and in the limits; from a trusted one (a listed prefix) it
// is recorded as "<client> via <peer>", the right-most untrusted entry of the chain.
func TestForwardedForNeedsATrustedProxy(t *testing.T) {
	t.Parallel()
	peerOf := func(h *harness, email string) string {
		t.Helper()
		rows, err := h.store.LoginAttempts(t.Context(), email, 1)
		if err != nil || len(rows) != 1 {
			t.Fatalf("audit of %s: %v, %v", email, rows, err)
		}
		return rows[0].Peer
	}
	t.Run("untrusted", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, func(c *authsvc.Config) {
			c.Login.TrustLocalProxy, c.Login.TrustedProxies, c.Login.CodesPerClient = false, nil, 1
		})
		if _, err := h.auth.RequestLoginCode(from(t, "203.0.113.7"), &gatewayv1.RequestLoginCodeRequest{Email: "a@example.com"}); err != nil {
			t.Fatal(err)
		}
		if p := peerOf(h, "a@example.com"); !strings.HasPrefix(p, "127.0.0.1:") {
			t.Errorf("audited peer %q, want the connection's 127.0.0.1:<port> only", p)
		}
		// The limit is the connection's too: another claimed address does not escape it.
		_, err := h.auth.RequestLoginCode(from(t, "203.0.113.8"), &gatewayv1.RequestLoginCodeRequest{Email: "b@example.com"})
		retryDelay(t, err)
	})
	t.Run("trusted", func(t *testing.T) {
		t.Parallel()
		h := newHarness(t, func(c *authsvc.Config) {
			c.Login.TrustLocalProxy, c.Login.TrustedProxies, c.Login.CodesPerClient = false, []string{"127.0.0.0/8"}, 1
		})
		ctx := metadata.AppendToOutgoingContext(t.Context(), "x-forwarded-for", "192.0.2.50, 203.0.113.7")
		if _, err := h.auth.RequestLoginCode(ctx, &gatewayv1.RequestLoginCodeRequest{Email: "a@example.com"}); err != nil {
			t.Fatal(err)
		}
		if p := peerOf(h, "a@example.com"); !strings.HasPrefix(p, "203.0.113.7 via 127.0.0.1:") {
			t.Errorf("audited peer %q, want 203.0.113.7 via 127.0.0.1:<port>", p)
		}
		// Keyed by the forwarded client: another client is not limited by it, the same is.
		if _, err := h.auth.RequestLoginCode(from(t, "203.0.113.8"), &gatewayv1.RequestLoginCodeRequest{Email: "b@example.com"}); err != nil {
			t.Errorf("another forwarded client: %v", err)
		}
		_, err := h.auth.RequestLoginCode(from(t, "203.0.113.7"), &gatewayv1.RequestLoginCodeRequest{Email: "c@example.com"})
		retryDelay(t, err)
	})
}

// TestReplacedAdminTokensAreRevoked: an admin token the launcher lists as replaced is
// refused — listed before the gateway starts or while it runs — and listing it again
// records no second revocation.
func TestReplacedAdminTokensAreRevoked(t *testing.T) {
	t.Parallel()
	file := filepath.Join(t.TempDir(), auth.ReplacedTokensFile)
	h := newHarness(t, func(c *authsvc.Config) { c.ReplacedAdminTokensFile = file })
	signer := auth.NewSigner(h.env.SigningKey)
	issue := func() (string, auth.Principal) {
		tok, p, err := signer.Issue(authsvc.AdminUserID, []string{auth.RoleAdmin}, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := h.whoAmI(t, tok); err != nil {
			t.Fatalf("WhoAmI with a fresh admin token: %v", err)
		}
		return tok, p
	}
	first, p1 := issue()
	second, p2 := issue()

	// Without the file there is nothing to revoke.
	if err := h.core.RevokeReplacedAdminTokens(t.Context()); err != nil {
		t.Fatalf("without the file: %v", err)
	}
	// Listed before the start: revoked by the start's pass.
	if err := auth.WriteReplacedTokens(file, []auth.ReplacedToken{{ID: p1.TokenID, Expire: p1.ExpiresAt}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	if err := h.core.RevokeReplacedAdminTokens(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.waitRefused(t, "the replaced admin token", first)

	// Listed while the gateway runs: followed.
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.core.FollowReplacedAdminTokens(ctx) }()
	t.Cleanup(func() { stop(); <-done })
	time.Sleep(50 * time.Millisecond) // the follower has taken the file's stamp
	if err := auth.WriteReplacedTokens(file, []auth.ReplacedToken{{ID: p1.TokenID, Expire: p1.ExpiresAt},
		{ID: p2.TokenID, Expire: p2.ExpiresAt}}, time.Now()); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, "the second replaced admin token refused", func() bool {
		_, err := h.whoAmI(t, second)
		return code(err) == codes.Unauthenticated
	})
	// Each once, however often the list is read.
	if err := h.core.RevokeReplacedAdminTokens(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{p1.TokenID, p2.TokenID} {
		var n int
		if err := h.pool.QueryRow(t.Context(), `SELECT count(*) FROM revocations WHERE type = 'token' AND subject = $1`, id).Scan(&n); err != nil || n != 1 {
			t.Errorf("revocations of %s: %d, %v; want 1", id, n, err)
		}
	}
	// The current admin token works on.
	third, _ := issue()
	if _, err := h.whoAmI(t, third); err != nil {
		t.Errorf("the current admin token: %v", err)
	}
	// A file that cannot be read stops the start rather than leaving tokens working.
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(file, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := h.core.RevokeReplacedAdminTokens(t.Context()); err == nil {
		t.Error("an unreadable list: no error")
	}
}

// TestLimitsConfigNamesBadSettings: bad login limits, proxies and API key lifetimes are
// refused at start, each named.
func TestLimitsConfigNamesBadSettings(t *testing.T) {
	t.Parallel()
	cfg := defaultConfig()
	cfg.Login = authsvc.LoginLimits{MaxAddressFailures: 2, CodeWindow: 0, CodesPerAddressClient: 1, CodesPerAddress: -1,
		TrustedProxies: []string{"10.0.0.0/8", "proxy.local"}}
	cfg.APIKeys = authsvc.APIKeyPolicy{TTL: 0, MaxTTL: -time.Hour}
	err := cfg.Validate()
	for _, name := range []string{"THEFOLD_LOGIN_MAX_FAILURES_PER_ADDRESS", "THEFOLD_LOGIN_CODE_WINDOW", "THEFOLD_LOGIN_CODES_PER_ADDRESS:",
		"THEFOLD_GATEWAY_TRUSTED_PROXIES", "THEFOLD_AUTH_API_KEY_TTL", "THEFOLD_AUTH_API_KEY_MAX_TTL"} {
		if err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("config error %v does not name %s", err, name)
		}
	}
	// Zero limits are no limits; the defaults are valid.
	cfg = defaultConfig()
	cfg.Login = authsvc.LoginLimits{}
	if err := cfg.Validate(); err != nil {
		t.Errorf("no login limits: %v", err)
	}
}
