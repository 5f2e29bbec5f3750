package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/thefold/thefold/pkg/auth"
	"github.com/thefold/thefold/pkg/stack"
)

func TestCommands(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cases := []struct {
		name    string
		args    []string
		wantErr string
		wantOut string
	}{
		{"help", []string{"help"}, "", "usage: thefold"},
		{"no command", nil, "", "usage: thefold"},
		{"unknown command", []string{"deploy", "-data-dir", dir}, `unknown command "deploy"`, ""},
		{"bad flag", []string{"status", "-nope"}, "flag provided but not defined", ""},
		{"status of nothing", []string{"status", "-data-dir", dir, "-src", dir}, "not running", "tasks      :9101  down"},
		{"token before up", []string{"token", "-data-dir", dir, "-src", dir}, "no signing key yet", ""},
		{"init", []string{"init", "-data-dir", dir, "-src", dir}, "", "admin token"},
		{"down of nothing", []string{"down", "-data-dir", dir, "-src", dir}, "", "stopped"},
		// -replicas is checked before anything is built or started.
		{"up with a malformed replica count", []string{"up", "-data-dir", dir, "-src", dir, "-replicas", "agent=three"}, "-replicas: replicas \"agent=three\": want <service>=<count>", ""},
		{"up with two sandboxes", []string{"up", "-data-dir", dir, "-src", dir, "-replicas", "sandbox=2"}, "sandbox runs as one process", ""},
		{"replicas of another command", []string{"status", "-data-dir", dir, "-replicas", "agent=2"}, "flag provided but not defined: -replicas", ""},
		{"up outside a source tree", []string{"up", "-data-dir", dir, "-src", filepath.Join(dir, "missing")}, "go build", ""},
		// The eval refuses bad flags and tasks before it starts anything.
		{"eval with no parallelism", []string{"eval", "-data-dir", dir, "-src", dir, "-parallel", "0"}, "-parallel: want at least 1", ""},
		{"eval of an unknown task", []string{"eval", "-data-dir", dir, "-src", "../..", "-tasks", "go-*,cobol-*"}, `"cobol-*" matches no task`, ""},
		{"eval of a directory without tasks", []string{"eval", "-data-dir", dir, "-src", dir, "-dir", dir}, "no tasks (directories with a task.json)", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), tc.args, &out)
			if tc.wantErr == "" && err != nil {
				t.Fatalf("err = %v", err)
			}
			if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("err = %v, want %q", err, tc.wantErr)
			}
			if !strings.Contains(out.String(), tc.wantOut) {
				t.Fatalf("output %q lacks %q", out.String(), tc.wantOut)
			}
		})
	}
}

func TestTokenPrintsAFreshAdminToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	args := func(cmd string, extra ...string) []string {
		return append([]string{cmd, "-data-dir", dir, "-src", dir}, extra...)
	}
	if err := run(context.Background(), args("init"), io.Discard); err != nil {
		t.Fatal(err)
	}
	initial, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	pub, err := auth.LoadPublicKey(filepath.Join(dir, "keys", auth.PublicKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		extra   []string
		wantTTL time.Duration
		wantErr string
	}{
		{"default lifetime", nil, stack.DefaultAdminTokenTTL, ""},
		{"-token-ttl", []string{"-token-ttl", "2h"}, 2 * time.Hour, ""},
		{"over the maximum", []string{"-token-ttl", "1000h"}, 0, "exceeds the maximum"},
		{"negative", []string{"-token-ttl", "-1h"}, 0, "positive duration"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := run(context.Background(), args("token", tc.extra...), &out)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tok := strings.TrimSpace(out.String())
			if tok == strings.TrimSpace(string(initial)) {
				t.Fatal("token printed the old token, not a fresh one")
			}
			p, err := auth.NewVerifier(pub).Verify(tok)
			if err != nil || !p.HasRole(auth.RoleAdmin) {
				t.Fatalf("printed token: %+v, %v", p, err)
			}
			if life := time.Until(p.ExpiresAt); life > tc.wantTTL || life < tc.wantTTL-time.Minute {
				t.Fatalf("token lives %s, want %s", life, tc.wantTTL)
			}
			saved, _ := os.ReadFile(filepath.Join(dir, "admin.token"))
			if strings.TrimSpace(string(saved)) != tok {
				t.Fatal("fresh token not saved")
			}
		})
	}
}
