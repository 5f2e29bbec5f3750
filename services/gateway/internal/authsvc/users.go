package authsvc

import (
	"context"
	"errors"
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
	paths := req.GetUpdateMask().GetPaths()
	if len(paths) == 0 {
		return nil, invalid("update_mask", "required: name the fields to change (display_name, role, disabled)")
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
