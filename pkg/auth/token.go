// Package auth is TheFold's identity: Ed25519-signed access tokens (JWT, EdDSA), the
// principal they carry, and the gRPC interceptors that verify a token on every RPC of every
// service and forward it on service-to-service calls.
//
// Two kinds of token exist. A user token (iss "thefold") names a person; only the gateway
// (and the local launcher, for the admin token) holds the key that signs it. A service
// token (iss "thefold-service") is minted by a service for itself, with its own key, to
// call on for an owner after the owner's token has expired (a job, a build); it lives at
// most five minutes and names the owner in on_behalf_of. Services verify both with public
// keys only, so a service reached directly is as protected as one reached through the
// gateway.
package auth

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

// Roles.
const (
	RoleAdmin = "admin"
	RoleUser  = "user"
)

// Issuers and audience. A token whose iss or aud differs is refused, so a token of
// another system signed with a reused key is not accepted here.
const (
	Issuer        = "thefold"
	ServiceIssuer = "thefold-service"
	Audience      = "thefold"
	// ServiceSubjectPrefix starts the subject of a service token ("service:agent"); no
	// user id may start with it.
	ServiceSubjectPrefix = "service:"
)

// Lifetimes.
const (
	// DefaultMaxLifetime bounds exp - iat of a user token unless configured otherwise
	// (THEFOLD_AUTH_MAX_TOKEN_LIFETIME). It is also the admin token's default lifetime.
	DefaultMaxLifetime = 30 * 24 * time.Hour
	// ServiceTokenLifetime is the lifetime, and the maximum, of a service token: long
	// enough for one call or stream setup, short enough that a leaked one is worth little.
	ServiceTokenLifetime = 5 * time.Minute
	// leeway absorbs clock skew between hosts for exp, nbf and iat.
	leeway = 30 * time.Second
)

// ErrInvalidToken is returned for any token that does not verify; the detail stays in logs.
var ErrInvalidToken = errors.New("invalid or expired token")

// ErrRevoked is also matched by the error for a token refused because it was revoked.
var ErrRevoked = errors.New("revoked")

// Principal is the authenticated caller.
type Principal struct {
	// UserID is the person: the subject of a user token, the owner (on_behalf_of) of a
	// service token. Owner-scoped queries use it either way.
	UserID string
	// Service is set when a service acts for UserID with its own identity (a job or build
	// that outlived the owner's token): "agent", "builder". Empty for a person's token.
	// A service authenticated as itself (ServiceSigner.IssueSelf) has Service set and
	// UserID empty: it owns nothing, so MustFromContext refuses it and only service-only
	// methods (RequireService) accept it.
	Service   string
	Roles     []string
	TokenID   string
	IssuedAt  time.Time
	ExpiresAt time.Time
	// SessionID is the login session a user token belongs to; empty for tokens issued
	// outside a session (the launcher's admin token, API key tokens).
	SessionID string
	// APIKeyID is the API key the token acts for; empty otherwise.
	APIKeyID string
	// Scopes narrow what the token may call ("tasks:read", "*:write"); empty means no
	// narrowing. Only API key tokens carry them.
	Scopes []string
	// Token is the raw bearer token, forwarded on calls to other services.
	Token string
}

// HasRole reports whether p has role (admins have every role).
func (p Principal) HasRole(role string) bool {
	return slices.Contains(p.Roles, role) || slices.Contains(p.Roles, RoleAdmin)
}

// Claims are the JWT claims TheFold issues.
type Claims struct {
	jwt.RegisteredClaims
	Roles []string `json:"roles,omitempty"`
	// OnBehalfOf is the owner a service acts for; only service tokens carry it.
	OnBehalfOf string `json:"on_behalf_of,omitempty"`
	// SessionID is the login session of a user token (revoking the session refuses it).
	SessionID string `json:"sid,omitempty"`
	// APIKeyID is the API key a user token acts for (revoking the key refuses it).
	APIKeyID string `json:"akid,omitempty"`
	// Scopes narrow an API key's token; see Principal.Scopes.
	Scopes []string `json:"scopes,omitempty"`
}

// Extra are the optional claims of a user token.
type Extra struct {
	SessionID string
	APIKeyID  string
	Scopes    []string
}

// Option configures a Signer, ServiceSigner or Verifier.
type Option func(*options)

type options struct {
	maxLifetime time.Duration
	serviceKeys map[string]ed25519.PublicKey
	// actingFor are the services whose tokens on behalf of an owner are accepted.
	actingFor map[string]bool
	now       func() time.Time
}

// DefaultOnBehalfOfServices are the services that may act for an owner unless configured
// otherwise (THEFOLD_AUTH_ON_BEHALF_OF_SERVICES): the agent runs jobs and the builder
// builds for their owners long after the owner's token has expired. Every other service
// authenticates as itself only (ServiceSigner.IssueSelf), for service-only methods.
var DefaultOnBehalfOfServices = []string{"agent", "builder"}

