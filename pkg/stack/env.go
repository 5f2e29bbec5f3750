package stack

import (
	"path"
	"slices"
	"strings"

	"github.com/thefold/thefold/pkg/platform"
)

// A service is given only the environment it needs, not the launcher's whole environment:
// the operator's shell holds provider keys, the GitHub token, the SMTP password and the
// administrator's database URL, and a service that has no use for a secret should not be
// able to leak it (through a log line, a crash dump, a child process or an SSRF). What each
// service gets from the launcher's environment (and from Stack.Env):
//   - the process basics every Go program may use (baseNames, basePrefixes);
//   - the platform's settings every service reads (pkg/platform, pkg/auth, pkg/events, …:
//     sharedNames, sharedPrefixes);
//   - its own settings, THEFOLD_<SERVICE>_…, and those of ownPrefixes (the gateway's edge
//     and mail settings, the sandbox's Go toolchain and docker engine, …);
//   - the ai service alone: the provider keys, variables named *_API_KEY or matching
//     THEFOLD_AI_KEY_ENV_ALLOW (what an api_key_ref "env:NAME" may read).
//
// Never inherited, whoever the service: THEFOLD_DATABASE_URL (each service gets its own
// role's URL from startOne; the launcher's is the administrator's), the roles' passwords
// (THEFOLD_<SERVICE>_DB_PASSWORD, which only the launcher reads) and the identity files
// authEnv sets. The services do not share a database URL: each has its own role.
var (
	baseNames = []string{"PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "LANG", "LANGUAGE", "TZ",
		"SSL_CERT_FILE", "SSL_CERT_DIR", "GODEBUG", "GOMAXPROCS", "GOMEMLIMIT", "GOGC", "GOTRACEBACK"}
	basePrefixes = []string{"LC_", "OTEL_"}

	sharedNames = []string{"THEFOLD_LOG_LEVEL", "THEFOLD_PPROF", "THEFOLD_DRAIN_DELAY", "THEFOLD_SHUTDOWN_TIMEOUT",
		"THEFOLD_MIGRATE_ON_START", "THEFOLD_DATABASE_MAX_CONNS"}
	sharedPrefixes = []string{"THEFOLD_AUTH_", "THEFOLD_EVENTS_", "THEFOLD_GRPC_"}

	// proxyNames reach the services that call out of the host (providers, GitHub, package
	// sources): an outbound proxy's URL can hold its credentials.
	proxyNames = []string{"HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY", "http_proxy", "https_proxy", "no_proxy"}

	ownPrefixes = map[string][]string{
		"gateway": {"THEFOLD_HTTP_", "THEFOLD_LOGIN_", "THEFOLD_MAILER", "THEFOLD_MAIL_", "THEFOLD_SMTP_", "THEFOLD_ADMIN_EMAIL"},
		// The sandbox runs the Go toolchain (go env, builds in the local and bwrap backends)
		// and talks to the docker engine.
		"sandbox": {"GOROOT", "GOPATH", "GOMODCACHE", "GOCACHE", "GOFLAGS", "GOPROXY", "GONOPROXY", "GOPRIVATE",
			"GONOSUMDB", "GONOSUMCHECK", "GOSUMDB", "GOINSECURE", "GOTOOLCHAIN", "GOENV", "DOCKER_", "XDG_"},
	}
	proxyServices = []string{"ai", "github", "sandbox"}
)

// serviceEnv filters inherited (the launcher's environment) and given (Stack.Env) —
// NAME=value entries, later ones win — to what svc needs. Of given, the THEFOLD_ settings
// and the provider keys are filtered like inherited ones; its other variables were named
// for the stack on purpose (a test's marker) and go to every service.
func serviceEnv(svc string, inherited, given []string) []string {
	keyAllow := []string{"*_API_KEY"}
	for _, kv := range append(slices.Clip(inherited), given...) {
		if v, ok := strings.CutPrefix(kv, "THEFOLD_AI_KEY_ENV_ALLOW="); ok && strings.TrimSpace(v) != "" {
			keyAllow = strings.Split(v, ",")
		}
	}
	var out []string
	for i, kv := range append(slices.Clip(inherited), given...) {
		name, _, ok := strings.Cut(kv, "=")
		if !ok {
			continue
		}
		if allowedEnv(svc, name, keyAllow) ||
			(i >= len(inherited) && !strings.HasPrefix(name, "THEFOLD_") && !matchAny(keyAllow, name)) {
			out = append(out, kv)
		}
	}
	return out
}

func matchAny(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, err := path.Match(strings.TrimSpace(p), name); err == nil && ok {
			return true
		}
	}
	return false
}

// allowedEnv reports whether svc may inherit the variable name (see above).
func allowedEnv(svc, name string, keyAllow []string) bool {
	own := strings.TrimSuffix(platform.AddrEnv(svc), "ADDR") // e.g. THEFOLD_TASKS_
	switch {
	case name == "THEFOLD_DATABASE_URL", strings.HasPrefix(name, "THEFOLD_") && strings.HasSuffix(name, "_DB_PASSWORD"):
		return false
	case slices.Contains(baseNames, name), hasPrefix(name, basePrefixes),
		slices.Contains(sharedNames, name), hasPrefix(name, sharedPrefixes),
		strings.HasPrefix(name, own), hasPrefix(name, ownPrefixes[svc]):
		return true
	case slices.Contains(proxyNames, name):
		return slices.Contains(proxyServices, svc)
	case svc == "ai":
		return matchAny(keyAllow, name)
	}
	return false
}

func hasPrefix(name string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}
