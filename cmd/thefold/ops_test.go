package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"text/tabwriter"
	"time"

	"google.golang.org/protobuf/types/known/structpb"

	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
	typev1 "github.com/thefold/thefold/pkg/gen/thefold/type/v1"
)

// The graph as text: numbered in dependency order, each task with its blockers by number
// (a closed blocker that is not listed by the start of its id) and whether it can start.
func TestPrintGraph(t *testing.T) {
	const store, api, docs, gone = "11111111-aaaa", "22222222-bbbb", "33333333-cccc", "99999999-dddd"
	g := &tasksv1.GetTaskGraphResponse{
		Tasks: []*tasksv1.Task{
			{Id: api, Title: "Add the API", Status: tasksv1.TaskStatus_TASK_STATUS_BACKLOG},
			{Id: store, Title: "Write the store", Status: tasksv1.TaskStatus_TASK_STATUS_IN_PROGRESS},
			{Id: docs, Title: "Document it", Status: tasksv1.TaskStatus_TASK_STATUS_BACKLOG},
		},
		Edges: []*tasksv1.TaskEdge{{TaskId: api, BlockedById: store}, {TaskId: docs, BlockedById: api}, {TaskId: docs, BlockedById: gone}},
		Order: []string{store, api, docs},
		Ready: []string{store},
	}
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	printGraph(w, "local/demo", g)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(b.String(), "\n")
	for i, want := range [][]string{
		{"#1", "● Write the store [in_progress]", store},
		{"#2", "○ Add the API [backlog]", "← blocked by #1", api},
		{"#3", "○ Document it [backlog]", "← blocked by #2, 99999999", docs},
	} {
		for _, w := range want {
			if !strings.Contains(lines[i], w) {
				t.Errorf("line %d %q lacks %q", i+1, lines[i], w)
			}
		}
	}
	if !strings.Contains(b.String(), "3 tasks, 1 ready to start") {
		t.Errorf("no summary:\n%s", b.String())
	}
	b.Reset()
	printGraph(&b, "local/demo", &tasksv1.GetTaskGraphResponse{})
	if b.String() != "No open tasks in local/demo.\n" {
		t.Errorf("an empty graph: %q", b.String())
	}
}

