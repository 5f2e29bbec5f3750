package service

import (
	"context"
	"regexp"
	"slices"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/errs"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/pkg/validate"

	"github.com/thefold/thefold/services/github/internal/forge"
	"github.com/thefold/thefold/services/github/internal/store"
)

// The RPCs that say who may do what: namespaces, collaborators, people's own GitHub tokens
// and the allow-list of the server's token.

// namespacePattern is an owner segment a person may claim: GitHub's rules, lower case.
var namespacePattern = regexp.MustCompile(`^[a-z0-9](?:[a-z0-9_.-]{0,37}[a-z0-9])?$`)

// checkUserID checks a person's id as named in a request.
func checkUserID(field, id string) error {
	switch {
	case id == "":
		return errs.Invalid(field, "required, a user id")
	case len(id) > 128 || !validate.PrintableASCII(id, false):
		return errs.Invalid(field, "%q is not a user id (printable ASCII without spaces, at most 128 characters)", validate.Truncate(id, 64))
	case strings.HasPrefix(id, auth.ServiceSubjectPrefix):
		return errs.Invalid(field, "%q is a service, not a person", validate.Truncate(id, 64))
	}
	return nil
}

// person is the caller when it is a person acting with their own token; a service acting
// for an owner (the agent, the builder) may not change who may do what.
func person(ctx context.Context) (forge.Actor, error) {
	p, err := auth.MustFromContext(ctx)
	if err != nil {
		return forge.Actor{}, err
	}
	if p.Service != "" {
		return forge.Actor{}, errs.Public(codes.PermissionDenied, "the %s service acts for %s and may not change access; only a person may", p.Service, p.UserID)
	}
	return forge.Actor{UserID: p.UserID, Admin: p.HasRole(auth.RoleAdmin)}, nil
}

func namespaceMessage(n *store.Namespace) *githubv1.Namespace {
	m := &githubv1.Namespace{Name: n.Name, UserId: n.UserID, CreateTime: timestamppb.New(n.CreateTime),
		Kind: githubv1.NamespaceKind_NAMESPACE_KIND_USER}
	if n.Kind == "org" {
		m.Kind = githubv1.NamespaceKind_NAMESPACE_KIND_ORG
		for _, mem := range n.Members {
			r := githubv1.NamespaceRole_NAMESPACE_ROLE_MEMBER
			if mem.Role == "admin" {
				r = githubv1.NamespaceRole_NAMESPACE_ROLE_ADMIN
			}
			m.Members = append(m.Members, &githubv1.NamespaceMember{UserId: mem.UserID, Role: r})
		}
	}
	return m
}

// CreateNamespace claims an owner segment of the local forge.
func (s *Server) CreateNamespace(ctx context.Context, req *githubv1.CreateNamespaceRequest) (*githubv1.CreateNamespaceResponse, error) {
	a, err := person(ctx)
	if err != nil {
		return nil, err
	}
	name := req.GetName()
	if name == "" {
		return nil, errs.Invalid("name", "required, the owner segment to claim")
	}
	if !namespacePattern.MatchString(name) {
		return nil, errs.Invalid("name", "%q: want 1–39 lower-case letters, digits, '-', '_' or '.', starting and ending with a letter or digit", validate.Truncate(name, 64))
	}
	if err := validate.Enum("kind", req.GetKind(), false); err != nil {
		return nil, err
	}
	switch {
	case s.sharedOwner(name):
		return nil, errs.Invalid("name", "%q is a shared namespace of this server (anyone creates repositories there); it cannot be claimed", name)
	case s.kindOf(name) == githubv1.RepoProvider_REPO_PROVIDER_GITHUB:
		return nil, errs.Invalid("name", "%q is served by GitHub; its access is GitHub's", name)
	}
	kind := "user"
	if req.GetKind() == githubv1.NamespaceKind_NAMESPACE_KIND_ORG {
		kind = "org"
	}
	n, err := s.store.CreateNamespace(ctx, name, kind, a.UserID)
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "namespace claimed", "name", name, "kind", kind, "user", a.UserID)
	return &githubv1.CreateNamespaceResponse{Namespace: namespaceMessage(n)}, nil
}

