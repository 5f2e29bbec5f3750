package service_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/thefold/thefold/pkg/fakevulndb"
	sandboxv1 "github.com/thefold/thefold/pkg/gen/thefold/sandbox/v1"

	"github.com/thefold/thefold/services/sandbox/internal/backend/docker"
	"github.com/thefold/thefold/services/sandbox/internal/sandboxtest"
	"github.com/thefold/thefold/services/sandbox/internal/service"
)

// A dependencies command (NETWORK_POLICY_PACKAGES) through the service, in every isolating
// backend: go mod tidy reaches the configured GOPROXY, the module then builds offline;
// during that same allowed install the sandboxed process cannot reach PostgreSQL, the
// service's own port or another host, directly or through the proxy.
func TestPackagesNetworkReachesOnlyTheSource(t *testing.T) {
	var zipHits atomic.Int32
	goproxy := httptest.NewServer(sandboxtest.ModuleProxy(t, &zipHits))
	defer goproxy.Close()
	for _, kind := range []sandboxv1.SandboxBackend{dockerKind, bwrapKind} {
		t.Run(strings.ToLower(strings.TrimPrefix(kind.String(), "SANDBOX_BACKEND_")), func(t *testing.T) {
			e := startPolicy(t, service.Config{Images: docker.DefaultImages(), GoProxy: goproxy.URL, PipIndex: goproxy.URL + "/simple"}, kind)
			pe := depModuleSandbox(t, e)
			before := zipHits.Load()
			r, err := runIn(e.long(), e.client, &sandboxv1.RunCommandRequest{SandboxId: pe.id, Command: []string{"go", "mod", "tidy"},
				Env: map[string]string{"GOSUMDB": "off"}, Network: sandboxv1.NetworkPolicy_NETWORK_POLICY_PACKAGES, Timeout: durationpb.New(3 * time.Minute)})
			if err != nil || r.res.ExitCode != 0 {
				t.Fatalf("go mod tidy: %v %+v\n%s%s", err, r.GetRes(), r.GetStdout(), r.GetStderr())
			}
			if zipHits.Load() != before+1 {
				t.Fatalf("the module zip was fetched %d times", zipHits.Load()-before)
			}
			if out := pe.run("go", "run", "."); !strings.Contains(out, sandboxtest.ModuleOutput) {
				t.Fatalf("offline build after the install: %s", out)
			}

			// An installer, allowed the network, aimed elsewhere: python3 (pip's program,
			// whose source is the same server here) probing the host while its install runs.
			targets := []string{"127.0.0.1:5432", e.addr(), "1.1.1.1:53"}
			pe.write("probe.py", pythonNetProbe(targets)+pythonFetchProbe([]string{"http://" + e.addr() + "/", "http://example.com/", goproxy.URL + "/example.test/dep/@v/list"}))
			r, err = runIn(e.long(), e.client, &sandboxv1.RunCommandRequest{SandboxId: pe.id, Command: []string{"python3", "probe.py"},
				Network: sandboxv1.NetworkPolicy_NETWORK_POLICY_PACKAGES, Timeout: durationpb.New(time.Minute)})
			if err != nil {
				t.Fatal(err)
			}
			out := r.stdout + r.stderr
			t.Logf("probe during an allowed install:\n%s", out)
			if strings.Contains(out, "CONNECTED") || !strings.Contains(out, "blocked") {
				t.Fatalf("a connection got through, or the probe did not run:\n%s", out)
			}
			if strings.Contains(out, "FETCHED http://"+e.addr()) || strings.Contains(out, "FETCHED http://example.com") {
				t.Fatalf("the proxy let a request through to a host that is not the source:\n%s", out)
			}
			if !strings.Contains(out, "FETCHED "+goproxy.URL) {
				t.Fatalf("the allowed source was not reached through the proxy:\n%s", out)
			}
		})
	}
}

// depModuleSandbox is a go sandbox holding a module whose main calls example.test/dep's
// Hello (sandboxtest.ModuleProxy's module).
func depModuleSandbox(t *testing.T, e *policyEnv) *probeEnv {
	t.Helper()
	resp, err := e.client.CreateSandbox(e.long(), &sandboxv1.CreateSandboxRequest{Language: "go"})
	if err != nil {
		t.Fatal(err)
	}
	pe := &probeEnv{t: t, e: e, id: resp.Sandbox.Id}
	pe.write("go.mod", "module example.com/app\n\ngo 1.22\n\nrequire example.test/dep v1.0.0\n")
	pe.write("main.go", "package main\n\nimport \"example.test/dep\"\n\nfunc main() { println(dep.Hello()) }\n")
	return pe
}

