package auth

import (
	"crypto/ed25519"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Verifier checks access tokens with public keys: user tokens with the user signing key
// their header names (kid; several during a key rotation), service tokens with the key of
// the service named in their subject. Successful verifications are cached for a short
// while (an Ed25519 check costs ~40µs, and every hop of a request through the mesh verifies
// the same token), never past the token's expiry. Revocations (Revoke, fed by
// FollowRevocations) are checked on every call, cached or not, so a revoked token is
// refused from the moment its revocation arrives.
type Verifier struct {
	keys          atomic.Pointer[keySet]
	o             options
	userParser    *jwt.Parser
	serviceParser *jwt.Parser
	revs          revocations

	mu    sync.Mutex
	cache map[[32]byte]cachedPrincipal
}

// VerifyKey is a public key that verifies user tokens: the current signing key's, or one
// a rotation retired, which verifies the tokens it signed until NotAfter (when the last of
// them has expired).
type VerifyKey struct {
	Key      ed25519.PublicKey
	NotAfter time.Time // zero: no end (the current key)
}

type keySet struct {
	current ed25519.PublicKey // for tokens without a kid (issued before kids existed)
	byKID   map[string]VerifyKey
}

type cachedPrincipal struct {
	p     Principal
	until time.Time
}

const (
	verifyCacheTTL  = time.Minute
	verifyCacheSize = 4096
)

// NewVerifier returns a Verifier of user tokens signed by key; WithServiceKeys adds the
// services whose tokens it accepts.
func NewVerifier(key ed25519.PublicKey, opts ...Option) *Verifier {
	return NewVerifierKeys([]VerifyKey{{Key: key}}, opts...)
}

// NewVerifierKeys returns a Verifier of user tokens signed by any of keys; the first is the
// current one.
func NewVerifierKeys(keys []VerifyKey, opts ...Option) *Verifier {
	v := &Verifier{o: newOptions(opts), cache: map[[32]byte]cachedPrincipal{}}
	v.SetKeys(keys)
	parser := func(iss string) *jwt.Parser {
		return jwt.NewParser(
			// Only EdDSA: no "none", and no HS256 with the public key as HMAC secret.
			jwt.WithValidMethods([]string{jwt.SigningMethodEdDSA.Alg()}),
			jwt.WithIssuer(iss),
			jwt.WithAudience(Audience),
			jwt.WithExpirationRequired(),
			jwt.WithIssuedAt(),
			jwt.WithLeeway(leeway),
			jwt.WithTimeFunc(func() time.Time { return v.o.now() }),
		)
	}
	v.userParser, v.serviceParser = parser(Issuer), parser(ServiceIssuer)
	return v
}

// SetKeys replaces the user-token keys (a rotation); the first is the current one. Cached
// verifications are dropped, so a key removed is refused at once.
func (v *Verifier) SetKeys(keys []VerifyKey) {
	ks := &keySet{byKID: map[string]VerifyKey{}}
	for i, k := range keys {
		if i == 0 {
			ks.current = k.Key
		}
		ks.byKID[KeyID(k.Key)] = k
	}
	v.keys.Store(ks)
	v.mu.Lock()
	clear(v.cache)
	v.mu.Unlock()
}

// Verify parses and verifies token and returns its principal. Every failure is
// ErrInvalidToken wrapped with the reason.
func (v *Verifier) Verify(token string) (Principal, error) {
	key := sha256.Sum256([]byte(token))
	now := v.o.now()
	v.mu.Lock()
	hit, ok := v.cache[key]
	v.mu.Unlock()
	if ok && now.Before(hit.until) {
		if why := v.revs.check(hit.p); why != "" {
			return Principal{}, revokedErr(why)
		}
		return hit.p, nil
	}
	keys := v.keys.Load() // the key set this verification may be cached under
	p, err := v.verify(token)
	if err != nil {
		return p, err
	}
	if why := v.revs.check(p); why != "" {
		return Principal{}, revokedErr(why)
	}
	until := now.Add(verifyCacheTTL)
	if p.ExpiresAt.Before(until) {
		until = p.ExpiresAt // every verified token has one
	}
	if testHookBeforeCache != nil {
		testHookBeforeCache()
	}
	v.mu.Lock()
	// SetKeys stores the new keys, then clears the cache under mu: a verification that
	// started under the old keys is cached only if they are still in force now, and is
	// then cleared by that SetKeys. Otherwise a token of a just-removed key could sit in
	// the cache for verifyCacheTTL.
	if v.keys.Load() == keys {
		if len(v.cache) >= verifyCacheSize {
			clear(v.cache) // simple bound; a cold cache only costs re-verification
		}
		v.cache[key] = cachedPrincipal{p: p, until: until}
	}
	v.mu.Unlock()
	return p, nil
}

// testHookBeforeCache, when set (by tests), runs between a verification and its caching.
var testHookBeforeCache func()

func revokedErr(why string) error {
	return fmt.Errorf("%w: %w: %s", ErrInvalidToken, ErrRevoked, why)
}

func invalid(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrInvalidToken, fmt.Sprintf(format, args...))
}

