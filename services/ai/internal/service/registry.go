package service

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/ai/internal/keyref"
	"github.com/thefold/thefold/services/ai/internal/netguard"
	"github.com/thefold/thefold/services/ai/internal/registry"
	"github.com/thefold/thefold/services/ai/internal/store"
)

// RegistryServer implements aiv1.ModelRegistryServiceServer: the admin's CRUD of providers
// and models, model selection, and the usage ledger's reports. Changes go to the store and
// drop the registry's cache, so the next AI call sees them.
type RegistryServer struct {
	aiv1.UnimplementedModelRegistryServiceServer
	reg *registry.Registry
	st  *store.Store
	// keys are the variables an api_key_ref may name; baseURLs the non-global addresses a
	// base_url may reach; resolve finds a base_url host's addresses (nil: the system's).
	keys     keyref.Allow
	baseURLs *netguard.Policy
	resolve  netguard.Resolver
}

var _ aiv1.ModelRegistryServiceServer = (*RegistryServer)(nil)

// RegistryOption configures a RegistryServer.
type RegistryOption func(*RegistryServer)

// WithKeyAllow sets the variables an api_key_ref "env:NAME" may name
// (THEFOLD_AI_KEY_ENV_ALLOW); the default is keyref.Default.
func WithKeyAllow(a keyref.Allow) RegistryOption { return func(s *RegistryServer) { s.keys = a } }

// WithBaseURLPolicy sets the non-global addresses a provider's base_url may reach
// (THEFOLD_AI_ALLOW_PRIVATE_BASE_URLS); the default allows none.
func WithBaseURLPolicy(p *netguard.Policy) RegistryOption {
	return func(s *RegistryServer) { s.baseURLs = p }
}

// WithResolver sets how a base_url's host name is resolved at registration (tests).
func WithResolver(r netguard.Resolver) RegistryOption {
	return func(s *RegistryServer) { s.resolve = r }
}

// NewRegistryServer returns the ModelRegistryService handlers over reg (selection, key
// status, cache) and st (the catalogue and the ledger).
func NewRegistryServer(reg *registry.Registry, st *store.Store, opts ...RegistryOption) *RegistryServer {
	s := &RegistryServer{reg: reg, st: st, keys: keyref.Default(), baseURLs: &netguard.Policy{}}
	for _, o := range opts {
		o(s)
	}
	return s
}

// checkProviderPolicy is what the operator decides about the fields of p named in fields:
// an api_key_ref may name only allowed variables (never, say, THEFOLD_DATABASE_URL), and a
// base_url may not reach loopback, private or link-local addresses unless allowed. The
// engine checks both again when it calls (keyref.Guard, the dial-time netguard check).
func (s *RegistryServer) checkProviderPolicy(ctx context.Context, prefix string, p *aiv1.Provider, fields []string) error {
	for _, f := range fields {
		switch f {
		case "api_key_ref":
			if err := s.keys.Check(p.ApiKeyRef); err != nil {
				name, _ := keyref.EnvName(p.ApiKeyRef)
				return errs.Invalid(prefix+f, "env:%s is not a variable provider keys may be read from (the operator allows %q in THEFOLD_AI_KEY_ENV_ALLOW)",
					validate.Truncate(name, 64), s.keys.String())
			}
		case "base_url":
			if err := s.baseURLs.CheckURL(ctx, p.BaseUrl, s.resolve); err != nil {
				var be *netguard.BlockedError
				if errors.As(err, &be) {
					what := fmt.Sprintf("%s is a %s address", be.Addr, netguard.Describe(be.Addr))
					if be.Host != be.Addr.String() {
						what = fmt.Sprintf("%s resolves to %s, a %s address", validate.Truncate(be.Host, 64), be.Addr, netguard.Describe(be.Addr))
					}
					return errs.Invalid(prefix+f, "%s, which providers may not reach (the operator allows such addresses with THEFOLD_AI_ALLOW_PRIVATE_BASE_URLS)", what)
				}
				return errs.Invalid(prefix+f, "not a URL")
			}
		}
	}
	return nil
}

