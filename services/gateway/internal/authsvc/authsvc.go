// Package authsvc implements the gateway's identity RPCs: AuthService (one-time-code login,
// sessions with rotating refresh tokens, API keys, revocation, WhoAmI), UserService (user
// administration, admin only) and the mesh-internal IdentityService (revocations every
// verifier follows, API key exchange).
package authsvc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/mail"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/events"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/pkg/wait"
	"github.com/thefold/thefold/services/gateway/internal/mailer"
	"github.com/thefold/thefold/services/gateway/internal/store"
)

// PublicMethods are the RPCs a caller uses before it has a token, and ExchangeAPIKey,
// whose API key is the credential. WatchRevocations is not one: services call it with
// their own identity (auth.AsService).
var PublicMethods = []string{
	gatewayv1.AuthService_RequestLoginCode_FullMethodName,
	gatewayv1.AuthService_VerifyLoginCode_FullMethodName,
	gatewayv1.AuthService_RefreshToken_FullMethodName,
	gatewayv1.IdentityService_ExchangeAPIKey_FullMethodName,
}

// Config is the identity configuration of the gateway.
type Config struct {
	// SigningKeyFile is the user-token private key; only the gateway (and the launcher,
	// for the admin token) has it. It is re-read when a rotation changes it.
	SigningKeyFile string        `env:"THEFOLD_AUTH_SIGNING_KEY_FILE"`
	AccessTTL      time.Duration `env:"THEFOLD_AUTH_ACCESS_TTL, default=15m"`
	RefreshTTL     time.Duration `env:"THEFOLD_AUTH_REFRESH_TTL, default=720h"`
	// KeyTokenTTL is the lifetime of the access token an API key is exchanged for.
	KeyTokenTTL time.Duration `env:"THEFOLD_AUTH_API_KEY_TOKEN_TTL, default=5m"`
	CodeTTL     time.Duration `env:"THEFOLD_LOGIN_CODE_TTL, default=10m"`
	// After MaxFailures wrong codes in a row an address is locked out for LockoutBase,
	// doubling with each lockout in a row up to LockoutMax.
	MaxFailures    int           `env:"THEFOLD_LOGIN_MAX_FAILURES, default=5"`
	LockoutBase    time.Duration `env:"THEFOLD_LOGIN_LOCKOUT, default=1m"`
	LockoutMax     time.Duration `env:"THEFOLD_LOGIN_LOCKOUT_MAX, default=1h"`
	AuditRetention time.Duration `env:"THEFOLD_LOGIN_AUDIT_RETENTION, default=2160h"`
	// AdminEmail is the address of the first admin (user id "admin", the subject of the
	// launcher's admin token), created at start if absent.
	AdminEmail string `env:"THEFOLD_ADMIN_EMAIL, default=admin@localhost"`
	// Login limits code requests and failed codes by client and by address, and names the
	// proxies whose word on a caller's address is believed (login.go).
	Login LoginLimits
	// APIKeys are the lifetime and scope defaults of new API keys (apikeys.go).
	APIKeys APIKeyPolicy
	// ReplacedAdminTokensFile lists the admin tokens the launcher replaced; the gateway
	// revokes them (admintoken.go). Empty: none.
	ReplacedAdminTokensFile string `env:"THEFOLD_AUTH_REPLACED_ADMIN_TOKENS_FILE"`
	// MaxWatches bounds concurrent WatchRevocations streams (one per service replica);
	// WatchesPerService those of one service, so none can take another's.
	MaxWatches        int `env:"THEFOLD_AUTH_MAX_WATCHES, default=256"`
	WatchesPerService int `env:"THEFOLD_AUTH_WATCHES_PER_SERVICE, default=8"`
}