func (v *Verifier) verify(token string) (Principal, error) {
	// The issuer decides which key and rules apply; read it unverified, then verify the
	// whole token with the parser of that issuer (which checks the issuer again).
	var peek Claims
	if _, _, err := jwt.NewParser().ParseUnverified(token, &peek); err != nil {
		return Principal{}, invalid("%v", err)
	}
	if peek.Issuer == ServiceIssuer {
		return v.verifyService(token)
	}
	return v.verifyUser(token)
}

func (v *Verifier) verifyUser(token string) (Principal, error) {
	var c Claims
	if _, err := v.userParser.ParseWithClaims(token, &c, v.userKey); err != nil {
		return Principal{}, invalid("%v", err)
	}
	switch {
	case c.Subject == "":
		return Principal{}, invalid("no subject")
	case strings.HasPrefix(c.Subject, ServiceSubjectPrefix):
		return Principal{}, invalid("user token with a service subject %q", c.Subject)
	case c.OnBehalfOf != "":
		// Only a service, with its own key, may act for someone else.
		return Principal{}, invalid("user token carries on_behalf_of")
	}
	if err := checkLifetime(&c, v.o.maxLifetime); err != nil {
		return Principal{}, err
	}
	if err := CheckScopes(c.Scopes); err != nil {
		return Principal{}, invalid("%v", err)
	}
	return c.principal(token), nil
}

// userKey picks the key of a user token by its kid: the current key when it has none, a
// retired key only until its NotAfter.
func (v *Verifier) userKey(t *jwt.Token) (any, error) {
	ks := v.keys.Load()
	kid, _ := t.Header["kid"].(string)
	if kid == "" {
		return ks.current, nil
	}
	k, ok := ks.byKID[kid]
	switch {
	case !ok:
		return nil, fmt.Errorf("unknown signing key %q", kid)
	case !k.NotAfter.IsZero() && v.o.now().After(k.NotAfter):
		return nil, fmt.Errorf("signing key %q was retired at %s", kid, k.NotAfter.Format(time.RFC3339))
	}
	return k.Key, nil
}

func (v *Verifier) verifyService(token string) (Principal, error) {
	var c Claims
	var service string
	_, err := v.serviceParser.ParseWithClaims(token, &c, func(t *jwt.Token) (any, error) {
		name, ok := strings.CutPrefix(t.Claims.(*Claims).Subject, ServiceSubjectPrefix)
		key, known := v.o.serviceKeys[name]
		if !ok || !known {
			return nil, errors.New("not a known service")
		}
		service = name
		return key, nil
	})
	if err != nil {
		return Principal{}, invalid("service token: %v", err)
	}
	switch {
	case len(c.Roles) > 0:
		// A service acts with the owner's ordinary rights; administrative RPCs need a person.
		return Principal{}, invalid("service token carries roles")
	case strings.HasPrefix(c.OnBehalfOf, ServiceSubjectPrefix):
		return Principal{}, invalid("service token on behalf of a service")
	case c.OnBehalfOf != "" && !v.o.actingFor[service]:
		// Only the services that run work for owners (the agent's jobs, the builder's
		// builds) may act for one; any other service key, leaked or misused, speaks for
		// its service alone.
		return Principal{}, invalid("service %q may not act on behalf of an owner (THEFOLD_AUTH_ON_BEHALF_OF_SERVICES)", service)
	}
	if err := checkLifetime(&c, ServiceTokenLifetime); err != nil {
		return Principal{}, err
	}
	// Without on_behalf_of the service speaks for itself: UserID stays empty, so it owns
	// nothing and only service-only methods (RequireService) accept it.
	return Principal{UserID: c.OnBehalfOf, Service: service, Roles: serviceRoles(c.OnBehalfOf), TokenID: c.ID,
		IssuedAt: c.IssuedAt.Time, ExpiresAt: c.ExpiresAt.Time, Token: token}, nil
}

// serviceRoles are the roles of a service token: an owner's ordinary rights when it acts
// for one, none of its own.
func serviceRoles(owner string) []string {
	if owner == "" {
		return nil
	}
	return []string{RoleUser}
}

// checkLifetime refuses a token valid for longer than max: a stolen long-lived token is
// the one revocation has to catch, so none is accepted even if a signer made one.
func checkLifetime(c *Claims, max time.Duration) error {
	if c.IssuedAt == nil {
		return invalid("no iat")
	}
	if life := c.ExpiresAt.Sub(c.IssuedAt.Time); life > max {
		return invalid("lifetime %s exceeds the maximum %s", life, max)
	}
	return nil
}
