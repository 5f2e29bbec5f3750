// Package config loads a service's typed configuration from THEFOLD_… environment variables
// (or a map, in tests), validates it, and renders it for the start-up log with secrets masked.
package config

import (
	"context"
	"errors"
	"fmt"
	"reflect"
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
// `secret:"true"` are shown as "***" (or "" when unset); secrets embedded in URLs
// (postgres://user:password@host) have the password masked.
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
			val = MaskURLPassword(val)
		}
		out[name] = val
	}
}

// MaskURLPassword hides the password of a URL-shaped string (scheme://user:pass@host…).
func MaskURLPassword(s string) string {
	scheme := strings.Index(s, "://")
	if scheme < 0 {
		return s
	}
	rest := s[scheme+3:]
	at := strings.Index(rest, "@")
	if at < 0 {
		return s
	}
	userinfo := rest[:at]
	colon := strings.Index(userinfo, ":")
	if colon < 0 {
		return s
	}
	return s[:scheme+3] + userinfo[:colon] + ":***" + rest[at:]
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
