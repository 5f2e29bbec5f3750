package registry

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/thefold/thefold/pkg/db/dbtest"
	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"

	"github.com/thefold/thefold/services/ai/internal/store"
	"github.com/thefold/thefold/services/ai/migrations"
)

type clock struct {
	mu  sync.Mutex
	now time.Time
}

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

// testStore is a store with an empty catalogue.
func testStore(t *testing.T) (*store.Store, *pgxpool.Pool) {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "ai", migrations.FS)
	if _, err := pool.Exec(t.Context(), "DELETE FROM models; DELETE FROM providers"); err != nil {
		t.Fatal(err)
	}
	return store.New(pool), pool
}

func addProvider(t *testing.T, st *store.Store, name string, enabled bool) *aiv1.Provider {
	t.Helper()
	p, err := st.CreateProvider(t.Context(), &aiv1.Provider{Name: name, Kind: aiv1.ProviderKind_PROVIDER_KIND_OPENAI, Enabled: enabled})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func addModel(t *testing.T, st *store.Store, p *aiv1.Provider, name string, tier int32, enabled bool) *aiv1.Model {
	t.Helper()
	m, err := st.CreateModel(t.Context(), &aiv1.Model{ProviderId: p.Id, Name: name, Tier: tier, Enabled: enabled, Tags: []string{"chat"}})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func candidateNames(cs []Candidate) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = c.Provider.Name + "/" + c.Model.Name
	}
	return out
}

func TestCacheTTL(t *testing.T) {
	t.Parallel()
	st, _ := testStore(t)
	ctx := t.Context()
	clk := &clock{now: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	reg := New(st, WithClock(clk.Now))
	p := addProvider(t, st, "p", true)
	addModel(t, st, p, "one", 1, true)

	got, err := reg.Candidates(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"p/one"}, candidateNames(got)); d != "" {
		t.Fatalf("first read (-want +got):\n%s", d)
	}
	// A change behind the registry's back shows only once the cache expires.
	addModel(t, st, p, "two", 1, true)
	clk.Advance(DefaultTTL - time.Second)
	if got, _ := reg.Candidates(ctx); len(got) != 1 {
		t.Errorf("within the TTL: %v, want the cached catalogue", candidateNames(got))
	}
	clk.Advance(time.Second)
	if got, _ := reg.Candidates(ctx); len(got) != 2 {
		t.Errorf("at the TTL: %v, want the new catalogue", candidateNames(got))
	}
	// Invalidate shows a change at once.
	addModel(t, st, p, "three", 1, true)
	if got, _ := reg.Candidates(ctx); len(got) != 2 {
		t.Errorf("before Invalidate: %v", candidateNames(got))
	}
	reg.Invalidate()
	if got, _ := reg.Candidates(ctx); len(got) != 3 {
		t.Errorf("after Invalidate: %v", candidateNames(got))
	}
}

func TestCandidates(t *testing.T) {
	t.Parallel()
	st, _ := testStore(t)
	on := addProvider(t, st, "on", true)
	off := addProvider(t, st, "a-off", false) // first by name
	nokey := addProvider(t, st, "nokey", true)
	addModel(t, st, on, "b", 2, true)
	addModel(t, st, on, "a", 2, true)
	addModel(t, st, on, "z", 1, true)
	addModel(t, st, on, "disabled", 1, false)
	addModel(t, st, off, "x", 1, true)
	addModel(t, st, nokey, "y", 1, true)
	reg := New(st, WithUsable(func(p *aiv1.Provider) bool { return p.Name != "nokey" }))
	got, err := reg.Candidates(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"on/z", "on/a", "on/b"}, candidateNames(got)); d != "" {
		t.Errorf("candidates (-want +got):\n%s", d)
	}
	all, err := New(st).Candidates(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"nokey/y", "on/z", "on/a", "on/b"}, candidateNames(all)); d != "" {
		t.Errorf("without a usable filter (-want +got):\n%s", d)
	}
}

func TestEnabledProvider(t *testing.T) {
	t.Parallel()
	st, _ := testStore(t)
	local := addProvider(t, st, "ollama", false)
	addModel(t, st, local, "llama", 1, true)
	addModel(t, st, local, "off", 1, false)
	reg := New(st, WithEnabledProvider("Ollama"))
	got, err := reg.Candidates(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"ollama/llama"}, candidateNames(got)); d != "" {
		t.Errorf("candidates (-want +got):\n%s", d)
	}
	if _, err := reg.ResolveModel(t.Context(), "llama"); err != nil {
		t.Errorf("ResolveModel: %v", err)
	}
	if _, err := reg.ResolveModel(t.Context(), "off"); !errors.Is(err, errs.ErrFailedPrecondition) {
		t.Errorf("a disabled model of the named provider: %v", err)
	}
	if got, _ := New(st).Candidates(t.Context()); len(got) != 0 {
		t.Errorf("without the option: %v", candidateNames(got))
	}
}

