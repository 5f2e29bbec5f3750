package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/thefold/thefold/pkg/client"
	agentv1 "github.com/thefold/thefold/pkg/gen/thefold/agent/v1"
	aiv1 "github.com/thefold/thefold/pkg/gen/thefold/ai/v1"
	skillsv1 "github.com/thefold/thefold/pkg/gen/thefold/skills/v1"
	tasksv1 "github.com/thefold/thefold/pkg/gen/thefold/tasks/v1"
)

// requireFlag is the usage error of a required flag left empty: checked before connecting,
// so that the mistake is named even when TheFold cannot be reached.
func requireFlag(name, v string) error {
	if strings.TrimSpace(v) == "" {
		return usageError{fmt.Errorf("--%s is required", name)}
	}
	return nil
}

// dollars is micro-dollars as dollars, the way every command shows money.
func dollars(micros int64) string { return fmt.Sprintf("$%.4f", float64(micros)/1e6) }

func taskGraphCommand(g *globals) *cobra.Command {
	var (
		repo   string
		closed bool
	)
	cmd := &cobra.Command{
		Use:   "graph --repo OWNER/NAME",
		Short: "Show a repository's tasks in dependency order, each with what blocks it",
		Long: `graph lists a repository's open tasks in an order that puts every task after the tasks
that block it, numbered, each with the numbers of its blockers:

  ● ready to start (no blocker left open)   ○ waiting for a blocker
  ✓ done                                    ✗ cancelled

-o json or yaml prints the API's answer as it is (tasks, edges, order, ready).`,
		Example: `  thefold tasks graph --repo local/demo
  thefold tasks graph --repo local/demo --closed -o json | jq '.ready'`,
		Args:    cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error { return requireFlag("repo", repo) },
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			resp, err := c.Tasks().GetTaskGraph(cmd.Context(), &tasksv1.GetTaskGraphRequest{Repo: repo, IncludeClosed: closed})
			if err != nil {
				return err
			}
			return g.print(resp, func(w *tabwriter.Writer) { printGraph(w, repo, resp) })
		}),
	}
	cmd.Flags().StringVar(&repo, "repo", "", "the repository (owner/name; required)")
	cmd.Flags().BoolVar(&closed, "closed", false, "include done and cancelled tasks")
	return cmd
}

// printGraph writes the graph as numbered lines in dependency order: a blocker is named by
// its number when it is listed, by the start of its id when it is not (a closed task).
func printGraph(w io.Writer, repo string, g *tasksv1.GetTaskGraphResponse) {
	if len(g.Tasks) == 0 {
		fmt.Fprintf(w, "No open tasks in %s.\n", repo)
		return
	}
	byID := make(map[string]*tasksv1.Task, len(g.Tasks))
	for _, t := range g.Tasks {
		byID[t.Id] = t
	}
	// The order names every task once; a task it leaves out (it should not) still shows.
	order := slices.Clone(g.Order)
	for _, t := range g.Tasks {
		if !slices.Contains(order, t.Id) {
			order = append(order, t.Id)
		}
	}
	num := map[string]int{}
	for _, id := range order {
		if byID[id] != nil {
			num[id] = len(num) + 1
		}
	}
	blockers := map[string][]string{}
	for _, e := range g.Edges {
		blockers[e.TaskId] = append(blockers[e.TaskId], e.BlockedById)
	}
	for _, id := range order {
		t := byID[id]
		if t == nil {
			continue
		}
		mark := "○"
		switch {
		case t.Status == tasksv1.TaskStatus_TASK_STATUS_DONE:
			mark = "✓"
		case t.Status == tasksv1.TaskStatus_TASK_STATUS_CANCELLED:
			mark = "✗"
		case slices.Contains(g.Ready, id):
			mark = "●"
		}
		var by []string
		for _, b := range blockers[id] {
			if n, ok := num[b]; ok {
				by = append(by, fmt.Sprintf("#%d", n))
			} else {
				by = append(by, shortID(b))
			}
		}
		blocked := ""
		if len(by) > 0 {
			blocked = "← blocked by " + strings.Join(by, ", ")
		}
		fmt.Fprintf(w, "#%d\t%s %s [%s]\t%s\t%s\n", num[id], mark, t.Title, enumName(t.Status, "TASK_STATUS_"), blocked, t.Id)
	}
	fmt.Fprintf(w, "\n%d tasks, %d ready to start\n", len(num), len(g.Ready))
}

