// Package registry is the ai service's view of its model catalogue: which providers and
// models exist and can be called (cached for a minute, as every AI call consults it), how a
// model is selected for a call (Select) and what its tokens cost (Price). The catalogue
// itself lives in the store; this package decides with it.
package registry

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/thefold/thefold/pkg/errs"
	"google.golang.org/protobuf/proto"

	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"

	"github.com/thefold/thefold/services/ai/internal/store"
)

// DefaultTTL is how long the catalogue is cached: changes made through this process
// invalidate it at once; those made by another replica show within this time.
const DefaultTTL = 60 * time.Second

// KeyLookup reads a variable of the environment (as os.LookupEnv); "env:NAME" key
// references resolve through it.
type KeyLookup func(name string) (string, bool)

// Registry serves the catalogue from a cache. It is safe for concurrent use. The messages it
// returns are shared with the cache: read them, never change them (proto.Clone first).
type Registry struct {
	st        *store.Store
	ttl       time.Duration
	now       func() time.Time
	usable    func(*aiv1.Provider) bool
	preferred string
	lookup    KeyLookup
	// forceEnabled names a provider that counts as enabled whatever the registry says.
	forceEnabled string

	// mu is held while loading, so concurrent callers on an expired cache wait for one
	// query rather than each running their own.
	mu       sync.Mutex
	cat      *catalogue
	loadedAt time.Time
}

// Option configures a Registry.
type Option func(*Registry)

// WithUsable restricts Candidates to providers usable accepts: those this process can
// actually call (a key configured, or the provider THEFOLD_AI_PROVIDER names).
func WithUsable(usable func(*aiv1.Provider) bool) Option {
	return func(r *Registry) { r.usable = usable }
}

// WithPreferred names the provider that wins ties in selection and ambiguous model names
// (THEFOLD_AI_PROVIDER).
func WithPreferred(name string) Option { return func(r *Registry) { r.preferred = name } }

// WithEnabledProvider makes the provider of this name (case-insensitive) count as enabled
// even when the registry has it disabled: THEFOLD_AI_PROVIDER naming a provider is the
// operator's explicit choice, and the local Ollama provider is seeded disabled only so that
// nothing calls a server that is not there. Its models keep their own enabled flags.
func WithEnabledProvider(name string) Option { return func(r *Registry) { r.forceEnabled = name } }

// WithKeyLookup sets how "env:NAME" key references are resolved (KeyConfigured). Without it
// no key counts as configured.
func WithKeyLookup(lookup KeyLookup) Option { return func(r *Registry) { r.lookup = lookup } }

// WithClock sets the clock of the cache's expiry.
func WithClock(now func() time.Time) Option { return func(r *Registry) { r.now = now } }

// WithTTL sets how long the catalogue is cached; d <= 0 keeps DefaultTTL.
func WithTTL(d time.Duration) Option {
	return func(r *Registry) {
		if d > 0 {
			r.ttl = d
		}
	}
}

// New returns a Registry over st.
func New(st *store.Store, opts ...Option) *Registry {
	r := &Registry{st: st, ttl: DefaultTTL, now: time.Now}
	for _, o := range opts {
		o(r)
	}
	return r
}

// catalogue is one snapshot of the providers and models, indexed.
type catalogue struct {
	providers map[string]*aiv1.Provider
	byID      map[string]Candidate
	byName    map[string][]Candidate
	// all models, by provider name, tier and name.
	all []Candidate
}

// newCatalogue indexes ps (fresh from the store: it may change them).
func newCatalogue(ps []*aiv1.Provider, forceEnabled string) *catalogue {
	c := &catalogue{
		providers: make(map[string]*aiv1.Provider, len(ps)),
		byID:      map[string]Candidate{},
		byName:    map[string][]Candidate{},
	}
	for _, p := range ps {
		if forceEnabled != "" && strings.EqualFold(p.Name, forceEnabled) {
			p.Enabled = true
		}
		c.providers[p.Id] = p
		for _, m := range p.Models {
			cand := Candidate{Model: m, Provider: p}
			c.byID[m.Id] = cand
			c.byName[m.Name] = append(c.byName[m.Name], cand)
			c.all = append(c.all, cand)
		}
	}
	return c
}

