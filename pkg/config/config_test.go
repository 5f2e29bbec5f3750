package config

import (
	"context"
	"errors"
	"strings"
	"testing"
)

type inner struct {
	Port int `env:"THEFOLD_TEST_PORT, default=9000"`
}

func (i *inner) Validate() error {
	if i.Port <= 0 || i.Port > 65535 {
		return errors.New("THEFOLD_TEST_PORT: must be 1-65535")
	}
	return nil
}

type testConfig struct {
	Name   string `env:"THEFOLD_TEST_NAME, default=svc"`
	Token  string `env:"THEFOLD_TEST_TOKEN" secret:"true"`
	DBURL  string `env:"THEFOLD_TEST_DB, default=postgres://u:pw@localhost/db"`
	Inner  inner
	Level2 string `env:"THEFOLD_TEST_LEVEL"`
}

func (c *testConfig) Validate() error {
	if c.Name == "" {
		return errors.New("THEFOLD_TEST_NAME: required")
	}
	return nil
}

func TestLoadDefaultsOverridesAndValidation(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		env     map[string]string
		wantErr []string
		check   func(t *testing.T, c *testConfig)
	}{
		{name: "defaults", env: nil, check: func(t *testing.T, c *testConfig) {
			if c.Name != "svc" || c.Inner.Port != 9000 {
				t.Fatalf("defaults not applied: %+v", c)
			}
		}},
		{name: "service default beats tag default", env: map[string]string{}, check: func(t *testing.T, c *testConfig) {
			if c.Inner.Port != 9000 {
				t.Fatalf("port = %d", c.Inner.Port)
			}
		}},
		{name: "env overrides", env: map[string]string{"THEFOLD_TEST_PORT": "9101", "THEFOLD_TEST_NAME": "tasks"}, check: func(t *testing.T, c *testConfig) {
			if c.Name != "tasks" || c.Inner.Port != 9101 {
				t.Fatalf("overrides not applied: %+v", c)
			}
		}},
		{name: "all problems reported", env: map[string]string{"THEFOLD_TEST_PORT": "70000", "THEFOLD_TEST_NAME": ""},
			wantErr: []string{"THEFOLD_TEST_PORT", "THEFOLD_TEST_NAME"}},
		{name: "bad type names the variable", env: map[string]string{"THEFOLD_TEST_PORT": "abc"}, wantErr: []string{"THEFOLD_TEST_PORT"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var c testConfig
			err := Load(context.Background(), &c, Map(tc.env, nil))
			if len(tc.wantErr) > 0 {
				if err == nil {
					t.Fatal("expected an error")
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %s", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, &c)
		})
	}
}

func TestRedactedMasksSecrets(t *testing.T) {
	t.Parallel()
	c := testConfig{Name: "x", Token: "s3cret", DBURL: "postgres://thefold:hunter2@db:5432/thefold"}
	r := Redacted(&c)
	if r["THEFOLD_TEST_TOKEN"] != "***" {
		t.Errorf("token shown: %q", r["THEFOLD_TEST_TOKEN"])
	}
	if strings.Contains(r["THEFOLD_TEST_DB"], "hunter2") || !strings.Contains(r["THEFOLD_TEST_DB"], "thefold:***@db") {
		t.Errorf("db url not masked: %q", r["THEFOLD_TEST_DB"])
	}
	if r["THEFOLD_TEST_PORT"] != "0" {
		t.Errorf("nested field missing: %v", r)
	}
	if r["THEFOLD_TEST_NAME"] != "x" {
		t.Errorf("plain field changed: %v", r)
	}
}