// shortID is the start of an id, enough to tell ids apart on a screen.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func importIssuesCommand(g *globals) *cobra.Command {
	var (
		repo   string
		labels []string
	)
	cmd := &cobra.Command{
		Use:   "import-issues --repo OWNER/NAME",
		Short: "Import a repository's open issues as tasks (again: updates them)",
		Example: `  thefold tasks import-issues --repo acme/api
  thefold tasks import-issues --repo acme/api --label thefold --label bug`,
		Args:    cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error { return requireFlag("repo", repo) },
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			resp, err := c.Tasks().ImportIssues(cmd.Context(), &tasksv1.ImportIssuesRequest{Repo: repo, Labels: labels})
			if err != nil {
				return err
			}
			return g.print(resp, func(w *tabwriter.Writer) {
				fmt.Fprintf(w, "created\t%d\nupdated\t%d\nskipped\t%d\n", len(resp.Created), len(resp.Updated), resp.Skipped)
				for _, t := range resp.Created {
					fmt.Fprintf(w, "  + %s\t%s\t%s\n", t.Id, t.ExternalId, t.Title)
				}
				for _, t := range resp.Updated {
					fmt.Fprintf(w, "  ~ %s\t%s\t%s\n", t.Id, t.ExternalId, t.Title)
				}
			})
		}),
	}
	cmd.Flags().StringVar(&repo, "repo", "", "the repository (owner/name; required)")
	cmd.Flags().StringArrayVar(&labels, "label", nil, "only issues with this label (repeatable: all of them)")
	return cmd
}

func auditCommand(g *globals) *cobra.Command {
	var (
		action   string
		failures bool
		limit    int32
	)
	cmd := &cobra.Command{
		Use:   "audit JOB_ID",
		Short: "Show what a job did, newest first: every side-effecting step and who took it",
		Example: `  thefold jobs audit 0b6f3c2e-8d1a-4f7e-a5c9-3e2d1b0a9f87
  thefold jobs audit 0b6f3c2e-8d1a-4f7e-a5c9-3e2d1b0a9f87 --failures
  thefold jobs audit 0b6f3c2e-8d1a-4f7e-a5c9-3e2d1b0a9f87 --action github_write -o json`,
		Args: exactArgs(1, "JOB_ID"),
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Agent().ListAuditLog(cmd.Context(), &agentv1.ListAuditLogRequest{JobId: args[0], Action: action, FailuresOnly: failures, PageSize: limit})
			if err != nil {
				return err
			}
			if len(resp.Entries) == 0 {
				// The log of a job that is not the caller's is empty, not NOT_FOUND: say
				// which it is.
				if _, err := c.Agent().GetJob(cmd.Context(), &agentv1.GetJobRequest{Id: args[0]}); err != nil {
					return err
				}
			}
			return g.print(protoList(resp.Entries), func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "TIME\tACTION\tACTOR\tDETAILS")
				for _, e := range resp.Entries {
					details := compactDetails(e.Details, 100)
					if !e.Success {
						details = strings.TrimSpace("FAILED: " + firstLine(e.Error, 60) + "  " + details)
					}
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\n", e.GetCreateTime().AsTime().Local().Format(time.DateTime), e.Action, e.Actor, details)
				}
			})
		}),
	}
	cmd.Flags().StringVar(&action, "action", "", "only this action, e.g. plan_created")
	cmd.Flags().BoolVar(&failures, "failures", false, "only the steps that failed")
	cmd.Flags().Int32Var(&limit, "limit", 100, "at most this many (1-500)")
	return cmd
}

// compactDetails is an audit entry's details on one line, key=value by key, cut at n
// characters.
func compactDetails(s *structpb.Struct, n int) string {
	fields := s.GetFields()
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		var v string
		switch x := fields[k].AsInterface().(type) {
		case string:
			v = x
			if v == "" || strings.ContainsAny(v, " \t\n\"=") {
				v = strconv.Quote(v)
			}
		default:
			b, _ := json.Marshal(x)
			v = string(b)
		}
		parts = append(parts, k+"="+v)
	}
	out := strings.Join(parts, " ")
	if utf8.RuneCountInString(out) > n {
		out = string([]rune(out)[:n]) + "…"
	}
	return out
}

