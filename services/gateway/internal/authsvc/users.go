package authsvc

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	gatewayv1 "github.com/thefold/thefold/pkg/gen/thefold/gateway/v1"
	"github.com/thefold/thefold/pkg/validate"
	"github.com/thefold/thefold/services/gateway/internal/store"
)

// UserServer is the UserService: user administration, for admins.
type UserServer struct {
	gatewayv1.UnimplementedUserServiceServer
	*Core
}

const (
	maxDisplayName  = 200
	userPageVersion = "u1"
)

func userProto(u store.User) *gatewayv1.User {
	out := &gatewayv1.User{Id: u.ID, Email: u.Email, DisplayName: u.DisplayName, Role: roleProto(u.Role), Disabled: u.Disabled,
		CreateTime: timestamppb.New(u.CreateTime), UpdateTime: timestamppb.New(u.UpdateTime)}
	if !u.LastLoginTime.IsZero() {
		out.LastLoginTime = timestamppb.New(u.LastLoginTime)
	}
	return out
}

func roleProto(r string) gatewayv1.Role {
	if r == store.RoleAdmin {
		return gatewayv1.Role_ROLE_ADMIN
	}
	return gatewayv1.Role_ROLE_MEMBER
}

func roleFromProto(field string, r gatewayv1.Role, def string) (string, error) {
	switch r {
	case gatewayv1.Role_ROLE_UNSPECIFIED:
		if def != "" {
			return def, nil
		}
		return "", invalid(field, "required")
	case gatewayv1.Role_ROLE_ADMIN:
		return store.RoleAdmin, nil
	case gatewayv1.Role_ROLE_MEMBER:
		return store.RoleMember, nil
	}
	return "", invalid(field, "unknown role %d", r)
}

func checkDisplayName(field, name string) (string, error) {
	name = strings.TrimSpace(name)
	if utf8.RuneCountInString(name) > maxDisplayName {
		return "", invalid(field, "at most %d characters", maxDisplayName)
	}
	if strings.ContainsAny(name, "\r\n\t") {
		return "", invalid(field, "no line breaks or tabs")
	}
	return name, nil
}

// admin is the caller when they are a person with the admin role.
func admin(ctx context.Context) (auth.Principal, error) {
	p, err := auth.RequireRole(ctx, auth.RoleAdmin)
	if err == nil && p.Service != "" {
		err = errs.Public(codes.PermissionDenied, "user administration needs a person with the admin role")
	}
	return p, err
}

// CreateUser adds a person.
func (s *UserServer) CreateUser(ctx context.Context, req *gatewayv1.CreateUserRequest) (*gatewayv1.CreateUserResponse, error) {
	if _, err := admin(ctx); err != nil {
		return nil, err
	}
	norm, err := normalizeEmail("email", req.GetEmail())
	if err != nil {
		return nil, err
	}
	name, err := checkDisplayName("display_name", req.GetDisplayName())
	if err != nil {
		return nil, err
	}
	if name == "" {
		name, _, _ = strings.Cut(strings.TrimSpace(req.GetEmail()), "@")
	}
	role, err := roleFromProto("role", req.GetRole(), store.RoleMember)
	if err != nil {
		return nil, err
	}
	u, err := s.store.CreateUser(ctx, uuid.NewString(), strings.TrimSpace(req.GetEmail()), norm, name, role)
	if errors.Is(err, store.ErrExists) {
		return nil, errs.Public(codes.AlreadyExists, "a user with e-mail address %s already exists", strings.TrimSpace(req.GetEmail()))
	}
	if err != nil {
		return nil, err
	}
	return &gatewayv1.CreateUserResponse{User: userProto(u)}, nil
}

// userID checks a user id: a UUID, or the first admin's.
func userID(field, id string) (string, error) {
	if id == AdminUserID {
		return id, nil
	}
	return validate.UUID(field, id, true)
}

// GetUser returns a user: any to an admin, only themselves to a member.
func (s *UserServer) GetUser(ctx context.Context, req *gatewayv1.GetUserRequest) (*gatewayv1.GetUserResponse, error) {
	p, err := auth.MustFromContext(ctx)
	if err != nil {
		return nil, err
	}
	id, err := userID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	if id != p.UserID {
		if _, err := admin(ctx); err != nil {
			return nil, errs.NotFound("user", id) // a member cannot tell others' ids from none
		}
	}
	u, err := s.store.GetUser(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errs.NotFound("user", id)
	}
	if err != nil {
		return nil, err
	}
	return &gatewayv1.GetUserResponse{User: userProto(u)}, nil
}

