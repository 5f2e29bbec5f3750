package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Config says where a service finds the keys that verify tokens, and its own service key.
type Config struct {
	// PublicKeyFile holds the public keys (PEM) that verify user tokens: the gateway's
	// signing key and, during a rotation, its predecessor.
	PublicKeyFile string `env:"THEFOLD_AUTH_PUBLIC_KEY_FILE"`
	// MaxTokenLifetime bounds exp - iat of an accepted user token.
	MaxTokenLifetime time.Duration `env:"THEFOLD_AUTH_MAX_TOKEN_LIFETIME, default=720h"`
	// ServiceKeysDir holds <service>.pub.pem of each service whose tokens are accepted;
	// empty: service tokens are refused.
	ServiceKeysDir string `env:"THEFOLD_AUTH_SERVICE_KEYS_DIR"`
	// ServiceKeyFile is this service's own private key, for acting for owners (a job's,
	// an API key's); empty: it has no service identity.
	ServiceKeyFile string `env:"THEFOLD_AUTH_SERVICE_KEY_FILE"`
	// OnBehalfOfServices are the services whose tokens on behalf of an owner are accepted
	// (WithOnBehalfOfServices); every other service is accepted only as itself, by
	// service-only methods. Empty: DefaultOnBehalfOfServices.
	OnBehalfOfServices []string `env:"THEFOLD_AUTH_ON_BEHALF_OF_SERVICES, default=agent,builder"`
	// FollowRevocations makes the service follow the gateway's revocations (and re-read
	// PublicKeyFile when a key rotation changes it). Off only for a service tested alone.
	FollowRevocations bool `env:"THEFOLD_AUTH_FOLLOW_REVOCATIONS, default=true"`
}

// Validate reports a missing key file setting.
func (c *Config) Validate() error {
	var errs []error
	if c.PublicKeyFile == "" {
		errs = append(errs, errors.New("THEFOLD_AUTH_PUBLIC_KEY_FILE: required (thefold up creates the key pair under its data directory)"))
	}
	if c.MaxTokenLifetime <= 0 {
		errs = append(errs, errors.New("THEFOLD_AUTH_MAX_TOKEN_LIFETIME: must be positive"))
	}
	for _, s := range c.OnBehalfOfServices {
		if !validServiceName.MatchString(s) {
			errs = append(errs, fmt.Errorf("THEFOLD_AUTH_ON_BEHALF_OF_SERVICES: %q is not a service name", s))
		}
	}
	return errors.Join(errs...)
}

// NewVerifier loads the keys c names and returns their Verifier.
func (c Config) NewVerifier() (*Verifier, error) {
	keys, err := LoadVerifyKeys(c.PublicKeyFile)
	if err != nil {
		return nil, err
	}
	opts := []Option{WithMaxLifetime(c.MaxTokenLifetime)}
	if len(c.OnBehalfOfServices) > 0 { // none named: the default
		opts = append(opts, WithOnBehalfOfServices(c.OnBehalfOfServices...))
	}
	if c.ServiceKeysDir != "" {
		keys, err := LoadServicePublicKeys(c.ServiceKeysDir)
		if err != nil {
			return nil, err
		}
		opts = append(opts, WithServiceKeys(keys))
	}
	return NewVerifierKeys(keys, opts...), nil
}

