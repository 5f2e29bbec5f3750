package service_test

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/db/dbtest"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/ai/internal/registry"
	"github.com/thefold/thefold/services/ai/internal/service"
	"github.com/thefold/thefold/services/ai/internal/store"
	"github.com/thefold/thefold/services/ai/migrations"
)

// regEnv is a ModelRegistryService on its own database (seeded by the migrations), reached
// over loopback gRPC.
type regEnv struct {
	client aiv1.ModelRegistryServiceClient
	admin  context.Context
	user   context.Context
	anon   context.Context
	pool   *pgxpool.Pool
	st     *store.Store
	reg    *registry.Registry
	clk    *regClock
}

// regClock is the registry cache's clock.
type regClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *regClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *regClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// regTestResolver is the DNS of the registry tests: no test depends on the machine's
// resolver. Names not listed do not resolve.
func regTestResolver(_ context.Context, host string) ([]netip.Addr, error) {
	switch host {
	case "localhost":
		return []netip.Addr{netip.MustParseAddr("127.0.0.1"), netip.MustParseAddr("::1")}, nil
	case "metadata.example.test":
		return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
	case "intranet.example.test":
		return []netip.Addr{netip.MustParseAddr("93.184.215.14"), netip.MustParseAddr("10.1.2.3")}, nil
	case "public.example.test":
		return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
	}
	return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
}

// regTestEnv is the environment the registry resolves "env:NAME" key references in.
var regTestEnv = map[string]string{"ANTHROPIC_API_KEY": "sk-ant-test"}

func startRegistry(t *testing.T, opts ...registry.Option) *regEnv {
	t.Helper()
	return startRegistryWith(t, nil, opts...)
}

// startRegistryWith is startRegistry with the server's options (the operator's policy).
func startRegistryWith(t *testing.T, srvOpts []service.RegistryOption, opts ...registry.Option) *regEnv {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "ai", migrations.FS)
	st := store.New(pool)
	clk := &regClock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	opts = append([]registry.Option{
		registry.WithClock(clk.Now),
		registry.WithKeyLookup(func(name string) (string, bool) { v, ok := regTestEnv[name]; return v, ok }),
	}, opts...)
	reg := registry.New(st, opts...)
	srv := service.NewRegistryServer(reg, st, append([]service.RegistryOption{service.WithResolver(regTestResolver)}, srvOpts...)...)
	e := grpctest.Start(t, func(s *grpc.Server) { aiv1.RegisterModelRegistryServiceServer(s, srv) })
	return &regEnv{
		client: aiv1.NewModelRegistryServiceClient(e.Conn),
		admin:  e.Context(t, "root", auth.RoleAdmin),
		user:   e.Context(t, "alice"),
		anon:   t.Context(),
		pool:   pool,
		st:     st,
		reg:    reg,
		clk:    clk,
	}
}

// createProvider creates a provider through the API.
func (e *regEnv) createProvider(t *testing.T, p *aiv1.Provider) *aiv1.Provider {
	t.Helper()
	resp, err := e.client.CreateProvider(e.admin, &aiv1.CreateProviderRequest{Provider: p})
	if err != nil {
		t.Fatalf("CreateProvider(%q): %v", p.GetName(), err)
	}
	return resp.Provider
}

// createModel creates a model through the API.
func (e *regEnv) createModel(t *testing.T, m *aiv1.Model) *aiv1.Model {
	t.Helper()
	resp, err := e.client.CreateModel(e.admin, &aiv1.CreateModelRequest{Model: m})
	if err != nil {
		t.Fatalf("CreateModel(%q): %v", m.GetName(), err)
	}
	return resp.Model
}

// seedModel returns a seeded model by provider and name.
func (e *regEnv) seedModel(t *testing.T, name string) *aiv1.Model {
	t.Helper()
	resp, err := e.client.ListModels(e.admin, &aiv1.ListModelsRequest{Name: name})
	if err != nil || len(resp.GetModels()) != 1 {
		t.Fatalf("seed model %s: %v, %v", name, resp, err)
	}
	return resp.Models[0]
}

func testModel(providerID, name string, tier int32) *aiv1.Model {
	return &aiv1.Model{
		ProviderId: providerID, Name: name, DisplayName: strings.ToUpper(name), Tier: tier,
		InputMicrosPerMtok: 1_000_000, OutputMicrosPerMtok: 4_000_000, ContextWindow: 100_000,
		MaxOutputTokens: 8_000, Tags: []string{"chat", "coding"}, SupportsTools: true, Enabled: true,
	}
}

// regWantCode fails unless err is a status with code whose message contains every part.
func regWantCode(t *testing.T, err error, code codes.Code, parts ...string) {
	t.Helper()
	st, ok := status.FromError(err)
	if !ok || st.Code() != code {
		t.Fatalf("err = %v, want code %v", err, code)
	}
	for _, p := range parts {
		if !strings.Contains(st.Message(), p) {
			t.Errorf("message %q does not contain %q", st.Message(), p)
		}
	}
}

// regWantInvalid fails unless err is InvalidArgument naming field in its message and in its
// BadRequest detail.
func regWantInvalid(t *testing.T, err error, field string) {
	t.Helper()
	regWantCode(t, err, codes.InvalidArgument, field+":")
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if br, ok := d.(*errdetails.BadRequest); ok {
			for _, v := range br.GetFieldViolations() {
				if v.GetField() == field {
					return
				}
			}
		}
	}
	t.Errorf("no BadRequest field violation for %q in %v", field, st.Details())
}

const regMissingID = "00000000-0000-4000-8000-000000000000"
