package service

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/fakellm"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	"github.com/thefold/thefold/pkg/grpctest"

	"github.com/thefold/thefold/services/ai/internal/engine"
	"github.com/thefold/thefold/services/ai/internal/registry"
	"github.com/thefold/thefold/services/ai/internal/store"
	"github.com/thefold/thefold/services/ai/migrations"
)

// aiEnv is the ai service as it runs: a real database with the seeded registry, the real
// engine and provider SDK clients, served over real gRPC, talking to a fakellm.
type aiEnv struct {
	fake  *fakellm.Server
	url   string
	ai    aiv1.AIServiceClient
	reg   aiv1.ModelRegistryServiceClient
	st    *store.Store
	alice context.Context
	admin context.Context
	grpc  *grpctest.Env

	mu     sync.Mutex
	sleeps []time.Duration
}

// aiEnvOptions configure newAIEnv.
type aiEnvOptions struct {
	// provider is THEFOLD_AI_PROVIDER; "" means no provider configured.
	provider string
	// noBaseURL leaves THEFOLD_AI_BASE_URL unset (the provider's public endpoint).
	noBaseURL bool
	// env is what api_key_ref "env:NAME" resolves against.
	env map[string]string
	cfg func(*engine.Config)
	// regOpts configure the registry server (the operator's policy, a test resolver);
	// engOpts the engine.
	regOpts []RegistryOption
	engOpts []engine.Option
	// stOpts configure the store (a short stale period for request_id claims).
	stOpts []store.Option
}

func newAIEnv(t testing.TB, script *fakellm.Script, o aiEnvOptions) *aiEnv {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "ai", migrations.FS)
	e := &aiEnv{st: store.New(pool, o.stOpts...)}
	e.fake, e.url = fakellm.Start(t, script)
	cfg := engine.Config{
		Provider: o.provider, EmbedModel: engine.LocalModel, EmbedDimensions: 384,
		AttemptTimeout: 10 * time.Second, MaxAttempts: 3, MaxRetryAfter: time.Minute, AnswerRetention: 24 * time.Hour,
	}
	if o.provider != "" {
		cfg.APIKey = "test-key"
		if !o.noBaseURL {
			cfg.BaseURL = e.url
		}
	}
	if o.cfg != nil {
		o.cfg(&cfg)
	}
	// As main wires it: only the names THEFOLD_AI_KEY_ENV_ALLOW allows are read.
	lookup := cfg.GuardedLookup(func(name string) (string, bool) { v, ok := o.env[name]; return v, ok })
	reg := registry.New(e.st,
		registry.WithUsable(cfg.Usable(lookup)),
		registry.WithPreferred(cfg.Provider),
		registry.WithEnabledProvider(cfg.Provider),
		registry.WithKeyLookup(lookup))
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng := engine.New(cfg, log, reg, e.st, lookup, append([]engine.Option{engine.WithRetrySleep(func(ctx context.Context, d time.Duration) error {
		e.mu.Lock()
		e.sleeps = append(e.sleeps, d)
		e.mu.Unlock()
		return ctx.Err()
	})}, o.engOpts...)...)
	env := grpctest.Start(t, func(s *grpc.Server) {
		aiv1.RegisterAIServiceServer(s, NewAIServer(eng, reg))
		aiv1.RegisterModelRegistryServiceServer(s, NewRegistryServer(reg, e.st, o.regOpts...))
	})
	e.grpc = env
	e.ai = aiv1.NewAIServiceClient(env.Conn)
	e.reg = aiv1.NewModelRegistryServiceClient(env.Conn)
	e.alice = env.Context(t, "alice")
	e.admin = env.Context(t, "root", "admin")
	return e
}

// waits returns the retry waits the engine asked for.
func (e *aiEnv) waits() []time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]time.Duration(nil), e.sleeps...)
}

// answer returns a scripted reply of v as JSON text.
func answer(t testing.TB, v any) fakellm.Response {
	t.Helper()
	if s, ok := v.(string); ok {
		return fakellm.Response{Text: s} // an answer that is not JSON (code in code blocks)
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return fakellm.Response{Text: string(b)}
}

// scriptFor puts rs in the family the provider speaks.
func scriptFor(provider string, rs ...fakellm.Response) *fakellm.Script {
	switch provider {
	case "openai":
		return &fakellm.Script{OpenAI: rs}
	case "gemini":
		return &fakellm.Script{Gemini: rs}
	default:
		return &fakellm.Script{Anthropic: rs}
	}
}