func newOptions(opts []Option) options {
	o := options{maxLifetime: DefaultMaxLifetime, now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	if o.actingFor == nil {
		o.actingFor = map[string]bool{}
		for _, s := range DefaultOnBehalfOfServices {
			o.actingFor[s] = true
		}
	}
	return o
}

// WithMaxLifetime bounds exp - iat of user tokens (issued or accepted); d <= 0 keeps the
// default.
func WithMaxLifetime(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.maxLifetime = d
		}
	}
}

// WithServiceKeys gives a Verifier the public keys of the services whose tokens it
// accepts, by service name. Without it every service token is refused.
func WithServiceKeys(keys map[string]ed25519.PublicKey) Option {
	return func(o *options) { o.serviceKeys = keys }
}

// WithOnBehalfOfServices names the services whose tokens on behalf of an owner a Verifier
// accepts (default DefaultOnBehalfOfServices); a token on behalf of an owner from any other
// service, even one whose key it knows, is refused. No names: no service may act for
// anyone.
func WithOnBehalfOfServices(names ...string) Option {
	return func(o *options) {
		o.actingFor = map[string]bool{}
		for _, n := range names {
			o.actingFor[n] = true
		}
	}
}

// WithClock replaces time.Now (tests; nothing else should need it).
func WithClock(now func() time.Time) Option {
	return func(o *options) { o.now = now }
}

// Signer issues user tokens. Only the gateway (and the local launcher, for the admin
// token) has one.
type Signer struct {
	key ed25519.PrivateKey
	o   options
}

// NewSigner returns a Signer for key.
func NewSigner(key ed25519.PrivateKey, opts ...Option) *Signer {
	return &Signer{key: key, o: newOptions(opts)}
}

// Issue signs a token for userID with roles, valid for ttl. Every token expires: ttl must
// be positive and at most the maximum lifetime.
func (s *Signer) Issue(userID string, roles []string, ttl time.Duration) (string, Principal, error) {
	return s.IssueExtra(userID, roles, ttl, Extra{})
}

// IssueExtra is Issue with a session, an API key or scopes.
func (s *Signer) IssueExtra(userID string, roles []string, ttl time.Duration, x Extra) (string, Principal, error) {
	if err := CheckScopes(x.Scopes); err != nil {
		return "", Principal{}, err
	}
	switch {
	case userID == "":
		return "", Principal{}, errors.New("auth: user id required")
	case strings.HasPrefix(userID, ServiceSubjectPrefix):
		return "", Principal{}, fmt.Errorf("auth: user id %q: the %q prefix is reserved for services", userID, ServiceSubjectPrefix)
	case ttl <= 0:
		return "", Principal{}, errors.New("auth: token lifetime required (every token expires)")
	case ttl > s.o.maxLifetime:
		return "", Principal{}, fmt.Errorf("auth: token lifetime %s exceeds the maximum %s (THEFOLD_AUTH_MAX_TOKEN_LIFETIME)", ttl, s.o.maxLifetime)
	}
	c := newClaims(Issuer, userID, s.o.now(), ttl)
	c.Roles = roles
	c.SessionID, c.APIKeyID, c.Scopes = x.SessionID, x.APIKeyID, x.Scopes
	tok, err := sign(s.key, c)
	if err != nil {
		return "", Principal{}, err
	}
	return tok, c.principal(tok), nil
}

// principal is the Principal of a verified user token.
func (c *Claims) principal(tok string) Principal {
	return Principal{UserID: c.Subject, Roles: c.Roles, TokenID: c.ID, IssuedAt: c.IssuedAt.Time,
		ExpiresAt: c.ExpiresAt.Time, SessionID: c.SessionID, APIKeyID: c.APIKeyID, Scopes: c.Scopes, Token: tok}
}

func newClaims(iss, sub string, now time.Time, ttl time.Duration) Claims {
	// Whole seconds: NumericDate truncates, and exp - iat must not grow past the maximum
	// by rounding.
	now = now.Truncate(time.Second)
	return Claims{RegisteredClaims: jwt.RegisteredClaims{
		Issuer:    iss,
		Audience:  jwt.ClaimStrings{Audience},
		Subject:   sub,
		ID:        uuid.NewString(),
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(ttl)),
	}}
}

// sign signs c with key; the header names the key (kid) so verifiers holding several keys
// (a rotation) know which one to use.
func sign(key ed25519.PrivateKey, c Claims) (string, error) {
	t := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c)
	t.Header["kid"] = KeyID(key.Public().(ed25519.PublicKey))
	tok, err := t.SignedString(key)
	if err != nil {
		return "", fmt.Errorf("auth: sign: %w", err)
	}
	return tok, nil
}
