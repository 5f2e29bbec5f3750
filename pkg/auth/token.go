// Package auth is TheFold's identity: Ed25519-signed access tokens (JWT, EdDSA), the
// principal they carry, and the gRPC interceptors that verify a token on every RPC of every
// service and forward it on service-to-service calls. Only the gateway holds the private
// key; services need only the public key, so a service reached directly is as protected as
// one reached through the gateway.
package auth

import (
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/google/uuid"
)

// Roles.
const (
	RoleAdmin = "admin"
	RoleUser  = "user"
)

const (
	issuer   = "thefold"
	audience = "thefold"
)

// ErrInvalidToken is returned for any token that does not verify; the detail stays in logs.
var ErrInvalidToken = errors.New("invalid or expired token")

// Principal is the authenticated caller.
type Principal struct {
	UserID    string
	Roles     []string
	TokenID   string
	ExpiresAt time.Time
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
	Roles []string `json:"roles"`
}

// Signer issues access tokens. Only the gateway (and the local launcher, for the admin
// token) has one.
type Signer struct {
	key ed25519.PrivateKey
	now func() time.Time
}

// NewSigner returns a Signer for key.
func NewSigner(key ed25519.PrivateKey) *Signer {
	return &Signer{key: key, now: time.Now}
}

// Issue signs a token for userID with roles, valid for ttl (no expiry when ttl is 0).
func (s *Signer) Issue(userID string, roles []string, ttl time.Duration) (string, Principal, error) {
	if userID == "" {
		return "", Principal{}, errors.New("auth: user id required")
	}
	now := s.now()
	c := Claims{
		RegisteredClaims: jwt.RegisteredClaims{
			Issuer:   issuer,
			Audience: jwt.ClaimStrings{audience},
			Subject:  userID,
			ID:       uuid.NewString(),
			IssuedAt: jwt.NewNumericDate(now),
		},
		Roles: roles,
	}
	if ttl > 0 {
		c.ExpiresAt = jwt.NewNumericDate(now.Add(ttl))
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodEdDSA, c).SignedString(s.key)
	if err != nil {
		return "", Principal{}, fmt.Errorf("auth: sign: %w", err)
	}
	p := Principal{UserID: userID, Roles: roles, TokenID: c.ID, Token: tok}
	if c.ExpiresAt != nil {
		p.ExpiresAt = c.ExpiresAt.Time
	}
	return tok, p, nil
}

// Verifier checks access tokens with the public key. Successful verifications are cached
// for a short while (an Ed25519 check costs ~40µs, and every hop of a request through the
// mesh verifies the same token), never past the token's expiry.
type Verifier struct {
	key    ed25519.PublicKey
	parser *jwt.Parser
	now    func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]cachedPrincipal
}

type cachedPrincipal struct {
	p     Principal
	until time.Time
}

const (
	verifyCacheTTL  = time.Minute
	verifyCacheSize = 4096
)

// NewVerifier returns a Verifier for key.
func NewVerifier(key ed25519.PublicKey) *Verifier {
	v := &Verifier{key: key, now: time.Now, cache: map[[32]byte]cachedPrincipal{}}
	v.parser = jwt.NewParser(
		jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
		jwt.WithIssuer(issuer),
		jwt.WithAudience(audience),
		jwt.WithLeeway(30*time.Second),
		jwt.WithTimeFunc(func() time.Time { return v.now() }),
	)
	return v
}

// Verify parses and verifies token and returns its principal. Every failure is
// ErrInvalidToken wrapped with the reason.
func (v *Verifier) Verify(token string) (Principal, error) {
	key := sha256.Sum256([]byte(token))
	now := v.now()
	v.mu.Lock()
	hit, ok := v.cache[key]
	v.mu.Unlock()
	if ok && now.Before(hit.until) {
		return hit.p, nil
	}
	p, err := v.verify(token)
	if err != nil {
		return p, err
	}
	until := now.Add(verifyCacheTTL)
	if !p.ExpiresAt.IsZero() && p.ExpiresAt.Before(until) {
		until = p.ExpiresAt
	}
	v.mu.Lock()
	if len(v.cache) >= verifyCacheSize {
		clear(v.cache) // simple bound; a cold cache only costs re-verification
	}
	v.cache[key] = cachedPrincipal{p: p, until: until}
	v.mu.Unlock()
	return p, nil
}

func (v *Verifier) verify(token string) (Principal, error) {
	var c Claims
	_, err := v.parser.ParseWithClaims(token, &c, func(*jwt.Token) (any, error) { return v.key, nil })
	if err != nil {
		return Principal{}, fmt.Errorf("%w: %v", ErrInvalidToken, err)
	}
	if c.Subject == "" {
		return Principal{}, fmt.Errorf("%w: no subject", ErrInvalidToken)
	}
	p := Principal{UserID: c.Subject, Roles: c.Roles, TokenID: c.ID, Token: token}
	if c.ExpiresAt != nil {
		p.ExpiresAt = c.ExpiresAt.Time
	}
	return p, nil
}
