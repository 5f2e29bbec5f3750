// Package config loads a service's typed configuration from THEFOLD_… environment variables
// (or a map, in tests), validates it, and renders it for the start-up log with secrets masked.
package config

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"sort"
	"strings"

	"github.com/sethvargo/go-envconfig"
)

// Lookuper finds configuration values by name; envconfig.OsLookuper reads the environment.
type Lookuper = envconfig.Lookuper

// Validator is implemented by configs that can check themselves. Validate reports every
// problem at once (errors.Join), not just the first.
type Validator interface {
	Validate() error
}

// Env returns a Lookuper over the process environment, falling back to defaults. Services
// use defaults for what differs between them (ports), keeping one shared struct.
func Env(defaults map[string]string) Lookuper {
	return envconfig.MultiLookuper(envconfig.OsLookuper(), envconfig.MapLookuper(defaults))
}

// Map returns a Lookuper over m, falling back to defaults; tests use it instead of the environment.
func Map(m, defaults map[string]string) Lookuper {
	return envconfig.MultiLookuper(envconfig.MapLookuper(m), envconfig.MapLookuper(defaults))
}

// Load fills dst (a pointer to a struct with env tags) from l and validates every nested
// struct that implements Validator.
func Load(ctx context.Context, dst any, l Lookuper) error {
	if err := envconfig.ProcessWith(ctx, &envconfig.Config{Target: dst, Lookuper: l}); err != nil {
		return fmt.Errorf("config: %s: %w", variableFor(reflect.TypeOf(dst), err.Error()), err)
	}
	var errs []error
	walkValidators(reflect.ValueOf(dst), &errs)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

func walkValidators(v reflect.Value, errs *[]error) {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		if val, ok := v.Interface().(Validator); ok {
			if err := val.Validate(); err != nil {
				*errs = append(*errs, err)
			}
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return
	}
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if !v.Type().Field(i).IsExported() {
			continue
		}
		if f.Kind() == reflect.Struct && f.CanAddr() {
			walkValidators(f.Addr(), errs)
		}
	}
}

// Redacted returns the effective configuration as name → value for logging. Fields tagged
// `secret:"true"` are shown as "***" (or "" when unset); passwords inside any other value
// (connection strings: URL userinfo, ?password=, key=value) are masked by MaskSecrets.
func Redacted(cfg any) map[string]string {
	out := map[string]string{}
	redact(reflect.ValueOf(cfg), out)
	return out
}

func redact(v reflect.Value, out map[string]string) {
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return
	}
	t := v.Type()
	for i := 0; i < v.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("env")
		name := strings.TrimSpace(strings.Split(tag, ",")[0])
		f := v.Field(i)
		if name == "" {
			if f.Kind() == reflect.Struct || f.Kind() == reflect.Pointer {
				redact(f, out)
			}
			continue
		}
		val := fmt.Sprint(f.Interface())
		switch {
		case sf.Tag.Get("secret") == "true":
			if val != "" {
				val = "***"
			}
		default:
			val = MaskSecrets(val)
		}
		out[name] = val
	}
}

// MaskSecrets hides the passwords in a connection string of any form libpq and pgx accept,
// leaving the rest readable for the start-up log:
//
//	postgres://user:***@host/db                    (URL userinfo)
//	postgres://host/db?password=***&sslpassword=***   (URL query parameters)
//	host=db user=u password=*** sslpassword=***    (key=value, quoted values too)
//
// Anything else is returned unchanged. When in doubt it masks more, never less.
func MaskSecrets(s string) string {
	if scheme := strings.Index(s, "://"); scheme >= 0 {
		s = maskUserinfo(s, scheme+3)
		return queryPassword.ReplaceAllString(s, "${1}***")
	}
	return kvPassword.ReplaceAllString(s, "${1}***")
}

var (
	// queryPassword matches password and sslpassword parameters of a URL's query
	// (percent-encoded values never contain & or #).
	queryPassword = regexp.MustCompile(`(?i)([?&](?:ssl)?password=)[^&#]*`)
	// kvPassword matches password and sslpassword in a key=value connection string: the
	// value runs to the next space, or is single-quoted with backslash escapes.
	kvPassword = regexp.MustCompile(`(?i)(\b(?:ssl)?password\s*=\s*)(?:'(?:[^'\\]|\\.)*'?|\S*)`)
)

// maskUserinfo masks the password of the userinfo that starts at offset from (just after
// "scheme://"). The userinfo ends at the authority's last '@' (a password may hold an
// unescaped '@'); if a '/', '?' or '#' in the password hides it, the first '@' is used.
func maskUserinfo(s string, from int) string {
	rest := s[from:]
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	at := strings.LastIndex(rest[:end], "@")
	if at < 0 {
		at = strings.Index(rest, "@")
	}
	if at < 0 {
		return s
	}
	colon := strings.Index(rest[:at], ":")
	if colon < 0 {
		return s
	}
	return s[:from] + rest[:colon] + ":***" + rest[at:]
}

// SortedKeys returns m's keys in order, for stable log output.
func SortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// variableFor names the environment variable an envconfig error is about. envconfig reports
// Go field paths ("Inner: Port: …"); an operator needs the variable name.
func variableFor(t reflect.Type, msg string) string {
	best, bestLen := "", 0
	var walk func(t reflect.Type, prefix string)
	walk = func(t reflect.Type, prefix string) {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return
		}
		for i := 0; i < t.NumField(); i++ {
			sf := t.Field(i)
			path := prefix + sf.Name
			name := strings.TrimSpace(strings.Split(sf.Tag.Get("env"), ",")[0])
			if name != "" && strings.HasPrefix(msg, path+":") && len(path) > bestLen {
				best, bestLen = name, len(path)
			}
			if name == "" {
				walk(sf.Type, path+": ")
			}
		}
	}
	walk(t, "")
	if best == "" {
		return "invalid value"
	}
	return best
}

// WithDefaults returns a Lookuper that falls back to defaults where l has no value.
func WithDefaults(l Lookuper, defaults map[string]string) Lookuper {
	return envconfig.MultiLookuper(l, envconfig.MapLookuper(defaults))
}
