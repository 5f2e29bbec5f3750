package service

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/github/internal/forge"
	"github.com/thefold/thefold/services/github/internal/store"
)

// Access. Every RPC on a repository names the role it needs (read, write, admin) and
// authorize checks it before a provider is called:
//
//   - local forge: the caller's role is the greatest of what creating the repository,
//     holding its namespace (or administering its organisation), membership of its
//     organisation (read), a collaborator role and its being public (read) give — the
//     repo_role function of the schema. A private repository the caller has no role on is
//     NOT_FOUND; a visible one they lack the role for is PERMISSION_DENIED.
//   - GitHub: the call carries the caller's own token (SetGitHubCredential), so GitHub
//     decides; without one, the server's token is used only within the caller's
//     allow-list grants (SetGitHubGrant), and anything else is refused before a request
//     leaves.
//
// TheFold's admins may do everything; when that takes more than their own role, it is
// logged as an admin override (the audit). Services acting for an owner (the agent, the
// builder) carry the owner's identity, so they get exactly the owner's role.

// target checks that the caller may act on repo with need, and returns ctx carrying the
// forge credential the provider must call with, the provider and the actor.
func (s *Server) target(ctx context.Context, repo string, need forge.Role) (context.Context, forge.Provider, forge.Actor, error) {
	a, err := actor(ctx)
	if err != nil {
		return ctx, nil, a, err
	}
	p, err := s.route("repo", repo)
	if err != nil {
		return ctx, nil, a, err
	}
	if p.Kind() == githubv1.RepoProvider_REPO_PROVIDER_GITHUB {
		ctx, err = s.githubCredential(ctx, a, repo, need)
		return ctx, p, a, err
	}
	if _, err := s.localRole(ctx, a, repo, need); err != nil {
		return ctx, nil, a, err
	}
	return ctx, p, a, nil
}

// localRole is the caller's role on a local repository, refused below need.
func (s *Server) localRole(ctx context.Context, a forge.Actor, repo string, need forge.Role) (forge.Role, error) {
	owner, name, _ := strings.Cut(repo, "/")
	r, n, err := s.store.RepoRole(ctx, owner, name, a.UserID)
	if err != nil {
		return forge.RoleNone, err
	}
	role := forge.Role(n)
	if a.Admin {
		if role < need {
			s.log.WarnContext(ctx, "admin override: acting on a repository beyond the admin's own role",
				"user", a.UserID, "repo", repo, "role", role.String(), "needs", need.String())
		}
		return forge.RoleAdmin, nil
	}
	switch {
	case role == forge.RoleNone && r.Private:
		return role, fmt.Errorf("repository %q: %w", repo, errs.ErrNotFound)
	case role < need:
		return role, errs.Public(codes.PermissionDenied, "you have %s access to %s; this needs %s (its owner or an admin grants it with SetCollaborator)",
			role, repo, need)
	}
	return role, nil
}

// githubCredential puts the GitHub token the caller may use for repo into ctx.
func (s *Server) githubCredential(ctx context.Context, a forge.Actor, repo string, need forge.Role) (context.Context, error) {
	tok, err := s.ownCredential(ctx, a.UserID)
	if err != nil {
		return ctx, err
	}
	if tok != "" {
		return forge.WithCredential(ctx, tok), nil
	}
	if s.cfg.Token == "" {
		return ctx, errs.Public(codes.PermissionDenied, "no GitHub credential: set your own token with SetGitHubCredential (PUT /v1/github/credential)")
	}
	if a.Admin {
		s.log.InfoContext(ctx, "admin acting on GitHub with the server's token", "user", a.UserID, "repo", repo, "needs", need.String())
		return forge.WithCredential(ctx, s.cfg.Token), nil
	}
	role := forge.RoleNone
	if repo != "" {
		g, err := s.store.GrantRole(ctx, a.UserID, repo)
		if err != nil {
			return ctx, err
		}
		role = forge.ParseRole(g)
	}
	if role < need {
		return ctx, errs.Public(codes.PermissionDenied, "%s is not in your GitHub allow-list with %s access (you have %s): set your own token with SetGitHubCredential, or ask an admin for a grant",
			validate.Truncate(repo, 200), need, role)
	}
	return forge.WithCredential(ctx, s.cfg.Token), nil
}

// ownCredential is the caller's own GitHub token, "" when they stored none.
func (s *Server) ownCredential(ctx context.Context, user string) (string, error) {
	c, err := s.store.GetCredential(ctx, user)
	if errors.Is(err, errs.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	if s.box == nil {
		return "", errs.Public(codes.FailedPrecondition, "your GitHub token cannot be read: the operator has not configured THEFOLD_GITHUB_SECRET_KEY_FILE")
	}
	tok, err := s.box.Open(c.Sealed)
	if err != nil {
		return "", errs.Public(codes.FailedPrecondition, "your stored GitHub token cannot be decrypted (the server's key changed); set it again").Wrap(err)
	}
	return tok, nil
}

// sharedOwner reports whether owner is a shared namespace of the local forge, where anyone
// may create a repository and owns what they create.
func (s *Server) sharedOwner(owner string) bool {
	return owner == "local" || slices.Contains(s.cfg.SharedOwners, owner)
}

// checkCreate checks that the caller may create a repository under owner on the local forge.
func (s *Server) checkCreate(ctx context.Context, a forge.Actor, owner string) error {
	if s.sharedOwner(owner) {
		return nil
	}
	ns, err := s.store.GetNamespace(ctx, owner)
	if errors.Is(err, errs.ErrNotFound) {
		if a.Admin {
			s.log.WarnContext(ctx, "admin override: creating a repository under an unclaimed owner", "user", a.UserID, "owner", owner)
			return nil
		}
		return errs.Public(codes.FailedPrecondition, "owner %q is not a namespace: claim it with CreateNamespace (POST /v1/namespaces) or create under local/", owner)
	}
	if err != nil {
		return err
	}
	if ns.Kind == "user" && ns.UserID == a.UserID {
		return nil
	}
	if ns.Kind == "org" && slices.ContainsFunc(ns.Members, func(m store.Member) bool { return m.UserID == a.UserID }) {
		return nil
	}
	if a.Admin {
		s.log.WarnContext(ctx, "admin override: creating a repository in another's namespace", "user", a.UserID, "owner", owner)
		return nil
	}
	return errs.Public(codes.PermissionDenied, "namespace %q belongs to someone else: create under your own namespace, an organisation you belong to, or local/", owner)
}