// ListUsers pages users by address.
func (s *UserServer) ListUsers(ctx context.Context, req *gatewayv1.ListUsersRequest) (*gatewayv1.ListUsersResponse, error) {
	if _, err := admin(ctx); err != nil {
		return nil, err
	}
	size, err := validate.PageSize(req.GetPageSize(), 50, 200)
	if err != nil {
		return nil, err
	}
	f := store.UserFilter{Limit: size + 1, Disabled: req.Disabled}
	if req.GetRole() != gatewayv1.Role_ROLE_UNSPECIFIED {
		if f.Role, err = roleFromProto("role", req.GetRole(), ""); err != nil {
			return nil, err
		}
	}
	if req.GetPageToken() != "" {
		parts, err := validate.DecodePageToken(req.GetPageToken(), userPageVersion, 1, "ListUsers")
		if err != nil {
			return nil, err
		}
		f.AfterEmail = parts[0]
	}
	users, err := s.store.ListUsers(ctx, f)
	if err != nil {
		return nil, err
	}
	resp := &gatewayv1.ListUsersResponse{}
	if len(users) > size {
		users = users[:size]
		resp.NextPageToken = validate.EncodePageToken(userPageVersion, strings.ToLower(users[size-1].Email))
	}
	for _, u := range users {
		resp.Users = append(resp.Users, userProto(u))
	}
	return resp, nil
}

// UpdateUser changes display_name, role or disabled.
func (s *UserServer) UpdateUser(ctx context.Context, req *gatewayv1.UpdateUserRequest) (*gatewayv1.UpdateUserResponse, error) {
	if _, err := admin(ctx); err != nil {
		return nil, err
	}
	id, err := userID("id", req.GetId())
	if err != nil {
		return nil, err
	}
	if req.GetUser().GetId() != "" && req.GetUser().GetId() != id {
		return nil, invalid("user.id", "must equal id (%s) when set", id)
	}
	paths, err := validate.UpdatePaths(req.GetUpdateMask(), req.GetUser(), []string{"display_name", "role", "disabled"})
	if err != nil {
		return nil, err
	}
	var name, role string
	for _, p := range paths {
		switch p {
		case "display_name":
			if name, err = checkDisplayName("user.display_name", req.GetUser().GetDisplayName()); err != nil {
				return nil, err
			}
			if name == "" {
				return nil, invalid("user.display_name", "must not be empty")
			}
		case "role":
			if role, err = roleFromProto("user.role", req.GetUser().GetRole(), ""); err != nil {
				return nil, err
			}
		case "disabled":
		default:
			return nil, invalid("update_mask", "cannot update %q (updatable: display_name, role, disabled)", p)
		}
	}
	now := s.now()
	u, err := s.store.UpdateUser(ctx, id, func(u *store.User) error {
		for _, p := range paths {
			switch p {
			case "display_name":
				u.DisplayName = name
			case "role":
				u.Role = role
			case "disabled":
				u.Disabled = req.GetUser().GetDisabled()
			}
		}
		return nil
	}, userNotBefore(now), now.Add(s.maxLifetime+time.Minute))
	switch {
	case errors.Is(err, store.ErrNotFound):
		return nil, errs.NotFound("user", id)
	case errors.Is(err, store.ErrLastAdmin):
		return nil, errs.Precondition("user %s is the last enabled admin: make another admin first", id)
	case err != nil:
		return nil, err
	}
	return &gatewayv1.UpdateUserResponse{User: userProto(u)}, nil
}

const (
	attemptPageVersion = "la1"
	// maxReportAddresses bounds a login report's list of addresses.
	maxReportAddresses = 100
	maxReportWindow    = 90 * 24 * time.Hour
)

var outcomes = map[gatewayv1.LoginOutcome]string{
	gatewayv1.LoginOutcome_LOGIN_OUTCOME_CODE_SENT:     store.OutcomeCodeSent,
	gatewayv1.LoginOutcome_LOGIN_OUTCOME_CODE_NOT_SENT: store.OutcomeCodeNotSent,
	gatewayv1.LoginOutcome_LOGIN_OUTCOME_SUCCESS:       store.OutcomeSuccess,
	gatewayv1.LoginOutcome_LOGIN_OUTCOME_BAD_CODE:      store.OutcomeBadCode,
	gatewayv1.LoginOutcome_LOGIN_OUTCOME_LOCKED_OUT:    store.OutcomeLockedOut,
}

