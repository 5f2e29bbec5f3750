package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
		{"status of nothing", []string{"status", "-data-dir", dir, "-src", dir}, "not running", "tasks    :9101  stopped"},
		{"token before up", []string{"token", "-data-dir", dir, "-src", dir}, "no admin token yet", ""},
		{"init", []string{"init", "-data-dir", dir, "-src", dir}, "", "admin token"},
		{"down of nothing", []string{"down", "-data-dir", dir, "-src", dir}, "", "stopped"},
		{"up outside a source tree", []string{"up", "-data-dir", dir, "-src", filepath.Join(dir, "missing")}, "go build", ""},
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

func TestTokenPrintsTheAdminToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "admin.token"), []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"token", "-data-dir", dir, "-src", dir}, &out); err != nil || out.String() != "tok\n" {
		t.Fatalf("token = %q, %v", out.String(), err)
	}
}
