package service_test

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/thefold/thefold/pkg/db/dbtest"
	githubv1 "github.com/thefold/thefold/pkg/gen/thefold/github/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/testenv"

	"github.com/thefold/thefold/services/github/internal/local"
	"github.com/thefold/thefold/services/github/internal/service"
	"github.com/thefold/thefold/services/github/internal/store"
	"github.com/thefold/thefold/services/github/migrations"
)

// env is a github server with the local forge on its own database and directory, reached
// over loopback gRPC.
type env struct {
	client githubv1.RepoServiceClient
	local  *local.Provider
	alice  context.Context
	bob    context.Context
	admin  context.Context
	anon   context.Context
	grpc   *grpctest.Env // for contexts with a deadline of their own
}

func start(t testing.TB) *env {
	t.Helper()
	pool, _ := dbtest.NewDatabase(t, "github", migrations.FS)
	st := store.New(pool)
	lp, err := local.New(t.TempDir(), st, "http://gateway.test")
	if err != nil {
		t.Fatal(err)
	}
	cfg := service.Config{Forge: "local", TreeCache: 8, IndexCache: 2, MaxIndexFileBytes: 1 << 20}
	srv, err := service.New(cfg, st, service.WithProvider(lp))
	if err != nil {
		t.Fatal(err)
	}
	e := grpctest.Start(t, func(s *grpc.Server) { githubv1.RegisterRepoServiceServer(s, srv) })
	return &env{client: githubv1.NewRepoServiceClient(e.Conn), local: lp, alice: e.Context(t, "alice"),
		bob: e.Context(t, "bob"), admin: e.Context(t, "root", "admin"), anon: context.Background(), grpc: e}
}

// repo creates an initialised repository of alice's.
func (e *env) repo(t testing.TB, name string, files map[string]string) string {
	t.Helper()
	if _, err := e.client.CreateRepo(e.alice, &githubv1.CreateRepoRequest{Repo: "local/" + name}); err != nil {
		t.Fatalf("CreateRepo: %v", err)
	}
	req := &githubv1.InitRepoRequest{Repo: "local/" + name}
	for _, p := range slices.Sorted(maps.Keys(files)) {
		req.Files = append(req.Files, create(p, files[p]))
	}
	if _, err := e.client.InitRepo(e.alice, req); err != nil {
		t.Fatalf("InitRepo: %v", err)
	}
	return "local/" + name
}

func create(path, content string) *typev1.FileChange {
	return &typev1.FileChange{Path: path, Action: typev1.FileAction_FILE_ACTION_CREATE, Content: content}
}

func modify(path, content string) *typev1.FileChange {
	return &typev1.FileChange{Path: path, Action: typev1.FileAction_FILE_ACTION_MODIFY, Content: content}
}

// wantCode fails unless err has code and, when field is set, names it.
func wantCode(t testing.TB, err error, code codes.Code, field string) {
	t.Helper()
	if status.Code(err) != code {
		t.Fatalf("got %v, want %v", err, code)
	}
	if field != "" && !strings.Contains(status.Convert(err).Message(), field) {
		t.Fatalf("error %q does not name %q", status.Convert(err).Message(), field)
	}
}

// gitCLI runs the git command line in dir and returns its output.
func gitCLI(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir(), "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// clone clones a local repository with plain git.
func (e *env) clone(t testing.TB, repo string, args ...string) string {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		testenv.SkipOrFail(t, "git is not installed")
	}
	dst := filepath.Join(t.TempDir(), "clone")
	gitCLI(t, t.TempDir(), append(append([]string{"clone", "--quiet"}, args...), e.local.Dir(repo), dst)...)
	return dst
}

func read(t testing.TB, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func statusCode(err error) codes.Code { return status.Code(err) }
