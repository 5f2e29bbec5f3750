package mcpserver

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	mcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/thefold/thefold/pkg/client"
	"github.com/thefold/thefold/pkg/grpctest"
	"github.com/thefold/thefold/pkg/platform"
)

// connect runs NewServer(c) and returns an SDK client session to it over the SDK's
// in-memory transport.
func connect(t *testing.T, c *client.Client, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	st, ct := mcp.NewInMemoryTransports()
	ss, err := NewServer(c, "test").Connect(ctx, st, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ss.Close() })
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "test"}, opts).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// unreachable is a client of services that do not listen: a call that got past the input
// checks fails with UNAVAILABLE or DEADLINE_EXCEEDED within a few seconds.
func unreachable(t *testing.T) *client.Client {
	t.Helper()
	cfg := client.Config{Token: "unused", Timeout: 2 * time.Second, Addrs: map[string]string{}}
	for _, s := range platform.ServiceNames {
		cfg.Addrs[s] = grpctest.FreeAddr(t)
	}
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// text is a result's text content.
func text(r *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range r.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

func TestTools(t *testing.T) {
	t.Parallel()
	cs := connect(t, unreachable(t), nil)
	ctx := context.Background()
	res, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	readOnly := map[string]bool{}
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		readOnly[tool.Name] = tool.Annotations != nil && tool.Annotations.ReadOnlyHint
		if tool.Description == "" || tool.InputSchema == nil || tool.OutputSchema == nil {
			t.Errorf("tool %s lacks a description or a schema", tool.Name)
		}
	}
	want := []string{"answer_clarification", "create_and_start_task", "create_task", "find_relevant_files", "get_job", "get_review",
		"list_repos", "list_tasks", "plan_project", "search_memory", "start_project", "start_task", "watch_job"}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Fatalf("tools = %v, want %v", names, want)
	}
	for _, n := range names {
		for _, verb := range []string{"approve", "reject", "request_changes", "merge", "delete", "setting"} {
			if strings.Contains(n, verb) {
				t.Errorf("tool %s decides what the person decides", n)
			}
		}
	}
	for _, n := range []string{"get_job", "watch_job", "get_review", "search_memory", "find_relevant_files", "list_repos", "list_tasks"} {
		if !readOnly[n] {
			t.Errorf("%s is not marked read-only", n)
		}
	}
	if readOnly["start_project"] || readOnly["create_task"] {
		t.Error("a tool with side effects is marked read-only")
	}
	if ins := cs.InitializeResult().Instructions; !strings.Contains(ins, "No tool approves, rejects or requests changes on a review, merges a pull request, deletes anything, or changes settings") {
		t.Errorf("instructions = %q", ins)
	}
}

// Bad input is a tool error naming the field, before any call to TheFold.
func TestBadInput(t *testing.T) {
	t.Parallel()
	cs := connect(t, unreachable(t), nil)
	const id = "0b9c8d2e-8a4f-4c55-9a4e-2f7b9b3f6a10"
	cases := []struct {
		tool string
		args map[string]any
		want []string
	}{
		{"start_task", map[string]any{}, []string{"task_id"}},
		{"start_task", map[string]any{"task_id": " "}, []string{"INVALID_ARGUMENT", "task_id: required"}},
		{"start_task", map[string]any{"task_id": "task-1"}, []string{"INVALID_ARGUMENT", "task_id: not a UUID"}},
		{"start_task", map[string]any{"task_id": id, "budget": 5}, []string{"budget"}},
		{"create_task", map[string]any{"repo": "no-slash", "title": "x"}, []string{"INVALID_ARGUMENT", "repo: want \"owner/name\""}},
		{"create_task", map[string]any{"repo": "local/demo", "title": "  "}, []string{"INVALID_ARGUMENT", "title: required"}},
		{"create_task", map[string]any{"repo": "local/demo", "title": strings.Repeat("x", 501)}, []string{"title: at most 500"}},
		{"create_and_start_task", map[string]any{"title": "x"}, []string{"repo"}},
		{"get_job", map[string]any{"job_id": 7}, []string{"job_id"}},
		{"watch_job", map[string]any{"job_id": id, "timeout_seconds": 601}, []string{"timeout_seconds", "maximum"}},
		{"watch_job", map[string]any{"job_id": id, "timeout_seconds": 0}, []string{"timeout_seconds", "minimum"}},
		{"answer_clarification", map[string]any{"job_id": id, "answer": "\t"}, []string{"answer: required"}},
		{"get_review", map[string]any{"review_id": "r1"}, []string{"review_id: not a UUID"}},
		{"search_memory", map[string]any{"query": ""}, []string{"query: required"}},
		{"search_memory", map[string]any{"query": "x", "limit": 51}, []string{"limit", "maximum"}},
		{"search_memory", map[string]any{"query": "x", "repo": "../x"}, []string{"repo:"}},
		{"find_relevant_files", map[string]any{"repo": "local/demo", "query": "x", "max_files": 101}, []string{"max_files"}},
		{"find_relevant_files", map[string]any{"query": "x"}, []string{"repo"}},
		{"list_tasks", map[string]any{"statuses": []string{"finished"}}, []string{"statuses"}},
		{"list_tasks", map[string]any{"limit": 0}, []string{"limit"}},
		{"plan_project", map[string]any{"repo": "local/demo", "request": " "}, []string{"request: required"}},
		{"start_project", map[string]any{"project_id": id}, []string{"confirm"}},
		{"start_project", map[string]any{"project_id": id, "confirm": false}, []string{"INVALID_ARGUMENT", "confirm: must be true", "read its plan"}},
		{"start_project", map[string]any{"project_id": "", "confirm": true}, []string{"project_id: required"}},
	}
	for _, tc := range cases {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tc.tool, Arguments: tc.args})
		cancel()
		if err != nil {
			t.Errorf("%s %v: protocol error %v, want a tool error", tc.tool, tc.args, err)
			continue
		}
		got := text(res)
		if !res.IsError {
			t.Errorf("%s %v: not an error: %s", tc.tool, tc.args, got)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("%s %v: %q does not contain %q", tc.tool, tc.args, got, w)
			}
		}
		if strings.Contains(got, "UNAVAILABLE") || strings.Contains(got, "DEADLINE_EXCEEDED") {
			t.Errorf("%s %v: the bad input reached TheFold: %s", tc.tool, tc.args, got)
		}
	}
	// An unknown tool is the protocol's error, not a tool's.
	if _, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "approve_review", Arguments: map[string]any{"id": id}}); err == nil {
		t.Error("approve_review was called")
	}
}

