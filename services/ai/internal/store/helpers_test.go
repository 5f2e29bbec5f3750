package store

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"
	"google.golang.org/protobuf/testing/protocmp"

	"github.com/thefold/thefold/pkg/db/dbtest"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"

	"github.com/thefold/thefold/services/ai/migrations"
)

func newStore(t *testing.T, opts ...Option) (*Store, *pgxpool.Pool) {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "ai", migrations.FS)
	return New(pool, opts...), pool
}

// emptyStore is a store whose catalogue holds no seed rows, for tests that count.
func emptyStore(t *testing.T, opts ...Option) (*Store, *pgxpool.Pool) {
	t.Helper()
	s, pool := newStore(t, opts...)
	if _, err := pool.Exec(t.Context(), "DELETE FROM models; DELETE FROM providers"); err != nil {
		t.Fatal(err)
	}
	return s, pool
}

// clock is a settable clock for answers' staleness and pruning.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func newClock() *clock { return &clock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func provider(name string, opts ...func(*aiv1.Provider)) *aiv1.Provider {
	p := &aiv1.Provider{Name: name, Kind: aiv1.ProviderKind_PROVIDER_KIND_ANTHROPIC, ApiKeyRef: "env:KEY", Enabled: true}
	for _, o := range opts {
		o(p)
	}
	return p
}

func model(providerID, name string, tier int32, opts ...func(*aiv1.Model)) *aiv1.Model {
	m := &aiv1.Model{
		ProviderId: providerID, Name: name, DisplayName: name, Tier: tier,
		InputMicrosPerMtok: 1_000_000, OutputMicrosPerMtok: 5_000_000,
		ContextWindow: 100_000, MaxOutputTokens: 8_000, Tags: []string{"chat"}, Enabled: true,
	}
	for _, o := range opts {
		o(m)
	}
	return m
}

func mustProvider(t *testing.T, s *Store, p *aiv1.Provider) *aiv1.Provider {
	t.Helper()
	created, err := s.CreateProvider(t.Context(), p)
	if err != nil {
		t.Fatalf("CreateProvider(%q): %v", p.Name, err)
	}
	return created
}

func mustModel(t *testing.T, s *Store, m *aiv1.Model) *aiv1.Model {
	t.Helper()
	created, err := s.CreateModel(t.Context(), m)
	if err != nil {
		t.Fatalf("CreateModel(%q): %v", m.Name, err)
	}
	return created
}

func wantErr(t *testing.T, err, sentinel error) {
	t.Helper()
	if !errors.Is(err, sentinel) {
		t.Fatalf("err = %v, want %v", err, sentinel)
	}
}

// ignoreOutput leaves out what the database assigns.
var ignoreOutput = []cmp.Option{
	protocmp.Transform(),
	protocmp.IgnoreFields(&aiv1.Provider{}, "id", "create_time", "update_time"),
	protocmp.IgnoreFields(&aiv1.Model{}, "id", "create_time", "update_time"),
}

func names[T interface{ GetName() string }](xs []T) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = x.GetName()
	}
	return out
}