func metricsCommand(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "metrics JOB_ID",
		Short: "Show a job's tokens, cost and time per phase",
		Example: `  thefold jobs metrics 0b6f3c2e-8d1a-4f7e-a5c9-3e2d1b0a9f87
  thefold jobs metrics 0b6f3c2e-8d1a-4f7e-a5c9-3e2d1b0a9f87 -o json | jq '.total.cost_micros'`,
		Args: exactArgs(1, "JOB_ID"),
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Agent().GetJobMetrics(cmd.Context(), &agentv1.GetJobMetricsRequest{Id: args[0]})
			if err != nil {
				return err
			}
			return g.print(resp, func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "PHASE\tCALLS\tINPUT\tOUTPUT\tCOST\tTIME\tMODELS")
				for _, p := range resp.Phases {
					u := p.GetUsage()
					fmt.Fprintf(w, "%s\t%d\t%d\t%d\t%s\t%s\t%s\n", enumName(p.Phase, "JOB_PHASE_"), u.GetCalls(), u.GetInputTokens(), u.GetOutputTokens(),
						dollars(u.GetCostMicros()), roundDuration(p.GetDuration().AsDuration()), strings.Join(p.Models, ", "))
				}
				t := resp.GetTotal()
				fmt.Fprintf(w, "total\t%d\t%d\t%d\t%s\t%s\t\n", t.GetCalls(), t.GetInputTokens(), t.GetOutputTokens(), dollars(t.GetCostMicros()),
					roundDuration(resp.GetTotalDuration().AsDuration()))
			})
		}),
	}
}

// roundDuration is d as precise as a person reads it.
func roundDuration(d time.Duration) time.Duration {
	if d >= time.Second {
		return d.Round(100 * time.Millisecond)
	}
	return d.Round(time.Millisecond)
}

func skillsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "skills", Short: "The skills TheFold adds to its prompts and checks its output with"}
	var (
		repo, phase, category string
		limit                 int32
		req                   *skillsv1.ListSkillsRequest
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List skills, highest priority first",
		Example: `  thefold skills list
  thefold skills list --repo local/demo --phase post_run -o json`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			req = &skillsv1.ListSkillsRequest{Repo: repo, PageSize: limit}
			if phase != "" {
				v, ok := skillsv1.SkillPhase_value["SKILL_PHASE_"+strings.ToUpper(phase)]
				if !ok || v == 0 {
					return usageError{fmt.Errorf("--phase %q: one of pre_run, inject, post_run", phase)}
				}
				req.Phase = skillsv1.SkillPhase(v)
			}
			if category != "" {
				v, ok := skillsv1.SkillCategory_value["SKILL_CATEGORY_"+strings.ToUpper(category)]
				if !ok || v == 0 {
					return usageError{fmt.Errorf("--category %q: one of general, framework, language, security, style, quality", category)}
				}
				req.Category = skillsv1.SkillCategory(v)
			}
			return nil
		},
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			resp, err := c.Skills().ListSkills(cmd.Context(), req)
			if err != nil {
				return err
			}
			return g.print(protoList(resp.Skills), func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "ID\tNAME\tPHASE\tCATEGORY\tSCOPE\tPRIORITY\tENABLED\tCONFIDENCE")
				for _, s := range resp.Skills {
					fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%.2f\n", s.Id, s.Name, enumName(s.Phase, "SKILL_PHASE_"), enumName(s.Category, "SKILL_CATEGORY_"),
						skillScope(s), s.Priority, yesNo(s.Enabled), s.Confidence)
				}
			})
		}),
	}
	list.Flags().StringVar(&repo, "repo", "", "the skills that apply to this repository (global ones and its own)")
	list.Flags().StringVar(&phase, "phase", "", "only pre_run, inject or post_run skills")
	list.Flags().StringVar(&category, "category", "", "only this category: general, framework, language, security, style, quality")
	list.Flags().Int32Var(&limit, "limit", 100, "at most this many (1-200)")
	get := &cobra.Command{
		Use:     "get SKILL_ID",
		Short:   "Show a skill: its routing, rules and prompt fragment",
		Example: "  thefold skills get 5d2c7a10-3e4f-4b6a-8c9d-1e2f3a4b5c6d -o yaml",
		Args:    exactArgs(1, "SKILL_ID"),
		RunE: g.withClient(func(cmd *cobra.Command, args []string, c *client.Client) error {
			resp, err := c.Skills().GetSkill(cmd.Context(), &skillsv1.GetSkillRequest{Id: args[0]})
			if err != nil {
				return err
			}
			return g.print(resp.Skill, func(w *tabwriter.Writer) { printSkill(w, resp.Skill) })
		}),
	}
	cmd.AddCommand(list, get)
	return cmd
}

