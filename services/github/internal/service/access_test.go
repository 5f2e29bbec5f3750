package service_test

import (
	"context"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// writes are every write RPC of RepoService on repo (its issue and pull request #1 exist).
func writes(c githubv1.RepoServiceClient, repo string) map[string]func(ctx context.Context) error {
	return map[string]func(ctx context.Context) error{
		"InitRepo": func(ctx context.Context) error {
			_, err := c.InitRepo(ctx, &githubv1.InitRepoRequest{Repo: repo})
			return err
		},
		"CreateBranch": func(ctx context.Context) error {
			_, err := c.CreateBranch(ctx, &githubv1.CreateBranchRequest{Repo: repo, Branch: "squat"})
			return err
		},
		"CommitFiles": func(ctx context.Context) error {
			_, err := c.CommitFiles(ctx, &githubv1.CommitFilesRequest{Repo: repo, Branch: "main", Message: "mine now",
				Files: []*typev1.FileChange{create("owned.txt", "x\n")}})
			return err
		},
		"CreatePullRequest": func(ctx context.Context) error {
			_, err := c.CreatePullRequest(ctx, &githubv1.CreatePullRequestRequest{Repo: repo, Head: "feature", Title: "t"})
			return err
		},
		"MergePullRequest": func(ctx context.Context) error {
			_, err := c.MergePullRequest(ctx, &githubv1.MergePullRequestRequest{Repo: repo, Number: 1})
			return err
		},
		"MergeBaseIntoPullRequest": func(ctx context.Context) error {
			_, err := c.MergeBaseIntoPullRequest(ctx, &githubv1.MergeBaseIntoPullRequestRequest{Repo: repo, Number: 1})
			return err
		},
		"CreateMergeGroup": func(ctx context.Context) error {
			_, err := c.CreateMergeGroup(ctx, &githubv1.CreateMergeGroupRequest{Repo: repo, Base: "main", Numbers: []int32{1}})
			return err
		},
		"ClosePullRequest": func(ctx context.Context) error {
			_, err := c.ClosePullRequest(ctx, &githubv1.ClosePullRequestRequest{Repo: repo, Number: 1})
			return err
		},
		"CreateIssue": func(ctx context.Context) error {
			_, err := c.CreateIssue(ctx, &githubv1.CreateIssueRequest{Repo: repo, Title: "t"})
			return err
		},
		"UpdateIssue": func(ctx context.Context) error {
			_, err := c.UpdateIssue(ctx, &githubv1.UpdateIssueRequest{Repo: repo, Number: 2, Issue: &githubv1.Issue{Title: "x"},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"title"}}})
			return err
		},
		"CommentOnIssue": func(ctx context.Context) error {
			_, err := c.CommentOnIssue(ctx, &githubv1.CommentOnIssueRequest{Repo: repo, Number: 2, Body: "hi"})
			return err
		},
		"SetCollaborator": func(ctx context.Context) error {
			_, err := c.SetCollaborator(ctx, &githubv1.SetCollaboratorRequest{Repo: repo, UserId: "carol", Role: githubv1.RepoRole_REPO_ROLE_ADMIN})
			return err
		},
	}
}

