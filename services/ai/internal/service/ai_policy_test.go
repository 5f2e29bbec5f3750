package service

import (
	"context"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/fieldmaskpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/errs"
	"github.com/thefold/thefold/pkg/fakellm"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/ai/internal/engine"
)

var policyPlan = map[string]any{"summary": "add handler", "steps": []map[string]any{
	{"id": "s1", "action": "create", "path": "health.go", "description": "handler", "depends_on": []string{}},
}}

// liarResolver answers every name with a public address: what a rebinding name answers at
// registration before it answers 127.0.0.1 to the connection.
func liarResolver(context.Context, string) ([]netip.Addr, error) {
	return []netip.Addr{netip.MustParseAddr("93.184.215.14")}, nil
}

// registryProvider creates, as the admin over the API, an Anthropic-kind provider at
// baseURL with one model, and returns the model's name.
func registryProvider(t *testing.T, e *aiEnv, name, baseURL string) string {
	t.Helper()
	p, err := e.reg.CreateProvider(e.admin, &aiv1.CreateProviderRequest{Provider: &aiv1.Provider{
		Name: name, Kind: aiv1.ProviderKind_PROVIDER_KIND_ANTHROPIC, BaseUrl: baseURL, ApiKeyRef: "env:ANTHROPIC_API_KEY", Enabled: true}})
	if err != nil {
		t.Fatalf("CreateProvider(%s): %v", baseURL, err)
	}
	model := "claude-" + name
	if _, err := e.reg.CreateModel(e.admin, &aiv1.CreateModelRequest{Model: &aiv1.Model{ProviderId: p.Provider.Id, Name: model,
		Tier: 2, MaxOutputTokens: 4000, ContextWindow: 100000, Tags: []string{"coding"}, Enabled: true}}); err != nil {
		t.Fatalf("CreateModel: %v", err)
	}
	return model
}

// A base URL whose name passed registration but resolves to loopback when the engine
// connects (DNS rebinding; here "localhost", which the registration's resolver called
// public) is refused at dial time: FAILED_PRECONDITION naming base_url, and nothing reaches
// the server. Allowed by the operator, the same provider answers.
func TestBaseURLRefusedAtDialTime(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		allow []string
		ok    bool
	}{
		{"default policy", nil, false},
		{"loopback allowed by prefix", []string{"127.0.0.0/8", "::1"}, true},
		{"localhost allowed by name", []string{"localhost"}, true},
		{"all allowed", []string{"true"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newAIEnv(t, scriptFor("anthropic", answer(t, policyPlan)), aiEnvOptions{
				env:     map[string]string{"ANTHROPIC_API_KEY": "sk-ant-test"},
				regOpts: []RegistryOption{WithResolver(liarResolver)},
				cfg:     func(c *engine.Config) { c.AllowPrivateBaseURLs = tc.allow },
			})
			u, _ := url.Parse(e.url)
			model := registryProvider(t, e, "rebind", "http://localhost:"+u.Port())
			_, err := e.ai.PlanTask(e.alice, &aiv1.PlanTaskRequest{Task: testTask, Model: &aiv1.ModelChoice{Model: model}})
			if tc.ok {
				if err != nil {
					t.Fatalf("PlanTask through an allowed base URL: %v", err)
				}
				return
			}
			grpctest.WantCode(t, err, codes.FailedPrecondition, "rebind", "base_url", "loopback", "THEFOLD_AI_ALLOW_PRIVATE_BASE_URLS")
			if n := len(e.fake.Requests()); n != 0 {
				t.Errorf("%d requests reached the loopback server", n)
			}
		})
	}
}