func TestResolveModel(t *testing.T) {
	t.Parallel()
	st, _ := testStore(t)
	ctx := t.Context()
	alpha := addProvider(t, st, "alpha", true)
	beta := addProvider(t, st, "beta", true)
	off := addProvider(t, st, "a-off", false) // first by name
	shared := addModel(t, st, beta, "shared", 1, true)
	addModel(t, st, alpha, "shared", 1, true)
	addModel(t, st, alpha, "two-way", 1, true)
	addModel(t, st, beta, "two-way", 1, true)
	disabled := addModel(t, st, alpha, "disabled", 1, false)
	addModel(t, st, off, "offline", 1, true)
	addModel(t, st, off, "everywhere", 1, true)
	addModel(t, st, beta, "everywhere", 1, true)

	cases := []struct {
		name      string
		reg       *Registry
		in        string
		want      string
		sentinel  error
		errDetail string
	}{
		{"by id", New(st), shared.Id, "beta/shared", nil, ""},
		{"by name", New(st), "disabled", "", errs.ErrFailedPrecondition, "model disabled of provider alpha is disabled"},
		{"disabled by id", New(st), disabled.Id, "", errs.ErrFailedPrecondition, "is disabled"},
		{"of a disabled provider", New(st), "offline", "", errs.ErrFailedPrecondition, "its provider a-off is disabled"},
		{"ambiguous: first provider by name", New(st), "shared", "alpha/shared", nil, ""},
		{"ambiguous: the preferred provider", New(st, WithPreferred("BETA")), "shared", "beta/shared", nil, ""},
		{"ambiguous: a callable provider", New(st, WithUsable(func(p *aiv1.Provider) bool { return p.Name == "beta" })), "two-way", "beta/two-way", nil, ""},
		{"ambiguous: an enabled provider before a disabled one", New(st), "everywhere", "beta/everywhere", nil, ""},
		{"unknown", New(st), "nope", "", errs.ErrNotFound, `model "nope" is not in the registry`},
		{"unknown id", New(st), "00000000-0000-4000-8000-000000000000", "", errs.ErrNotFound, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, err := tc.reg.ResolveModel(ctx, tc.in)
			if tc.sentinel != nil {
				if !errors.Is(err, tc.sentinel) {
					t.Fatalf("err = %v, want %v", err, tc.sentinel)
				}
				if tc.errDetail != "" && !strings.Contains(err.Error(), tc.errDetail) {
					t.Errorf("error %q does not say %q", err, tc.errDetail)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if name := got.Provider.Name + "/" + got.Model.Name; name != tc.want {
				t.Errorf("resolved %s, want %s", name, tc.want)
			}
		})
	}
}

func TestProviderAndKeys(t *testing.T) {
	t.Parallel()
	st, _ := testStore(t)
	ctx := t.Context()
	p := addProvider(t, st, "p", true)
	addModel(t, st, p, "m", 1, true)
	env := map[string]string{"SET": "sk-123", "BLANK": "  "}
	reg := New(st, WithKeyLookup(func(name string) (string, bool) { v, ok := env[name]; return v, ok }))
	got, err := reg.Provider(ctx, p.Id)
	if err != nil || got.Name != "p" || len(got.Models) != 1 {
		t.Fatalf("Provider = %v, %v", got, err)
	}
	if _, err := reg.Provider(ctx, "00000000-0000-4000-8000-000000000000"); !errors.Is(err, errs.ErrNotFound) {
		t.Errorf("unknown provider: %v", err)
	}
	for ref, want := range map[string]bool{
		"env:SET": true, "env:BLANK": false, "env:UNSET": false, "env:": false, "": false, "SET": false, "vault:SET": false,
	} {
		if got := reg.KeyConfigured(&aiv1.Provider{ApiKeyRef: ref}); got != want {
			t.Errorf("KeyConfigured(%q) = %v, want %v", ref, got, want)
		}
	}
	if New(st).KeyConfigured(&aiv1.Provider{ApiKeyRef: "env:SET"}) {
		t.Error("a key counted as configured without a lookup")
	}
}
