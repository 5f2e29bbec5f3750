package authsvc

import (
	"context"
	"crypto/hmac"
	"errors"
	"fmt"
	"strings"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/clientaddr"
	"github.com/thefold/thefold/pkg/errs"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/services/gateway/internal/mailer"
	"github.com/thefold/thefold/services/gateway/internal/store"
)

var invalid = errs.Invalid

// Server is the AuthService.
type Server struct {
	gatewayv1.UnimplementedAuthServiceServer
	*Core
}

// mailTimeout bounds sending one login code.
const mailTimeout = time.Minute

// errBadCode is the one answer to a code that does not work, whatever the reason.
var errBadCode = status.Error(codes.Unauthenticated, "invalid or expired code")

// LoginLimits bound logins beyond the lockout of Config.MaxFailures, which counts failed
// codes for an address from one client (so a stranger locks out only themselves).
type LoginLimits struct {
	// MaxAddressFailures failed codes in a row for an address, from all clients together,
	// lock every client out of it: the ceiling a guesser spread over many addresses meets.
	// 0: none.
	MaxAddressFailures int `env:"THEFOLD_LOGIN_MAX_FAILURES_PER_ADDRESS, default=50"`
	// Code requests in any CodeWindow: for one address from one client, for one address
	// from all clients, and from one client for any addresses. 0: no limit.
	CodeWindow            time.Duration `env:"THEFOLD_LOGIN_CODE_WINDOW, default=15m"`
	CodesPerAddressClient int           `env:"THEFOLD_LOGIN_CODES_PER_ADDRESS_AND_CLIENT, default=20"`
	CodesPerAddress       int           `env:"THEFOLD_LOGIN_CODES_PER_ADDRESS, default=30"`
	CodesPerClient        int           `env:"THEFOLD_LOGIN_CODES_PER_CLIENT, default=100"`
	// TrustedProxies (addresses or CIDR prefixes) may say whom they call for
	// (x-forwarded-for); TrustLocalProxy trusts connections from this host too, which is
	// how the REST edge reaches the gateway's gRPC server. Any other caller's header is
	// ignored: it is keyed and audited by its own address.
	TrustedProxies  []string `env:"THEFOLD_GATEWAY_TRUSTED_PROXIES"`
	TrustLocalProxy bool     `env:"THEFOLD_GATEWAY_TRUST_LOCAL_PROXY, default=true"`
}

func (l LoginLimits) check(maxFailures int) error {
	var errList []error
	if l.MaxAddressFailures < 0 || (l.MaxAddressFailures > 0 && l.MaxAddressFailures < maxFailures) {
		errList = append(errList, fmt.Errorf("THEFOLD_LOGIN_MAX_FAILURES_PER_ADDRESS: must be 0 (none) or at least THEFOLD_LOGIN_MAX_FAILURES (%d), got %d",
			maxFailures, l.MaxAddressFailures))
	}
	for name, n := range map[string]int{"THEFOLD_LOGIN_CODES_PER_ADDRESS_AND_CLIENT": l.CodesPerAddressClient,
		"THEFOLD_LOGIN_CODES_PER_ADDRESS": l.CodesPerAddress, "THEFOLD_LOGIN_CODES_PER_CLIENT": l.CodesPerClient} {
		if n < 0 {
			errList = append(errList, fmt.Errorf("%s: must be 0 (no limit) or positive, got %d", name, n))
		}
	}
	if l.CodeWindow <= 0 && (l.CodesPerAddressClient > 0 || l.CodesPerAddress > 0 || l.CodesPerClient > 0) {
		errList = append(errList, fmt.Errorf("THEFOLD_LOGIN_CODE_WINDOW: must be positive, got %s", l.CodeWindow))
	}
	if _, err := clientaddr.ParsePrefixes(l.TrustedProxies); err != nil {
		errList = append(errList, fmt.Errorf("THEFOLD_GATEWAY_TRUSTED_PROXIES: %w", err))
	}
	return errors.Join(errList...)
}

func (l LoginLimits) codeLimits() store.CodeLimits {
	return store.CodeLimits{Window: l.CodeWindow, PerAddressClient: l.CodesPerAddressClient,
		PerAddress: l.CodesPerAddress, PerClient: l.CodesPerClient}
}