// regRequireAdmin lets only administrators through: the catalogue says where keys live and
// what the platform spends, and changes to it redirect every AI call.
func regRequireAdmin(ctx context.Context) error {
	_, err := auth.RequireRole(ctx, auth.RoleAdmin)
	return err
}

// usageScope narrows a usage query to what the caller may read: an admin reads anyone's
// usage, everyone else their own (an empty user_id means their own; naming another
// person is PERMISSION_DENIED).
func usageScope(ctx context.Context, f *store.UsageFilter) error {
	p, err := auth.MustFromContext(ctx)
	if err != nil {
		return err
	}
	if p.HasRole(auth.RoleAdmin) {
		return nil
	}
	if f.UserID != "" && f.UserID != p.UserID {
		return errs.Public(codes.PermissionDenied, "user_id: you may read only your own usage; an admin reads anyone's")
	}
	f.UserID = p.UserID
	return nil
}

// withKeyStatus sets the output-only api_key_configured of p (and returns p).
func (s *RegistryServer) withKeyStatus(p *aiv1.Provider) *aiv1.Provider {
	p.ApiKeyConfigured = s.reg.KeyConfigured(p)
	return p
}

// ListProviders lists providers by name, each with its models.
func (s *RegistryServer) ListProviders(ctx context.Context, req *aiv1.ListProvidersRequest) (*aiv1.ListProvidersResponse, error) {
	if err := regRequireAdmin(ctx); err != nil {
		return nil, err
	}
	f := store.ProviderFilter{EnabledOnly: req.GetEnabledOnly(), Name: req.GetName()}
	if err := regCheckProviderName("name", f.Name, false); err != nil {
		return nil, err
	}
	var err error
	if f.PageSize, err = validate.PageSize(req.GetPageSize(), regDefaultPage, regMaxPageSize); err != nil {
		return nil, err
	}
	if f.After, err = regDecodeProviderToken(req.GetPageToken()); err != nil {
		return nil, err
	}
	ps, next, err := s.st.ListProviders(ctx, f)
	if err != nil {
		return nil, err
	}
	for _, p := range ps {
		s.withKeyStatus(p)
	}
	return &aiv1.ListProvidersResponse{Providers: ps, NextPageToken: regEncodeProviderToken(next)}, nil
}

// GetProvider returns one provider with its models.
func (s *RegistryServer) GetProvider(ctx context.Context, req *aiv1.GetProviderRequest) (*aiv1.GetProviderResponse, error) {
	if err := regRequireAdmin(ctx); err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.GetId(), true)
	if err != nil {
		return nil, err
	}
	p, err := s.st.GetProvider(ctx, id)
	if err != nil {
		return nil, err
	}
	return &aiv1.GetProviderResponse{Provider: s.withKeyStatus(p)}, nil
}

// CreateProvider creates a provider; its name is its natural key.
func (s *RegistryServer) CreateProvider(ctx context.Context, req *aiv1.CreateProviderRequest) (*aiv1.CreateProviderResponse, error) {
	if err := regRequireAdmin(ctx); err != nil {
		return nil, err
	}
	if req.GetProvider() == nil {
		return nil, errs.Invalid("provider", "required")
	}
	p := req.GetProvider()
	// Output-only fields are left behind.
	in := &aiv1.Provider{Name: p.Name, Kind: p.Kind, BaseUrl: p.BaseUrl, ApiKeyRef: p.ApiKeyRef, Enabled: p.Enabled}
	if err := regCheckProviderFields("provider.", in, store.ProviderFields); err != nil {
		return nil, err
	}
	if err := regCheckProvider("provider.", in); err != nil {
		return nil, err
	}
	if err := s.checkProviderPolicy(ctx, "provider.", in, store.ProviderFields); err != nil {
		return nil, err
	}
	created, err := s.st.CreateProvider(ctx, in)
	if err != nil {
		return nil, err
	}
	s.reg.Invalidate()
	return &aiv1.CreateProviderResponse{Provider: s.withKeyStatus(created)}, nil
}