func TestCheckWatch(t *testing.T) {
	t.Parallel()
	const id = "0b9c8d2e-8a4f-4c55-9a4e-2f7b9b3f6a10"
	cases := []struct {
		in      WatchInput
		want    time.Duration
		wantErr string
	}{
		{WatchInput{JobID: id}, 120 * time.Second, ""},
		{WatchInput{JobID: " " + strings.ToUpper(id) + " ", TimeoutSeconds: 600}, 600 * time.Second, ""},
		{WatchInput{JobID: id, TimeoutSeconds: 601}, 0, "timeout_seconds: must be 1–600"},
		{WatchInput{JobID: id, TimeoutSeconds: -1}, 0, "timeout_seconds"},
		{WatchInput{}, 0, "job_id: required"},
	}
	for _, tc := range cases {
		gotID, got, err := checkWatch(tc.in)
		switch {
		case tc.wantErr != "":
			if err == nil || !strings.Contains(callError("", err).Error(), tc.wantErr) {
				t.Errorf("checkWatch(%+v) = %v, want %q", tc.in, err, tc.wantErr)
			}
		case err != nil || got != tc.want || gotID != id:
			t.Errorf("checkWatch(%+v) = %q, %v, %v; want %v", tc.in, gotID, got, err, tc.want)
		}
	}
}

func TestCheckListTasks(t *testing.T) {
	t.Parallel()
	req, err := checkListTasks(ListTasksInput{Repo: " local/demo ", Statuses: []string{"in_review", "BACKLOG"}})
	if err != nil {
		t.Fatal(err)
	}
	if req.Repo != "local/demo" || req.PageSize != 50 || len(req.Statuses) != 2 || req.Statuses[0].String() != "TASK_STATUS_IN_REVIEW" || req.Statuses[1].String() != "TASK_STATUS_BACKLOG" {
		t.Fatalf("req = %v", req)
	}
	if _, err := checkListTasks(ListTasksInput{Statuses: []string{"in_review", "unspecified"}}); err == nil || !strings.Contains(callError("", err).Error(), "statuses[1]: unknown status") {
		t.Fatalf("unspecified status: %v", err)
	}
}

func TestCutLines(t *testing.T) {
	t.Parallel()
	diff := "@@ -0,0 +1,3 @@\n+a\n+b\n+c\n"
	cases := []struct {
		n       int
		want    string
		wantCut bool
	}{
		{100, diff, false},
		{20, "@@ -0,0 +1,3 @@\n+a\n… (2 more lines)\n", true},
		{5, "@@ -0… (4 more lines)\n", true},
		{0, "", true},
	}
	for _, tc := range cases {
		got, cut := cutLines(diff, tc.n)
		if got != tc.want || cut != tc.wantCut {
			t.Errorf("cutLines(%d) = %q, %v; want %q, %v", tc.n, got, cut, tc.want, tc.wantCut)
		}
	}
	if got := cutText("héllo", 2); got != "h…" {
		t.Errorf("cutText = %q", got)
	}
}

func TestDollars(t *testing.T) {
	t.Parallel()
	for micros, want := range map[int64]string{0: "$0.0000", 42_100: "$0.0421", 1_234_567: "$1.234567", 2_000_000: "$2.0000", -500: "-$0.0005"} {
		if got := dollars(micros); got != want {
			t.Errorf("dollars(%d) = %q, want %q", micros, got, want)
		}
	}
}

func TestCheckLoopback(t *testing.T) {
	t.Parallel()
	for addr, ok := range map[string]bool{"127.0.0.1:8765": true, "[::1]:8765": true, "localhost:8765": true,
		":8765": false, "0.0.0.0:8765": false, "192.168.1.2:8765": false, "example.com:80": false, "127.0.0.1": false} {
		if err := checkLoopback(addr); (err == nil) != ok {
			t.Errorf("checkLoopback(%q) = %v, want ok %v", addr, err, ok)
		}
	}
}