// NewServiceSigner returns service's signer from ServiceKeyFile, or nil when the service
// has no service identity.
func (c Config) NewServiceSigner(service string) (*ServiceSigner, error) {
	if c.ServiceKeyFile == "" {
		return nil, nil
	}
	key, err := LoadPrivateKey(c.ServiceKeyFile)
	if err != nil {
		return nil, err
	}
	return NewServiceSigner(service, key)
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the authenticated caller.
func FromContext(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// MustFromContext returns the caller or an Unauthenticated error; handlers use it so a
// missing principal can never be mistaken for an anonymous owner. A service speaking for
// itself (no owner) is refused too: owner-scoped methods need a person, or a service
// acting for one.
func MustFromContext(ctx context.Context) (Principal, error) {
	p, ok := FromContext(ctx)
	if !ok {
		return Principal{}, status.Error(codes.Unauthenticated, "authentication required")
	}
	if p.UserID == "" {
		if p.Service != "" {
			return Principal{}, status.Errorf(codes.PermissionDenied, "service %s: this method acts for an owner; a service's own identity owns nothing", p.Service)
		}
		return Principal{}, status.Error(codes.Unauthenticated, "authentication required")
	}
	return p, nil
}

// RequireService returns the caller when it is a service speaking for itself (a token
// from ServiceSigner.IssueSelf): service-only methods, such as the gateway's revocation
// stream, use it. No token is Unauthenticated; a person's token, an API key's, or a
// service acting for an owner is PermissionDenied.
func RequireService(ctx context.Context) (Principal, error) {
	p, ok := FromContext(ctx)
	switch {
	case !ok:
		return Principal{}, status.Error(codes.Unauthenticated, "a service token is required")
	case p.Service == "" || p.UserID != "":
		return Principal{}, status.Error(codes.PermissionDenied, "only a service, with its own identity, may call this method")
	}
	return p, nil
}

// RequireRole returns PermissionDenied unless the caller has role.
func RequireRole(ctx context.Context, role string) (Principal, error) {
	p, err := MustFromContext(ctx)
	if err != nil {
		return p, err
	}
	if !p.HasRole(role) {
		return p, status.Errorf(codes.PermissionDenied, "requires the %s role", role)
	}
	return p, nil
}

// alwaysPublic are infrastructure methods reachable without a token: health checks (probes
// and the launcher) and reflection (grpcurl discovers the schema; every RPC it then calls
// is still verified).
var alwaysPublic = []string{
	"/grpc.health.v1.Health/",
	"/grpc.reflection.v1.ServerReflection/",
	"/grpc.reflection.v1alpha.ServerReflection/",
}

// APIKeyPrefix starts every API key secret, so a verifier tells one from a JWT.
const APIKeyPrefix = "tfk_"

// IsAPIKey reports whether a bearer credential is an API key.
func IsAPIKey(tok string) bool { return strings.HasPrefix(tok, APIKeyPrefix) }

// KeyExchanger checks an API key and returns an access token acting for it (the gateway's
// IdentityService.ExchangeAPIKey). A key that does not check is an Unauthenticated status.
type KeyExchanger func(ctx context.Context, apiKey string) (token string, err error)

// Authenticator verifies bearer tokens on incoming RPCs: access tokens with the Verifier,
// API keys by exchanging them for an access token (cached while it is valid), and the
// scopes an API key's token carries against the method called.
type Authenticator struct {
	verifier *Verifier
	public   map[string]bool

	mu       sync.Mutex
	exchange KeyExchanger
	keyCache map[[32]byte]cachedKeyToken
	signer   *ServiceSigner
}

type cachedKeyToken struct {
	token string
	until time.Time
}

const keyCacheSize = 1024

// NewAuthenticator verifies with v; publicMethods (full names, "/pkg.Service/Method") are
// let through without a token (e.g. the gateway's login RPCs).
func NewAuthenticator(v *Verifier, publicMethods ...string) *Authenticator {
	pub := map[string]bool{}
	for _, m := range publicMethods {
		pub[m] = true
	}
	return &Authenticator{verifier: v, public: pub, keyCache: map[[32]byte]cachedKeyToken{}}
}

// SetKeyExchanger makes a accept API keys, checked by x.
func (a *Authenticator) SetKeyExchanger(x KeyExchanger) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.exchange = x
}

// SetServiceSigner gives a the service's own identity. A caller whose token is narrowed by
// scopes (an API key's) is checked against the method it called here; what the service
// then calls for it belongs to that call, so those calls carry the caller's own token and,
// beside it (ViaMetadataKey), the service's own token (IssueSelf): the callee lets them
// past the key's scopes, which say what the key may call directly, not what serving that
// call takes — a key with memory:write stores a memory although the memory service asks
// the ai service for its embedding. The service never speaks for an owner on its own
// authority (only the agent and builder may: WithOnBehalfOfServices), so a service key
// cannot reach anyone who is not calling it. Without a signer the narrowed token is
// passed on as it is.
func (a *Authenticator) SetServiceSigner(s *ServiceSigner) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.signer = s
}

