// Package grpctest runs a service's handlers behind the real server (the full interceptor
// chain, authentication included) on a loopback listener, for tests that go through a real
// gRPC connection.
package grpctest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/grpcclient"
	"github.com/thefold/thefold/pkg/platform"
	"github.com/thefold/thefold/pkg/server"
)

// Env is a running test server.
type Env struct {
	// Conn is an unauthenticated client connection; use Context to call as a user.
	Conn   *grpc.ClientConn
	Signer *auth.Signer
	// SigningKey is Signer's key, for tests that craft tokens Signer refuses to issue.
	SigningKey ed25519.PrivateKey
	// Auth is the server's authenticator: its Verifier is the one every call is checked
	// with (a test applies revocations to it), and a test may give it a key exchanger.
	Auth   *auth.Authenticator
	Server *server.Server
	// serviceKeys are the service identities the server accepts, one per service.
	serviceKeys map[string]ed25519.PrivateKey
	stop        func()
}

// Stop shuts the server down gracefully (it also stops when the test ends).
func (e *Env) Stop() { e.stop() }

// Start runs a server whose services register registers, until the test ends.
func Start(tb testing.TB, register func(s *grpc.Server), publicMethods ...string) *Env {
	tb.Helper()
	return start(tb, server.Config{}, register, publicMethods)
}

// StartConfig is Start with the server configured by cfg (its limits, say); the addresses
// are the test's own (a loopback listener; AdminAddr as cfg sets it).
func StartConfig(tb testing.TB, cfg server.Config, register func(s *grpc.Server), publicMethods ...string) *Env {
	tb.Helper()
	return start(tb, cfg, register, publicMethods)
}

// StartWithAdmin is Start with the admin HTTP port on a free loopback port.
func StartWithAdmin(tb testing.TB, register func(s *grpc.Server), publicMethods ...string) *Env {
	tb.Helper()
	return start(tb, server.Config{AdminAddr: "127.0.0.1:0"}, register, publicMethods)
}

func start(tb testing.TB, cfg server.Config, register func(s *grpc.Server), publicMethods []string) *Env {
	tb.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	// Every service has a service identity here, so a test can call as any of them.
	servicePriv := map[string]ed25519.PrivateKey{}
	servicePub := map[string]ed25519.PublicKey{}
	for _, name := range platform.ServiceNames {
		if servicePub[name], servicePriv[name], err = ed25519.GenerateKey(rand.Reader); err != nil {
			tb.Fatal(err)
		}
	}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatal(err)
	}
	if cfg.ShutdownTimeout == 0 {
		cfg.ShutdownTimeout = 5 * time.Second
	}
	authn := auth.NewAuthenticator(auth.NewVerifier(pub, auth.WithServiceKeys(servicePub)), publicMethods...)
	srv, err := server.New(server.Options{
		Name:     "test",
		Config:   cfg,
		Logger:   slog.New(slog.NewJSONHandler(io.Discard, nil)),
		Auth:     authn,
		Listener: lis,
	})
	if err != nil {
		tb.Fatal(err)
	}
	register(srv.GRPC())
	if err := srv.Listen(); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Run(ctx) }()
	conn, err := grpcclient.Dial(lis.Addr().String(), grpcclient.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); <-done }) }
	tb.Cleanup(func() {
		_ = conn.Close()
		stop()
	})
	return &Env{Conn: conn, Signer: auth.NewSigner(priv), SigningKey: priv, Auth: authn, Server: srv, serviceKeys: servicePriv, stop: stop}
}

// Context returns a context whose calls are made as userID with roles.
func (e *Env) Context(tb testing.TB, userID string, roles ...string) context.Context {
	tb.Helper()
	if len(roles) == 0 {
		roles = []string{auth.RoleUser}
	}
	tok, _, err := e.Signer.Issue(userID, roles, time.Hour)
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+tok)
}

// ServiceSigner returns the signer of service's identity (agent, builder, …), which the
// server accepts; opts as for auth.NewServiceSigner (e.g. a clock in the past).
func (e *Env) ServiceSigner(tb testing.TB, service string, opts ...auth.Option) *auth.ServiceSigner {
	tb.Helper()
	s, err := auth.NewServiceSigner(service, e.serviceKeys[service], opts...)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// ServiceContext returns a context whose calls are made by service on behalf of owner, as
// a long job does after its owner's token has expired.
func (e *Env) ServiceContext(tb testing.TB, service, owner string) context.Context {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	tb.Cleanup(cancel)
	return auth.OnBehalfOf(ctx, e.ServiceSigner(tb, service), owner)
}

// handedOut holds every address FreeAddr returned in this test binary.
var handedOut sync.Map

// FreeAddr returns a loopback address that was free a moment ago, for a test
// that must give a server its address before it starts. No address is
// returned twice in one test binary: the kernel may hand a port that was just
// closed to the next bind(0), and parallel tests would then race for it.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			tb.Fatal(err)
		}
		addr := l.Addr().String()
		_ = l.Close()
		if _, taken := handedOut.LoadOrStore(addr, true); !taken {
			return addr
		}
	}
}

// WantCode fails the test unless err is a status with code whose message contains every
// one of parts.
func WantCode(tb testing.TB, err error, code codes.Code, parts ...string) {
	tb.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != code {
		tb.Fatalf("err = %v, want code %v", err, code)
	}
	for _, p := range parts {
		if !strings.Contains(st.Message(), p) {
			tb.Errorf("message %q does not contain %q", st.Message(), p)
		}
	}
}

// WantInvalid fails the test unless err is InvalidArgument naming field in its message
// ("field: …") and in its BadRequest detail.
func WantInvalid(tb testing.TB, err error, field string) {
	tb.Helper()
	WantCode(tb, err, codes.InvalidArgument, field+":")
	st, _ := status.FromError(err)
	for _, v := range errs.FieldViolations(st) {
		if v.GetField() == field {
			return
		}
	}
	tb.Errorf("no BadRequest field violation for %q in %v", field, st.Details())
}
