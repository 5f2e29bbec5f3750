package stack

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/platform"
)

// DefaultAdminTokenTTL is how long an admin token from `thefold up` / `thefold token` lives:
// a working day. The token is the operator's master key and lies in a file, so it should
// not outlive the session it was made for; `thefold up` reissues it when a quarter is left,
// `thefold token` on demand (-token-ttl / THEFOLD_ADMIN_TOKEN_TTL change it).
const DefaultAdminTokenTTL = 12 * time.Hour

// ServiceIdentities are the services with an identity of their own, for calls made for an
// owner: after the owner's token may have expired (agent jobs, builds), and for an API
// key's owner, whose key's scopes say what it may call, not what serving that call takes
// (auth.Authenticator.SetServiceSigner). Every service has one. Each gets its own key pair;
// only it is given its private key, every service the public keys.
var ServiceIdentities = platform.ServiceNames

func (s *Stack) maxLifetime() time.Duration {
	if s.MaxTokenLifetime > 0 {
		return s.MaxTokenLifetime
	}
	return auth.DefaultMaxLifetime
}

func (s *Stack) adminTTL() time.Duration {
	if s.AdminTokenTTL > 0 {
		return s.AdminTokenTTL
	}
	return min(DefaultAdminTokenTTL, s.maxLifetime())
}

// ReplacedTokensPath is the list of replaced admin tokens the gateway revokes
// (auth.ReplacedTokensFile).
func (s *Stack) ReplacedTokensPath() string {
	return filepath.Join(s.KeyDir(), auth.ReplacedTokensFile)
}

// EnsureCredentials creates the key pairs on first start (the user-token signing key, one
// per service identity) and returns the admin token, issuing a new one when the saved one
// is missing, no longer verifies (keys regenerated, expired, an old token without expiry)
// or has less than a quarter of its lifetime left — so `thefold up` always leaves a usable
// token behind. A token it replaces is revoked (see issueAdminToken).
func (s *Stack) EnsureCredentials() (token string, err error) {
	priv, _, err := auth.EnsureKeyPair(s.KeyDir())
	if err != nil {
		return "", err
	}
	for _, svc := range ServiceIdentities {
		if _, _, err := auth.EnsureServiceKeyPair(s.KeyDir(), svc); err != nil {
			return "", err
		}
	}
	// The gateway is given the replaced-tokens file from the start (docker compose mounts
	// it as a single file, which must exist before the container does).
	if _, err := os.Stat(s.ReplacedTokensPath()); errors.Is(err, os.ErrNotExist) {
		if err := auth.WriteReplacedTokens(s.ReplacedTokensPath(), nil, time.Now()); err != nil {
			return "", err
		}
	}
	if b, err := os.ReadFile(s.TokenPath()); err == nil {
		tok := strings.TrimSpace(string(b))
		v := auth.NewVerifier(priv.Public().(ed25519.PublicKey), auth.WithMaxLifetime(s.maxLifetime()))
		if p, err := v.Verify(tok); err == nil && time.Until(p.ExpiresAt) > s.adminTTL()/4 {
			return tok, nil
		}
	}
	return s.issueAdminToken(priv, true)
}

// IssueAdminToken saves and returns a fresh admin token (`thefold token`), revoking the one
// it replaces; the signing key must exist already (thefold up or thefold init create it).
func (s *Stack) IssueAdminToken() (string, error) {
	return s.newAdminToken(true)
}

func (s *Stack) newAdminToken(revokePrevious bool) (string, error) {
	priv, err := auth.LoadPrivateKey(filepath.Join(s.KeyDir(), auth.PrivateKeyFile))
	if errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("no signing key yet (run thefold up or thefold init): %w", err)
	}
	if err != nil {
		return "", err
	}
	return s.issueAdminToken(priv, revokePrevious)
}

