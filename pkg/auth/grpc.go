package auth

import (
	"context"
	"errors"
	"strings"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// Config says where a service finds the keys that verify tokens, and its own service key.
type Config struct {
	PublicKeyFile string `env:"THEFOLD_AUTH_PUBLIC_KEY_FILE"`
	// MaxTokenLifetime bounds exp - iat of an accepted user token.
	MaxTokenLifetime time.Duration `env:"THEFOLD_AUTH_MAX_TOKEN_LIFETIME, default=720h"`
	// ServiceKeysDir holds <service>.pub.pem of each service whose tokens are accepted;
	// empty: service tokens are refused.
	ServiceKeysDir string `env:"THEFOLD_AUTH_SERVICE_KEYS_DIR"`
	// ServiceKeyFile is this service's own private key, for services that act for owners
	// (agent, builder); empty: it has no service identity.
	ServiceKeyFile string `env:"THEFOLD_AUTH_SERVICE_KEY_FILE"`
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
	return errors.Join(errs...)
}

// NewVerifier loads the keys c names and returns their Verifier.
func (c Config) NewVerifier() (*Verifier, error) {
	pub, err := LoadPublicKey(c.PublicKeyFile)
	if err != nil {
		return nil, err
	}
	opts := []Option{WithMaxLifetime(c.MaxTokenLifetime)}
	if c.ServiceKeysDir != "" {
		keys, err := LoadServicePublicKeys(c.ServiceKeysDir)
		if err != nil {
			return nil, err
		}
		opts = append(opts, WithServiceKeys(keys))
	}
	return NewVerifier(pub, opts...), nil
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
// missing principal can never be mistaken for an anonymous owner.
func MustFromContext(ctx context.Context) (Principal, error) {
	p, ok := FromContext(ctx)
	if !ok || p.UserID == "" {
		return Principal{}, status.Error(codes.Unauthenticated, "authentication required")
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

// Authenticator verifies bearer tokens on incoming RPCs.
type Authenticator struct {
	verifier *Verifier
	public   map[string]bool
}

// NewAuthenticator verifies with v; publicMethods (full names, "/pkg.Service/Method") are
// let through without a token (e.g. the gateway's login RPCs).
func NewAuthenticator(v *Verifier, publicMethods ...string) *Authenticator {
	pub := map[string]bool{}
	for _, m := range publicMethods {
		pub[m] = true
	}
	return &Authenticator{verifier: v, public: pub}
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
	p, err := a.verifier.Verify(tok)
	if err != nil {
		if a.isPublic(method) {
			return ctx, nil
		}
		return nil, status.Error(codes.Unauthenticated, ErrInvalidToken.Error())
	}
	return WithPrincipal(ctx, p), nil
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
	md, _ := metadata.FromIncomingContext(ctx)
	for _, v := range md.Get("authorization") {
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
	if md, ok := metadata.FromOutgoingContext(ctx); ok && len(md.Get("authorization")) > 0 {
		return ctx
	}
	if p, ok := FromContext(ctx); ok && p.Token != "" {
		return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+p.Token)
	}
	return ctx
}

// outgoing is OutgoingContext, except that a context marked by OnBehalfOf carries a
// service token instead of whatever authorization it had.
func outgoing(ctx context.Context) (context.Context, error) {
	tok, ok, err := serviceToken(ctx)
	if err != nil {
		return ctx, err
	}
	if !ok {
		return OutgoingContext(ctx), nil
	}
	md, _ := metadata.FromOutgoingContext(ctx)
	md = md.Copy()
	md.Set("authorization", "Bearer "+tok)
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