// UpdateProvider changes the fields named in update_mask.
func (s *RegistryServer) UpdateProvider(ctx context.Context, req *aiv1.UpdateProviderRequest) (*aiv1.UpdateProviderResponse, error) {
	if err := regRequireAdmin(ctx); err != nil {
		return nil, err
	}
	if req.GetProvider() == nil {
		return nil, errs.Invalid("provider", "required")
	}
	paths, err := validate.UpdatePaths(req.GetUpdateMask(), req.GetProvider(), store.ProviderFields)
	if err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.GetId(), true)
	if err != nil {
		return nil, err
	}
	if err := regCheckBodyID("provider.id", req.GetProvider().GetId(), id); err != nil {
		return nil, err
	}
	// Work on a copy: the request belongs to the caller (and to gRPC's interceptors).
	p := proto.CloneOf(req.GetProvider())
	if err := regCheckProviderFields("provider.", p, paths); err != nil {
		return nil, err
	}
	if err := s.checkProviderPolicy(ctx, "provider.", p, paths); err != nil {
		return nil, err
	}
	updated, err := s.st.UpdateProvider(ctx, id, p, paths, func(_, after *aiv1.Provider) error {
		return regCheckProvider("provider.", after)
	})
	if err != nil {
		return nil, err
	}
	s.reg.Invalidate()
	return &aiv1.UpdateProviderResponse{Provider: s.withKeyStatus(updated)}, nil
}

// DeleteProvider deletes a provider that has no models left.
func (s *RegistryServer) DeleteProvider(ctx context.Context, req *aiv1.DeleteProviderRequest) (*aiv1.DeleteProviderResponse, error) {
	if err := regRequireAdmin(ctx); err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.GetId(), true)
	if err != nil {
		return nil, err
	}
	if err := s.st.DeleteProvider(ctx, id); err != nil {
		return nil, err
	}
	s.reg.Invalidate()
	return &aiv1.DeleteProviderResponse{}, nil
}

// ListModels lists models by provider name, tier and name.
func (s *RegistryServer) ListModels(ctx context.Context, req *aiv1.ListModelsRequest) (*aiv1.ListModelsResponse, error) {
	if err := regRequireAdmin(ctx); err != nil {
		return nil, err
	}
	f := store.ModelFilter{Tier: req.GetTier(), EnabledOnly: req.GetEnabledOnly(), Name: req.GetName()}
	var err error
	if f.ProviderID, err = validate.UUID("provider_id", req.GetProviderId(), false); err != nil {
		return nil, err
	}
	if tag := req.GetTag(); tag != "" {
		if _, err := regNormalizeTags("tag", []string{tag}); err != nil {
			return nil, err
		}
		f.Tag = tag
	}
	if f.Tier < 0 || f.Tier > 5 {
		return nil, errs.Invalid("tier", "want 0 (any) to 5, got %d", f.Tier)
	}
	if err := regCheckModelName("name", f.Name, false); err != nil {
		return nil, err
	}
	if f.PageSize, err = validate.PageSize(req.GetPageSize(), regDefaultPage, regMaxPageSize); err != nil {
		return nil, err
	}
	if f.After, err = regDecodeModelToken(req.GetPageToken()); err != nil {
		return nil, err
	}
	ms, next, err := s.st.ListModels(ctx, f)
	if err != nil {
		return nil, err
	}
	return &aiv1.ListModelsResponse{Models: ms, NextPageToken: regEncodeModelToken(next)}, nil
}