// GetNamespace returns a namespace with its members.
func (s *Server) GetNamespace(ctx context.Context, req *githubv1.GetNamespaceRequest) (*githubv1.GetNamespaceResponse, error) {
	if _, err := actor(ctx); err != nil {
		return nil, err
	}
	if req.GetName() == "" {
		return nil, errs.Invalid("name", "required")
	}
	if !namespacePattern.MatchString(req.GetName()) {
		return nil, errs.Invalid("name", "%q is not a namespace name", validate.Truncate(req.GetName(), 64))
	}
	n, err := s.store.GetNamespace(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	return &githubv1.GetNamespaceResponse{Namespace: namespaceMessage(n)}, nil
}

// SetNamespaceMember sets one member's role in an organisation namespace.
func (s *Server) SetNamespaceMember(ctx context.Context, req *githubv1.SetNamespaceMemberRequest) (*githubv1.SetNamespaceMemberResponse, error) {
	a, err := person(ctx)
	if err != nil {
		return nil, err
	}
	if req.GetName() == "" || !namespacePattern.MatchString(req.GetName()) {
		return nil, errs.Invalid("name", "required, a namespace name")
	}
	if err := checkUserID("user_id", req.GetUserId()); err != nil {
		return nil, err
	}
	if err := validate.Enum("role", req.GetRole(), false); err != nil {
		return nil, err
	}
	n, err := s.store.GetNamespace(ctx, req.GetName())
	if err != nil {
		return nil, err
	}
	if n.Kind != "org" {
		return nil, errs.Precondition("namespace %q belongs to one person; only an organisation has members", n.Name)
	}
	isAdmin := slices.ContainsFunc(n.Members, func(m store.Member) bool { return m.UserID == a.UserID && m.Role == "admin" })
	if !isAdmin {
		if !a.Admin {
			return nil, errs.Public(codes.PermissionDenied, "only an admin of %q may change its members", n.Name)
		}
		s.log.WarnContext(ctx, "admin override: changing an organisation's members", "user", a.UserID, "namespace", n.Name)
	}
	role := ""
	switch req.GetRole() {
	case githubv1.NamespaceRole_NAMESPACE_ROLE_MEMBER:
		role = "member"
	case githubv1.NamespaceRole_NAMESPACE_ROLE_ADMIN:
		role = "admin"
	}
	admins := 0
	for _, m := range n.Members {
		if m.Role == "admin" && m.UserID != req.GetUserId() {
			admins++
		}
	}
	if role != "admin" && admins == 0 {
		return nil, errs.Precondition("%s is the last admin of %q; make someone else an admin first", req.GetUserId(), n.Name)
	}
	if err := s.store.SetNamespaceMember(ctx, n.Name, req.GetUserId(), role); err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "namespace member set", "namespace", n.Name, "member", req.GetUserId(), "role", role, "by", a.UserID)
	if n, err = s.store.GetNamespace(ctx, n.Name); err != nil {
		return nil, err
	}
	return &githubv1.SetNamespaceMemberResponse{Namespace: namespaceMessage(n)}, nil
}

// maxListed is the largest page of collaborators or grants.
const maxListed = 200

// listPage reads a list's page size and token; the token is bound to scope (the repository
// or person listed), and after is the last key of the previous page.
func listPage(pageSize int32, token, version, scope, method string) (size int, after string, err error) {
	if size, err = validate.PageSize(pageSize, 100, maxListed); err != nil {
		return 0, "", err
	}
	if token == "" {
		return size, "", nil
	}
	parts, err := validate.DecodePageToken(token, version, 2, method)
	if err != nil {
		return 0, "", err
	}
	if parts[0] != scope {
		return 0, "", validate.BadPageToken(method)
	}
	return size, parts[1], nil
}

