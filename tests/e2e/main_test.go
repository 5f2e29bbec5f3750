// Package e2e starts the whole mesh — nine real processes on free ports against a fresh
// database — and exercises it over REST through the gateway and over gRPC directly.
package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/thefold/thefold/pkg/fakegithub"
	"github.com/thefold/thefold/pkg/fakelinear"
	"github.com/thefold/thefold/pkg/fakellm"
	"github.com/thefold/thefold/pkg/fakevulndb"
	"github.com/thefold/thefold/pkg/stack"
	"github.com/thefold/thefold/pkg/stack/stacktest"
	"github.com/thefold/thefold/pkg/testenv"
)

// mesh is the stack every test and benchmark in this package shares. Its ai service is
// configured with THEFOLD_AI_PROVIDER=anthropic pointed at llm, a fakellm serving the demo
// script (deploy/fakellm/demo.json): scripted answers, not a model.
var (
	mesh  *stack.Stack
	token string
	llm   *fakellm.Server
	// llmURL is where llm answers.
	llmURL string
	// llmTime is llm with a clock: the time spent answering (BenchmarkDemoTask).
	llmTime *llmClock
	// script is what llm serves: the demo script after the build tests' entries. A test
	// that sets another script sets this one back.
	script *fakellm.Script
	// ghFake is GitHub for the owner ghcrew (TestCrewOnGitHub): GitHub's REST API in
	// memory, in this process; every other owner's repositories are on the local forge.
	ghFake *fakegithub.Server
)

// liveness is how long the suite waits for what must happen eventually when d is enough on
// a quiet machine (testenv.Liveness: d times THEFOLD_E2E_SLACK, by default 2, and 4 under
// CI). The test binaries' own -timeout (scripts/test-e2e.sh) leaves room for the slack.
func liveness(d time.Duration) time.Duration { return testenv.Liveness(d) }

func TestMain(m *testing.M) {
	os.Exit(runMain(m))
}

