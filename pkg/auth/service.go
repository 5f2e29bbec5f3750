package auth

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// validServiceName keeps a service name usable as a file name and a subject.
var validServiceName = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// ServiceSigner mints service tokens: a service calls another service for an owner whose
// own token may long have expired — a job started hours ago, a build — or is an API key's,
// narrowed by scopes to what the key may call directly (Authenticator.SetServiceSigner). The
// token names the service (sub "service:<name>"), the owner (on_behalf_of), and lives
// ServiceTokenLifetime. Verifiers accept it only with the service's public key.
type ServiceSigner struct {
	name string
	key  ed25519.PrivateKey
	o    options

	mu    sync.Mutex
	cache map[string]Principal // by owner; reused while more than half its life is left
	self  Principal            // the last IssueSelf token, reused the same way
}

const serviceCacheSize = 1024

// NewServiceSigner returns the signer of service name with its private key.
func NewServiceSigner(name string, key ed25519.PrivateKey, opts ...Option) (*ServiceSigner, error) {
	if !validServiceName.MatchString(name) {
		return nil, fmt.Errorf("auth: service name %q: want lower-case letters, digits and dashes", name)
	}
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("auth: service %s: no Ed25519 private key", name)
	}
	return &ServiceSigner{name: name, key: key, o: newOptions(opts), cache: map[string]Principal{}}, nil
}

// Name is the service this signer speaks for.
func (s *ServiceSigner) Name() string { return s.name }

// Issue mints a token for acting on behalf of owner (a user id).
func (s *ServiceSigner) Issue(owner string) (string, Principal, error) {
	if owner == "" {
		return "", Principal{}, errors.New("auth: service token: owner required")
	}
	if strings.HasPrefix(owner, ServiceSubjectPrefix) {
		return "", Principal{}, fmt.Errorf("auth: service token: owner %q is a service", owner)
	}
	c := newClaims(ServiceIssuer, ServiceSubjectPrefix+s.name, s.o.now(), ServiceTokenLifetime)
	c.OnBehalfOf = owner
	tok, err := sign(s.key, c)
	if err != nil {
		return "", Principal{}, err
	}
	return tok, Principal{UserID: owner, Service: s.name, Roles: []string{RoleUser}, TokenID: c.ID, ExpiresAt: c.ExpiresAt.Time, Token: tok}, nil
}

// IssueSelf mints a token of the service as itself (sub "service:<name>", no
// on_behalf_of): it owns nothing and acts for no one, so it is accepted only by
// service-only methods (RequireService), such as following the gateway's revocations.
func (s *ServiceSigner) IssueSelf() (string, Principal, error) {
	c := newClaims(ServiceIssuer, ServiceSubjectPrefix+s.name, s.o.now(), ServiceTokenLifetime)
	tok, err := sign(s.key, c)
	if err != nil {
		return "", Principal{}, err
	}
	return tok, Principal{Service: s.name, TokenID: c.ID, IssuedAt: c.IssuedAt.Time, ExpiresAt: c.ExpiresAt.Time, Token: tok}, nil
}

// selfToken returns a self token, reusing a recent one as token does.
func (s *ServiceSigner) selfToken() (string, error) {
	now := s.o.now()
	s.mu.Lock()
	p := s.self
	s.mu.Unlock()
	if p.Token != "" && p.ExpiresAt.Sub(now) > ServiceTokenLifetime/2 {
		return p.Token, nil
	}
	tok, p, err := s.IssueSelf()
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	s.self = p
	s.mu.Unlock()
	return tok, nil
}

// token returns a token for owner, reusing a recent one: a job makes many calls, and a
// reused token is also a hit in every verifier's cache.
func (s *ServiceSigner) token(owner string) (string, error) {
	now := s.o.now()
	s.mu.Lock()
	p, ok := s.cache[owner]
	s.mu.Unlock()
	if ok && p.ExpiresAt.Sub(now) > ServiceTokenLifetime/2 {
		return p.Token, nil
	}
	tok, p, err := s.Issue(owner)
	if err != nil {
		return "", err
	}
	s.mu.Lock()
	if len(s.cache) >= serviceCacheSize {
		clear(s.cache)
	}
	s.cache[owner] = p
	s.mu.Unlock()
	return tok, nil
}

type onBehalfOfKey struct{}

type onBehalfOf struct {
	signer *ServiceSigner
	owner  string
	kind   tokenKind
}

// tokenKind is what a context marked by OnBehalfOf, AsService or viaService sends.
type tokenKind int

const (
	tokenNone  tokenKind = iota
	tokenOwner           // OnBehalfOf: the service acting for owner, as authorization
	tokenSelf            // AsService: the service as itself, as authorization
	tokenVia             // viaService: the service as itself, beside the caller's token
)

// OnBehalfOf returns ctx whose outgoing calls (through a connection from pkg/grpcclient)
// carry signer's service identity acting for owner, with a fresh short-lived token minted
// at each call — so a job can keep one context for hours. It replaces the forwarding of
// the caller's own token.
func OnBehalfOf(ctx context.Context, signer *ServiceSigner, owner string) context.Context {
	return context.WithValue(ctx, onBehalfOfKey{}, onBehalfOf{signer: signer, owner: owner, kind: tokenOwner})
}

// AsService returns ctx whose outgoing calls (through a connection from pkg/grpcclient)
// carry signer's own identity (IssueSelf), with a fresh token for each call or stream, for
// service-only methods: a stream a service keeps open for days (the revocations it follows)
// reconnects with a token that is still valid.
func AsService(ctx context.Context, signer *ServiceSigner) context.Context {
	return context.WithValue(ctx, onBehalfOfKey{}, onBehalfOf{signer: signer, kind: tokenSelf})
}

// viaService marks ctx for calls made by signer's service for the caller in ctx, whose
// token is narrowed by scopes (Authenticator.SetServiceSigner).
func viaService(ctx context.Context, signer *ServiceSigner) context.Context {
	return context.WithValue(ctx, onBehalfOfKey{}, onBehalfOf{signer: signer, kind: tokenVia})
}

// serviceToken returns the service token ctx asks for, and how it is sent.
func serviceToken(ctx context.Context) (string, tokenKind, error) {
	ob, ok := ctx.Value(onBehalfOfKey{}).(onBehalfOf)
	if !ok || ob.kind == tokenNone {
		return "", tokenNone, nil
	}
	if ob.signer == nil {
		return "", ob.kind, errors.New("auth: a service identity is needed and there is none (THEFOLD_AUTH_SERVICE_KEY_FILE)")
	}
	var tok string
	var err error
	if ob.kind == tokenOwner {
		tok, err = ob.signer.token(ob.owner)
	} else {
		tok, err = ob.signer.selfToken()
	}
	return tok, ob.kind, err
}