// RequestLoginCode sends a code to a known, enabled user; the answer is the same for any
// address. A caller locked out of the address, or over a limit of code requests, is
// refused (RESOURCE_EXHAUSTED with RetryInfo) whether the address is known or not.
func (s *Server) RequestLoginCode(ctx context.Context, req *gatewayv1.RequestLoginCodeRequest) (*gatewayv1.RequestLoginCodeResponse, error) {
	norm, err := normalizeEmail("email", req.GetEmail())
	if err != nil {
		return nil, err
	}
	now := s.now()
	resp := &gatewayv1.RequestLoginCodeResponse{ExpireTime: timestamppb.New(now.Add(s.cfg.CodeTTL))}
	u, err := s.store.UserByEmail(ctx, norm)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	r := store.CodeRequest{EmailNorm: norm, UserID: u.ID, Caller: s.caller(ctx), Expire: now.Add(s.cfg.CodeTTL)}
	var code string
	if err == nil && !u.Disabled {
		if code, err = newCode(); err != nil {
			return nil, err
		}
		r.Hash = s.secrets.codeHash(u.ID, code)
	} else {
		// The same work as for a known address, so timing says no more than the answer.
		_ = s.secrets.codeHash(norm, "000000")
	}
	err = s.store.RequestCode(ctx, r, s.cfg.Login.codeLimits())
	var locked *store.LockedError
	var limited *store.RateLimitedError
	switch {
	case errors.As(err, &locked):
		return nil, lockedOut(locked.Until)
	case errors.As(err, &limited):
		return nil, errs.ResourceExhausted(limited.RetryAfter.Round(time.Second),
			"too many login codes requested %s; try again in %s", limited.Limit, limited.RetryAfter.Round(time.Second))
	case err != nil:
		return nil, err
	}
	if r.Hash == nil {
		return resp, nil
	}
	s.sendMail(ctx, u.ID, mailer.Message{
		To: u.Email,
		// The code is in the text only: subjects are shown in notifications and logged by
		// mail servers.
		Subject: "Your TheFold login code",
		Text: "Your TheFold login code is " + code + ".\n\nIt works once, within " + s.cfg.CodeTTL.String() +
			". If you did not ask for it, ignore this message.\n",
	})
	return resp, nil
}

func lockedOut(until time.Time) error {
	wait := max(time.Until(until), time.Second).Round(time.Second)
	return errs.ResourceExhausted(wait, "too many failed login attempts; try again in %s", wait)
}

// VerifyLoginCode exchanges a code for a new session.
func (s *Server) VerifyLoginCode(ctx context.Context, req *gatewayv1.VerifyLoginCodeRequest) (*gatewayv1.VerifyLoginCodeResponse, error) {
	norm, err := normalizeEmail("email", req.GetEmail())
	if err != nil {
		return nil, err
	}
	code := strings.TrimSpace(req.GetCode())
	if code == "" {
		return nil, invalid("code", "required")
	}
	if len(code) != 6 || strings.Trim(code, "0123456789") != "" {
		return nil, invalid("code", "want the 6 digits from the e-mail")
	}
	u, err := s.store.UserByEmail(ctx, norm)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return nil, err
	}
	userID := u.ID
	if u.Disabled {
		userID = ""
	}
	var want []byte
	if userID != "" {
		want = s.secrets.codeHash(userID, code)
	}
	c := s.caller(ctx)
	err = s.store.VerifyCode(ctx, norm, userID, c, func(h []byte) bool { return hmac.Equal(h, want) },
		store.LockoutPolicy{MaxFailures: s.cfg.MaxFailures, MaxAddressFailures: s.cfg.Login.MaxAddressFailures,
			Base: s.cfg.LockoutBase, Max: s.cfg.LockoutMax})
	var locked *store.LockedError
	var started *store.LockoutStartedError
	switch {
	case errors.As(err, &locked):
		return nil, lockedOut(locked.Until)
	case errors.As(err, &started):
		// For the operator: someone guessing codes, or someone who cannot get in. An admin
		// sees the details with GetLoginReport and ListLoginAttempts.
		s.log.Warn("login address locked out after failed codes", "email", norm, "known", userID != "",
			"peer", c.Peer, "address_wide", started.AddressWide, "until", started.Until, "lockouts_in_a_row", started.InARow)
		return nil, errBadCode
	case errors.Is(err, store.ErrBadCode):
		return nil, errBadCode
	case err != nil:
		return nil, err
	}
	pair, err := s.newSession(ctx, u)
	if err != nil {
		return nil, err
	}
	u.LastLoginTime = s.now()
	return &gatewayv1.VerifyLoginCodeResponse{Tokens: pair, User: userProto(u)}, nil
}

// newSession starts a session for u: its first refresh token and access token.
func (s *Server) newSession(ctx context.Context, u store.User) (*gatewayv1.TokenPair, error) {
	refresh, err := newSecret(refreshPrefix)
	if err != nil {
		return nil, err
	}
	expire := s.now().Add(s.cfg.RefreshTTL)
	sid, err := s.store.CreateSession(ctx, u.ID, expire, hashSecret(refresh))
	if err != nil {
		return nil, err
	}
	return s.pair(ctx, u, sid, refresh, expire)
}