func runMain(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), liveness(10*time.Minute))
	defer cancel()
	dbURL, dropDB, err := freshDatabase(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: database:", err, "(run scripts/setup.sh)")
		return 1
	}
	defer dropDB()

	dataDir, err := os.MkdirTemp("", "thefold-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if os.Getenv("THEFOLD_E2E_KEEP") != "" {
		// Kept for a look afterwards: the services' logs are under logs/.
		defer fmt.Fprintln(os.Stderr, "e2e: kept the data directory", dataDir)
	} else {
		defer os.RemoveAll(dataDir)
	}
	ports, err := stack.FreePorts()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: ports:", err)
		return 1
	}
	src, _ := filepath.Abs("../..")
	script, err = fakellm.LoadScript(filepath.Join(src, "deploy", "fakellm", "demo.json"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	// The build tests' scripted files go first: their entries match only their own files.
	script.Anthropic = slices.Concat(repoEventsScript(), replicaScript(), crewGitHubScript(), crewScript(), crewInterruptBuildScript(), crewSpreadScript(), crewOrderScript(), crewBenchScript(), cliCrewScript(), subAgentsScript(), chatScript(), cliScript(), faultScript(), projectScript(), moreProjectScripts(), benchProjectScript(),
		budgetProjectScript(), restartProjectScript(), agentScenarios(), agentScript(), isolationScript(), buildScript(), script.Anthropic)
	llm = fakellm.New(script)
	llmTime = &llmClock{next: llm}
	llmServer := httptest.NewServer(llmTime)
	defer llmServer.Close()
	llmURL = llmServer.URL
	proxy, err := newModuleProxy()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: module proxy:", err)
		return 1
	}
	proxyServer := httptest.NewServer(proxy)
	defer proxyServer.Close()
	// The Go vulnerability database the sandboxes' govulncheck reads: the module proxy's
	// example.test/dep is vulnerable below v1.1.0 where its Greeting is called.
	vulnDBServer := httptest.NewServer(fakevulndb.New(depVulnerability))
	defer vulnDBServer.Close()
	linearFake = fakelinear.New()
	linearServer := httptest.NewServer(linearFake)
	defer linearServer.Close()
	mesh = &stack.Stack{DataDir: dataDir, DatabaseURL: dbURL, Ports: ports, Env: []string{
		"THEFOLD_LOG_LEVEL=warn",
		// A killed builder's builds are resumed after this (the kill -9 test waits for it).
		"THEFOLD_BUILDER_LEASE_EXPIRY=3s",
		// A killed agent's jobs likewise; an environment_error backs off 1s instead of 30s.
		"THEFOLD_AGENT_LEASE_EXPIRY=3s", "THEFOLD_AGENT_BACKOFF=1s",
		// Every agent test starts its jobs as the one admin: room above the default 20/hour.
		"THEFOLD_AGENT_TASKS_PER_HOUR=200",
		// Most tests run in parallel (those that stop a service or count what the whole mesh
		// did run first, alone), every one as the same admin: room for their jobs and
		// sandboxes at once.
		"THEFOLD_AGENT_MAX_JOBS=12", "THEFOLD_SANDBOX_MAX_PER_OWNER=60",
		// And for their builds: the crew tests run several jobs each, all beside the rest.
		"THEFOLD_BUILDER_MAX_BUILDS=12",
		// The breaker test's ai is down for a few seconds: a short open period.
		"THEFOLD_AGENT_BREAKERS=ai=5/3s",
		// Dependency commands may run: their package source is the fake module proxy below
		// (the repository monitor's test audits a module against it), and nothing else; the
		// tests reach no network.
		// The benchmarks and the load run send thousands of requests a second as one user
		// from one address: the edge's request budgets are tested on their own (edge package),
		// and so are every gRPC server's (pkg/server).
		"THEFOLD_HTTP_RATE_PER_USER=off", "THEFOLD_HTTP_RATE_PER_ADDRESS=off",
		"THEFOLD_GRPC_RATE_PER_USER=off", "THEFOLD_GRPC_RATE_PER_SERVICE=off", "THEFOLD_GRPC_RATE_PER_ADDRESS=off",
		"THEFOLD_AI_PROVIDER=anthropic", "THEFOLD_AI_BASE_URL=" + llmServer.URL, "THEFOLD_AI_API_KEY=fakellm-e2e",
		// The integration tests' webhooks are httptest servers on the loopback address
		// (posted to over http, which only an allowed loopback host may be).
		"THEFOLD_AGENT_WEBHOOK_HOSTS=127.0.0.1",
		"THEFOLD_SANDBOX_GOPROXY=" + proxyServer.URL + ",off",
		"THEFOLD_SANDBOX_GOVULNDB=" + vulnDBServer.URL + "/vulndb",
		"THEFOLD_AGENT_LINEAR_URL=" + linearServer.URL + "/graphql",
	}}
	// THEFOLD_E2E_SANDBOX_BACKEND picks the mesh's default sandbox backend (auto when unset:
	// docker where an engine answers). The tests that are about one backend ask for it.
	if b := os.Getenv("THEFOLD_E2E_SANDBOX_BACKEND"); b != "" {
		mesh.Env = append(mesh.Env, "THEFOLD_SANDBOX_BACKEND="+b)
	}
	// The github service sends the owner ghcrew's repositories to ghFake, as to GitHub
	// Enterprise, with the token ghFake accepts (its user is fakegithub.DefaultLogin).
	if ghFake, err = fakegithub.Start(fakegithub.Options{Orgs: []string{"ghcrew"}}); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: fake GitHub:", err)
		return 1
	}
	defer ghFake.Close()
	mesh.Env = append(mesh.Env, "THEFOLD_GITHUB_API_URL="+ghFake.URL(), "THEFOLD_GITHUB_TOKEN="+ghFake.Token(), "THEFOLD_GITHUB_OWNERS=ghcrew")
	start := time.Now()
	// Binaries Build finds up to date when cmd/thefold's stack tests (make test-unit) or an
	// earlier run linked them from the same sources (stacktest): linking all ten takes
	// about 20 s of CPU. Without them Build links its own.
	if err := stacktest.Prebuild(ctx, mesh, src); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: no prebuilt binaries:", err)
	}
	if err := mesh.Build(ctx, src); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if token, err = mesh.EnsureCredentials(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if err := mesh.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		_ = mesh.Stop(10 * time.Second)
		return 1
	}
	defer func() { _ = mesh.Stop(20 * time.Second) }()
	if err := mesh.WaitReady(ctx, 2*time.Minute); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	fmt.Printf("e2e: nine services built and healthy in %s (gateway %s)\n", time.Since(start).Round(time.Millisecond), mesh.GatewayURL())
	return m.Run()
}

// freshDatabase creates an empty database with pgvector on the test server.
func freshDatabase(ctx context.Context) (string, func(), error) {
	base := os.Getenv("THEFOLD_TEST_DATABASE_URL")
	if base == "" {
		base = "postgres://thefold:thefold@127.0.0.1:5432/postgres?sslmode=disable"
	}
	u, err := url.Parse(base)
	if err != nil {
		return "", nil, err
	}
	u.Path = "/postgres"
	admin, err := pgx.Connect(ctx, u.String())
	if err != nil {
		return "", nil, err
	}
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	name := "thefold_e2e_" + hex.EncodeToString(b)
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close(ctx)
		return "", nil, err
	}
	u.Path = "/" + name
	dbURL := u.String()
	if c, err := pgx.Connect(ctx, dbURL); err == nil {
		_, _ = c.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS vector")
		c.Close(ctx)
	}
	drop := func() {
		dctx, cancel := context.WithTimeout(context.Background(), liveness(30*time.Second))
		defer cancel()
		_, _ = admin.Exec(dctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		admin.Close(dctx)
	}
	return dbURL, drop, nil
}