// A literal private address in a registry row (one written before this check, or by hand)
// is refused when the client is built, before any connection.
func TestBaseURLLiteralRefusedAtCall(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, scriptFor("anthropic", answer(t, policyPlan)), aiEnvOptions{env: map[string]string{"ANTHROPIC_API_KEY": "sk-ant-test"}})
	p, err := e.st.CreateProvider(t.Context(), &aiv1.Provider{Name: "old", Kind: aiv1.ProviderKind_PROVIDER_KIND_ANTHROPIC,
		BaseUrl: e.url, ApiKeyRef: "env:ANTHROPIC_API_KEY", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.CreateModel(t.Context(), &aiv1.Model{ProviderId: p.Id, Name: "claude-old", Tier: 2, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	_, err = e.ai.PlanTask(e.alice, &aiv1.PlanTaskRequest{Task: testTask, Model: &aiv1.ModelChoice{Model: "claude-old"}})
	grpctest.WantCode(t, err, codes.FailedPrecondition, "old", "127.0.0.1", "loopback")
	if n := len(e.fake.Requests()); n != 0 {
		t.Errorf("%d requests reached the loopback server", n)
	}
}

// The operator's THEFOLD_AI_BASE_URL is trusted as it is: fakellm on 127.0.0.1 answers
// (the e2e tests and the demo depend on it).
func TestOperatorBaseURLTrusted(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, scriptFor("anthropic", answer(t, policyPlan)), aiEnvOptions{provider: "anthropic"})
	if _, err := e.ai.PlanTask(e.alice, &aiv1.PlanTaskRequest{Task: testTask}); err != nil {
		t.Fatalf("PlanTask through THEFOLD_AI_BASE_URL on loopback: %v", err)
	}
}

// A key reference that got into the registry without the API's check (an older version, a
// hand-edited row) still cannot read a variable the operator does not allow: it resolves to
// nothing, the provider shows no key, and a call says the key is missing — the variable's
// value is never sent or shown.
func TestKeyRefRefusedAtResolveTime(t *testing.T) {
	t.Parallel()
	const secret = "postgres://thefold:hunter2@db/thefold"
	e := newAIEnv(t, scriptFor("anthropic", answer(t, policyPlan)), aiEnvOptions{
		env: map[string]string{"THEFOLD_DATABASE_URL": secret, "ANTHROPIC_API_KEY": "sk-ant-test"},
		cfg: func(c *engine.Config) { c.AllowPrivateBaseURLs = []string{"127.0.0.1"} },
	})
	p, err := e.st.CreateProvider(t.Context(), &aiv1.Provider{Name: "exfil", Kind: aiv1.ProviderKind_PROVIDER_KIND_ANTHROPIC,
		BaseUrl: e.url, ApiKeyRef: "env:THEFOLD_DATABASE_URL", Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.st.CreateModel(t.Context(), &aiv1.Model{ProviderId: p.Id, Name: "claude-exfil", Tier: 2, Enabled: true}); err != nil {
		t.Fatal(err)
	}
	got, err := e.reg.GetProvider(e.admin, &aiv1.GetProviderRequest{Id: p.Id})
	if err != nil {
		t.Fatal(err)
	}
	if got.Provider.ApiKeyConfigured {
		t.Error("env:THEFOLD_DATABASE_URL counts as a configured key")
	}
	_, err = e.ai.PlanTask(e.alice, &aiv1.PlanTaskRequest{Task: testTask, Model: &aiv1.ModelChoice{Model: "claude-exfil"}})
	if err == nil {
		t.Fatal("a provider keyed by env:THEFOLD_DATABASE_URL was called")
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("the error shows the variable's value: %v", err)
	}
	for _, r := range e.fake.Requests() {
		if strings.Contains(string(r.Body), "hunter2") {
			t.Fatal("the secret reached the provider")
		}
	}
	if n := len(e.fake.Requests()); n != 0 {
		t.Errorf("%d requests sent without a key", n)
	}
}

// spend records a ledger entry of cost for userID at at.
func spend(t *testing.T, e *aiEnv, userID string, cost int64, at time.Time) {
	t.Helper()
	if _, err := e.st.RecordUsage(t.Context(), &aiv1.UsageRecord{UserId: userID, Caller: "user", Rpc: "PlanTask",
		CreateTime: timestamppb.New(at), Usage: &typev1.Usage{Model: "claude-sonnet-4-5", Provider: "anthropic", CostMicros: cost, Calls: 1},
		Outcome: aiv1.CallOutcome_CALL_OUTCOME_OK}); err != nil {
		t.Fatal(err)
	}
}

// fixedOwners is the gateway's answer to "is this user an admin" for the service-token path.
type fixedOwners map[string]bool

func (o fixedOwners) IsAdmin(_ context.Context, id string) (bool, error) { return o[id], nil }

// A member who has spent the day's limit is refused before any model is called:
// RESOURCE_EXHAUSTED with a RetryInfo until the next UTC midnight and the reason the agent
// reads; yesterday's spending does not count; an admin is exempt by default (also when the
// agent calls on their behalf), and not when the operator says so.
func TestDailySpendLimit(t *testing.T) {
	t.Parallel()
	const limit = 1_000_000 // $1
	now := time.Now().UTC()
	start := func(t *testing.T, exempt bool) *aiEnv {
		rs := make([]fakellm.Response, 10)
		for i := range rs {
			rs[i] = answer(t, policyPlan)
		}
		return newAIEnv(t, scriptFor("anthropic", rs...), aiEnvOptions{provider: "anthropic",
			cfg: func(c *engine.Config) {
				c.DailySpendLimitMicros, c.SpendLimitExemptAdmins = limit, exempt
			},
			engOpts: []engine.Option{engine.WithOwners(fixedOwners{"root": true})},
		})
	}
	plan := func(ctx context.Context, e *aiEnv) error {
		_, err := e.ai.PlanTask(ctx, &aiv1.PlanTaskRequest{Task: testTask})
		return err
	}

	t.Run("member over the limit", func(t *testing.T) {
		t.Parallel()
		e := start(t, true)
		spend(t, e, "alice", limit-1, now.Add(-24*time.Hour)) // yesterday: does not count
		if err := plan(e.alice, e); err != nil {
			t.Fatalf("under the limit: %v", err)
		}
		spend(t, e, "alice", limit, now)
		before := len(e.fake.Requests())
		for name, ctx := range map[string]context.Context{"own token": e.alice, "agent for her": e.grpc.ServiceContext(t, "agent", "alice")} {
			err := plan(ctx, e)
			grpctest.WantCode(t, err, codes.ResourceExhausted, "daily AI spend limit", "$1.00")
			d, ok := errs.RetryAfter(err)
			if next := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, time.UTC); !ok || d <= 0 || d > time.Until(next)+time.Minute {
				t.Errorf("%s: RetryInfo %v (%v), want until %s", name, d, ok, next)
			}
			var reason string
			for _, det := range status.Convert(err).Details() {
				if info, ok := det.(*errdetails.ErrorInfo); ok {
					reason = info.GetReason()
				}
			}
			if reason != engine.ReasonSpendLimit {
				t.Errorf("%s: ErrorInfo reason %q, want %s", name, reason, engine.ReasonSpendLimit)
			}
		}
		if n := len(e.fake.Requests()); n != before {
			t.Errorf("%d model calls made over the limit", n-before)
		}
		// Another member is not affected by alice's spending.
		if err := plan(e.grpc.Context(t, "bob"), e); err != nil {
			t.Errorf("bob: %v", err)
		}
		// The local embedder costs nothing: embeddings (memory recall) keep working.
		if _, err := e.ai.Embed(e.alice, &aiv1.EmbedRequest{Texts: []string{"x"}}); err != nil {
			t.Errorf("local Embed over the limit: %v", err)
		}
	})

	t.Run("admins exempt by default", func(t *testing.T) {
		t.Parallel()
		e := start(t, true)
		spend(t, e, "root", 10*limit, now)
		if err := plan(e.admin, e); err != nil {
			t.Errorf("admin's own token: %v", err)
		}
		if err := plan(e.grpc.ServiceContext(t, "agent", "root"), e); err != nil {
			t.Errorf("the agent for an admin: %v", err)
		}
	})

	t.Run("admins not exempt", func(t *testing.T) {
		t.Parallel()
		e := start(t, false)
		spend(t, e, "root", limit, now)
		grpctest.WantCode(t, plan(e.admin, e), codes.ResourceExhausted, "daily AI spend limit")
	})
}

// The registration checks reach the engine's environment too: a refused base_url never
// becomes a provider.
func TestRegistryRefusesPrivateBaseURL(t *testing.T) {
	t.Parallel()
	e := newAIEnv(t, scriptFor("anthropic"), aiEnvOptions{env: map[string]string{"ANTHROPIC_API_KEY": "k"},
		regOpts: []RegistryOption{WithResolver(func(_ context.Context, h string) ([]netip.Addr, error) {
			return nil, &net.DNSError{Err: "no such host", Name: h, IsNotFound: true}
		})}})
	_, err := e.reg.CreateProvider(e.admin, &aiv1.CreateProviderRequest{Provider: &aiv1.Provider{
		Name: "x", Kind: aiv1.ProviderKind_PROVIDER_KIND_ANTHROPIC, BaseUrl: e.url, Enabled: true}})
	grpctest.WantInvalid(t, err, "provider.base_url")
	resp, err := e.reg.CreateProvider(e.admin, &aiv1.CreateProviderRequest{Provider: &aiv1.Provider{
		Name: "y", Kind: aiv1.ProviderKind_PROVIDER_KIND_ANTHROPIC, BaseUrl: "https://llm.example.test", Enabled: true}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = e.reg.UpdateProvider(e.admin, &aiv1.UpdateProviderRequest{Id: resp.Provider.Id,
		UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"base_url"}}, Provider: &aiv1.Provider{BaseUrl: "http://169.254.169.254/latest"}})
	grpctest.WantInvalid(t, err, "provider.base_url")
}