// Validate collects every problem.
func (c *Config) Validate() error {
	var errList []error
	if c.SigningKeyFile == "" {
		errList = append(errList, errors.New("THEFOLD_AUTH_SIGNING_KEY_FILE: required (thefold up creates the key pair under its data directory)"))
	}
	for name, d := range map[string]time.Duration{
		"THEFOLD_AUTH_ACCESS_TTL": c.AccessTTL, "THEFOLD_AUTH_REFRESH_TTL": c.RefreshTTL,
		"THEFOLD_AUTH_API_KEY_TOKEN_TTL": c.KeyTokenTTL, "THEFOLD_LOGIN_CODE_TTL": c.CodeTTL,
		"THEFOLD_LOGIN_LOCKOUT": c.LockoutBase, "THEFOLD_LOGIN_LOCKOUT_MAX": c.LockoutMax,
		"THEFOLD_LOGIN_AUDIT_RETENTION": c.AuditRetention,
	} {
		if d <= 0 {
			errList = append(errList, fmt.Errorf("%s: must be positive, got %s", name, d))
		}
	}
	if c.MaxFailures < 1 {
		errList = append(errList, fmt.Errorf("THEFOLD_LOGIN_MAX_FAILURES: must be at least 1, got %d", c.MaxFailures))
	}
	if c.MaxWatches < 1 {
		errList = append(errList, fmt.Errorf("THEFOLD_AUTH_MAX_WATCHES: must be at least 1, got %d", c.MaxWatches))
	}
	if c.WatchesPerService < 1 || c.WatchesPerService > c.MaxWatches {
		errList = append(errList, fmt.Errorf("THEFOLD_AUTH_WATCHES_PER_SERVICE: must be between 1 and THEFOLD_AUTH_MAX_WATCHES (%d), got %d", c.MaxWatches, c.WatchesPerService))
	}
	if _, err := normalizeEmail("THEFOLD_ADMIN_EMAIL", c.AdminEmail); err != nil {
		errList = append(errList, fmt.Errorf("THEFOLD_ADMIN_EMAIL: not an address: %q", c.AdminEmail))
	}
	errList = append(errList, c.Login.check(c.MaxFailures), c.APIKeys.check())
	return errors.Join(errList...)
}

// AdminUserID is the id of the first admin: the subject of the launcher's admin token.
const AdminUserID = "admin"

// Core holds what the three services share.
type Core struct {
	cfg      Config
	store    *store.Store
	signer   atomic.Pointer[auth.Signer]
	verifier *auth.Verifier
	secrets  *Secrets
	mailer   mailer.Mailer
	hub      *events.Hub
	// watches are the revocation streams: a few per service (its replicas, and a
	// reconnect overlapping a stream not yet seen to end), under the server's cap.
	watches *events.Watches
	log     *slog.Logger
	// maxLifetime bounds every user token (THEFOLD_AUTH_MAX_TOKEN_LIFETIME): a user
	// revocation must outlive the longest token it covers.
	maxLifetime time.Duration
	// Login codes go out in the background, each bounded by mailTimeout; FlushMail waits
	// for them at shutdown.
	mailing sync.WaitGroup
	unsent  atomic.Int64
	now     func() time.Time
}

// Deps are what New needs.
type Deps struct {
	Config      Config
	Store       *store.Store
	Signer      *auth.Signer
	SigningKey  []byte // the signer's private key (the Secrets derive from it)
	Verifier    *auth.Verifier
	Mailer      mailer.Mailer
	Hub         *events.Hub
	Log         *slog.Logger
	MaxLifetime time.Duration
}

// New returns the shared core.
func New(d Deps) (*Core, error) {
	sec, err := NewSecrets(d.SigningKey)
	if err != nil {
		return nil, err
	}
	c := &Core{cfg: d.Config, store: d.Store, verifier: d.Verifier, secrets: sec, mailer: d.Mailer, hub: d.Hub,
		watches: events.NewWatches(d.Config.MaxWatches, "revocation watches", events.PerCaller(d.Config.WatchesPerService)),
		log:     d.Log, maxLifetime: d.MaxLifetime, now: time.Now}
	c.signer.Store(d.Signer)
	return c, nil
}

