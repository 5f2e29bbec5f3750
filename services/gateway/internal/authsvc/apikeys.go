package authsvc

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/pkg/validate"
	"github.com/thefold/thefold/services/gateway/internal/store"
)

const (
	maxKeyName = 100
	maxScopes  = 20
	// apiKeySecretWindow is how long a retried CreateAPIKey shows the secret again.
	apiKeySecretWindow = 15 * time.Minute
	keyPageVersion     = "k1"
)

// APIKeyPolicy is what a new API key gets unless its request says otherwise.
type APIKeyPolicy struct {
	// TTL is the lifetime of a key created without expire_time; MaxTTL bounds the
	// expire_time a request may ask for. A leaked key that nobody remembers stops working
	// on its own.
	TTL    time.Duration `env:"THEFOLD_AUTH_API_KEY_TTL, default=2160h"`
	MaxTTL time.Duration `env:"THEFOLD_AUTH_API_KEY_MAX_TTL, default=8760h"`
}

func (p APIKeyPolicy) check() error {
	var errList []error
	if p.TTL <= 0 {
		errList = append(errList, fmt.Errorf("THEFOLD_AUTH_API_KEY_TTL: must be positive, got %s", p.TTL))
	}
	if p.MaxTTL < p.TTL {
		errList = append(errList, fmt.Errorf("THEFOLD_AUTH_API_KEY_MAX_TTL: must be at least THEFOLD_AUTH_API_KEY_TTL (%s), got %s", p.TTL, p.MaxTTL))
	}
	return errors.Join(errList...)
}

// defaultKeyScopes are a key's scopes when its request names none: reading only. A key
// that writes says where (its scopes name the areas, or "*:write").
var defaultKeyScopes = []string{"*:read"}

// keyOwner is the caller who may own API keys: a person, not a service acting for one.
func keyOwner(ctx context.Context) (auth.Principal, error) {
	p, err := auth.MustFromContext(ctx)
	if err != nil {
		return p, err
	}
	if p.Service != "" {
		return p, status.Error(codes.PermissionDenied, "API keys are managed by their owner, not by a service")
	}
	return p, nil
}

// CreateAPIKey creates a key for the caller; the secret is returned once.
func (s *Server) CreateAPIKey(ctx context.Context, req *gatewayv1.CreateAPIKeyRequest) (*gatewayv1.CreateAPIKeyResponse, error) {
	p, err := keyOwner(ctx)
	if err != nil {
		return nil, err
	}
	name := strings.TrimSpace(req.GetName())
	switch {
	case name == "":
		return nil, invalid("name", "required")
	case utf8.RuneCountInString(name) > maxKeyName:
		return nil, invalid("name", "at most %d characters", maxKeyName)
	}
	scopes := req.GetScopes()
	if len(scopes) == 0 {
		scopes = defaultKeyScopes
	}
	if len(scopes) > maxScopes {
		return nil, invalid("scopes", "at most %d", maxScopes)
	}
	if err := auth.CheckScopes(scopes); err != nil {
		return nil, invalid("scopes", "%v", err)
	}
	now := s.now()
	expire := now.Add(s.cfg.APIKeys.TTL)
	if req.GetExpireTime() != nil {
		if err := req.GetExpireTime().CheckValid(); err != nil {
			return nil, invalid("expire_time", "not a valid time")
		}
		switch expire = req.GetExpireTime().AsTime(); {
		case !expire.After(now):
			return nil, invalid("expire_time", "must be in the future")
		case expire.After(now.Add(s.cfg.APIKeys.MaxTTL)):
			return nil, invalid("expire_time", "at most %s ahead (THEFOLD_AUTH_API_KEY_MAX_TTL)", s.cfg.APIKeys.MaxTTL)
		}
	}
	if err := validate.RequestID("request_id", req.GetRequestId()); err != nil {
		return nil, err
	}
	// A key acts as its owner: one made with another key's token would outlive that
	// key's revocation, and could widen its scopes.
	if p.APIKeyID != "" {
		return nil, status.Error(codes.PermissionDenied, "an API key cannot create API keys; log in to create one")
	}
	secret, err := newSecret(auth.APIKeyPrefix)
	if err != nil {
		return nil, err
	}
	sealed, err := s.secrets.seal(secret)
	if err != nil {
		return nil, err
	}
	k, created, err := s.store.CreateAPIKey(ctx, store.APIKey{
		UserID: p.UserID, Name: name, Prefix: secret[:keyPrefixLen], Scopes: scopes, RequestID: req.GetRequestId(),
		SecretEnc: sealed, ExpireTime: expire,
	}, hashSecret(secret))
	if err != nil {
		return nil, err
	}
	if !created {
		// A retry: the first call's key, with its secret while the window lasts.
		secret = ""
		if k.SecretEnc != nil && s.now().Sub(k.CreateTime) < apiKeySecretWindow {
			if secret, err = s.secrets.open(k.SecretEnc); err != nil {
				secret = ""
			}
		}
	}
	return &gatewayv1.CreateAPIKeyResponse{ApiKey: keyProto(k), Secret: secret}, nil
}