// Verifier is the verifier a uses.
func (a *Authenticator) Verifier() *Verifier { return a.verifier }

// keyToken returns an access token for the API key secret, from the cache while it has
// more than a minute left. A revoked key's cached token is refused by the Verifier.
func (a *Authenticator) keyToken(ctx context.Context, secret string) (string, error) {
	h := sha256.Sum256([]byte(secret))
	now := a.verifier.o.now()
	a.mu.Lock()
	x := a.exchange
	hit, ok := a.keyCache[h]
	a.mu.Unlock()
	if ok && now.Before(hit.until) {
		if _, err := a.verifier.Verify(hit.token); err == nil {
			return hit.token, nil
		}
		// Refused since it was cached (its user's tokens were cut by a role change, say):
		// the key itself may still be good, so exchange it again.
	}
	if x == nil {
		return "", status.Error(codes.Unauthenticated, "API keys are not accepted here")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tok, err := x(ctx, secret)
	if err != nil {
		if status.Code(err) == codes.Unauthenticated {
			return "", status.Error(codes.Unauthenticated, ErrInvalidToken.Error())
		}
		return "", status.Errorf(codes.Unavailable, "the API key could not be checked: %v", status.Convert(err).Message())
	}
	p, err := a.verifier.Verify(tok)
	if err != nil {
		return "", status.Error(codes.Unauthenticated, ErrInvalidToken.Error())
	}
	a.mu.Lock()
	if len(a.keyCache) >= keyCacheSize {
		clear(a.keyCache)
	}
	a.keyCache[h] = cachedKeyToken{token: tok, until: p.ExpiresAt.Add(-time.Minute)}
	a.mu.Unlock()
	return tok, nil
}

func (a *Authenticator) isPublic(method string) bool {
	if a.public[method] {
		return true
	}
	for _, p := range alwaysPublic {
		if strings.HasPrefix(method, p) {
			return true
		}
	}
	return false
}

// Authenticate returns ctx with the caller's principal, or Unauthenticated.
func (a *Authenticator) Authenticate(ctx context.Context, method string) (context.Context, error) {
	tok, hasToken := bearerFromMetadata(ctx)
	if !hasToken {
		if a.isPublic(method) {
			return ctx, nil
		}
		return nil, status.Error(codes.Unauthenticated, "missing bearer token (authorization metadata)")
	}
	if IsAPIKey(tok) {
		var err error
		if tok, err = a.keyToken(ctx, tok); err != nil {
			if a.isPublic(method) {
				return ctx, nil
			}
			return nil, err
		}
	}
	p, err := a.verifier.Verify(tok)
	if err != nil {
		if a.isPublic(method) {
			return ctx, nil
		}
		return nil, status.Error(codes.Unauthenticated, ErrInvalidToken.Error())
	}
	if via, ok := viaFromMetadata(ctx); ok && len(p.Scopes) > 0 && p.Service == "" {
		// A service serving a call the key's scopes allowed (see SetServiceSigner): it acts
		// for the key's owner with the owner's ordinary rights, as long as the key's own
		// token is valid, so it cannot act for anyone who is not calling it.
		sp, err := a.verifier.Verify(via)
		if err != nil || sp.Service == "" || sp.UserID != "" {
			return nil, status.Error(codes.Unauthenticated, "invalid service token ("+ViaMetadataKey+")")
		}
		p.Service, p.Roles = sp.Service, []string{RoleUser}
	} else if !ScopesAllow(p.Scopes, method) {
		return nil, status.Errorf(codes.PermissionDenied, "the API key's scopes (%s) do not allow %s", strings.Join(p.Scopes, ", "), method)
	}
	ctx = WithPrincipal(ctx, p)
	if len(p.Scopes) > 0 {
		a.mu.Lock()
		signer := a.signer
		a.mu.Unlock()
		if signer != nil {
			ctx = viaService(ctx, signer) // see SetServiceSigner
		}
	}
	return ctx, nil
}

// ViaMetadataKey carries the token of the service that makes a call for a caller whose
// own token (in authorization) is narrowed by scopes (Authenticator.SetServiceSigner).
const ViaMetadataKey = "x-thefold-service"

func viaFromMetadata(ctx context.Context) (string, bool) {
	// The one key's values, not FromIncomingContext's copy of all the metadata (a map
	// and a slice per key, on every call).
	v := metadata.ValueFromIncomingContext(ctx, ViaMetadataKey)
	if len(v) != 1 || v[0] == "" {
		return "", false
	}
	return v[0], true
}

// UnaryServerInterceptor authenticates unary RPCs.
func (a *Authenticator) UnaryServerInterceptor() grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		ctx, err := a.Authenticate(ctx, info.FullMethod)
		if err != nil {
			return nil, err
		}
		return h(ctx, req)
	}
}