func TestCompactDetails(t *testing.T) {
	s, err := structpb.NewStruct(map[string]any{"path": "a.go", "lines": 12, "message": "two words", "files": []any{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := compactDetails(s, 200), `files=["a","b"] lines=12 message="two words" path=a.go`; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if got := compactDetails(s, 10); got != `files=["a"…` {
		t.Errorf("cut: %q", got)
	}
	if got := compactDetails(nil, 10); got != "" {
		t.Errorf("none: %q", got)
	}
}

func TestUsageRange(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	day := func(d int) time.Time { return time.Date(2026, 11, d, 0, 0, 0, 0, time.UTC) }
	cases := []struct {
		since, from, to string
		start, end      time.Time
		err             string
	}{
		{since: "7d", start: now.AddDate(0, 0, -7)},
		{since: "90m", start: now.Add(-90 * time.Minute)},
		{from: "2026-11-01", to: "2026-11-02", start: day(1), end: day(3)},
		{from: "2026-11-01T10:00:00Z", start: day(1).Add(10 * time.Hour)},
		{},
		{since: "-1h", err: "positive duration"},
		{since: "1w", err: `--since "1w"`},
		{since: "1h", to: "2026-11-01", err: "not both"},
		{from: "yesterday", err: `--from "yesterday"`},
		{from: "2026-11-02", to: "2026-11-01", err: "is not after"},
	}
	for _, c := range cases {
		start, end, err := usageRange(c.since, c.from, c.to, now)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: error %v, want %q", c, err, c.err)
			}
			continue
		}
		if err != nil || !start.Equal(c.start) || !end.Equal(c.end) {
			t.Errorf("%+v: %v – %v, %v", c, start, end, err)
		}
	}
}

// A usage table has a column per grouping, in --by's order, and a total.
func TestPrintUsage(t *testing.T) {
	resp := &aiv1.GetUsageResponse{
		Rows: []*aiv1.UsageRow{
			{Day: "2026-11-28", Model: "claude-sonnet-4-5", Provider: "anthropic", Calls: 3, InputTokens: 1200, OutputTokens: 300, CostMicros: 9000},
			{Day: "2026-11-29", Model: "claude-haiku-4-5", Provider: "anthropic", Calls: 1, InputTokens: 100, OutputTokens: 20, CostMicros: 150},
		},
		Total: &aiv1.UsageRow{Calls: 4, InputTokens: 1300, OutputTokens: 320, CostMicros: 9150},
	}
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	printUsage(w, []aiv1.UsageGroupBy{aiv1.UsageGroupBy_USAGE_GROUP_BY_DAY, aiv1.UsageGroupBy_USAGE_GROUP_BY_MODEL}, resp)
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || strings.Join(strings.Fields(lines[0]), " ") != "DAY MODEL CALLS INPUT OUTPUT COST" ||
		strings.Join(strings.Fields(lines[1]), " ") != "2026-11-28 anthropic/claude-sonnet-4-5 3 1200 300 $0.0090" ||
		strings.Join(strings.Fields(lines[3]), " ") != "total 4 1300 320 $0.0092" {
		t.Errorf("usage table:\n%s", b.String())
	}
}

// `prefs set` asks for what its flags name and nothing else.
func TestPrefsUpdateMasksTheFlagsGiven(t *testing.T) {
	changed := func(names ...string) func(string) bool {
		return func(f string) bool { return slices.Contains(names, f) }
	}
	req, err := prefsUpdate(changed("sub-agents", "job-max-cost"), "", "on", "", "", []string{"coding=claude-sonnet-4-5", "review="},
		[]string{"review_ready=off", "job_failed=on"}, 0, "$2.50", 0)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"sub_agents_enabled", "default_models.coding", "default_models.review", "job_budget.max_cost_micros",
		"notifications.review_ready", "notifications.job_failed"}
	if got := req.UpdateMask.Paths; !slices.Equal(got, want) {
		t.Errorf("mask %v, want %v", got, want)
	}
	p := req.Preferences
	if !p.SubAgentsEnabled || p.JobBudget.MaxCostMicros != 2_500_000 || p.DefaultModels["coding"] != "claude-sonnet-4-5" || p.DefaultModels["review"] != "" ||
		p.Notifications.ReviewReady || !p.Notifications.JobFailed {
		t.Errorf("preferences %v", p)
	}
	req, err = prefsUpdate(changed("budget-mode", "merge", "job-max-tokens", "job-max-wall-time"), "alice", "", "Quality-First", "AI_MERGE", nil, nil,
		7000, "", 45*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	p = req.Preferences
	if got := req.UpdateMask.Paths; !slices.Equal(got, []string{"budget_mode", "sub_agent_merge", "job_budget.max_tokens", "job_budget.max_wall_time"}) ||
		p.UserId != "alice" || p.BudgetMode != aiv1.BudgetMode_BUDGET_MODE_QUALITY_FIRST || p.SubAgentMerge != aiv1.MergeStrategy_MERGE_STRATEGY_AI_MERGE ||
		p.JobBudget.MaxTokens != 7000 || p.JobBudget.MaxWallTime.AsDuration() != 45*time.Minute {
		t.Errorf("mask %v, preferences %v", got, p)
	}
	if _, err := prefsUpdate(changed(), "", "", "", "", nil, nil, 0, "", 0); err == nil || !strings.Contains(err.Error(), "nothing to change") {
		t.Errorf("no flags: %v", err)
	}
}

// The preferences as text: a line per setting, what is unset said plainly.
func TestPrintPrefs(t *testing.T) {
	var b bytes.Buffer
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	printPrefs(w, &agentv1.Preferences{UserId: "alice", SubAgentsEnabled: true, SubAgentMerge: aiv1.MergeStrategy_MERGE_STRATEGY_AI_MERGE,
		BudgetMode: aiv1.BudgetMode_BUDGET_MODE_BALANCED, DefaultModels: map[string]string{"coding": "claude-sonnet-4-5"},
		JobBudget:     &typev1.Budget{MaxCostMicros: 2_500_000},
		Notifications: &agentv1.NotificationSettings{JobCompleted: true, JobFailed: true, Clarification: true}})
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(b.String(), "\n") {
		lines = append(lines, strings.Join(strings.Fields(l), " "))
	}
	for _, want := range []string{"user alice", "sub-agents on", "merge ai_merge", "budget mode balanced", "model coding claude-sonnet-4-5",
		"model planning (automatic)", "job max cost $2.5000", "job max tokens (server default)", "notify review_ready off", "notify job_failed on"} {
		if !slices.Contains(lines, want) {
			t.Errorf("no line %q in:\n%s", want, b.String())
		}
	}
}