// ListAPIKeys pages the caller's keys, newest first.
func (s *Server) ListAPIKeys(ctx context.Context, req *gatewayv1.ListAPIKeysRequest) (*gatewayv1.ListAPIKeysResponse, error) {
	p, err := keyOwner(ctx)
	if err != nil {
		return nil, err
	}
	size, err := validate.PageSize(req.GetPageSize(), 50, 200)
	if err != nil {
		return nil, err
	}
	f := store.KeyFilter{UserID: p.UserID, ShowInactive: req.GetShowInactive(), Limit: size + 1}
	if req.GetPageToken() != "" {
		const method = "ListAPIKeys"
		at, id, err := validate.DecodeTimeIDToken(req.GetPageToken(), keyPageVersion, method)
		if err != nil {
			return nil, err
		}
		f.AfterTime, f.AfterID = at, id
	}
	keys, err := s.store.ListAPIKeys(ctx, f)
	if err != nil {
		return nil, err
	}
	resp := &gatewayv1.ListAPIKeysResponse{}
	if len(keys) > size {
		keys = keys[:size]
		last := keys[size-1]
		resp.NextPageToken = validate.EncodeTimeIDToken(keyPageVersion, last.CreateTime, last.ID)
	}
	for _, k := range keys {
		resp.ApiKeys = append(resp.ApiKeys, keyProto(k))
	}
	return resp, nil
}

// RevokeAPIKey revokes one of the caller's keys.
func (s *Server) RevokeAPIKey(ctx context.Context, req *gatewayv1.RevokeAPIKeyRequest) (*gatewayv1.RevokeAPIKeyResponse, error) {
	p, err := keyOwner(ctx)
	if err != nil {
		return nil, err
	}
	id, err := validate.UUID("id", req.GetId(), true)
	if err != nil {
		return nil, err
	}
	k, err := s.store.RevokeAPIKey(ctx, p.UserID, id, s.now().Add(s.cfg.KeyTokenTTL+time.Minute))
	if errors.Is(err, store.ErrNotFound) {
		return nil, errs.NotFound("API key", id)
	}
	if err != nil {
		return nil, err
	}
	return &gatewayv1.RevokeAPIKeyResponse{ApiKey: keyProto(k)}, nil
}

func keyProto(k store.APIKey) *gatewayv1.APIKey {
	out := &gatewayv1.APIKey{Id: k.ID, Name: k.Name, Prefix: k.Prefix, Scopes: k.Scopes, UserId: k.UserID,
		CreateTime: timestamppb.New(k.CreateTime)}
	if !k.ExpireTime.IsZero() {
		out.ExpireTime = timestamppb.New(k.ExpireTime)
	}
	if !k.LastUsedTime.IsZero() {
		out.LastUsedTime = timestamppb.New(k.LastUsedTime)
	}
	if !k.RevokeTime.IsZero() {
		out.RevokeTime = timestamppb.New(k.RevokeTime)
	}
	return out
}

// exchange checks an API key and issues a token acting for it.
func (c *Core) exchange(ctx context.Context, secret string) (string, time.Time, error) {
	bad := status.Error(codes.Unauthenticated, "invalid, expired or revoked API key")
	if !auth.IsAPIKey(secret) || len(secret) > 100 {
		return "", time.Time{}, bad
	}
	k, err := c.store.KeyByHash(ctx, hashSecret(secret))
	if errors.Is(err, store.ErrNotFound) {
		return "", time.Time{}, bad
	}
	if err != nil {
		return "", time.Time{}, err
	}
	now := c.now()
	if !k.RevokeTime.IsZero() || (!k.ExpireTime.IsZero() && !k.ExpireTime.After(now)) {
		return "", time.Time{}, bad
	}
	u, err := c.store.GetUser(ctx, k.UserID)
	if err != nil || u.Disabled {
		return "", time.Time{}, bad
	}
	ttl := c.cfg.KeyTokenTTL
	if !k.ExpireTime.IsZero() && k.ExpireTime.Sub(now) < ttl {
		ttl = max(k.ExpireTime.Sub(now), time.Second) // no token outlives its key
	}
	tok, p, err := c.issue(ctx, u, ttl, auth.Extra{APIKeyID: k.ID, Scopes: k.Scopes})
	if err != nil {
		return "", time.Time{}, err
	}
	return tok, p.ExpiresAt, nil
}

// Exchanger is the gateway's own auth.KeyExchanger: it checks keys in-process.
func (c *Core) Exchanger() auth.KeyExchanger {
	return func(ctx context.Context, apiKey string) (string, error) {
		tok, _, err := c.exchange(ctx, apiKey)
		return tok, err
	}
}