func (s *Server) pair(ctx context.Context, u store.User, sid, refresh string, refreshExpire time.Time) (*gatewayv1.TokenPair, error) {
	tok, p, err := s.issue(ctx, u, s.cfg.AccessTTL, auth.Extra{SessionID: sid})
	if err != nil {
		return nil, err
	}
	return &gatewayv1.TokenPair{AccessToken: tok, AccessExpireTime: timestamppb.New(p.ExpiresAt),
		RefreshToken: refresh, RefreshExpireTime: timestamppb.New(refreshExpire)}, nil
}

// refreshGrace is how long a spent refresh token still returns its successor (a retry
// after a lost response).
const refreshGrace = 30 * time.Second

var errBadRefresh = status.Error(codes.Unauthenticated, "invalid or expired refresh token")

// RefreshToken rotates a session's refresh token.
func (s *Server) RefreshToken(ctx context.Context, req *gatewayv1.RefreshTokenRequest) (*gatewayv1.RefreshTokenResponse, error) {
	tok := req.GetRefreshToken()
	switch {
	case tok == "":
		return nil, invalid("refresh_token", "required")
	case !strings.HasPrefix(tok, refreshPrefix) || len(tok) > 100:
		return nil, invalid("refresh_token", "not a refresh token (it starts with %q)", refreshPrefix)
	}
	next := s.secrets.successor(tok)
	r, res, err := s.store.SpendRefresh(ctx, hashSecret(tok), hashSecret(next), refreshGrace, s.sessionRevocationExpiry())
	if err != nil {
		return nil, err
	}
	if res == store.Reused {
		s.log.Warn("refresh token reused after its grace period: session ended", "session_id", r.SessionID, "user_id", r.UserID)
	}
	if res != store.Spent && res != store.Retried {
		return nil, errBadRefresh
	}
	u, err := s.store.GetUser(ctx, r.UserID)
	if err != nil || u.Disabled {
		return nil, errBadRefresh
	}
	pair, err := s.pair(ctx, u, r.SessionID, next, r.SessionExpire)
	if err != nil {
		return nil, err
	}
	return &gatewayv1.RefreshTokenResponse{Tokens: pair}, nil
}

// sessionRevocationExpiry is how long a session's revocation must last: past every access
// token the session issued.
func (s *Server) sessionRevocationExpiry() time.Time {
	return s.now().Add(s.cfg.AccessTTL + time.Minute)
}

// RevokeToken revokes an access token (the caller's own when empty) or a refresh token's
// session.
func (s *Server) RevokeToken(ctx context.Context, req *gatewayv1.RevokeTokenRequest) (*gatewayv1.RevokeTokenResponse, error) {
	p, err := auth.MustFromContext(ctx)
	if err != nil {
		return nil, err
	}
	tok := strings.TrimSpace(req.GetToken())
	switch {
	case tok == "":
		if p.Service != "" {
			return nil, status.Error(codes.PermissionDenied, "a service token cannot be revoked")
		}
		return &gatewayv1.RevokeTokenResponse{}, s.store.Revoke(ctx, store.Revocation{Type: store.RevokeToken, Subject: p.TokenID, Expire: p.ExpiresAt})
	case auth.IsAPIKey(tok):
		return nil, invalid("token", "an API key: revoke it with RevokeAPIKey")
	case strings.HasPrefix(tok, refreshPrefix):
		err := s.store.EndSessionByRefresh(ctx, hashSecret(tok), s.sessionRevocationExpiry())
		if errors.Is(err, store.ErrNotFound) {
			return nil, invalid("token", "not a refresh token this server issued")
		}
		return &gatewayv1.RevokeTokenResponse{}, err
	}
	target, err := s.verifier.Verify(tok)
	if errors.Is(err, auth.ErrRevoked) {
		return &gatewayv1.RevokeTokenResponse{}, nil // already revoked
	}
	if err != nil {
		return nil, invalid("token", "not a valid access token or refresh token (an expired token needs no revoking)")
	}
	if target.Service != "" {
		return nil, invalid("token", "a service token cannot be revoked (it lives minutes)")
	}
	return &gatewayv1.RevokeTokenResponse{}, s.store.Revoke(ctx, store.Revocation{Type: store.RevokeToken, Subject: target.TokenID, Expire: target.ExpiresAt})
}

// WhoAmI returns the caller as every service sees it.
func (s *Server) WhoAmI(ctx context.Context, _ *gatewayv1.WhoAmIRequest) (*gatewayv1.WhoAmIResponse, error) {
	p, err := auth.MustFromContext(ctx)
	if err != nil {
		return nil, err
	}
	role := gatewayv1.Role_ROLE_MEMBER
	if p.HasRole(auth.RoleAdmin) {
		role = gatewayv1.Role_ROLE_ADMIN
	}
	resp := &gatewayv1.WhoAmIResponse{UserId: p.UserID, Role: role, TokenId: p.TokenID, Scopes: p.Scopes}
	if !p.ExpiresAt.IsZero() {
		resp.ExpireTime = timestamppb.New(p.ExpiresAt)
	}
	return resp, nil
}
