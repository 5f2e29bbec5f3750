package service_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"

	"github.com/thefold/thefold/pkg/db/dbtest"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/seal"

	"github.com/thefold/thefold/services/github/internal/hub"
	"github.com/thefold/thefold/services/github/internal/local"
	"github.com/thefold/thefold/services/github/internal/service"
	"github.com/thefold/thefold/services/github/internal/store"
	"github.com/thefold/thefold/services/github/migrations"
)

// fakeGitHub answers GET /repos/{owner}/{name} and POST /repos/{owner}/{name}/issues for
// the repositories it has, and records every request's Authorization header.
type fakeGitHub struct {
	mu    sync.Mutex
	auths []string
}

func (f *fakeGitHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	f.auths = append(f.auths, r.Method+" "+strings.TrimPrefix(r.URL.Path, "/api/v3")+" "+r.Header.Get("Authorization"))
	f.mu.Unlock()
	path := strings.TrimPrefix(r.URL.Path, "/api/v3")
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodGet && path == "/repos/octo/app":
		_ = json.NewEncoder(w).Encode(map[string]any{"full_name": "octo/app", "name": "app", "owner": map[string]any{"login": "octo"},
			"default_branch": "main", "size": 10})
	case r.Method == http.MethodPost && path == "/repos/octo/app/issues":
		_ = json.NewEncoder(w).Encode(map[string]any{"number": 7, "title": "t", "state": "open", "user": map[string]any{"login": "octo"}})
	default:
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"message":"Not Found"}`))
	}
}

// calls returns the requests seen since the last call.
func (f *fakeGitHub) calls() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := f.auths
	f.auths = nil
	return out
}

// GitHub is reached on behalf of people: with their own token when they stored one, with the
// server's only within an admin's allow-list grant, and not at all otherwise — refused
// before any request leaves. A stored token is sealed and never returned.
func TestGitHubOnBehalfOfPeople(t *testing.T) {
	t.Parallel()
	fake := &fakeGitHub{}
	srv := httptest.NewServer(fake)
	t.Cleanup(srv.Close)

	pool, _ := dbtest.NewDatabase(t, "github", migrations.FS)
	st := store.New(pool)
	lp, err := local.New(t.TempDir(), st, "")
	if err != nil {
		t.Fatal(err)
	}
	hp, err := hub.New(hub.Config{BaseURL: srv.URL + "/", HTTPClient: srv.Client()})
	if err != nil {
		t.Fatal(err)
	}
	key, err := seal.LoadKeyFile(filepath.Join(t.TempDir(), "k"), true)
	if err != nil {
		t.Fatal(err)
	}
	box, _ := seal.New(key)
	cfg := service.Config{Forge: "local", GitHubOwners: []string{"octo"}, Token: "server-token", TreeCache: 8, IndexCache: 2, MaxIndexFileBytes: 1 << 20}
	s, err := service.New(cfg, st, service.WithProvider(lp), service.WithProvider(hp), service.WithSecrets(box))
	if err != nil {
		t.Fatal(err)
	}
	e := grpctest.Start(t, func(g *grpc.Server) { githubv1.RegisterRepoServiceServer(g, s) })
	c := githubv1.NewRepoServiceClient(e.Conn)
	alice, bob, admin := e.Context(t, "alice"), e.Context(t, "bob"), e.Context(t, "root", "admin")

	set, err := c.SetGitHubCredential(alice, &githubv1.SetGitHubCredentialRequest{Token: "ghp_alice_token_9876"})
	if err != nil {
		t.Fatal(err)
	}
	if set.GetCredential().GetHint() != "9876" || strings.Contains(set.String(), "ghp_alice") {
		t.Fatalf("credential answer: %v", set)
	}
	var sealed []byte
	if err := pool.QueryRow(t.Context(), "SELECT token_enc FROM github_credentials WHERE user_id = 'alice'").Scan(&sealed); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sealed), "ghp_alice") {
		t.Fatal("the token is stored in clear")
	}

	// Alice's calls carry her token, also when the agent acts for her.
	if _, err := c.GetRepo(alice, &githubv1.GetRepoRequest{Repo: "octo/app"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetRepo(e.ServiceContext(t, "agent", "alice"), &githubv1.GetRepoRequest{Repo: "octo/app"}); err != nil {
		t.Fatal(err)
	}
	for _, got := range fake.calls() {
		if !strings.HasSuffix(got, " Bearer ghp_alice_token_9876") {
			t.Fatalf("alice's call went out as %q", got)
		}
	}
	// Bob has neither a token nor a grant: refused, and nothing reaches GitHub.
	_, err = c.GetRepo(bob, &githubv1.GetRepoRequest{Repo: "octo/app"})
	wantCode(t, err, codes.PermissionDenied, "")
	_, err = c.ListRepos(bob, &githubv1.ListReposRequest{Provider: githubv1.RepoProvider_REPO_PROVIDER_GITHUB})
	wantCode(t, err, codes.PermissionDenied, "")
	if got := fake.calls(); len(got) != 0 {
		t.Fatalf("requests left for bob without a credential: %v", got)
	}
	// Only an admin grants; a read grant reads through the server's token, and no more.
	_, err = c.SetGitHubGrant(alice, &githubv1.SetGitHubGrantRequest{UserId: "bob", Repo: "octo/app", Role: githubv1.RepoRole_REPO_ROLE_WRITE})
	wantCode(t, err, codes.PermissionDenied, "")
	if _, err := c.SetGitHubGrant(admin, &githubv1.SetGitHubGrantRequest{UserId: "bob", Repo: "octo/app", Role: githubv1.RepoRole_REPO_ROLE_READ}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetRepo(bob, &githubv1.GetRepoRequest{Repo: "octo/app"}); err != nil {
		t.Fatal(err)
	}
	if got := fake.calls(); len(got) != 1 || !strings.HasSuffix(got[0], " Bearer server-token") {
		t.Fatalf("bob's granted read: %v", got)
	}
	_, err = c.CreateIssue(bob, &githubv1.CreateIssueRequest{Repo: "octo/app", Title: "t"})
	wantCode(t, err, codes.PermissionDenied, "")
	_, err = c.GetRepo(bob, &githubv1.GetRepoRequest{Repo: "octo/other"})
	wantCode(t, err, codes.PermissionDenied, "")
	if got := fake.calls(); len(got) != 0 {
		t.Fatalf("requests left beyond bob's grant: %v", got)
	}
	// "owner/*" with write lets him open issues.
	if _, err := c.SetGitHubGrant(admin, &githubv1.SetGitHubGrantRequest{UserId: "bob", Repo: "octo/*", Role: githubv1.RepoRole_REPO_ROLE_WRITE}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateIssue(bob, &githubv1.CreateIssueRequest{Repo: "octo/app", Title: "t"}); err != nil {
		t.Fatal(err)
	}
	if got := fake.calls(); len(got) == 0 || !strings.HasSuffix(got[0], " Bearer server-token") {
		t.Fatalf("bob's granted write: %v", got)
	}
	grants, err := c.ListGitHubGrants(bob, &githubv1.ListGitHubGrantsRequest{})
	if err != nil || len(grants.GetGrants()) != 2 {
		t.Fatalf("bob's grants: %v %v", grants, err)
	}
	_, err = c.ListGitHubGrants(bob, &githubv1.ListGitHubGrantsRequest{UserId: "alice"})
	wantCode(t, err, codes.PermissionDenied, "")

	// Forgetting her token sends alice to the allow-list, where she has nothing.
	if d, err := c.DeleteGitHubCredential(alice, &githubv1.DeleteGitHubCredentialRequest{}); err != nil || !d.GetDeleted() {
		t.Fatalf("delete: %v %v", d, err)
	}
	_, err = c.GetRepo(alice, &githubv1.GetRepoRequest{Repo: "octo/app"})
	wantCode(t, err, codes.PermissionDenied, "")
	_, err = c.GetGitHubCredential(alice, &githubv1.GetGitHubCredentialRequest{})
	wantCode(t, err, codes.NotFound, "")
}