// StreamServerInterceptor authenticates streaming RPCs.
func (a *Authenticator) StreamServerInterceptor() grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		ctx, err := a.Authenticate(ss.Context(), info.FullMethod)
		if err != nil {
			return err
		}
		return h(srv, &ctxStream{ServerStream: ss, ctx: ctx})
	}
}

type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }

func bearerFromMetadata(ctx context.Context) (string, bool) {
	for _, v := range metadata.ValueFromIncomingContext(ctx, "authorization") {
		scheme, tok, ok := strings.Cut(v, " ")
		if ok && strings.EqualFold(scheme, "bearer") && strings.TrimSpace(tok) != "" {
			return strings.TrimSpace(tok), true
		}
	}
	return "", false
}

// OutgoingContext returns ctx with the caller's token attached for a call to another
// service, so the callee sees the same principal. A context that already carries outgoing
// authorization metadata is left as it is.
func OutgoingContext(ctx context.Context) context.Context {
	// ValueFromOutgoingContext, not FromOutgoingContext: the latter copies all the
	// outgoing metadata (a map and a slice per key) to answer this one question.
	if len(metadata.ValueFromOutgoingContext(ctx, "authorization")) > 0 {
		return ctx
	}
	if p, ok := FromContext(ctx); ok && p.Token != "" {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+p.Token)
	}
	return ctx
}

// outgoing is OutgoingContext, except that a context marked by OnBehalfOf or AsService
// carries a service token instead of whatever authorization it had, and one marked by
// viaService the service's own token beside the caller's.
func outgoing(ctx context.Context) (context.Context, error) {
	tok, kind, err := serviceToken(ctx)
	if err != nil {
		return ctx, err
	}
	key := "authorization"
	switch kind {
	case tokenNone:
		return OutgoingContext(ctx), nil
	case tokenVia:
		ctx, key = OutgoingContext(ctx), ViaMetadataKey
	default:
		tok = "Bearer " + tok
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	md.Set(key, tok)
	return metadata.NewOutgoingContext(ctx, md), nil
}

// UnaryClientInterceptor forwards the caller's identity (or the service identity set by
// OnBehalfOf) on outgoing unary calls.
func UnaryClientInterceptor() grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		ctx, err := outgoing(ctx)
		if err != nil {
			return err
		}
		return invoker(ctx, method, req, reply, cc, opts...)
	}
}

// StreamClientInterceptor forwards the caller's identity (or the service identity set by
// OnBehalfOf) on outgoing streams.
func StreamClientInterceptor() grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		ctx, err := outgoing(ctx)
		if err != nil {
			return nil, err
		}
		return streamer(ctx, desc, cc, method, opts...)
	}
}
