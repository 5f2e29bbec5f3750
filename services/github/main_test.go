package main

import (
	"context"
	"strings"
	"testing"

	"github.com/thefold/thefold/pkg/config"

	"github.com/thefold/thefold/services/github/internal/service"
)

// The github service's configuration: the defaults are valid (the local forge), and every
// bad setting is named.
func TestConfig(t *testing.T) {
	cases := []struct {
		name string
		env  map[string]string
		want []string // in the error; none: valid
	}{
		{"defaults", nil, nil},
		{"github owners with a token", map[string]string{"THEFOLD_GITHUB_OWNERS": "acme,octo", "THEFOLD_GITHUB_TOKEN": "t"}, nil},
		{"unknown forge", map[string]string{"THEFOLD_GITHUB_FORGE": "gitlab"}, []string{"THEFOLD_GITHUB_FORGE"}},
		{"github without a token", map[string]string{"THEFOLD_GITHUB_FORGE": "github"}, []string{"THEFOLD_GITHUB_TOKEN"}},
		{"every problem at once", map[string]string{"THEFOLD_GITHUB_OWNERS": "acme,bad owner", "THEFOLD_GITHUB_LOCAL_OWNERS": "acme",
			"THEFOLD_GITHUB_TREE_CACHE": "0"},
			[]string{"THEFOLD_GITHUB_TOKEN", `"bad owner"`, `owner "acme" is in both`, "THEFOLD_GITHUB_TREE_CACHE"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var cfg service.Config
			err := config.Load(context.Background(), &cfg, config.Map(tc.env, nil))
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if tc.env == nil && cfg.Forge != "local" {
					t.Fatalf("default forge %q", cfg.Forge)
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
