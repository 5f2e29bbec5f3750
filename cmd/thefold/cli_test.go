package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// The command line's exit codes and messages for what goes wrong before the API answers.
func TestExecuteExitCodes(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("THEFOLD_CONFIG_DIR", dir)
	t.Setenv("THEFOLD_TOKEN", "")
	t.Setenv("THEFOLD_API_KEY", "")
	cases := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"unknown command", []string{"deploy"}, exitUsage, `unknown command "deploy"`},
		{"bad flag", []string{"tasks", "list", "--nope"}, exitUsage, "unknown flag: --nope"},
		{"missing argument", []string{"tasks", "get"}, exitUsage, "want TASK_ID"},
		{"bad status", []string{"tasks", "list", "--status", "sleeping"}, exitUsage, `--status "sleeping"`},
		{"not logged in", []string{"tasks", "list"}, exitAuth, "not logged in"},
		{"no such profile", []string{"whoami", "--profile", "ci"}, exitUsage, `no profile "ci"`},
		{"login needs one way", []string{"login"}, exitUsage, "give one of --email, --api-key or --token"},
		{"stack command keeps its flags", []string{"status", "-data-dir", dir, "-src", dir}, exitFailure, "not running"},
		{"answer without text", []string{"jobs", "answer", "0b6f3c2e-8d1a-4f7e-a5c9-3e2d1b0a9f87"}, exitUsage, `want JOB_ID "TEXT"`},
		{"empty answer", []string{"jobs", "answer", "0b6f3c2e-8d1a-4f7e-a5c9-3e2d1b0a9f87", " "}, exitUsage, "is empty"},
		{"resolve without a note", []string{"jobs", "resolve", "0b6f3c2e-8d1a-4f7e-a5c9-3e2d1b0a9f87"}, exitUsage, "--note is required"},
		{"audit without a job", []string{"jobs", "audit"}, exitUsage, "want JOB_ID"},
		{"graph without a repository", []string{"tasks", "graph"}, exitUsage, "--repo is required"},
		{"import without a repository", []string{"tasks", "import-issues"}, exitUsage, "--repo is required"},
		{"update with nothing to change", []string{"tasks", "update", "6c1e0f4a-2b7d-4c1e-9f3a-0d5b8e2a7c41"}, exitUsage, "nothing to change"},
		{"update with a bad priority", []string{"tasks", "update", "6c1e0f4a-2b7d-4c1e-9f3a-0d5b8e2a7c41", "--priority", "asap"}, exitUsage, `--priority "asap"`},
		{"usage by nonsense", []string{"usage", "--by", "nonsense"}, exitUsage, `--by "nonsense": one of model, day, phase`},
		{"usage by repository", []string{"usage", "--by", "repo"}, exitUsage, "filter with --repo"},
		{"usage since and from", []string{"usage", "--since", "24h", "--from", "2026-11-01"}, exitUsage, "not both"},
		{"usage since nonsense", []string{"usage", "--since", "a while"}, exitUsage, `--since "a while"`},
		{"skills get without an id", []string{"skills", "get"}, exitUsage, "want SKILL_ID"},
		{"skills list bad phase", []string{"skills", "list", "--phase", "later"}, exitUsage, `--phase "later"`},
		{"models list not logged in", []string{"models", "list"}, exitAuth, "not logged in"},
		{"prefs set with nothing to change", []string{"prefs", "set"}, exitUsage, "nothing to change"},
		{"prefs set sub-agents maybe", []string{"prefs", "set", "--sub-agents", "maybe"}, exitUsage, `--sub-agents "maybe": on or off`},
		{"prefs set bad budget mode", []string{"prefs", "set", "--budget-mode", "cheap"}, exitUsage,
			`--budget-mode "cheap": one of balanced, quality_first, aggressive_save`},
		{"prefs set bad merge", []string{"prefs", "set", "--merge", "zip"}, exitUsage, `--merge "zip": one of concatenate, ai_merge`},
		{"prefs set model of no purpose", []string{"prefs", "set", "--model", "deploy=x"}, exitUsage, `--model "deploy=x": want PURPOSE=MODEL_ID`},
		{"prefs set model without purpose", []string{"prefs", "set", "--model", "claude"}, exitUsage, `--model "claude"`},
		{"prefs set bad cost", []string{"prefs", "set", "--job-max-cost", "lots"}, exitUsage, `--job-max-cost "lots": want dollars`},
		{"prefs set negative cost", []string{"prefs", "set", "--job-max-cost", "-1"}, exitUsage, `--job-max-cost "-1"`},
		{"prefs set negative tokens", []string{"prefs", "set", "--job-max-tokens", "-5"}, exitUsage, "--job-max-tokens -5: must not be negative"},
		{"prefs set bad wall time", []string{"prefs", "set", "--job-max-wall-time", "soon"}, exitUsage, `invalid argument "soon"`},
		{"prefs set unknown moment", []string{"prefs", "set", "--notify", "sms=on"}, exitUsage, `--notify "sms=on": want MOMENT=on|off`},
		{"prefs set moment maybe", []string{"prefs", "set", "--notify", "review_ready=maybe"}, exitUsage, `--notify review_ready "maybe": on or off`},
		{"prefs get with an argument", []string{"prefs", "get", "alice"}, exitUsage, "unknown command"},
		{"prefs get not logged in", []string{"prefs", "get"}, exitAuth, "not logged in"},
		{"prefs set not logged in", []string{"prefs", "set", "--sub-agents", "on", "--notify", "job_failed=off"}, exitAuth, "not logged in"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := execute(context.Background(), c.args, strings.NewReader(""), &out, &errOut)
			if code != c.code || !strings.Contains(errOut.String(), c.stderr) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errOut.String(), c.code, c.stderr)
			}
		})
	}
	var out bytes.Buffer
	if code := execute(context.Background(), []string{"--help"}, strings.NewReader(""), &out, &out); code != 0 || !strings.Contains(out.String(), "Exit codes:") {
		t.Fatalf("help: %d %q", code, out.String())
	}
	// Shell completion for the three shells, which knows the commands.
	for shell, want := range map[string]string{"bash": "__start_thefold", "zsh": "#compdef thefold", "fish": "complete -c thefold"} {
		out.Reset()
		if code := execute(context.Background(), []string{"completion", shell}, strings.NewReader(""), &out, &out); code != 0 || !strings.Contains(out.String(), want) {
			t.Errorf("completion %s: exit %d, %d bytes without %q", shell, code, out.Len(), want)
		}
	}
	out.Reset()
	execute(context.Background(), []string{"__complete", "ta"}, strings.NewReader(""), &out, &out)
	if !strings.Contains(out.String(), "tasks") {
		t.Errorf("completing \"ta\": %q", out.String())
	}
}