// roleName is a requested repository role's stored name ("" removes).
func roleName(field string, r githubv1.RepoRole) (string, error) {
	if err := validate.Enum(field, r, false); err != nil {
		return "", err
	}
	switch r {
	case githubv1.RepoRole_REPO_ROLE_READ:
		return "read", nil
	case githubv1.RepoRole_REPO_ROLE_WRITE:
		return "write", nil
	case githubv1.RepoRole_REPO_ROLE_ADMIN:
		return "admin", nil
	}
	return "", nil
}

func members(rows []store.Member) []*githubv1.Collaborator {
	out := make([]*githubv1.Collaborator, 0, len(rows))
	for _, m := range rows {
		out = append(out, &githubv1.Collaborator{UserId: m.UserID, Role: forge.ParseRole(m.Role).Proto()})
	}
	return out
}

// localOnly refuses a GitHub repository for the local forge's access RPCs.
func (s *Server) localOnly(repo string) error {
	if err := validate.Repo("repo", repo, true); err != nil {
		return err
	}
	owner, _, _ := strings.Cut(repo, "/")
	if s.kindOf(owner) != githubv1.RepoProvider_REPO_PROVIDER_LOCAL {
		return errs.Precondition("%s is on GitHub: its collaborators are managed on GitHub", repo)
	}
	return nil
}

// SetCollaborator gives a person a role on a local repository, or takes it away.
func (s *Server) SetCollaborator(ctx context.Context, req *githubv1.SetCollaboratorRequest) (*githubv1.SetCollaboratorResponse, error) {
	a, err := person(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.localOnly(req.GetRepo()); err != nil {
		return nil, err
	}
	if err := checkUserID("user_id", req.GetUserId()); err != nil {
		return nil, err
	}
	role, err := roleName("role", req.GetRole())
	if err != nil {
		return nil, err
	}
	if _, err := s.localRole(ctx, a, req.GetRepo(), forge.RoleAdmin); err != nil {
		return nil, err
	}
	owner, name, _ := strings.Cut(req.GetRepo(), "/")
	if err := s.store.SetCollaborator(ctx, owner, name, req.GetUserId(), role); err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "collaborator set", "repo", req.GetRepo(), "collaborator", req.GetUserId(), "role", role, "by", a.UserID)
	rows, err := s.store.Collaborators(ctx, owner, name, "", maxListed)
	if err != nil {
		return nil, err
	}
	return &githubv1.SetCollaboratorResponse{Collaborators: members(rows)}, nil
}

// ListCollaborators lists a local repository's collaborators.
func (s *Server) ListCollaborators(ctx context.Context, req *githubv1.ListCollaboratorsRequest) (*githubv1.ListCollaboratorsResponse, error) {
	a, err := actor(ctx)
	if err != nil {
		return nil, err
	}
	if err := s.localOnly(req.GetRepo()); err != nil {
		return nil, err
	}
	size, after, err := listPage(req.GetPageSize(), req.GetPageToken(), "c1", req.GetRepo(), "ListCollaborators")
	if err != nil {
		return nil, err
	}
	if _, err := s.localRole(ctx, a, req.GetRepo(), forge.RoleRead); err != nil {
		return nil, err
	}
	owner, name, _ := strings.Cut(req.GetRepo(), "/")
	rows, err := s.store.Collaborators(ctx, owner, name, after, size+1)
	if err != nil {
		return nil, err
	}
	resp := &githubv1.ListCollaboratorsResponse{}
	if len(rows) > size {
		rows = rows[:size]
		resp.NextPageToken = validate.EncodePageToken("c1", req.GetRepo(), rows[size-1].UserID)
	}
	resp.Collaborators = members(rows)
	return resp, nil
}

// roleReader is a provider that says a person's permission on one of its repositories
// (GitHub's collaborator permission).
type roleReader interface {
	CollaboratorRole(ctx context.Context, repo, login string) (forge.Role, error)
}