func outcomeProto(o string) gatewayv1.LoginOutcome {
	for k, v := range outcomes {
		if v == o {
			return k
		}
	}
	return gatewayv1.LoginOutcome_LOGIN_OUTCOME_UNSPECIFIED
}

// ListLoginAttempts pages the login audit, newest first.
func (s *UserServer) ListLoginAttempts(ctx context.Context, req *gatewayv1.ListLoginAttemptsRequest) (*gatewayv1.ListLoginAttemptsResponse, error) {
	if _, err := admin(ctx); err != nil {
		return nil, err
	}
	size, err := validate.PageSize(req.GetPageSize(), 50, 200)
	if err != nil {
		return nil, err
	}
	f := store.AttemptFilter{Limit: size + 1}
	if req.GetEmail() != "" {
		if f.EmailNorm, err = normalizeEmail("email", req.GetEmail()); err != nil {
			return nil, err
		}
	}
	if o := req.GetOutcome(); o != gatewayv1.LoginOutcome_LOGIN_OUTCOME_UNSPECIFIED {
		var ok bool
		if f.Outcome, ok = outcomes[o]; !ok {
			return nil, invalid("outcome", "unknown outcome %d", o)
		}
	}
	if req.StartTime != nil {
		if err := req.GetStartTime().CheckValid(); err != nil {
			return nil, invalid("start_time", "%v", err)
		}
		f.Since = req.GetStartTime().AsTime()
	}
	if req.GetPageToken() != "" {
		parts, err := validate.DecodePageToken(req.GetPageToken(), attemptPageVersion, 1, "ListLoginAttempts")
		if err != nil {
			return nil, err
		}
		if f.BeforeID, err = strconv.ParseInt(parts[0], 10, 64); err != nil || f.BeforeID <= 0 {
			return nil, invalid("page_token", "not a token ListLoginAttempts returned")
		}
	}
	rows, err := s.store.ListLoginAttempts(ctx, f)
	if err != nil {
		return nil, err
	}
	resp := &gatewayv1.ListLoginAttemptsResponse{}
	if len(rows) > size {
		rows = rows[:size]
		resp.NextPageToken = validate.EncodePageToken(attemptPageVersion, strconv.FormatInt(rows[size-1].ID, 10))
	}
	for _, r := range rows {
		resp.Attempts = append(resp.Attempts, &gatewayv1.LoginAttempt{
			Id: strconv.FormatInt(r.ID, 10), Email: r.EmailNorm, UserId: r.UserID, Peer: r.Peer,
			Outcome: outcomeProto(r.Outcome), Time: timestamppb.New(r.Time),
		})
	}
	return resp, nil
}

// GetLoginReport sums up logins over a window.
func (s *UserServer) GetLoginReport(ctx context.Context, req *gatewayv1.GetLoginReportRequest) (*gatewayv1.GetLoginReportResponse, error) {
	if _, err := admin(ctx); err != nil {
		return nil, err
	}
	window := 24 * time.Hour
	if req.Window != nil {
		if err := req.GetWindow().CheckValid(); err != nil {
			return nil, invalid("window", "%v", err)
		}
		window = req.GetWindow().AsDuration()
		if window < time.Minute || window > maxReportWindow {
			return nil, invalid("window", "from 1m to %s, got %s", maxReportWindow, window)
		}
	}
	minFailures := 5
	if n := req.GetMinFailures(); n != 0 {
		if n < 1 || n > 1000 {
			return nil, invalid("min_failures", "1–1000, got %d", n)
		}
		minFailures = int(n)
	}
	end := s.now()
	start := end.Add(-window)
	r, err := s.store.LoginReport(ctx, start, minFailures, maxReportAddresses)
	if err != nil {
		return nil, err
	}
	resp := &gatewayv1.GetLoginReportResponse{
		StartTime: timestamppb.New(start), EndTime: timestamppb.New(end),
		CodesSent: r.CodesSent, CodesNotSent: r.CodesNotSent, Successes: r.Successes, Failures: r.Failures,
		LockedOutAttempts: r.LockedOut, Truncated: r.Truncated,
	}
	for _, a := range r.Addresses {
		out := &gatewayv1.LoginReportAddress{Email: a.EmailNorm, UserId: a.UserID, Failures: a.Failures,
			LockedOutAttempts: a.LockedOut, Peers: a.Peers, LastFailureTime: timestamppb.New(a.LastFailure)}
		if a.LockedUntil != nil {
			out.LockedUntil = timestamppb.New(*a.LockedUntil)
		}
		resp.Addresses = append(resp.Addresses, out)
	}
	return resp, nil
}