// sendMail sends msg in the background: an SMTP server's latency must not tell a known
// address from an unknown one. A failure is logged; FlushMail waits for what is in flight.
func (c *Core) sendMail(ctx context.Context, userID string, msg mailer.Message) {
	c.unsent.Add(1)
	c.mailing.Go(func() {
		defer c.unsent.Add(-1)
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), mailTimeout)
		defer cancel()
		if err := c.mailer.Send(mctx, msg); err != nil {
			c.log.Error("login code not sent", "user_id", userID, "err", err)
		}
	})
}

// FlushMail waits until the login codes being sent have gone out (or failed), or until ctx
// ends, and returns how many were still being sent then. The gateway calls it at shutdown,
// after the server has stopped taking requests, so a code asked for in the last moment is
// still mailed.
func (c *Core) FlushMail(ctx context.Context) int {
	done := make(chan struct{})
	go func() { c.mailing.Wait(); close(done) }()
	select {
	case <-done:
		return 0
	case <-ctx.Done():
		return int(c.unsent.Load())
	}
}

// SetSigner replaces the signer (a key rotation).
func (c *Core) SetSigner(s *auth.Signer) { c.signer.Store(s) }

// Auth, Users and Identity are the three services on the core.
func (c *Core) Auth() *Server             { return &Server{Core: c} }
func (c *Core) Users() *UserServer        { return &UserServer{Core: c} }
func (c *Core) Identity() *IdentityServer { return &IdentityServer{Core: c} }

// EnsureAdmin creates the first admin unless it exists.
func (c *Core) EnsureAdmin(ctx context.Context) error {
	norm, _ := normalizeEmail("THEFOLD_ADMIN_EMAIL", c.cfg.AdminEmail)
	return c.store.EnsureUser(ctx, AdminUserID, c.cfg.AdminEmail, norm, "admin", store.RoleAdmin)
}

// Prune deletes expired identity data; run it periodically.
func (c *Core) Prune(ctx context.Context) error {
	return c.store.Prune(ctx, c.cfg.AuditRetention, apiKeySecretWindow)
}

const maxEmail = 254

// normalizeEmail checks a bare address ("a@b.c", no display name) and returns its
// comparison form (lower case).
func normalizeEmail(field, email string) (string, error) {
	email = strings.TrimSpace(email)
	if email == "" {
		return "", invalid(field, "required")
	}
	if len(email) > maxEmail {
		return "", invalid(field, "at most %d characters", maxEmail)
	}
	a, err := mail.ParseAddress(email)
	if err != nil || a.Address != email || a.Name != "" {
		return "", invalid(field, "not an e-mail address")
	}
	return strings.ToLower(email), nil
}

// roles are a stored role as token roles.
func roles(role string) []string {
	if role == store.RoleAdmin {
		return []string{auth.RoleAdmin}
	}
	return []string{auth.RoleUser}
}

// userNotBefore is the not-before of a revocation made now: the next whole second, since
// a token's iat is in whole seconds (one issued in this second, before the revocation,
// must be refused).
func userNotBefore(now time.Time) time.Time { return now.Truncate(time.Second).Add(time.Second) }

// awaitNotBefore delays issuing a token for u until its iat can pass the user's
// not-before (at most a second after a revocation).
func (c *Core) awaitNotBefore(ctx context.Context, u store.User) error {
	if d := u.TokensNotBefore.Sub(c.now()); d > 0 {
		return wait.Sleep(ctx, d)
	}
	return nil
}

// issue signs an access token for u.
func (c *Core) issue(ctx context.Context, u store.User, ttl time.Duration, x auth.Extra) (string, auth.Principal, error) {
	if err := c.awaitNotBefore(ctx, u); err != nil {
		return "", auth.Principal{}, err
	}
	return c.signer.Load().IssueExtra(u.ID, roles(u.Role), ttl, x)
}