// GetCollaboratorRole says what one person may do with a repository: a GitHub login's
// permission on a GitHub repository, a TheFold user's role on a local one.
func (s *Server) GetCollaboratorRole(ctx context.Context, req *githubv1.GetCollaboratorRoleRequest) (*githubv1.GetCollaboratorRoleResponse, error) {
	if err := checkUserID("user", req.GetUser()); err != nil {
		return nil, err
	}
	ctx, p, _, err := s.target(ctx, req.GetRepo(), forge.RoleRead)
	if err != nil {
		return nil, err
	}
	var role forge.Role
	if rr, ok := p.(roleReader); ok {
		if role, err = rr.CollaboratorRole(ctx, req.GetRepo(), req.GetUser()); err != nil {
			return nil, err
		}
	} else {
		owner, name, _ := strings.Cut(req.GetRepo(), "/")
		_, n, err := s.store.RepoRole(ctx, owner, name, req.GetUser())
		if err != nil {
			return nil, err
		}
		role = forge.Role(n)
	}
	return &githubv1.GetCollaboratorRoleResponse{Role: role.Proto()}, nil
}

// eventReader is a provider with an event feed per repository (GitHub).
type eventReader interface {
	RepoEvents(ctx context.Context, repo, etag string) (*githubv1.ReadRepoEventFeedResponse, error)
}

// maxETag bounds an etag.
const maxETag = 200

// ReadRepoEventFeed reads a GitHub repository's event feed, conditionally on etag.
func (s *Server) ReadRepoEventFeed(ctx context.Context, req *githubv1.ReadRepoEventFeedRequest) (*githubv1.ReadRepoEventFeedResponse, error) {
	if len(req.GetEtag()) > maxETag || !validate.PrintableASCII(req.GetEtag(), true) {
		return nil, errs.Invalid("etag", "an ETag of a previous answer (printable ASCII, at most %d characters)", maxETag)
	}
	ctx, p, _, err := s.target(ctx, req.GetRepo(), forge.RoleRead)
	if err != nil {
		return nil, err
	}
	er, ok := p.(eventReader)
	if !ok {
		return nil, errs.Precondition("%s is a local repository: it has no event feed (its issues and pull requests change through TheFold)", req.GetRepo())
	}
	return er.RepoEvents(ctx, req.GetRepo(), req.GetEtag())
}

func credentialMessage(c *store.Credential) *githubv1.GitHubCredential {
	return &githubv1.GitHubCredential{UserId: c.UserID, Hint: c.Hint, CreateTime: timestamppb.New(c.CreateTime)}
}

// SetGitHubCredential stores the caller's own GitHub token, encrypted.
func (s *Server) SetGitHubCredential(ctx context.Context, req *githubv1.SetGitHubCredentialRequest) (*githubv1.SetGitHubCredentialResponse, error) {
	a, err := person(ctx)
	if err != nil {
		return nil, err
	}
	tok := req.GetToken()
	switch {
	case tok == "":
		return nil, errs.Invalid("token", "required, a GitHub personal access token or installation token")
	case len(tok) < 8 || len(tok) > 255 || !validate.PrintableASCII(tok, false):
		return nil, errs.Invalid("token", "not a GitHub token: want 8–255 printable characters without spaces")
	}
	if s.box == nil {
		return nil, errs.Public(codes.FailedPrecondition, "this server cannot store GitHub tokens: the operator has not configured THEFOLD_GITHUB_SECRET_KEY_FILE (or THEFOLD_DATA_DIR)")
	}
	sealed, err := s.box.Seal(tok)
	if err != nil {
		return nil, err
	}
	c, err := s.store.PutCredential(ctx, store.Credential{UserID: a.UserID, Sealed: sealed, Hint: tok[len(tok)-4:]})
	if err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "github credential stored", "user", a.UserID)
	return &githubv1.SetGitHubCredentialResponse{Credential: credentialMessage(c)}, nil
}

// GetGitHubCredential describes the caller's stored token.
func (s *Server) GetGitHubCredential(ctx context.Context, _ *githubv1.GetGitHubCredentialRequest) (*githubv1.GetGitHubCredentialResponse, error) {
	a, err := actor(ctx)
	if err != nil {
		return nil, err
	}
	c, err := s.store.GetCredential(ctx, a.UserID)
	if err != nil {
		return nil, err
	}
	return &githubv1.GetGitHubCredentialResponse{Credential: credentialMessage(c)}, nil
}

