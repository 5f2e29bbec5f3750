package stack

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/auth"
)

func verifyAdmin(t *testing.T, s *Stack, tok string) auth.Principal {
	t.Helper()
	pub, err := auth.LoadPublicKey(filepath.Join(s.KeyDir(), auth.PublicKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	p, err := auth.NewVerifier(pub, auth.WithMaxLifetime(s.maxLifetime())).Verify(tok)
	if err != nil {
		t.Fatalf("admin token does not verify: %v", err)
	}
	if p.UserID != "admin" || !p.HasRole(auth.RoleAdmin) {
		t.Fatalf("admin principal = %+v", p)
	}
	return p
}

func saved(t *testing.T, s *Stack) string {
	t.Helper()
	b, err := os.ReadFile(s.TokenPath())
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func TestAdminTokenExpiresAndIsReissued(t *testing.T) {
	t.Parallel()
	s := &Stack{DataDir: t.TempDir()}
	first, err := s.EnsureCredentials()
	if err != nil {
		t.Fatal(err)
	}
	p := verifyAdmin(t, s, first)
	if life := time.Until(p.ExpiresAt); life > DefaultAdminTokenTTL || life < DefaultAdminTokenTTL-time.Minute {
		t.Fatalf("admin token lives %s, want %s", life, DefaultAdminTokenTTL)
	}
	if st, err := os.Stat(s.TokenPath()); err != nil || st.Mode().Perm() != 0o600 || saved(t, s) != first {
		t.Fatalf("saved token: %v %v", st.Mode(), err)
	}
	if again, err := s.EnsureCredentials(); err != nil || again != first {
		t.Fatalf("a fresh token was replaced: %v", err)
	}

	priv, err := auth.LoadPrivateKey(filepath.Join(s.KeyDir(), auth.PrivateKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	ttl := DefaultAdminTokenTTL
	issuedAgo := func(ago time.Duration) string {
		tok, _, err := auth.NewSigner(priv, auth.WithClock(func() time.Time { return time.Now().Add(-ago) })).Issue("admin", []string{auth.RoleAdmin}, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return tok
	}
	_, otherPriv, _ := ed25519.GenerateKey(nil)
	otherKey, _, _ := auth.NewSigner(otherPriv).Issue("admin", []string{auth.RoleAdmin}, time.Hour)
	noExpiry := "eyJhbGciOiJFZERTQSIsInR5cCI6IkpXVCJ9.eyJpc3MiOiJ0aGVmb2xkIiwic3ViIjoiYWRtaW4ifQ.x"
	cases := []struct {
		name    string
		old     string // "" = no token file
		reissue bool
	}{
		{"missing", "", true},
		{"expired", issuedAgo(ttl + time.Hour), true},
		{"near expiry", issuedAgo(ttl - ttl/8), true},
		{"half used", issuedAgo(ttl / 2), false},
		{"signed by other keys", otherKey, true},
		{"an old token without exp", noExpiry, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_ = os.Remove(s.TokenPath())
			if tc.old != "" {
				if err := os.WriteFile(s.TokenPath(), []byte(tc.old+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			tok, err := s.EnsureCredentials()
			if err != nil {
				t.Fatal(err)
			}
			if reissued := tok != tc.old; reissued != tc.reissue {
				t.Fatalf("reissued = %v, want %v", reissued, tc.reissue)
			}
			verifyAdmin(t, s, tok)
			if saved(t, s) != tok {
				t.Fatal("returned token not saved")
			}
		})
	}

	// `thefold token`: always a fresh one, saved.
	before := saved(t, s)
	fresh, err := s.IssueAdminToken()
	if err != nil || fresh == before {
		t.Fatalf("IssueAdminToken = %v (same token: %v)", err, fresh == before)
	}
	verifyAdmin(t, s, fresh)
	if saved(t, s) != fresh {
		t.Fatal("fresh token not saved")
	}
}

// TestAdminTokenReissueListsTheReplaced: a reissue lists the token it replaces, while it
// is still valid, for the gateway to revoke (expired entries drop out); a key rotation's
// reissue does not, since a rotation keeps what the old key signed working.
func TestAdminTokenReissueListsTheReplaced(t *testing.T) {
	t.Parallel()
	s := &Stack{DataDir: t.TempDir()}
	first, err := s.EnsureCredentials()
	if err != nil {
		t.Fatal(err)
	}
	listed := func() []string {
		t.Helper()
		list, err := auth.ReadReplacedTokens(s.ReplacedTokensPath())
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, r := range list {
			ids = append(ids, r.ID)
		}
		return ids
	}
	if st, err := os.Stat(s.ReplacedTokensPath()); err != nil || st.Mode().Perm() != 0o600 || len(listed()) != 0 {
		t.Fatalf("replaced-tokens file after the first start: %v, %v, %v", st, err, listed())
	}
	second, err := s.IssueAdminToken()
	if err != nil {
		t.Fatal(err)
	}
	p1 := verifyAdmin(t, s, first)
	if got := listed(); !slices.Equal(got, []string{p1.TokenID}) {
		t.Fatalf("listed %v, want the first token %s", got, p1.TokenID)
	}
	list, _ := auth.ReadReplacedTokens(s.ReplacedTokensPath())
	if !list[0].Expire.Equal(p1.ExpiresAt.Truncate(time.Second)) {
		t.Errorf("listed expiry %v, want the token's %v", list[0].Expire, p1.ExpiresAt)
	}
	if _, err := s.RotateSigningKey(); err != nil {
		t.Fatal(err)
	}
	if got := listed(); !slices.Equal(got, []string{p1.TokenID}) {
		t.Fatalf("after a rotation listed %v, want only the first token", got)
	}
	// The rotation's token replaced second without listing it; the next reissue lists the
	// rotation's token (signed with the new key), and an expired entry is dropped.
	rotated := saved(t, s)
	if rotated == second {
		t.Fatal("the rotation reissued nothing")
	}
	if err := auth.WriteReplacedTokens(s.ReplacedTokensPath(), []auth.ReplacedToken{{ID: "gone", Expire: time.Now().Add(-time.Minute)},
		{ID: p1.TokenID, Expire: p1.ExpiresAt}}, time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.IssueAdminToken(); err != nil {
		t.Fatal(err)
	}
	if got := listed(); len(got) != 2 || got[0] != p1.TokenID || slices.Contains(got, "gone") {
		t.Fatalf("listed %v, want the first token and the rotation's, not the expired entry", got)
	}
}

func TestAdminTokenLifetimeIsBounded(t *testing.T) {
	t.Parallel()
	s := &Stack{DataDir: t.TempDir(), AdminTokenTTL: 48 * time.Hour, MaxTokenLifetime: 24 * time.Hour}
	if _, err := s.EnsureCredentials(); err == nil || !strings.Contains(err.Error(), "exceeds the maximum") {
		t.Fatalf("admin TTL over the maximum: %v", err)
	}
	s.AdminTokenTTL = 0 // defaults to the smaller of 12 hours and the maximum
	tok, err := s.EnsureCredentials()
	if err != nil {
		t.Fatal(err)
	}
	if life := time.Until(verifyAdmin(t, s, tok).ExpiresAt); life > 24*time.Hour {
		t.Fatalf("admin token lives %s past the 24h maximum", life)
	}
	if _, err := (&Stack{DataDir: t.TempDir()}).IssueAdminToken(); err == nil || !strings.Contains(err.Error(), "no signing key yet") {
		t.Fatalf("token without keys: %v", err)
	}
}

func TestServicesGetTheirIdentity(t *testing.T) {
	t.Parallel()
	s := &Stack{DataDir: t.TempDir(), MaxTokenLifetime: 12 * time.Hour, Ports: DefaultPorts()}
	if _, err := s.EnsureCredentials(); err != nil {
		t.Fatal(err)
	}
	lookup := func(env []string, key string) string {
		v := ""
		for _, kv := range env { // the last value wins, as for exec
			if k, val, _ := strings.Cut(kv, "="); k == key {
				v = val
			}
		}
		return v
	}
	s.Env = []string{"THEFOLD_AUTH_SERVICE_KEY_FILE=/inherited/key.pem"} // must not leak through
	for _, svc := range []string{"agent", "builder", "tasks", "gateway"} {
		env := s.env(s.InstancesOf(svc)[0])
		cfg := auth.Config{
			PublicKeyFile:    lookup(env, "THEFOLD_AUTH_PUBLIC_KEY_FILE"),
			ServiceKeysDir:   lookup(env, "THEFOLD_AUTH_SERVICE_KEYS_DIR"),
			ServiceKeyFile:   lookup(env, "THEFOLD_AUTH_SERVICE_KEY_FILE"),
			MaxTokenLifetime: 12 * time.Hour,
		}
		if got := lookup(env, "THEFOLD_AUTH_MAX_TOKEN_LIFETIME"); got != "12h0m0s" {
			t.Errorf("%s: max lifetime %q", svc, got)
		}
		v, err := cfg.NewVerifier()
		if err != nil {
			t.Fatalf("%s: %v", svc, err)
		}
		signer, err := cfg.NewServiceSigner(svc)
		if err != nil {
			t.Fatalf("%s: %v", svc, err)
		}
		if identity := slices.Contains(ServiceIdentities, svc); identity != (signer != nil) {
			t.Fatalf("%s: has a service identity = %v, want %v", svc, signer != nil, identity)
		}
		// Every service accepts every service identity as itself, and the agent's and
		// builder's acting for an owner (auth.DefaultOnBehalfOfServices).
		for _, other := range ServiceIdentities {
			key, err := auth.LoadPrivateKey(auth.ServicePrivateKeyPath(s.KeyDir(), other))
			if err != nil {
				t.Fatal(err)
			}
			as, _ := auth.NewServiceSigner(other, key)
			self, _, _ := as.IssueSelf()
			if p, err := v.Verify(self); err != nil || p.Service != other || p.UserID != "" {
				t.Fatalf("%s verifying %s as itself: %+v, %v", svc, other, p, err)
			}
			tok, _, _ := as.Issue("owner-1")
			p, err := v.Verify(tok)
			if acting := slices.Contains(auth.DefaultOnBehalfOfServices, other); acting != (err == nil) ||
				acting && (p.Service != other || p.UserID != "owner-1") {
				t.Fatalf("%s verifying %s for owner-1: %+v, %v", svc, other, p, err)
			}
		}
	}
}