func (r *result) GetRes() *sandboxv1.CommandResult {
	if r == nil {
		return nil
	}
	return r.res
}

func (r *result) GetStdout() string {
	if r == nil {
		return ""
	}
	return r.stdout
}

func (r *result) GetStderr() string {
	if r == nil {
		return ""
	}
	return r.stderr
}

// pythonFetchProbe GETs each url through the proxy the environment names (urllib does,
// even for a loopback host, unlike Go).
func pythonFetchProbe(urls []string) string {
	var b strings.Builder
	b.WriteString("import urllib.request\n")
	for _, u := range urls {
		fmt.Fprintf(&b, "try:\n    urllib.request.urlopen(%q, timeout=5).read()\n    print('FETCHED', %q)\nexcept Exception as e:\n    print('fetch-blocked', %q, e)\n", u, u, u)
	}
	return b.String()
}

// govulncheck (installed by make setup, in the docker image and on bwrap's /usr) run with
// NETWORK_POLICY_PACKAGES reads the server's vulnerability database, which the sandbox
// passes as its -db, and the modules from the Go package source: it finds the fake
// database's entry for the function the code calls. A caller's own -db is refused, and so
// is the run on a server without a database.
func TestGovulncheckReadsTheServersDatabase(t *testing.T) {
	var zipHits atomic.Int32
	goproxy := httptest.NewServer(sandboxtest.ModuleProxy(t, &zipHits))
	defer goproxy.Close()
	db := fakevulndb.New(fakevulndb.Entry{ID: "GO-2099-0001", Aliases: []string{"CVE-2099-0001"}, Summary: "Hello says too much",
		Module: "example.test/dep", Package: "example.test/dep", Symbols: []string{"Hello"}, Fixed: "1.1.0"})
	vulndb := httptest.NewServer(db)
	defer vulndb.Close()
	for _, kind := range []sandboxv1.SandboxBackend{dockerKind, bwrapKind} {
		t.Run(strings.ToLower(strings.TrimPrefix(kind.String(), "SANDBOX_BACKEND_")), func(t *testing.T) {
			e := startPolicy(t, service.Config{Images: docker.DefaultImages(), GoProxy: goproxy.URL, GoVulnDB: vulndb.URL + "/vulndb"}, kind)
			pe := depModuleSandbox(t, e)
			before := db.Requests()
			r, err := runIn(e.long(), e.client, &sandboxv1.RunCommandRequest{SandboxId: pe.id, Command: []string{"govulncheck", "-format", "json", "./..."},
				Env: map[string]string{"GOSUMDB": "off"}, Network: sandboxv1.NetworkPolicy_NETWORK_POLICY_PACKAGES, Timeout: durationpb.New(3 * time.Minute)})
			if err != nil || r.res.ExitCode != 0 {
				t.Fatalf("govulncheck (is it installed? make setup puts it in /usr/local/bin): %v %+v\n%s%s", err, r.GetRes(), r.GetStdout(), r.GetStderr())
			}
			if db.Requests() == before {
				t.Fatalf("govulncheck did not read the server's database:\n%s", r.stderr)
			}
			if !strings.Contains(r.stdout, `"db": "`+vulndb.URL+`/vulndb"`) || !strings.Contains(r.stdout, `"osv": "GO-2099-0001"`) ||
				!strings.Contains(r.stdout, `"function": "Hello"`) {
				t.Fatalf("govulncheck's answer does not name the called vulnerability:\n%s", r.stdout)
			}

			_, err = runIn(e.long(), e.client, &sandboxv1.RunCommandRequest{SandboxId: pe.id, Command: []string{"govulncheck", "-db=https://elsewhere.example", "./..."},
				Network: sandboxv1.NetworkPolicy_NETWORK_POLICY_PACKAGES})
			wantCode(t, err, codes.InvalidArgument, "-db", "command")
		})
	}
	e := startPolicy(t, service.Config{Images: docker.DefaultImages(), GoProxy: goproxy.URL}, bwrapKind)
	resp, err := e.client.CreateSandbox(e.long(), &sandboxv1.CreateSandboxRequest{Language: "go"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = runIn(e.long(), e.client, &sandboxv1.RunCommandRequest{SandboxId: resp.Sandbox.Id, Command: []string{"govulncheck", "./..."},
		Network: sandboxv1.NetworkPolicy_NETWORK_POLICY_PACKAGES})
	wantCode(t, err, codes.InvalidArgument, "THEFOLD_SANDBOX_GOVULNDB", "network")
}
