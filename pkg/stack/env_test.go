package stack

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/thefold/thefold/pkg/platform"
)

// operatorEnv is a launcher's environment with every kind of secret in it.
var operatorEnv = []string{
	"HOME=/home/op", "LANG=C.UTF-8", "AWS_SECRET_ACCESS_KEY=aws-secret",
	"THEFOLD_LOG_LEVEL=debug", "THEFOLD_GRPC_MAX_CONCURRENT_STREAMS=50",
	"THEFOLD_DATABASE_URL=postgres://thefold:admin-secret@db/thefold",
	"THEFOLD_TASKS_DB_PASSWORD=tasks-secret", "THEFOLD_AI_DB_PASSWORD=ai-secret",
	"ANTHROPIC_API_KEY=sk-ant-secret", "OPENAI_API_KEY=sk-openai-secret", "CUSTOM_LLM_TOKEN=custom-secret",
	"THEFOLD_AI_KEY_ENV_ALLOW=*_API_KEY,CUSTOM_LLM_*",
	"THEFOLD_AI_API_KEY=ai-key-secret", "THEFOLD_AI_BASE_URL=http://127.0.0.1:8090",
	"THEFOLD_GITHUB_TOKEN=ghp_secret", "THEFOLD_SMTP_PASSWORD=smtp-secret",
	"HTTPS_PROXY=http://user:proxy-secret@proxy:3128",
	"THEFOLD_MEMORY_HYBRID_ALPHA=0.5", "THEFOLD_SANDBOX_GOPROXY=off", "GOMODCACHE=/home/op/go/pkg/mod",
	"DOCKER_HOST=unix:///run/docker.sock", "THEFOLD_HTTP_RATE_PER_USER=off",
}

// envOf is what svc is started with (Stack.env) when the launcher's environment is
// operatorEnv and Stack.Env sets a marker of the test's own, a key and a setting.
func envOf(t *testing.T, svc string) map[string]string {
	t.Helper()
	s := &Stack{DataDir: t.TempDir(), Env: []string{"STACK_MARKER=1", "THEFOLD_AI_MODEL=m", "GEMINI_API_KEY=gemini-secret"},
		Ports: Ports{GRPC: map[string]int{}, Admin: map[string]int{}}}
	out := map[string]string{}
	for _, kv := range s.env(s.InstancesOf(svc)[0]) {
		k, v, _ := strings.Cut(kv, "=")
		out[k] = v // later entries win, as exec does
	}
	return out
}

// Each service gets only its own secrets: memory none, ai the provider keys, github the
// GitHub token, the gateway the SMTP password; no service the administrator's database URL
// (each gets its own role's from startOne), a role's password, or a variable nothing reads.
func TestServiceEnvSecrets(t *testing.T) {
	for _, kv := range operatorEnv {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	secrets := map[string][]string{ // secret variable → the services that may have it
		"THEFOLD_DATABASE_URL": nil, "THEFOLD_TASKS_DB_PASSWORD": nil, "THEFOLD_AI_DB_PASSWORD": nil,
		"AWS_SECRET_ACCESS_KEY": nil, "STACK_MARKER": platform.ServiceNames,
		"ANTHROPIC_API_KEY": {"ai"}, "GEMINI_API_KEY": {"ai"}, "THEFOLD_AI_MODEL": {"ai"}, "OPENAI_API_KEY": {"ai"}, "CUSTOM_LLM_TOKEN": {"ai"}, "THEFOLD_AI_API_KEY": {"ai"},
		"THEFOLD_GITHUB_TOKEN":  {"github"},
		"THEFOLD_SMTP_PASSWORD": {"gateway"},
		"HTTPS_PROXY":           {"ai", "github", "sandbox"},
	}
	for _, svc := range platform.ServiceNames {
		env := envOf(t, svc)
		for name, may := range secrets {
			_, has := env[name]
			if want := slices.Contains(may, svc); has != want {
				t.Errorf("%s: has %s = %v, want %v", svc, name, has, want)
			}
		}
		for _, name := range []string{"PATH", "HOME", "LANG", "THEFOLD_LOG_LEVEL", "THEFOLD_GRPC_MAX_CONCURRENT_STREAMS", "THEFOLD_AUTH_PUBLIC_KEY_FILE"} {
			if _, ok := env[name]; !ok {
				t.Errorf("%s: %s missing", svc, name)
			}
		}
	}
	for svc, names := range map[string][]string{
		"memory":  {"THEFOLD_MEMORY_HYBRID_ALPHA"},
		"ai":      {"THEFOLD_AI_BASE_URL", "THEFOLD_AI_KEY_ENV_ALLOW"},
		"sandbox": {"THEFOLD_SANDBOX_GOPROXY", "GOMODCACHE", "DOCKER_HOST"},
		"gateway": {"THEFOLD_HTTP_RATE_PER_USER"},
	} {
		env := envOf(t, svc)
		for _, n := range names {
			if _, ok := env[n]; !ok {
				t.Errorf("%s: its own setting %s missing", svc, n)
			}
		}
		if svc != "ai" {
			continue
		}
		// The ai service's settings stay with it.
		if _, ok := envOf(t, "memory")["THEFOLD_AI_BASE_URL"]; ok {
			t.Error("memory has THEFOLD_AI_BASE_URL")
		}
	}
}

var envTag = regexp.MustCompile(`env:"([A-Z][A-Z0-9_]*)`)

// tagsUnder returns the variables the env tags of the Go sources under dir read.
func tagsUnder(t *testing.T, dir string) []string {
	t.Helper()
	var names []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "gen" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range envTag.FindAllStringSubmatch(string(b), -1) {
			names = append(names, m[1])
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// Nothing a service reads is dropped: every env tag of a service's own code reaches that
// service, and every env tag of pkg/ (the platform every service runs on) reaches all of
// them. A new setting outside these rules fails here, naming it: add it to env.go.
func TestServiceEnvKeepsSettings(t *testing.T) {
	t.Parallel()
	// Set by the launcher itself, never inherited.
	explicit := []string{"THEFOLD_DATABASE_URL", "THEFOLD_DATA_DIR", "THEFOLD_GRPC_ADDR", "THEFOLD_ADMIN_ADDR", "THEFOLD_HTTP_ADDR"}
	shared := tagsUnder(t, filepath.Join("..", "..", "pkg"))
	if len(shared) < 10 {
		t.Fatalf("found only %d settings under pkg/: wrong directory?", len(shared))
	}
	for _, svc := range platform.ServiceNames {
		own := tagsUnder(t, filepath.Join("..", "..", "services", svc))
		for _, name := range append(own, shared...) {
			if strings.HasPrefix(name, "THEFOLD_TEST_") || slices.Contains(explicit, name) {
				continue
			}
			if !allowedEnv(svc, name, []string{"*_API_KEY"}) {
				t.Errorf("%s reads %s, but the launcher does not pass it on", svc, name)
			}
		}
	}
}
