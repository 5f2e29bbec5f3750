// Package engine runs the ai service's model calls: it picks the model (explicit, or
// selected from the registry with its fallbacks), calls the provider through the retry
// policy, parses the answer with one repair round, prices the call, records it in the usage
// ledger, and answers a retried request_id from the recorded answer without calling a
// model again.
package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/auth"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"

	"github.com/thefold/thefold/services/ai/internal/llm"
	"github.com/thefold/thefold/services/ai/internal/provider"
	"github.com/thefold/thefold/services/ai/internal/registry"
	"github.com/thefold/thefold/services/ai/internal/store"
)

// Engine makes model calls. It is safe for concurrent use.
type Engine struct {
	cfg    Config
	log    *slog.Logger
	reg    *registry.Registry
	st     *store.Store
	local  localEmbedder // CurrentLocal at the configured size
	lookup func(string) (string, bool)
	// newProvider builds a provider client; tests replace the retry policy's sleep.
	newProvider func(provider.Config) (llm.Provider, error)
	now         func() time.Time
	// sleep is the retry policy's wait; nil waits for real.
	sleep func(ctx context.Context, d time.Duration) error
	// claimHeartbeat is how often a running call touches its request_id's claim.
	claimHeartbeat time.Duration

	// guarded is the HTTP client of providers whose base URL comes from the registry: its
	// connections obey the base-URL policy (netguard).
	guarded *http.Client
	// owners says whether the owner of a call made by a service is an administrator (the
	// spend limit's exemption); nil: such calls are never exempt.
	owners Owners

	mu      sync.Mutex
	clients map[string]llm.Provider
}

// Option configures an Engine.
type Option func(*Engine)

// WithRetrySleep replaces the retry policy's wait (tests record the waits instead).
func WithRetrySleep(f func(ctx context.Context, d time.Duration) error) Option {
	return func(e *Engine) { e.sleep = f }
}

// WithClaimHeartbeat sets how often a running call touches its request_id's claim (tests
// shorten it with the store's stale period); d <= 0 keeps claimHeartbeat.
func WithClaimHeartbeat(d time.Duration) Option {
	return func(e *Engine) {
		if d > 0 {
			e.claimHeartbeat = d
		}
	}
}

// WithClock sets the clock used for latency and the spend limit's day.
func WithClock(now func() time.Time) Option { return func(e *Engine) { e.now = now } }

// WithOwners sets how the engine learns that the owner of a call made by a service (the
// agent, the builder) is an administrator: service tokens carry no roles.
func WithOwners(o Owners) Option { return func(e *Engine) { e.owners = o } }

// New returns an engine. lookup reads the environment for api_key_ref "env:NAME"; only the
// names cfg.KeyEnvAllow allows are read through it.
func New(cfg Config, log *slog.Logger, reg *registry.Registry, st *store.Store, lookup func(string) (string, bool), opts ...Option) *Engine {
	e := &Engine{
		cfg: cfg, log: log, reg: reg, st: st, lookup: cfg.GuardedLookup(lookup),
		local:          currentLocal(cfg.EmbedDimensions), // Config.Validate checked the size
		now:            time.Now,
		clients:        map[string]llm.Provider{},
		claimHeartbeat: claimHeartbeat,
		guarded:        &http.Client{Transport: cfg.BaseURLPolicy().Transport()},
	}
	e.newProvider = func(pc provider.Config) (llm.Provider, error) { return provider.New(pc) }
	for _, o := range opts {
		o(e)
	}
	return e
}

// Usable reports whether p can be called from this process (see Config.Usable).
func (e *Engine) Usable(p *aiv1.Provider) bool { return e.cfg.Usable(e.lookup)(p) }

func (e *Engine) apiKey(p *aiv1.Provider) string { return e.cfg.APIKeyFor(p, e.lookup) }

// client returns the (cached) provider client for p.
func (e *Engine) client(p *aiv1.Provider) (llm.Provider, error) {
	pc := provider.Config{
		Name:    p.GetName(),
		Kind:    p.GetKind(),
		BaseURL: p.GetBaseUrl(),
		APIKey:  e.apiKey(p),
		Timeout: e.cfg.AttemptTimeout,
		Retry:   llm.RetryPolicy{MaxAttempts: e.cfg.MaxAttempts, MaxRetryAfter: e.cfg.MaxRetryAfter, Sleep: e.sleep},
	}
	if e.cfg.BaseURL != "" && strings.EqualFold(p.GetName(), e.cfg.Provider) {
		// The operator's own THEFOLD_AI_BASE_URL: trusted as it is (a local model server,
		// fakellm in the tests and the demo — both on loopback).
		pc.BaseURL = e.cfg.BaseURL
	} else {
		// A registry URL: an admin or an API key with ai:write set it over the API. Its
		// connections are checked, so it cannot reach internal addresses (SSRF) unless the
		// operator allows them (THEFOLD_AI_ALLOW_PRIVATE_BASE_URLS).
		pc.HTTPClient = e.guarded
		if err := e.cfg.BaseURLPolicy().CheckURL(context.Background(), pc.BaseURL, literalOnly); err != nil {
			return nil, fmt.Errorf("base_url: %w", err)
		}
	}
	key := strings.Join([]string{p.GetId(), pc.Kind.String(), pc.BaseURL, fingerprintKey(pc.APIKey)}, "|")
	e.mu.Lock()
	defer e.mu.Unlock()
	if c, ok := e.clients[key]; ok {
		return c, nil
	}
	c, err := e.newProvider(pc)
	if err != nil {
		return nil, err
	}
	e.clients[key] = c
	return c, nil
}

// literalOnly resolves nothing: building a client checks a literal address at once (a
// clear error before any request), names are left to the connection-time check.
func literalOnly(context.Context, string) ([]netip.Addr, error) {
	return nil, errors.New("not resolved")
}

// principal is who a call is for and who made it, for the ledger and idempotency.
type principal struct {
	userID string
	// caller is the token's subject: "user" or the acting service.
	caller string
}

// principalFrom is the call's principal; a service speaking for itself (no owner) only
// when asService.
func principalFrom(ctx context.Context, asService bool) (principal, error) {
	if p, ok := auth.FromContext(ctx); ok && asService && p.Service != "" && p.UserID == "" {
		return principal{caller: p.Service}, nil
	}
	p, err := auth.MustFromContext(ctx)
	if err != nil {
		return principal{}, err
	}
	caller := "user"
	if p.Service != "" {
		caller = p.Service
	}
	return principal{userID: p.UserID, caller: caller}, nil
}

// answerKey scopes request_ids: the same id from two callers is two requests.
func (p principal) answerKey() string { return p.caller + ":" + p.userID }

// toUsage converts accumulated provider usage to the wire shape.
func toUsage(model, prov string, u llm.Usage, cost int64, latency time.Duration, calls int) *typev1.Usage {
	return &typev1.Usage{
		Model: model, Provider: prov,
		InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadTokens, CacheWriteTokens: u.CacheWriteTokens,
		CostMicros: cost, Latency: durationpb.New(latency), Calls: int32(calls),
	}
}

// setUsage puts u in resp's `usage` field (every generating RPC's response has one).
func setUsage(resp proto.Message, u *typev1.Usage) {
	m := resp.ProtoReflect()
	fd := m.Descriptor().Fields().ByName("usage")
	if fd == nil {
		panic(fmt.Sprintf("engine: %s has no usage field", m.Descriptor().FullName()))
	}
	m.Set(fd, protoValueOf(u))
}

// errNoProvider is the generating RPCs' answer when nothing can be called.
var errNoProvider = errors.New(noProviderMessage)
