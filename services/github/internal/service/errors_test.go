package service_test

import (
	"context"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/fieldmaskpb"

	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// Every RPC answers malformed input with INVALID_ARGUMENT naming the field, an unknown
// repository with NOT_FOUND, and a caller without a token with UNAUTHENTICATED.
func TestEveryRPCRefusesMalformedInput(t *testing.T) {
	t.Parallel()
	e := start(t)
	c := e.client
	repo := e.repo(t, "errs", map[string]string{"a.txt": "a\n"})
	archive := func(ctx context.Context, req *githubv1.GetArchiveRequest) error {
		s, err := c.GetArchive(ctx, req)
		if err != nil {
			return err
		}
		_, err = s.Recv()
		return err
	}
	long := strings.Repeat("x", 300)
	cases := []struct {
		rpc   string
		code  codes.Code
		field string
		call  func(ctx context.Context) error
	}{
		{"ListRepos", codes.InvalidArgument, "page_size", func(ctx context.Context) error {
			_, err := c.ListRepos(ctx, &githubv1.ListReposRequest{PageSize: 999})
			return err
		}},
		{"ListRepos", codes.InvalidArgument, "page_token", func(ctx context.Context) error {
			_, err := c.ListRepos(ctx, &githubv1.ListReposRequest{PageToken: "garbage"})
			return err
		}},
		{"GetRepo", codes.InvalidArgument, "repo", func(ctx context.Context) error {
			_, err := c.GetRepo(ctx, &githubv1.GetRepoRequest{Repo: "no-slash"})
			return err
		}},
		{"GetRepo", codes.NotFound, "", func(ctx context.Context) error {
			_, err := c.GetRepo(ctx, &githubv1.GetRepoRequest{Repo: "local/nope"})
			return err
		}},
		{"CreateRepo", codes.InvalidArgument, "repo", func(ctx context.Context) error {
			_, err := c.CreateRepo(ctx, &githubv1.CreateRepoRequest{Repo: "local/a b"})
			return err
		}},
		{"CreateRepo", codes.InvalidArgument, "provider", func(ctx context.Context) error {
			_, err := c.CreateRepo(ctx, &githubv1.CreateRepoRequest{Repo: "local/x", Provider: githubv1.RepoProvider_REPO_PROVIDER_GITHUB})
			return err
		}},
		{"InitRepo", codes.InvalidArgument, "language", func(ctx context.Context) error {
			_, err := c.InitRepo(ctx, &githubv1.InitRepoRequest{Repo: repo, Language: "cobol"})
			return err
		}},
		{"InitRepo", codes.InvalidArgument, "files[0].action", func(ctx context.Context) error {
			_, err := c.InitRepo(ctx, &githubv1.InitRepoRequest{Repo: repo, Files: []*typev1.FileChange{modify("a", "b")}})
			return err
		}},
		{"GetTree", codes.InvalidArgument, "path_prefix", func(ctx context.Context) error {
			_, err := c.GetTree(ctx, &githubv1.GetTreeRequest{Repo: repo, PathPrefix: "../etc"})
			return err
		}},
		{"GetTree", codes.InvalidArgument, "ref", func(ctx context.Context) error {
			_, err := c.GetTree(ctx, &githubv1.GetTreeRequest{Repo: repo, Ref: "a..b"})
			return err
		}},
		{"GetTree", codes.NotFound, "", func(ctx context.Context) error {
			_, err := c.GetTree(ctx, &githubv1.GetTreeRequest{Repo: repo, Ref: "no-such-branch"})
			return err
		}},
		{"GetFiles", codes.InvalidArgument, "paths[0]", func(ctx context.Context) error {
			_, err := c.GetFiles(ctx, &githubv1.GetFilesRequest{Repo: repo, Paths: []string{"../../etc/passwd"}})
			return err
		}},
		{"GetFiles", codes.InvalidArgument, "paths", func(ctx context.Context) error {
			_, err := c.GetFiles(ctx, &githubv1.GetFilesRequest{Repo: repo})
			return err
		}},
		{"GetArchive", codes.InvalidArgument, "repo", func(ctx context.Context) error {
			return archive(ctx, &githubv1.GetArchiveRequest{})
		}},
		{"GetArchive", codes.NotFound, "", func(ctx context.Context) error {
			return archive(ctx, &githubv1.GetArchiveRequest{Repo: "local/nope"})
		}},
		{"FindRelevantFiles", codes.InvalidArgument, "task", func(ctx context.Context) error {
			_, err := c.FindRelevantFiles(ctx, &githubv1.FindRelevantFilesRequest{Repo: repo})
			return err
		}},
		{"FindRelevantFiles", codes.InvalidArgument, "token_budget", func(ctx context.Context) error {
			_, err := c.FindRelevantFiles(ctx, &githubv1.FindRelevantFilesRequest{Repo: repo, Task: "x", TokenBudget: -1})
			return err
		}},
		{"FindRelevantFiles", codes.InvalidArgument, "include_paths[0]", func(ctx context.Context) error {
			_, err := c.FindRelevantFiles(ctx, &githubv1.FindRelevantFilesRequest{Repo: repo, Task: "x", IncludePaths: []string{"/abs"}})
			return err
		}},
		{"CreateBranch", codes.InvalidArgument, "branch", func(ctx context.Context) error {
			_, err := c.CreateBranch(ctx, &githubv1.CreateBranchRequest{Repo: repo, Branch: "bad name"})
			return err
		}},
		{"CreateBranch", codes.InvalidArgument, "from_ref", func(ctx context.Context) error {
			_, err := c.CreateBranch(ctx, &githubv1.CreateBranchRequest{Repo: repo, Branch: "ok", FromRef: "nowhere"})
			return err
		}},
		{"CommitFiles", codes.InvalidArgument, "files[0].path", func(ctx context.Context) error {
			_, err := c.CommitFiles(ctx, &githubv1.CommitFilesRequest{Repo: repo, Branch: "main", Message: "m",
				Files: []*typev1.FileChange{create("a/../../x", "x")}})
			return err
		}},
		{"CommitFiles", codes.InvalidArgument, "files[1].path", func(ctx context.Context) error {
			_, err := c.CommitFiles(ctx, &githubv1.CommitFilesRequest{Repo: repo, Branch: "main", Message: "m",
				Files: []*typev1.FileChange{create("x", "x"), create("x", "y")}})
			return err
		}},
		{"CommitFiles", codes.InvalidArgument, "message", func(ctx context.Context) error {
			_, err := c.CommitFiles(ctx, &githubv1.CommitFilesRequest{Repo: repo, Branch: "main", Files: []*typev1.FileChange{create("x", "x")}})
			return err
		}},
		{"CommitFiles", codes.InvalidArgument, "expected_parent_sha", func(ctx context.Context) error {
			_, err := c.CommitFiles(ctx, &githubv1.CommitFilesRequest{Repo: repo, Branch: "main", Message: "m", ExpectedParentSha: "abc",
				Files: []*typev1.FileChange{create("x", "x")}})
			return err
		}},
		{"CommitFiles", codes.NotFound, "", func(ctx context.Context) error {
			_, err := c.CommitFiles(ctx, &githubv1.CommitFilesRequest{Repo: repo, Branch: "nope", Message: "m", Files: []*typev1.FileChange{create("x", "x")}})
			return err
		}},
		{"CommitFiles", codes.FailedPrecondition, "a.txt", func(ctx context.Context) error {
			_, err := c.CommitFiles(ctx, &githubv1.CommitFilesRequest{Repo: repo, Branch: "main", Message: "m", Files: []*typev1.FileChange{{
				Path: "a.txt", Action: typev1.FileAction_FILE_ACTION_MODIFY, Edits: []*typev1.Edit{{OldText: "zzz", NewText: "y"}}}}})
			return err
		}},
		{"CommitFiles", codes.FailedPrecondition, "CREATE", func(ctx context.Context) error {
			_, err := c.CommitFiles(ctx, &githubv1.CommitFilesRequest{Repo: repo, Branch: "main", Message: "m", Files: []*typev1.FileChange{create("a.txt", "x")}})
			return err
		}},
		{"CreatePullRequest", codes.InvalidArgument, "title", func(ctx context.Context) error {
			_, err := c.CreatePullRequest(ctx, &githubv1.CreatePullRequestRequest{Repo: repo, Head: "x"})
			return err
		}},
		{"CreatePullRequest", codes.InvalidArgument, "head", func(ctx context.Context) error {
			_, err := c.CreatePullRequest(ctx, &githubv1.CreatePullRequestRequest{Repo: repo, Title: "t"})
			return err
		}},
		{"CreatePullRequest", codes.NotFound, "head", func(ctx context.Context) error {
			_, err := c.CreatePullRequest(ctx, &githubv1.CreatePullRequestRequest{Repo: repo, Head: "ghost", Title: "t"})
			return err
		}},
		{"GetPullRequest", codes.InvalidArgument, "number", func(ctx context.Context) error {
			_, err := c.GetPullRequest(ctx, &githubv1.GetPullRequestRequest{Repo: repo})
			return err
		}},
		{"GetPullRequest", codes.NotFound, "", func(ctx context.Context) error {
			_, err := c.GetPullRequest(ctx, &githubv1.GetPullRequestRequest{Repo: repo, Number: 42})
			return err
		}},
		{"GetPullRequestChecks", codes.InvalidArgument, "number", func(ctx context.Context) error {
			_, err := c.GetPullRequestChecks(ctx, &githubv1.GetPullRequestChecksRequest{Repo: repo})
			return err
		}},
		{"GetPullRequestChecks", codes.InvalidArgument, "repo", func(ctx context.Context) error {
			_, err := c.GetPullRequestChecks(ctx, &githubv1.GetPullRequestChecksRequest{Repo: "no-slash", Number: 1})
			return err
		}},
		{"GetPullRequestChecks", codes.InvalidArgument, "repo", func(ctx context.Context) error {
			_, err := c.GetPullRequestChecks(ctx, &githubv1.GetPullRequestChecksRequest{Number: 1})
			return err
		}},
		{"GetPullRequestChecks", codes.NotFound, "", func(ctx context.Context) error {
			_, err := c.GetPullRequestChecks(ctx, &githubv1.GetPullRequestChecksRequest{Repo: repo, Number: 42})
			return err
		}},
		{"ListPullRequests", codes.InvalidArgument, "state", func(ctx context.Context) error {
			_, err := c.ListPullRequests(ctx, &githubv1.ListPullRequestsRequest{Repo: repo, State: 99})
			return err
		}},
		{"GetPullRequestDiff", codes.InvalidArgument, "paths[0]", func(ctx context.Context) error {
			_, err := c.GetPullRequestDiff(ctx, &githubv1.GetPullRequestDiffRequest{Repo: repo, Number: 1, Paths: []string{""}})
			return err
		}},
		{"MergePullRequest", codes.InvalidArgument, "expected_head_sha", func(ctx context.Context) error {
			_, err := c.MergePullRequest(ctx, &githubv1.MergePullRequestRequest{Repo: repo, Number: 1, ExpectedHeadSha: "zz"})
			return err
		}},
		{"MergeBaseIntoPullRequest", codes.InvalidArgument, "repo", func(ctx context.Context) error {
			_, err := c.MergeBaseIntoPullRequest(ctx, &githubv1.MergeBaseIntoPullRequestRequest{Number: 1})
			return err
		}},
		{"MergeBaseIntoPullRequest", codes.InvalidArgument, "repo", func(ctx context.Context) error {
			_, err := c.MergeBaseIntoPullRequest(ctx, &githubv1.MergeBaseIntoPullRequestRequest{Repo: "no-slash", Number: 1})
			return err
		}},
		{"MergeBaseIntoPullRequest", codes.InvalidArgument, "number", func(ctx context.Context) error {
			_, err := c.MergeBaseIntoPullRequest(ctx, &githubv1.MergeBaseIntoPullRequestRequest{Repo: repo})
			return err
		}},
		{"MergeBaseIntoPullRequest", codes.InvalidArgument, "number", func(ctx context.Context) error {
			_, err := c.MergeBaseIntoPullRequest(ctx, &githubv1.MergeBaseIntoPullRequestRequest{Repo: repo, Number: -3})
			return err
		}},
		{"MergeBaseIntoPullRequest", codes.InvalidArgument, "expected_head_sha", func(ctx context.Context) error {
			_, err := c.MergeBaseIntoPullRequest(ctx, &githubv1.MergeBaseIntoPullRequestRequest{Repo: repo, Number: 1, ExpectedHeadSha: "ABC123"})
			return err
		}},
		{"MergeBaseIntoPullRequest", codes.NotFound, "", func(ctx context.Context) error {
			_, err := c.MergeBaseIntoPullRequest(ctx, &githubv1.MergeBaseIntoPullRequestRequest{Repo: repo, Number: 42})
			return err
		}},
		{"CreateMergeGroup", codes.InvalidArgument, "repo", func(ctx context.Context) error {
			_, err := c.CreateMergeGroup(ctx, &githubv1.CreateMergeGroupRequest{Base: "main", Numbers: []int32{1}})
			return err
		}},
		{"CreateMergeGroup", codes.InvalidArgument, "repo", func(ctx context.Context) error {
			_, err := c.CreateMergeGroup(ctx, &githubv1.CreateMergeGroupRequest{Repo: "no-slash", Base: "main", Numbers: []int32{1}})
			return err
		}},
		{"CreateMergeGroup", codes.InvalidArgument, "base", func(ctx context.Context) error {
			_, err := c.CreateMergeGroup(ctx, &githubv1.CreateMergeGroupRequest{Repo: repo, Numbers: []int32{1}})
			return err
		}},
		{"CreateMergeGroup", codes.InvalidArgument, "base", func(ctx context.Context) error {
			_, err := c.CreateMergeGroup(ctx, &githubv1.CreateMergeGroupRequest{Repo: repo, Base: "a..b", Numbers: []int32{1}})
			return err
		}},
		{"CreateMergeGroup", codes.InvalidArgument, "numbers: required", func(ctx context.Context) error {
			_, err := c.CreateMergeGroup(ctx, &githubv1.CreateMergeGroupRequest{Repo: repo, Base: "main"})
			return err
		}},
		{"CreateMergeGroup", codes.InvalidArgument, "numbers: at most 20", func(ctx context.Context) error {
			many := make([]int32, 21)
			for i := range many {
				many[i] = int32(i + 1)
			}
			_, err := c.CreateMergeGroup(ctx, &githubv1.CreateMergeGroupRequest{Repo: repo, Base: "main", Numbers: many})
			return err
		}},
		{"CreateMergeGroup", codes.InvalidArgument, "numbers[1]", func(ctx context.Context) error {
			_, err := c.CreateMergeGroup(ctx, &githubv1.CreateMergeGroupRequest{Repo: repo, Base: "main", Numbers: []int32{1, 0}})
			return err
		}},
		{"CreateMergeGroup", codes.InvalidArgument, "numbers[0]", func(ctx context.Context) error {
			_, err := c.CreateMergeGroup(ctx, &githubv1.CreateMergeGroupRequest{Repo: repo, Base: "main", Numbers: []int32{-2}})
			return err
		}},
		{"CreateMergeGroup", codes.InvalidArgument, "numbers[2]", func(ctx context.Context) error {
			_, err := c.CreateMergeGroup(ctx, &githubv1.CreateMergeGroupRequest{Repo: repo, Base: "main", Numbers: []int32{1, 2, 1}})
			return err
		}},
		{"CreateMergeGroup", codes.NotFound, "", func(ctx context.Context) error {
			_, err := c.CreateMergeGroup(ctx, &githubv1.CreateMergeGroupRequest{Repo: repo, Base: "main", Numbers: []int32{42}})
			return err
		}},
		{"ClosePullRequest", codes.InvalidArgument, "number", func(ctx context.Context) error {
			_, err := c.ClosePullRequest(ctx, &githubv1.ClosePullRequestRequest{Repo: repo, Number: -1})
			return err
		}},
		{"ListIssues", codes.InvalidArgument, "labels", func(ctx context.Context) error {
			_, err := c.ListIssues(ctx, &githubv1.ListIssuesRequest{Repo: repo, Labels: []string{long}})
			return err
		}},
		{"GetIssue", codes.NotFound, "", func(ctx context.Context) error {
			_, err := c.GetIssue(ctx, &githubv1.GetIssueRequest{Repo: repo, Number: 7})
			return err
		}},
		{"CreateIssue", codes.InvalidArgument, "blocked_by[0]", func(ctx context.Context) error {
			_, err := c.CreateIssue(ctx, &githubv1.CreateIssueRequest{Repo: repo, Title: "t", BlockedBy: []int32{0}})
			return err
		}},
		{"CreateIssue", codes.InvalidArgument, "request_id", func(ctx context.Context) error {
			_, err := c.CreateIssue(ctx, &githubv1.CreateIssueRequest{Repo: repo, Title: "t", RequestId: "a b"})
			return err
		}},
		{"UpdateIssue", codes.InvalidArgument, "update_mask", func(ctx context.Context) error {
			_, err := c.UpdateIssue(ctx, &githubv1.UpdateIssueRequest{Repo: repo, Number: 1})
			return err
		}},
		{"UpdateIssue", codes.InvalidArgument, "issue.state", func(ctx context.Context) error {
			_, err := c.UpdateIssue(ctx, &githubv1.UpdateIssueRequest{Repo: repo, Number: 1, Issue: &githubv1.Issue{},
				UpdateMask: &fieldmaskpb.FieldMask{Paths: []string{"state"}}})
			return err
		}},
		{"CommentOnIssue", codes.InvalidArgument, "body", func(ctx context.Context) error {
			_, err := c.CommentOnIssue(ctx, &githubv1.CommentOnIssueRequest{Repo: repo, Number: 1})
			return err
		}},
		{"CommentOnIssue", codes.NotFound, "", func(ctx context.Context) error {
			_, err := c.CommentOnIssue(ctx, &githubv1.CommentOnIssueRequest{Repo: repo, Number: 9, Body: "hi"})
			return err
		}},
		{"CreateNamespace", codes.InvalidArgument, "name", func(ctx context.Context) error {
			_, err := c.CreateNamespace(ctx, &githubv1.CreateNamespaceRequest{Name: "Not A Name", Kind: githubv1.NamespaceKind_NAMESPACE_KIND_USER})
			return err
		}},
		{"CreateNamespace", codes.InvalidArgument, "kind", func(ctx context.Context) error {
			_, err := c.CreateNamespace(ctx, &githubv1.CreateNamespaceRequest{Name: "fine"})
			return err
		}},
		{"CreateNamespace", codes.InvalidArgument, "name", func(ctx context.Context) error {
			_, err := c.CreateNamespace(ctx, &githubv1.CreateNamespaceRequest{Name: "local", Kind: githubv1.NamespaceKind_NAMESPACE_KIND_ORG})
			return err
		}},
		{"GetNamespace", codes.InvalidArgument, "name", func(ctx context.Context) error {
			_, err := c.GetNamespace(ctx, &githubv1.GetNamespaceRequest{})
			return err
		}},
		{"GetNamespace", codes.NotFound, "", func(ctx context.Context) error {
			_, err := c.GetNamespace(ctx, &githubv1.GetNamespaceRequest{Name: "nobody"})
			return err
		}},
		{"SetNamespaceMember", codes.InvalidArgument, "user_id", func(ctx context.Context) error {
			_, err := c.SetNamespaceMember(ctx, &githubv1.SetNamespaceMemberRequest{Name: "acme", Role: githubv1.NamespaceRole_NAMESPACE_ROLE_MEMBER})
			return err
		}},
		{"SetNamespaceMember", codes.InvalidArgument, "role", func(ctx context.Context) error {
			_, err := c.SetNamespaceMember(ctx, &githubv1.SetNamespaceMemberRequest{Name: "acme", UserId: "bob"})
			return err
		}},
		{"SetCollaborator", codes.InvalidArgument, "role", func(ctx context.Context) error {
			_, err := c.SetCollaborator(ctx, &githubv1.SetCollaboratorRequest{Repo: repo, UserId: "bob"})
			return err
		}},
		{"SetCollaborator", codes.InvalidArgument, "user_id", func(ctx context.Context) error {
			_, err := c.SetCollaborator(ctx, &githubv1.SetCollaboratorRequest{Repo: repo, UserId: "b o b", Role: githubv1.RepoRole_REPO_ROLE_READ})
			return err
		}},
		{"SetCollaborator", codes.InvalidArgument, "repo", func(ctx context.Context) error {
			_, err := c.SetCollaborator(ctx, &githubv1.SetCollaboratorRequest{Repo: "no-slash", UserId: "bob", Role: githubv1.RepoRole_REPO_ROLE_READ})
			return err
		}},
		{"ListCollaborators", codes.InvalidArgument, "page_token", func(ctx context.Context) error {
			_, err := c.ListCollaborators(ctx, &githubv1.ListCollaboratorsRequest{Repo: repo, PageToken: "garbage"})
			return err
		}},
		{"ListGitHubGrants", codes.InvalidArgument, "page_size", func(ctx context.Context) error {
			_, err := c.ListGitHubGrants(ctx, &githubv1.ListGitHubGrantsRequest{PageSize: 500})
			return err
		}},
		{"ListCollaborators", codes.InvalidArgument, "repo", func(ctx context.Context) error {
			_, err := c.ListCollaborators(ctx, &githubv1.ListCollaboratorsRequest{})
			return err
		}},
		{"GetCollaboratorRole", codes.InvalidArgument, "user", func(ctx context.Context) error {
			_, err := c.GetCollaboratorRole(ctx, &githubv1.GetCollaboratorRoleRequest{Repo: repo})
			return err
		}},
		{"GetCollaboratorRole", codes.InvalidArgument, "user", func(ctx context.Context) error {
			_, err := c.GetCollaboratorRole(ctx, &githubv1.GetCollaboratorRoleRequest{Repo: repo, User: "a b"})
			return err
		}},
		{"ReadRepoEventFeed", codes.InvalidArgument, "etag", func(ctx context.Context) error {
			_, err := c.ReadRepoEventFeed(ctx, &githubv1.ReadRepoEventFeedRequest{Repo: repo, Etag: "a\nb"})
			return err
		}},
		{"ReadRepoEventFeed", codes.InvalidArgument, "repo", func(ctx context.Context) error {
			_, err := c.ReadRepoEventFeed(ctx, &githubv1.ReadRepoEventFeedRequest{Repo: "x"})
			return err
		}},
		{"ReadRepoEventFeed", codes.FailedPrecondition, "local repository", func(ctx context.Context) error {
			_, err := c.ReadRepoEventFeed(ctx, &githubv1.ReadRepoEventFeedRequest{Repo: repo})
			return err
		}},
		{"GetCollaboratorRole", codes.InvalidArgument, "repo", func(ctx context.Context) error {
			_, err := c.GetCollaboratorRole(ctx, &githubv1.GetCollaboratorRoleRequest{Repo: "no-slash", User: "bob"})
			return err
		}},
		{"SetGitHubCredential", codes.InvalidArgument, "token", func(ctx context.Context) error {
			_, err := c.SetGitHubCredential(ctx, &githubv1.SetGitHubCredentialRequest{Token: "has spaces in it"})
			return err
		}},
		{"GetGitHubCredential", codes.NotFound, "", func(ctx context.Context) error {
			_, err := c.GetGitHubCredential(ctx, &githubv1.GetGitHubCredentialRequest{})
			return err
		}},
		{"DeleteGitHubCredential", codes.Unauthenticated, "", func(context.Context) error {
			_, err := c.DeleteGitHubCredential(e.anon, &githubv1.DeleteGitHubCredentialRequest{})
			return err
		}},
		{"SetGitHubGrant", codes.InvalidArgument, "repo", func(ctx context.Context) error {
			_, err := c.SetGitHubGrant(ctx, &githubv1.SetGitHubGrantRequest{UserId: "bob", Repo: "octo/*/x", Role: githubv1.RepoRole_REPO_ROLE_READ})
			return err
		}},
		{"SetGitHubGrant", codes.InvalidArgument, "role", func(ctx context.Context) error {
			_, err := c.SetGitHubGrant(ctx, &githubv1.SetGitHubGrantRequest{UserId: "bob", Repo: "octo/*"})
			return err
		}},
		{"ListGitHubGrants", codes.InvalidArgument, "user_id", func(ctx context.Context) error {
			_, err := c.ListGitHubGrants(ctx, &githubv1.ListGitHubGrantsRequest{UserId: "service:agent"})
			return err
		}},
	}
	seen := map[string]bool{}
	for _, tc := range cases {
		seen[tc.rpc] = true
		t.Run(tc.rpc+"/"+tc.field, func(t *testing.T) {
			wantCode(t, tc.call(e.alice), tc.code, tc.field)
			if tc.code == codes.InvalidArgument {
				wantCode(t, tc.call(e.anon), codes.Unauthenticated, "")
			}
		})
	}
	for _, m := range githubv1.RepoService_ServiceDesc.Methods {
		if !seen[m.MethodName] {
			t.Errorf("%s has no malformed-input case", m.MethodName)
		}
	}
	for _, m := range githubv1.RepoService_ServiceDesc.Streams {
		if !seen[m.StreamName] {
			t.Errorf("%s has no malformed-input case", m.StreamName)
		}
	}
}