func skillScope(s *skillsv1.Skill) string {
	if s.Scope == skillsv1.SkillScope_SKILL_SCOPE_REPO {
		return s.Repo
	}
	return enumName(s.Scope, "SKILL_SCOPE_")
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func printSkill(w io.Writer, s *skillsv1.Skill) {
	fmt.Fprintf(w, "id\t%s\nname\t%s\nphase\t%s\ncategory\t%s\nscope\t%s\npriority\t%d\nenabled\t%s\ntokens\t%d\n", s.Id, s.Name,
		enumName(s.Phase, "SKILL_PHASE_"), enumName(s.Category, "SKILL_CATEGORY_"), skillScope(s), s.Priority, yesNo(s.Enabled), s.Tokens)
	fmt.Fprintf(w, "confidence\t%.2f (%d succeeded, %d failed)\nversion\t%d\n", s.Confidence, s.SuccessCount, s.FailureCount, s.Version)
	if s.Description != "" {
		fmt.Fprintf(w, "description\t%s\n", firstLine(s.Description, 200))
	}
	r := s.GetRouting()
	for _, f := range []struct {
		name string
		v    []string
	}{{"keywords", r.GetKeywords()}, {"files", r.GetFileGlobs()}, {"languages", r.GetLanguages()}, {"repos", r.GetRepos()}, {"labels", r.GetLabels()}} {
		if len(f.v) > 0 {
			fmt.Fprintf(w, "routing %s\t%s\n", f.name, strings.Join(f.v, ", "))
		}
	}
	for _, rule := range s.Rules {
		fmt.Fprintf(w, "rule %s\t%s %s\n", rule.Id, enumName(rule.Kind, "SKILL_RULE_KIND_"), rule.Pattern)
	}
	if s.PromptFragment != "" {
		fmt.Fprintf(w, "prompt\t%s\n", strings.ReplaceAll(strings.TrimSpace(s.PromptFragment), "\n", "\n\t"))
	}
}

func modelsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "models", Short: "The models TheFold may call (administrators)"}
	var (
		provider, tag string
		tier          int32
		enabled       bool
	)
	list := &cobra.Command{
		Use:   "list",
		Short: "List models by provider and tier, with their prices and context window",
		Example: `  thefold models list
  thefold models list --provider anthropic --enabled
  thefold models list --tag coding -o json | jq -r '.[].name'`,
		Args: cobra.NoArgs,
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			ctx := cmd.Context()
			// A model names its provider by id: the providers give the names.
			names := map[string]string{}
			for tok := ""; ; {
				resp, err := c.Models().ListProviders(ctx, &aiv1.ListProvidersRequest{PageSize: 200, PageToken: tok})
				if err != nil {
					return err
				}
				for _, p := range resp.Providers {
					names[p.Id] = p.Name
				}
				if tok = resp.NextPageToken; tok == "" {
					break
				}
			}
			req := &aiv1.ListModelsRequest{Tag: tag, Tier: tier, EnabledOnly: enabled, PageSize: 200}
			if provider != "" {
				for id, n := range names {
					if n == provider {
						req.ProviderId = id
					}
				}
				if req.ProviderId == "" {
					return usageError{fmt.Errorf("--provider %q: no such provider (%s)", provider, strings.Join(sortedValues(names), ", "))}
				}
			}
			var models []*aiv1.Model
			for {
				resp, err := c.Models().ListModels(ctx, req)
				if err != nil {
					return err
				}
				models = append(models, resp.Models...)
				if req.PageToken = resp.NextPageToken; req.PageToken == "" {
					break
				}
			}
			return g.print(protoList(models), func(w *tabwriter.Writer) {
				fmt.Fprintln(w, "ID\tPROVIDER\tMODEL\tTIER\tINPUT $/MTOK\tOUTPUT $/MTOK\tCONTEXT\tENABLED")
				for _, m := range models {
					fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%.2f\t%.2f\t%d\t%s\n", m.Id, orElse(names[m.ProviderId], m.ProviderId), m.Name, m.Tier,
						float64(m.InputMicrosPerMtok)/1e6, float64(m.OutputMicrosPerMtok)/1e6, m.ContextWindow, yesNo(m.Enabled))
				}
			})
		}),
	}
	list.Flags().StringVar(&provider, "provider", "", "only this provider's models (its name, e.g. anthropic)")
	list.Flags().StringVar(&tag, "tag", "", "only models with this tag, e.g. coding")
	list.Flags().Int32Var(&tier, "tier", 0, "only this tier (1 cheapest – 5 most capable)")
	list.Flags().BoolVar(&enabled, "enabled", false, "only models that can be selected")
	cmd.AddCommand(list)
	return cmd
}