// seedRepo makes repo (as ctx) with a main branch, a feature branch, pull request #1 and
// issue #2.
func seedRepo(t *testing.T, e *env, ctx context.Context, repo string, private bool) {
	t.Helper()
	c := e.client
	if _, err := c.CreateRepo(ctx, &githubv1.CreateRepoRequest{Repo: repo, AutoInit: true, Private: private}); err != nil {
		t.Fatalf("CreateRepo %s: %v", repo, err)
	}
	if _, err := c.CreateBranch(ctx, &githubv1.CreateBranchRequest{Repo: repo, Branch: "feature"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CommitFiles(ctx, &githubv1.CommitFilesRequest{Repo: repo, Branch: "feature", Message: "f",
		Files: []*typev1.FileChange{create("f.txt", "f\n")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreatePullRequest(ctx, &githubv1.CreatePullRequestRequest{Repo: repo, Head: "feature", Title: "f"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateIssue(ctx, &githubv1.CreateIssueRequest{Repo: repo, Title: "i"}); err != nil {
		t.Fatal(err)
	}
}

// A member cannot write to another's repository: every write RPC is PERMISSION_DENIED on a
// public one and NOT_FOUND on a private one, with read access or none; a collaborator with
// write may push but not merge or change settings; the agent acting for a member has the
// member's rights, no more; TheFold's admins may do everything.
func TestRepositoryPermissions(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	seedRepo(t, e, e.admin, "local/theirs", false)
	seedRepo(t, e, e.alice, "local/secret", true)

	for _, call := range writes(c, "local/theirs") {
		wantCode(t, call(e.alice), codes.PermissionDenied, "")
		wantCode(t, call(e.grpc.ServiceContext(t, "agent", "alice")), codes.PermissionDenied, "")
	}
	for _, call := range writes(c, "local/secret") {
		wantCode(t, call(e.bob), codes.NotFound, "")
	}
	// Reads of a public repository stay open; a private one is invisible.
	if _, err := c.GetTree(e.alice, &githubv1.GetTreeRequest{Repo: "local/theirs"}); err != nil {
		t.Fatal(err)
	}
	_, err := c.GetTree(e.bob, &githubv1.GetTreeRequest{Repo: "local/secret"})
	wantCode(t, err, codes.NotFound, "")
	list, err := c.ListRepos(e.bob, &githubv1.ListReposRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range list.GetRepos() {
		if r.GetRepo() == "local/secret" {
			t.Fatal("bob lists alice's private repository")
		}
		if r.GetRepo() == "local/theirs" && r.GetPermission() != githubv1.RepoRole_REPO_ROLE_READ {
			t.Fatalf("bob's permission on a public repository: %v", r.GetPermission())
		}
	}

	// Read access as a collaborator: visible, still no writes.
	if _, err := c.SetCollaborator(e.alice, &githubv1.SetCollaboratorRequest{Repo: "local/secret", UserId: "bob", Role: githubv1.RepoRole_REPO_ROLE_READ}); err != nil {
		t.Fatal(err)
	}
	if r, err := c.GetRepo(e.bob, &githubv1.GetRepoRequest{Repo: "local/secret"}); err != nil || r.GetRepo().GetPermission() != githubv1.RepoRole_REPO_ROLE_READ {
		t.Fatalf("bob with read: %v %v", r, err)
	}
	for _, call := range writes(c, "local/secret") {
		wantCode(t, call(e.bob), codes.PermissionDenied, "")
	}
	// Write: pushes (updating a pull request's branch too, or grouping pull requests) and
	// issues, but no merge and no settings.
	if _, err := c.SetCollaborator(e.alice, &githubv1.SetCollaboratorRequest{Repo: "local/secret", UserId: "bob", Role: githubv1.RepoRole_REPO_ROLE_WRITE}); err != nil {
		t.Fatal(err)
	}
	w := writes(c, "local/secret")
	for _, ok := range []string{"CreateBranch", "CommitFiles", "CreateIssue", "CommentOnIssue", "UpdateIssue", "MergeBaseIntoPullRequest", "CreateMergeGroup"} {
		if err := w[ok](e.bob); err != nil {
			t.Fatalf("%s by a writer: %v", ok, err)
		}
	}
	// The agent acting for bob gets bob's rights.
	if err := w["CommentOnIssue"](e.grpc.ServiceContext(t, "agent", "bob")); err != nil {
		t.Fatalf("the agent acting for a writer: %v", err)
	}
	for _, no := range []string{"MergePullRequest", "SetCollaborator"} {
		wantCode(t, w[no](e.bob), codes.PermissionDenied, "")
	}
	if err := w["MergePullRequest"](e.alice); err != nil {
		t.Fatalf("the owner merges: %v", err)
	}
	// A service cannot change who may do what, even for the repository's owner.
	wantCode(t, w["SetCollaborator"](e.grpc.ServiceContext(t, "agent", "alice")), codes.PermissionDenied, "")
	// What each person may do, as another reader asks it.
	for user, want := range map[string]githubv1.RepoRole{"alice": githubv1.RepoRole_REPO_ROLE_ADMIN, "bob": githubv1.RepoRole_REPO_ROLE_WRITE,
		"carol": githubv1.RepoRole_REPO_ROLE_NONE} {
		got, err := c.GetCollaboratorRole(e.bob, &githubv1.GetCollaboratorRoleRequest{Repo: "local/secret", User: user})
		if err != nil || got.GetRole() != want {
			t.Fatalf("role of %s: %v %v, want %v", user, got, err, want)
		}
	}
	// Removing bob takes it all away again.
	if _, err := c.SetCollaborator(e.alice, &githubv1.SetCollaboratorRequest{Repo: "local/secret", UserId: "bob", Role: githubv1.RepoRole_REPO_ROLE_NONE}); err != nil {
		t.Fatal(err)
	}
	wantCode(t, w["CommentOnIssue"](e.bob), codes.NotFound, "")
	_, err = c.GetCollaboratorRole(e.bob, &githubv1.GetCollaboratorRoleRequest{Repo: "local/secret", User: "alice"})
	wantCode(t, err, codes.NotFound, "")
	// TheFold's admin may do everything.
	if err := w["CommentOnIssue"](e.admin); err != nil {
		t.Fatalf("an admin: %v", err)
	}
	if got, err := c.ListCollaborators(e.admin, &githubv1.ListCollaboratorsRequest{Repo: "local/secret"}); err != nil || len(got.GetCollaborators()) != 0 {
		t.Fatalf("collaborators: %v %v", got, err)
	}
	// Collaborators page by user id.
	for _, u := range []string{"u1", "u2", "u3"} {
		if _, err := c.SetCollaborator(e.alice, &githubv1.SetCollaboratorRequest{Repo: "local/secret", UserId: u, Role: githubv1.RepoRole_REPO_ROLE_READ}); err != nil {
			t.Fatal(err)
		}
	}
	p1, err := c.ListCollaborators(e.alice, &githubv1.ListCollaboratorsRequest{Repo: "local/secret", PageSize: 2})
	if err != nil || len(p1.GetCollaborators()) != 2 || p1.GetNextPageToken() == "" {
		t.Fatalf("page 1: %v %v", p1, err)
	}
	p2, err := c.ListCollaborators(e.alice, &githubv1.ListCollaboratorsRequest{Repo: "local/secret", PageSize: 2, PageToken: p1.GetNextPageToken()})
	if err != nil || len(p2.GetCollaborators()) != 1 || p2.GetCollaborators()[0].GetUserId() != "u3" || p2.GetNextPageToken() != "" {
		t.Fatalf("page 2: %v %v", p2, err)
	}
	_, err = c.ListCollaborators(e.alice, &githubv1.ListCollaboratorsRequest{Repo: "local/theirs", PageToken: p1.GetNextPageToken()})
	wantCode(t, err, codes.InvalidArgument, "page_token")
}

// The owner segment of a name is tied to its holder: a user's namespace, an organisation's
// members, or a shared one.
func TestNamespaces(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	user := githubv1.NamespaceKind_NAMESPACE_KIND_USER
	org := githubv1.NamespaceKind_NAMESPACE_KIND_ORG

	if _, err := c.CreateNamespace(e.alice, &githubv1.CreateNamespaceRequest{Name: "alice", Kind: user}); err != nil {
		t.Fatal(err)
	}
	_, err := c.CreateNamespace(e.bob, &githubv1.CreateNamespaceRequest{Name: "alice", Kind: user})
	wantCode(t, err, codes.AlreadyExists, "")
	_, err = c.CreateNamespace(e.alice, &githubv1.CreateNamespaceRequest{Name: "alice2", Kind: user})
	wantCode(t, err, codes.FailedPrecondition, "")
	_, err = c.CreateNamespace(e.grpc.ServiceContext(t, "agent", "bob"), &githubv1.CreateNamespaceRequest{Name: "bobby", Kind: user})
	wantCode(t, err, codes.PermissionDenied, "")

	// Squatting another's segment, or an unclaimed one, is refused.
	_, err = c.CreateRepo(e.bob, &githubv1.CreateRepoRequest{Repo: "alice/app"})
	wantCode(t, err, codes.PermissionDenied, "")
	_, err = c.CreateRepo(e.bob, &githubv1.CreateRepoRequest{Repo: "carol/app"})
	wantCode(t, err, codes.FailedPrecondition, "")
	if _, err := c.CreateRepo(e.alice, &githubv1.CreateRepoRequest{Repo: "alice/app", AutoInit: true}); err != nil {
		t.Fatal(err)
	}
	// Shared: anyone creates, and owns what they create.
	if _, err := c.CreateRepo(e.bob, &githubv1.CreateRepoRequest{Repo: "local/bobs", AutoInit: true}); err != nil {
		t.Fatal(err)
	}
	if r, err := c.GetRepo(e.bob, &githubv1.GetRepoRequest{Repo: "local/bobs"}); err != nil || r.GetRepo().GetPermission() != githubv1.RepoRole_REPO_ROLE_ADMIN {
		t.Fatalf("creator's role: %v %v", r, err)
	}

	// Organisations: members create and read; admins administer.
	if _, err := c.CreateNamespace(e.bob, &githubv1.CreateNamespaceRequest{Name: "acme", Kind: org}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateRepo(e.bob, &githubv1.CreateRepoRequest{Repo: "acme/vault", Private: true, AutoInit: true}); err != nil {
		t.Fatal(err)
	}
	_, err = c.CreateRepo(e.alice, &githubv1.CreateRepoRequest{Repo: "acme/mine"})
	wantCode(t, err, codes.PermissionDenied, "")
	_, err = c.SetNamespaceMember(e.alice, &githubv1.SetNamespaceMemberRequest{Name: "acme", UserId: "alice", Role: githubv1.NamespaceRole_NAMESPACE_ROLE_ADMIN})
	wantCode(t, err, codes.PermissionDenied, "")
	if _, err := c.SetNamespaceMember(e.bob, &githubv1.SetNamespaceMemberRequest{Name: "acme", UserId: "alice", Role: githubv1.NamespaceRole_NAMESPACE_ROLE_MEMBER}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateRepo(e.alice, &githubv1.CreateRepoRequest{Repo: "acme/mine"}); err != nil {
		t.Fatalf("a member creates in the organisation: %v", err)
	}
	if r, err := c.GetRepo(e.alice, &githubv1.GetRepoRequest{Repo: "acme/vault"}); err != nil || r.GetRepo().GetPermission() != githubv1.RepoRole_REPO_ROLE_READ {
		t.Fatalf("a member reads the organisation's private repository: %v %v", r, err)
	}
	wantCode(t, writes(c, "acme/vault")["CreateIssue"](e.alice), codes.PermissionDenied, "")
	_, err = c.SetNamespaceMember(e.bob, &githubv1.SetNamespaceMemberRequest{Name: "acme", UserId: "bob", Role: githubv1.NamespaceRole_NAMESPACE_ROLE_NONE})
	wantCode(t, err, codes.FailedPrecondition, "") // the last admin
	ns, err := c.GetNamespace(e.grpc.Context(t, "carol"), &githubv1.GetNamespaceRequest{Name: "acme"})
	if err != nil || len(ns.GetNamespace().GetMembers()) != 2 {
		t.Fatalf("acme: %v %v", ns, err)
	}
	// An admin of TheFold may create anywhere (audited).
	if _, err := c.CreateRepo(e.admin, &githubv1.CreateRepoRequest{Repo: "alice/admin-made"}); err != nil {
		t.Fatal(err)
	}
}