// GetModel returns one model.
func (s *RegistryServer) GetModel(ctx context.Context, req *aiv1.GetModelRequest) (*aiv1.GetModelResponse, error) {
	if err := regRequireAdmin(ctx); err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.GetId(), true)
	if err != nil {
		return nil, err
	}
	m, err := s.st.GetModel(ctx, id)
	if err != nil {
		return nil, err
	}
	return &aiv1.GetModelResponse{Model: m}, nil
}

// CreateModel creates a model of a provider; (provider, name) is its natural key.
func (s *RegistryServer) CreateModel(ctx context.Context, req *aiv1.CreateModelRequest) (*aiv1.CreateModelResponse, error) {
	if err := regRequireAdmin(ctx); err != nil {
		return nil, err
	}
	if req.GetModel() == nil {
		return nil, errs.Invalid("model", "required")
	}
	m := proto.CloneOf(req.GetModel())
	m.Id, m.CreateTime, m.UpdateTime = "", nil, nil
	var err error
	if m.ProviderId, err = validate.UUID("model.provider_id", m.ProviderId, true); err != nil {
		return nil, err
	}
	if err := regCheckModelFields("model.", m, store.ModelFields); err != nil {
		return nil, err
	}
	if err := regCheckModel("model.", m); err != nil {
		return nil, err
	}
	created, err := s.st.CreateModel(ctx, m)
	if err != nil {
		return nil, err
	}
	s.reg.Invalidate()
	return &aiv1.CreateModelResponse{Model: created}, nil
}

// UpdateModel changes the fields named in update_mask; a model never changes provider.
func (s *RegistryServer) UpdateModel(ctx context.Context, req *aiv1.UpdateModelRequest) (*aiv1.UpdateModelResponse, error) {
	if err := regRequireAdmin(ctx); err != nil {
		return nil, err
	}
	if req.GetModel() == nil {
		return nil, errs.Invalid("model", "required")
	}
	if slices.Contains(req.GetUpdateMask().GetPaths(), "provider_id") {
		return nil, errs.Invalid("update_mask", "provider_id is not updatable: a model cannot move to another provider (create it there)")
	}
	paths, err := validate.UpdatePaths(req.GetUpdateMask(), req.GetModel(), store.ModelFields)
	if err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.GetId(), true)
	if err != nil {
		return nil, err
	}
	if err := regCheckBodyID("model.id", req.GetModel().GetId(), id); err != nil {
		return nil, err
	}
	m := proto.CloneOf(req.GetModel())
	if m.ProviderId != "" {
		if m.ProviderId, err = validate.UUID("model.provider_id", m.ProviderId, false); err != nil {
			return nil, err
		}
	}
	if err := regCheckModelFields("model.", m, paths); err != nil {
		return nil, err
	}
	updated, err := s.st.UpdateModel(ctx, id, m, paths, func(before, after *aiv1.Model) error {
		if m.ProviderId != "" && m.ProviderId != before.ProviderId {
			return errs.Invalid("model.provider_id", "a model cannot move to another provider (it belongs to %s)", before.ProviderId)
		}
		return regCheckModel("model.", after)
	})
	if err != nil {
		return nil, err
	}
	s.reg.Invalidate()
	return &aiv1.UpdateModelResponse{Model: updated}, nil
}

// DeleteModel deletes a model; the ledger keeps its records.
func (s *RegistryServer) DeleteModel(ctx context.Context, req *aiv1.DeleteModelRequest) (*aiv1.DeleteModelResponse, error) {
	if err := regRequireAdmin(ctx); err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.GetId(), true)
	if err != nil {
		return nil, err
	}
	if err := s.st.DeleteModel(ctx, id); err != nil {
		return nil, err
	}
	s.reg.Invalidate()
	return &aiv1.DeleteModelResponse{}, nil
}