// issueAdminToken issues, saves and returns an admin token. With revokePrevious the token
// it replaces, if still valid, is revoked: the launcher holds the signing key but not the
// gateway's database, so it lists the replaced token's id in ReplacedTokensPath, which the
// gateway reads at start and follows while running (within seconds) and turns into a
// token revocation every service learns of, like a RevokeToken call's. The list is written
// before the new token: a launcher stopped in between leaves no old token working.
func (s *Stack) issueAdminToken(priv ed25519.PrivateKey, revokePrevious bool) (string, error) {
	if revokePrevious {
		if err := s.replaceAdminToken(); err != nil {
			return "", fmt.Errorf("admin token: revoking the previous one: %w", err)
		}
	}
	tok, _, err := auth.NewSigner(priv, auth.WithMaxLifetime(s.maxLifetime())).Issue("admin", []string{auth.RoleAdmin}, s.adminTTL())
	if err != nil {
		return "", fmt.Errorf("admin token: %w", err)
	}
	// Written whole and renamed, so a concurrent reader never sees half a token.
	tmp := s.TokenPath() + ".tmp"
	if err := os.WriteFile(tmp, []byte(tok+"\n"), 0o600); err != nil {
		return "", err
	}
	if err := os.Rename(tmp, s.TokenPath()); err != nil {
		return "", err
	}
	return tok, nil
}

// replaceAdminToken lists the saved admin token in ReplacedTokensPath if it still verifies
// (with every key the services accept: one signed before a rotation too); an expired or
// foreign token is refused anyway and needs no entry. Expired entries are dropped.
func (s *Stack) replaceAdminToken() error {
	b, err := os.ReadFile(s.TokenPath())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	keys, err := auth.LoadVerifyKeys(filepath.Join(s.KeyDir(), auth.PublicKeyFile))
	if err != nil {
		return err
	}
	p, err := auth.NewVerifierKeys(keys, auth.WithMaxLifetime(s.maxLifetime())).Verify(strings.TrimSpace(string(b)))
	if err != nil || p.TokenID == "" {
		return nil
	}
	list, err := auth.ReadReplacedTokens(s.ReplacedTokensPath())
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return auth.WriteReplacedTokens(s.ReplacedTokensPath(), append(list, auth.ReplacedToken{ID: p.TokenID, Expire: p.ExpiresAt}), time.Now())
}

// authEnv is the identity configuration of svc: the keys that verify tokens, the lifetime
// the admin token was issued under, and — for a service identity — its own private key.
func (s *Stack) authEnv(svc string) []string {
	own := "" // set explicitly, so an inherited value cannot give a service an identity
	if slices.Contains(ServiceIdentities, svc) {
		own = auth.ServicePrivateKeyPath(s.KeyDir(), svc)
	}
	// Only the gateway signs user tokens (logins, API key exchanges); it also gets the
	// local mail sink, where the log mailer puts login codes.
	signing, sink, replaced := "", "", ""
	if svc == "gateway" {
		signing, sink, replaced = filepath.Join(s.KeyDir(), auth.PrivateKeyFile), s.MailSinkPath(), s.ReplacedTokensPath()
	}
	return []string{
		"THEFOLD_AUTH_PUBLIC_KEY_FILE=" + filepath.Join(s.KeyDir(), auth.PublicKeyFile),
		"THEFOLD_AUTH_MAX_TOKEN_LIFETIME=" + s.maxLifetime().String(),
		"THEFOLD_AUTH_SERVICE_KEYS_DIR=" + filepath.Join(s.KeyDir(), auth.ServiceKeysDir),
		"THEFOLD_AUTH_SERVICE_KEY_FILE=" + own,
		"THEFOLD_AUTH_SIGNING_KEY_FILE=" + signing,
		"THEFOLD_MAIL_SINK_FILE=" + sink,
		"THEFOLD_AUTH_REPLACED_ADMIN_TOKENS_FILE=" + replaced,
	}
}

// RotateSigningKey replaces the user-token signing key (auth.RotateKeyPair): the old public
// key stays valid for the tokens it signed until they expire, every service and the gateway
// pick the new files up within seconds, and the admin token is reissued with the new key.
// A rotation keeps what the old key signed working, so the previous admin token is not
// revoked (a compromised one is: `thefold token`). It returns the new key's id.
func (s *Stack) RotateSigningKey() (string, error) {
	kid, err := auth.RotateKeyPair(s.KeyDir(), s.maxLifetime(), time.Now())
	if err != nil {
		return "", err
	}
	if _, err := s.newAdminToken(false); err != nil {
		return "", err
	}
	return kid, nil
}