// orElse is a, else b.
func orElse(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

func sortedValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	slices.Sort(out)
	return out
}

// usageGroups are --by's values: UsageGroupBy's, in lower case.
var usageGroups = func() []string {
	var out []string
	values := aiv1.UsageGroupBy(0).Descriptor().Values()
	for i := 1; i < values.Len(); i++ {
		out = append(out, enumName(aiv1.UsageGroupBy(values.Get(i).Number()), "USAGE_GROUP_BY_"))
	}
	return out
}()

func usageCommand(g *globals) *cobra.Command {
	var (
		by              []string
		since           string
		from, to        string
		repo, job, task string
		req             *aiv1.GetUsageRequest
	)
	cmd := &cobra.Command{
		Use:   "usage",
		Short: "Show what the models cost you: calls, tokens and dollars, grouped",
		Long: `usage sums your usage ledger (an administrator's: everyone's) over a time range, with
a total. --by groups it, a column per grouping in the order given, by any of:
  ` + strings.Join(usageGroups, ", ") + `
--since takes a duration (90m, 24h, 7d); --from and --to take UTC days (2026-11-01, both
included) or RFC 3339 times. Without them: all time.`,
		Example: `  thefold usage --since 7d --by day
  thefold usage --by model --by phase --repo local/demo
  thefold usage --from 2026-11-01 --to 2026-11-30 --by job -o json`,
		Args: cobra.NoArgs,
		PreRunE: func(*cobra.Command, []string) error {
			req = &aiv1.GetUsageRequest{Repo: repo, JobId: job, TaskId: task}
			for _, b := range by {
				v, ok := aiv1.UsageGroupBy_value["USAGE_GROUP_BY_"+strings.ToUpper(strings.TrimSpace(b))]
				if !ok || v == 0 {
					hint := ""
					if b == "repo" {
						hint = " (usage is not grouped by repository: filter with --repo)"
					}
					return usageError{fmt.Errorf("--by %q: one of %s%s", b, strings.Join(usageGroups, ", "), hint)}
				}
				req.GroupBy = append(req.GroupBy, aiv1.UsageGroupBy(v))
			}
			start, end, err := usageRange(since, from, to, time.Now())
			if err != nil {
				return usageError{err}
			}
			if !start.IsZero() {
				req.StartTime = timestamppb.New(start)
			}
			if !end.IsZero() {
				req.EndTime = timestamppb.New(end)
			}
			return nil
		},
		RunE: g.withClient(func(cmd *cobra.Command, _ []string, c *client.Client) error {
			resp, err := c.Models().GetUsage(cmd.Context(), req)
			if err != nil {
				return err
			}
			return g.print(resp, func(w *tabwriter.Writer) { printUsage(w, req.GroupBy, resp) })
		}),
	}
	cmd.Flags().StringSliceVar(&by, "by", nil, "group by "+strings.Join(usageGroups, ", ")+" (repeatable or comma-separated)")
	cmd.Flags().StringVar(&since, "since", "", "only the last DURATION (90m, 24h, 7d)")
	cmd.Flags().StringVar(&from, "from", "", "from this UTC day (2026-11-01) or RFC 3339 time")
	cmd.Flags().StringVar(&to, "to", "", "up to this UTC day (included) or RFC 3339 time (excluded)")
	cmd.Flags().StringVar(&repo, "repo", "", "only this repository's usage (owner/name)")
	cmd.Flags().StringVar(&job, "job", "", "only this job's usage")
	cmd.Flags().StringVar(&task, "task", "", "only this task's usage")
	return cmd
}

