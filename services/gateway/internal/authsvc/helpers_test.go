package authsvc_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/events"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/services/gateway/internal/authsvc"
	"github.com/thefold/thefold/services/gateway/internal/mailer"
	"github.com/thefold/thefold/services/gateway/internal/store"
	"github.com/thefold/thefold/services/gateway/migrations"
)

// adminEmail is the first admin's address in every harness.
const adminEmail = "admin@example.com"

// harness is the gateway's identity services on their own database, behind the real
// server (authentication, scopes and API keys included), reached over loopback gRPC.
type harness struct {
	env      *grpctest.Env
	core     *authsvc.Core
	store    *store.Store
	pool     *pgxpool.Pool
	sink     string
	cfg      authsvc.Config
	auth     gatewayv1.AuthServiceClient
	users    gatewayv1.UserServiceClient
	identity gatewayv1.IdentityServiceClient
	// admin calls as the first admin (user id "admin"), anon without a token.
	admin, anon context.Context
}

// defaultConfig is the production defaults, with a first admin at adminEmail.
func defaultConfig() authsvc.Config {
	return authsvc.Config{
		SigningKeyFile:    "unused-in-tests",
		AccessTTL:         15 * time.Minute,
		RefreshTTL:        720 * time.Hour,
		KeyTokenTTL:       5 * time.Minute,
		CodeTTL:           10 * time.Minute,
		MaxFailures:       5,
		LockoutBase:       time.Minute,
		LockoutMax:        time.Hour,
		AuditRetention:    2160 * time.Hour,
		AdminEmail:        adminEmail,
		MaxWatches:        256,
		WatchesPerService: 8,
		APIKeys:           authsvc.APIKeyPolicy{TTL: 2160 * time.Hour, MaxTTL: 8760 * time.Hour},
		Login: authsvc.LoginLimits{MaxAddressFailures: 50, CodeWindow: 15 * time.Minute,
			CodesPerAddressClient: 20, CodesPerAddress: 30, CodesPerClient: 100, TrustLocalProxy: true},
	}
}

type harnessOptions struct {
	// noFollow leaves the server's verifier without the gateway's revocations.
	noFollow bool
	// mailer replaces the log mailer with its sink.
	mailer mailer.Mailer
}

