package chat

import (
	"strings"
	"testing"
)

// Every tool names the RPCs it makes, each one of TheFold's, so that an API key's scopes
// bound what a reply may do: a key narrowed to the agent cannot list repositories or create
// tasks through the conversation; a read-only key can read but not write; no scopes (a full
// login) allow every tool.
func TestToolsKeepToTheScopes(t *testing.T) {
	for name, tl := range tools {
		if len(tl.methods) == 0 {
			t.Errorf("tool %s names no RPC", name)
		}
		for _, m := range tl.methods {
			if !strings.HasPrefix(m, "/thefold.") {
				t.Errorf("tool %s: %q is not one of TheFold's RPCs", name, m)
			}
		}
		if m := outOfScope(tl, nil); m != "" {
			t.Errorf("tool %s refused without scopes: %s", name, m)
		}
		if m := outOfScope(tl, []string{"*:write"}); m != "" {
			t.Errorf("tool %s refused under *:write: %s", name, m)
		}
	}
	for _, c := range []struct {
		tool   string
		scopes []string
		want   string
	}{
		{"list_repos", []string{"agent:write"}, "/thefold.github.v1.RepoService/ListRepos"},
		{"create_task", []string{"agent:write", "tasks:read"}, "/thefold.tasks.v1.TaskService/CreateTask"},
		{"list_tasks", []string{"tasks:read"}, ""},
		{"start_task", []string{"agent:read"}, "/thefold.agent.v1.AgentService/StartTask"},
		{"get_job", []string{"agent:read"}, ""},
		{"search_memory", []string{"*:read"}, ""},
	} {
		if got := outOfScope(tools[c.tool], c.scopes); got != c.want {
			t.Errorf("%s under %v: refused %q, want %q", c.tool, c.scopes, got, c.want)
		}
	}
}