// load returns the cached catalogue, reading it again once it has expired.
func (r *Registry) load(ctx context.Context) (*catalogue, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cat != nil && r.now().Sub(r.loadedAt) < r.ttl {
		return r.cat, nil
	}
	ps, err := r.st.Catalogue(ctx)
	if err != nil {
		return nil, err
	}
	r.cat, r.loadedAt = newCatalogue(ps, r.forceEnabled), r.now()
	return r.cat, nil
}

// Invalidate drops the cache; the next lookup reads the catalogue again. Changes made
// through the registry's RPCs call it.
func (r *Registry) Invalidate() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.cat = nil
}

// Preferred is the provider named by WithPreferred, or "".
func (r *Registry) Preferred() string { return r.preferred }

// Candidates returns the models that can be selected: enabled, of an enabled provider that
// is usable (WithUsable), by provider name, tier and name.
func (r *Registry) Candidates(ctx context.Context) ([]Candidate, error) {
	cat, err := r.load(ctx)
	if err != nil {
		return nil, err
	}
	var out []Candidate
	for _, c := range cat.all {
		if c.Model.Enabled && r.providerOn(c.Provider) && (r.usable == nil || r.usable(c.Provider)) {
			if !c.Provider.Enabled {
				// Chosen by the operator (WithEnabledProvider): selectable for this process.
				p := proto.CloneOf(c.Provider)
				p.Enabled = true
				c.Provider = p
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// ResolveModel finds a model by registry id or by provider model name. A name that several
// providers offer resolves to the preferred provider's, else to one that can be called, else
// to the first provider by name. Unknown is errs.ErrNotFound; a disabled model, or one of a
// disabled provider, is errs.ErrFailedPrecondition.
func (r *Registry) ResolveModel(ctx context.Context, idOrName string) (Candidate, error) {
	cat, err := r.load(ctx)
	if err != nil {
		return Candidate{}, err
	}
	cand, ok := cat.byID[idOrName]
	if !ok {
		named := slices.Clone(cat.byName[idOrName])
		if len(named) == 0 {
			return Candidate{}, fmt.Errorf("model %q is not in the registry: %w", idOrName, errs.ErrNotFound)
		}
		callable := func(c Candidate) bool {
			return c.Model.Enabled && r.providerOn(c.Provider) && (r.usable == nil || r.usable(c.Provider))
		}
		slices.SortFunc(named, func(a, b Candidate) int {
			return cmp.Or(
				boolFirst(isPreferred(a, r.preferred), isPreferred(b, r.preferred)),
				boolFirst(callable(a), callable(b)),
				strings.Compare(strings.ToLower(a.Provider.Name), strings.ToLower(b.Provider.Name)),
			)
		})
		cand = named[0]
	}
	switch {
	case !r.providerOn(cand.Provider):
		return Candidate{}, fmt.Errorf("model %s: its provider %s is disabled: %w", cand.Model.Name, cand.Provider.Name, errs.ErrFailedPrecondition)
	case !cand.Model.Enabled:
		return Candidate{}, fmt.Errorf("model %s of provider %s is disabled: %w", cand.Model.Name, cand.Provider.Name, errs.ErrFailedPrecondition)
	}
	return cand, nil
}

// providerOn reports whether p's models may be called: it is enabled, or it is the provider
// WithEnabledProvider names.
func (r *Registry) providerOn(p *aiv1.Provider) bool {
	return p.Enabled || (r.forceEnabled != "" && strings.EqualFold(p.Name, r.forceEnabled))
}

// Provider returns provider id, with its models.
func (r *Registry) Provider(ctx context.Context, id string) (*aiv1.Provider, error) {
	cat, err := r.load(ctx)
	if err != nil {
		return nil, err
	}
	p, ok := cat.providers[id]
	if !ok {
		return nil, fmt.Errorf("provider %q: %w", id, errs.ErrNotFound)
	}
	return p, nil
}

// KeyConfigured reports whether p's api_key_ref resolves to a non-empty key: "env:NAME"
// through the key lookup. Other references (secret stores) are not supported yet and count
// as not configured.
func (r *Registry) KeyConfigured(p *aiv1.Provider) bool {
	name, ok := strings.CutPrefix(p.GetApiKeyRef(), "env:")
	if !ok || name == "" || r.lookup == nil {
		return false
	}
	v, _ := r.lookup(name)
	return strings.TrimSpace(v) != ""
}