// newHarness starts the identity services wired as the gateway's main does; tweak changes
// the configuration first. The server's verifier follows the revocations (as every
// service's does) unless opts say otherwise.
func newHarness(t *testing.T, tweak func(*authsvc.Config), opts ...harnessOptions) *harness {
	t.Helper()
	var o harnessOptions
	for _, x := range opts {
		o = x
	}
	cfg := defaultConfig()
	if tweak != nil {
		tweak(&cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("config: %v", err)
	}
	pool, _ := dbtest.NewDatabase(t, "gateway", migrations.FS)
	hub := events.NewHub(pool, events.WithPollInterval(50*time.Millisecond))
	hubCtx, stopHub := context.WithCancel(context.Background())
	hubDone := make(chan struct{})
	go func() { defer close(hubDone); _ = hub.Run(hubCtx) }()
	t.Cleanup(func() { stopHub(); <-hubDone })

	// The services are registered before the server exists, their core set once it does
	// (the core verifies with the server's verifier and signs with its key).
	authSrv, userSrv, identSrv := &authsvc.Server{}, &authsvc.UserServer{}, &authsvc.IdentityServer{}
	env := grpctest.Start(t, func(s *grpc.Server) {
		gatewayv1.RegisterAuthServiceServer(s, authSrv)
		gatewayv1.RegisterUserServiceServer(s, userSrv)
		gatewayv1.RegisterIdentityServiceServer(s, identSrv)
	}, authsvc.PublicMethods...)

	log := slog.New(slog.DiscardHandler)
	sink := filepath.Join(t.TempDir(), "mail.jsonl")
	mail, err := mailer.New(mailer.Config{Kind: "log", From: "TheFold <thefold@localhost>", SinkFile: sink,
		SMTPPort: 587, SMTPTLS: "starttls", SMTPTimeout: 15 * time.Second}, log)
	if err != nil {
		t.Fatal(err)
	}
	if o.mailer != nil {
		mail = o.mailer
	}
	st := store.New(pool)
	core, err := authsvc.New(authsvc.Deps{
		Config: cfg, Store: st, Signer: auth.NewSigner(env.SigningKey), SigningKey: env.SigningKey,
		Verifier: env.Auth.Verifier(), Mailer: mail, Hub: hub, Log: log, MaxLifetime: auth.DefaultMaxLifetime,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := core.EnsureAdmin(t.Context()); err != nil {
		t.Fatal(err)
	}
	authSrv.Core, userSrv.Core, identSrv.Core = core, core, core
	env.Auth.SetKeyExchanger(core.Exchanger())

	h := &harness{
		env: env, core: core, store: st, pool: pool, sink: sink, cfg: cfg,
		auth:     gatewayv1.NewAuthServiceClient(env.Conn),
		users:    gatewayv1.NewUserServiceClient(env.Conn),
		identity: gatewayv1.NewIdentityServiceClient(env.Conn),
		admin:    env.Context(t, authsvc.AdminUserID, auth.RoleAdmin),
		anon:     t.Context(),
	}
	if !o.noFollow {
		h.follow(t)
	}
	return h
}

// follow makes the server's verifier follow the gateway's revocations, as every service's
// does, until the test ends.
func (h *harness) follow(t *testing.T) {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = auth.FollowRevocations(h.asService(t, ctx, "gateway"), h.identity, h.env.Auth.Verifier(), slog.New(slog.DiscardHandler))
	}()
	t.Cleanup(func() { stop(); <-done })
}

// bearer returns a context whose calls carry tok (an access token or an API key).
func bearer(t *testing.T, tok string) context.Context {
	t.Helper()
	return metadata.AppendToOutgoingContext(t.Context(), "authorization", "Bearer "+tok)
}

// createUser creates a member (or role) as the admin.
func (h *harness) createUser(t *testing.T, email string, role gatewayv1.Role) *gatewayv1.User {
	t.Helper()
	resp, err := h.users.CreateUser(h.admin, &gatewayv1.CreateUserRequest{Email: email, Role: role})
	if err != nil {
		t.Fatalf("CreateUser(%s): %v", email, err)
	}
	return resp.GetUser()
}

// codeSubject is a login code mail's subject (the code is in the text only).
const codeSubject = "Your TheFold login code"

var mailedCodePattern = regexp.MustCompile(`\b(\d{6})\b`)

// mailTo returns the login codes mailed to email so far, oldest first.
func (h *harness) mailTo(t *testing.T, email string) []string {
	t.Helper()
	msgs, err := mailer.ReadSink(h.sink)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var codes []string
	for _, m := range msgs {
		if !strings.EqualFold(m.To, email) {
			continue
		}
		c := mailedCodePattern.FindStringSubmatch(m.Text)
		if m.Subject != codeSubject || c == nil {
			t.Fatalf("mail to %s: %q / %q is not a login code", email, m.Subject, m.Text)
		}
		if mailedCodePattern.MatchString(m.Subject) {
			t.Errorf("mail to %s: the subject %q holds a code", email, m.Subject)
		}
		codes = append(codes, c[1])
	}
	return codes
}

// requestCode asks for a login code for email and returns it from the sink.
func (h *harness) requestCode(t *testing.T, email string) string {
	t.Helper()
	before := len(h.mailTo(t, email))
	if _, err := h.auth.RequestLoginCode(h.anon, &gatewayv1.RequestLoginCodeRequest{Email: email}); err != nil {
		t.Fatalf("RequestLoginCode(%s): %v", email, err)
	}
	var got []string
	eventually(t, 5*time.Second, "a login code mailed to "+email, func() bool {
		got = h.mailTo(t, email)
		return len(got) > before
	})
	return got[len(got)-1]
}

// login logs email in with a code from the sink.
func (h *harness) login(t *testing.T, email string) *gatewayv1.VerifyLoginCodeResponse {
	t.Helper()
	code := h.requestCode(t, email)
	resp, err := h.auth.VerifyLoginCode(h.anon, &gatewayv1.VerifyLoginCodeRequest{Email: email, Code: code})
	if err != nil {
		t.Fatalf("VerifyLoginCode(%s): %v", email, err)
	}
	return resp
}

// member creates a member and logs them in: their user and a context calling as them.
func (h *harness) member(t *testing.T, email string) (*gatewayv1.User, *gatewayv1.VerifyLoginCodeResponse, context.Context) {
	t.Helper()
	u := h.createUser(t, email, gatewayv1.Role_ROLE_MEMBER)
	l := h.login(t, email)
	return u, l, bearer(t, l.GetTokens().GetAccessToken())
}

// whoAmI calls WhoAmI with tok.
func (h *harness) whoAmI(t *testing.T, tok string) (*gatewayv1.WhoAmIResponse, error) {
	t.Helper()
	return h.auth.WhoAmI(bearer(t, tok), &gatewayv1.WhoAmIRequest{})
}

// waitRefused waits until tok is refused (Unauthenticated) on WhoAmI: a revocation has
// reached the server's verifier.
func (h *harness) waitRefused(t *testing.T, what, tok string) {
	t.Helper()
	var err error
	eventually(t, 5*time.Second, what+" refused", func() bool {
		_, err = h.whoAmI(t, tok)
		return status.Code(err) == codes.Unauthenticated
	})
}

// principal verifies an access token the core issued, with the server's verifier.
func (h *harness) principal(t *testing.T, tok string) auth.Principal {
	t.Helper()
	p, err := h.env.Auth.Verifier().Verify(tok)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	return p
}

// audit returns the login audit outcomes of an address, oldest first.
func (h *harness) audit(t *testing.T, emailNorm string) []string {
	t.Helper()
	rows, err := h.store.LoginAttempts(t.Context(), emailNorm, 100)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]string, len(rows))
	for i, r := range rows {
		out[len(rows)-1-i] = r.Outcome
	}
	return out
}