// DeleteGitHubCredential forgets the caller's token.
func (s *Server) DeleteGitHubCredential(ctx context.Context, _ *githubv1.DeleteGitHubCredentialRequest) (*githubv1.DeleteGitHubCredentialResponse, error) {
	a, err := person(ctx)
	if err != nil {
		return nil, err
	}
	ok, err := s.store.DeleteCredential(ctx, a.UserID)
	if err != nil {
		return nil, err
	}
	return &githubv1.DeleteGitHubCredentialResponse{Deleted: ok}, nil
}

// grantPattern is "owner/name" or "owner/*".
func checkGrantRepo(field, repo string) error {
	if owner, ok := strings.CutSuffix(repo, "/*"); ok {
		if !ownerPattern.MatchString(owner) {
			return errs.Invalid(field, "%q: want \"owner/name\" or \"owner/*\"", validate.Truncate(repo, 100))
		}
		return nil
	}
	return validate.Repo(field, repo, true)
}

func grantMessages(rows []store.Grant) []*githubv1.GitHubGrant {
	out := make([]*githubv1.GitHubGrant, 0, len(rows))
	for _, g := range rows {
		out = append(out, &githubv1.GitHubGrant{UserId: g.UserID, Repo: g.Repo, Role: forge.ParseRole(g.Role).Proto()})
	}
	return out
}

// SetGitHubGrant sets one person's grant on the server token's repositories (admins only).
func (s *Server) SetGitHubGrant(ctx context.Context, req *githubv1.SetGitHubGrantRequest) (*githubv1.SetGitHubGrantResponse, error) {
	a, err := person(ctx)
	if err != nil {
		return nil, err
	}
	if err := checkUserID("user_id", req.GetUserId()); err != nil {
		return nil, err
	}
	if err := checkGrantRepo("repo", req.GetRepo()); err != nil {
		return nil, err
	}
	role, err := roleName("role", req.GetRole())
	if err != nil {
		return nil, err
	}
	if !a.Admin {
		return nil, errs.Public(codes.PermissionDenied, "only an admin may grant access through the server's GitHub token")
	}
	if err := s.store.SetGrant(ctx, req.GetUserId(), req.GetRepo(), role); err != nil {
		return nil, err
	}
	s.log.InfoContext(ctx, "github grant set", "user", req.GetUserId(), "repo", req.GetRepo(), "role", role, "by", a.UserID)
	rows, err := s.store.Grants(ctx, req.GetUserId(), "", maxListed)
	if err != nil {
		return nil, err
	}
	return &githubv1.SetGitHubGrantResponse{Grants: grantMessages(rows)}, nil
}

// ListGitHubGrants lists a person's grants.
func (s *Server) ListGitHubGrants(ctx context.Context, req *githubv1.ListGitHubGrantsRequest) (*githubv1.ListGitHubGrantsResponse, error) {
	a, err := actor(ctx)
	if err != nil {
		return nil, err
	}
	user := req.GetUserId()
	if user == "" {
		user = a.UserID
	} else if err := checkUserID("user_id", user); err != nil {
		return nil, err
	}
	size, after, err := listPage(req.GetPageSize(), req.GetPageToken(), "g1", user, "ListGitHubGrants")
	if err != nil {
		return nil, err
	}
	if user != a.UserID && !a.Admin {
		return nil, errs.Public(codes.PermissionDenied, "only an admin may list another person's grants")
	}
	rows, err := s.store.Grants(ctx, user, after, size+1)
	if err != nil {
		return nil, err
	}
	resp := &githubv1.ListGitHubGrantsResponse{}
	if len(rows) > size {
		rows = rows[:size]
		resp.NextPageToken = validate.EncodePageToken("g1", user, rows[size-1].Repo)
	}
	resp.Grants = grantMessages(rows)
	return resp, nil
}