// usageRange is the time range of --since or --from/--to (zero times: unbounded).
func usageRange(since, from, to string, now time.Time) (start, end time.Time, err error) {
	if since != "" {
		if from != "" || to != "" {
			return start, end, errors.New("give --since, or --from and --to, not both")
		}
		d, err := parseSince(since)
		if err != nil {
			return start, end, err
		}
		return now.Add(-d), end, nil
	}
	parse := func(flag, v string, endOfDay bool) (time.Time, error) {
		if v == "" {
			return time.Time{}, nil
		}
		if t, err := time.Parse(time.DateOnly, v); err == nil {
			if endOfDay {
				t = t.AddDate(0, 0, 1)
			}
			return t, nil
		}
		if t, err := time.Parse(time.RFC3339, v); err == nil {
			return t, nil
		}
		return time.Time{}, fmt.Errorf("--%s %q: want a day (2026-11-01) or an RFC 3339 time", flag, v)
	}
	if start, err = parse("from", from, false); err != nil {
		return start, end, err
	}
	if end, err = parse("to", to, true); err != nil {
		return start, end, err
	}
	if !start.IsZero() && !end.IsZero() && !end.After(start) {
		return start, end, fmt.Errorf("--to %s is not after --from %s", to, from)
	}
	return start, end, nil
}

// parseSince is a Go duration, or a number of days ("7d").
func parseSince(s string) (time.Duration, error) {
	var (
		d   time.Duration
		err error
	)
	if n, ok := strings.CutSuffix(s, "d"); ok {
		var days int
		days, err = strconv.Atoi(n)
		d = time.Duration(days) * 24 * time.Hour
	} else {
		d, err = time.ParseDuration(s)
	}
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("--since %q: want a positive duration (90m, 24h, 7d)", s)
	}
	return d, nil
}

// printUsage writes a column for each grouping, then the sums, then the total.
func printUsage(w io.Writer, groups []aiv1.UsageGroupBy, resp *aiv1.GetUsageResponse) {
	var head []string
	for _, gb := range groups {
		head = append(head, strings.ToUpper(enumName(gb, "USAGE_GROUP_BY_")))
	}
	fmt.Fprintln(w, strings.Join(append(head, "CALLS", "INPUT", "OUTPUT", "COST"), "\t"))
	line := func(cells []string, r *aiv1.UsageRow) {
		fmt.Fprintln(w, strings.Join(append(cells, strconv.FormatInt(r.GetCalls(), 10), strconv.FormatInt(r.GetInputTokens(), 10),
			strconv.FormatInt(r.GetOutputTokens(), 10), dollars(r.GetCostMicros())), "\t"))
	}
	if len(groups) > 0 {
		for _, r := range resp.Rows {
			cells := make([]string, len(groups))
			for i, gb := range groups {
				cells[i] = usageCell(gb, r)
			}
			line(cells, r)
		}
	}
	total := make([]string, len(groups))
	if len(total) > 0 {
		total[0] = "total"
	}
	line(total, resp.GetTotal())
}

func usageCell(gb aiv1.UsageGroupBy, r *aiv1.UsageRow) string {
	v := ""
	switch gb {
	case aiv1.UsageGroupBy_USAGE_GROUP_BY_MODEL:
		v = r.Model
		if r.Provider != "" && v != "" {
			v = r.Provider + "/" + v
		}
	case aiv1.UsageGroupBy_USAGE_GROUP_BY_DAY:
		v = r.Day
	case aiv1.UsageGroupBy_USAGE_GROUP_BY_PHASE:
		v = enumName(r.Phase, "CALL_PHASE_")
	case aiv1.UsageGroupBy_USAGE_GROUP_BY_JOB:
		v = r.JobId
	case aiv1.UsageGroupBy_USAGE_GROUP_BY_TASK:
		v = r.TaskId
	case aiv1.UsageGroupBy_USAGE_GROUP_BY_BUILD:
		v = r.BuildId
	case aiv1.UsageGroupBy_USAGE_GROUP_BY_PROJECT:
		v = r.ProjectId
	case aiv1.UsageGroupBy_USAGE_GROUP_BY_RPC:
		v = r.Rpc
	case aiv1.UsageGroupBy_USAGE_GROUP_BY_ROLE:
		if r.Role != aiv1.SubAgentRole_SUB_AGENT_ROLE_UNSPECIFIED {
			v = enumName(r.Role, "SUB_AGENT_ROLE_")
		}
	case aiv1.UsageGroupBy_USAGE_GROUP_BY_CONVERSATION:
		v = r.ConversationId
	}
	return orElse(v, "-")
}