// eventually polls cond until it holds, failing the test after d.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waited %s for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// wrongCode is a well-formed code that is not code.
func wrongCode(code string) string {
	n, _ := strconv.Atoi(code)
	return fmt.Sprintf("%06d", (n+1)%1_000_000)
}

// retryDelay returns the RetryInfo detail of a RESOURCE_EXHAUSTED error.
func retryDelay(t *testing.T, err error) time.Duration {
	t.Helper()
	grpctest.WantCode(t, err, codes.ResourceExhausted)
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return ri.GetRetryDelay().AsDuration()
		}
	}
	t.Fatalf("no RetryInfo detail in %v", st.Details())
	return 0
}

// code is the status code of err.
func code(err error) codes.Code { return status.Code(err) }

// emptyRequest and emptyResponse are the messages of method ("/pkg.Service/Method"),
// empty.
func emptyRequest(t *testing.T, method string) *dynamicpb.Message {
	t.Helper()
	return dynamicpb.NewMessage(methodDesc(t, method).Input())
}

func emptyResponse(t *testing.T, method string) *dynamicpb.Message {
	t.Helper()
	return dynamicpb.NewMessage(methodDesc(t, method).Output())
}

func methodDesc(t *testing.T, method string) protoreflect.MethodDescriptor {
	t.Helper()
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(strings.ReplaceAll(strings.TrimPrefix(method, "/"), "/", ".")))
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return d.(protoreflect.MethodDescriptor)
}

// mask is a field mask of paths.
func mask(paths ...string) *fieldmaskpb.FieldMask { return &fieldmaskpb.FieldMask{Paths: paths} }

// statusOf is err's status.
func statusOf(err error) *status.Status {
	st, _ := status.FromError(err)
	return st
}

// watcher is an open WatchRevocations stream.
type watcher struct {
	msgs chan *gatewayv1.WatchRevocationsResponse
	errc chan error
}

// asService returns ctx whose calls are made by service as itself (the only callers of
// WatchRevocations).
func (h *harness) asService(t *testing.T, ctx context.Context, service string) context.Context {
	t.Helper()
	return auth.AsService(ctx, h.env.ServiceSigner(t, service))
}

// watch opens a WatchRevocations stream as the gateway's own follower, closed when the
// test ends.
func (h *harness) watch(t *testing.T, req *gatewayv1.WatchRevocationsRequest) *watcher {
	t.Helper()
	return h.watchAs(t, h.asService(t, context.Background(), "gateway"), req)
}

// watchAs opens a WatchRevocations stream with ctx's identity.
func (h *harness) watchAs(t *testing.T, ctx context.Context, req *gatewayv1.WatchRevocationsRequest) *watcher {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	s, err := h.identity.WatchRevocations(ctx, req)
	if err != nil {
		cancel()
		t.Fatalf("WatchRevocations: %v", err)
	}
	w := &watcher{msgs: make(chan *gatewayv1.WatchRevocationsResponse, 100), errc: make(chan error, 1)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			m, err := s.Recv()
			if err != nil {
				w.errc <- err
				return
			}
			if m.GetId() == 0 {
				continue // heartbeat
			}
			w.msgs <- m
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
	return w
}

// next returns the next revocation, failing the test after 5 s.
func (w *watcher) next(t *testing.T) *gatewayv1.WatchRevocationsResponse {
	t.Helper()
	m, ok := w.within(5 * time.Second)
	if !ok {
		t.Fatal("no revocation within 5s")
	}
	return m
}

// within returns the next revocation if one comes within d.
func (w *watcher) within(d time.Duration) (*gatewayv1.WatchRevocationsResponse, bool) {
	select {
	case m := <-w.msgs:
		return m, true
	case <-time.After(d):
		return nil, false
	}
}

// watchNew opens a WatchRevocations stream of the revocations made from now on. It
// resumes after the newest event rather than asking from_now: the stream then surely
// starts before whatever the test does next.
func (h *harness) watchNew(t *testing.T) *watcher {
	t.Helper()
	after, err := h.store.LatestEventID(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return h.watch(t, &gatewayv1.WatchRevocationsRequest{AfterId: after})
}
