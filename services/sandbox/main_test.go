package main

import (
	"context"
	"strings"
	"testing"

	"github.com/thefold/thefold/pkg/config"

	"github.com/thefold/thefold/services/sandbox/internal/service"
)

// The sandbox service's configuration: the defaults are valid (30-minute idle TTL, auto
// backend), and every bad setting is named.
func TestConfig(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want []string // in the error; none: valid
	}{
		{"defaults", nil, nil},
		{"bwrap with a package proxy", map[string]string{"THEFOLD_SANDBOX_BACKEND": "bwrap", "THEFOLD_SANDBOX_GOPROXY": "http://proxy:3000"}, nil},
		{"a vulnerability database", map[string]string{"THEFOLD_SANDBOX_GOVULNDB": "https://vuln.go.dev"}, nil},
		{"a vulnerability database that is no http URL", map[string]string{"THEFOLD_SANDBOX_GOVULNDB": "file:///srv/vulndb"}, []string{"THEFOLD_SANDBOX_GOVULNDB"}},
		{"a vulnerability database with credentials", map[string]string{"THEFOLD_SANDBOX_GOVULNDB": "https://u:p@vulndb.example"}, []string{"THEFOLD_SANDBOX_GOVULNDB"}},
		{"unknown backend", map[string]string{"THEFOLD_SANDBOX_BACKEND": "vm"}, []string{"THEFOLD_SANDBOX_BACKEND"}},
		{"local without the opt-in", map[string]string{"THEFOLD_SANDBOX_BACKEND": "local"}, []string{"THEFOLD_SANDBOX_ALLOW_LOCAL"}},
		{"local for development", map[string]string{"THEFOLD_SANDBOX_BACKEND": "local", "THEFOLD_SANDBOX_ALLOW_LOCAL": "true"}, nil},
		{"every problem at once", map[string]string{"THEFOLD_SANDBOX_TTL": "0s", "THEFOLD_SANDBOX_MAX_PER_OWNER": "0",
			"THEFOLD_SANDBOX_PIDS": "2", "THEFOLD_SANDBOX_ALLOW_EXTRA": "rm -rf,ok"},
			[]string{"THEFOLD_SANDBOX_TTL", "THEFOLD_SANDBOX_MAX_PER_OWNER", "THEFOLD_SANDBOX_PIDS", `"rm -rf"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var cfg service.Config
			err := config.Load(context.Background(), &cfg, config.Map(tc.env, nil))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if tc.env == nil && (cfg.TTL.Minutes() != 30 || cfg.Backend != "auto") {
					t.Fatalf("defaults: ttl %s backend %s", cfg.TTL, cfg.Backend)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted %v", tc.env)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		})
	}
}