// Every command a person runs shows an example in its help (the stack commands document
// their Go-style flags themselves, and cobra's own commands are cobra's).
func TestEveryCommandHasAnExample(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		switch {
		case c.GroupID == "stack", c.Hidden, c.Name() == "help", c.Name() == "completion",
			c.Name() == cobra.ShellCompRequestCmd, c.Name() == cobra.ShellCompNoDescRequestCmd:
			return
		case c.Runnable() && strings.TrimSpace(c.Example) == "":
			t.Errorf("%q has no Example", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	var out bytes.Buffer
	walk(newRoot(strings.NewReader(""), &out, &out))
}

// Credentials are kept readable by their owner alone.
func TestProfilesAreTheOwnersAlone(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("THEFOLD_CONFIG_DIR", filepath.Join(dir, "cfg"))
	ps, path, err := loadProfiles()
	if err != nil {
		t.Fatal(err)
	}
	ps.Profiles["p"] = &profile{Token: "secret"}
	if err := ps.save(path); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("%s: %v %v", path, fi.Mode(), err)
	}
	if di, _ := os.Stat(filepath.Dir(path)); di.Mode().Perm() != 0o700 {
		t.Fatalf("its directory: %v", di.Mode())
	}
	again, _, err := loadProfiles()
	if err != nil || again.Profiles["p"].Token != "secret" {
		t.Fatalf("reloaded %v, %v", again, err)
	}
}
