// Package keyref resolves a provider's api_key_ref. The registry stores where a key lives,
// never the key; "env:NAME" reads NAME from the ai process's environment — but only a NAME
// the operator allows (THEFOLD_AI_KEY_ENV_ALLOW, default "*_API_KEY"). Without that rule, an
// admin credential or an API key with ai:write could create a provider whose key is
// env:THEFOLD_DATABASE_URL (or any other secret of the process) and whose base_url is a host
// of its choosing, and the ai service would send that secret there as a bearer token.
package keyref

import (
	"errors"
	"fmt"
	"path"
	"strings"
)

// DefaultAllow is the default THEFOLD_AI_KEY_ENV_ALLOW: the providers' own variables
// (ANTHROPIC_API_KEY, OPENAI_API_KEY, …).
const DefaultAllow = "*_API_KEY"

// ErrNotAllowed is returned for an env:NAME whose NAME the operator does not allow.
var ErrNotAllowed = errors.New("environment variable not allowed for provider keys")

// Allow is a list of glob patterns (path.Match syntax) of variable names "env:NAME" may name.
type Allow []string

// ParseAllow checks patterns; empty entries are dropped. An empty list allows no variable.
func ParseAllow(patterns []string) (Allow, error) {
	var out Allow
	var problems []error
	for _, p := range patterns {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if _, err := path.Match(p, ""); err != nil {
			problems = append(problems, fmt.Errorf("%q: %w", p, err))
			continue
		}
		out = append(out, p)
	}
	return out, errors.Join(problems...)
}

// Default is the allow-list when the operator set none.
func Default() Allow { return Allow{DefaultAllow} }

// Allows reports whether "env:name" may be resolved.
func (a Allow) Allows(name string) bool {
	if name == "" {
		return false
	}
	for _, p := range a {
		if ok, err := path.Match(p, name); err == nil && ok {
			return true
		}
	}
	return false
}

func (a Allow) String() string { return strings.Join(a, ",") }

// EnvName returns NAME of an "env:NAME" reference.
func EnvName(ref string) (string, bool) {
	name, ok := strings.CutPrefix(ref, "env:")
	return name, ok && name != ""
}

// Lookup reads one environment variable (as os.LookupEnv).
type Lookup func(name string) (string, bool)

// Guard returns lookup restricted to the names a allows: any other name is not there. Every
// resolution of an api_key_ref goes through it, whatever checked the reference before.
func (a Allow) Guard(lookup Lookup) Lookup {
	if lookup == nil {
		return nil
	}
	return func(name string) (string, bool) {
		if !a.Allows(name) {
			return "", false
		}
		return lookup(name)
	}
}

// Check is the registration-time check of ref: an "env:NAME" whose NAME is not allowed is
// ErrNotAllowed. Other references (none, or a secret store's name) pass.
func (a Allow) Check(ref string) error {
	name, ok := EnvName(ref)
	if !ok || a.Allows(name) {
		return nil
	}
	return fmt.Errorf("env:%s: %w (THEFOLD_AI_KEY_ENV_ALLOW is %q)", name, ErrNotAllowed, a.String())
}