// SelectModel picks a model and its fallbacks among those this service can call. Any
// authenticated caller may ask: it is how the agent and builder plan their calls.
func (s *RegistryServer) SelectModel(ctx context.Context, req *aiv1.SelectModelRequest) (*aiv1.SelectModelResponse, error) {
	if _, err := auth.MustFromContext(ctx); err != nil {
		return nil, err
	}
	if c := req.GetComplexity(); c < 0 || c > 10 {
		return nil, errs.Invalid("complexity", "want 1 to 10 (0: not known), got %d", c)
	}
	tags, err := regNormalizeTags("tags", req.GetTags())
	if err != nil {
		return nil, err
	}
	if err := validate.Enum("budget_mode", req.GetBudgetMode(), true); err != nil {
		return nil, err
	}
	if req.GetMinContextWindow() < 0 {
		return nil, errs.Invalid("min_context_window", "must not be negative, got %d", req.GetMinContextWindow())
	}
	if len(req.GetExcludeModelIds()) > regMaxExcluded {
		return nil, errs.Invalid("exclude_model_ids", "at most %d ids", regMaxExcluded)
	}
	exclude := make([]string, 0, len(req.GetExcludeModelIds()))
	for _, id := range req.GetExcludeModelIds() {
		canon, err := validate.UUID("exclude_model_ids", id, true)
		if err != nil {
			return nil, err
		}
		exclude = append(exclude, canon)
	}
	cands, err := s.reg.Candidates(ctx)
	if err != nil {
		return nil, err
	}
	if len(cands) == 0 {
		return nil, errs.Precondition("no model can be called: no enabled provider has a configured key " +
			"(set THEFOLD_AI_PROVIDER and its key, or enable a provider whose api_key_ref resolves)")
	}
	sel := &aiv1.SelectModelRequest{
		Complexity: req.GetComplexity(), Tags: tags, BudgetMode: req.GetBudgetMode(),
		MinContextWindow: req.GetMinContextWindow(), RequireTools: req.GetRequireTools(),
		RequireVision: req.GetRequireVision(), ExcludeModelIds: exclude,
	}
	chosen, fallbacks, reason, err := registry.Select(cands, sel, s.reg.Preferred())
	if err != nil {
		return nil, err
	}
	resp := &aiv1.SelectModelResponse{Model: chosen.Model, Reason: reason}
	for _, f := range fallbacks {
		resp.Fallbacks = append(resp.Fallbacks, f.Model)
	}
	return resp, nil
}

// GetUsage sums the usage ledger, grouped by the dimensions asked for.
func (s *RegistryServer) GetUsage(ctx context.Context, req *aiv1.GetUsageRequest) (*aiv1.GetUsageResponse, error) {
	f, err := regUsageFilter(req)
	if err != nil {
		return nil, err
	}
	if err := usageScope(ctx, &f); err != nil {
		return nil, err
	}
	for _, g := range req.GetGroupBy() {
		if err := validate.Enum("group_by", g, false); err != nil {
			return nil, err
		}
	}
	rows, total, err := s.st.GetUsage(ctx, f, req.GetGroupBy())
	if err != nil {
		return nil, err
	}
	return &aiv1.GetUsageResponse{Rows: rows, Total: total}, nil
}

// ListUsageRecords lists ledger entries, newest first.
func (s *RegistryServer) ListUsageRecords(ctx context.Context, req *aiv1.ListUsageRecordsRequest) (*aiv1.ListUsageRecordsResponse, error) {
	f, err := regUsageFilter(req)
	if err != nil {
		return nil, err
	}
	if err := usageScope(ctx, &f); err != nil {
		return nil, err
	}
	size, err := validate.PageSize(req.GetPageSize(), regDefaultPage, regMaxPageSize)
	if err != nil {
		return nil, err
	}
	after, err := regDecodeUsageToken(req.GetPageToken())
	if err != nil {
		return nil, err
	}
	recs, next, err := s.st.ListUsageRecords(ctx, f, size, after)
	if err != nil {
		return nil, err
	}
	return &aiv1.ListUsageRecordsResponse{Records: recs, NextPageToken: regEncodeUsageToken(next)}, nil
}
